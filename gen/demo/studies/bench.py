"""The foundation benchmark (``python -m nnrtl.gen.bench --only demo``): the tool itself
on the demo engine -- Verilog generation time and size against the number of lanes,
Verilator build time (cold and cached), simulated cycles per second of a cocotb end-to-end
run, and Yosys resources on every board."""

import contextlib
import os
import tempfile
import time
from pathlib import Path

from ....boards import BOARDS
from ....hw.demo import DemoConfig, DemoEngine
from ...engines import SimRequest
from ...progress import progress

__all__ = ["bench_foundation", "markdown_foundation"]


@contextlib.contextmanager
def _build_cache(directory):
    """Verilator builds go to ``directory`` inside the block; the caller's cache after."""
    saved = os.environ.get("NNRTL_CACHE_DIR")
    os.environ["NNRTL_CACHE_DIR"] = str(directory)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["NNRTL_CACHE_DIR"]
        else:
            os.environ["NNRTL_CACHE_DIR"] = saved


def bench_foundation():
    from ...emit import generate
    from ...synth import synthesize
    from ....sim.runner import to_verilog
    from ..engine import ENGINE, simulate

    result = {"generation": [], "simulation": [], "synthesis": []}
    for lanes in (1, 16, 64, 256, 512):
        start = time.monotonic()
        text = to_verilog(DemoEngine(DemoConfig(lanes=lanes)), "nnrtl_demo")
        seconds = time.monotonic() - start
        result["generation"].append({"lanes": lanes, "seconds": round(seconds, 3),
                                     "verilog_bytes": len(text)})
        progress(f"generation: {lanes} lanes, {seconds:.2f} s, {len(text)} bytes")

    # A cache of its own, so that the first build is cold; the caller's is restored.
    with tempfile.TemporaryDirectory() as cache, _build_cache(cache):
        for lanes in (8, 64):
            request = SimRequest(DemoConfig(lanes=lanes), BOARDS["vu9p"], seed=1,
                                 backpressure="none", steps=100, log=progress)
            cold, cached = (simulate(request, max_beats=64) for _ in ("cold", "cached"))
            result["simulation"].append({
                "lanes": lanes,
                "build_seconds_cold": cold["build_seconds"],
                "build_seconds_cached": cached["build_seconds"],
                "cycles": cached["total_cycles"],
                "run_seconds": cached["run_seconds"],
                "cycles_per_second": round(cached["total_cycles"] / cached["run_seconds"], 1),
                "bit_exact": cached["bit_exact"],
            })
            progress(f"simulation: {result['simulation'][-1]}")

    with tempfile.TemporaryDirectory() as scratch:
        for name, platform_class in BOARDS.items():
            directory = Path(scratch) / name
            generate(ENGINE, DemoConfig(), platform_class, directory)
            report = synthesize(directory, log=progress)
            result["synthesis"].append({key: report[key] for key in (
                "board", "family", "lut", "ff", "dsp", "bram36", "uram", "logic_levels",
                "seconds")})
    return result


def markdown_foundation(result):
    lines = ["# Foundation benchmark (demo engine)", "",
             "| lanes | generation s | Verilog bytes |", "|---:|---:|---:|"]
    lines += [f"| {r['lanes']} | {r['seconds']} | {r['verilog_bytes']} |"
              for r in result["generation"]]
    lines += ["", "| lanes | Verilator build s (cold) | build s (cached) | cycles | "
              "cycles/s (cocotb end to end) | bit exact |", "|---:|---:|---:|---:|:-:|:-:|"]
    lines += [f"| {r['lanes']} | {r['build_seconds_cold']} | {r['build_seconds_cached']} | "
              f"{r['cycles']} | {r['cycles_per_second']} | {r['bit_exact']} |"
              for r in result["simulation"]]
    lines += ["", "| board | family | LUT | FF | DSP | BRAM36 | URAM | logic levels | "
              "Yosys s |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['board']} | {r['family']} | {r['lut']} | {r['ff']} | {r['dsp']} | "
              f"{r['bram36']} | {r['uram']} | {r['logic_levels']} | {r['seconds']} |"
              for r in result["synthesis"]]
    return "\n".join(lines) + "\n"

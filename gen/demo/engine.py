"""The demo engine (a MAC array behind an AXI4-Lite register file) registered with the
platform: the smallest complete example of the engine hooks (:mod:`nnrtl.gen.engines`)."""

import dataclasses

from ...hw.demo import DemoConfig, DemoEngine
from ..engines import Engine
from .space import draw

__all__ = ["ENGINE", "simulate", "predict", "breakdown"]

#: Frames of a simulation when the request names no ``steps``, and the longest frame.
DEFAULT_FRAMES = 12
MAX_BEATS = 24


def predict(config, workload):
    """The performance model: ``workload`` holds ``frames``, the frame lengths in beats
    (one beat: one product per lane)."""
    lengths = list(workload["frames"])
    return {"cycles": config.model_cycles(lengths),
            "useful_macs": config.lanes * sum(lengths)}


def simulate(request, *, max_beats=MAX_BEATS):
    """One randomized run of :mod:`nnrtl.sim.tb.demo.engine`: ``request.steps`` frames (default
    12) of 1 to ``max_beats`` beats."""
    from ...sim.runner import simulate as run

    config = request.config
    params = {
        "config": dataclasses.asdict(config),
        "frames": DEFAULT_FRAMES if request.steps is None else request.steps,
        "max_beats": max_beats,
        "source_pauses": request.backpressure,
        "sink_pauses": request.backpressure,
    }
    result = run(ENGINE.verilog(config), test_module="nnrtl.sim.tb.demo.engine", params=params,
                 seed=request.seed, waves=request.waves, name="nnrtl_demo", log=request.log)
    return result


def breakdown(result):
    """Where a run's busy cycles went: beats multiplied (one per cycle), results waiting
    for the output stream (``stall_cycles``), and the rest (gaps in the input stream and
    the result register); ``[]`` for a result without counters."""
    if "beats" not in result or "cycles" not in result:
        return []
    rows = [("computing (beats)", result["beats"]),
            ("output backpressure", result["stall_cycles"])]
    return rows + [("waiting for inputs, result register",
                    result["cycles"] - sum(cycles for _, cycles in rows))]


def _bench(out):
    from .studies.bench import bench_foundation, markdown_foundation
    result = bench_foundation()
    return result, markdown_foundation(result)


ENGINE = Engine(
    name="demo",
    summary="a MAC array behind an AXI4-Lite register file (the smallest example)",
    config_class=DemoConfig,
    top=DemoEngine,
    resources=lambda config, family: {"dsp": config.dsp},
    predict=predict,
    simulate=simulate,
    bench=_bench,
    breakdown=breakdown,
    draw=draw,
    steps_help="frames of operand pairs to run (default 12)",
)

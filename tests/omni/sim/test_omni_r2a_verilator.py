"""R2AScheduler under Verilator (bench: nnrtl.sim.tb.omni.r2a): one small build, random
graphs (static and dynamic) under the four backpressure patterns on the issue ports.
Every pattern: each task issued once, after its dependencies, to a channel allowed to
run it, finished within the cycle budget; without backpressure (``none``) the issue order,
the cycle count and the counters equal the cycle model's."""

import random

import pytest

from nnrtl.hw.omni.r2a import R2AConfig, R2AScheduler
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.omni.r2a import SHAPES, graph_spec, random_graph

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

CONFIG = R2AConfig(channels=4, pes_per_channel=4, swing_channels=2, switch_cycles=3,
                   max_tasks=16, length_bits=8, counter_bits=24)


def graphs(seed):
    rng = random.Random(seed)
    specs = []
    for number, shape in enumerate(SHAPES):
        tasks = random_graph(rng, CONFIG.max_tasks - number, pes=CONFIG.pes_per_channel,
                             shape=shape, max_length=63)
        specs.append(graph_spec(tasks, rng.randint(1, CONFIG.channels - 1), number % 2 == 1))
    return specs


def test_scheduler_under_backpressure():
    specs = graphs(7)
    result = simulate(R2AScheduler(CONFIG), test_module="nnrtl.sim.tb.omni.r2a",
                      name="omni_r2a", seed=7,
                      params={"config": CONFIG.__dict__, "graphs": specs,
                              "patterns": list(PATTERNS)})
    assert result["failures"] == []
    assert set(result["runs"]) == set(PATTERNS)
    for run in result["runs"]["none"]:
        assert run["issues_match"] and run["counters"] == run["model_counters"]
    for pattern in PATTERNS:
        for run in result["runs"][pattern]:
            assert run["cycles"] < run["budget"], pattern
    assert any(run["counters"]["swings"] for run in result["runs"]["none"])

# amaranth: UnusedElaboratable=no
"""R2AScheduler (hw/omni/r2a.py) in the Amaranth simulator: issue order, cycle count and
counters equal the cycle model (gen/omni/r2a.py) on random graphs of odd sizes, static
and dynamic, with a test-side channel model (sim/tb/omni/r2a.py); no deadlock within the
cycle budget; configuration errors."""

import random

import pytest

from nnrtl.gen.omni.accounting import Workload
from nnrtl.gen.omni.r2a import schedule, static_split
from nnrtl.gen.omni.workload import Task, training_graph
from nnrtl.hw.omni.r2a import R2AConfig, R2AScheduler
from nnrtl.sim.tb.omni.r2a import SHAPES, amaranth_run, model_counters, random_graph

CONFIGS = [
    R2AConfig(channels=3, pes_per_channel=4, swing_channels=2, switch_cycles=3,
              max_tasks=16, length_bits=8, counter_bits=16),
    R2AConfig(channels=5, pes_per_channel=3, swing_channels=3, switch_cycles=0,
              max_tasks=21, length_bits=7, counter_bits=20),
    R2AConfig(channels=2, pes_per_channel=5, swing_channels=1, switch_cycles=8,
              max_tasks=9, length_bits=6, counter_bits=16),
]


def check_against_model(config, tasks, ew_channels, dynamic):
    bench, counters = amaranth_run(config, tasks, ew_channels, dynamic)
    assert not bench.failures, bench.failures[:5]
    model = schedule(tasks, config, ew_channels=ew_channels, dynamic=dynamic, log=True)
    assert bench.issues == list(model.issues), "issue order differs from the model"
    assert counters == model_counters(model)
    return model


@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_random_graphs_match_model(index):
    config = CONFIGS[index]
    rng = random.Random(100 + index)
    swung = 0
    for number, shape in enumerate(SHAPES):
        count = config.max_tasks - number % 3   # full and odd-sized tables
        tasks = random_graph(rng, count, pes=config.pes_per_channel, shape=shape,
                             max_length=(1 << config.length_bits) - 1)
        ew_channels = rng.randint(1, config.channels - 1)
        for dynamic in (False, True):
            model = check_against_model(config, tasks, ew_channels, dynamic)
            swung += model.swings
    assert swung > 0


def test_swing_and_return_in_rtl():
    # Hand-worked in tests/omni/gen/test_omni_r2a_model.py: ch1 swings to MatMul, then returns.
    config = R2AConfig(channels=2, pes_per_channel=4, swing_channels=1, switch_cycles=3,
                       max_tasks=4, length_bits=8, counter_bits=16)
    tasks = [Task(id=0, kind="matmul", ops=40), Task(id=1, kind="matmul", ops=40),
             Task(id=2, kind="ew", ops=4, deps=(1,))]
    model = check_against_model(config, tasks, 1, True)
    assert model.issues == ((0, 0, 0), (1, 1, 1), (16, 1, 2)) and model.cycles == 22


@pytest.mark.parametrize("shape", [
    Workload(input_size=3, hidden_size=4, layers=2, length=1, batch=2),
    Workload(input_size=5, hidden_size=4, layers=1, length=2, batch=3)])
def test_lstm_training_graph_matches_model(shape):
    # A whole (tiny) training iteration: FW, BP with MS1, activations in the EW lengths.
    config = R2AConfig(channels=3, pes_per_channel=4, swing_channels=2, switch_cycles=8,
                       max_tasks=26, length_bits=8, counter_bits=16)
    tasks = training_graph(shape, tiles=2, ms1=True)
    assert len(tasks) == 26 and any(task.activations for task in tasks)
    for dynamic in (False, True):
        check_against_model(config, tasks, static_split(tasks, config), dynamic)


def test_empty_table_finishes():
    config = CONFIGS[2]
    bench, counters = amaranth_run(config, [], 1, True)
    assert not bench.failures and counters["cycles"] == 0


def test_errors():
    with pytest.raises(TypeError, match=r"^channels must be a positive integer, not 0$"):
        R2AConfig(channels=0)
    with pytest.raises(ValueError, match=r"^channels \(1\) must be at least 2: one MatMul "
                                         r"and one EW group channel$"):
        R2AConfig(channels=1)
    with pytest.raises(ValueError, match=r"^swing_channels \(5\) cannot exceed channels "
                                         r"\(4\)$"):
        R2AConfig(channels=4, swing_channels=5)
    with pytest.raises(TypeError, match=r"^switch_cycles must be a non-negative integer, "
                                        r"not -1$"):
        R2AConfig(switch_cycles=-1)
    with pytest.raises(TypeError, match=r"^config must be an R2AConfig, not 3$"):
        R2AScheduler(3)


def test_config_properties():
    config = R2AConfig(pes_per_channel=32, switch_cycles=8, max_tasks=64)
    assert config.task_bits == 6 and config.issue_overhead == 2
    assert config.duration(33, False) == 2 and config.duration(32, True) == 9


@pytest.mark.slow
def test_many_random_graphs_match_model():
    rng = random.Random(2026)
    for number in range(24):
        channels = rng.randint(2, 8)
        config = R2AConfig(channels=channels, pes_per_channel=rng.choice((1, 2, 7, 32)),
                           swing_channels=rng.randint(0, channels),
                           switch_cycles=rng.randint(0, 9), max_tasks=rng.randint(8, 40),
                           length_bits=9, counter_bits=24)
        tasks = random_graph(rng, rng.randint(1, config.max_tasks), pes=config.pes_per_channel,
                             shape=SHAPES[number % len(SHAPES)], max_length=511)
        check_against_model(config, tasks, rng.randint(1, channels - 1), number % 2 == 1)

"""The RTL measurement of dynamic against static R2A allocation
(nnrtl.gen.omni.studies.r2a_rtl): the scaled shapes, the splits, the bounds (each a lower
bound of the model's cycles), the markdown; one shape under Verilator (slow): the RTL's
cycles are the model's for every allocation, static never swings, dynamic is faster."""

import numpy as np
import pytest

from nnrtl.gen.omni.accounting import TABLE_I
from nnrtl.gen.omni.perf import step_cycles
from nnrtl.gen.omni.studies import r2a_rtl
from nnrtl.gen.omni.top_passes import StepGraph
from nnrtl.hw.omni.top_config import OmniConfig


def test_scaled_shapes():
    assert r2a_rtl.rtl_shape(TABLE_I["PTB"]) == OmniConfig(
        input_size=16, hidden_size=16, layers=4, seq_len=2, batch=1, channels=4,
        pes_per_channel=4, swing_channels=2, max_tasks=64, hbm_ports=1)
    assert r2a_rtl.rtl_shape(TABLE_I["IMDB"]).seq_len == 3          # 100 / 36
    assert r2a_rtl.rtl_shape(TABLE_I["BABI"]).layers == 5
    assert r2a_rtl.PAPER_RATIO == pytest.approx(1.464, abs=1e-3)


def test_bounds_bound_the_model():
    top = r2a_rtl.rtl_shape(TABLE_I["TREC-10"])
    own, trec = r2a_rtl._splits(top)
    assert 1 <= own <= 3 and trec == own            # TREC-10 is its own Static-Arch
    kept = np.ones((top.layers, top.seq_len), bool)
    graphs = [StepGraph.of_shape(top, phase, kept, False) for phase in ("fw", "bp")]
    path, work = r2a_rtl._bounds(top, graphs)
    assert 0 < path and 0 < work
    for dynamic in (True, False):
        cycles = sum(step_cycles(top, g.tasks, dynamic=dynamic, ew_channels=own)[0]
                     for g in graphs)
        assert cycles >= max(path, work)
    static = [step_cycles(top, g.tasks, dynamic=False, ew_channels=own) for g in graphs]
    assert sum(swings for _, swings in static) == 0


def test_markdown_rows():
    run = {"ew_channels": 1, "cycles": 100, "model_cycles": 100, "utilization": 0.25,
           "busy_matmul": 1, "busy_ew": 1, "swings": 3, "returns": 1}
    result = {"shape": "PTB", "config": {"layers": 4, "seq_len": 2, "channels": 4},
              "critical_path": 50,
              "work_bound": 80, "dynamic": run,
              "static": dict(run, cycles=120, model_cycles=120, swings=0),
              "static_trec10": dict(run, cycles=130, model_cycles=131, swings=0),
              "gain": 1.2, "gain_trec10": 1.3}
    text = r2a_rtl.markdown([result])
    assert "| PTB | 4 x 2 | 1 / 1 | 25.0% (100) | 25.0% (120) | 25.0% (130) | 1.200x | " \
           "1.300x | 3 | 50 | 80 | 1 | no |" in text     # 1 MatMul channel-cycle / 3
    assert "ratio 1.46x" in text


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_trec10_on_the_rtl():
    result = r2a_rtl.measure("TREC-10")
    for label in ("dynamic", "static", "static_trec10"):
        run = result[label]
        assert run["cycles"] == run["model_cycles"]
        assert run["cycles"] >= max(result["critical_path"], result["work_bound"])
        assert run["utilization"] == result["useful_macs"] / (16 * run["cycles"])
    assert result["static"]["swings"] == 0 and result["dynamic"]["swings"] > 0
    assert result["gain"] > 1

"""η-LSTM top under Verilator (bench: nnrtl.sim.tb.omni.top), through ``nnrtl sim omni``.

The small preset's build takes about 5.5 minutes on 2 cores, more than the fast suite
affords: every run is a slow test. Each runs the top's task graph (the cells' FW and BP
programs cut into R2A tasks), dispatched by the RTL's scheduler, every result beat
bit-exact against the golden channel model, then one cell's MS1 record through the DMA
and back. Under ``none`` the top's ``cycles`` counter must equal the exact cycle model
(:func:`nnrtl.gen.omni.perf.top_schedule`) and its per-PE-mode counters the model's
split (:func:`nnrtl.gen.omni.perf.top_mode_busy`).
"""

import dataclasses

import pytest

from cli_result import sim_json_line
from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import SimRequest
from nnrtl.gen.omni.engine import SMALL, simulate
from nnrtl.hw.omni.top import MODE_COUNTERS
from nnrtl.sim.patterns import PATTERNS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

#: 4 channels of 8 PEs (two swing), a 2-layer LSTM of input 9 and hidden 11 over 3
#: timestamps (24 tasks; rounds of 8 lanes with tails).
BIGGER = dataclasses.replace(SMALL, input_size=9, hidden_size=11, seq_len=3, channels=4,
                             pes_per_channel=8, swing_channels=2, max_tasks=24)


def check_counters(result, config, pattern):
    """The run's counters: the busy split, and under ``none`` the models' values."""
    busy = result["busy_matmul"] + result["busy_ew"]
    assert busy + result["stall_cycles"] == config.channels * result["cycles"]
    modes = {name: result[name] for name in MODE_COUNTERS.values()}
    assert all(value > 0 for value in modes.values())
    assert sum(modes.values()) <= busy
    if pattern == "none":
        assert result["cycles"] == result["model_cycles"]
        assert modes == {name: result[f"model_{name}"] for name in modes}
        assert sum(modes.values()) == busy
    else:
        assert result["cycles"] >= result["model_cycles"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_small_preset_bit_exact_under_every_pattern(capsys, pattern):
    code = main(["sim", "omni", "--preset", "small", "--board", "vcu128",
                 "--backpressure", pattern])
    result = sim_json_line(capsys, code)
    assert result["bit_exact"] is True and result["mismatches"] == 0
    assert result["tasks"] == 16 and result["failures"] == []
    check_counters(result, SMALL, pattern)
    # the DMA round trip: six P1 vectors of H values, a bitmap byte per vector (H = 5)
    assert result["values_kept"] + result["values_pruned"] == 6 * SMALL.hidden_size
    assert result["bytes_written"] == 6 + 4 * result["values_kept"] == result["bytes_read"]


@pytest.mark.parametrize("pattern", ["none", "bursty"])
def test_bigger_top_with_swings(pattern):
    result = simulate(SimRequest(config=BIGGER, board=get_board("vcu128"), seed=4,
                                 backpressure=pattern))
    assert result["bit_exact"] is True and result["mismatches"] == 0
    assert result["tasks"] == 24 and result["failures"] == []
    check_counters(result, BIGGER, pattern)
    assert result["values_kept"] + result["values_pruned"] == 6 * 11
    assert result["swings"] > 0


@pytest.mark.parametrize("pattern", ["none", "bursty"])
def test_three_hbm_ports_each_round_trip_bit_exact(pattern):
    """The small top with three DMAs, each on its own AxiRam: the cell's P1 record
    through every port, bit-exact against the golden DMA; the counters summed over the
    ports (the same record on each: three bitmaps of 6 bytes and the survivors)."""
    config = dataclasses.replace(SMALL, hbm_ports=3)
    result = simulate(SimRequest(config=config, board=get_board("vcu128"), seed=2,
                                 backpressure=pattern))
    assert result["bit_exact"] is True and result["failures"] == []
    check_counters(result, config, pattern)
    assert result["values_kept"] + result["values_pruned"] == 3 * 6 * SMALL.hidden_size
    assert result["values_kept"] % 3 == 0
    assert result["bytes_written"] == 3 * 6 + 4 * result["values_kept"] == \
        result["bytes_read"]

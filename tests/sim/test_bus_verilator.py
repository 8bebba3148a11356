"""nnrtl.hw.bus under Verilator, driven by cocotbext-axi (benches in nnrtl.sim.tb.bus_*)."""

import pytest

from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.bus_tops import RegisterTestTop, StreamLoopbackTop


#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)


CYCLES_INIT = (1 << 32) - 2000


def test_register_file():
    top = RegisterTestTop(cycles_init=CYCLES_INIT)
    result = simulate(top, test_module="nnrtl.sim.tb.bus_regs", name="bus_regs_top", seed=1,
                      params={"regmap": top.regmap.as_dict(), "cycles_init": CYCLES_INIT,
                              "batches": 6, "batch_size": 8,
                              "pauses": ["none", "cycle", "random"]})
    assert result["regs_writes"] == 3 * 6 * 8
    assert result["regs_reads"] > result["regs_writes"]
    assert result["regs_errors"] > 0
    assert result["regs_wide_reads"] > 100
    assert result["regs_starts"] >= 3


@pytest.mark.parametrize("data_width, user_width, registered", [
    (8, 0, False),
    (32, 3, True),
])
def test_stream_loop_back(data_width, user_width, registered):
    top = StreamLoopbackTop(data_width, user_width=user_width, registered=registered)
    patterns = [["none", "none"], ["cycle", "none"], ["none", "cycle"],
                ["random", "random"], ["none", "random"]]
    result = simulate(top, test_module="nnrtl.sim.tb.bus_stream", seed=2,
                      name=f"bus_stream_{data_width}_{user_width}_{int(registered)}",
                      params={"data_width": data_width, "user_width": user_width,
                              "frames": 20, "max_beats": 12, "patterns": patterns})
    assert result["stream_frames"] == 20 * len(patterns)
    assert result["stream_beats"] >= result["stream_frames"]

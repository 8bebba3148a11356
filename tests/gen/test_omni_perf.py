# amaranth: UnusedElaboratable=no
"""gen/omni/perf.py's model of the η-LSTM top (``top_schedule``, the bench's
``model_cycles``) against the RTL: OmniTop in the Amaranth simulator, served by the bench's
scratchpad with no gaps or stalls; the model's cycles must equal the RTL's ``cycles``
counter, and its swings the ``swings`` counter."""

import dataclasses

import pytest

from nnrtl.gen.omni.engine import SMALL
from nnrtl.gen.omni.perf import top_schedule
from nnrtl.hw.omni.top_config import OmniConfig
from nnrtl.sim.tb.omni_top import check_in_amaranth

#: Small tops of odd sizes: lanes with tails (H not a multiple of the PEs), 2- and
#: 3-stage adders, two layers (layer 1's input is H), and swing channels.
CONFIGS = {
    "2ch-2pe-I1-H3-2steps": OmniConfig(input_size=1, hidden_size=3, layers=1, seq_len=2,
                                       channels=2, pes_per_channel=2, swing_channels=1,
                                       adder_stages=2),
    "3ch-3pe-I2-H5-2layers": OmniConfig(input_size=2, hidden_size=5, layers=2, seq_len=1,
                                        channels=3, pes_per_channel=3, swing_channels=2,
                                        adder_stages=3),
}


def _rtl(config, seed):
    state = check_in_amaranth(config, seed=seed, timeout=50000)
    assert not state["failures"] and not state["mismatches"], (state["failures"],
                                                                state["mismatches"][:2])
    return state["counters"]


@pytest.mark.parametrize("name", CONFIGS)
def test_model_cycles_equal_the_rtl(name):
    config = CONFIGS[name]
    counters = _rtl(config, seed=5)
    model = top_schedule(config)
    assert (model.cycles, model.swings, model.returns) == (
        counters["cycles"], counters["swings"], counters["returns"])


def test_swings_happen_in_a_checked_config():
    """The swing path is exercised: the 3-channel config's R2A issues tasks out of group."""
    assert top_schedule(CONFIGS["3ch-3pe-I2-H5-2layers"]).swings > 0


@pytest.mark.slow
@pytest.mark.parametrize("config", [
    SMALL,
    dataclasses.replace(SMALL, input_size=9, hidden_size=11, seq_len=3, channels=4,
                        pes_per_channel=8, swing_channels=2, max_tasks=24),
], ids=["small-preset", "4ch-8pe-I9-H11-3steps"])
def test_model_cycles_equal_the_rtl_full(config):
    counters = _rtl(config, seed=1)
    assert top_schedule(config).cycles == counters["cycles"]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_model_cycles_equal_verilator_on_small_preset():
    """The small preset under Verilator (the engine's ``simulate``, about 2 to 5.5 minutes
    of build): its ``model_cycles`` is the RTL's ``cycles`` counter."""
    from nnrtl.boards import get_board
    from nnrtl.gen.engines import SimRequest
    from nnrtl.gen.omni.engine import simulate

    result = simulate(SimRequest(config=SMALL, board=get_board("vcu128"), seed=1,
                                 backpressure="none"))
    assert result["bit_exact"] is True and result["failures"] == []
    assert result["model_cycles"] == result["cycles"]

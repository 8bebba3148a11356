# amaranth: UnusedElaboratable=no
"""gen/omni/perf.py's model of the η-LSTM top (``top_schedule``, the bench's
``model_cycles``; ``top_mode_busy``, the per-PE-mode counters) against the RTL: OmniTop in
the Amaranth simulator, served by the bench's scratchpad with no gaps or stalls; the
model's cycles must equal the RTL's ``cycles`` counter, its swings the ``swings`` counter
and its per-mode split the ``busy_mvm`` ... counters. Under Verilator:
tests/omni/sim/test_omni_top_verilator.py."""

import dataclasses

import numpy as np
import pytest

from nnrtl.gen.omni.engine import SMALL
from nnrtl.gen.omni.perf import top_mode_busy, top_mode_cycles, top_schedule, top_task_cycles
from nnrtl.hw.omni.config import OmniMode
from nnrtl.hw.omni.top import MODE_COUNTERS
from nnrtl.hw.omni.top_program import top_tasks
from nnrtl.hw.omni.top_config import OmniConfig
from nnrtl.sim.tb.omni.top import check_in_amaranth

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



def random_odd_top(seed):
    """A top drawn from ``seed``: 2-3 channels of 2-3 PEs, one layer over one timestamp,
    input 1-4, hidden 2-6 and never a multiple of the PEs, 2- or 3-stage adders; a task
    table of its 4 tasks."""
    rng = np.random.default_rng(seed)
    pes = int(rng.integers(2, 4))
    channels = int(rng.integers(2, 4))
    return OmniConfig(input_size=int(rng.integers(1, 5)),
                      hidden_size=int(rng.choice([h for h in range(2, 7) if h % pes])),
                      layers=1, seq_len=1, channels=channels, pes_per_channel=pes,
                      swing_channels=int(rng.integers(1, channels + 1)),
                      adder_stages=int(rng.integers(2, 4)), max_tasks=4)


def _rtl(config, seed):
    # the lanes' DSP48E2 slices in their Amaranth behaviour (Amaranth's simulator runs no
    # Instance); the same cycles and bits
    config = dataclasses.replace(config, dsp_primitives="behaviour")
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
    _check_modes(config, counters)


def _check_modes(config, counters):
    """The per-mode counters equal the model and, with no gaps, partition the busy
    channel-cycles; every mode of the cell programs ran."""
    modes = top_mode_busy(config)
    assert {name: counters[name] for name in modes} == modes
    assert sum(modes.values()) == counters["busy_matmul"] + counters["busy_ew"]
    assert all(value > 0 for value in modes.values())


def test_mode_split_of_a_task():
    """A task's split sums to its cycles; the FW MatMul part is MVMs only, the BP MatMul
    part MVMs (eq. 2), outer products (eq. 3) and EW adds (the δW, δb accumulation), the EW
    parts element-wise only."""
    tasks = top_tasks(CONFIGS["3ch-3pe-I2-H5-2layers"])
    seen = {}
    for task in tasks[:2] + tasks[-2:]:
        split = top_mode_cycles(task)
        assert sum(split.values()) == top_task_cycles(task)
        seen[task.part] = {mode for mode, cycles in split.items() if cycles}
    assert seen == {"fw_mm": {OmniMode.MVM},
                    "fw_ew": {OmniMode.EW_MUL, OmniMode.EW_ADD},
                    "bp_ew": {OmniMode.EW_MUL, OmniMode.EW_ADD},
                    "bp_mm": {OmniMode.MVM, OmniMode.OUTER, OmniMode.EW_ADD}}
    assert set(top_mode_busy(CONFIGS["2ch-2pe-I1-H3-2steps"])) == set(MODE_COUNTERS.values())


@pytest.mark.parametrize("seed", [13])
def test_random_odd_top(seed):
    """Cycles, swings and the per-mode counters of a randomly drawn odd-sized top."""
    config = random_odd_top(seed)
    counters = _rtl(config, seed=seed)
    model = top_schedule(config)
    assert (model.cycles, model.swings) == (counters["cycles"], counters["swings"])
    _check_modes(config, counters)


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
    _check_modes(config, counters)

# amaranth: UnusedElaboratable=no
"""The FARNN resource model (:mod:`nnrtl.gen.farnn.resources`): memories from the
configuration, logic from the Yosys-measured units, the fit rule on the boards."""

import dataclasses

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.engines import budget
from nnrtl.gen.farnn.explore import fits
from nnrtl.gen.farnn.resources import UNIT_LOGIC, measure, pe_memory, resource_estimate
from nnrtl.hw.farnn.config import FarnnConfig
from nnrtl.hw.farnn.presets import PAPER_8K, PRESETS


def test_pe_memory_one_uram_a_pe():
    """URAM288 is 4K x 72 b: the RTL gives each PE its own memory, one URAM at 4K or 8K x
    32 b (the paper pairs two 4K PEs in one through its two ports); on 7-series a 4K x
    32 b memory is four 1K x 36 BRAM36."""
    assert pe_memory(4096, "xcup") == (1, 0)
    assert pe_memory(8192, "xcup") == (1, 0)
    assert pe_memory(4096, "xc7") == (0, 4)
    assert pe_memory(8192, "xc7") == (0, 8)


def test_totals_add_up_from_pe_chain_unit_and_activation():
    config = FarnnConfig(chain_length=16, weight_depth=4096, split=1)   # 1,024 PEs, 4K
    estimate = resource_estimate(config)
    assert estimate.pes == 1024
    pe = UNIT_LOGIC["pe4096"]
    assert estimate.per_chain["lut"] == 16 * (pe["lut"] + pe["lut_memory"])
    assert estimate.total["uram"] == 1024                               # 1 URAM a PE
    assert estimate.total["dsp"] == 1024 * 2 + 16 + 34                  # PEs, FW, BW LSTM
    # split 4: 3 rows of 4 fold adders per unit, no DSP, their LUTs
    split = resource_estimate(dataclasses.replace(config, split=4))
    pe_lut = UNIT_LOGIC["add"]["lut"] + UNIT_LOGIC["add"]["lut_memory"]
    assert split.total["lut"] - estimate.total["lut"] == 4 * 3 * 4 * pe_lut
    assert split.total["dsp"] == estimate.total["dsp"]


def test_gru_has_three_units():
    config = FarnnConfig(cell="gru", hidden_size=1280, input_size=1280, chain_length=14,
                         weight_depth=8192, split=1)
    estimate = resource_estimate(config)
    assert estimate.total["uram"] == 3 * 16 * 14
    assert estimate.total["dsp"] == 3 * 16 * 14 * 2 + 12 + 22


def test_seven_series_boards_take_block_ram():
    config = FarnnConfig(hidden_size=64, input_size=64, chain_length=2, weight_depth=4096)
    needs = resource_estimate(config, "xc7").needs()
    assert needs["uram"] == 0
    assert needs["bram36"] >= config.pes * 4
    assert fits(config, "vc709")[0]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_fit_their_board(name):
    preset = PRESETS[name]
    ok, needs, limits = fits(preset.config, preset.board)
    assert ok, (needs, limits)
    assert limits["lut"] == budget(get_board(preset.board).capacity, "lut")


def test_the_papers_768_pes_with_lut_shifts_exceed_only_the_lut_budget():
    ok, needs, limits = fits(dataclasses.replace(PAPER_8K, adder_shifts="lut"), "vu9p")
    assert PAPER_8K.pes == 768 and not ok
    assert [key for key in needs if needs[key] > limits[key]] == ["lut"]


def test_the_papers_768_pes_fit_with_the_adders_shifts_on_dsp_slices():
    """``adder_shifts="dsp"``: 919 LUT and 5 DSP a 4K PE (936 at 8K) instead of 1,057
    and 2 (1,088): the 768-PE 8K design fits the VU9P under the default rule; the
    1,024-PE 4K design does not yet: LUTs, and one URAM288 a PE (1,024 of 960; the paper
    pairs two 4K PEs in one)."""
    ok, needs, limits = fits(PAPER_8K, "vu9p")
    assert ok and PAPER_8K.adder_shifts == "dsp", (needs, limits)
    assert 768 * 5 + 16 + 34 <= needs["dsp"] <= limits["dsp"]
    ok, needs, limits = fits(FarnnConfig(adder_shifts="dsp"), "vu9p")
    assert FarnnConfig().pes == 1024 and not ok
    assert [key for key in needs if needs[key] > limits[key]] == ["lut", "uram"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pe4096", "pe8192", "pe4096_dsp", "pe8192_dsp"])
def test_pe_logic_is_what_yosys_measures(name):
    """Re-measure the PE at its depth, its weights in one URAM (about a minute of Yosys)."""
    assert measure(name) == UNIT_LOGIC[name]

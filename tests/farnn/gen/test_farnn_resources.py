# amaranth: UnusedElaboratable=no
"""The FARNN resource model (:mod:`nnrtl.gen.farnn.resources`): memories from the
configuration, logic from the Yosys-measured units, the fit rule on the boards."""

import dataclasses

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.engines import budget
from nnrtl.gen.farnn.explore import fits
from nnrtl.gen.farnn.resources import (UNIT_LOGIC, chain_memory, measure, pair_memory,
                                       pe_memory, resource_estimate)
from nnrtl.hw.farnn.config import FarnnConfig
from nnrtl.hw.farnn.presets import PAPER_8K, PRESETS


def test_weight_memories_two_4k_pes_a_uram():
    """URAM288 is 4K x 72 b: a pair's two 36-bit lanes take one URAM288 per 4K words (the
    paper's two 4K PEs per URAM), a lone tail one at 4K or 8K x 33 b; on 7-series a 4K x
    72 b pair memory is eight 4K x 9 BRAM36, a 4K x 33 b one four."""
    assert pair_memory(4096, "xcup") == (1, 0)
    assert pair_memory(8192, "xcup") == (2, 0)
    assert pe_memory(4096, "xcup") == (1, 0)
    assert pe_memory(8192, "xcup") == (1, 0)
    assert pair_memory(4096, "xc7") == (0, 8)
    assert pe_memory(4096, "xc7") == (0, 4)
    assert pe_memory(8192, "xc7") == (0, 8)
    assert chain_memory(16, 4096, "xcup") == (8, 0)
    assert chain_memory(13, 4096, "xcup") == (7, 0)
    assert chain_memory(13, 8192, "xcup") == (13, 0)


def _lut(name):
    return UNIT_LOGIC[name]["lut"] + UNIT_LOGIC[name]["lut_memory"]


def test_totals_add_up_from_pair_chain_unit_and_activation():
    config = FarnnConfig(chain_length=16, weight_depth=4096, split=1)   # 1,024 PEs, 4K
    estimate = resource_estimate(config)
    assert estimate.pes == 1024
    assert estimate.per_chain["lut"] == 8 * _lut("pair4096") + _lut("normal")
    assert estimate.per_pe["lut"] == _lut("pair4096") / 2
    assert estimate.total["uram"] == 512                                # 2 PEs a URAM
    assert estimate.total["dsp"] == 1024 * 2 + 16 + 34                  # PEs, FW, BW LSTM
    # an odd chain: its tail alone
    odd = resource_estimate(dataclasses.replace(config, chain_length=15))
    assert odd.per_chain["lut"] == 7 * _lut("pair4096") + _lut("pe4096") + _lut("normal")
    assert odd.total["uram"] == 64 * 8
    # split 4: 3 rows of 4 fold adders per unit, no DSP, their LUTs
    split = resource_estimate(dataclasses.replace(config, split=4))
    assert split.total["lut"] - estimate.total["lut"] == 4 * 3 * 4 * _lut("add")
    assert split.total["dsp"] == estimate.total["dsp"]


def test_gru_has_three_units():
    config = FarnnConfig(cell="gru", hidden_size=1280, input_size=1280, chain_length=14,
                         weight_depth=8192, split=1)
    estimate = resource_estimate(config)
    assert estimate.total["uram"] == 3 * 16 * 14                      # 8K: 1 a PE
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


def test_the_papers_designs_fit_the_vu9p():
    """DSP usage max: 681 LUTs and 6 DSP a 4K PE in a pair: the 1,024-PE 4K design and
    the 768-PE 8K design fit under the default rule; at DSP usage some (915 LUTs
    and 2 DSP) the 4K design exceeds the LUT budget alone."""
    assert _lut("pair4096_max") / 2 <= 750 and UNIT_LOGIC["pair4096_max"]["dsp"] / 2 <= 6
    ok, needs, limits = fits(PAPER_8K, "vu9p")
    assert ok and PAPER_8K.dsp_usage == "max", (needs, limits)
    assert 768 * 6 + 16 + 34 <= needs["dsp"] <= limits["dsp"]
    ok, needs, limits = fits(FarnnConfig(dsp_usage="max"), "vu9p")
    assert FarnnConfig().pes == 1024 and ok, (needs, limits)
    assert needs["uram"] == 512
    ok, needs, limits = fits(FarnnConfig(), "vu9p")
    assert [key for key in needs if needs[key] > limits[key]] == ["lut"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [f"{unit}{depth}{level}" for unit in ("pe", "pair")
                                  for depth in (4096, 8192) for level in ("", "_max", "_none")]
                         + ["normal"])
def test_pe_logic_is_what_yosys_measures(name):
    """Re-measure a PE, a pair or the chain head's converter (under a minute of Yosys
    each)."""
    assert measure(name) == UNIT_LOGIC[name]

"""The SBE resource model (:mod:`nnrtl.gen.sbe.resources`): the memories it counts are the
ones the RTL builds, block RAM counts by aspect ratio, the PP's DSPs as Yosys maps them."""

import collections
import dataclasses

import pytest
from amaranth.hdl import Fragment, Shape
from amaranth.lib.memory import Memory

from nnrtl.boards import get_board
from nnrtl.boards.capacity import bram36_for
from nnrtl.gen.engines import LUT_SHARE, check_fit, get_engine
from nnrtl.gen.errors import UsageError
from nnrtl.gen.sbe.resources import (memory_shapes, post_unit_dsp, resource_estimate,
                                     resources)
from nnrtl.hw.sbe import PRESETS, VC709_LSTM512, ZC706_LSTM256, SbeConfig, SbeEngine

Z = ZC706_LSTM256


def rtl_memories(config):
    """``Counter((bits per entry, depth))`` of the writable memories in the elaborated
    engine (the PWL tables, read-only, are left out)."""
    def walk(fragment):
        for sub, _name, *_ in fragment.subfragments:
            yield from walk(sub)
        for origin in fragment.origins or ():
            if isinstance(origin, Memory) and origin.write_ports:
                yield origin

    found = collections.Counter()
    for memory in walk(Fragment.get(SbeEngine(config), None)):
        found[(Shape.cast(memory.shape).width, memory.depth)] += 1
    return found


@pytest.mark.parametrize("config", [
    SbeConfig(batch_norm=True),
    SbeConfig(input_size=30, hidden_size=6, pes=48, batch=3, blocks=3, seq_len=7,
              bus_weights=8, post_units=2, layers=2),
    SbeConfig(input_size=20, hidden_size=6, pes=12, batch=1, blocks=13, seq_len=4,
              bus_weights=4, post_units=1),
], ids=["default-bn", "two-columns", "passes"])
def test_memory_shapes_are_the_rtls(config):
    modelled = collections.Counter()
    for shape in memory_shapes(config):
        modelled[(shape.words * shape.word_bits, shape.depth)] += shape.count
    assert modelled == rtl_memories(config)


def test_bram36_for_picks_the_best_aspect_ratio():
    assert bram36_for(4, 512, 16) == 1          # 512 x 72: four 16-bit words
    assert bram36_for(1, 2048, 16) == 1         # 2K x 18
    assert bram36_for(1024, 256, 16) == 256     # port-width bound, not bits (114 by bits)
    assert bram36_for(1, 16384, 16) == 8
    assert bram36_for(2, 512, 32) == 1


def test_resource_estimates_of_the_presets():
    z = resource_estimate(Z)
    # One DSP48E1 per DSP-built PE (16 x 16 bits), the PPs' from post_unit_dsp (checked
    # against Yosys below).
    assert z.dsp_pes == Z.pes - Z.lut_multipliers
    assert z.dsp_post == Z.post_units * post_unit_dsp(Z, "xc7")
    # 64 groups of 16 weights (256 bits) x 256 entries: 4 BRAM36 of 72 x 512 each.
    assert z.memories["weight buffer"] == 64 * 4
    # 64-entry BB-FIFOs, PP memories of 256 / 4 = 64 units: LUTRAM, as in the paper.
    assert {"bb-fifo", "post parameters", "cell state"}.isdisjoint(z.memories)
    assert z.bram36 <= 545 and z.lutram_luts > 0    # DS190: the XC7Z045 has 545 BRAM36
    assert resources(Z) == {"dsp": z.dsp, "bram36": z.bram36,
                            "lut": z.lutram_luts + z.lut_multiplier_luts}
    v = resource_estimate(VC709_LSTM512)
    assert v.dsp_pes == 2048 and v.bram36 <= 1470   # DS180: the XC7VX690T has 1470
    assert v.bram_eq7 == pytest.approx(VC709_LSTM512.bram_eq7)
    deep = resource_estimate(dataclasses.replace(Z, batch=128))
    assert "bb-fifo" in deep.memories


@pytest.mark.parametrize("family, batch_norm", [("xc7", True), ("xcup", False)])
def test_post_unit_dsp_matches_yosys(family, batch_norm, tmp_path):
    """The resource model's DSPs of a post-processing unit are Yosys' for its RTL."""
    from amaranth.back import verilog

    from nnrtl.gen.synth import count_resources, run_yosys
    from nnrtl.hw.sbe.post import PostProcessingUnit

    config = SbeConfig(batch_norm=batch_norm)
    (tmp_path / "post.v").write_text(verilog.convert(PostProcessingUnit(config), name="post"))
    cells, _, _ = run_yosys(tmp_path / "post.v", "post", family, tmp_path)
    assert count_resources(cells)["dsp"] == post_unit_dsp(config, family)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_paper_presets_fit_their_boards(name):
    """``generate``'s check counts the LUTs of LUTRAM and LUT multipliers against
    LUT_SHARE of the board's LUTs; the paper's designs pass it (ZC706: 224 LUT multipliers
    of 405 LUTs, 64-entry BB-FIFOs and PP memories in LUTRAM, 62.5% of 218,600)."""
    preset = PRESETS[name]
    board = get_board(preset.board)
    needs = check_fit(get_engine("sbe"), preset.config, board)
    assert needs == resources(preset.config, board.capacity.yosys_family)
    assert needs["lut"] <= LUT_SHARE * board.capacity.lut
    if name == "zc706-lstm256":
        assert needs["lut"] == 224 * 405 + resource_estimate(Z).lutram_luts
        assert 0.62 < needs["lut"] / 218_600 < 0.63


def test_check_fit_counts_luts_against_the_share():
    """More LUT multipliers than the share leaves room for are refused, naming the rule;
    a smaller share refuses the ZC706 design itself."""
    sbe, zc706 = get_engine("sbe"), get_board("zc706")
    many = dataclasses.replace(Z, lut_multipliers=400)     # 400 x 405 LUTs > 153,020
    lut = resources(many)["lut"]
    with pytest.raises(UsageError, match=rf"^sbe with SbeConfig\(.*\) needs {lut} lut "
                                         rf"counted by its resource model, but zc706 allows "
                                         rf"153020: lut_share 0\.7 of its 218600 LUTs, the "
                                         rf"rest left for the logic the model does not "
                                         rf"count \(95\.2% of the device; --lut-share sets "
                                         rf"the share\)$"):
        check_fit(sbe, many, zc706)
    with pytest.raises(UsageError, match=r"allows 109300: lut_share 0\.5 of its 218600"):
        check_fit(sbe, Z, zc706, lut_share=0.5)
    with pytest.raises(UsageError, match=r"^lut_share must be a number in \(0, 1\], not 0$"):
        check_fit(sbe, Z, zc706, lut_share=0)

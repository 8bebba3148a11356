# amaranth: UnusedElaboratable=no
"""The fp32 family's DSP-usage levels (:mod:`nnrtl.hw.arith.dsp_usage`) and the
multiplier's significand product in LUTs (``FloatMul(product="lut")``), bit-exact with the
golden model."""

import numpy as np
import pytest

from nnrtl.hw.arith.dsp_usage import (DSP_USAGE, adder_options, check_dsp_usage,
                                      multiplier_options)
from nnrtl.hw.arith.float import FP32, FloatAdd, FloatFormat, FloatMul
from nnrtl.hw.arith.multiplier import dsp_slices, rtl_products
from nnrtl.sim.golden.float import random_operands, to_normal_form

from test_arith_float import assert_bit_exact, special_pairs, stream_through


def _dsp(unit, family="xcup"):
    return sum(dsp_slices(a, b, family, a_signed=sa, b_signed=sb)
               for a, sa, b, sb in rtl_products(unit))


def test_levels_name_each_units_options():
    assert DSP_USAGE == ("none", "some", "max")
    assert [multiplier_options(level) for level in DSP_USAGE] == [
        {"product": "lut", "shifts": "lut"}, {"product": "dsp", "shifts": "lut"},
        {"product": "dsp", "shifts": "dsp"}]
    assert [adder_options(level) for level in DSP_USAGE] == [
        {"shifts": "lut"}, {"shifts": "lut"}, {"shifts": "dsp"}]
    with pytest.raises(ValueError, match=r"^dsp_usage must be one of 'none', 'some', "
                                         r"'max', not 'full'$"):
        multiplier_options("full")
    with pytest.raises(ValueError, match=r"^shifts_level must be one of"):
        check_dsp_usage(None, "shifts_level")


@pytest.mark.parametrize("family, mul, add", [("xc7", [0, 2, 4], [0, 0, 5]),
                                              ("xcup", [0, 2, 3], [0, 0, 3])])
def test_dsp_slices_per_level(family, mul, add):
    """fp32's ``*`` cells by level, in DSP slices as :func:`dsp_slices` cuts them (DSP48E1
    25 x 18 on ``xc7``, DSP48E2 27 x 18 on ``xcup``): an upper bound of what Yosys builds
    (``test_dsp_slices_per_level_by_yosys``: the xc7 adder's two products take 4)."""
    for operands in ("ieee", "normal"):
        assert [_dsp(FloatMul(FP32, operands=operands, **multiplier_options(level)), family)
                for level in DSP_USAGE] == mul
    assert [_dsp(FloatAdd(FP32, **adder_options(level)), family) for level in DSP_USAGE] == add
    assert rtl_products(FloatMul(FP32, product="lut", flush_subnormals=True)) == []


@pytest.mark.parametrize("stages, flush, operands", [(0, False, "ieee"), (3, False, "ieee"),
                                                     (3, True, "ieee"), (3, False, "normal")])
def test_lut_product_bit_exact(stages, flush, operands):
    a, b, _kinds = random_operands(FP32, "mul", 300, 41 + stages + flush)
    dut = FloatMul(FP32, stages=stages, flush_subnormals=flush, operands=operands,
                   product="lut")
    if operands == "normal":
        got = stream_through(dut, "mul", to_normal_form(FP32, a), to_normal_form(FP32, b))
    else:
        got = stream_through(dut, "mul", a, b, gap=0.3, stall=0.3, seed=stages)
    assert_bit_exact("mul", FP32, a, b, got, flush)


def test_lut_product_special_values_and_a_tiny_format_exhaustively():
    a, b = special_pairs(FP32)
    dut = FloatMul(FP32, stages=2, product="lut")
    assert_bit_exact("mul", FP32, a, b, stream_through(dut, "mul", a, b), False)
    tiny = FloatFormat(3, 2)
    patterns = np.arange(1 << tiny.width, dtype=np.uint64)
    a, b = np.repeat(patterns, len(patterns)), np.tile(patterns, len(patterns))
    dut = FloatMul(tiny, stages=1, product="lut", shifts="dsp")
    assert_bit_exact("mul", tiny, a, b, stream_through(dut, "mul", a, b), False)


def test_product_is_checked():
    with pytest.raises(ValueError, match=r"^product must be 'dsp' or 'lut', not 'uram'$"):
        FloatMul(FP32, product="uram")
    assert FloatMul(FP32).product == "dsp"


@pytest.mark.slow
@pytest.mark.parametrize("family, mul, add", [("xc7", [0, 2, 4], [0, 0, 4]),
                                              ("xcup", [0, 2, 3], [0, 0, 3])])
def test_dsp_slices_per_level_by_yosys(family, mul, add):
    """The DSP slices the module docstring's table gives, by Yosys (a minute a family)."""
    from nnrtl.gen.synth import measure_unit
    assert [measure_unit(FloatMul(FP32, **multiplier_options(level)), family)["dsp"]
            for level in DSP_USAGE] == mul
    assert [measure_unit(FloatAdd(FP32, **adder_options(level)), family)["dsp"]
            for level in DSP_USAGE] == add

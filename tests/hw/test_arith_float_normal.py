# amaranth: UnusedElaboratable=no
"""The normal form (:mod:`nnrtl.hw.arith.float_normal`) and the multiplier's variants that
use it or a DSP right shift (Amaranth simulator), bit for bit against the numpy models:
the converter against :func:`~nnrtl.sim.golden.float.to_normal_form`, ``FloatMul`` with
normal-form operands and with ``shifts="dsp"`` against ``float_mul`` on the encodings."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.arith.float import BF16, FP16, FP32, FloatFormat, FloatMul
from nnrtl.hw.arith.float_normal import (ToNormalForm, normal_width, special_exponent)
from nnrtl.hw.arith.multiplier import dsp_slices, rtl_products
from nnrtl.sim.golden.float import float_mul, random_operands, special_values, to_normal_form

from test_arith_float import special_pairs, stream_through

TINY = FloatFormat(3, 2)


def convert(fmt, bits):
    """The converter's outputs for ``bits``, one per settle."""
    dut = ToNormalForm(fmt)
    got = []

    async def bench(ctx):
        for value in bits.tolist():
            ctx.set(dut.i, value)
            got.append(ctx.get(dut.o))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=np.uint64)


def test_normal_form_values():
    """fp32: zero is E = 0, the smallest subnormal E = 1 with fraction 0, 1.0 E = 127 +
    23, the infinities and NaNs E = 255 + 23 with their fraction; the sign kept."""
    values = np.array([0, 1, 0x00400000, 0x3F800000, 0x7F800000, 0x7FC00000, 0x80000001],
                      dtype=np.uint64)
    e = 24  # the exponent field's position in the normal form: below it the 23-bit fraction
    assert to_normal_form(FP32, values).tolist() == [
        0, 1 << 23, 23 << 23, 150 << 23, 278 << 23, (278 << 23) | 0x400000,
        (1 << (e + 8)) | (1 << 23)]
    assert normal_width(FP32) == 33 and special_exponent(FP32) == 278


@pytest.mark.parametrize("fmt", [TINY, FloatFormat(2, 1), FP16], ids=str)
def test_converter_every_pattern(fmt):
    patterns = np.arange(1 << fmt.width, dtype=np.uint64)
    assert (convert(fmt, patterns) == to_normal_form(fmt, patterns)).all()


def test_converter_fp32():
    a, b, _kinds = random_operands(FP32, "mul", 2000, 11)
    bits = np.concatenate([a, b, np.array(list(special_values(FP32).values()),
                                          dtype=np.uint64)])
    assert (convert(FP32, bits) == to_normal_form(FP32, bits)).all()


def check(fmt, dut, a, b, **kwargs):
    sent = (to_normal_form(fmt, a), to_normal_form(fmt, b)) if dut.operands == "normal" \
        else (a, b)
    got = stream_through(dut, "mul", *sent, **kwargs)
    want = float_mul(fmt, a, b).astype(np.uint64)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), [(hex(int(a[k])), hex(int(b[k])), hex(int(got[k])),
                           hex(int(want[k]))) for k in bad[:8]]


VARIANTS = [("ieee", "dsp"), ("normal", "lut"), ("normal", "dsp")]


@pytest.mark.parametrize("operands, shifts", VARIANTS, ids=str)
@pytest.mark.parametrize("fmt, stages", [(FP32, 0), (FP32, 3), (FP32, 6), (BF16, 3),
                                         (FP16, 4)], ids=str)
def test_random_operands(fmt, stages, operands, shifts):
    a, b, _kinds = random_operands(fmt, "mul", 300, 7 + stages)
    dut = FloatMul(fmt, stages=stages, operands=operands, shifts=shifts)
    check(fmt, dut, a, b, gap=0.3, stall=0.3, seed=stages)


@pytest.mark.parametrize("operands, shifts", VARIANTS, ids=str)
@pytest.mark.parametrize("fmt", [FP32, BF16, FP16], ids=str)
def test_special_value_table(fmt, operands, shifts):
    a, b = special_pairs(fmt)
    check(fmt, FloatMul(fmt, stages=2, operands=operands, shifts=shifts), a, b)


@pytest.mark.parametrize("shifts", ["lut", "dsp"])
def test_tiny_format_exhaustively_in_the_normal_form(shifts):
    """Every pair of a 6-bit format, also both subnormal (normalised, their product is
    formed and shifted right like any other: no operand rule as for IEEE operands)."""
    patterns = np.arange(1 << TINY.width, dtype=np.uint64)
    a, b = np.repeat(patterns, len(patterns)), np.tile(patterns, len(patterns))
    check(TINY, FloatMul(TINY, stages=2, operands="normal", shifts=shifts), a, b)


@pytest.mark.parametrize("operands", ["ieee", "normal"])
def test_dsp_right_shift_at_every_amount(operands):
    """fp32 products whose exponent falls 0 to 39 below the normal range (both halves of
    the split shift product, its clamp), random fractions, some with a subnormal
    operand."""
    rng = np.random.default_rng(23)
    count = 400
    below = np.arange(count) % 40
    field_a = rng.integers(1, 127, count)
    field_b = np.clip(127 - field_a - below + 1, 0, 254)
    fraction = rng.integers(0, 1 << 23, (2, count))
    sign = rng.integers(0, 2, (2, count))
    a = ((sign[0] << 31) | (field_a << 23) | fraction[0]).astype(np.uint64)
    b = ((sign[1] << 31) | (field_b << 23) | fraction[1]).astype(np.uint64)
    check(FP32, FloatMul(FP32, stages=0, operands=operands, shifts="dsp"), a, b)


def test_the_right_shift_is_one_product():
    """``shifts="dsp"`` adds one product (the jammed ``p + 2`` bits by a 17-bit power of
    two: one DSP48E2) to the significands' ``p x p``; the LUT multiplier has only that."""
    assert rtl_products(FloatMul(FP32, operands="normal")) == [(24, False, 24, False)]
    assert sorted(rtl_products(FloatMul(FP32, operands="normal", shifts="dsp"))) == [
        (24, False, 24, False), (26, False, 17, False)]
    assert sum(dsp_slices(a, b, "xcup", a_signed=sa, b_signed=sb) for a, sa, b, sb in
               rtl_products(FloatMul(FP32, operands="normal", shifts="dsp"))) == 3


@pytest.mark.parametrize("kwargs, error, message", [
    ({"operands": "packed"}, ValueError, r"^operands must be 'ieee' or 'normal', not "
                                         r"'packed'$"),
    ({"operands": "normal", "flush_subnormals": True}, ValueError,
     r"^operands 'normal' are exact: not with flush_subnormals$"),
    ({"shifts": "uram"}, ValueError, r"^shifts must be 'lut' or 'dsp', not 'uram'$"),
    ({"shifts": "dsp", "fmt": FloatFormat(11, 52)}, ValueError,
     r"^shifts 'dsp' takes a precision of at most 31 bits, not 53$"),
])
def test_checks(kwargs, error, message):
    fmt = kwargs.pop("fmt", FP32)
    with pytest.raises(error, match=message):
        FloatMul(fmt, **kwargs)


def test_ports_and_properties():
    mul = FloatMul(FP32, operands="normal", shifts="dsp")
    assert (mul.operands, mul.shifts, mul.normalize) == ("normal", "dsp", "operand")
    assert mul.payload_layout.size == 66
    with pytest.raises(TypeError, match=r"^fmt must be a FloatFormat, not 3$"):
        ToNormalForm(3)

"""The floating-point models (nnrtl.sim.golden.float) against independent references.

- fp32, fp16 (and binary64, the model's Python-integer path): numpy's own arithmetic, bit
  for bit, NaN compared as NaN. numpy computes float16 through float32, which is correctly
  rounded for + - *: float32 has 24 >= 2 * 11 + 2 bits, so the double rounding is
  innocuous (Figueroa, "When is double rounding innocuous?", 1995).
- bf16: float32 arithmetic, then round to nearest even to bf16 (24 >= 2 * 8 + 2 again).
- tiny formats, exhaustively: exact rational arithmetic (``fractions``) and rounding by
  search over every representable value.
- flush_subnormals: the documented rule, written with numpy floats.
"""

import itertools
from fractions import Fraction

import numpy as np
import pytest

from nnrtl.hw.arith.float import BF16, FP16, FP32, FloatFormat
from nnrtl.sim.golden.float import (CATEGORIES, float_add, float_mul, float_sub,
                                    from_bits, pattern_dtype, random_operands,
                                    round_to_format, special_values, to_bits)


COUNT = 250_000
FP64 = FloatFormat(11, 52)
MODELS = {"add": float_add, "sub": float_sub, "mul": float_mul}
NUMPY_TYPES = {FP32: (np.float32, np.uint32), FP16: (np.float16, np.uint16),
               FP64: (np.float64, np.uint64)}
OPS = ["add", "sub", "mul"]


def is_nan(fmt, bits):
    bits = np.asarray(bits).astype(np.uint64)
    return (((bits & np.uint64(fmt.exponent_mask)) == np.uint64(fmt.exponent_mask))
            & ((bits & np.uint64(fmt.mantissa_mask)) != 0))


def bf16_from_float32(bits32):
    """Round float32 patterns to bf16, nearest even (the usual integer trick)."""
    bits32 = np.asarray(bits32, dtype=np.uint32)
    nan = (bits32 & np.uint32(0x7fffffff)) > np.uint32(0x7f800000)
    rounded = (bits32 + np.uint32(0x7fff) + ((bits32 >> np.uint32(16)) & np.uint32(1))) \
        >> np.uint32(16)
    return np.where(nan, 0x7fc0, rounded).astype(np.uint16)


def numpy_reference(fmt, op, a, b):
    with np.errstate(all="ignore"):
        if fmt == BF16:
            x = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
            y = (b.astype(np.uint32) << np.uint32(16)).view(np.float32)
            return bf16_from_float32({"add": x + y, "sub": x - y, "mul": x * y}[op]
                                     .view(np.uint32))
        float_type, int_type = NUMPY_TYPES[fmt]
        x, y = a.astype(int_type).view(float_type), b.astype(int_type).view(float_type)
        return {"add": x + y, "sub": x - y, "mul": x * y}[op].view(int_type)


def assert_same(fmt, a, b, got, want):
    """Bit for bit, NaN as NaN; and every NaN the model returns is the canonical one."""
    got = np.asarray(got).astype(np.uint64)
    want = np.asarray(want).astype(np.uint64)
    nan_got, nan_want = is_nan(fmt, got), is_nan(fmt, want)
    same = np.where(nan_got | nan_want, nan_got & nan_want, got == want)
    bad = np.nonzero(~same)[0]
    assert not len(bad), [(hex(int(a[k])), hex(int(b[k])), hex(int(got[k])),
                           hex(int(want[k]))) for k in bad[:8]]
    assert np.all(got[nan_got] == fmt.canonical_nan)


@pytest.mark.parametrize("fmt", [FP32, FP16, BF16], ids=str)
@pytest.mark.parametrize("op", OPS)
def test_random_pairs_match_reference(op, fmt):
    a, b, kinds = random_operands(fmt, op, COUNT, seed=11)
    got, flags = MODELS[op](fmt, a, b, flags=True)
    assert got.dtype == pattern_dtype(fmt)
    assert_same(fmt, a, b, got, numpy_reference(fmt, op, a, b))
    # the mix holds what it promises
    assert set(kinds) == set(CATEGORIES)
    finite = ~is_nan(fmt, a) & ~is_nan(fmt, b) \
        & ((a & fmt.exponent_mask) != fmt.exponent_mask) \
        & ((b & fmt.exponent_mask) != fmt.exponent_mask)
    nonzero = ((a & ~np.array(fmt.sign_mask, a.dtype)) != 0) \
        & ((b & ~np.array(fmt.sign_mask, b.dtype)) != 0)
    zero_result = (got & ~np.array(fmt.sign_mask, got.dtype)) == 0
    assert flags["tie"].sum() > COUNT // 20
    assert flags["subnormal"].sum() > COUNT // 100
    assert flags["overflow"].sum() > COUNT // 100
    assert flags["invalid"].sum() > COUNT // 1000
    # exact cancellation (add, sub) or underflow to zero (mul) of finite nonzero operands
    assert (finite & nonzero & zero_result).sum() > COUNT // 1000


@pytest.mark.parametrize("op", OPS)
def test_binary64_matches_numpy(op):
    """Formats wider than int64 arithmetic allows run on Python integers."""
    a, b, _kinds = random_operands(FP64, op, 20_000, seed=12)
    got = MODELS[op](FP64, a, b)
    assert got.dtype == np.uint64
    assert_same(FP64, a, b, got, numpy_reference(FP64, op, a, b))


@pytest.mark.parametrize("fmt", [FP32, FP16, BF16], ids=str)
@pytest.mark.parametrize("op", OPS)
def test_special_value_table(op, fmt):
    """Every pairing of ±0, ±min/max subnormal, ±min/max normal, ±1, ±inf, ±qNaN, ±sNaN."""
    values = np.array(list(special_values(fmt).values()), dtype=pattern_dtype(fmt))
    a = np.repeat(values, len(values))
    b = np.tile(values, len(values))
    assert_same(fmt, a, b, MODELS[op](fmt, a, b), numpy_reference(fmt, op, a, b))
    assert_same(fmt, a, b, MODELS[op](fmt, a, b, flush_subnormals=True),
                flush_reference(fmt, op, a, b))


@pytest.mark.parametrize("fmt", [FP32, BF16, FP16, FloatFormat(3, 2)], ids=str)
def test_ieee_rules(fmt):
    v = special_values(fmt)
    nan = fmt.canonical_nan

    def check(model, x, y, want, **kwargs):
        assert int(model(fmt, [v.get(x, x)], [v.get(y, y)], **kwargs)[0]) == want, (x, y)

    check(float_sub, "+inf", "+inf", nan)
    check(float_add, "-inf", "+inf", nan)
    check(float_mul, "+0", "-inf", nan)
    check(float_mul, "-snan", "+1", nan)
    check(float_add, "+qnan", "-qnan", nan)
    check(float_add, "-0", "-0", v["-0"])
    check(float_add, "+0", "-0", v["+0"])
    check(float_sub, "-0", "+0", v["-0"])
    check(float_sub, "-0", "-0", v["+0"])
    check(float_mul, "-0", "+max_normal", v["-0"])
    check(float_mul, "-inf", "-min_subnormal", v["+inf"])
    for x in ("+min_subnormal", "+max_subnormal", "+1", "-max_normal"):
        check(float_add, x, v[x] ^ fmt.sign_mask, v["+0"])  # x + (-x) = +0
    check(float_add, "+max_normal", "+max_normal", v["+inf"])
    check(float_sub, "-max_normal", "+max_normal", v["-inf"])
    check(float_add, "+max_subnormal", "+min_subnormal", v["+min_normal"])
    check(float_sub, "+min_normal", "+min_subnormal", v["+max_subnormal"])
    half = (fmt.bias - 1) << fmt.mantissa_bits
    check(float_mul, "+min_subnormal", half, v["+0"])  # a tie between 0 and 1 ulp: even
    check(float_mul, 3, half, 2)  # 1.5 ulp: a tie, to the even 2 ulp
    check(float_mul, "-min_subnormal", half | fmt.sign_mask, v["+0"])
    # flushing: subnormals read as zeros of their sign, tiny results become zeros
    check(float_add, "+max_subnormal", "+min_subnormal", v["+0"], flush_subnormals=True)
    check(float_add, "-max_subnormal", "-0", v["-0"], flush_subnormals=True)
    check(float_mul, "+min_subnormal", "+inf", nan, flush_subnormals=True)
    check(float_sub, "+min_normal", "+min_subnormal", v["+min_normal"],
          flush_subnormals=True)


def flush_reference(fmt, op, a, b):
    """The flush_subnormals rule with numpy floats: subnormal operands become zeros of
    their sign; a result is rounded to ``precision`` bits with an unbounded exponent and
    becomes a zero of its sign if it is then below the smallest normal number."""
    sign = np.array(fmt.sign_mask, a.dtype)
    subnormal_a = (a & np.array(fmt.exponent_mask, a.dtype)) == 0
    subnormal_b = (b & np.array(fmt.exponent_mask, b.dtype)) == 0
    a = np.where(subnormal_a, a & sign, a)
    b = np.where(subnormal_b, b & sign, b)
    # results that are normal (or zero, inf, NaN) agree with the ordinary arithmetic
    ordinary = numpy_reference(fmt, op, a, b).astype(np.uint64)
    # tiny candidates: exact in float64 (a tiny sum of normals is exact, a product of
    # p-bit significands has at most 2p <= 48 bits)
    x, y = from_bits(fmt, a), from_bits(fmt, b)
    with np.errstate(all="ignore"):
        exact = {"add": x + y, "sub": x - y, "mul": x * y}[op]
    smallest_normal = np.ldexp(1.0, fmt.emin)
    tiny = np.isfinite(exact) & (exact != 0) & (np.abs(exact) < smallest_normal)
    # round to precision bits with an unbounded exponent: scale into the normal range
    scale = fmt.bias
    scaled_bits = numpy_round(fmt, np.ldexp(np.where(tiny, exact, 0.0), scale))
    unscaled = np.ldexp(from_bits(fmt, scaled_bits), -scale)
    flushed = np.where(np.signbit(exact), fmt.sign_mask, 0).astype(np.uint64)
    kept = np.abs(unscaled) >= smallest_normal
    kept_bits = numpy_round(fmt, np.where(kept, unscaled, 0.0)).astype(np.uint64)
    return np.where(tiny, np.where(kept, kept_bits, flushed), ordinary)


def numpy_round(fmt, values):
    """float64 -> fmt patterns by numpy's own conversions (bf16 via float32)."""
    with np.errstate(all="ignore"):
        if fmt == BF16:
            return bf16_from_float32(values.astype(np.float32).view(np.uint32))
        float_type, int_type = NUMPY_TYPES[fmt]
        return values.astype(float_type).view(int_type)


@pytest.mark.parametrize("fmt", [FP32, FP16, BF16], ids=str)
@pytest.mark.parametrize("op", OPS)
def test_flush_subnormals_rule(op, fmt):
    a, b, _kinds = random_operands(fmt, op, COUNT // 2, seed=13)
    got, flags = MODELS[op](fmt, a, b, flush_subnormals=True, flags=True)
    assert_same(fmt, a, b, got, flush_reference(fmt, op, a, b))
    assert not flags["subnormal"].any()


# -- tiny formats, exhaustively, against exact rational arithmetic -------------------------

def exact_value(fmt, bits):
    sign = -1 if bits >> (fmt.width - 1) else 1
    field = (bits >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    fraction = bits & fmt.mantissa_mask
    if field == (1 << fmt.exponent_bits) - 1:
        return "nan" if fraction else sign * Fraction(10 ** 9) ** 9  # ±"infinity"
    significand = fraction | (1 << fmt.mantissa_bits) if field else fraction
    return sign * significand * Fraction(2) ** (max(field, 1) - fmt.bias - fmt.mantissa_bits)


def rational_round(fmt, value, finite_patterns):
    """Nearest positive pattern by search, ties to the even pattern; +inf counts as the
    even neighbour just above the largest finite value."""
    magnitude = abs(value)
    best = min(finite_patterns, key=lambda item: (abs(item[1] - magnitude), item[0] & 1))
    return best[0] | (fmt.sign_mask if value < 0 else 0)


def candidates(fmt):
    """Every positive finite pattern with its value, and +inf where 2**(emax + 1) sits."""
    return [(bits, exact_value(fmt, bits)) for bits in range(fmt.infinity)] + \
        [(fmt.infinity, Fraction(2) ** (fmt.emax + 1))]


def rational_reference(fmt, op, a, b, flush, finite_patterns):
    top = finite_patterns[-1][1]
    x, y = exact_value(fmt, a), exact_value(fmt, b)
    sign_a, sign_b = a >> (fmt.width - 1), b >> (fmt.width - 1)
    if op == "sub":
        sign_b ^= 1
        y = -y if y != "nan" else y
    if flush:
        small = Fraction(2) ** fmt.emin
        x = x if x == "nan" or abs(x) >= small else 0
        y = y if y == "nan" or abs(y) >= small else 0
    if "nan" in (x, y):
        return fmt.canonical_nan
    infinite = [abs(v) > top for v in (x, y)]
    if op == "mul":
        if any(infinite):
            if 0 in (x, y):
                return fmt.canonical_nan
            return fmt.infinity | (fmt.sign_mask if sign_a ^ sign_b else 0)
        value, zero_sign = x * y, sign_a ^ sign_b
    else:
        if all(infinite):
            if sign_a != sign_b:
                return fmt.canonical_nan
            return fmt.infinity | (fmt.sign_mask if sign_a else 0)
        if any(infinite):
            return fmt.infinity | (fmt.sign_mask if (sign_a if infinite[0] else sign_b) else 0)
        value, zero_sign = x + y, sign_a & sign_b
    if value == 0:
        return fmt.sign_mask if zero_sign else 0
    if flush:
        # round to precision bits, exponent unbounded; tiny -> signed zero
        exponent = 0
        while Fraction(2) ** (exponent + 1) <= abs(value):
            exponent += 1
        while Fraction(2) ** exponent > abs(value):
            exponent -= 1
        unit = Fraction(2) ** (exponent - fmt.mantissa_bits)
        units = abs(value) / unit
        whole = int(units)
        if units - whole > Fraction(1, 2) or (units - whole == Fraction(1, 2) and whole % 2):
            whole += 1
        if whole * unit < Fraction(2) ** fmt.emin:
            return fmt.sign_mask if value < 0 else 0
    return rational_round(fmt, value, finite_patterns)


@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("fmt", [FloatFormat(2, 1), FloatFormat(2, 2), FloatFormat(3, 2)], ids=str)
@pytest.mark.parametrize("op", OPS)
def test_tiny_formats_exhaustively(op, fmt, flush):
    patterns = range(1 << fmt.width)
    pairs = list(itertools.product(patterns, patterns))
    a = np.array([x for x, _ in pairs], dtype=np.uint16)
    b = np.array([y for _, y in pairs], dtype=np.uint16)
    finite_patterns = candidates(fmt)
    want = [rational_reference(fmt, op, x, y, flush, finite_patterns) for x, y in pairs]
    assert_same(fmt, a, b, MODELS[op](fmt, a, b, flush_subnormals=flush), want)


# -- conversions, operand mixes ------------------------------------------------------------

@pytest.mark.parametrize("fmt", [FP32, FP16, FP64], ids=str)
def test_round_to_format_matches_numpy_conversion(fmt):
    rng = np.random.default_rng(14)
    values = np.concatenate([
        rng.integers(0, 1 << 64, 100_000, dtype=np.uint64).view(np.float64),
        np.ldexp(rng.standard_normal(100_000), rng.integers(-160, 140, 100_000)),
        [0.0, -0.0, np.inf, -np.inf, np.nan],
    ])
    got = round_to_format(fmt, values)
    bits = values.view(np.uint64)
    assert_same(fmt, bits, bits, got, numpy_round(fmt, values))


def test_round_to_format_bf16_matches_integer_trick():
    rng = np.random.default_rng(15)
    bits32 = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        values = bits32.view(np.float32).astype(np.float64)
    assert_same(BF16, bits32, bits32, round_to_format(BF16, values), bf16_from_float32(bits32))


@pytest.mark.parametrize("fmt", [FP16, BF16], ids=str)
def test_every_pattern_converts_both_ways(fmt):
    bits = np.arange(1 << 16, dtype=np.uint16)
    values = from_bits(fmt, bits)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        if fmt == FP16:
            numpy_values = bits.view(np.float16).astype(np.float64)
        else:
            numpy_values = (bits.astype(np.uint32) << np.uint32(16)).view(np.float32) \
                .astype(np.float64)
    assert np.array_equal(values, numpy_values, equal_nan=True)
    back = to_bits(fmt, values)
    assert np.array_equal(back, np.where(is_nan(fmt, bits), fmt.canonical_nan, bits))


def test_random_operands_are_reproducible_and_mixed():
    a1, b1, kinds1 = random_operands(FP32, "add", 10_000, seed=5)
    a2, b2, kinds2 = random_operands(FP32, "add", 10_000, seed=5)
    assert np.array_equal(a1, a2) and np.array_equal(b1, b2)
    a3, b3, kinds3 = random_operands(FP32, "sub", 10_000, seed=5)
    assert np.array_equal(a1, a3) and np.array_equal(b1 ^ np.uint32(FP32.sign_mask), b3)
    for kind, share in CATEGORIES.items():
        assert abs((kinds1 == kind).mean() - share) < 0.02, kind
    assert a1.dtype == np.uint32
    for fmt in (FP16, BF16, FloatFormat(2, 1), FP64):
        a, b, _kinds = random_operands(fmt, "mul", 2_000, seed=6)
        assert a.dtype == b.dtype == pattern_dtype(fmt)
        assert int(a.max()) < 1 << fmt.width and int(b.max()) < 1 << fmt.width


def test_argument_checks():
    with pytest.raises(TypeError, match=r"^fmt must be a FloatFormat, not 'fp32'$"):
        float_add("fp32", [0], [0])
    with pytest.raises(TypeError, match=r"^bit patterns must be an integer array, not float64$"):
        float_mul(FP32, [1.0], [0])
    with pytest.raises(ValueError, match=r"^op must be one of add, sub, mul, not 'div'$"):
        random_operands(FP32, "div", 10, seed=0)

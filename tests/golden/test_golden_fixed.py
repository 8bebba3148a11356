"""Golden models of the fixed-point units and activations against float64 and PyTorch.

The models (:mod:`nnrtl.sim.golden.fixed`, :mod:`nnrtl.sim.golden.pwl`) are integer
arithmetic; here they are checked against independent float64 computations (exact for
these widths) and PyTorch, and their rounding and overflow rules on directed cases.
"""

from fractions import Fraction

import numpy as np
import pytest
import torch

from nnrtl.hw.arith.fixed import Overflow, QFormat, Rounding
from nnrtl.sim.golden import fixed as golden
from nnrtl.sim.golden import pwl as golden_pwl

Q = QFormat
TRUNCATE, HALF_UP, HALF_EVEN = Rounding.TRUNCATE, Rounding.HALF_UP, Rounding.HALF_EVEN
SATURATE, WRAP = Overflow.SATURATE, Overflow.WRAP
ALL_16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)


def random_codes(rng, fmt, count):
    values = rng.integers(fmt.min_code, fmt.max_code, size=count, endpoint=True)
    values[:4] = [fmt.min_code, fmt.max_code, 0, -1 if fmt.signed else 1]
    return values


def torch_round(x, rounding):
    x = torch.as_tensor(x, dtype=torch.float64)
    if rounding is TRUNCATE:
        return torch.floor(x)
    if rounding is HALF_UP:
        return torch.floor(x + 0.5)
    return torch.round(x)  # half to even


def test_qformat_ranges():
    assert (Q(16, 12).min_code, Q(16, 12).max_code) == (-32768, 32767)
    assert (Q(16, 12).min_value, Q(16, 12).max_value) == (-8.0, 8.0 - 2 ** -12)
    assert (Q(8, 8, False).min_code, Q(8, 8, False).max_code) == (0, 255)
    assert Q(16, 12).integer_bits == 4 and Q(16, 12).resolution == 2 ** -12
    assert str(Q(16, 12)) == "sfix16_En12" and Q(8, 3, False).name == "ufix8_En3"
    assert Q(16, 12).product(Q(16, 8, False)) == Q(32, 20, True)
    assert Q(16, 8, False).product(Q(8, 0, False)) == Q(24, 8, False)
    assert Q.holding(-5, 3, 2) == Q(4, 2) and Q.holding(0, 255, 0) == Q(8, 0, False)
    assert Q.holding(0, 1, 4) == Q(4, 4, False)


def test_from_float_matches_torch_fake_quantize():
    """HALF_EVEN + SATURATE is PyTorch's fake quantization."""
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(0, 4, 20000), [7.99, 8.5, -8.0, -9, 2 ** -13, -2 ** -13,
                                                  3 * 2 ** -13]])
    fmt = Q(16, 12)
    reference = torch.fake_quantize_per_tensor_affine(
        torch.tensor(x), fmt.resolution, 0, fmt.min_code, fmt.max_code)
    codes = golden.from_float(x, fmt)
    assert np.array_equal(golden.to_float(codes, fmt), reference.numpy())


@pytest.mark.parametrize("rounding", list(Rounding))
def test_from_float_rounding_and_wrap(rounding):
    fmt = Q(8, 2)
    x = np.array([0.125, 0.375, -0.125, -0.375, 31.875, 40.0, -33.0])
    got = golden.from_float(x, fmt, rounding=rounding, overflow=WRAP)
    expected = torch_round(x * 4, rounding).numpy().astype(np.int64).astype(np.int8)
    assert got.tolist() == expected.tolist()  # int8 casting is a two's complement wrap


@pytest.mark.parametrize("rounding", list(Rounding))
@pytest.mark.parametrize("in_fmt, out_fmt", [
    (Q(16, 12), Q(8, 4)),       # drop 8 fraction bits, saturate
    (Q(16, 12), Q(16, 15)),     # left shift: exact, saturates
    (Q(16, 4), Q(16, 4)),       # identity
    (Q(16, 16, False), Q(8, 0, False)),   # every kept bit is above the word
    (Q(16, 8), Q(8, 0, False)), # signed to unsigned
])
def test_rescale_against_torch_every_16_bit_code(in_fmt, out_fmt, rounding):
    values = np.arange(in_fmt.min_code, in_fmt.max_code + 1, dtype=np.int64)
    scaled = torch.tensor(values * 2.0 ** (out_fmt.fraction_bits - in_fmt.fraction_bits))
    rounded = torch_round(scaled, rounding)
    saturated = torch.clamp(rounded, out_fmt.min_code, out_fmt.max_code)
    got = golden.rescale(values, in_fmt, out_fmt, rounding=rounding, overflow=SATURATE)
    assert np.array_equal(got, saturated.numpy().astype(np.int64))
    wrapped = golden.rescale(values, in_fmt, out_fmt, rounding=rounding, overflow=WRAP)
    span = 1 << out_fmt.width
    assert np.array_equal(wrapped, (rounded.numpy().astype(np.int64) - out_fmt.min_code)
                          % span + out_fmt.min_code)


@pytest.mark.parametrize("rounding, expected", [
    (TRUNCATE, [2, 2, 2, 3, -3, -3, -3, -3, 3, 3, -4]),
    (HALF_UP, [2, 3, 3, 3, -2, -2, -3, -3, 4, 3, -3]),
    (HALF_EVEN, [2, 2, 3, 3, -2, -2, -3, -3, 4, 3, -4]),
])
def test_rescale_rounding_directed(rounding, expected):
    """Quarters and halves: 2.25 2.5 2.75 3.0 -2.25 -2.5 -2.75 -3.0 3.5 3.25 -3.5."""
    quarters = [9, 10, 11, 12, -9, -10, -11, -12, 14, 13, -14]
    got = golden.rescale(quarters, Q(8, 2), Q(8, 0), rounding=rounding)
    assert got.tolist() == expected


def test_rescale_overflow_directed():
    # 127.5 rounds up to 128: saturates to 127 or wraps to -128
    assert golden.rescale([255], Q(10, 1), Q(8, 0)).tolist() == [127]
    assert golden.rescale([255], Q(10, 1), Q(8, 0), overflow=WRAP).tolist() == [-128]
    assert golden.rescale([255], Q(10, 1), Q(8, 0), rounding=TRUNCATE).tolist() == [127]
    assert golden.rescale([-512, 511], Q(10, 0), Q(8, 0)).tolist() == [-128, 127]
    assert golden.rescale([-512, 511, 300], Q(10, 0), Q(8, 0),
                          overflow=WRAP).tolist() == [0, -1, 44]
    assert golden.rescale([-1, 5], Q(8, 0), Q(4, 0, False)).tolist() == [0, 5]
    assert golden.rescale([-1], Q(8, 0), Q(4, 0, False), overflow=WRAP).tolist() == [15]
    with pytest.raises(ValueError, match=r"^values has codes outside sfix8_En0 "
                                         r"\[-128, 127\]$"):
        golden.rescale([128], Q(8, 0), Q(8, 0))


def test_mul_full_product_against_torch():
    rng = np.random.default_rng(2)
    for a_fmt, b_fmt in [(Q(16, 12), Q(16, 12)), (Q(16, 15), Q(16, 8, False)),
                         (Q(16, 0, False), Q(16, 16, False))]:
        a, b = random_codes(rng, a_fmt, 50000), random_codes(rng, b_fmt, 50000)
        product = golden.mul(a, b, a_fmt, b_fmt)
        reference = (torch.tensor(golden.to_float(a, a_fmt))
                     * torch.tensor(golden.to_float(b, b_fmt)))
        assert np.array_equal(golden.to_float(product, a_fmt.product(b_fmt)),
                              reference.numpy())
    assert golden.mul([-32768], [-32768], Q(16, 15), Q(16, 15)).tolist() == [1 << 30]


@pytest.mark.parametrize("rounding", list(Rounding))
def test_mul_rescaled_against_torch(rounding):
    rng = np.random.default_rng(3)
    fmt = Q(16, 12)
    a, b = random_codes(rng, fmt, 50000), random_codes(rng, fmt, 50000)
    got = golden.mul(a, b, fmt, fmt, fmt, rounding=rounding)
    exact = torch.tensor(a, dtype=torch.float64) * torch.tensor(b, dtype=torch.float64)
    reference = torch.clamp(torch_round(exact / 4096, rounding), fmt.min_code, fmt.max_code)
    assert np.array_equal(got, reference.numpy().astype(np.int64))


def test_mul_32_bit_is_exact_beyond_int64():
    fmt = Q(32, 24)
    a = [fmt.min_code, fmt.max_code, fmt.min_code, 123456789]
    b = [fmt.min_code, fmt.min_code, 1, -98765]
    product = golden.mul(a, b, fmt, fmt)
    assert product.dtype == object
    assert product.tolist() == [x * y for x, y in zip(a, b)]
    rescaled = golden.mul(a, b, fmt, fmt, fmt, rounding=HALF_EVEN)
    assert rescaled.tolist() == [fmt.max_code, fmt.min_code, -128,
                                 round(Fraction(123456789 * -98765, 2 ** 24))]


@pytest.mark.parametrize("subtract", [False, True])
def test_add_against_torch(subtract):
    rng = np.random.default_rng(4)
    a_fmt, b_fmt, out_fmt = Q(32, 24), Q(16, 12), Q(32, 20)
    a, b = random_codes(rng, a_fmt, 50000), random_codes(rng, b_fmt, 50000)
    ta = torch.tensor(golden.to_float(a, a_fmt))
    tb = torch.tensor(golden.to_float(b, b_fmt))
    exact = ta - tb if subtract else ta + tb
    assert np.array_equal(golden.to_float(golden.add(a, b, a_fmt, b_fmt, subtract=subtract),
                                          Q(64, 24)), exact.numpy())
    got = golden.add(a, b, a_fmt, b_fmt, out_fmt, subtract=subtract, rounding=HALF_EVEN)
    reference = torch.clamp(torch.round(exact * 2 ** 20), out_fmt.min_code, out_fmt.max_code)
    assert np.array_equal(got, reference.numpy().astype(np.int64))


def test_add_saturates_and_wraps():
    fmt = Q(16, 8)
    assert golden.add([32767], [1], fmt, fmt, fmt).tolist() == [32767]
    assert golden.add([32767], [1], fmt, fmt, fmt, overflow=WRAP).tolist() == [-32768]
    assert golden.add([-32768], [1], fmt, fmt, fmt, subtract=True).tolist() == [-32768]


def test_mac_wrapping_accumulator_against_int32_and_torch():
    rng = np.random.default_rng(5)
    fmt = Q(16, 12)
    a, b = random_codes(rng, fmt, 6000), random_codes(rng, fmt, 6000)
    last = np.zeros(6000, dtype=bool)
    last[rng.choice(6000, 600, replace=False)] = True
    last[-1] = True
    sums = golden.mac(a, b, last, fmt, fmt)
    products = (a * b).astype(np.int32)  # products of Q(16, 12) fit int32
    starts = np.concatenate([[0], np.flatnonzero(last)[:-1] + 1])
    wrapped = [products[s:e + 1].sum(dtype=np.int32) for s, e in
               zip(starts, np.flatnonzero(last))]  # numpy int32 sums wrap
    assert sums.tolist() == [int(v) for v in wrapped]
    # with small operands nothing wraps and the sums are those of PyTorch in float64
    a, b = a >> 8, b >> 8
    reference = [torch.dot(torch.tensor(a[s:e + 1] / 4096), torch.tensor(b[s:e + 1] / 4096))
                 for s, e in zip(starts, np.flatnonzero(last))]
    got = golden.to_float(golden.mac(a, b, last, fmt, fmt), Q(32, 24))
    assert np.array_equal(got, np.array([float(r) for r in reference]))


def test_mac_directed():
    fmt = Q(16, 0)
    big = 32767 * 32767  # 0x3FFF0001: three of them overflow 32 bits
    a, b = [32767, 32767, 32767, -32767, 1], [32767, 32767, 32767, 32767, 5]
    last = [0, 0, 0, 0, 1]
    acc = Q(32, 0)
    # wrap: the partial sum 3 * big wraps, the fourth product brings it back; exact
    assert golden.mac(a, b, last, fmt, fmt).tolist() == [2 * big + 5]
    # saturate: clamps at 2**31 - 1 after the third product, then goes on from there
    assert golden.mac(a, b, last, fmt, fmt, acc_overflow=SATURATE).tolist() == \
        [acc.max_code - big + 5]
    # a wider accumulator; an unfinished group gives no sum
    assert golden.mac(a + [7], b + [7], last + [0], fmt, fmt,
                      acc_fmt=Q(40, 0)).tolist() == [2 * big + 5]
    # init on the first beat of each group, other beats' init ignored; output rescale
    got = golden.mac([1, 2, 3], [4, 4, 4], [1, 0, 1], fmt, fmt, Q(8, 0), init=[10, 99, 300],
                     rounding=TRUNCATE)
    assert got.tolist() == [14, 119]
    got = golden.mac([1, 2, 3], [4, 4, 4], [1, 0, 1], fmt, fmt, Q(8, 0), init=[10, 200, 0])
    assert got.tolist() == [14, 127]
    assert golden.mac([-32768], [-32768], [1], fmt, fmt).tolist() == [1 << 30]


def test_models_distinguish_modes():
    rng = np.random.default_rng(6)
    fmt = Q(16, 12)
    a, b = random_codes(rng, fmt, 4000), random_codes(rng, fmt, 4000)
    a[4], b[4] = 1, 1 << 13  # a tie: half an output LSB
    results = {(r, o): tuple(golden.mul(a, b, fmt, fmt, Q(16, 10), rounding=r, overflow=o))
               for r in Rounding for o in Overflow}
    assert len(set(results.values())) == len(results)


def pwl_error_torch(table):
    """Max |unit - f| over every input code, with PyTorch's float64 sigmoid/tanh."""
    x = golden_pwl.all_codes(table.in_fmt)
    y = golden.to_float(golden_pwl.evaluate(table, x), table.out_fmt)
    reference = {"sigmoid": torch.sigmoid, "tanh": torch.tanh}[table.function](
        torch.tensor(golden.to_float(x, table.in_fmt)))
    return float(np.max(np.abs(y - reference.numpy())))


@pytest.mark.parametrize("function, segments, input_range, bound", [
    ("sigmoid", 64, 8.0, 3.9e-4),    # the documented defaults
    ("tanh", 64, 4.0, 7.7e-4),
    ("sigmoid", 16, 8.0, 5.9e-3),
    ("sigmoid", 256, 8.0, 3.9e-5),
    ("tanh", 32, 4.0, 3.0e-3),
    ("tanh", 256, 8.0, 2.1e-4),
])
def test_pwl_error_bounds(function, segments, input_range, bound):
    table = golden_pwl.pwl_table(function, Q(16, 12), Q(16, 15), segments=segments,
                                 input_range=input_range)
    error = pwl_error_torch(table)
    assert error < bound
    assert error == pytest.approx(golden_pwl.max_abs_error(table)[0], abs=1e-12)
    assert error > bound / 2  # the bound is tight (documented, not just safe)


def test_pwl_saturates_outside_the_range():
    table = golden_pwl.pwl_table("tanh", Q(16, 12), Q(16, 15))  # range [-4, 4)
    inside = golden_pwl.evaluate(table, [-4 * 4096, 4 * 4096 - 1])
    outside = golden_pwl.evaluate(table, [-32768, -20000, 20000, 32767])
    assert outside.tolist() == [inside[0]] * 2 + [inside[1]] * 2
    assert golden_pwl.tanh([0]).tolist() == golden_pwl.evaluate(table, [0]).tolist()


def test_pwl_other_formats():
    for function, in_fmt, out_fmt, segments in [("sigmoid", Q(12, 8), Q(8, 7, False), 8),
                                                ("tanh", Q(10, 6), Q(12, 10), 512),
                                                ("tanh", Q(24, 16), Q(16, 14), 64)]:
        table = golden_pwl.pwl_table(function, in_fmt, out_fmt, segments=segments)
        error, _ = golden_pwl.max_abs_error(table, max_codes=1 << 16)
        assert error < 0.02 + out_fmt.resolution


def test_derivatives_within_half_an_lsb():
    s = np.arange(0, 1 << 15, dtype=np.int64)  # sigmoid outputs in [0, 1)
    y = golden.to_float(golden_pwl.sigmoid_derivative(s), Q(16, 15))
    exact = (s / 2 ** 15) * (1 - s / 2 ** 15)
    assert np.max(np.abs(y - exact)) <= 2 ** -16
    t = ALL_16
    y = golden.to_float(golden_pwl.tanh_derivative(t), Q(16, 15))
    exact = 1 - (t / 2 ** 15) ** 2
    error = np.abs(y - exact)
    fits = exact < 1 - 2 ** -16  # else the result rounds to 1.0, which saturates
    assert np.max(error[fits]) <= 2 ** -16
    assert np.array_equal(np.flatnonzero(~fits), np.flatnonzero(np.abs(t) <= 128))
    assert np.max(error[~fits]) == 2 ** -15 and np.all(y[~fits] == 1 - 2 ** -15)
    truncated = golden_pwl.tanh_derivative(t, rounding=TRUNCATE, out_fmt=Q(18, 16))
    assert np.max(np.abs(golden.to_float(truncated, Q(18, 16)) - exact)) < 2 ** -16


def test_derivative_chains_against_autograd():
    """PWL activation then derivative unit, against PyTorch autograd's derivative."""
    for function, bound in [("sigmoid", 2.8e-4), ("tanh", 1.36e-3)]:
        table = golden_pwl.pwl_table(function, Q(16, 12), Q(16, 15))
        x = torch.tensor(golden.to_float(ALL_16, Q(16, 12)), requires_grad=True)
        getattr(torch, function)(x).sum().backward()
        y = golden_pwl.evaluate(table, ALL_16)
        model = (golden_pwl.sigmoid_derivative if function == "sigmoid"
                 else golden_pwl.tanh_derivative)(y)
        error = np.max(np.abs(golden.to_float(model, Q(16, 15)) - x.grad.numpy()))
        assert bound / 2 < error < bound
        assert error == pytest.approx(golden_pwl.derivative_error(table), abs=1e-9)

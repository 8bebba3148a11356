"""Golden models of the float activations against float64 and PyTorch.

The documented error bounds (module docstring of :mod:`nnrtl.hw.arith.activation`):
every pattern of bf16 and fp16, a sweep of fp32 (a lighter one by default, the full one
under ``slow``); special values; symmetry; the table's rounding helper against the
golden rounding; the derivative units within one ulp.
"""

import numpy as np
import pytest
import torch

from nnrtl.hw.arith.activation import _encode
from nnrtl.hw.arith.float import BF16, FP16, FP32, FloatFormat
from nnrtl.sim.golden import activation as golden
from nnrtl.sim.golden.float import from_bits, round_to_format, special_values

#: The bounds the module docstring states, with the default tables.
BOUNDS = {
    ("sigmoid", FP32): 5e-6, ("tanh", FP32): 1e-5,
    ("sigmoid", BF16): 2.0 ** -8, ("tanh", BF16): 2.0 ** -8,
    ("sigmoid", FP16): 2.0 ** -11, ("tanh", FP16): 2.0 ** -11,
}


@pytest.mark.parametrize("function, fmt", [(f, fmt) for f, fmt in BOUNDS if fmt is not FP32])
def test_every_pattern_within_documented_bound(function, fmt):
    error, _x = golden.max_abs_error(golden.activation_table(function, fmt))
    assert error <= BOUNDS[function, fmt]


@pytest.mark.parametrize("function", ["sigmoid", "tanh"])
def test_fp32_sweep_within_documented_bound(function):
    table = golden.activation_table(function, FP32)
    x = golden.sweep_patterns(FP32, count=1 << 15, random=1 << 15, seed=1, table=table)
    error, _x = golden.max_abs_error(table, x)
    assert BOUNDS[function, FP32] / 2 < error <= BOUNDS[function, FP32]


@pytest.mark.slow
@pytest.mark.parametrize("function", ["sigmoid", "tanh"])
def test_fp32_full_sweep_within_documented_bound(function):
    error, _x = golden.max_abs_error(golden.activation_table(function, FP32))
    assert error <= BOUNDS[function, FP32]


@pytest.mark.parametrize("fmt", [FP32, BF16, FP16])
def test_against_pytorch(fmt):
    """The same bound against PyTorch's float64 sigmoid / tanh (an independent oracle)."""
    rng = np.random.default_rng(fmt.width)
    x = np.concatenate([rng.normal(size=20000) * 4, rng.uniform(-40, 40, 5000)])
    bits = round_to_format(fmt, x)
    values = torch.from_numpy(from_bits(fmt, bits))
    for function, oracle in (("sigmoid", torch.sigmoid), ("tanh", torch.tanh)):
        y = from_bits(fmt, golden.evaluate(golden.activation_table(function, fmt), bits))
        error = np.abs(y - oracle(values).numpy()).max()
        assert error <= BOUNDS[function, fmt]


@pytest.mark.parametrize("fmt", [FP32, BF16, FP16])
@pytest.mark.parametrize("flush", [False, True])
def test_special_values(fmt, flush):
    sv = special_values(fmt)
    one, half = sv["+1"], fmt.bias - 1 << fmt.mantissa_bits

    def sigmoid(name):
        return int(golden.sigmoid(fmt, [sv[name]], flush_subnormals=flush)[0])

    def tanh(name):
        return int(golden.tanh(fmt, [sv[name]], flush_subnormals=flush)[0])

    assert [sigmoid(n) for n in ("+inf", "-inf", "+max_normal", "-max_normal")] == \
        [one, sv["+0"], one, sv["+0"]]
    assert [tanh(n) for n in ("+inf", "-inf", "+max_normal", "-max_normal")] == \
        [one, sv["-1"], one, sv["-1"]]
    for nan in ("+qnan", "-qnan", "+snan", "-snan"):
        assert sigmoid(nan) == tanh(nan) == fmt.canonical_nan
    assert sigmoid("+0") == sigmoid("-0") == half
    assert (tanh("+0"), tanh("-0")) == (sv["+0"], sv["-0"])
    tiny = "+min_normal"
    assert tanh(tiny) == sv[tiny]  # the tangent at 0: tanh(x) = x
    assert tanh("+max_subnormal") == (sv["+0"] if flush else sv["+max_subnormal"])


@pytest.mark.parametrize("fmt", [BF16, FP16])
def test_symmetry_and_near_monotonicity(fmt):
    x = golden.all_patterns(fmt)
    positive = x[(x < fmt.sign_mask) & ~np.isnan(from_bits(fmt, x))]
    tanh = golden.activation_table("tanh", fmt)
    assert np.array_equal(golden.evaluate(tanh, positive) ^ np.uint16(fmt.sign_mask),
                          golden.evaluate(tanh, positive | np.uint64(fmt.sign_mask)))
    for function in ("sigmoid", "tanh"):
        table = golden.activation_table(function, fmt)
        values = from_bits(fmt, x)
        order = np.argsort(values[~np.isnan(values)], kind="stable")
        y = from_bits(fmt, golden.evaluate(table, x[~np.isnan(values)][order]))
        assert np.diff(y).min() >= -(2.0 ** -fmt.precision)  # one ulp of [1/2, 1)


def test_table_layout():
    table = golden.activation_table("sigmoid", BF16)
    assert table.depth == len(table.y0) == len(table.slope) == 2 * (13 * 8 + 2)
    entries = table.entries_per_sign
    half, quarter = 0x3f00, 0x3e80
    assert (table.y0[0], table.slope[0]) == (half, quarter)  # tangent at 0
    assert (table.y0[entries], table.slope[entries]) == (half, quarter)
    assert (table.y0[entries - 1], table.slope[entries - 1]) == (0x3f80, 0)  # 1.0, 0
    assert (table.y0[-1], table.slope[-1]) == (0, 0)
    tanh = golden.activation_table("tanh", FP16)
    positive, negative = slice(0, tanh.entries_per_sign), slice(tanh.entries_per_sign, None)
    assert [y ^ FP16.sign_mask for y in tanh.y0[positive]] == list(tanh.y0[negative])
    assert tanh.slope[positive] == tanh.slope[negative]


@pytest.mark.parametrize("fmt", [FP32, BF16, FP16, FloatFormat(4, 3), FloatFormat(5, 2)])
def test_table_rounding_matches_golden_rounding(fmt):
    rng = np.random.default_rng(fmt.width)
    values = np.concatenate([rng.normal(size=3000), rng.normal(size=1000) * 2.0 ** -14,
                             [0.0, -0.0, 1.0, 0.5, 1e-30, 65504.0, 65520.0, 1e6]])
    assert [_encode(fmt, float(v)) for v in values] == \
        [int(b) for b in round_to_format(fmt, values)]


@pytest.mark.parametrize("fmt", [FP32, BF16, FP16])
def test_derivatives_within_one_ulp(fmt):
    quarter_ulp = 2.0 ** (-2 - fmt.mantissa_bits)
    half_ulp = 2.0 ** (-1 - fmt.mantissa_bits)
    x = None
    if fmt is FP32:
        x = golden.sweep_patterns(FP32, count=1 << 16, random=1 << 16)
    error, _ = golden.derivative_error("sigmoid_derivative", fmt, x)
    assert error <= quarter_ulp
    error, _ = golden.derivative_error("tanh_derivative", fmt, x)
    assert error <= half_ulp
    sv = special_values(fmt)
    assert int(golden.sigmoid_derivative(fmt, [sv["+1"]])[0]) == sv["+0"]
    assert int(golden.tanh_derivative(fmt, [sv["-1"]])[0]) == sv["+0"]
    assert int(golden.tanh_derivative(fmt, [sv["+inf"]])[0]) == sv["-inf"]
    assert int(golden.sigmoid_derivative(fmt, [sv["+inf"]])[0]) == sv["-inf"]


def test_validation():
    with pytest.raises(TypeError, match=r"^table must be an ActivationTable, not 'tanh'$"):
        golden.evaluate("tanh", [0])
    with pytest.raises(ValueError, match=r"^kind must be one of sigmoid_derivative, "
                                         r"tanh_derivative, not 'relu'$"):
        golden.derivative_error("relu", FP16)
    with pytest.raises(ValueError, match=r"^fmt must be a FloatFormat of at most 24 bits"):
        golden.all_patterns(FP32)

# amaranth: UnusedElaboratable=no
"""Piecewise-linear sigmoid/tanh and the derivative units (Amaranth simulator).

Random input codes (extremes and near-zero favoured; every code for small formats),
random gaps and stalls, bit-exact against :mod:`nnrtl.sim.golden.pwl`, latency property
equal to the measured latency. Every input code of the 16-bit units runs under
Verilator (``tests/sim/test_arith_fixed_verilator.py``).
"""

import zlib

import pytest
from amaranth.hdl import signed

from nnrtl.hw.arith.fixed import QFormat, Rounding
from nnrtl.hw.arith.pwl import (PiecewiseLinear, PWLSigmoid, PWLTable, PWLTanh,
                                SigmoidDerivative, TanhDerivative, pwl_table)
from nnrtl.sim.golden import pwl as golden_pwl
from nnrtl.sim.tb.arith_fixed import check_in_amaranth as check_unit

Q = QFormat

UNITS = {
    "sigmoid": lambda: PWLSigmoid(),
    "tanh": lambda: PWLTanh(),
    "sigmoid_16_segments_even": lambda: PWLSigmoid(segments=16, rounding=Rounding.HALF_EVEN),
    "tanh_whole_range_truncate": lambda: PWLTanh(input_range=8.0, segments=128,
                                                 rounding=Rounding.TRUNCATE),
    "tanh_narrow_coefficients": lambda: PWLTanh(Q(12, 8), Q(10, 8), segments=8,
                                                input_range=2.0, coefficient_bits=6),
    "sigmoid_derivative": lambda: SigmoidDerivative(),
    "sigmoid_derivative_truncate": lambda: SigmoidDerivative(Q(16, 14), Q(12, 12, False),
                                                             rounding=Rounding.TRUNCATE),
    "tanh_derivative": lambda: TanhDerivative(),
    "tanh_derivative_wide": lambda: TanhDerivative(Q(16, 15), Q(18, 16),
                                                   rounding=Rounding.HALF_EVEN),
}


@pytest.mark.parametrize("name", UNITS)
def test_matches_model(name):
    check_unit(UNITS[name](), count=200, seed=zlib.crc32(name.encode()))


@pytest.mark.parametrize("unit", [
    PWLTanh(Q(10, 6), Q(12, 10), segments=512),       # one code per segment
    PWLSigmoid(Q(8, 4), Q(8, 8, False), segments=1),  # a single segment
    SigmoidDerivative(Q(8, 7)),
    TanhDerivative(Q(8, 6, False), Q(8, 4)),
], ids=["tanh_per_code", "sigmoid_one_segment", "sigmoid_derivative_8",
        "tanh_derivative_unsigned"])
def test_every_code_of_small_formats(unit):
    (name, fmt), = [("x", unit.in_fmt)]
    inputs = [{name: code} for code in range(fmt.min_code, fmt.max_code + 1)]
    check_unit(unit, inputs=inputs, patterns=[(0.2, 0.3)])


def test_units_share_the_table_with_the_model():
    unit = PWLSigmoid(segments=32)
    assert unit.table == pwl_table("sigmoid", Q(16, 12), Q(16, 15), segments=32)
    assert unit.table == golden_pwl.pwl_table("sigmoid", Q(16, 12), Q(16, 15), segments=32)
    assert PWLTanh().table.input_range == 4.0 and PWLSigmoid().table.input_range == 8.0
    assert PWLTanh(Q(12, 10)).table.input_range == 2.0  # capped to the format
    assert PiecewiseLinear(unit.table).table is unit.table
    table = PWLTanh().table
    assert (table.segments, table.segment_bits, table.offset_bits) == (64, 6, 9)
    assert (table.low_code, table.high_code) == (-4 * 4096, 4 * 4096 - 1)
    assert all(abs(s) < 1 << 17 for s in table.slopes)
    assert max(abs(s) for s in table.slopes) >= 1 << 16  # the coefficient bits are used


def test_documented_default_errors():
    """The bounds in the docstrings (every input code, against float64)."""
    assert golden_pwl.max_abs_error(PWLSigmoid().table)[0] < 3.9e-4
    assert golden_pwl.max_abs_error(PWLTanh().table)[0] < 7.7e-4
    assert golden_pwl.derivative_error(PWLSigmoid().table) < 2.8e-4
    assert golden_pwl.derivative_error(PWLTanh().table) < 1.36e-3


def test_ports_and_latency():
    for unit in (PWLSigmoid(), PWLTanh(Q(12, 8), Q(8, 7))):
        assert unit.latency == 4
        assert [(n, f.shape) for n, f in unit.i.payload.shape()] == \
            [("x", unit.in_fmt.shape)]
        assert [(n, f.shape) for n, f in unit.o.payload.shape()] == \
            [("y", unit.out_fmt.shape)]
    for unit in (SigmoidDerivative(), TanhDerivative(Q(12, 11), Q(16, 15))):
        assert unit.latency == 3
        assert [n for n, _ in unit.i.payload.shape()] == ["x"]
        assert [n for n, _ in unit.o.payload.shape()] == ["y"]
    assert SigmoidDerivative().out_fmt == Q(16, 15)
    assert TanhDerivative(Q(12, 11), Q(16, 15)).o.payload.shape()["y"].shape == signed(16)


Q16 = Q(16, 12)


@pytest.mark.parametrize("call, error, message", [
    (lambda: pwl_table("relu", Q16, Q16), ValueError,
     r"^function must be one of sigmoid, tanh, not 'relu'$"),
    (lambda: PWLSigmoid(16), TypeError, r"^in_fmt must be a QFormat, not 16$"),
    (lambda: PWLTanh(Q16, "q"), TypeError, r"^out_fmt must be a QFormat, not 'q'$"),
    (lambda: PWLSigmoid(Q(16, 12, False)), ValueError,
     r"^in_fmt \(ufix16_En12\) must be signed$"),
    (lambda: PWLSigmoid(segments=0), TypeError,
     r"^segments must be a positive integer, not 0$"),
    (lambda: PWLSigmoid(segments=48), ValueError, r"^segments \(48\) must be a power of two$"),
    (lambda: PWLTanh(input_range=8.0, segments=1 << 17), ValueError,
     r"^segments \(131072\) cannot exceed the number of input codes in the range "
     r"\(65536\)$"),
    (lambda: PWLTanh(coefficient_bits=1), TypeError,
     r"^coefficient_bits must be an integer of at least 2, not 1$"),
    (lambda: PWLTanh(input_range=3.0), ValueError,
     r"^input_range \(3\.0\) must be a positive power of two$"),
    (lambda: PWLTanh(input_range=-4.0), ValueError,
     r"^input_range \(-4\.0\) must be a positive power of two$"),
    (lambda: PWLTanh(input_range="4"), TypeError, r"^input_range must be a number, not '4'$"),
    (lambda: PWLTanh(input_range=True), TypeError, r"^input_range must be a number, not True$"),
    (lambda: PWLTanh(input_range=16), ValueError,
     r"^input_range \(16\) exceeds the range of in_fmt \(sfix16_En12: \[-8\.0, 8\.0\)\)$"),
    (lambda: PWLTanh(input_range=2 ** -13), ValueError,
     r"^input_range \(0\.0001220703125\) is below the resolution of in_fmt "
     r"\(sfix16_En12: 0\.000244140625\)$"),
    (lambda: PWLSigmoid(rounding="nearest"), TypeError,
     r"^rounding must be a Rounding, not 'nearest'$"),
    (lambda: PiecewiseLinear(3), TypeError, r"^table must be a PWLTable, not 3$"),
    (lambda: SigmoidDerivative(3), TypeError, r"^in_fmt must be a QFormat, not 3$"),
    (lambda: TanhDerivative(Q16, 3), TypeError, r"^out_fmt must be a QFormat, not 3$"),
    (lambda: TanhDerivative(rounding=None), TypeError,
     r"^rounding must be a Rounding, not None$"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_table_is_a_frozen_record():
    table = PWLSigmoid(segments=4).table
    assert isinstance(table, PWLTable)
    with pytest.raises(AttributeError):
        table.segments = 8

"""Bit-exact numpy models of :mod:`nnrtl.hw.arith.pwl`, and their error measurement.

The piecewise-linear units are modelled from the very :class:`PWLTable` the RTL is
built from (:func:`nnrtl.hw.arith.pwl.pwl_table`, or a unit's ``table`` property): the
coefficients are never restated. The derivative units are modelled from their formats.
:func:`max_abs_error` measures a table against float64 over every input code (or an
evenly spread subset when the input is wider than ``max_codes``).
"""

import numpy as np

from nnrtl.hw.arith.fixed import QFormat, Rounding
from nnrtl.hw.arith.pwl import FUNCTIONS, PWLTable, pwl_table

from .fixed import Overflow, codes, rescale, to_float

__all__ = ["FUNCTIONS", "PWLTable", "pwl_table", "evaluate", "sigmoid", "tanh",
           "sigmoid_derivative", "tanh_derivative", "all_codes", "max_abs_error",
           "derivative_error"]


def evaluate(table, x):
    """Output codes of the piecewise-linear unit built from ``table`` for input codes
    ``x`` (any codes of ``table.in_fmt``)."""
    in_fmt = table.in_fmt
    x = codes(x, in_fmt.width + 1)
    if x.size and (x.min() < in_fmt.min_code or x.max() > in_fmt.max_code):
        raise ValueError(f"x has codes outside {in_fmt}")
    clamped = np.clip(x, table.low_code, table.high_code)
    offset = clamped - table.low_code
    segment = offset >> table.offset_bits
    d = offset & ((1 << table.offset_bits) - 1)
    slopes = np.asarray(table.slopes, dtype=np.int64)
    bases = np.asarray(table.bases, dtype=np.int64)
    total = bases[segment] + slopes[segment] * d
    # int64 suffices: |slope| < 2**(coefficient_bits-1) times d < 2**offset_bits
    assert table.coefficient_bits + table.offset_bits < 62
    return rescale(total, table.sum_fmt, table.out_fmt, rounding=table.rounding,
                   overflow=Overflow.SATURATE)


def sigmoid(x, in_fmt=QFormat(16, 12), out_fmt=QFormat(16, 15), **kwargs):
    """Model of :class:`~nnrtl.hw.arith.pwl.PWLSigmoid` with the same parameters."""
    return evaluate(pwl_table("sigmoid", in_fmt, out_fmt, **kwargs), x)


def tanh(x, in_fmt=QFormat(16, 12), out_fmt=QFormat(16, 15), **kwargs):
    """Model of :class:`~nnrtl.hw.arith.pwl.PWLTanh` with the same parameters."""
    return evaluate(pwl_table("tanh", in_fmt, out_fmt, **kwargs), x)


def _derivative(exact, in_fmt, out_fmt, rounding):
    wide = QFormat(2 * in_fmt.width + 4, 2 * in_fmt.fraction_bits, True)
    return rescale(exact, wide, in_fmt if out_fmt is None else out_fmt,
                   rounding=rounding, overflow=Overflow.SATURATE)


def sigmoid_derivative(s, in_fmt=QFormat(16, 15), out_fmt=None, *,
                       rounding=Rounding.HALF_UP):
    """Model of :class:`~nnrtl.hw.arith.pwl.SigmoidDerivative`: ``s * (1 - s)`` exact,
    rounded once to ``out_fmt`` (default ``in_fmt``), saturated."""
    s = codes(s, 2 * in_fmt.width + 4)
    one = 1 << in_fmt.fraction_bits
    return _derivative(s * (one - s), in_fmt, out_fmt, rounding)


def tanh_derivative(t, in_fmt=QFormat(16, 15), out_fmt=None, *, rounding=Rounding.HALF_UP):
    """Model of :class:`~nnrtl.hw.arith.pwl.TanhDerivative`: ``1 - t**2`` exact,
    rounded once to ``out_fmt`` (default ``in_fmt``), saturated."""
    t = codes(t, 2 * in_fmt.width + 4)
    one = 1 << (2 * in_fmt.fraction_bits)
    return _derivative(one - t * t, in_fmt, out_fmt, rounding)


def all_codes(fmt, max_codes=1 << 20):
    """Every code of ``fmt`` in order, or ``max_codes`` evenly spread ones (both ends
    included) if there are more."""
    count = fmt.max_code - fmt.min_code + 1
    if count <= max_codes:
        return np.arange(fmt.min_code, fmt.max_code + 1, dtype=np.int64)
    return np.unique(np.linspace(fmt.min_code, fmt.max_code, max_codes).round()
                     .astype(np.int64))


def max_abs_error(table, max_codes=1 << 20):
    """Largest ``|unit(x) - f(x)|`` (values, float64) over every input code ``x``.

    Returns
    -------
    (float, float)
        The error and the input value where it occurs.
    """
    x = all_codes(table.in_fmt, max_codes)
    y = to_float(evaluate(table, x), table.out_fmt)
    error = np.abs(y - FUNCTIONS[table.function](to_float(x, table.in_fmt)))
    worst = int(np.argmax(error))
    return float(error[worst]), float(to_float(x[worst], table.in_fmt))


def derivative_error(table, out_fmt=None, rounding=Rounding.HALF_UP):
    """Largest error of the derivative computed from the unit's output (the chain
    ``PWLSigmoid -> SigmoidDerivative`` or ``PWLTanh -> TanhDerivative``) against the
    true derivative, float64, over every input code of ``table.in_fmt``."""
    x = all_codes(table.in_fmt)
    y = evaluate(table, x)
    value = to_float(x, table.in_fmt)
    if table.function == "sigmoid":
        dy = sigmoid_derivative(y, table.out_fmt, out_fmt, rounding=rounding)
        s = FUNCTIONS["sigmoid"](value)
        exact = s * (1 - s)
    else:
        dy = tanh_derivative(y, table.out_fmt, out_fmt, rounding=rounding)
        exact = 1 - np.tanh(value) ** 2
    return float(np.max(np.abs(to_float(dy, out_fmt or table.out_fmt) - exact)))

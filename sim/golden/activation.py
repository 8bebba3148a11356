"""Bit-exact models of :mod:`nnrtl.hw.arith.activation`, and their error measurement.

The activation units are modelled from the very :class:`ActivationTable` the RTL is
built from (:func:`nnrtl.hw.arith.activation.activation_table`, or a unit's ``table``):
the table contents are never restated. The address and the operands of ``x - x0`` are
decoded from the input bits as the module docstring of
:mod:`nnrtl.hw.arith.activation` describes; the arithmetic is
:func:`nnrtl.sim.golden.float.float_sub`, ``float_mul`` and ``float_add``.

:func:`max_abs_error` measures a unit against float64 over every input pattern (formats
of up to 16 bits) or :func:`sweep_patterns` (wider ones).
"""

import numpy as np

from nnrtl.hw.arith.activation import FUNCTIONS, ActivationTable, activation_table
from nnrtl.hw.arith.float_format import FloatFormat

from .float import float_add, float_mul, float_sub, from_bits


__all__ = ["FUNCTIONS", "ActivationTable", "activation_table", "evaluate", "sigmoid",
           "tanh", "sigmoid_derivative", "tanh_derivative", "reference", "all_patterns",
           "sweep_patterns", "max_abs_error", "derivative_error"]


def _patterns(fmt, bits):
    return np.asarray(bits, dtype=np.uint64) & np.uint64((1 << fmt.width) - 1)


def evaluate(table, x_bits, *, flush_subnormals=False):
    """Output bit patterns of the unit built from ``table`` for input patterns ``x_bits``."""
    if not isinstance(table, ActivationTable):
        raise TypeError(f"table must be an ActivationTable, not {table!r}")
    fmt = table.fmt
    x = _patterns(fmt, x_bits).astype(np.int64)
    sign = x >> (fmt.width - 1)
    field = (x >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    fraction = x & fmt.mantissa_mask
    nan = (field == (1 << fmt.exponent_bits) - 1) & (fraction != 0)
    below = field < table.min_exponent + fmt.bias
    above = field >= table.max_exponent + fmt.bias
    segment = ((field - table.min_exponent - fmt.bias) << table.segment_bits) + (
        fraction >> table.offset_bits)
    index = np.where(below, 0, np.where(above, table.segments + 1, 1 + segment))
    address = sign * table.entries_per_sign + index
    x0 = x & ~((1 << table.offset_bits) - 1)
    d = float_sub(fmt, np.where(above & ~nan, 0, x), np.where(below | above, 0, x0),
                  flush_subnormals=flush_subnormals)
    y0 = np.asarray(table.y0, dtype=np.int64)[address]
    slope = np.asarray(table.slope, dtype=np.int64)[address]
    product = float_mul(fmt, slope, d, flush_subnormals=flush_subnormals)
    return float_add(fmt, y0, product, flush_subnormals=flush_subnormals)


def sigmoid(fmt, x_bits, *, flush_subnormals=False, **table_options):
    """Model of :class:`~nnrtl.hw.arith.activation.FloatSigmoid` with the same
    parameters (``table_options``: ``segment_bits``, ``min_exponent``, ``max_exponent``)."""
    return evaluate(activation_table("sigmoid", fmt, **table_options), x_bits,
                    flush_subnormals=flush_subnormals)


def tanh(fmt, x_bits, *, flush_subnormals=False, **table_options):
    """Model of :class:`~nnrtl.hw.arith.activation.FloatTanh` (see :func:`sigmoid`)."""
    return evaluate(activation_table("tanh", fmt, **table_options), x_bits,
                    flush_subnormals=flush_subnormals)


def _one(fmt):
    return fmt.bias << fmt.mantissa_bits


def sigmoid_derivative(fmt, s_bits, *, flush_subnormals=False):
    """Model of :class:`~nnrtl.hw.arith.activation.FloatSigmoidDerivative`:
    ``s * (1 - s)``, the subtraction then the product rounded."""
    s = _patterns(fmt, s_bits)
    complement = float_sub(fmt, _one(fmt), s, flush_subnormals=flush_subnormals)
    return float_mul(fmt, s, complement, flush_subnormals=flush_subnormals)


def tanh_derivative(fmt, t_bits, *, flush_subnormals=False):
    """Model of :class:`~nnrtl.hw.arith.activation.FloatTanhDerivative`: ``1 - t * t``,
    the product then the subtraction rounded."""
    t = _patterns(fmt, t_bits)
    square = float_mul(fmt, t, t, flush_subnormals=flush_subnormals)
    return float_sub(fmt, _one(fmt), square, flush_subnormals=flush_subnormals)


def reference(function, x):
    """float64 ``sigmoid`` / ``tanh`` / ``sigmoid_derivative`` (of ``s``) /
    ``tanh_derivative`` (of ``t``) of float values ``x``."""
    x = np.asarray(x, dtype=np.float64)
    if function in FUNCTIONS:
        return FUNCTIONS[function][0](x)
    if function == "sigmoid_derivative":
        return x * (1.0 - x)
    if function == "tanh_derivative":
        return 1.0 - x * x
    raise ValueError(f"function must be one of sigmoid, tanh, sigmoid_derivative, "
                     f"tanh_derivative, not {function!r}")


def all_patterns(fmt):
    """Every bit pattern of ``fmt`` (at most 24 bits wide)."""
    if not isinstance(fmt, FloatFormat) or fmt.width > 24:
        raise ValueError(f"fmt must be a FloatFormat of at most 24 bits, not {fmt!r}")
    return np.arange(1 << fmt.width, dtype=np.uint64)


def sweep_patterns(fmt, *, count=1 << 20, random=1 << 20, seed=0, table=None):
    """Input patterns for a wide format: ``count`` patterns evenly spread over all of
    them, ``random`` uniformly random ones, and, with ``table``, ``count`` more evenly
    spread over each sign of the interpolated range (``2**min_exponent <= |x| <
    2**max_exponent``), the first pattern of every segment and the one before it."""
    step = max(1, (1 << fmt.width) // count)
    parts = [np.arange(0, 1 << fmt.width, step, dtype=np.uint64),
             np.random.default_rng(seed).integers(0, 1 << fmt.width, random,
                                                   dtype=np.uint64)]
    if table is not None:
        low = (table.min_exponent + fmt.bias) << fmt.mantissa_bits
        high = (table.max_exponent + fmt.bias) << fmt.mantissa_bits
        inside = np.arange(low, high, max(1, (high - low) // count), dtype=np.uint64)
        parts += [inside, inside | np.uint64(fmt.sign_mask)]
        fields = np.arange(table.min_exponent, table.max_exponent + 1) + fmt.bias
        starts = (fields[:, None] << fmt.mantissa_bits) + (
            np.arange(1 << table.segment_bits)[None, :] << table.offset_bits)
        starts = starts.ravel().astype(np.uint64)
        starts = np.concatenate([starts, starts - np.uint64(1)])
        parts += [starts, starts | np.uint64(fmt.sign_mask)]
    return np.concatenate(parts)


def _default_patterns(fmt, table=None):
    return all_patterns(fmt) if fmt.width <= 16 else sweep_patterns(fmt, table=table)


def _error(fmt, function, x_bits, y_bits):
    x = from_bits(fmt, x_bits)
    y = from_bits(fmt, y_bits)
    keep = ~np.isnan(x)
    error = np.abs(y[keep] - reference(function, x[keep]))
    worst = int(np.argmax(error))
    return float(error[worst]), float(x[keep][worst])


def max_abs_error(table, x_bits=None, *, flush_subnormals=False):
    """Largest ``|unit(x) - f(x)|`` over the input patterns ``x_bits`` (default: every
    pattern of a format of up to 16 bits, else :func:`sweep_patterns`), NaN inputs left
    out. Returns ``(error, x)``, the input where it is reached."""
    fmt = table.fmt
    x_bits = _default_patterns(fmt, table) if x_bits is None else _patterns(fmt, x_bits)
    y = evaluate(table, x_bits, flush_subnormals=flush_subnormals)
    return _error(fmt, table.function, x_bits, y)


def derivative_error(kind, fmt, x_bits=None, *, flush_subnormals=False):
    """Largest error of a derivative unit (``kind`` ``"sigmoid_derivative"`` or
    ``"tanh_derivative"``) against float64 of its input, over the inputs in ``[0, 1]``
    (sigmoid) or ``[-1, 1]`` (tanh) among ``x_bits`` (default as :func:`max_abs_error`).
    Returns ``(error, x)``."""
    model = {"sigmoid_derivative": sigmoid_derivative, "tanh_derivative": tanh_derivative}
    if kind not in model:
        raise ValueError(f"kind must be one of sigmoid_derivative, tanh_derivative, "
                         f"not {kind!r}")
    x_bits = _default_patterns(fmt) if x_bits is None else _patterns(fmt, x_bits)
    x = from_bits(fmt, x_bits)
    low = 0.0 if kind == "sigmoid_derivative" else -1.0
    x_bits = x_bits[(x >= low) & (x <= 1.0)]
    y = model[kind](fmt, x_bits, flush_subnormals=flush_subnormals)
    return _error(fmt, kind, x_bits, y)

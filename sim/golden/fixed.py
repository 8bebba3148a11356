"""Bit-exact numpy models of the fixed-point units in :mod:`nnrtl.hw.arith.fixed`.

Codes are integers (the two's complement value of the word, not its raw bits). Arrays are
``int64`` when every intermediate value fits in 62 bits and Python-int ``object`` arrays
otherwise, so a 32 x 32 -> 64-bit product is as exact as a 16 x 16 one. The formats and
the :class:`Rounding` / :class:`Overflow` enums are the RTL's own; the arithmetic here is
written independently of the RTL's (``rescale_value``) and checked against it bit for bit.

Rounding of a right shift by ``s`` bits (``v`` an integer, ``>>`` the floor shift):

* ``TRUNCATE``: ``v >> s`` (floor),
* ``HALF_UP``: ``(v + 2**(s-1)) >> s``,
* ``HALF_EVEN``: ``(v + 2**(s-1) - 1 + ((v >> s) & 1)) >> s``;

then ``SATURATE`` clamps to ``[min_code, max_code]`` and ``WRAP`` keeps the low
``width`` bits: ``((v - min_code) mod 2**width) + min_code``.
"""

import numpy as np

from nnrtl.hw.arith.fixed import Overflow, QFormat, Rounding

__all__ = ["QFormat", "Rounding", "Overflow", "codes", "to_float", "from_float",
           "round_shift", "overflow_codes", "rescale", "mul", "add", "mac"]

_INT64_BITS = 62  # widest intermediate kept in int64 (headroom for the rounding add)


def codes(values, bits=64):
    """``values`` as an integer array: ``int64`` if ``bits`` (the widest intermediate)
    is at most 62, else an ``object`` array of Python ints."""
    if bits <= _INT64_BITS:
        return np.asarray(values, dtype=np.int64)
    array = np.asarray(values, dtype=object)
    return np.vectorize(int, otypes=[object])(array) if array.size else array


def _check_range(values, fmt, name):
    values = np.asarray(values)
    if values.size and (values.min() < fmt.min_code or values.max() > fmt.max_code):
        raise ValueError(f"{name} has codes outside {fmt} "
                         f"[{fmt.min_code}, {fmt.max_code}]")


def to_float(values, fmt):
    """Values (float64) of codes of ``fmt``; exact while ``fmt.width <= 53``."""
    return np.asarray(values, dtype=np.float64) * fmt.resolution


def from_float(x, fmt, *, rounding=Rounding.HALF_EVEN, overflow=Overflow.SATURATE):
    """Quantize float64 ``x`` to codes of ``fmt`` with ``rounding`` and ``overflow``
    (exact for ``|x| * 2**fraction_bits < 2**52``)."""
    scaled = np.asarray(x, dtype=np.float64) * 2.0 ** fmt.fraction_bits
    if rounding is Rounding.TRUNCATE:
        rounded = np.floor(scaled)
    elif rounding is Rounding.HALF_UP:
        rounded = np.floor(scaled + 0.5)
    else:
        rounded = np.rint(scaled)
    if overflow is Overflow.SATURATE:
        rounded = np.clip(rounded, fmt.min_code, fmt.max_code)
    integers = np.vectorize(int, otypes=[object])(rounded)
    return codes(overflow_codes(integers, fmt, overflow), fmt.width)


def round_shift(values, shift, rounding):
    """Integer codes shifted right by ``shift`` bits with ``rounding`` (left, exactly,
    if ``shift <= 0``)."""
    if shift <= 0:
        return values << -shift
    half = 1 << (shift - 1)
    if rounding is Rounding.TRUNCATE:
        return values >> shift
    if rounding is Rounding.HALF_UP:
        return (values + half) >> shift
    return (values + (half - 1) + ((values >> shift) & 1)) >> shift


def overflow_codes(values, fmt, overflow):
    """Integer results brought into ``fmt``: clamped (``SATURATE``) or wrapped modulo
    ``2**width`` (``WRAP``)."""
    if overflow is Overflow.SATURATE:
        return np.minimum(np.maximum(values, fmt.min_code), fmt.max_code)
    return (values - fmt.min_code) % (1 << fmt.width) + fmt.min_code


def rescale(values, in_fmt, out_fmt, *, rounding=Rounding.HALF_UP,
            overflow=Overflow.SATURATE):
    """Model of :class:`~nnrtl.hw.arith.fixed.Rescale`: round, then overflow."""
    bits = max(in_fmt.width, out_fmt.width) + abs(in_fmt.fraction_bits
                                                  - out_fmt.fraction_bits) + 2
    values = codes(values, bits)
    _check_range(values, in_fmt, "values")
    shifted = round_shift(values, in_fmt.fraction_bits - out_fmt.fraction_bits, rounding)
    return overflow_codes(shifted, out_fmt, overflow)


def mul(a, b, a_fmt, b_fmt, out_fmt=None, *, rounding=Rounding.HALF_UP,
        overflow=Overflow.SATURATE):
    """Model of :class:`~nnrtl.hw.arith.fixed.FixedMul`: the exact product (in
    ``a_fmt.product(b_fmt)``), rescaled to ``out_fmt`` if given."""
    product_fmt = a_fmt.product(b_fmt)
    a = codes(a, product_fmt.width)
    b = codes(b, product_fmt.width)
    _check_range(a, a_fmt, "a")
    _check_range(b, b_fmt, "b")
    product = a * b
    if out_fmt is None or out_fmt == product_fmt:
        return product
    return rescale(product, product_fmt, out_fmt, rounding=rounding, overflow=overflow)


def add(a, b, a_fmt, b_fmt, out_fmt=None, *, subtract=False, rounding=Rounding.HALF_UP,
        overflow=Overflow.SATURATE):
    """Model of :class:`~nnrtl.hw.arith.fixed.FixedAdd`: operands aligned to the larger
    number of fraction bits, added (subtracted) exactly, then rescaled to ``out_fmt`` if
    given (``None``: the exact sum)."""
    fraction = max(a_fmt.fraction_bits, b_fmt.fraction_bits)
    bits = max(a_fmt.width, b_fmt.width) + abs(a_fmt.fraction_bits - b_fmt.fraction_bits) + 4
    if out_fmt is not None:
        bits += max(0, out_fmt.fraction_bits - fraction) + out_fmt.width
    a = codes(a, bits)
    b = codes(b, bits)
    _check_range(a, a_fmt, "a")
    _check_range(b, b_fmt, "b")
    a = round_shift(a, a_fmt.fraction_bits - fraction, Rounding.TRUNCATE)  # left shifts
    b = round_shift(b, b_fmt.fraction_bits - fraction, Rounding.TRUNCATE)
    total = a - b if subtract else a + b
    if out_fmt is None:
        return total
    exact = QFormat(bits, fraction, True)
    return rescale(total, exact, out_fmt, rounding=rounding, overflow=overflow)


def mac(a, b, last, a_fmt, b_fmt, out_fmt=None, *, acc_fmt=None, init=None,
        rounding=Rounding.HALF_UP, overflow=Overflow.SATURATE, acc_overflow=Overflow.WRAP):
    """Model of :class:`~nnrtl.hw.arith.fixed.FixedMac`: one sum per group.

    Parameters
    ----------
    a, b : array_like of int
        Operand codes, one pair per beat.
    last : array_like of bool
        Closes a group; beats after the final ``last`` are an unfinished group and give
        no sum.
    init : array_like of int, optional
        Per-beat ``init`` codes of ``acc_fmt``; only each group's first beat is used.
        ``None``: groups start from 0.

    Returns
    -------
    numpy.ndarray
        The sums (codes of ``out_fmt``, or of ``acc_fmt`` if ``out_fmt`` is None), in
        group order. Each is accumulated beat by beat in ``acc_fmt`` with
        ``acc_overflow`` applied after every addition, then rescaled once.
    """
    product_fmt = a_fmt.product(b_fmt)
    acc_fmt = product_fmt if acc_fmt is None else acc_fmt
    products = mul(a, b, a_fmt, b_fmt)
    last = np.asarray(last, dtype=bool)
    if init is not None:
        init = codes(init, acc_fmt.width + 2)
        _check_range(init, acc_fmt, "init")
    ends = np.flatnonzero(last)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(int)
    sums = []
    for start, end in zip(starts, ends):
        acc = 0 if init is None else int(init[start])
        group = products[start:end + 1]
        if acc_overflow is Overflow.WRAP:  # wrapping addition is associative
            acc = acc + sum(int(p) for p in group)
            acc = (acc - acc_fmt.min_code) % (1 << acc_fmt.width) + acc_fmt.min_code
        else:
            for product in group:
                acc = min(max(acc + int(product), acc_fmt.min_code), acc_fmt.max_code)
        sums.append(acc)
    sums = codes(sums, acc_fmt.width + 2)
    if out_fmt is None or out_fmt == acc_fmt:
        return sums
    return rescale(sums, acc_fmt, out_fmt, rounding=rounding, overflow=overflow)

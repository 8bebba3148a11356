"""Bit-exact numpy models of the floating-point units (:mod:`nnrtl.hw.arith.float`).

Every function works on arrays of bit patterns (any integer dtype; the patterns of
``fmt.width`` bits) and returns patterns as ``uint16``, ``uint32`` or ``uint64``, the
narrowest that holds ``fmt.width`` bits. The arithmetic is an integer implementation of
its own, vectorised with numpy, written from the definition rather than from the RTL:

- an operand is ``(-1)**sign * significand * 2**quantum`` with an integer significand;
- a product is exact (``significand_a * significand_b``); a sum is exact when the
  exponents differ by at most ``precision + 3``, and otherwise the smaller operand is
  replaced by one unit far below the rounding point, which rounds the same way;
- :func:`_round` rounds such an exact value to nearest, ties to even, with the
  format's exponent range (subnormals, overflow to infinity).

Semantics (IEEE 754 for the format's widths, as the RTL): any NaN operand,
``inf - inf`` and ``0 * inf`` give ``fmt.canonical_nan``; an exact zero sum of nonzero
operands is ``+0``, a sum of two zeros is ``-0`` only if both are; a product's sign is
the XOR of the signs. With ``flush_subnormals=True`` a subnormal operand reads as a zero
of its sign, and a result is rounded to ``precision`` bits as if the exponent range were
unbounded and becomes a zero of its sign if its magnitude is then below the smallest
normal number (tininess after rounding).

The formats' widths reach binary64's; when ``2 * precision + 4`` exceeds 62 bits the
model computes with Python integers (``dtype=object``), slower but still exact.

:func:`random_operands` draws the operand mixes the tests use (uniform patterns,
subnormals, overflow, cancellation, exact ties).
"""

import numpy as np

from nnrtl.hw.arith.float_format import FloatFormat


__all__ = ["float_add", "float_sub", "float_mul", "pattern_dtype", "to_bits", "from_bits",
           "to_normal_form", "round_to_format", "special_values", "random_operands", "CATEGORIES"]


def pattern_dtype(fmt):
    """The unsigned dtype that holds one ``fmt`` bit pattern."""
    return np.dtype(np.uint16 if fmt.width <= 16 else np.uint32 if fmt.width <= 32
                    else np.uint64)


def _work_dtype(fmt):
    return np.dtype(np.int64) if 2 * fmt.precision + 4 <= 62 else np.dtype(object)


def _check(fmt):
    if not isinstance(fmt, FloatFormat):
        raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")


def _patterns(fmt, bits):
    bits = np.asarray(bits)
    if bits.dtype.kind not in "iuO":
        raise TypeError(f"bit patterns must be an integer array, not {bits.dtype}")
    if bits.dtype == object:
        return bits & ((1 << fmt.width) - 1)
    return (bits.astype(np.uint64) & np.uint64((1 << fmt.width) - 1)).astype(
        _work_dtype(fmt) if _work_dtype(fmt) != object else object)


def _amount(values, amount):
    """Shift amounts fit to shift ``values`` with (Python ints for an object array)."""
    amount = np.asarray(amount)
    return amount.astype(object) if values.dtype == object else amount


def _bit_length(values):
    """Elementwise ``int.bit_length`` of non-negative integers below 2**128."""
    values = values.copy()
    length = np.zeros(values.shape, dtype=np.int64)
    for step in ((64, 32, 16, 8, 4, 2, 1) if values.dtype == object else (32, 16, 8, 4, 2, 1)):
        big = values >= (1 << step)
        length = length + np.where(big, step, 0)
        values = np.where(big, values >> step, values)
    return length + (values > 0).astype(np.int64)


def _decode(fmt, bits, flush):
    """sign, significand, quantum (value = significand * 2**quantum), nan, inf, zero."""
    sign = (bits >> (fmt.width - 1)) & 1
    field = ((bits >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)).astype(np.int64)
    fraction = bits & fmt.mantissa_mask
    special = field == (1 << fmt.exponent_bits) - 1
    normal = (field > 0) & ~special
    significand = np.where(normal, fraction | (1 << fmt.mantissa_bits), fraction)
    if flush:
        significand = np.where(field == 0, 0, significand)
    significand = np.where(special, 0, significand)
    quantum = np.maximum(field, 1) - fmt.bias - fmt.mantissa_bits
    nan = special & (fraction != 0)
    inf = special & (fraction == 0)
    zero = ~special & (significand == 0)
    return sign, significand, quantum, nan, inf, zero


def _round(fmt, sign, significand, quantum, flush):
    """Encode ``(-1)**sign * significand * 2**quantum`` (``significand`` >= 0), rounded to
    nearest, ties to even. Returns ``(bits, tie, inexact)``."""
    m_bits = fmt.mantissa_bits
    wide = significand.dtype == object
    length = _bit_length(significand)
    exponent = quantum + length - 1  # unbiased exponent of the leading one
    if not flush:
        exponent = np.maximum(exponent, fmt.emin)
    target = exponent - m_bits  # quantum of the result
    # (beyond bit_length + 1 a shift changes nothing: clip it to what the dtype takes)
    right = _amount(significand, np.clip(target - quantum, 0, 2 * fmt.precision + 8 if wide
                                         else 62))
    left = _amount(significand, np.clip(quantum - target, 0, fmt.precision))
    kept = np.where(right > 0, significand >> right, significand << left)
    below = significand - (kept << right)
    half = np.where(right > 0, _amount(significand, 1) << np.maximum(right - 1, 0), 0)
    tie = (right > 0) & (below == half)
    round_up = (right > 0) & ((below > half) | (tie & ((kept & 1) == 1)))
    kept = kept + round_up.astype(np.int64)
    carry = (kept >> fmt.precision).astype(np.int64)  # rounded up to the next binade
    kept = kept >> _amount(kept, carry)
    target = target + carry
    normal = (kept >> m_bits) != 0
    field = np.where(normal, target + m_bits + fmt.bias, 0).astype(np.int64)
    sign_bit = _amount(significand, sign) << (fmt.width - 1)
    field_in_place = _amount(kept, np.clip(field, 0, None)) << m_bits
    bits = sign_bit | field_in_place | (kept & fmt.mantissa_mask)
    bits = np.where(field >= (1 << fmt.exponent_bits) - 1, sign_bit | fmt.infinity, bits)
    if flush:
        bits = np.where(field < 1, sign_bit, bits)
    bits = np.where(significand == 0, sign_bit, bits)
    return bits, tie, (right > 0) & (below != 0)


def _finish(fmt, bits, nan, inf_bits, inf, zero_bits, zero, flags, tie, inexact):
    bits = np.where(zero, zero_bits, bits)
    bits = np.where(inf, inf_bits, bits)
    bits = np.where(nan, fmt.canonical_nan, bits)
    out = np.asarray(bits).astype(np.uint64).astype(pattern_dtype(fmt)) \
        if np.asarray(bits).dtype != object else \
        np.array([int(x) for x in np.ravel(bits)], dtype=np.uint64).reshape(
            np.shape(bits)).astype(pattern_dtype(fmt))
    if not flags:
        return out
    special = nan | inf | zero
    field = (out.astype(np.uint64) >> np.uint64(fmt.mantissa_bits)) & np.uint64(
        (1 << fmt.exponent_bits) - 1)
    return out, {
        "invalid": nan,
        "tie": tie & ~special,
        "inexact": inexact & ~special,
        "overflow": ~special & (field == (1 << fmt.exponent_bits) - 1),
        "subnormal": (field == 0) & ((out.astype(np.uint64)
                                      & np.uint64(fmt.mantissa_mask)) != 0),
    }


def float_add(fmt, a_bits, b_bits, *, flush_subnormals=False, flags=False):
    """``a + b`` on bit patterns, as :class:`nnrtl.hw.arith.float.FloatAdd` computes it.

    Parameters
    ----------
    fmt : FloatFormat
    a_bits, b_bits : array_like of int
        Bit patterns (broadcast against each other).
    flush_subnormals : bool
        The flush-to-zero rule of the module docstring.
    flags : bool
        Also return a dict of boolean arrays: ``invalid`` (NaN result), ``inexact``,
        ``tie`` (the exact result lay halfway between two neighbours), ``overflow``
        (an infinity from finite operands), ``subnormal`` (a subnormal result).

    Returns
    -------
    ndarray of pattern_dtype(fmt)
        Result bit patterns (and the flags when ``flags``).
    """
    _check(fmt)
    a, b = np.broadcast_arrays(_patterns(fmt, a_bits), _patterns(fmt, b_bits))
    sa, ma, qa, nan_a, inf_a, zero_a = _decode(fmt, a, flush_subnormals)
    sb, mb, qb, nan_b, inf_b, zero_b = _decode(fmt, b, flush_subnormals)
    guard = fmt.precision + 3
    # exact value of both, in units of 2**(q_big - guard); a tiny one becomes one unit
    big = np.maximum(qa, qb)
    unit = big - guard

    def scaled(significand, quantum):
        distance = quantum - unit  # negative only for an operand far below the other
        exact = significand << _amount(significand, np.maximum(distance, 0))
        return np.where(distance >= 0, exact, np.where(significand != 0, 1, 0))

    va = scaled(ma, qa)
    vb = scaled(mb, qb)
    total = np.where(sa == 1, -va, va) + np.where(sb == 1, -vb, vb)
    sign = (total < 0).astype(np.int64)
    magnitude = np.where(total < 0, -total, total)
    bits, tie, inexact = _round(fmt, sign, magnitude, unit, flush_subnormals)
    # an exact zero: -0 only when both operands are negative (zeros); otherwise +0
    zero = magnitude == 0
    zero_bits = (sa & sb) << (fmt.width - 1)
    inf = inf_a | inf_b
    inf_bits = np.where(inf_a, sa, sb) << (fmt.width - 1) | fmt.infinity
    nan = nan_a | nan_b | (inf_a & inf_b & (sa != sb))
    return _finish(fmt, bits, nan, inf_bits, inf, zero_bits, zero & ~inf, flags, tie,
                   inexact)


def float_sub(fmt, a_bits, b_bits, *, flush_subnormals=False, flags=False):
    """``a - b`` on bit patterns: ``float_add`` with the sign of ``b`` flipped (as the
    ``subtract`` bit of :class:`nnrtl.hw.arith.float.FloatAdd` does)."""
    _check(fmt)
    b = _patterns(fmt, b_bits) ^ fmt.sign_mask
    return float_add(fmt, a_bits, b, flush_subnormals=flush_subnormals, flags=flags)


def float_mul(fmt, a_bits, b_bits, *, flush_subnormals=False, flags=False):
    """``a * b`` on bit patterns, as :class:`nnrtl.hw.arith.float.FloatMul` computes it.
    Parameters and result as :func:`float_add`."""
    _check(fmt)
    a, b = np.broadcast_arrays(_patterns(fmt, a_bits), _patterns(fmt, b_bits))
    sa, ma, qa, nan_a, inf_a, zero_a = _decode(fmt, a, flush_subnormals)
    sb, mb, qb, nan_b, inf_b, zero_b = _decode(fmt, b, flush_subnormals)
    sign = sa ^ sb
    bits, tie, inexact = _round(fmt, sign, ma * mb, qa + qb, flush_subnormals)
    zero = zero_a | zero_b
    inf = inf_a | inf_b
    nan = nan_a | nan_b | (inf_a & zero_b) | (zero_a & inf_b)
    signed_zero = sign << (fmt.width - 1)
    return _finish(fmt, bits, nan, signed_zero | fmt.infinity, inf, signed_zero, zero,
                   flags, tie, inexact)


# -- conversions -----------------------------------------------------------------------

def to_normal_form(fmt, bits):
    """The normal form (:mod:`nnrtl.hw.arith.float_normal`) of ``fmt`` bit patterns, as
    ``uint64``: the fraction shifted left by the significand's leading zeros ``z``, the
    exponent ``max(field, 1) + mantissa_bits - z`` in ``exponent_bits + 1`` bits."""
    _check(fmt)
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    bits = np.asarray(bits).astype(np.uint64) & np.uint64((1 << fmt.width) - 1)
    sign = (bits >> np.uint64(fmt.width - 1)) & np.uint64(1)
    field = ((bits >> np.uint64(m_bits)) & np.uint64((1 << e_bits) - 1)).astype(np.int64)
    fraction = (bits & np.uint64(fmt.mantissa_mask)).astype(np.int64)
    significand = np.where(field > 0, fraction | (1 << m_bits), fraction)
    zeros = fmt.precision - _bit_length(significand)
    exponent = np.maximum(field, 1) + m_bits - zeros
    shifted = (significand << zeros) & fmt.mantissa_mask
    return ((sign << np.uint64(e_bits + 1 + m_bits))
            | (exponent.astype(np.uint64) << np.uint64(m_bits)) | shifted.astype(np.uint64))


_FLOAT64 = FloatFormat(11, 52)


def round_to_format(fmt, values):
    """Round float64 ``values`` to ``fmt`` (nearest, ties to even; overflow to infinity;
    subnormals exact), returning bit patterns. Every NaN becomes ``fmt.canonical_nan``."""
    _check(fmt)
    values = np.ascontiguousarray(values, dtype=np.float64)
    bits = values.view(np.uint64)
    raw = (bits & np.uint64((1 << 63) - 1)).astype(np.int64)
    sign = (bits >> np.uint64(63)).astype(np.int64)
    field = raw >> 52
    fraction = raw & ((1 << 52) - 1)
    significand = np.where(field > 0, fraction | (1 << 52), fraction)
    quantum = np.maximum(field, 1) - 1075
    finite = field < 2047
    rounded, _tie, _inexact = _round(fmt, sign, np.where(finite, significand, 0),
                                     np.where(finite, quantum, 0), False)
    rounded = np.where(finite, rounded, (sign << (fmt.width - 1)) | fmt.infinity)
    nan = ~finite & (fraction != 0)
    return _finish(fmt, rounded, nan, 0, np.zeros(nan.shape, bool), 0,
                   np.zeros(nan.shape, bool), False, None, None)


def to_bits(fmt, values):
    """Bit patterns of ``values`` (any float dtype) in ``fmt``: exact for values the format
    holds, else rounded as :func:`round_to_format`. NaNs become the canonical NaN; to keep
    a NaN's payload, view a ``float32`` / ``float16`` array as ``uint32`` / ``uint16``."""
    return round_to_format(fmt, np.asarray(values, dtype=np.float64))


def from_bits(fmt, bits):
    """Values of ``fmt`` bit patterns as float64 (exact: every format up to binary64's
    widths fits), with infinities and NaNs."""
    _check(fmt)
    patterns = _patterns(fmt, bits)
    sign, significand, quantum, nan, inf, _zero = _decode(fmt, patterns, False)
    magnitude = np.ldexp(np.asarray(significand, dtype=np.float64),
                         np.asarray(quantum, dtype=np.int64))
    magnitude = np.where(inf, np.inf, np.where(nan, np.nan, magnitude))
    return np.where(np.asarray(sign) == 1, -magnitude, magnitude)


def special_values(fmt):
    """Named bit patterns of the special operands: ``±0``, ``±min_subnormal``,
    ``±max_subnormal``, ``±min_normal``, ``±max_normal``, ``±1``, ``±inf``, ``±qnan``
    (the canonical NaN and its negative) and ``±snan`` (exponent all ones, top fraction
    bit 0, last bit 1)."""
    _check(fmt)
    magnitudes = {
        "0": 0,
        "min_subnormal": fmt.min_subnormal,
        "max_subnormal": fmt.min_normal - 1,
        "min_normal": fmt.min_normal,
        "max_normal": fmt.max_finite,
        "1": fmt.bias << fmt.mantissa_bits,
        "inf": fmt.infinity,
        "qnan": fmt.canonical_nan,
        "snan": fmt.infinity | 1,
    }
    values = {}
    for name, magnitude in magnitudes.items():
        values["+" + name] = magnitude
        values["-" + name] = magnitude | fmt.sign_mask
    return values


# -- operand mixes -----------------------------------------------------------------------

#: Kinds of operand pairs :func:`random_operands` draws, with their shares.
CATEGORIES = {
    "uniform": 0.20,       # uniformly random bit patterns (NaNs, infinities included)
    "special": 0.04,       # one special value (zero, inf, NaN, ...) against anything
    "nearby": 0.12,        # exponents within precision + 4: alignment, guard, sticky
    "subnormal": 0.10,     # subnormal operands (and, for mul, one of any size)
    "underflow": 0.10,     # results around the smallest normal / in the subnormal range
    "overflow": 0.08,      # results around the largest finite number
    "cancellation": 0.14,  # b close to -a (add) / a (sub): massive cancellation, zeros
    "tie": 0.22,           # exact result halfway between two neighbours
}


def _pack(fmt, sign, field, fraction):
    return ((np.asarray(sign, np.int64) << (fmt.width - 1))
            | (np.asarray(field, np.int64) << fmt.mantissa_bits)
            | (np.asarray(fraction, np.int64) & fmt.mantissa_mask))


def _uniform(rng, fmt, n):
    """Uniformly random patterns as int64 (a 64-bit pattern wraps to a negative int64)."""
    return rng.integers(0, 1 << fmt.width, n, dtype=np.uint64).view(np.int64)


def _random_odd(rng, bits):
    """Random odd integers with exactly ``bits`` bits (``bits`` >= 1, elementwise)."""
    low = np.left_shift(1, bits - 1)
    value = low + rng.integers(0, np.maximum(low, 1), size=bits.shape)
    return value | 1


def _draw(fmt, op, kind, n, rng):
    """``n`` operand pairs ``(a, b)`` (int64 patterns) of one kind, for ``op`` in add/mul
    (``sub`` is drawn as ``add`` and its ``b`` negated by the caller)."""
    e_top = (1 << fmt.exponent_bits) - 2  # largest finite exponent field
    m_bits, p, bias = fmt.mantissa_bits, fmt.precision, fmt.bias

    def sign():
        return rng.integers(0, 2, n)

    def fraction():
        return rng.integers(0, 1 << m_bits, n)

    def field(low, high):
        return rng.integers(np.maximum(low, 0), np.maximum(np.minimum(high, e_top), low) + 1)

    if kind == "uniform":
        return _uniform(rng, fmt, n), _uniform(rng, fmt, n)
    if kind == "special":
        specials = np.array(list(special_values(fmt).values()), dtype=np.uint64)
        specials = specials.view(np.int64)
        a = rng.choice(specials, n)
        b = np.where(rng.random(n) < 0.5, rng.choice(specials, n), _uniform(rng, fmt, n))
        swap = rng.random(n) < 0.5
        return np.where(swap, b, a), np.where(swap, a, b)
    if kind == "nearby":
        fa = field(np.ones(n, np.int64), np.full(n, e_top))
        fb = np.clip(fa + rng.integers(-(p + 4), p + 5, n), 1, e_top)
        return _pack(fmt, sign(), fa, fraction()), _pack(fmt, sign(), fb, fraction())
    if kind == "subnormal":
        fa = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 3, n))
        if op == "mul":
            fb = field(np.zeros(n, np.int64), np.full(n, e_top))
        else:
            fb = np.where(rng.random(n) < 0.7, 0, rng.integers(1, 3, n))
        return _pack(fmt, sign(), fa, fraction()), _pack(fmt, sign(), fb, fraction())
    if kind == "underflow":
        if op == "mul":
            # biased exponent of the product ~ fa + fb - bias: aim at 1 - (0 .. p + 2)
            fa = field(np.ones(n, np.int64), np.full(n, e_top))
            fb = np.clip(bias + 1 - rng.integers(-2, p + 3, n) - fa, 0, e_top)
        else:
            fa = rng.integers(0, 4, n)
            fb = np.clip(fa + rng.integers(-1, 2, n), 0, e_top)
        return _pack(fmt, sign(), fa, fraction()), _pack(fmt, sign(), fb, fraction())
    if kind == "overflow":
        if op == "mul":
            fa = field(np.full(n, bias), np.full(n, e_top))
            fb = np.clip(e_top + bias - fa + rng.integers(-2, 2, n), 1, e_top)
            return _pack(fmt, sign(), fa, fraction()), _pack(fmt, sign(), fb, fraction())
        fa = rng.integers(np.maximum(e_top - 2, 1), e_top + 1, n)
        fb = np.clip(fa - rng.integers(0, 3, n), 1, e_top)
        s = sign()
        b_sign = np.where(rng.random(n) < 0.8, s, 1 - s)
        return _pack(fmt, s, fa, fraction()), _pack(fmt, b_sign, fb, fraction())
    if kind == "cancellation":
        a_mag = rng.integers(0, fmt.max_finite + 1, n)
        # the same exponent, or one apart, a few units in the last place away
        step = np.where(rng.random(n) < 0.3, 1 << m_bits, 0)
        b_mag = np.clip(a_mag - step + rng.integers(-4, 5, n), 0, fmt.max_finite)
        s = sign()
        return s << (fmt.width - 1) | a_mag, (1 - s) << (fmt.width - 1) | b_mag
    if kind == "tie":
        return _draw_ties(fmt, op, n, rng, sign, fraction, field)
    raise ValueError(f"kind must be one of {', '.join(CATEGORIES)}, not {kind!r}")


def _draw_ties(fmt, op, n, rng, sign, fraction, field):
    e_top = (1 << fmt.exponent_bits) - 2
    m_bits, p, bias = fmt.mantissa_bits, fmt.precision, fmt.bias
    if op != "mul":
        # b = (2j + 1) * 2**(quantum(a) - 1): an odd multiple of half a's last place
        if e_top < m_bits + 2:
            return _draw(fmt, op, "nearby", n, rng)
        fa = field(np.full(n, m_bits + 2), np.full(n, e_top))
        odd = _random_odd(rng, rng.integers(1, p + 1, n))
        length = np.zeros(n, np.int64)
        for k in range(1, p + 1):
            length = np.where(odd >> (k - 1) != 0, k, length)
        fb = fa - m_bits - 2 + length
        return (_pack(fmt, sign(), fa, fraction()),
                _pack(fmt, sign(), fb, odd << (p - length)))
    # normal results: odd u (ka bits) times odd v (kb bits), ka + kb = p + 2, has p + 1
    # significant bits (a tie) or p + 2 (not); exponents around the middle of the range
    ka = rng.integers(2, p + 1, n) if p > 2 else np.full(n, 2)
    kb = p + 2 - ka
    fa = field(np.full(n, max(1, bias // 2)), np.full(n, bias + bias // 2))
    fb = np.clip(bias + rng.integers(-(bias // 2), bias // 2 + 1, n), 1, e_top)
    # subnormal results (a quarter): ka + kb <= p, and the product's last bit placed at half
    # the subnormal quantum 2**(emin - m_bits), i.e. fa + fb = bias + m_bits - shifts
    subnormal = rng.random(n) < 0.25
    ka_sub = rng.integers(1, p, n)
    kb_sub = rng.integers(1, p - ka_sub + 1)
    ka = np.where(subnormal, ka_sub, ka)
    kb = np.where(subnormal, kb_sub, kb)
    total = bias + m_bits - (p - ka) - (p - kb)
    low, high = np.maximum(1, total - e_top), np.minimum(e_top, total - 1)
    fa_sub = low + rng.integers(0, np.maximum(high - low + 1, 1))
    usable = subnormal & (low <= high)
    fa = np.where(usable, fa_sub, fa)
    fb = np.where(usable, total - fa_sub, fb)
    u, v = _random_odd(rng, ka), _random_odd(rng, kb)
    return (_pack(fmt, sign(), fa, u << (p - ka)), _pack(fmt, sign(), fb, v << (p - kb)))


def random_operands(fmt, op, n, seed):
    """``n`` operand pairs mixing the :data:`CATEGORIES` (shuffled), for ``op`` one of
    ``"add"``, ``"sub"``, ``"mul"``.

    Returns
    -------
    a, b : ndarray of pattern_dtype(fmt)
    kinds : ndarray of str
        The category of each pair.
    """
    _check(fmt)
    if op not in ("add", "sub", "mul"):
        raise ValueError(f"op must be one of add, sub, mul, not {op!r}")
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, list(CATEGORIES.values()))
    parts_a, parts_b, kinds = [], [], []
    for (kind, _share), count in zip(CATEGORIES.items(), counts):
        a, b = _draw(fmt, "mul" if op == "mul" else "add", kind, int(count), rng)
        parts_a.append(np.asarray(a, np.int64))
        parts_b.append(np.asarray(b, np.int64))
        kinds.append(np.full(int(count), kind))
    order = rng.permutation(n)
    dtype = pattern_dtype(fmt)
    a = np.concatenate(parts_a)[order].astype(np.uint64).astype(dtype)
    b = np.concatenate(parts_b)[order].astype(np.uint64).astype(dtype)
    if op == "sub":
        b = b ^ dtype.type(fmt.sign_mask)
    return a, b, np.concatenate(kinds)[order]

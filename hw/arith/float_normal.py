"""The normal form of a float: subnormals normalised once, for operands used many times.

A subnormal operand costs a multiplier a leading-zero count and a left shift on every
product. Where one value meets many products -- a weight kept in a PE's memory, a vector
element passed down a chain of PEs -- it pays to normalise it once on the way in. The
normal form of a :class:`~.float_format.FloatFormat` ``fmt`` is ``fmt`` with one more
exponent bit and no subnormals:

=========  ======================  ==========================================================
field      bits                    meaning
=========  ======================  ==========================================================
fraction   ``mantissa_bits``       below the implicit leading one (always one when finite
                                   and nonzero)
exponent   ``exponent_bits + 1``   ``E``: 0 is a zero; :func:`special_exponent` an infinity
                                   (fraction 0) or a NaN (fraction kept); else the value is
                                   ``1.fraction * 2**(E - mantissa_bits - bias)``
sign       1                       the sign
=========  ======================  ==========================================================

A normal number with exponent field ``f`` has ``E = f + mantissa_bits``; a subnormal with
``z`` leading zeros in its ``precision``-bit significand has ``E = 1 + mantissa_bits - z``
(from 1 up), its fraction shifted left by ``z``. So ``E = max(f, 1) + mantissa_bits - z``
for every encoding, zeros (``z = precision``, ``E = 0``) and specials included: one count,
one shift, one subtraction (:func:`to_normal_form`). The value, and so every result
computed from it, is the value of the encoding it came from; the numpy model is
:func:`nnrtl.sim.golden.float.to_normal_form`.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_format import FloatFormat
from .float_pipeline import leading_zeros, unpack, wire


__all__ = ["normal_width", "special_exponent", "to_normal_form", "unpack_normal",
           "ToNormalForm"]


def _check(fmt):
    if not isinstance(fmt, FloatFormat):
        raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")


def normal_width(fmt):
    """Bits of ``fmt``'s normal form: ``fmt.width + 1`` (33 for fp32)."""
    _check(fmt)
    return fmt.width + 1


def special_exponent(fmt):
    """``E`` of the infinities and NaNs in ``fmt``'s normal form:
    ``2**exponent_bits - 1 + mantissa_bits`` (278 for fp32), below the field's all-ones
    ``2**(exponent_bits + 1) - 1`` for every format (``mantissa_bits <= 52``)."""
    _check(fmt)
    return (1 << fmt.exponent_bits) - 1 + fmt.mantissa_bits


def to_normal_form(m, fmt, bits, name="normal"):
    """The normal form of the encoding ``bits`` of ``fmt``: a leading-zero count on the
    significand, a left shift, an exponent subtraction (combinational)."""
    _check(fmt)
    m_bits = fmt.mantissa_bits
    value = unpack(m, fmt, bits, flush_subnormals=False, name=f"{name}_in")
    zeros = leading_zeros(m, value.significand, f"{name}_zeros")
    fraction = (value.significand << zeros)[:m_bits]
    exponent = (value.exponent + m_bits - zeros)[:fmt.exponent_bits + 1]
    return wire(m, Cat(fraction, exponent, value.sign), name)


def unpack_normal(m, fmt, bits, name):
    """Fields and classes of one normal-form number: ``sign``, ``exponent`` (``E``),
    ``significand`` (``precision`` bits, the leading one always set: a zero or special's
    significand is never used), ``zero``, ``inf``, ``nan``."""
    _check(fmt)
    m_bits = fmt.mantissa_bits
    bits = wire(m, bits, name)
    fraction = bits[:m_bits]
    exponent = bits[m_bits:m_bits + fmt.exponent_bits + 1]
    special = wire(m, exponent == special_exponent(fmt), f"{name}_special")
    fraction_zero = fraction == 0
    return SimpleNamespace(
        sign=bits[m_bits + fmt.exponent_bits + 1],
        exponent=exponent,
        significand=Cat(fraction, Const(1, 1)),
        zero=wire(m, exponent == 0, f"{name}_zero"),
        inf=special & fraction_zero,
        nan=special & ~fraction_zero,
    )


class ToNormalForm(wiring.Component):
    """:func:`to_normal_form` as a unit (combinational: no latency).

    Parameters
    ----------
    fmt : FloatFormat

    Attributes
    ----------
    i : In(fmt.width)
        An encoding of ``fmt``.
    o : Out(fmt.width + 1)
        Its normal form.

    Raises
    ------
    TypeError
        If ``fmt`` is not a :class:`~.float_format.FloatFormat`.
    """

    def __init__(self, fmt):
        self._fmt = fmt
        super().__init__({"i": In(getattr(fmt, "width", 0)), "o": Out(normal_width(fmt))})

    @property
    def fmt(self):
        return self._fmt

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(to_normal_form(m, self._fmt, self.i))
        return m

"""Binary floating-point formats with parametric exponent and fraction widths.

A :class:`FloatFormat` is the IEEE 754 interchange layout, generalised: one sign bit, an
``exponent_bits`` biased exponent and a ``mantissa_bits`` stored fraction, with an
implicit leading one for normal numbers, subnormals at the smallest exponent, and the
all-ones exponent for infinities and NaNs. ``FP32``, ``BF16`` and ``FP16`` are the presets.
The arithmetic units (:mod:`.float_add`, :mod:`.float_mul`) and the numpy models
(:mod:`nnrtl.sim.golden.float`) take a format as their first parameter.
"""

from dataclasses import dataclass


__all__ = ["FloatFormat", "FP32", "BF16", "FP16"]


#: Largest widths a format may have: IEEE binary64's fields.
MAX_EXPONENT_BITS = 11
MAX_MANTISSA_BITS = 52


def _check_int(name, value, lowest, highest):
    if (not isinstance(value, int) or isinstance(value, bool)
            or not lowest <= value <= highest):
        raise TypeError(f"{name} must be an integer from {lowest} to {highest}, "
                        f"not {value!r}")


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: sign, biased exponent, stored fraction.

    Parameters
    ----------
    exponent_bits : int
        Width of the biased exponent field, 2 to 11 (binary64's).
    mantissa_bits : int
        Width of the stored fraction field (the significand without its implicit leading
        bit), 1 to 52 (binary64's). One bit is the least that still tells an infinity from
        a NaN.

    Attributes
    ----------
    width : int
        ``1 + exponent_bits + mantissa_bits``: bits of one encoded number.
    precision : int
        ``mantissa_bits + 1``: significand bits, counting the implicit one.
    bias : int
        ``2 ** (exponent_bits - 1) - 1``.
    emin, emax : int
        Unbiased exponents of the smallest and largest normal binades (``1 - bias`` and
        ``bias``).
    canonical_nan : int
        The one NaN every unit returns: sign 0, exponent all ones, top fraction bit 1, the
        rest 0 (``0x7fc00000`` for fp32).
    infinity : int
        Bit pattern of +inf; ``-inf`` is ``infinity | sign_mask``.
    sign_mask : int
        The sign bit alone.
    max_finite, min_normal, min_subnormal : int
        Bit patterns of the largest finite, the smallest normal and the smallest subnormal
        positive numbers.
    name : str
        ``"fp32"``, ``"bf16"`` or ``"fp16"`` for the presets, ``"e<E>m<M>"`` otherwise.

    Raises
    ------
    TypeError
        If a width is not an integer in its range.
    """

    exponent_bits: int
    mantissa_bits: int

    def __post_init__(self):
        _check_int("exponent_bits", self.exponent_bits, 2, MAX_EXPONENT_BITS)
        _check_int("mantissa_bits", self.mantissa_bits, 1, MAX_MANTISSA_BITS)

    @property
    def width(self):
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def precision(self):
        return self.mantissa_bits + 1

    @property
    def bias(self):
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def emin(self):
        return 1 - self.bias

    @property
    def emax(self):
        return self.bias

    @property
    def exponent_mask(self):
        """The exponent field in place (all ones)."""
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    @property
    def mantissa_mask(self):
        """The fraction field in place (all ones)."""
        return (1 << self.mantissa_bits) - 1

    @property
    def sign_mask(self):
        return 1 << (self.width - 1)

    @property
    def infinity(self):
        return self.exponent_mask

    @property
    def canonical_nan(self):
        return self.exponent_mask | (1 << (self.mantissa_bits - 1))

    @property
    def max_finite(self):
        return self.exponent_mask - 1

    @property
    def min_normal(self):
        return 1 << self.mantissa_bits

    @property
    def min_subnormal(self):
        return 1

    @property
    def name(self):
        for preset_name, preset in _PRESETS.items():
            if preset == self:
                return preset_name
        return f"e{self.exponent_bits}m{self.mantissa_bits}"

    def __str__(self):
        return self.name


#: IEEE 754 binary32.
FP32 = FloatFormat(8, 23)
#: bfloat16: binary32's exponent range with 8 significand bits.
BF16 = FloatFormat(8, 7)
#: IEEE 754 binary16.
FP16 = FloatFormat(5, 10)

_PRESETS = {"fp32": FP32, "bf16": BF16, "fp16": FP16}

"""Piecewise-linear sigmoid and tanh, and the derivatives ``s(1-s)`` and ``1-t^2``.

SBE's post-processing units apply the LSTM's activations by piecewise-linear
approximation (Amin et al., 1997). Here the approximation range ``[-R, R)`` of the input
is cut into ``segments`` equal segments (a power of two, so the segment number is a bit
field of the input and the table is a small ROM); inputs outside the range are first
clamped to it, so the output saturates. On segment ``k``, starting at code ``x0``, the
output is ``base[k] + slope[k] * (x - x0)``, rounded once to the output format.

The coefficients are computed at elaboration by :func:`pwl_table` from the float64
function, quantized to the formats, and shared with the bit-exact model
(:mod:`nnrtl.sim.golden.pwl` evaluates the same :class:`PWLTable`): per segment the
slope is the chord's, rounded to ``coefficient_bits`` (18 by default: a DSP48 B port),
and the base is chosen so the error over the segment's input codes is centred
(min-max for a convex or concave segment).

Maximum absolute error against float64 over every input code (``QFormat(16, 12)`` in,
``QFormat(16, 15)`` out, ``HALF_UP``, ``coefficient_bits=18``; measured with
:func:`nnrtl.sim.golden.pwl.max_abs_error`, the default rows asserted by the tests):

=======  ===========  ========  ========  ========  ========  ========
unit     input range  16 seg.   32 seg.   64 seg.   128 seg.  256 seg.
=======  ===========  ========  ========  ========  ========  ========
sigmoid  [-8, 8)      5.84e-3   1.51e-3   3.88e-4   1.08e-4   3.83e-5
tanh     [-4, 4)      1.17e-2   2.99e-3   7.62e-4   6.71e-4   6.71e-4
tanh     [-8, 8)      4.09e-2   1.17e-2   2.99e-3   7.62e-4   2.01e-4
=======  ===========  ========  ========  ========  ========  ========

The defaults are 64 segments, sigmoid over ``[-8, 8)`` (3.88e-4) and tanh over
``[-4, 4)`` (7.62e-4). The error falls about fourfold per doubling of the segments
until it reaches the saturation outside the range (``1 - tanh(4) = 6.71e-4``) or the
output's half LSB (1.53e-5).

Resources (Yosys ``synth_xilinx``; LUT / FF / DSP; the ROM becomes LUTs) with the
defaults: PWLSigmoid xc7 50 / 68 / 1, xcup 81 / 153 / 1; PWLTanh xc7 103 (+44 MUXF7) /
67 / 1, xcup 137 / 150 / 1; SigmoidDerivative xc7 29 / 19 / 1; TanhDerivative xc7
16 / 19 / 1.
"""

import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Const, Module, Mux, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory

from ..checks import is_int
from .fixed import (QFormat, Overflow, Rounding, _check_formats, _check_modes, _Pipeline,
                    _ports, rescale_value)


__all__ = ["FUNCTIONS", "PWLTable", "pwl_table", "PiecewiseLinear", "PWLSigmoid",
           "PWLTanh", "SigmoidDerivative", "TanhDerivative"]


def _sigmoid(x):
    return 0.5 + 0.5 * np.tanh(0.5 * x)  # no overflow for large |x|


#: The functions a :class:`PWLTable` can approximate, by name (float64 numpy callables).
FUNCTIONS = {"sigmoid": _sigmoid, "tanh": np.tanh}

_MAX_SAMPLES = 4096  # per segment, when fitting coefficients of very wide inputs


@dataclass(frozen=True)
class PWLTable:
    """Segment table of a piecewise-linear unit; built by :func:`pwl_table`.

    Input code ``x`` (of ``in_fmt``) is clamped to ``[low_code, high_code]``; then
    ``u = x - low_code``, segment ``k = u >> offset_bits``, offset
    ``d = u & (2**offset_bits - 1)``, and the output code is
    ``saturate(round_shift(bases[k] + slopes[k] * d, sum_fmt.fraction_bits -
    out_fmt.fraction_bits, rounding), out_fmt)``.

    Attributes
    ----------
    function : str
        Name in :data:`FUNCTIONS`.
    in_fmt, out_fmt : QFormat
    segments : int
    input_range : float
        ``R``: the table covers ``[-R, R)``.
    coefficient_bits : int
        Width of the signed slope codes.
    slope_fraction_bits : int
        Slopes are ``slopes[k] * 2**-(in_fmt.fraction_bits + slope_fraction_bits)`` per
        input code, i.e. ``slopes[k] * 2**-slope_fraction_bits`` in value per value.
    slopes, bases : tuple of int
        Per segment; bases have ``sum_fmt.fraction_bits`` fraction bits.
    rounding : Rounding
        Of the final shift to ``out_fmt``.
    """

    function: str
    in_fmt: QFormat
    out_fmt: QFormat
    segments: int
    input_range: float
    coefficient_bits: int
    slope_fraction_bits: int
    slopes: tuple
    bases: tuple
    rounding: Rounding

    @property
    def range_bits(self):
        """``log2(2 * R * 2**in_fmt.fraction_bits)``: bits of ``u``."""
        return int(math.log2(self.input_range)) + self.in_fmt.fraction_bits + 1

    @property
    def segment_bits(self):
        return self.segments.bit_length() - 1

    @property
    def offset_bits(self):
        """Bits of the offset ``d`` inside a segment (0: one code per segment)."""
        return self.range_bits - self.segment_bits

    @property
    def low_code(self):
        return -(1 << (self.range_bits - 1))

    @property
    def high_code(self):
        return (1 << (self.range_bits - 1)) - 1

    @property
    def sum_fmt(self):
        """Format of ``bases[k] + slopes[k] * d`` (holds every value it takes)."""
        top = (1 << self.offset_bits) - 1
        ends = [b + s * d for s, b in zip(self.slopes, self.bases) for d in (0, top)]
        return QFormat.holding(min(ends), max(ends),
                               self.in_fmt.fraction_bits + self.slope_fraction_bits)

    @property
    def y_fmt(self):
        """The narrowest signed format with ``out_fmt``'s fraction bits holding every output
        (sigmoid and tanh outputs need ``out_fmt.fraction_bits + 2`` bits, whatever the
        width of ``out_fmt``): what a multiplier of the output needs to take."""
        top = (1 << self.offset_bits) - 1
        ends = [b + s * d for s, b in zip(self.slopes, self.bases) for d in (0, top)]
        shift = self.sum_fmt.fraction_bits - self.out_fmt.fraction_bits
        low, high = ((min(ends) >> shift, -(-max(ends) >> shift)) if shift >= 0 else
                     (min(ends) << -shift, max(ends) << -shift))
        return QFormat.holding(min(max(low, self.out_fmt.min_code), -1),
                               min(high, self.out_fmt.max_code), self.out_fmt.fraction_bits)

    @property
    def base_fmt(self):
        return QFormat.holding(min(self.bases), max(self.bases), self.sum_fmt.fraction_bits)



def pwl_table(function, in_fmt, out_fmt, *, segments=64, input_range=None,
              coefficient_bits=18, rounding=Rounding.HALF_UP):
    """Compute the segment table of ``function`` for the given formats.

    Parameters
    ----------
    function : str
        ``"sigmoid"`` or ``"tanh"`` (a key of :data:`FUNCTIONS`).
    in_fmt : QFormat
        Signed input format.
    out_fmt : QFormat
        Output format.
    segments : int
        A power of two, at most the number of input codes in the range.
    input_range : float, optional
        ``R``, a power of two (the table covers ``[-R, R)``), at most ``-in_fmt.min_value``
        and at least ``in_fmt.resolution``. Default: 8 for sigmoid and 4 for tanh,
        capped to the input format's range.
    coefficient_bits : int
        Width of the slope codes, at least 2.
    rounding : Rounding
        Of the output.

    Returns
    -------
    PWLTable

    Raises
    ------
    TypeError, ValueError
        On a parameter of the wrong type or out of range (see the messages).
    """
    if function not in FUNCTIONS:
        raise ValueError(f"function must be one of {', '.join(FUNCTIONS)}, not {function!r}")
    _check_formats(in_fmt=in_fmt, out_fmt=out_fmt)
    if not in_fmt.signed:
        raise ValueError(f"in_fmt ({in_fmt}) must be signed")
    if not is_int(segments) or segments <= 0:
        raise TypeError(f"segments must be a positive integer, not {segments!r}")
    if segments & (segments - 1):
        raise ValueError(f"segments ({segments}) must be a power of two")
    if not is_int(coefficient_bits) or coefficient_bits < 2:
        raise TypeError(f"coefficient_bits must be an integer of at least 2, "
                        f"not {coefficient_bits!r}")
    _check_modes(rounding, Overflow.SATURATE)
    if input_range is None:
        input_range = min({"sigmoid": 8.0, "tanh": 4.0}[function], -in_fmt.min_value)
    if isinstance(input_range, bool) or not isinstance(input_range, (int, float)):
        raise TypeError(f"input_range must be a number, not {input_range!r}")
    if not input_range > 0 or math.frexp(input_range)[0] != 0.5:
        raise ValueError(f"input_range ({input_range!r}) must be a positive power of two")
    if input_range > -in_fmt.min_value:
        raise ValueError(f"input_range ({input_range}) exceeds the range of in_fmt "
                         f"({in_fmt}: [{in_fmt.min_value}, {-in_fmt.min_value}))")
    if input_range < in_fmt.resolution:
        raise ValueError(f"input_range ({input_range}) is below the resolution of in_fmt "
                         f"({in_fmt}: {in_fmt.resolution})")
    codes = int(2 * input_range * 2 ** in_fmt.fraction_bits)
    if segments > codes:
        raise ValueError(f"segments ({segments}) cannot exceed the number of input codes "
                         f"in the range ({codes})")

    f = FUNCTIONS[function]
    width = codes // segments  # codes per segment
    if width <= _MAX_SAMPLES:
        offsets = np.arange(width, dtype=np.float64)
    else:
        offsets = np.unique(np.round(np.linspace(0, width - 1, _MAX_SAMPLES + 1)))
    starts = -codes // 2 + width * np.arange(segments, dtype=np.float64)
    x = (starts[:, None] + offsets[None, :]) * in_fmt.resolution  # [segment, sample]
    y = f(x)
    if width > 1:
        chord = (y[:, -1] - y[:, 0]) / (offsets[-1] * in_fmt.resolution)
    else:
        chord = np.zeros(segments)
    steepest = float(np.max(np.abs(chord)))
    limit = 2 ** (coefficient_bits - 1) - 1
    # The most slope fraction bits for which every rounded slope code fits.
    slope_fraction_bits = (math.floor(math.log2(limit / steepest)) if steepest > 0
                           else coefficient_bits - 1)
    slopes = np.rint(chord * 2.0 ** slope_fraction_bits)
    fraction = in_fmt.fraction_bits + slope_fraction_bits
    residual = y * 2.0 ** fraction - slopes[:, None] * offsets[None, :]
    bases = np.rint((residual.max(axis=1) + residual.min(axis=1)) / 2)
    return PWLTable(function=function, in_fmt=in_fmt, out_fmt=out_fmt, segments=segments,
                    input_range=float(input_range), coefficient_bits=coefficient_bits,
                    slope_fraction_bits=slope_fraction_bits,
                    slopes=tuple(int(s) for s in slopes), bases=tuple(int(b) for b in bases),
                    rounding=rounding)


class PiecewiseLinear(wiring.Component):
    """A piecewise-linear function unit evaluating a :class:`PWLTable`.

    Pipeline (4 stages): clamp the input and split it into segment number and offset,
    read the segment's slope and base from a ROM (``amaranth.lib.memory.Memory``, read
    synchronously); multiply the slope by the offset (one DSP); add the base; round to
    ``out_fmt`` and saturate. Bit-exact model: :func:`nnrtl.sim.golden.pwl.evaluate`.

    Parameters
    ----------
    table : PWLTable

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"x": table.in_fmt.shape})))
    o : Out(stream.Signature(StructLayout({"y": table.out_fmt.shape})))
    table : PWLTable
    latency : int
        4 cycles. Throughput one value per cycle; the pipeline stalls as a whole while
        ``o`` holds a value that is not taken.

    Raises
    ------
    TypeError
        If ``table`` is not a :class:`PWLTable`.
    """

    def __init__(self, table):
        if not isinstance(table, PWLTable):
            raise TypeError(f"table must be a PWLTable, not {table!r}")
        self._table = table
        super().__init__(_ports({"x": table.in_fmt.shape}, {"y": table.out_fmt.shape}))

    table = property(lambda self: self._table)
    in_fmt = property(lambda self: self._table.in_fmt)
    out_fmt = property(lambda self: self._table.out_fmt)
    segments = property(lambda self: self._table.segments)
    latency = property(lambda self: 4, doc="Cycles from input to output: 4.")

    def elaborate(self, platform):
        m = Module()
        table = self._table
        pipe = _Pipeline(m, self.i, self.o)

        x = self.i.p.x
        if table.low_code > table.in_fmt.min_code:
            x = Mux(x < table.low_code, table.low_code, x)
        if table.high_code < table.in_fmt.max_code:
            x = Mux(x > table.high_code, table.high_code, x)
        offset = (x - table.low_code).as_unsigned()[:table.range_bits]
        segment = offset[table.offset_bits:] if table.segment_bits else Const(0, 1)

        layout = data.StructLayout({"slope": signed(table.coefficient_bits),
                                    "base": table.base_fmt.shape})
        m.submodules.rom = rom = Memory(
            shape=layout, depth=table.segments,
            init=[{"slope": s, "base": b} for s, b in zip(table.slopes, table.bases)])
        read = rom.read_port(domain="sync")
        m.d.comb += [read.addr.eq(segment), read.en.eq(pipe.enable)]

        if table.offset_bits:
            d = pipe.register(offset[:table.offset_bits], table.offset_bits, "offset_1")
            product = read.data.slope * d
            product = pipe.register(product, product.shape(), "product_2")
        else:
            product = Const(0, 1)
        base = pipe.register(read.data.base, table.base_fmt.shape, "base_2")
        total = pipe.register(product + base, table.sum_fmt.shape, "sum_3")
        y = pipe.register(rescale_value(total, table.sum_fmt, table.out_fmt, table.rounding,
                                        Overflow.SATURATE), table.out_fmt.shape, "y_4")
        valid = pipe.valid_chain(self.i.valid, self.latency)
        m.d.comb += [self.o.valid.eq(valid[-1]), self.o.p.y.eq(y)]
        return m


class _NamedPWL(PiecewiseLinear):
    function = None

    def __init__(self, in_fmt=QFormat(16, 12), out_fmt=QFormat(16, 15), *, segments=64,
                 input_range=None, coefficient_bits=18, rounding=Rounding.HALF_UP):
        super().__init__(pwl_table(self.function, in_fmt, out_fmt, segments=segments,
                                   input_range=input_range,
                                   coefficient_bits=coefficient_bits, rounding=rounding))


class PWLSigmoid(_NamedPWL):
    """Piecewise-linear sigmoid (SBE's post-processing), ``y = 1 / (1 + exp(-x))``.

    Maximum absolute error against float64 over every input code, defaults (64 segments
    over ``[-8, 8)``, ``QFormat(16, 12)`` -> ``QFormat(16, 15)``): 3.88e-4 (at
    x = -1.378); other segment counts in the module docstring. Latency 4 cycles, one
    value per cycle.

    Parameters
    ----------
    in_fmt : QFormat
        Signed; default ``QFormat(16, 12)`` (``[-8, 8)``).
    out_fmt : QFormat
        Default ``QFormat(16, 15)`` (1.0 saturates to ``1 - 2**-15``).
    segments : int
        Power of two; default 64.
    input_range : float, optional
        ``R``, a power of two; default 8.0 capped to ``in_fmt``'s range. Inputs outside
        ``[-R, R)`` are clamped, so the output saturates at the ends.
    coefficient_bits : int
        Width of the slope codes; default 18.
    rounding : Rounding
        Of the output; default ``HALF_UP``.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"x": in_fmt.shape})))
    o : Out(stream.Signature(StructLayout({"y": out_fmt.shape})))
    table : PWLTable
        The coefficients (shared with :mod:`nnrtl.sim.golden.pwl`).
    latency : int
        4.

    Raises
    ------
    TypeError, ValueError
        As :func:`pwl_table`.
    """

    function = "sigmoid"


class PWLTanh(_NamedPWL):
    """Piecewise-linear ``tanh`` (SBE's post-processing).

    Maximum absolute error against float64 over every input code, defaults (64 segments
    over ``[-4, 4)``, ``QFormat(16, 12)`` -> ``QFormat(16, 15)``): 7.62e-4 (at
    x = -0.688); other segment counts in the module docstring. Latency 4 cycles, one
    value per cycle.

    Parameters, attributes and exceptions are those of :class:`PWLSigmoid`, except that
    ``input_range`` defaults to 4.0.
    """

    function = "tanh"


class _Derivative(wiring.Component):
    def __init__(self, in_fmt, out_fmt, rounding):
        _check_formats(("out_fmt",), in_fmt=in_fmt, out_fmt=out_fmt)
        out_fmt = in_fmt if out_fmt is None else out_fmt
        _check_modes(rounding, Overflow.SATURATE)
        self._in_fmt, self._out_fmt, self._rounding = in_fmt, out_fmt, rounding
        super().__init__(_ports({"x": in_fmt.shape}, {"y": out_fmt.shape}))

    in_fmt = property(lambda self: self._in_fmt)
    out_fmt = property(lambda self: self._out_fmt)
    rounding = property(lambda self: self._rounding)

    latency = property(lambda self: 3, doc="Cycles from input to output: 3.")

    def _finish(self, m, pipe, value):
        wide = QFormat(len(value), 2 * self._in_fmt.fraction_bits, value.shape().signed)
        y = pipe.register(rescale_value(value, wide, self._out_fmt, self._rounding,
                                        Overflow.SATURATE), self._out_fmt.shape, "y_3")
        valid = pipe.valid_chain(self.i.valid, self.latency)
        m.d.comb += [self.o.valid.eq(valid[-1]), self.o.p.y.eq(y)]
        return m


class SigmoidDerivative(_Derivative):
    """``y = s * (1 - s)`` from ``s = sigmoid(x)``: the sigmoid's derivative for
    backward passes.

    ``1 - s`` and the product are exact (``2 * in_fmt.fraction_bits`` fraction bits);
    the one rounding is to ``out_fmt`` with ``rounding``, then saturation. Error against
    float64 ``s * (1 - s)`` of the input code: at most 1/2 LSB of ``out_fmt`` with
    ``HALF_UP`` / ``HALF_EVEN`` (under 1 LSB with ``TRUNCATE``) where the result fits
    (it does for ``s`` in ``[0, 1]``). Fed by :class:`PWLSigmoid` with the defaults, the
    error against the true derivative is at most 2.75e-4 over every input code.

    Parameters
    ----------
    in_fmt : QFormat
        Format of ``s``; default ``QFormat(16, 15)``.
    out_fmt : QFormat, optional
        Default ``in_fmt``.
    rounding : Rounding
        Default ``HALF_UP``.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"x": in_fmt.shape})))
    o : Out(stream.Signature(StructLayout({"y": out_fmt.shape})))
    latency : int
        3 cycles (operands, product, rounding). One value per cycle.

    Raises
    ------
    TypeError
        If a format is not a :class:`QFormat` or ``rounding`` not a :class:`Rounding`.
    """

    def __init__(self, in_fmt=QFormat(16, 15), out_fmt=None, *, rounding=Rounding.HALF_UP):
        super().__init__(in_fmt, out_fmt, rounding)

    def elaborate(self, platform):
        m = Module()
        pipe = _Pipeline(m, self.i, self.o)
        one = 1 << self._in_fmt.fraction_bits
        s = pipe.register(self.i.p.x, self._in_fmt.shape, "s_1")
        complement = one - self.i.p.x
        complement = pipe.register(complement, complement.shape(), "complement_1")
        product = s * complement
        product = pipe.register(product, product.shape(), "product_2")
        return self._finish(m, pipe, product)


class TanhDerivative(_Derivative):
    """``y = 1 - t**2`` from ``t = tanh(x)``: the tanh's derivative for backward passes.

    ``t**2`` and ``1 - t**2`` are exact; the one rounding is to ``out_fmt``, then
    saturation. Error against float64 ``1 - t**2`` of the input code: at most 1/2 LSB
    with ``HALF_UP`` / ``HALF_EVEN`` where the result fits; with the default formats a
    result that rounds to 1.0 (``|t| <= 2**-8``) saturates to ``1 - 2**-15``, an error
    of up to 1 LSB (3.05e-5). Fed by :class:`PWLTanh` with the defaults, the error
    against the true derivative is at most 1.35e-3 over every input code.

    Parameters, attributes and exceptions are those of :class:`SigmoidDerivative`
    (``latency`` 3: operand, square, rounding).
    """

    def __init__(self, in_fmt=QFormat(16, 15), out_fmt=None, *, rounding=Rounding.HALF_UP):
        super().__init__(in_fmt, out_fmt, rounding)

    def elaborate(self, platform):
        m = Module()
        pipe = _Pipeline(m, self.i, self.o)
        one = 1 << (2 * self._in_fmt.fraction_bits)
        t = pipe.register(self.i.p.x, self._in_fmt.shape, "t_1")
        square = t * t
        square = pipe.register(square, square.shape(), "square_2")
        return self._finish(m, pipe, one - square)

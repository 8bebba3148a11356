"""Floating-point sigmoid and tanh by table look-up and linear interpolation, and the
derivative units ``s * (1 - s)`` and ``1 - t**2`` (η-LSTM's activation module).

η-LSTM gives each channel one sigmoid and one tanh unit built on a look-up table
(Sec. V-D). Here the table is indexed by the input's own bits: each binade
``[2**e, 2**(e+1))`` of ``|x|`` from ``2**min_exponent`` to ``2**max_exponent`` is cut
into ``2**segment_bits`` equal segments by the top ``segment_bits`` fraction bits, for
either sign. On the segment starting at ``x0`` (``x`` with the lower fraction bits
cleared) the unit computes ``y = y0 + slope * (x - x0)`` with the float units: ``x - x0``
on a :class:`FloatAdd` (exact, as ``x0 <= x < 2 x0``), the product on a :class:`FloatMul`,
the sum on a second :class:`FloatAdd`, each rounding to nearest even. Below
``2**min_exponent`` (zeros and subnormals included) one segment per sign is the tangent
at 0 (``y0 = f(0)``, ``slope = f'(0)``: ``tanh(x) = x`` and ``sigmoid(x) = 1/2 + x/4``
there, so ``tanh(±0) = ±0``); from ``2**max_exponent`` on (infinities included) the
output saturates (``slope = 0``: ``sigmoid`` gives 0 or 1, ``tanh`` ±1); a NaN gives the
canonical NaN.

The table is computed by :func:`activation_table`, the one function the RTL and the
golden model (:mod:`nnrtl.sim.golden.activation`) share: per segment the slope is the
chord's, rounded to the format, and ``y0`` centres the error over the segment (half the
chord's sag above, half below), rounded to the format.
"""

import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out, connect, flipped

from .float_add import FloatAdd, check_shifts
from .float_format import FloatFormat
from .float_mul import FloatMul


__all__ = ["FUNCTIONS", "ActivationTable", "activation_table", "FloatActivation",
           "FloatSigmoid", "FloatTanh", "FloatSigmoidDerivative", "FloatTanhDerivative"]


def _sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))  # no overflow; accurate relative to the result on both sides
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


#: The functions an :class:`ActivationTable` can hold, by name: ``(float64 function,
#: f'(0), f(-inf), f(+inf))``.
FUNCTIONS = {
    "sigmoid": (_sigmoid, 0.25, 0.0, 1.0),
    "tanh": (np.tanh, 1.0, -1.0, 1.0),
}

_SAMPLES = 257  # points per segment at which the fit's error is centred (at most)


def _encode(fmt, value):
    """The bit pattern of float ``value`` rounded to ``fmt`` (nearest, ties to even)."""
    sign = int(math.copysign(1.0, value) < 0)
    magnitude = abs(value)
    if magnitude == 0:
        return sign << (fmt.width - 1)
    exponent = max(math.frexp(magnitude)[1] - 1, fmt.emin)
    quantum = exponent - fmt.mantissa_bits
    significand = round(math.ldexp(magnitude, -quantum))  # exact scaling; half to even
    field = exponent + fmt.bias if significand >> fmt.mantissa_bits else 0
    if significand >> fmt.precision:  # rounded up into the next binade
        significand >>= 1
        field += 1
    if field >= (1 << fmt.exponent_bits) - 1:
        return (sign << (fmt.width - 1)) | fmt.infinity
    return (sign << (fmt.width - 1)) | (field << fmt.mantissa_bits) | (
        significand & fmt.mantissa_mask)


def _decode(fmt, bits):
    field = (bits >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    significand = (bits & fmt.mantissa_mask) | ((field != 0) << fmt.mantissa_bits)
    value = math.ldexp(significand, max(field, 1) - fmt.bias - fmt.mantissa_bits)
    return -value if bits >> (fmt.width - 1) else value


@dataclass(frozen=True)
class ActivationTable:
    """The look-up table of a float activation unit; built by :func:`activation_table`.

    For input bits with sign ``s``, biased exponent field ``E`` and fraction ``F`` the
    entry is ``address = s * entries_per_sign + index`` with ``index`` 0 when
    ``E < min_exponent + bias`` (the tangent at 0), ``segments + 1`` when
    ``E >= max_exponent + bias`` (saturation, infinities, NaNs), and otherwise
    ``1 + (E - min_exponent - bias) * 2**segment_bits + (F >> (mantissa_bits -
    segment_bits))``.

    Attributes
    ----------
    function : str
        A key of :data:`FUNCTIONS`.
    fmt : FloatFormat
    segment_bits, min_exponent, max_exponent : int
    y0, slope : tuple of int
        Bit patterns of each entry's ``y0`` and ``slope``, ``depth`` of each.
    """

    function: str
    fmt: FloatFormat
    segment_bits: int
    min_exponent: int
    max_exponent: int
    y0: tuple
    slope: tuple

    @property
    def segments(self):
        """Interpolated segments per sign."""
        return (self.max_exponent - self.min_exponent) << self.segment_bits

    @property
    def entries_per_sign(self):
        return self.segments + 2

    @property
    def depth(self):
        return 2 * self.entries_per_sign

    @property
    def offset_bits(self):
        """Fraction bits below the segment number (cleared to give ``x0``)."""
        return self.fmt.mantissa_bits - self.segment_bits


def _check_int(name, value, lowest, highest):
    if (not isinstance(value, int) or isinstance(value, bool)
            or not lowest <= value <= highest):
        raise TypeError(f"{name} must be an integer from {lowest} to {highest}, not {value!r}")


def activation_table(function, fmt, *, segment_bits=None, min_exponent=None,
                     max_exponent=None):
    """Compute the table of ``function`` for ``fmt``.

    Parameters
    ----------
    function : str
        ``"sigmoid"`` or ``"tanh"``.
    fmt : FloatFormat
    segment_bits : int, optional
        Segments per binade are ``2**segment_bits``; 0 to ``fmt.mantissa_bits``. Default
        ``min(6, (fmt.precision - 1) // 2)``: 6 for fp32, 3 for bf16, 5 for fp16.
    min_exponent : int, optional
        ``|x| < 2**min_exponent`` takes the tangent at 0; ``fmt.emin`` or more. Default
        ``max(-8, fmt.emin)``.
    max_exponent : int, optional
        ``|x| >= 2**max_exponent`` saturates; above ``min_exponent``, at most
        ``fmt.emax + 1``. Default 5 for sigmoid, 4 for tanh (``1 - sigmoid(32)`` and
        ``1 - tanh(16)`` are below 1e-13), capped to ``fmt.emax + 1``.

    Returns
    -------
    ActivationTable

    Raises
    ------
    TypeError, ValueError
        On a parameter of the wrong type or out of range (see the messages).
    """
    if function not in FUNCTIONS:
        raise ValueError(f"function must be one of {', '.join(FUNCTIONS)}, not {function!r}")
    if not isinstance(fmt, FloatFormat):
        raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
    if segment_bits is None:
        segment_bits = min(6, (fmt.precision - 1) // 2)
    _check_int("segment_bits", segment_bits, 0, fmt.mantissa_bits)
    if min_exponent is None:
        min_exponent = max(-8, fmt.emin)
    _check_int("min_exponent", min_exponent, fmt.emin, fmt.emax)
    if max_exponent is None:
        max_exponent = min({"sigmoid": 5, "tanh": 4}[function], fmt.emax + 1)
    _check_int("max_exponent", max_exponent, fmt.emin + 1, fmt.emax + 1)
    if max_exponent <= min_exponent:
        raise ValueError(f"max_exponent ({max_exponent}) must exceed min_exponent "
                         f"({min_exponent})")

    f, tangent, low_limit, high_limit = FUNCTIONS[function]
    per_binade = 1 << segment_bits
    exponents = np.repeat(np.arange(min_exponent, max_exponent), per_binade)
    steps = np.tile(np.arange(per_binade), max_exponent - min_exponent)
    start = np.ldexp(1.0 + steps / per_binade, exponents)  # |x0| of every segment
    width = np.ldexp(1.0 / per_binade, exponents)
    codes = 1 << (fmt.mantissa_bits - segment_bits)  # input codes per segment
    offsets = np.linspace(0.0, 1.0, min(codes, _SAMPLES - 1) + 1)  # in segment widths
    y0, slope = [], []
    for sign in (1.0, -1.0):
        x0, h = sign * start, sign * width
        chord = (f(x0 + h) - f(x0)) / h
        rounded = np.array([_decode(fmt, _encode(fmt, c)) for c in chord])
        d = h[:, None] * offsets[None, :-1] if codes > 1 else h[:, None] * 0.0
        residual = f(x0[:, None] + d) - rounded[:, None] * d
        centre = (residual.max(axis=1) + residual.min(axis=1)) / 2
        at_zero = float(f(0.0)) or math.copysign(0.0, sign)  # tanh(-0) = -0
        y0 += [_encode(fmt, at_zero)]
        slope += [_encode(fmt, tangent)]
        y0 += [_encode(fmt, float(c)) for c in centre]
        slope += [_encode(fmt, float(c)) for c in chord]
        y0 += [_encode(fmt, high_limit if sign > 0 else low_limit)]
        slope += [_encode(fmt, 0.0)]
    return ActivationTable(function=function, fmt=fmt, segment_bits=segment_bits,
                           min_exponent=min_exponent, max_exponent=max_exponent,
                           y0=tuple(y0), slope=tuple(slope))


def _check_stages(name, value, lowest, unit):
    _check_int(name, value, lowest, len(unit.CUT_PRIORITY))


def _delay(m, value, unit, name):
    """``value`` delayed alongside ``unit``'s pipeline: one register per stage, each
    loading when the unit's registers do (on ``unit.i.ready``, its pipeline enable)."""
    for stage in range(unit.latency):
        register = Signal.like(value, name=f"{name}_{stage + 1}")
        with m.If(unit.i.ready):
            m.d.sync += register.eq(value)
        value = register
    return value


class _FloatChain(wiring.Component):
    """A few float units in a row on one ``fmt``: parameter checks, ports, properties."""

    _min_adder_stages = 0

    def __init__(self, fmt, *, adder_stages, multiplier_stages, flush_subnormals):
        if not isinstance(fmt, FloatFormat):
            raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
        _check_stages("adder_stages", adder_stages, self._min_adder_stages, FloatAdd)
        _check_stages("multiplier_stages", multiplier_stages, 0, FloatMul)
        if not isinstance(flush_subnormals, bool):
            raise TypeError(f"flush_subnormals must be a bool, not {flush_subnormals!r}")
        self._fmt = fmt
        self._adder_stages = adder_stages
        self._multiplier_stages = multiplier_stages
        self._flush_subnormals = flush_subnormals
        super().__init__({"i": In(stream.Signature(self._input_shape(fmt))),
                          "o": Out(stream.Signature(fmt.width))})

    def _input_shape(self, fmt):
        return fmt.width

    fmt = property(lambda self: self._fmt)
    adder_stages = property(lambda self: self._adder_stages)
    multiplier_stages = property(lambda self: self._multiplier_stages)
    flush_subnormals = property(lambda self: self._flush_subnormals)

    @property
    def latency(self):
        """Cycles from an input handshake to its result (no backpressure)."""
        return self._adder_stages + self._multiplier_stages

    def _adder(self):
        return FloatAdd(self._fmt, stages=self._adder_stages,
                        flush_subnormals=self._flush_subnormals)

    def _multiplier(self):
        return FloatMul(self._fmt, stages=self._multiplier_stages,
                        flush_subnormals=self._flush_subnormals)

    def _one(self):
        return Const(self._fmt.bias << self._fmt.mantissa_bits, self._fmt.width)


class FloatActivation(_FloatChain):
    """Table look-up and linear interpolation of an :class:`ActivationTable`.

    Pipeline: the input's bits give the table address and the subtraction's operands
    (``x - x0``; ``0 - 0`` when saturated); the table (``amaranth.lib.memory.Memory``,
    ``depth`` entries of ``y0`` and ``slope``) is read in step with the first stage of the
    subtracting :class:`FloatAdd`, its outputs delayed alongside the float units'
    pipelines; then ``slope * (x - x0)`` on a :class:`FloatMul` and ``y0 + product`` on a
    second :class:`FloatAdd`. Bit-exact model: :func:`nnrtl.sim.golden.activation.evaluate`.

    Parameters
    ----------
    table : ActivationTable
    adder_stages : int
        Pipeline registers of each adder, 1 to 6 (default 3); at least 1, the table's
        read register being part of the first adder's first stage.
    multiplier_stages : int
        Pipeline registers of the multiplier, 0 to 6 (default 3).
    flush_subnormals : bool
        Passed to the float units.

    Attributes
    ----------
    i : In(stream.Signature(fmt.width))
        ``x`` as a bit pattern.
    o : Out(stream.Signature(fmt.width))
        ``f(x)`` as a bit pattern.
    table : ActivationTable
    latency : int
        ``2 * adder_stages + multiplier_stages`` cycles (9 by default). Throughput one
        value per cycle; while ``o`` holds a result that is not taken, the pipeline stalls.

    Raises
    ------
    TypeError
        If ``table`` is not an :class:`ActivationTable`, or a number of stages or
        ``flush_subnormals`` is not valid.

    Notes
    -----
    Maximum absolute error against float64 ``sigmoid`` / ``tanh`` of the input, NaNs left
    out, with the default tables (``min_exponent`` -8; ``max_exponent`` 5 for sigmoid, 4
    for tanh; ``segment_bits`` 6 for fp32, 3 for bf16, 5 for fp16), measured with
    :func:`nnrtl.sim.golden.activation.max_abs_error` over every input pattern (bf16, fp16)
    or, for fp32, 2**20 patterns evenly spread over all, 2**20 over each sign of the
    interpolated range, 2**20 random ones and both sides of every segment boundary:

    =======  ==================  ==================  ==================  ==================
    unit     fp32                bf16                fp16                table depth
                                                                         fp32 / bf16 / fp16
    =======  ==================  ==================  ==================  ==================
    sigmoid  4.88e-6 (x=2.016)   3.80e-3 (x=3.734)   4.86e-4 (x=0.443)   1668 / 212 / 836
    tanh     9.72e-6 (x=1.008)   3.41e-3 (x=2.297)   4.88e-4 (x=1.196)   1540 / 196 / 772
    bound    5e-6 / 1e-5         2**-8 = 3.91e-3     2**-11 = 4.88e-4
    =======  ==================  ==================  ==================  ==================

    The tests assert the bounds of the last row. For bf16 and fp16 the error is that of the
    format: within one ulp of ``[1/2, 1)`` (``2**-precision``), from rounding ``y0``,
    ``slope`` and the result; more segments do not help. For fp32 it is the interpolation,
    falling fourfold per segment bit (``segment_bits`` 5: 1.93e-5 / 3.85e-5; 7: 1.25e-6 /
    2.48e-6 with tables twice as deep). ``tanh`` is odd bit for bit; at some segment
    boundaries the output steps back by one ulp (the fits are centred per segment), so the
    units are monotonic only to within one ulp.

    The derivative units compute ``s * (1 - s)`` (``1 - s`` on a :class:`FloatAdd`, then a
    :class:`FloatMul`) and ``1 - t * t`` (a :class:`FloatMul`, then a :class:`FloatAdd`),
    each operation rounded to nearest even. For ``s`` in ``[0, 1]`` and ``t`` in ``[-1, 1]``
    the error against float64 of the input is at most one ulp of ``1/4`` for ``s * (1 - s)``
    (measured: 2.22e-8 fp32, 1.38e-3 bf16, 1.79e-4 fp16, against ulps of 2.98e-8, 1.95e-3,
    2.44e-4) and one ulp of ``1/2`` for ``1 - t**2`` (4.47e-8, 2.91e-3, 3.66e-4 against
    5.96e-8, 3.91e-3, 4.88e-4), over every input (bf16, fp16) or the fp32 sweep.
    """

    _min_adder_stages = 1

    def __init__(self, table, *, adder_stages=3, multiplier_stages=3, flush_subnormals=False,
                 shifts="lut"):
        if not isinstance(table, ActivationTable):
            raise TypeError(f"table must be an ActivationTable, not {table!r}")
        check_shifts(shifts, table.fmt)
        self._table = table
        self._shifts = shifts
        super().__init__(table.fmt, adder_stages=adder_stages,
                         multiplier_stages=multiplier_stages,
                         flush_subnormals=flush_subnormals)

    @property
    def shifts(self):
        """How the adders build their shifts (:class:`FloatAdd`'s ``shifts``)."""
        return self._shifts

    def _adder(self):
        return FloatAdd(self._fmt, stages=self._adder_stages,
                        flush_subnormals=self._flush_subnormals, shifts=self._shifts)

    @property
    def table(self):
        return self._table

    @property
    def function(self):
        return self._table.function

    @property
    def latency(self):
        return 2 * self._adder_stages + self._multiplier_stages

    def elaborate(self, platform):
        m = Module()
        table = self._table
        return self._interpolate(m, self.i.payload, table, table.max_exponent,
                                 list(zip(table.y0, table.slope)))

    def _interpolate(self, m, x, table, max_exponent, entries, place=None):
        """The datapath on input bits ``x``: ``table``'s segments up to ``max_exponent``
        (an int, or a value choosing among tables), the entry read at ``place(address)``
        (default: ``address``) of the ``(y0, slope)`` pairs ``entries``."""
        fmt = self._fmt
        width, m_bits = fmt.width, fmt.mantissa_bits
        sign, field, fraction = x[width - 1], x[m_bits:width - 1], x[:m_bits]
        low_field = table.min_exponent + fmt.bias
        high_field = max_exponent + fmt.bias
        below = field < low_field
        above = field >= high_field
        nan = field.all() & fraction.any()
        segment = Cat(fraction[table.offset_bits:], field - low_field)
        segments = (max_exponent - table.min_exponent) << table.segment_bits
        index = Mux(below, 0, Mux(above, segments + 1, 1 + segment))
        address = Mux(sign, segments + 2, 0) + index
        if place is not None:
            address = place(address)
        x0 = Cat(Const(0, table.offset_bits), x[table.offset_bits:])

        m.submodules.subtract = subtract = self._adder()
        m.submodules.multiply = multiply = self._multiplier()
        m.submodules.add = add = self._adder()

        entry = data.StructLayout({"y0": width, "slope": width})
        m.submodules.table = rom = Memory(
            shape=entry, depth=len(entries), init=[{"y0": y, "slope": s} for y, s in entries])
        read = rom.read_port(domain="sync")
        m.d.comb += [
            read.addr.eq(address),
            read.en.eq(subtract.i.ready),  # the subtractor's enable: its first stage
            subtract.i.valid.eq(self.i.valid),
            self.i.ready.eq(subtract.i.ready),
            subtract.i.payload.a.eq(Mux(above & ~nan, 0, x)),
            subtract.i.payload.b.eq(Mux(below | above, 0, x0)),
            subtract.i.payload.subtract.eq(1),
        ]
        slope, y0 = read.data.slope, read.data.y0
        for stage in range(1, self._adder_stages):
            slope_next = Signal(width, name=f"slope_{stage + 1}")
            y0_next = Signal(width, name=f"y0_{stage + 1}")
            with m.If(subtract.i.ready):
                m.d.sync += [slope_next.eq(slope), y0_next.eq(y0)]
            slope, y0 = slope_next, y0_next

        m.d.comb += [
            multiply.i.valid.eq(subtract.o.valid),
            subtract.o.ready.eq(multiply.i.ready),
            multiply.i.payload.a.eq(slope),
            multiply.i.payload.b.eq(subtract.o.payload),
        ]
        y0 = _delay(m, y0, multiply, "y0_product")
        m.d.comb += [
            add.i.valid.eq(multiply.o.valid),
            multiply.o.ready.eq(add.i.ready),
            add.i.payload.a.eq(y0),
            add.i.payload.b.eq(multiply.o.payload),
            add.i.payload.subtract.eq(0),
        ]
        connect(m, add.o, flipped(self.o))
        return m


class _NamedActivation(FloatActivation):
    function_name = None

    def __init__(self, fmt, *, segment_bits=None, min_exponent=None, max_exponent=None,
                 adder_stages=3, multiplier_stages=3, flush_subnormals=False):
        super().__init__(activation_table(self.function_name, fmt, segment_bits=segment_bits,
                                          min_exponent=min_exponent,
                                          max_exponent=max_exponent),
                         adder_stages=adder_stages, multiplier_stages=multiplier_stages,
                         flush_subnormals=flush_subnormals)


class FloatSigmoid(_NamedActivation):
    """Floating-point ``sigmoid(x) = 1 / (1 + exp(-x))`` by table and interpolation.

    Maximum absolute error against float64 with the defaults (Notes of :class:`FloatActivation`):
    4.88e-6 (fp32), 3.80e-3 (bf16), 4.86e-4 (fp16). Latency
    ``2 * adder_stages + multiplier_stages`` (9), one value per cycle.

    Parameters
    ----------
    fmt : FloatFormat
    segment_bits, min_exponent, max_exponent : int, optional
        Of the table, as :func:`activation_table` (default max_exponent 5: saturation
        from ``|x| >= 32``).
    adder_stages, multiplier_stages, flush_subnormals
        As :class:`FloatActivation`.

    Attributes
    ----------
    i, o, table, latency
        As :class:`FloatActivation`.

    Raises
    ------
    TypeError, ValueError
        As :func:`activation_table` and :class:`FloatActivation`.
    """

    function_name = "sigmoid"


class FloatTanh(_NamedActivation):
    """Floating-point ``tanh`` by table and interpolation.

    Maximum absolute error against float64 with the defaults (Notes of :class:`FloatActivation`):
    9.72e-6 (fp32), 3.41e-3 (bf16), 4.88e-4 (fp16); saturation from ``|x| >= 16``.
    Parameters, attributes and exceptions as :class:`FloatSigmoid`.
    """

    function_name = "tanh"


class FloatSigmoidDerivative(_FloatChain):
    """``y = s * (1 - s)`` from ``s = sigmoid(x)``, on a :class:`FloatAdd` (``1 - s``)
    and a :class:`FloatMul`; ``s`` is delayed alongside the adder's pipeline.

    Each operation rounds to nearest even; for ``s`` in ``[0, 1]`` the error against
    float64 ``s * (1 - s)`` is at most one ulp of 1/4 (``1 - s`` is exact for
    ``s >= 1/2``). Bit-exact model: :func:`nnrtl.sim.golden.activation.sigmoid_derivative`.

    Parameters
    ----------
    fmt : FloatFormat
    adder_stages, multiplier_stages : int
        Pipeline registers of the units, 0 to 6 (default 3 each).
    flush_subnormals : bool

    Attributes
    ----------
    i : In(stream.Signature(fmt.width))
    o : Out(stream.Signature(fmt.width))
    latency : int
        ``adder_stages + multiplier_stages`` (6). One value per cycle.

    Raises
    ------
    TypeError
        If ``fmt`` is not a :class:`FloatFormat`, a number of stages is not an integer
        from 0 to 6, or ``flush_subnormals`` is not a bool.
    """

    def __init__(self, fmt, *, adder_stages=3, multiplier_stages=3, flush_subnormals=False):
        super().__init__(fmt, adder_stages=adder_stages, multiplier_stages=multiplier_stages,
                         flush_subnormals=flush_subnormals)

    def elaborate(self, platform):
        m = Module()
        m.submodules.subtract = subtract = self._adder()
        m.submodules.multiply = multiply = self._multiplier()
        s = self.i.payload
        m.d.comb += [
            subtract.i.valid.eq(self.i.valid),
            self.i.ready.eq(subtract.i.ready),
            subtract.i.payload.a.eq(self._one()),
            subtract.i.payload.b.eq(s),
            subtract.i.payload.subtract.eq(1),
            multiply.i.valid.eq(subtract.o.valid),
            subtract.o.ready.eq(multiply.i.ready),
            multiply.i.payload.a.eq(_delay(m, s, subtract, "s")),
            multiply.i.payload.b.eq(subtract.o.payload),
        ]
        connect(m, multiply.o, flipped(self.o))
        return m


class FloatTanhDerivative(_FloatChain):
    """``y = 1 - t * t`` from ``t = tanh(x)``, on a :class:`FloatMul` and a
    :class:`FloatAdd`.

    Each operation rounds to nearest even; for ``t`` in ``[-1, 1]`` the error against
    float64 ``1 - t**2`` is at most one ulp of 1/2. Bit-exact model:
    :func:`nnrtl.sim.golden.activation.tanh_derivative`. Parameters, attributes
    (``latency`` ``multiplier_stages + adder_stages``) and exceptions as
    :class:`FloatSigmoidDerivative`.
    """

    def __init__(self, fmt, *, adder_stages=3, multiplier_stages=3, flush_subnormals=False):
        super().__init__(fmt, adder_stages=adder_stages, multiplier_stages=multiplier_stages,
                         flush_subnormals=flush_subnormals)

    def elaborate(self, platform):
        m = Module()
        m.submodules.multiply = multiply = self._multiplier()
        m.submodules.subtract = subtract = self._adder()
        t = self.i.payload
        m.d.comb += [
            multiply.i.valid.eq(self.i.valid),
            self.i.ready.eq(multiply.i.ready),
            multiply.i.payload.a.eq(t),
            multiply.i.payload.b.eq(t),
            subtract.i.valid.eq(multiply.o.valid),
            multiply.o.ready.eq(subtract.i.ready),
            subtract.i.payload.a.eq(self._one()),
            subtract.i.payload.b.eq(multiply.o.payload),
            subtract.i.payload.subtract.eq(1),
        ]
        connect(m, subtract.o, flipped(self.o))
        return m

"""Fixed-point arithmetic: Q-formats, rescaling, multiply, add and multiply-accumulate.

A :class:`QFormat` is a two's complement (or unsigned) word of ``width`` bits, of which
``fraction_bits`` are fractional: code ``c`` stands for ``c * 2**-fraction_bits``. Units
compute exactly in wide words and round and overflow (:class:`Rounding`,
:class:`Overflow`) only where a result is narrowed to an output format.

SBE's natural use (16-bit operands, 32-bit accumulation and element-wise arithmetic)::

    w = QFormat(16, 12)                           # weights and activations
    FixedMul(w, w)                                # 16 x 16 -> 32-bit product, one DSP
    FixedMac(w, w)                                # sums of products in 32 bits
    Rescale(QFormat(32, 24), w)                   # back to 16 bits, rounded, saturated
    FixedMul(QFormat(32, 24), QFormat(32, 24), QFormat(32, 24))   # element-wise 32-bit

Every unit is a ``wiring.Component`` with ``i`` and ``o`` streams: a pipeline taking one
beat per cycle, with a fixed ``latency``. While ``o`` holds a result that is not taken
the whole pipeline stalls (``i.ready``, which depends on ``o.ready`` but never on
``i.valid``, falls). Bit-exact numpy models: :mod:`nnrtl.sim.golden.fixed`.
"""

import enum
from dataclasses import dataclass

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..checks import check_positive, is_int


__all__ = ["QFormat", "Rounding", "Overflow", "round_shift", "rescale_value",
           "Rescale", "FixedMul", "FixedAdd", "FixedMac"]


@dataclass(frozen=True)
class QFormat:
    """A fixed-point number format: ``width`` bits, ``fraction_bits`` of them fractional.

    Parameters
    ----------
    width : int
        Total number of bits, sign included; positive.
    fraction_bits : int
        Bits right of the binary point, from 0 to ``width``.
    signed : bool
        Two's complement (default) or unsigned.

    Attributes
    ----------
    integer_bits : int
        ``width - fraction_bits`` (the sign bit included).
    shape : amaranth Shape
        ``signed(width)`` or ``unsigned(width)``.
    min_code, max_code, min_value, max_value : int, int, float, float
        The range, as codes and as values; ``resolution`` is ``2**-fraction_bits``.
    name : str
        ``sfix16_En12`` for ``QFormat(16, 12)``, ``ufix8_En8`` for ``QFormat(8, 8, False)``.

    Raises
    ------
    TypeError
        If ``width`` is not a positive integer, ``fraction_bits`` not a non-negative
        integer or ``signed`` not a bool.
    ValueError
        If ``fraction_bits`` exceeds ``width``.
    """

    width: int
    fraction_bits: int
    signed: bool = True

    def __post_init__(self):
        if not is_int(self.width) or self.width <= 0:
            raise TypeError(f"width must be a positive integer, not {self.width!r}")
        if not is_int(self.fraction_bits) or self.fraction_bits < 0:
            raise TypeError(f"fraction_bits must be a non-negative integer, "
                            f"not {self.fraction_bits!r}")
        if not isinstance(self.signed, bool):
            raise TypeError(f"signed must be a bool, not {self.signed!r}")
        if self.fraction_bits > self.width:
            raise ValueError(f"fraction_bits ({self.fraction_bits}) cannot exceed "
                             f"width ({self.width})")

    integer_bits = property(lambda self: self.width - self.fraction_bits)
    shape = property(lambda self: signed(self.width) if self.signed else unsigned(self.width))
    min_code = property(lambda self: -(1 << (self.width - 1)) if self.signed else 0)
    max_code = property(lambda self: (1 << (self.width - self.signed)) - 1)
    resolution = property(lambda self: 2.0 ** -self.fraction_bits)
    min_value = property(lambda self: self.min_code * self.resolution)
    max_value = property(lambda self: self.max_code * self.resolution)
    name = property(lambda self: f"{'s' if self.signed else 'u'}fix{self.width}"
                                 f"_En{self.fraction_bits}",
                    doc="MATLAB-style name: ``sfix16_En12`` is ``QFormat(16, 12)``.")

    def __str__(self):
        return self.name

    def product(self, other):
        """The format that holds every product of a code of ``self`` and one of ``other``
        exactly: widths and fraction bits add, signed if either is signed."""
        return QFormat(self.width + other.width, self.fraction_bits + other.fraction_bits,
                       self.signed or other.signed)

    @classmethod
    def holding(cls, low, high, fraction_bits):
        """The narrowest format with ``fraction_bits`` whose codes include ``low..high``
        (signed only if ``low`` is negative)."""
        magnitude = max((-low - 1).bit_length() if low < 0 else 0, high.bit_length())
        magnitude += low < 0  # the sign bit
        return cls(max(magnitude, fraction_bits, 1), fraction_bits, low < 0)


class Rounding(enum.Enum):
    """How a result is rounded when fraction bits are dropped (a right shift by ``s``).

    ``TRUNCATE``
        Floor, toward minus infinity: the dropped bits are discarded (an arithmetic
        shift). Error in ``(-1, 0]`` LSB; biased by -1/2 LSB on average. No logic.
    ``HALF_UP``
        Round to nearest, ties toward plus infinity: ``(v + 2**(s-1)) >> s``. Error in
        ``(-1/2, +1/2]`` LSB. One adder (a DSP can do it with its C input).
    ``HALF_EVEN``
        Round to nearest, ties to even (convergent rounding, IEEE 754's default and
        ``numpy.round``): ``(v + 2**(s-1) - 1 + bit_s(v)) >> s``. Error in
        ``[-1/2, +1/2]`` LSB and unbiased. One adder.

    Shifts to the left (more fraction bits out than in) are exact and never round.
    """

    TRUNCATE = "truncate"
    HALF_UP = "half_up"
    HALF_EVEN = "half_even"


class Overflow(enum.Enum):
    """What happens to a result outside the range of its output format.

    ``SATURATE``
        Clamp to ``min_code`` / ``max_code``.
    ``WRAP``
        Keep the low ``width`` bits (wrap-around modulo ``2**width``), as a register does.
    """

    SATURATE = "saturate"
    WRAP = "wrap"


def round_shift(code, shift, rounding):
    """Integer ``code`` shifted right by ``shift`` bits with ``rounding`` (left if
    ``shift`` is negative, exactly): the rule :func:`rescale_value` builds in logic and
    :mod:`nnrtl.sim.golden.fixed` models on arrays."""
    if shift <= 0:
        return code << -shift
    if rounding is Rounding.TRUNCATE:
        return code >> shift
    if rounding is Rounding.HALF_UP:
        return (code + (1 << (shift - 1))) >> shift
    return (code + (1 << (shift - 1)) - 1 + ((code >> shift) & 1)) >> shift


def rescale_value(value, in_fmt, out_fmt, rounding, overflow):
    """Combinational rescale of ``value`` (a ``Value`` holding codes of ``in_fmt``).

    Returns an expression to assign to a signal of ``out_fmt.shape``: ``value`` shifted
    with ``rounding`` as :func:`round_shift` does, then saturated (comparators only for
    the bounds it can cross) or left for the assignment to wrap (``Overflow.WRAP``).
    """
    shift = in_fmt.fraction_bits - out_fmt.fraction_bits
    value = value.as_signed() if in_fmt.signed else value.as_unsigned()
    if shift > 0:
        if rounding is Rounding.TRUNCATE:
            shifted = value >> shift
        elif rounding is Rounding.HALF_UP:
            shifted = (value + (1 << (shift - 1))) >> shift
        else:
            if shift < len(value):
                kept_lsb = value[shift]
            else:  # every kept bit is a copy of the sign (or zero)
                kept_lsb = value[-1] if in_fmt.signed else Const(0, 1)
            shifted = (value + ((1 << (shift - 1)) - 1) + kept_lsb) >> shift
    else:
        shifted = value << -shift
    low = round_shift(in_fmt.min_code, shift, rounding)
    high = round_shift(in_fmt.max_code, shift, rounding)
    if overflow is Overflow.SATURATE:
        if high > out_fmt.max_code:
            shifted = Mux(shifted > out_fmt.max_code, out_fmt.max_code, shifted)
        if low < out_fmt.min_code:
            shifted = Mux(shifted < out_fmt.min_code, out_fmt.min_code, shifted)
    return shifted  # the assignment keeps the low bits: the wrap-around


def _check_formats(optional=(), **formats):
    for name, value in formats.items():
        if not isinstance(value, QFormat) and not (value is None and name in optional):
            raise TypeError(f"{name} must be a QFormat, not {value!r}")


def _check_modes(rounding, overflow, **others):
    checks = dict(rounding=(rounding, Rounding, "a"), overflow=(overflow, Overflow, "an"),
                  **{name: (value, Overflow, "an") for name, value in others.items()})
    for name, (value, kind, article) in checks.items():
        if not isinstance(value, kind):
            raise TypeError(f"{name} must be {article} {kind.__name__}, not {value!r}")


class _Pipeline:
    """Registers of a pipeline that stalls as a whole while ``o`` holds a result that is
    not taken: ``enable = ~o.valid | o.ready`` clocks every stage, and is ``i.ready``."""

    def __init__(self, m, i, o):
        self._m = m
        self.enable = Signal()
        m.d.comb += [self.enable.eq(~o.valid | o.ready), i.ready.eq(self.enable)]

    def register(self, value, shape, name):
        """A stage register loaded with ``value`` when enabled; no reset (DSP registers
        need none, the valid bits say when it holds data)."""
        reg = Signal(shape, name=name, reset_less=True)
        with self._m.If(self.enable):
            self._m.d.sync += reg.eq(value)
        return reg

    def valid_chain(self, valid, depth):
        """``[valid, valid delayed 1, ..., valid delayed depth]`` (reset to 0)."""
        chain = [valid]
        for stage in range(1, depth + 1):
            reg = Signal(name=f"valid_{stage}")
            with self._m.If(self.enable):
                self._m.d.sync += reg.eq(chain[-1])
            chain.append(reg)
        return chain


def _multiply(pipe, a, b, a_fmt, b_fmt, stages):
    """``a * b`` after ``stages`` registers: operands (if ``stages >= 2``), product, then
    delays (a DSP48's A/B, M and P registers for ``stages == 3``)."""
    product_fmt = a_fmt.product(b_fmt)
    if stages >= 2:
        a = pipe.register(a, a_fmt.shape, "a_1")
        b = pipe.register(b, b_fmt.shape, "b_1")
    product = pipe.register(a * b, product_fmt.shape, f"product_{min(stages, 2)}")
    for stage in range(3, stages + 1):
        product = pipe.register(product, product_fmt.shape, f"product_{stage}")
    return product


def _ports(inputs, outputs):
    """``i`` / ``o`` stream members with struct payloads of the given fields."""
    return {"i": In(stream.Signature(data.StructLayout(inputs))),
            "o": Out(stream.Signature(data.StructLayout(outputs)))}


class _FixedUnit(wiring.Component):
    """Common properties: formats, modes and latency."""

    a_fmt = property(lambda self: self._a_fmt)
    b_fmt = property(lambda self: self._b_fmt)
    out_fmt = property(lambda self: self._out_fmt)
    rounding = property(lambda self: self._rounding)
    overflow = property(lambda self: self._overflow)
    latency = property(lambda self: self._latency,
                       doc="Cycles from accepting a beat to offering its result (with "
                           "``o.ready`` high). Throughput: one beat per cycle.")

    def _output(self, m, pipe, field, value, valid=None, depth=None):
        """Drive ``o`` from ``value`` and ``valid`` (``i.valid``) delayed ``depth`` stages."""
        valid = self.i.valid if valid is None else valid
        valid = pipe.valid_chain(valid, self._latency if depth is None else depth)[-1]
        m.d.comb += [self.o.valid.eq(valid), getattr(self.o.p, field).eq(value)]
        return m


class Rescale(_FixedUnit):
    """Change the format of a stream of fixed-point values: shift, round, saturate/wrap.

    ``o.value = overflow(round_shift(i.value, in_fmt.fraction_bits -
    out_fmt.fraction_bits, rounding), out_fmt)``: dropped fraction bits are rounded
    (:class:`Rounding`; a left shift is exact), then a result outside ``out_fmt`` is
    clamped or wrapped (:class:`Overflow`); a value that rounds up past ``max_code``
    saturates too. Resources (Yosys ``synth_xilinx``, xc7 and xcup alike), 32 -> 16 bits,
    ``HALF_UP``, ``SATURATE``: 29 LUT, 17 FF.

    Parameters
    ----------
    in_fmt, out_fmt : QFormat
    rounding, overflow : Rounding, Overflow
        Default ``HALF_UP``, ``SATURATE``.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"value": in_fmt.shape})))
    o : Out(stream.Signature(StructLayout({"value": out_fmt.shape})))
    latency : int
        1 cycle. Throughput one value per cycle.

    Raises
    ------
    TypeError
        If a format is not a :class:`QFormat` or a mode of the wrong enum.
    """

    def __init__(self, in_fmt, out_fmt, *, rounding=Rounding.HALF_UP,
                 overflow=Overflow.SATURATE):
        _check_formats(in_fmt=in_fmt, out_fmt=out_fmt)
        _check_modes(rounding, overflow)
        self._in_fmt, self._out_fmt = in_fmt, out_fmt
        self._rounding, self._overflow = rounding, overflow
        self._latency = 1
        super().__init__(_ports({"value": in_fmt.shape}, {"value": out_fmt.shape}))

    in_fmt = property(lambda self: self._in_fmt)

    def elaborate(self, platform):
        m = Module()
        pipe = _Pipeline(m, self.i, self.o)
        value = pipe.register(rescale_value(self.i.p.value, self._in_fmt, self._out_fmt,
                                            self._rounding, self._overflow),
                              self._out_fmt.shape, "value")
        return self._output(m, pipe, "value", value)


class FixedMul(_FixedUnit):
    """Pipelined fixed-point multiplier: ``o.product = a * b``, optionally rescaled.

    The full product is exact in :attr:`product_fmt` (``a_fmt.product(b_fmt)``: widths
    and fraction bits add; 16 x 16 -> 32 bits in one DSP48E1/E2). If ``out_fmt``
    differs from it, one more stage rescales it like :class:`Rescale`. Element-wise
    32-bit multiplies (SBE's ``f * c``, ``o * tanh(c)``) are ``FixedMul(q32, q32, q32)``.

    Resources (Yosys ``synth_xilinx``; LUT / FF / DSP): 16 x 16 -> 32: xc7 1 / 3 / 1 (all
    registers in the DSP48E1), xcup 1 / 99 / 1 (Yosys keeps them in the fabric); rescaled
    to 16 bits: xc7 29 / 20 / 1; 32 x 32 -> 32: xc7 103 / 118 / 4, xcup 166 / 182 / 4.

    Parameters
    ----------
    a_fmt, b_fmt : QFormat
        Operand formats.
    out_fmt : QFormat, optional
        Result format; default :attr:`product_fmt` (no rounding, never overflows).
    rounding, overflow : Rounding, Overflow
        Of the rescale to ``out_fmt``. Default ``HALF_UP``, ``SATURATE``.
    stages : int
        Registers of the multiplier: 1 (product only), 2 (operands and product), 3
        (default: operands, product and output, a DSP48's A/B, M and P registers); more
        add delay registers for retiming.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"a": a_fmt.shape, "b": b_fmt.shape})))
    o : Out(stream.Signature(StructLayout({"product": out_fmt.shape})))
    product_fmt : QFormat
    latency : int
        ``stages``, plus 1 if ``out_fmt`` differs from ``product_fmt``. Throughput one
        product per cycle.

    Raises
    ------
    TypeError
        If a format is not a QFormat, a mode of the wrong enum or ``stages`` not positive.
    """

    def __init__(self, a_fmt, b_fmt, out_fmt=None, *, rounding=Rounding.HALF_UP,
                 overflow=Overflow.SATURATE, stages=3):
        _check_formats(("out_fmt",), a_fmt=a_fmt, b_fmt=b_fmt, out_fmt=out_fmt)
        _check_modes(rounding, overflow)
        check_positive("stages", stages)
        self._a_fmt, self._b_fmt = a_fmt, b_fmt
        self._product_fmt = a_fmt.product(b_fmt)
        self._out_fmt = self._product_fmt if out_fmt is None else out_fmt
        self._rounding, self._overflow = rounding, overflow
        self._stages, self._latency = stages, stages + int(self._out_fmt != self._product_fmt)
        super().__init__(_ports({"a": a_fmt.shape, "b": b_fmt.shape},
                                {"product": self._out_fmt.shape}))

    product_fmt = property(lambda self: self._product_fmt)
    stages = property(lambda self: self._stages)

    def elaborate(self, platform):
        m = Module()
        pipe = _Pipeline(m, self.i, self.o)
        product = _multiply(pipe, self.i.p.a, self.i.p.b, self._a_fmt, self._b_fmt,
                            self._stages)
        if self._out_fmt != self._product_fmt:
            product = pipe.register(
                rescale_value(product, self._product_fmt, self._out_fmt, self._rounding,
                              self._overflow), self._out_fmt.shape, "rescaled")
        return self._output(m, pipe, "product", product)


class FixedAdd(_FixedUnit):
    """Pipelined fixed-point adder (or subtractor): ``o.sum = a + b`` (``a - b``).

    The operands are aligned on the binary point (the one with fewer fraction bits is
    shifted left) and added exactly in :attr:`sum_fmt`, the narrowest format holding
    every result. If ``out_fmt`` differs from it, one more stage rescales the sum like
    :class:`Rescale`. A saturating 32-bit element-wise add is ``FixedAdd(q32, q32,
    q32)``: 67 LUT, 67 FF (Yosys ``synth_xilinx``, xc7 and xcup alike).

    Parameters
    ----------
    a_fmt, b_fmt : QFormat
    out_fmt : QFormat, optional
        Default :attr:`sum_fmt` (exact).
    subtract : bool
        Compute ``a - b`` instead. Default False.
    rounding, overflow : Rounding, Overflow
        Of the rescale to ``out_fmt``. Default ``HALF_UP``, ``SATURATE``.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"a": a_fmt.shape, "b": b_fmt.shape})))
    o : Out(stream.Signature(StructLayout({"sum": out_fmt.shape})))
    sum_fmt : QFormat
    latency : int
        1, plus 1 if ``out_fmt`` differs from ``sum_fmt``. Throughput one sum per cycle.

    Raises
    ------
    TypeError
        If a format is not a QFormat, a mode of the wrong enum or ``subtract`` not a bool.
    """

    def __init__(self, a_fmt, b_fmt, out_fmt=None, *, subtract=False,
                 rounding=Rounding.HALF_UP, overflow=Overflow.SATURATE):
        _check_formats(("out_fmt",), a_fmt=a_fmt, b_fmt=b_fmt, out_fmt=out_fmt)
        _check_modes(rounding, overflow)
        if not isinstance(subtract, bool):
            raise TypeError(f"subtract must be a bool, not {subtract!r}")
        fraction = max(a_fmt.fraction_bits, b_fmt.fraction_bits)
        self._a_shift = fraction - a_fmt.fraction_bits
        self._b_shift = fraction - b_fmt.fraction_bits
        a_low, a_high = (code << self._a_shift for code in (a_fmt.min_code, a_fmt.max_code))
        b_low, b_high = (code << self._b_shift for code in (b_fmt.min_code, b_fmt.max_code))
        low, high = (a_low - b_high, a_high - b_low) if subtract else (a_low + b_low,
                                                                       a_high + b_high)
        self._a_fmt, self._b_fmt, self._subtract = a_fmt, b_fmt, subtract
        self._sum_fmt = QFormat.holding(low, high, fraction)
        self._out_fmt = self._sum_fmt if out_fmt is None else out_fmt
        self._rounding, self._overflow = rounding, overflow
        self._latency = 1 + int(self._out_fmt != self._sum_fmt)
        super().__init__(_ports({"a": a_fmt.shape, "b": b_fmt.shape},
                                {"sum": self._out_fmt.shape}))

    subtract = property(lambda self: self._subtract)
    sum_fmt = property(lambda self: self._sum_fmt)

    def elaborate(self, platform):
        m = Module()
        pipe = _Pipeline(m, self.i, self.o)
        a, b = self.i.p.a << self._a_shift, self.i.p.b << self._b_shift
        total = pipe.register(a - b if self._subtract else a + b, self._sum_fmt.shape, "sum")
        if self._out_fmt != self._sum_fmt:
            total = pipe.register(rescale_value(total, self._sum_fmt, self._out_fmt,
                                                self._rounding, self._overflow),
                                  self._out_fmt.shape, "rescaled")
        return self._output(m, pipe, "sum", total)


class FixedMac(_FixedUnit):
    """Multiply-accumulate: sums of products ``a * b`` over groups closed by ``last``.

    What SBE's PEs need: 16-bit x 16-bit products, exact in 32 bits, accumulated in 32
    bits (by default; any wider ``acc_fmt`` works). A group is the run of beats up to
    and including one with ``last`` set; its sum leaves on ``o``, rescaled to
    ``out_fmt``, and the next group starts from zero -- or, with ``init=True``, from the
    ``init`` field of its first beat (a bias, or a partial sum of a previous block as
    SBE's BB-FIFOs return them). Groups follow each other without a gap. Exactly as
    :func:`nnrtl.sim.golden.fixed.mac` models it::

        acc = init (first beat's init field) or 0
        for each beat:  acc = acc_overflow(acc + a * b, acc_fmt)     # in beat order
        sum = overflow(round_shift(acc, acc_fmt.f - out_fmt.f, rounding), out_fmt)

    ``acc_overflow=WRAP`` (default) wraps modulo ``2**acc_fmt.width`` like a DSP48
    accumulator: the order of the beats does not matter, and the sum is right whenever
    it fits, even if partial sums overflowed. ``SATURATE`` clamps after every addition
    (order-dependent; a comparator in the loop).

    Resources (Yosys ``synth_xilinx``; LUT / FF / DSP), 16 x 16 into 32 bits: xc7 5 / 8 /
    1 (registers and accumulator in the DSP48E1), xcup 69 / 104 / 1; with ``init`` and a
    rescale to 16 bits: xc7 33 / 57 / 1; with ``acc_overflow=SATURATE``: xc7 70 / 40 / 1.

    Parameters
    ----------
    a_fmt, b_fmt : QFormat
        Operand formats.
    out_fmt : QFormat, optional
        Format of the sums; default ``acc_fmt`` (no rescale stage).
    acc_fmt : QFormat, optional
        Accumulator format; default the product format (32 bits for 16 x 16). Must have
        the product's fraction bits and hold every product.
    init : bool
        Add an ``init`` field (``acc_fmt``) to ``i``, read on the first beat of a group.
    rounding, overflow : Rounding, Overflow
        Of the output rescale. Default ``HALF_UP``, ``SATURATE``.
    acc_overflow : Overflow
        Of the accumulator. Default ``WRAP``.
    stages : int
        Registers of the multiplier before the accumulator: 1, or 2 (default: a DSP48's
        A/B and M registers, the accumulator being its P register); more add delays.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"a": a_fmt.shape, "b": b_fmt.shape, "last": 1}
        [+ "init": acc_fmt.shape])))
    o : Out(stream.Signature(StructLayout({"sum": out_fmt.shape})))
    product_fmt, acc_fmt : QFormat
    latency : int
        Cycles from accepting a group's last beat to offering its sum: ``stages + 1``,
        plus 1 if ``out_fmt`` differs from ``acc_fmt``. Throughput one beat per cycle
        (a group of ``n`` beats takes ``n`` cycles).

    Raises
    ------
    TypeError
        If a format is not a QFormat, a mode of the wrong enum, ``init`` not a bool or
        ``stages`` not a positive integer.
    ValueError
        If ``acc_fmt`` has other fraction bits than the product, or cannot hold every
        product.
    """

    def __init__(self, a_fmt, b_fmt, out_fmt=None, *, acc_fmt=None, init=False,
                 rounding=Rounding.HALF_UP, overflow=Overflow.SATURATE,
                 acc_overflow=Overflow.WRAP, stages=2):
        _check_formats(("out_fmt", "acc_fmt"), a_fmt=a_fmt, b_fmt=b_fmt, out_fmt=out_fmt,
                       acc_fmt=acc_fmt)
        _check_modes(rounding, overflow, acc_overflow=acc_overflow)
        if not isinstance(init, bool):
            raise TypeError(f"init must be a bool, not {init!r}")
        check_positive("stages", stages)
        product_fmt = a_fmt.product(b_fmt)
        acc_fmt = product_fmt if acc_fmt is None else acc_fmt
        if acc_fmt.fraction_bits != product_fmt.fraction_bits:
            raise ValueError(f"acc_fmt.fraction_bits ({acc_fmt.fraction_bits}) must equal "
                             f"the product's fraction bits ({product_fmt.fraction_bits})")
        if not (acc_fmt.min_code <= product_fmt.min_code
                and product_fmt.max_code <= acc_fmt.max_code):
            raise ValueError(f"acc_fmt ({acc_fmt}) cannot hold every product "
                             f"({product_fmt})")
        self._a_fmt, self._b_fmt = a_fmt, b_fmt
        self._product_fmt, self._acc_fmt = product_fmt, acc_fmt
        self._out_fmt, self._init = acc_fmt if out_fmt is None else out_fmt, init
        self._rounding, self._overflow, self._acc_overflow = rounding, overflow, acc_overflow
        self._stages, self._latency = stages, stages + 1 + int(self._out_fmt != acc_fmt)
        fields = {"a": a_fmt.shape, "b": b_fmt.shape, "last": 1}
        super().__init__(_ports(fields | ({"init": acc_fmt.shape} if init else {}),
                                {"sum": self._out_fmt.shape}))

    product_fmt = property(lambda self: self._product_fmt)
    acc_fmt = property(lambda self: self._acc_fmt)
    init = property(lambda self: self._init)
    acc_overflow = property(lambda self: self._acc_overflow)
    stages = property(lambda self: self._stages)

    def elaborate(self, platform):
        m = Module()
        pipe = _Pipeline(m, self.i, self.o)
        acc_fmt = self._acc_fmt

        # A group's first beat is the one after a last beat (or after reset).
        in_group = Signal()
        with m.If(self.i.valid & pipe.enable):
            m.d.sync += in_group.eq(~self.i.p.last)

        product = _multiply(pipe, self.i.p.a, self.i.p.b, self._a_fmt, self._b_fmt,
                            self._stages)
        first, last, init = ~in_group, self.i.p.last, self.i.p.init if self._init else None
        for stage in range(1, self._stages + 1):
            first = pipe.register(first, 1, f"first_{stage}")
            last = pipe.register(last, 1, f"last_{stage}")
            if init is not None:
                init = pipe.register(init, acc_fmt.shape, f"init_{stage}")
        valid = pipe.valid_chain(self.i.valid, self._stages)[-1]

        # The accumulator (a DSP48's P register) changes only on valid beats.
        acc = Signal(acc_fmt.shape, reset_less=True)
        total = Mux(first, 0 if init is None else init, acc) + product
        wide_fmt = QFormat(len(total), acc_fmt.fraction_bits, total.shape().signed)
        with m.If(pipe.enable & valid):
            m.d.sync += acc.eq(rescale_value(total, wide_fmt, acc_fmt, Rounding.TRUNCATE,
                                             self._acc_overflow))
        done = Signal()  # acc holds a complete sum
        with m.If(pipe.enable):
            m.d.sync += done.eq(valid & last)
        if self._out_fmt == acc_fmt:  # the accumulator is the output register
            m.d.comb += [self.o.valid.eq(done), self.o.p.sum.eq(acc)]
            return m
        result = pipe.register(rescale_value(acc, acc_fmt, self._out_fmt, self._rounding,
                                             self._overflow), self._out_fmt.shape, "rescaled")
        return self._output(m, pipe, "sum", result, valid=done, depth=1)

"""What the floating-point units share: the stream shell with its pipeline registers, and
the datapath pieces (unpacking, leading-zero count, sticky shift, rounding and packing).

A unit's datapath is straight-line code cut into named steps. :class:`FloatPipeline` puts a
register bank after the steps a unit chose for its ``stages`` setting and carries a valid bit
along; every register loads on one enable, ``~o.valid | o.ready``, so the pipeline moves
as a whole and stalls as a whole.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .float_format import FloatFormat


__all__ = ["FloatUnit", "FloatPipeline", "sideband", "wire", "unpack", "leading_zeros",
           "shift_right_sticky", "align_product", "align_operands", "aligned_sum",
           "normalize_product", "DSP_ONE_HOT", "round_and_pack", "round_fields"]

#: Bits of the one-hot factor a shift-as-product puts on a DSP slice's narrow multiplier
#: input: the unsigned width of its 18-bit signed B port (DSP48E1 and DSP48E2 alike).
DSP_ONE_HOT = 17


class FloatUnit(wiring.Component):
    """Base of the floating-point units: parameter checks, ports, properties.

    A subclass sets ``STEPS`` (its datapath steps in order, the last being the output)
    and ``CUT_PRIORITY`` (the steps that get a register, in the order they are added as
    ``stages`` grows), and passes ``fields``, a function from the format to the payload
    fields, to ``__init__``.
    """

    STEPS = ()
    CUT_PRIORITY = ()

    def __init__(self, fmt, *, stages, flush_subnormals, fields):
        if not isinstance(fmt, FloatFormat):
            raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
        fields = fields(fmt)
        highest = len(self.CUT_PRIORITY)
        if (not isinstance(stages, int) or isinstance(stages, bool)
                or not 0 <= stages <= highest):
            raise TypeError(f"stages must be an integer from 0 to {highest}, not {stages!r}")
        if not isinstance(flush_subnormals, bool):
            raise TypeError(f"flush_subnormals must be a bool, not {flush_subnormals!r}")
        self._fmt = fmt
        self._stages = stages
        self._flush_subnormals = flush_subnormals
        self._layout = data.StructLayout(fields)
        super().__init__({
            "i": In(stream.Signature(self._layout)),
            "o": Out(stream.Signature(fmt.width)),
        })

    @property
    def fmt(self):
        return self._fmt

    @property
    def stages(self):
        return self._stages

    @property
    def flush_subnormals(self):
        return self._flush_subnormals

    @property
    def payload_layout(self):
        """The ``data.StructLayout`` of ``i.payload``."""
        return self._layout

    @property
    def latency(self):
        """Cycles from an input handshake to the result on ``o`` without backpressure
        (equal to ``stages``). Throughput: one result per cycle while ``o.ready`` is high."""
        return self._stages

    @property
    def registered_steps(self):
        """Names of the datapath steps followed by a register, in datapath order."""
        cuts = set(self.CUT_PRIORITY[:self._stages])
        return tuple(step for step in self.STEPS if step in cuts)

    def pipeline(self, m, *, keep=False):
        return FloatPipeline(m, self.i, self.o, self.registered_steps, keep=keep)


class FloatPipeline:
    """Register banks between datapath steps, and the stream handshake around them.

    Create it at the start of ``elaborate``; call :meth:`cut` after each step with the
    values the next steps need (it returns them, registered or not, as attributes); end
    with :meth:`finish`, which drives ``o.payload``, ``o.valid`` and ``i.ready``. With
    ``keep`` the registers carry ``keep`` and ``shreg_extract = "no"`` (flip-flops, never
    shift-register LUTs); without it the Verilog is what it always was.
    """

    def __init__(self, m, i, o, registered_steps, *, keep=False):
        self._m = m
        self._attrs = {"keep": 1, "shreg_extract": "no"} if keep else {}
        self._i = i
        self._o = o
        self._registered = set(registered_steps)
        self.enable = Signal()
        self._valid = i.valid

    def cut(self, step, **values):
        """The ``values`` after ``step``: registers if the step is registered, else wires
        (named signals either way, which also keeps Amaranth's expression trees small)."""
        if step not in self._registered:
            return SimpleNamespace(**{name: wire(self._m, value, f"{step}_{name}")
                                      for name, value in values.items()})
        registered = {}
        with self._m.If(self.enable):
            for name, value in values.items():
                value = Value.cast(value)
                register = Signal(value.shape(), name=f"{step}_{name}", reset_less=True,
                                  attrs=self._attrs)
                self._m.d.sync += register.eq(value)
                registered[name] = register
            valid = Signal(name=f"{step}_valid")
            self._m.d.sync += valid.eq(self._valid)
        self._valid = valid
        return SimpleNamespace(**registered)

    def finish(self, result):
        m = self._m
        if self._registered:
            m.d.comb += [
                self.enable.eq(~self._valid | self._o.ready),
                self._i.ready.eq(self.enable),
            ]
        else:
            m.d.comb += self._i.ready.eq(self._o.ready)
        m.d.comb += [
            self._o.valid.eq(self._valid),
            self._o.payload.eq(result),
        ]


def sideband(m, unit, value, name):
    """``value`` delayed along the pipeline of a float ``unit`` (``FloatMul``/``FloatAdd``):
    ``unit.latency`` registers that load when the unit's pipeline moves (``unit.i.ready``),
    so the returned signal belongs to the result on ``unit.o``."""
    current = value
    for stage in range(unit.latency):
        register = Signal.like(value, name=f"{name}_{stage}")
        with m.If(unit.i.ready):
            m.d.sync += register.eq(current)
        current = register
    return current


def unpack(m, fmt, bits, *, flush_subnormals, name):
    """Fields and classes of one encoded number.

    Returns a namespace with ``sign``; ``exponent`` (the effective biased exponent,
    ``max(field, 1)``); ``significand`` (``precision`` bits with the implicit bit, zero for
    a flushed subnormal); and the flags ``zero``, ``inf``, ``nan``.
    """
    m_bits = fmt.mantissa_bits
    bits = wire(m, bits, name)
    fraction = bits[:m_bits]
    field = bits[m_bits:m_bits + fmt.exponent_bits]
    sign = bits[fmt.width - 1]
    field_zero = wire(m, field == 0, f"{name}_field_zero")
    field_ones = field.all()
    if flush_subnormals:
        zero = field_zero
        significand = Mux(field_zero, 0, Cat(fraction, 1))
    else:
        zero = field_zero & (fraction == 0)
        significand = Cat(fraction, ~field_zero)
    return SimpleNamespace(
        sign=sign,
        exponent=field | field_zero,
        significand=significand,
        zero=zero,
        inf=field_ones & (fraction == 0),
        nan=field_ones & (fraction != 0),
    )


def wire(m, value, name):
    """A combinational signal driven by ``value``. Amaranth walks expressions as trees, so
    an expression used twice is elaborated twice; naming intermediate results keeps a
    deep datapath (a leading-zero tree, say) linear in size."""
    value = Value.cast(value)
    signal = Signal(value.shape(), name=name)
    m.d.comb += signal.eq(value)
    return signal


def leading_zeros(m, value, name="zeros"):
    """Count of leading zeros of ``value`` (``len(value)`` when it is zero); a tree of
    muxes, ``ceil(log2(len(value)))`` levels deep."""
    value = Value.cast(value)
    width = len(value)
    padded = 1 << max(width - 1, 0).bit_length()
    # ones below the LSB: the count saturates at `width` and the word is never zero
    word = Cat(Const((1 << (padded - width)) - 1, padded - width), value)

    def count(bits, path):
        if len(bits) == 1:
            return ~bits[0], ~bits[0]
        half = len(bits) // 2
        low_count, low_zero = count(bits[:half], path + "l")
        high_count, high_zero = count(bits[half:], path + "h")
        return (wire(m, Mux(high_zero, half + low_count, high_count), f"{name}_{path}_count"),
                wire(m, high_zero & low_zero, f"{name}_{path}_zero"))

    result, _zero = count(word, "")
    return wire(m, result[:width.bit_length()], name)


def shift_right_sticky(m, value, amount, name="shifted"):
    """``value >> amount`` and the OR of the bits shifted out (any ``amount``, even wider
    than ``value``). Returns ``(shifted, sticky)``."""
    value = wire(m, value, f"{name}_in")
    width = len(value)
    clamped = Mux(amount > width, width, amount)
    wide = wire(m, Cat(Const(0, width), value) >> clamped, f"{name}_wide")
    return wide[width:], wire(m, wide[:width].any(), f"{name}_sticky")


def _one_hot(m, amount, count, name):
    """``count`` bits, bit ``k`` set when ``amount == k`` (each a LUT of ``amount``'s
    bits)."""
    return wire(m, Cat(*(amount == k for k in range(count))), name)


def _signed_power(m, index, count, negate, name):
    """``-2**index`` if ``negate`` else ``2**index``, as a signed ``count + 1``-bit value
    (``index`` below ``count``): bit ``k`` is ``index <= k`` when negated (the two's
    complement of a power of two), ``index == k`` otherwise, so each bit is one LUT of
    ``index`` and ``negate``, as a plain one-hot bit is."""
    bits = Cat(*(Mux(negate, index <= k, index == k) for k in range(count)), negate)
    return wire(m, bits, name).as_signed()


def align_product(m, significand, amount, extra, negate, name="aligned"):
    """The alignment of an adder's smaller significand as a signed product with a power
    of two, which synthesis maps to one DSP slice, its sum with the larger significand
    left to :func:`aligned_sum`.

    ``(significand << extra) >> amount`` is ``significand * 2**(n - amount) / 2**p``
    (``n = len(significand) + extra``, ``p = len(significand)``): the product keeps the
    shifted value at bit ``low`` and everything shifted out below it, and is negated
    when ``negate`` is set (an effective subtraction) by negating the power of two
    (:func:`_signed_power`: no extra logic). ``amount >= n`` shifts everything out, as
    ``amount = n`` does. The power of two has at most :data:`DSP_ONE_HOT` bits: a wider
    range (``n >= DSP_ONE_HOT``, e.g. fp32's 27) is split: ``amount < DSP_ONE_HOT`` is
    the product alone; a larger ``amount`` first drops the significand's low
    ``DSP_ONE_HOT - extra`` bits, OR-ing them into the lowest bit it keeps (a 2:1
    multiplexer in LUTs), and the product shifts the rest by ``amount - DSP_ONE_HOT``;
    that kept bit then lies below bit ``low`` or at it, and the jammed operand lies
    strictly between the same two multiples of ``2**low`` as the exact one, so
    :func:`aligned_sum` gives the same bits (see there). ``len(significand)`` up to
    ``2 * DSP_ONE_HOT - 1 - 2 * extra`` bits. Returns ``(product, low)``.
    """
    operand, factor, low = align_operands(m, significand, amount, extra, negate, name)
    return wire(m, operand * factor, f"{name}_product"), low


def align_operands(m, significand, amount, extra, negate, name="aligned"):
    """:func:`align_product`'s two factors, not multiplied: ``(operand, factor, low)``,
    ``operand`` unsigned (at most ``2 * DSP_ONE_HOT - 1 - 2 * extra`` bits), ``factor`` a
    signed power of two of at most ``DSP_ONE_HOT + 1`` bits, their product the aligned
    value with bit ``low`` its units bit. For a unit that multiplies them itself (on a
    :class:`~.dsp48e2.DSP48E2Slice`)."""
    p = len(significand)
    n = p + extra
    B = DSP_ONE_HOT
    amount = wire(m, Mux(amount > n, n, amount)[:n.bit_length()], f"{name}_amount")
    if n < B:
        # bit k of the power is 2**k = 2**(n - d); the value lands at bit p
        factor = _signed_power(m, n - amount, n + 1, negate, f"{name}_factor")
        return significand, factor, p
    assert n - B <= B - 1 - extra, "significand too wide for a split alignment product"
    coarse = wire(m, amount >= B, f"{name}_coarse")
    dropped = B - extra
    jammed = Cat(significand[dropped] | significand[:dropped].any(), significand[dropped + 1:])
    operand = wire(m, Mux(coarse, jammed, significand), f"{name}_operand")
    # fine: 2**(B - 1 - d); coarse: 2**(B - 1 - extra - (d - B)); both leave the value
    # at the product's bit B - 1 - extra
    index = Mux(coarse, 2 * B - 1 - extra - amount, B - 1 - amount)
    factor = _signed_power(m, index, B, negate, f"{name}_factor")
    return operand, factor, B - 1 - extra


def aligned_sum(m, large, product, low, width, name="sum"):
    """``large + shifted`` (or ``- shifted``) of an adder with the sticky bit of the
    shifted-out bits at bit 0, from :func:`align_product`'s ``(product, low)``: one
    adder ``(large << low) + product`` (a DSP slice's post-adder where the tool maps it
    there; Yosys 0.70 keeps it a carry chain in LUTs), its low ``low`` bits OR-ed into
    bit ``low``; ``width`` bits.

    The same bits as adding the shifted value with its sticky bit at bit 0 (the
    ``"lut"`` way: ``large +/- (shifted | sticky)``). ``large`` has zeros in its low
    (guard, round, sticky) bits, so for a sum the shifted-out bits only set bit 0. For a
    difference with bits shifted out the floor is ``large - shifted - 1``: odd when
    ``shifted`` is even, and then ``large - (shifted | 1)`` already; even when
    ``shifted`` is odd, one less than ``large - (shifted | 1)`` = ``large - shifted``;
    OR-ing the sticky bit into bit 0 gives ``large - (shifted | 1)`` either way.
    """
    total = wire(m, (Cat(Const(0, low), large) + product)[:low + width], name)
    sticky = total[:low].any()
    return wire(m, Cat(total[low] | sticky, total[low + 1:]), f"{name}_sticky")


def normalize_product(m, total, shift, carry, name="normalized"):
    """An adder's normalisation of ``total`` (``len(total) - 1`` bits and a carry bit
    on top): right by one keeping a sticky bit when ``carry`` is set, else
    ``(total << shift)`` in ``len(total) - 1`` bits, as one product with a one-hot power
    of two (two DSP slices for fp32) instead of a shifter and multiplexers in LUTs.

    The product is ``total[1:] * 2**f`` with ``f = 0`` on a carry (a right shift by
    one) and ``shift + 1`` otherwise; the bit it leaves out, ``total[0]``, comes back
    by what an adder's sum guarantees: a shift of 2 or more comes only from the
    cancellation of operands whose exponents differ by at most 1, so the two low bits
    (round and sticky) are then zero, and ``total[0]`` only counts at shifts 0 and 1
    (bits 0 and 1) and as the sticky bit of a carry. The carry bit itself is the top
    bit on a carry. ``shift`` above ``len(total) - 4`` only occurs for a zero ``total``
    (the product is then 0, as the shift).
    """
    n = len(total) - 1
    factor = wire(m, Cat(*(Mux(carry, k == 0, shift == k - 1) for k in range(n - 1))),
                  f"{name}_factor")
    product = wire(m, (total[1:n] * factor)[:n], f"{name}_product")
    low = total[0]
    return Cat(Mux(carry, low | total[1], (shift == 0) & low),
               product[1] | (~carry & (shift == 1) & low),
               product[2:n - 1], product[n - 1] | carry)


def round_and_pack(m, fmt, *, sign, exponent, significand, guard, sticky, flush_subnormals):
    """Round a finite nonzero result to nearest, ties to even, and encode it.

    Parameters
    ----------
    exponent : Value
        Biased exponent field of the unrounded result: at least 1 for a normal significand
        (leading bit set), 0 for a subnormal one. With ``flush_subnormals`` it may be
        signed and below 1; the result is flushed to a signed zero when the *rounded*
        exponent is below 1 (tininess after rounding). At or above the all-ones exponent
        after rounding: infinity.
    significand : Value
        ``precision`` bits, the leading one (if normal) at the top.
    guard, sticky : Value
        The first bit below the significand, and the OR of all bits below it.
    """
    encoded, overflow, tiny = round_fields(m, fmt, sign=sign, exponent=exponent,
                                           significand=significand, guard=guard,
                                           sticky=sticky, flush_subnormals=flush_subnormals)
    signed_infinity = Cat(Const(fmt.infinity, fmt.width - 1), sign)
    result = Mux(overflow, signed_infinity, encoded)
    if flush_subnormals:
        result = Mux(tiny, Cat(Const(0, fmt.width - 1), sign), result)
    return result


def round_fields(m, fmt, *, sign, exponent, significand, guard, sticky, flush_subnormals):
    """:func:`round_and_pack` before its two multiplexers: ``(encoded, overflow, tiny)``,
    the rounded fields packed as they are, whether the result is an infinity of
    ``sign``, and whether it is flushed to a zero of ``sign`` (always 0 without
    ``flush_subnormals``). A unit with a register after the rounding registers these
    and applies both multiplexers with its special cases, in one LUT a bit."""
    m_bits = fmt.mantissa_bits
    round_up = guard & (sticky | significand[0])
    fraction = wire(m, significand[:m_bits] + round_up, "rounded_fraction")
    rounded_exponent = wire(m, exponent + fraction[m_bits], "rounded_exponent")
    overflow = rounded_exponent >= (1 << fmt.exponent_bits) - 1
    encoded = Cat(fraction[:m_bits], rounded_exponent[:fmt.exponent_bits], sign)
    tiny = (rounded_exponent < 1) if flush_subnormals else Const(0, 1)
    return encoded, overflow, tiny

"""Pipelined floating-point adder / subtractor for any :class:`FloatFormat`."""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux

from .dsp48e2 import check_primitive_form, multiply_add
from .float_pipeline import (DSP_ONE_HOT, FloatUnit, align_operands, align_product, aligned_sum,
                             leading_zeros, normalize_product, round_and_pack, round_fields,
                             shift_right_sticky, unpack, wire)


__all__ = ["FloatAdd", "ADDER_SHIFTS"]

#: The ways :class:`FloatAdd` builds its two shifters.
ADDER_SHIFTS = ("lut", "dsp")


class FloatAdd(FloatUnit):
    """Floating-point ``a + b`` or ``a - b``, rounded to nearest, ties to even.

    IEEE 754 semantics for the format's widths: the result is the exact sum rounded once;
    overflow gives a signed infinity; ``inf - inf`` and any NaN operand give the
    canonical quiet NaN (``fmt.canonical_nan``, sign 0); an exact zero sum of nonzero
    operands is ``+0``, and ``(-0) + (-0)`` is ``-0``. Subnormal operands and results are
    exact unless ``flush_subnormals`` is set: then a subnormal operand counts as a zero of
    its sign and a result below the smallest normal magnitude becomes a zero of the exact
    result's sign (a sum of such operands is never inexact and tiny, so it does not matter
    whether tininess is judged before or after rounding).

    Datapath (``p`` = ``fmt.precision``): order the operands by magnitude; shift the
    smaller significand right by the exponent difference into ``p + 3`` bits (guard,
    round, and a sticky bit collecting everything shifted further); add or subtract;
    count leading zeros and shift left (never below the smallest exponent, which gives
    subnormals), or right by one on a carry; round and encode.

    Parameters
    ----------
    fmt : FloatFormat
    stages : int
        Pipeline registers, 0 to 8 (default 3): 0 is combinational, 1 registers the
        result, 2 adds a register after the alignment shift, 3 one after the leading-zero
        count, 4 after the operand swap, 5 after the addition, 6 after the normalising
        shift, 7 one after the leading-zero tree (before its limit and the exponent
        update), 8 one after the rounding (before the special cases); see
        :attr:`registered_steps`. 8 is η-LSTM's adder (Sec. V-B: "8 cycles in our study").
        The two registers beyond 6 cut the deepest paths left: Yosys (``synth_xilinx
        -family xcup``, flattened) counts 14 logic levels on the fp32 adder's longest path
        at 6 stages, 13 at 7, 12 at 8 (at 7 the longest runs through the rounding: the
        24-bit increment, the exponent carry and the special cases); a register after the
        magnitude comparison instead of the 8th gained nothing over 7 stages and cost 36
        more flip-flops. Every setting computes the same bits; only the registers differ.
    flush_subnormals : bool
        Read subnormal operands as zeros and flush subnormal results to zero (less logic:
        the normalising shift needs no exponent limit).
    shifts : str
        How the alignment and normalising shifts are built: ``"lut"`` (default) as
        shifters (multiplexer trees in LUTs), ``"dsp"`` as products with a power of two,
        which synthesis maps to DSP slices (:func:`.float_pipeline.align_product`: one
        DSP48E2 for fp32; :func:`.float_pipeline.normalize_product`: two). With ``"dsp"``
        the datapath is also arranged for fewer LUTs, every bit the same:

        - the operands are unpacked before the swap (the multiplexer and the implicit bit
          share a LUT);
        - the alignment product is signed, its power of two negated for an effective
          subtraction, and keeps the bits shifted out: the significands' sum adds the
          whole product (:func:`.float_pipeline.aligned_sum`), its low bits OR-ed into
          the sticky bit, so neither an inverter nor a sticky OR before the sum;
        - the normalising product takes the carry (a right shift by one) and the sum's
          low bits too, so no shift-or-carry multiplexer after it;
        - the exponent update is one adder with a carry in (``e + 1`` on a carry, else
          ``e + ~shift + 1``), and an exact zero is read from the leading-zero count;
        - flushing, at 8 stages, the register after the rounding holds the rounded
          fields with the overflow and flush flags (:func:`.float_pipeline.round_fields`),
          and one multiplexer after it takes those with the special cases;
        - the pipeline registers stay flip-flops (``keep``, ``shreg_extract = "no"``):
          the chains of flags and exponents would otherwise become shift-register LUTs
          (the VCU128 has twice as many flip-flops as LUTs).

        The same steps and registers either way; ``"lut"`` uses no DSP slice.
        ``"dsp"`` takes precisions up to ``2 * DSP_ONE_HOT - 8`` (26) bits.
    dsp_primitives : bool or str
        With ``shifts="dsp"``: False (default) leaves the alignment product and the sum to
        the tool (``*`` and ``+``); True puts both on one combinational
        :class:`~.dsp48e2.DSP48E2Slice` Instance (``C + A * B``: the post-adder Yosys
        does not pack), its factors registered in its place; ``"behaviour"`` builds the
        same slice in plain Amaranth, for Amaranth's simulator. The same bits every way.
        Yosys (``synth_xilinx -family xcup``, flattened) counts fp32 with the Instance
        at 269 LUTs instead of 310 (8 stages, flushing) and 293 instead of 321 (3
        stages), 3 DSP48E2 either way (``pytest -m slow -k dsp_primitives_by_yosys``).

    Attributes
    ----------
    i : In(stream.Signature(data.StructLayout({"a": fmt.width, "b": fmt.width, "subtract": 1})))
        Operands as bit patterns; ``subtract`` = 1 computes ``a - b``.
    o : Out(stream.Signature(fmt.width))
        The result's bit pattern.
    latency : int
        ``stages`` cycles from the input handshake to the result. Throughput: one
        operation per cycle while ``o.ready`` is high. The pipeline moves as a whole:
        ``i.ready = ~o.valid | o.ready``, so while a result waits on ``o`` every stage
        holds, bubbles included (with ``stages=0``, ``i.ready = o.ready``).

    Raises
    ------
    TypeError
        If ``fmt`` is not a :class:`FloatFormat`, ``stages`` is not an integer from 0
        to 8, ``flush_subnormals`` is not a bool, or ``dsp_primitives`` is not one of
        :data:`~.dsp48e2.PRIMITIVE_FORMS`.
    ValueError
        If ``shifts`` is not one of :data:`ADDER_SHIFTS`, or is ``"dsp"`` with a
        precision above 26 bits, or ``dsp_primitives`` is set without ``shifts="dsp"``.
    """

    STEPS = ("swap", "align", "add", "zeros", "count", "normalize", "rounded", "round")
    CUT_PRIORITY = ("round", "align", "count", "swap", "add", "normalize", "zeros", "rounded")

    def __init__(self, fmt, *, stages=3, flush_subnormals=False, shifts="lut",
                 dsp_primitives=False):
        super().__init__(fmt, stages=stages, flush_subnormals=flush_subnormals,
                         fields=lambda fmt: {"a": fmt.width, "b": fmt.width, "subtract": 1})
        check_shifts(shifts, fmt)
        check_primitive_form(dsp_primitives)
        if dsp_primitives is not False and shifts != "dsp":
            raise ValueError(f"dsp_primitives={dsp_primitives!r} needs shifts='dsp', not "
                             f"shifts={shifts!r}")
        self._shifts = shifts
        self._dsp_primitives = dsp_primitives

    @property
    def dsp_primitives(self):
        return self._dsp_primitives

    @property
    def shifts(self):
        return self._shifts

    def elaborate(self, platform):
        m = Module()
        fmt = self._fmt
        flush = self._flush_subnormals
        p = fmt.precision
        e_bits = fmt.exponent_bits
        top = fmt.width - 1
        pipe = self.pipeline(m, keep=self._shifts == "dsp")
        # Below 7 stages the zeros and rounded steps are not cut at all (not even named
        # wires), so the Verilog of 0 to 6 stages is what it was before they existed.
        registered = self.registered_steps

        # swap: the operand of larger magnitude goes first
        a = wire(m, self.i.payload.a, "a")
        b = wire(m, Cat(self.i.payload.b[:top], self.i.payload.b[top] ^ self.i.payload.subtract),
                 "b")
        swap = wire(m, b[:top] > a[:top], "swap")
        if self._shifts == "dsp":
            # unpack first, then order the fields: the swap multiplexer and the implicit
            # bit (or a flushed significand) share a LUT
            unpacked_a = unpack(m, fmt, a, flush_subnormals=flush, name="unpacked_a")
            unpacked_b = unpack(m, fmt, b, flush_subnormals=flush, name="unpacked_b")
            large = _select(m, swap, unpacked_b, unpacked_a, "large")
            small = _select(m, swap, unpacked_a, unpacked_b, "small")
        else:
            large = unpack(m, fmt, Mux(swap, b, a), flush_subnormals=flush, name="large")
            small = unpack(m, fmt, Mux(swap, a, b), flush_subnormals=flush, name="small")
        effective_subtract = large.sign ^ small.sign
        s = pipe.cut(
            "swap",
            sign=large.sign,
            zero_sign=large.sign & small.sign,
            subtract=effective_subtract,
            exponent=large.exponent,
            large=large.significand,
            small=small.significand,
            difference=(large.exponent - small.exponent)[:e_bits],
            nan=large.nan | small.nan | (large.inf & small.inf & effective_subtract),
            inf=large.inf,
        )

        # align: p significand bits, guard, round, sticky
        if self._dsp_primitives is not False:
            # the product's factors, multiplied and added on the slice after the cut
            operand, factor, low = align_operands(m, s.small, s.difference, 3, s.subtract)
            small = Cat(operand, factor)
        elif self._shifts == "dsp":
            # the shifted-out bits stay in the product, negated for a subtraction, and
            # go into the sum (aligned_sum)
            small, low = align_product(m, s.small, s.difference, 3, s.subtract)
        else:
            shifted, sticky = shift_right_sticky(m, Cat(Const(0, 3), s.small), s.difference,
                                                 name="aligned")
            small = Cat(shifted[0] | sticky, shifted[1:])
        t = pipe.cut(
            "align",
            sign=s.sign, zero_sign=s.zero_sign, subtract=s.subtract, exponent=s.exponent,
            large=s.large, small=small,
            nan=s.nan, inf=s.inf,
        )

        # add: |large| >= |small|, so the difference is never negative
        large_ext = Cat(Const(0, 3), t.large)
        if self._dsp_primitives is not False:
            # aligned_sum's bits: the sum (large << low) + product, its low bits sticky
            summed = multiply_add(m, t.small[:len(operand)],
                                  t.small[len(operand):].as_signed(),
                                  Cat(Const(0, low), large_ext),
                                  primitive=self._dsp_primitives is True, name="align_dsp")
            total = wire(m, Cat(summed[low] | summed[:low].any(), summed[low + 1:low + p + 4]),
                         "sum_sticky")
        elif self._shifts == "dsp":
            total = aligned_sum(m, large_ext, t.small.as_signed(), low, p + 4)
        else:
            total = Mux(t.subtract, large_ext - t.small, large_ext + t.small)[:p + 4]
        u = pipe.cut(
            "add",
            sign=t.sign, zero_sign=t.zero_sign, exponent=t.exponent, total=total,
            nan=t.nan, inf=t.inf,
        )

        # zeros: the leading-zero tree
        if "zeros" in registered:
            z = pipe.cut(
                "zeros",
                sign=u.sign, zero_sign=u.zero_sign, exponent=u.exponent, total=u.total,
                zeros=leading_zeros(m, u.total[:p + 3]), nan=u.nan, inf=u.inf,
            )
        else:
            z = SimpleNamespace(**vars(u), zeros=leading_zeros(m, u.total[:p + 3]))

        # count: the left shift, limited so the exponent stays >= 1
        carry = z.total[p + 3]
        if flush:
            # a result below the smallest normal is flushed: no need to stop the shift there
            shift = z.zeros
            if self._shifts == "dsp":
                # one adder with a carry in: e + 1 on a carry, else e + ~shift + 1
                ones = Mux(carry, 0, ~Cat(shift, Const(0, 1)).as_signed())
                exponent = (z.exponent + ones + 1)[:e_bits + 2].as_signed()
            else:
                exponent = Mux(carry, z.exponent + 1, z.exponent - shift)
        else:
            limit = z.exponent - 1
            shift = Mux(z.zeros > limit, limit, z.zeros)[:len(z.zeros)]
            exponent = Mux(carry, z.exponent + 1, z.exponent - shift)[:e_bits + 1]
        v = pipe.cut(
            "count",
            sign=z.sign, zero_sign=z.zero_sign, total=z.total, carry=carry, shift=shift,
            exponent=exponent,
            # dsp: the count says it (p + 3 leading zeros and no carry), no 28-bit compare
            exact_zero=(~carry & (z.zeros == p + 3)) if self._shifts == "dsp" else z.total == 0,
            nan=z.nan, inf=z.inf,
        )

        # normalize: left by the count, or right by one (keeping a sticky bit) on a carry
        if self._shifts == "dsp":
            normalized = normalize_product(m, v.total, v.shift, v.carry)
        else:
            carried = Cat(v.total[0] | v.total[1], v.total[2:p + 4])
            shifted = (v.total[:p + 3] << v.shift)[:p + 3]
            normalized = Mux(v.carry, carried, shifted)
        w = pipe.cut(
            "normalize",
            sign=v.sign, zero_sign=v.zero_sign, normalized=normalized,
            exponent=v.exponent if flush else Mux(normalized[p + 2], v.exponent, 0),
            exact_zero=v.exact_zero, nan=v.nan, inf=v.inf,
        )

        # round: to nearest even, then the special cases
        if self._shifts == "dsp" and flush and "rounded" in registered:
            # the rounding's overflow and flush multiplexers join the special cases'
            encoded, overflow, tiny = round_fields(
                m, fmt, sign=w.sign, exponent=w.exponent, significand=w.normalized[3:],
                guard=w.normalized[2], sticky=w.normalized[1] | w.normalized[0],
                flush_subnormals=flush)
            w = pipe.cut("rounded", encoded=encoded, overflow=overflow, tiny=tiny, nan=w.nan,
                         inf=w.inf, sign=w.sign, exact_zero=w.exact_zero,
                         zero_sign=w.zero_sign)
            result = Mux(w.nan, Const(fmt.canonical_nan, fmt.width),
                         Mux(w.inf | (w.overflow & ~w.exact_zero & ~w.tiny),
                             Cat(Const(fmt.infinity, top), w.sign),
                             Mux(w.exact_zero, Cat(Const(0, top), w.zero_sign),
                                 Mux(w.tiny, Cat(Const(0, top), w.sign), w.encoded))))
            x = pipe.cut("round", result=result)
            pipe.finish(x.result)
            return m
        rounded = round_and_pack(m, fmt, sign=w.sign, exponent=w.exponent,
                                 significand=w.normalized[3:], guard=w.normalized[2],
                                 sticky=w.normalized[1] | w.normalized[0],
                                 flush_subnormals=flush)
        if "rounded" in registered:
            w = pipe.cut("rounded", rounded=rounded, nan=w.nan, inf=w.inf, sign=w.sign,
                         exact_zero=w.exact_zero, zero_sign=w.zero_sign)
            rounded = w.rounded
        result = Mux(w.nan, Const(fmt.canonical_nan, fmt.width),
                     Mux(w.inf, Cat(Const(fmt.infinity, top), w.sign),
                         Mux(w.exact_zero, Cat(Const(0, top), w.zero_sign), rounded)))
        x = pipe.cut("round", result=result)
        pipe.finish(x.result)
        return m


def _select(m, select, when_set, when_clear, name):
    """The fields of two :func:`unpack` results, ``when_set`` where ``select`` is set."""
    return SimpleNamespace(**{field: wire(m, Mux(select, getattr(when_set, field),
                                                 getattr(when_clear, field)),
                                          f"{name}_{field}")
                              for field in vars(when_set)})


def check_shifts(shifts, fmt, *, widest=2 * DSP_ONE_HOT - 8):
    """Raise ``ValueError`` unless ``shifts`` is one of :data:`ADDER_SHIFTS` and, for
    ``"dsp"``, ``fmt``'s precision is at most ``widest`` bits (the adder's default: what
    its split alignment product takes)."""
    if shifts not in ADDER_SHIFTS:
        raise ValueError(f"shifts must be 'lut' or 'dsp', not {shifts!r}")
    if shifts == "dsp" and fmt.precision > widest:
        raise ValueError(f"shifts 'dsp' takes a precision of at most {widest} bits, not "
                         f"{fmt.precision}")

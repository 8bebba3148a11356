"""Pipelined floating-point multiplier for any :class:`FloatFormat`."""

from amaranth.hdl import Cat, Const, Module, Mux

from .dsp48e2 import check_primitive_form, unsigned_product
from .float_add import ADDER_SHIFTS, check_shifts
from .float_normal import normal_width, unpack_normal
from .float_pipeline import (DSP_ONE_HOT, FloatUnit, align_product, leading_zeros, round_and_pack,
                             shift_right_sticky, unpack, wire)
from .multiplier import lut_product


__all__ = ["FloatMul", "NORMALIZE", "MULTIPLIER_SHIFTS", "OPERANDS", "PRODUCTS",
           "operand_normalize_exact"]

#: The encodings :class:`FloatMul` takes its operands in.
OPERANDS = ("ieee", "normal")

#: The ways :class:`FloatMul` builds the shifts of an exact (not flushed) multiplier (the
#: adder's: :data:`~.float_add.ADDER_SHIFTS`).
MULTIPLIER_SHIFTS = ADDER_SHIFTS

#: How :class:`FloatMul` builds the significands' product.
PRODUCTS = ("dsp", "lut")

#: Where an exact (not flushed) multiplier normalises a subnormal: the product or the
#: operand (see :class:`FloatMul`).
NORMALIZE = ("product", "operand")


def operand_normalize_exact(fmt):
    """Whether the product of two subnormals of ``fmt`` always rounds to a signed zero
    (below half the smallest subnormal: ``bias - 1 > mantissa_bits + 1``), which the
    ``"operand"`` datapath of :class:`FloatMul` relies on (fp16, bf16, fp32, fp64: yes)."""
    return fmt.bias - 1 > fmt.mantissa_bits + 1


class FloatMul(FloatUnit):
    """Floating-point ``a * b``, rounded to nearest, ties to even.

    IEEE 754 semantics for the format's widths: the exact product rounded once; the sign
    is the XOR of the operands' signs, also for zeros and infinities; overflow gives a
    signed infinity; ``0 * inf`` and any NaN operand give the canonical quiet NaN
    (``fmt.canonical_nan``, sign 0). Subnormal operands and results are exact unless
    ``flush_subnormals`` is set: then a subnormal operand counts as a zero of its sign,
    and the product is rounded to ``precision`` bits as if the exponent range were
    unbounded and becomes a signed zero if its magnitude is then below the smallest
    normal number (tininess detected after rounding).

    Datapath (``p`` = ``fmt.precision``): the ``p x p`` significand product (the
    multiplier the synthesis tool maps to DSP blocks: two DSP48E2 or two DSP48E1 for
    fp32); the normalisation of a subnormal operand's product, either on the product
    (``normalize="product"``: a ``2p``-bit leading-zero count and left shift after the
    multiplier) or on the operand (``"operand"``: the subnormal operand, at most one of
    the two, counted and shifted on ``p`` bits before the multiplier; a product of two
    subnormals is a signed zero); a right shift with a sticky bit for a subnormal or
    vanishing result (on ``2p`` bits, or on ``p + 2`` with the low bits jammed into a
    sticky bit); rounding and encoding. Both give the same bits; ``"operand"`` takes
    fewer LUTs (fp32 on ``xcup``: the bench's arithmetic table) and puts the count and
    shift in the ``unpack`` step, ahead of the multiplier. Operands in the normal form
    (``operands="normal"``, :mod:`.float_normal`: normalised once where they were
    made) need no count and no shift at all.

    Parameters
    ----------
    fmt : FloatFormat
    stages : int
        Pipeline registers, 0 to 6 (default 3): 0 is combinational, 1 registers the
        result, 2 adds a register on the product (the DSP's M or P register), 3 one after
        the normalising shift, 4 on the significands entering the multiplier (the DSP's
        input registers), 5 a second one on the product, 6 one after the leading-zero
        count (see :attr:`registered_steps`).
    flush_subnormals : bool
        Read subnormal operands as zeros and flush subnormal results to zero (less logic:
        no leading-zero count, a one-bit normalising shift, no right shift).
    normalize : str or None
        ``"product"`` or ``"operand"``, see the datapath above; ignored with
        ``flush_subnormals`` and with normal-form operands. ``"operand"`` needs
        :func:`operand_normalize_exact`. None (default): ``"operand"`` where it holds
        (fp16, bf16, fp32), else ``"product"``.
    operands : str
        ``"ieee"`` (default): ``a`` and ``b`` are encodings of ``fmt``; ``"normal"``:
        they are in ``fmt``'s normal form (:func:`.float_normal.to_normal_form`,
        ``fmt.width + 1`` bits), the result an encoding of ``fmt`` all the same. Not with
        ``flush_subnormals``.
    product : str
        How the significands' product is built: ``"dsp"`` (default), a ``*`` that
        synthesis maps to DSP slices (two for fp32), or ``"lut"``, partial products in
        LUTs and carry chains (:func:`.multiplier.lut_product`; no DSP slice). The same
        bits either way.
    shifts : str
        How the right shift of a subnormal result is built (``"operand"`` datapath and
        normal-form operands): ``"lut"`` (default), a shifter in LUTs, or ``"dsp"``, a
        product with a power of two that synthesis maps to one more DSP slice
        (:func:`.float_pipeline.align_product`; about 90 fewer LUTs for fp32 on
        ``xcup``). The same bits either way; ``"dsp"`` also keeps the pipeline registers
        flip-flops (as :class:`~.float_add.FloatAdd`'s) and takes precisions up to
        ``2 * DSP_ONE_HOT - 3`` (31) bits. With ``flush_subnormals`` ``"dsp"`` builds
        the one-bit normalising shift as a product with 1 or 2 of the ``p + 2`` product
        bits it keeps (one more DSP slice up to 24 bits of precision; for fp32 on ``xcup``
        28 LUTs fewer at 4 stages, the bench's arithmetic table), the registers as they
        are. Ignored with ``normalize="product"``.
    dsp_primitives : bool or str
        With ``product="dsp"``: False (default) leaves the significands' product to the
        tool (``*``); True builds it on combinational :class:`~.dsp48e2.DSP48E2Slice`
        Instances (:func:`~.dsp48e2.unsigned_product`: two cascaded through PCIN >> 17
        for fp32); ``"behaviour"`` the same slices in plain Amaranth, for Amaranth's
        simulator. The same bits every way; precisions up to 26 bits. Yosys
        (``synth_xilinx -family xcup``, flattened) counts fp32 with the Instances at 378
        LUTs instead of 421 (3 stages) and 82 instead of 104 (4 stages, flushing, shifts
        ``"dsp"``), the same DSP48E2 (``pytest -m slow -k dsp_primitives_by_yosys``).

    Attributes
    ----------
    i : In(stream.Signature(data.StructLayout({"a": width, "b": width})))
        Operands as bit patterns (``width``: ``fmt.width``, or ``fmt.width + 1`` for
        normal-form operands).
    o : Out(stream.Signature(fmt.width))
        The product's bit pattern.
    latency : int
        ``stages`` cycles from the input handshake to the result. Throughput: one
        operation per cycle while ``o.ready`` is high. The pipeline moves as a whole:
        ``i.ready = ~o.valid | o.ready`` (with ``stages=0``, ``i.ready = o.ready``).

    Raises
    ------
    TypeError
        If ``fmt`` is not a :class:`FloatFormat`, ``stages`` is not an integer from 0
        to 6, ``flush_subnormals`` is not a bool, or ``dsp_primitives`` is not one of
        :data:`~.dsp48e2.PRIMITIVE_FORMS`.
    ValueError
        If ``normalize`` is not one of :data:`NORMALIZE`, or is ``"operand"`` for a format
        where two subnormals can round to a nonzero product; if ``operands`` is not one
        of :data:`OPERANDS`, or ``"normal"`` with ``flush_subnormals``; if ``shifts`` is
        not one of :data:`MULTIPLIER_SHIFTS`, or ``"dsp"`` for a precision above 31 bits;
        if ``product`` is not one of :data:`PRODUCTS`.
    """

    STEPS = ("unpack", "multiply", "product", "count", "normalize", "round")
    CUT_PRIORITY = ("round", "multiply", "normalize", "unpack", "product", "count")

    def __init__(self, fmt, *, stages=3, flush_subnormals=False, normalize=None,
                 operands="ieee", shifts="lut", product="dsp", dsp_primitives=False):
        if operands not in OPERANDS:
            raise ValueError(f"operands must be 'ieee' or 'normal', not {operands!r}")
        if product not in PRODUCTS:
            raise ValueError(f"product must be 'dsp' or 'lut', not {product!r}")
        width = normal_width(fmt) if operands == "normal" else getattr(fmt, "width", None)
        super().__init__(fmt, stages=stages, flush_subnormals=flush_subnormals,
                         fields=lambda fmt: {"a": width, "b": width})
        if operands == "normal" and flush_subnormals:
            raise ValueError("operands 'normal' are exact: not with flush_subnormals")
        if normalize is None:
            normalize = ("operand" if operands == "normal" or operand_normalize_exact(fmt)
                         else "product")
        if normalize not in NORMALIZE:
            raise ValueError(f"normalize must be one of {', '.join(NORMALIZE)}, not "
                             f"{normalize!r}")
        if normalize == "operand" and operands == "ieee" and not operand_normalize_exact(fmt):
            raise ValueError(f"normalize 'operand' needs bias - 1 > mantissa_bits + 1 (two "
                             f"subnormals' product rounding to zero); {fmt} has bias "
                             f"{fmt.bias} and {fmt.mantissa_bits} mantissa bits: use "
                             f"'product'")
        # the right shift's product takes p + 2 bits, split as align_product's
        check_shifts(shifts, fmt, widest=2 * DSP_ONE_HOT - 3)
        self._normalize = normalize
        self._operands = operands
        check_primitive_form(dsp_primitives)
        if dsp_primitives is not False and (product != "dsp" or fmt.precision > 26):
            raise ValueError(f"dsp_primitives={dsp_primitives!r} needs product='dsp' and a "
                             f"precision of at most 26 bits, not product={product!r} and "
                             f"{fmt.precision} bits")
        self._shifts = shifts
        self._product = product
        self._dsp_primitives = dsp_primitives

    @property
    def operands(self):
        """The operands' encoding: ``"ieee"`` or ``"normal"``."""
        return self._operands

    @property
    def shifts(self):
        """How the right shift of a subnormal result is built: ``"lut"`` or ``"dsp"``."""
        return self._shifts

    @property
    def product(self):
        """How the significands' product is built: ``"dsp"`` or ``"lut"``."""
        return self._product

    @property
    def dsp_primitives(self):
        """The product on DSP48E2 Instances (True), their behaviour ("behaviour"), or
        neither (False)."""
        return self._dsp_primitives

    def _significand_product(self, m, a, b):
        """``a * b`` of the unsigned significands: a ``*`` that synthesis maps to DSP
        slices, or partial products in LUTs and carry chains (``product="lut"``)."""
        if self._dsp_primitives is not False:
            return unsigned_product(m, a, b, primitive=self._dsp_primitives is True,
                                    name="significand_product")
        if self._product == "dsp":
            return a * b
        width = len(a) + len(b)
        # zero-extended: lut_product takes two's complement operands
        return lut_product(m, Cat(a, Const(0, 1)), Cat(b, Const(0, 1)),
                           name="significand_product")[:width]

    @property
    def normalize(self):
        """Where a subnormal is normalised: ``"product"`` or ``"operand"``."""
        return self._normalize

    def elaborate(self, platform):
        if self._flush_subnormals or (self._operands == "ieee"
                                      and self._normalize == "product"):
            return self._elaborate_product()
        m = Module()
        pipe = self.pipeline(m, keep=self._shifts == "dsp")
        if self._operands == "normal":
            s = self._unpack_normal(m, pipe)
        else:
            s = self._unpack_operand(m, pipe)
        return self._multiply(m, pipe, s)

    def _elaborate_product(self):
        """The ``normalize="product"`` datapath, and the flushing one."""
        m = Module()
        fmt = self._fmt
        flush = self._flush_subnormals
        p = fmt.precision
        pipe = self.pipeline(m)

        # unpack: the biased exponent a product with its leading one at bit 2p-1 would have
        a = unpack(m, fmt, self.i.payload.a, flush_subnormals=flush, name="a")
        b = unpack(m, fmt, self.i.payload.b, flush_subnormals=flush, name="b")
        s = pipe.cut(
            "unpack",
            a=a.significand, b=b.significand,
            exponent=a.exponent + b.exponent - (fmt.bias - 1),
            sign=a.sign ^ b.sign,
            nan=a.nan | b.nan | (a.inf & b.zero) | (a.zero & b.inf),
            inf=a.inf | b.inf,
            zero=a.zero | b.zero,
        )

        # multiply (a DSP's M register and P register when cut after both steps)
        t = pipe.cut("multiply", product=self._significand_product(m, s.a, s.b), exponent=s.exponent, sign=s.sign,
                     nan=s.nan, inf=s.inf, zero=s.zero)
        u = pipe.cut("product", product=t.product, exponent=t.exponent, sign=t.sign,
                     nan=t.nan, inf=t.inf, zero=t.zero)

        # count: how far to shift left (never below the smallest exponent), or right
        if flush:
            # normal operands: the product's leading one is at bit 2p-1 or 2p-2
            left = ~u.product[2 * p - 1]
            right = Const(0, 1)
            exponent = u.exponent - left
        else:
            zeros = leading_zeros(m, u.product)
            limit = u.exponent - 1
            left = Mux(limit < 0, 0, Mux(zeros > limit, limit, zeros))[:len(zeros)]
            right = Mux(u.exponent < 1, 1 - u.exponent, 0)[:len(u.exponent)]
            exponent = u.exponent - left
        v = pipe.cut("count", product=u.product, left=left, right=right, exponent=exponent,
                     sign=u.sign, nan=u.nan, inf=u.inf, zero=u.zero)

        # normalize
        shifted_left = (v.product << v.left)[:2 * p]
        if flush and self._shifts == "dsp":
            # the one-bit shift as a product with 1 or 2 on the p + 2 bits that reach
            # the significand, the guard and the sticky bit; the bits below stay sticky
            window = wire(m, v.product[p - 2:], "normalize_window")
            factor = wire(m, Cat(~v.left, v.left), "normalize_factor")
            product = wire(m, (window * factor)[:p + 2], "normalize_product")
            normalized, sticky = Cat(Const(0, p - 2), product), v.product[:p - 2].any()
            exponent = v.exponent
        elif flush:
            normalized, sticky = shifted_left, Const(0, 1)
            exponent = v.exponent
        else:
            shifted_right, sticky = shift_right_sticky(m, v.product, v.right,
                                                       name="denormalized")
            normalized = Mux(v.right != 0, shifted_right, shifted_left)
            exponent = Mux(normalized[2 * p - 1], v.exponent, 0)
        w = pipe.cut("normalize", significand=normalized[p:], guard=normalized[p - 1],
                     sticky=normalized[:p - 1].any() | sticky, exponent=exponent,
                     sign=v.sign, nan=v.nan, inf=v.inf, zero=v.zero)

        return self._round(m, pipe, w)

    def _unpack_operand(self, m, pipe):
        """``unpack`` of two encodings, the subnormal one (at most one of the two: a
        product of two subnormals is a signed zero) counted and shifted on ``p`` bits."""
        fmt = self._fmt
        p = fmt.precision
        a = unpack(m, fmt, self.i.payload.a, flush_subnormals=False, name="a")
        b = unpack(m, fmt, self.i.payload.b, flush_subnormals=False, name="b")
        a_sub = wire(m, ~a.significand[p - 1], "a_sub")
        b_sub = wire(m, ~b.significand[p - 1], "b_sub")
        x = wire(m, Mux(a_sub, a.significand, b.significand), "x")
        y = wire(m, Mux(a_sub, b.significand, a.significand), "y")
        zeros = leading_zeros(m, x, "x_zeros")
        x_normal = wire(m, (x << zeros)[:p], "x_normal")
        return pipe.cut(
            "unpack",
            a=x_normal, b=y,
            exponent=a.exponent + b.exponent - (fmt.bias - 1) - zeros,
            sign=a.sign ^ b.sign,
            nan=a.nan | b.nan | (a.inf & b.zero) | (a.zero & b.inf),
            inf=a.inf | b.inf,
            # a zero, or two subnormals: below half the smallest subnormal
            zero=a.zero | b.zero | (a_sub & b_sub),
        )

    def _unpack_normal(self, m, pipe):
        """``unpack`` of two normal-form operands: nothing to count or shift."""
        fmt = self._fmt
        a = unpack_normal(m, fmt, self.i.payload.a, "a")
        b = unpack_normal(m, fmt, self.i.payload.b, "b")
        return pipe.cut(
            "unpack",
            a=a.significand, b=b.significand,
            exponent=a.exponent + b.exponent - 2 * fmt.mantissa_bits - (fmt.bias - 1),
            sign=a.sign ^ b.sign,
            nan=a.nan | b.nan | (a.inf & b.zero) | (a.zero & b.inf),
            inf=a.inf | b.inf,
            zero=a.zero | b.zero,
        )

    def _multiply(self, m, pipe, s):
        """The steps after ``unpack`` of the exact datapaths with normalised operands:
        the product's leading one is at bit ``2p - 1`` or ``2p - 2``; a subnormal or
        vanishing result is shifted right (a shifter, or a product with a power of two
        with ``shifts="dsp"``)."""
        fmt = self._fmt
        p = fmt.precision
        t = pipe.cut("multiply", product=self._significand_product(m, s.a, s.b), exponent=s.exponent, sign=s.sign,
                     nan=s.nan, inf=s.inf, zero=s.zero)
        u = pipe.cut("product", product=t.product, exponent=t.exponent, sign=t.sign,
                     nan=t.nan, inf=t.inf, zero=t.zero)
        # count: the leading one is at bit 2p - 1 or 2p - 2; a right shift below exponent 1
        carry = u.product[2 * p - 1]
        exponent = wire(m, u.exponent - ~carry, "normal_exponent")
        right = Mux(exponent < 1, 1 - exponent, 0)[:len(exponent)]
        v = pipe.cut("count", product=u.product, carry=carry, right=right,
                     exponent=Mux(exponent < 1, 0, exponent), sign=u.sign,
                     nan=u.nan, inf=u.inf, zero=u.zero)
        # normalize: significand, guard, and the rest jammed into a sticky bit, shifted
        normal = Mux(v.carry, v.product, v.product << 1)[:2 * p]
        jammed = Cat(normal[:p - 1].any(), normal[p - 1:])
        if self._shifts == "dsp":
            product, low = align_product(m, jammed, v.right, 0, Const(0, 1), "denormalized")
            shifted, sticky = product[low:low + p + 2], product[:low].any()
        else:
            shifted, sticky = shift_right_sticky(m, jammed, v.right, name="denormalized")
        w = pipe.cut("normalize", significand=shifted[2:], guard=shifted[1],
                     sticky=shifted[0] | sticky, exponent=v.exponent,
                     sign=v.sign, nan=v.nan, inf=v.inf, zero=v.zero)
        return self._round(m, pipe, w)

    def _round(self, m, pipe, w):
        """The ``round`` step of both datapaths: to nearest even, then the special
        cases; the result leaves the pipeline."""
        fmt, top = self._fmt, self._fmt.width - 1
        rounded = round_and_pack(m, fmt, sign=w.sign, exponent=w.exponent,
                                 significand=w.significand, guard=w.guard, sticky=w.sticky,
                                 flush_subnormals=self._flush_subnormals)
        result = Mux(w.nan, Const(fmt.canonical_nan, fmt.width),
                     Mux(w.inf, Cat(Const(fmt.infinity, top), w.sign),
                         Mux(w.zero, Cat(Const(0, top), w.sign), rounded)))
        x = pipe.cut("round", result=result)
        pipe.finish(x.result)
        return m

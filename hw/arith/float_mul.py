"""Pipelined floating-point multiplier for any :class:`FloatFormat`."""

from amaranth.hdl import Cat, Const, Module, Mux

from .float_pipeline import (FloatUnit, leading_zeros, round_and_pack, shift_right_sticky,
                             unpack, wire)


__all__ = ["FloatMul", "NORMALIZE", "operand_normalize_exact"]

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
    shift in the ``unpack`` step, ahead of the multiplier.

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
        ``flush_subnormals``. ``"operand"`` needs :func:`operand_normalize_exact`. None
        (default): ``"operand"`` where it holds (fp16, bf16, fp32), else ``"product"``.

    Attributes
    ----------
    i : In(stream.Signature(data.StructLayout({"a": fmt.width, "b": fmt.width})))
        Operands as bit patterns.
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
        to 6, or ``flush_subnormals`` is not a bool.
    ValueError
        If ``normalize`` is not one of :data:`NORMALIZE`, or is ``"operand"`` for a format
        where two subnormals can round to a nonzero product.
    """

    STEPS = ("unpack", "multiply", "product", "count", "normalize", "round")
    CUT_PRIORITY = ("round", "multiply", "normalize", "unpack", "product", "count")

    def __init__(self, fmt, *, stages=3, flush_subnormals=False, normalize=None):
        super().__init__(fmt, stages=stages, flush_subnormals=flush_subnormals,
                         fields=lambda fmt: {"a": fmt.width, "b": fmt.width})
        if normalize is None:
            normalize = "operand" if operand_normalize_exact(fmt) else "product"
        if normalize not in NORMALIZE:
            raise ValueError(f"normalize must be one of {', '.join(NORMALIZE)}, not "
                             f"{normalize!r}")
        if normalize == "operand" and not operand_normalize_exact(fmt):
            raise ValueError(f"normalize 'operand' needs bias - 1 > mantissa_bits + 1 (two "
                             f"subnormals' product rounding to zero); {fmt} has bias "
                             f"{fmt.bias} and {fmt.mantissa_bits} mantissa bits: use "
                             f"'product'")
        self._normalize = normalize

    @property
    def normalize(self):
        """Where a subnormal is normalised: ``"product"`` or ``"operand"``."""
        return self._normalize

    def elaborate(self, platform):
        if self._normalize == "operand" and not self._flush_subnormals:
            return self._elaborate_operand()
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
        t = pipe.cut("multiply", product=s.a * s.b, exponent=s.exponent, sign=s.sign,
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
        if flush:
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

    def _elaborate_operand(self):
        """The ``normalize="operand"`` datapath (exact subnormals)."""
        m = Module()
        fmt = self._fmt
        p = fmt.precision
        pipe = self.pipeline(m)
        a = unpack(m, fmt, self.i.payload.a, flush_subnormals=False, name="a")
        b = unpack(m, fmt, self.i.payload.b, flush_subnormals=False, name="b")
        # the subnormal operand (if any) goes through the count and the shift
        a_sub = wire(m, ~a.significand[p - 1], "a_sub")
        b_sub = wire(m, ~b.significand[p - 1], "b_sub")
        x = wire(m, Mux(a_sub, a.significand, b.significand), "x")
        y = wire(m, Mux(a_sub, b.significand, a.significand), "y")
        zeros = leading_zeros(m, x, "x_zeros")
        x_normal = wire(m, (x << zeros)[:p], "x_normal")
        s = pipe.cut(
            "unpack",
            a=x_normal, b=y,
            exponent=a.exponent + b.exponent - (fmt.bias - 1) - zeros,
            sign=a.sign ^ b.sign,
            nan=a.nan | b.nan | (a.inf & b.zero) | (a.zero & b.inf),
            inf=a.inf | b.inf,
            # a zero, or two subnormals: below half the smallest subnormal
            zero=a.zero | b.zero | (a_sub & b_sub),
        )
        t = pipe.cut("multiply", product=s.a * s.b, exponent=s.exponent, sign=s.sign,
                     nan=s.nan, inf=s.inf, zero=s.zero)
        u = pipe.cut("product", product=t.product, exponent=t.exponent, sign=t.sign,
                     nan=t.nan, inf=t.inf, zero=t.zero)
        # count: the leading one is at bit 2p - 1 or 2p - 2; a right shift below exponent 1
        carry = u.product[2 * p - 1]
        exponent = wire(m, u.exponent - ~carry, "normal_exponent")
        right = Mux(exponent < 1, 1 - exponent, 0)[:len(exponent)]
        v = pipe.cut("count", product=Mux(carry, u.product, u.product << 1)[:2 * p],
                     right=right, exponent=Mux(exponent < 1, 0, exponent), sign=u.sign,
                     nan=u.nan, inf=u.inf, zero=u.zero)
        # normalize: significand, guard, and the rest jammed into a sticky bit, shifted
        jammed = Cat(v.product[:p - 1].any(), v.product[p - 1:])
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

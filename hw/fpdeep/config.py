"""The FP module's configuration: one frozen :class:`FpConfig` per layer segment, derived from
the mapper's :class:`~nnrtl.gen.fpdeep.config.SegmentConfig` (the one source of truth) and the
mapping's precision by :meth:`FpConfig.from_segment`. The RTL (:mod:`.line_buffer`,
:mod:`.conv`, :mod:`.lpram`, :mod:`.fp`), the golden model (:mod:`nnrtl.sim.golden.fpdeep`)
and the tests take every size, width and latency from it.

Decisions ([U] in the spec, taken here)
---------------------------------------
* **Q ≤ S_IC.** A CE has ``Q`` tiles (spec §3.4: "each CE = S_IC convolution tiles" is the
  case ``Q = S_IC``); with ``Q < S_IC`` (the mapper's input channels time-multiplexed in a
  CE, spec §2.8) the CE array runs ``passes = ⌈S_IC / Q⌉`` passes of ``Q`` tiles per output
  pixel and group, pass ``r`` on input channels ``r·Q … r·Q + Q − 1``; the ragged last
  pass has its tiles past ``S_IC`` fed zero activations and zero weights (they add ``+0``,
  in the golden model too). A per-lane accumulator sums the passes' CE sums in pass order.
* **Loop order: pixel, then group, then pass (innermost).** The line buffer's window is held
  for ``G · passes`` cycles (it reads no bank more than once a window), the accumulator is
  one register per lane (the passes of a group are consecutive), and the LPRAM is read at
  the row ``g · passes + r``, i.e. a row counter ``0 … rows − 1`` per window. The
  alternative (passes outer, groups inner) needs ``G`` accumulators per lane.
* **fixed16** (the paper's 1 MAC per DSP): activations, weights and bias are 16-bit two's
  complement with ``frac_bits`` fraction bits (default 8, Q8.8); a product is exact (32 bits,
  ``2·frac_bits`` fraction bits) and sums are exact in 48 bits, the DSP48's accumulator width
  (exact for up to 2¹⁶ products in a layer, checked per segment). Partials on the chain are
  these 48-bit sums (the link carries 48-bit partial words in fixed16). The completing node
  adds the bias (shifted to the product scale), rounds half up to ``frac_bits`` fraction bits
  and saturates to 16 bits before the SFU.
* **fp32**: the ``hw/arith`` units, IEEE RNE, subnormals exact; each product rounded once,
  each addition rounded once, in the fixed order of :mod:`nnrtl.sim.golden.fpdeep.fp`. The
  pass accumulator (``Q < S_IC``) is a combinational FloatAdd per lane in a one-cycle loop
  (one pass per cycle, as fixed16; the price: an unpipelined fp32 add in that loop's clock
  period, see :meth:`nnrtl.hw.fpdeep.fp.FpModule._accumulate`).
* **fixed16 passes**: the pass accumulator is the 48-bit partial (exact: the 2¹⁶-product
  check below counts all ``S_IC · K²`` products, every pass).
* **Bias** is added on the completing node after the chained partial add: ``z = (R_{m-1} +
  local) + bias``.
* **Pooling** has no padding (AlexNet's 3×3/2 and VGG's 2×2/2 have none); a pool needs a
  ReLU-free or ReLU'd input alike (max by the ordered key of the value).
"""

import dataclasses
import math

__all__ = ["FpConfig", "PRECISIONS", "PARTIAL_BITS", "SHIFTS"]

#: Precisions of the node's arithmetic.
PRECISIONS = ("fp32", "fixed16")

#: How the fp32 CE units build their shifts (``hw/arith``'s ``shifts``): in LUTs or as
#: products on DSP slices.
SHIFTS = ("lut", "dsp")

#: Width of a partial-sum word on the chain, per precision.
PARTIAL_BITS = {"fp32": 32, "fixed16": 48}


def _positive(name, value, least=1):
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise TypeError(f"{name} must be an integer of at least {least}, not {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FpConfig:
    """One layer segment's FP module.

    Attributes
    ----------
    precision : str
        ``"fp32"`` or ``"fixed16"``.
    k, stride, pad : int
        Kernel side, stride, zero padding.
    w_in : int
        Input map side.
    n_in : int
        ``S_IC``: input channels of the segment.
    n_out : int
        Output channels the segment computes (OC under ICP, S_OC under OCP).
    p : int
        CEs (output channels per cycle).
    partial_in : bool
        Partials arrive from the upstream node (an ICP segment not starting at channel 0).
    completes : bool
        This node completes the layer: bias, SFU and the activation output; otherwise the
        partials go downstream.
    relu : bool
    pool : tuple of int or None
        ``(kernel, stride, padding)``; padding must be 0.
    frac_bits : int
        Fraction bits of fixed16 words.
    q : int or None
        ``Q``: tiles per CE (input channels per pass), ``1 … n_in``; ``None`` (the default)
        is ``n_in``, one pass.
    multiplier_stages, adder_stages : int
        Pipeline stages of the fp32 units (``hw/arith`` FloatMul / FloatAdd).
    multiplier_shifts, adder_shifts : str
        How the fp32 MAC units build their shifts, one of :data:`SHIFTS` (the ``shifts`` of
        ``hw/arith`` FloatMul / FloatAdd): the CE array's multipliers and adder trees and
        the PG module's read-add-write adders (one multiplier and one adder per MAC unit).
        The default, multipliers ``"lut"`` and adders ``"dsp"``, is the variant that fits
        the most MAC units on the VC709 (:data:`nnrtl.gen.fpdeep.cost.FP32_VARIANTS`); the
        results are the same bits for every variant.

    Raises
    ------
    TypeError
        A field of the wrong type or out of its range (a precision not in
        :data:`PRECISIONS`, a size below 1, stages outside 0 … 6).
    ValueError
        Fields that conflict (``q > n_in``, ``pad >= k``, a pool the SFU does not run, a
        fixed16 sum over 2^16 products); shifts not one of :data:`SHIFTS`.
    """

    precision: str
    k: int
    stride: int
    pad: int
    w_in: int
    n_in: int
    n_out: int
    p: int
    partial_in: bool = False
    completes: bool = True
    relu: bool = True
    pool: tuple | None = None
    frac_bits: int = 8
    multiplier_stages: int = 3
    adder_stages: int = 3
    q: int | None = None
    multiplier_shifts: str = "lut"
    adder_shifts: str = "dsp"

    def __post_init__(self):
        if self.q is None:
            object.__setattr__(self, "q", self.n_in)
        if self.precision not in PRECISIONS:
            raise TypeError(f"precision must be one of {', '.join(PRECISIONS)}, "
                            f"not {self.precision!r}")
        for name in ("k", "stride", "w_in", "n_in", "n_out", "p", "q"):
            _positive(name, getattr(self, name))
        if self.q > self.n_in:
            raise ValueError(f"q ({self.q}) must be at most n_in ({self.n_in})")
        _positive("pad", self.pad, 0)
        if self.pad >= self.k:
            raise ValueError(f"pad ({self.pad}) must be below k ({self.k}): a window of "
                             f"padding only")
        if self.w_out < 1:
            raise ValueError(f"k ({self.k}) must fit w_in ({self.w_in}) + 2·pad ({self.pad})")
        if self.p > self.n_out:
            raise ValueError(f"p ({self.p}) must be at most n_out ({self.n_out})")
        for name in ("multiplier_stages", "adder_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 6:
                raise TypeError(f"{name} must be an integer from 0 to 6, not {value!r}")
        for name in ("multiplier_shifts", "adder_shifts"):
            value = getattr(self, name)
            if value not in SHIFTS:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, SHIFTS))}, "
                                 f"not {value!r}")
        if not 1 <= self.frac_bits <= 15:
            raise TypeError(f"frac_bits must be an integer from 1 to 15, not "
                            f"{self.frac_bits!r}")
        if self.pool is not None:
            pool = tuple(self.pool)
            object.__setattr__(self, "pool", pool)
            if len(pool) != 3 or pool[2] != 0 or pool[0] < 1 or pool[1] < 1:
                raise ValueError(f"pool {pool!r} must be (kernel, stride, 0): the SFU pools "
                                 f"without padding")
            if not self.completes:
                raise ValueError("pool: only the node completing the layer runs the SFU")
            if pool[0] > self.w_out:
                raise ValueError(f"pool kernel {pool[0]} must fit the {self.w_out}-wide "
                                 f"output map")
        if self.precision == "fixed16" and self.n_in * self.k ** 2 > 1 << 16:
            raise ValueError(f"fixed16: n_in·k² = {self.n_in * self.k ** 2} products exceed "
                             f"the 2^16 a 48-bit sum holds exactly")

    @classmethod
    def from_segment(cls, segment, precision, **options):
        """The FP module of a mapper's ``segment`` (a
        :class:`~nnrtl.gen.fpdeep.config.SegmentConfig`) at ``precision``; ``options``
        set ``frac_bits`` and the fp32 unit stages; ``ValueError`` for a segment that is no
        convolution or has no ``w_in``."""
        if segment.kind != "conv":
            raise ValueError(f"layer {segment.layer}: the FP module runs convolutions, not "
                             f"{segment.kind!r} layers")
        if not segment.w_in:
            raise ValueError(f"layer {segment.layer}: the segment has no w_in (a mapping "
                             f"written before the field existed); map again")
        return cls(precision=precision, k=segment.k, stride=segment.stride, pad=segment.pad,
                   w_in=segment.w_in, n_in=segment.n_in, n_out=segment.n_out, p=segment.p,
                   partial_in=segment.mode == "ICP" and segment.lo > 0,
                   completes=segment.completes, relu=segment.relu,
                   pool=segment.pool if segment.completes else None, q=segment.q,
                   **options)

    # -- sizes -------------------------------------------------------------------------
    @property
    def w_out(self):
        return (self.w_in + 2 * self.pad - self.k) // self.stride + 1

    @property
    def pixels(self):
        """Output pixels per image."""
        return self.w_out ** 2

    @property
    def taps(self):
        """``K²``: MACs per tile."""
        return self.k ** 2

    @property
    def groups(self):
        """``⌈n_out / P⌉``: output-channel groups, LPRAM rows."""
        return -(-self.n_out // self.p)

    @property
    def passes(self):
        """``⌈S_IC / Q⌉``: passes of the CE array per output pixel and group."""
        return -(-self.n_in // self.q)

    @property
    def rows(self):
        """LPRAM rows: ``groups · passes`` (row ``g · passes + r``)."""
        return self.groups * self.passes

    @property
    def cycles_per_pixel(self):
        """Cycles per output pixel in steady state: one pass of one group per cycle,
        ``⌈n_out / P⌉ · ⌈S_IC / Q⌉`` (the mapper's per-segment model, spec §2.8)."""
        return self.rows

    @property
    def cycles(self):
        """Cycles per image in steady state: ``pixels · cycles_per_pixel`` (the
        mapper's ``SegmentConfig.cycles``; the line buffer's fill comes on top)."""
        return self.pixels * self.cycles_per_pixel

    @property
    def banks(self):
        """LPRAM banks: ``Q · K²`` (one per tile position), the bias bank not counted."""
        return self.q * self.taps

    @property
    def macs(self):
        """MAC units: ``P · Q · K²``."""
        return self.p * self.banks

    @property
    def word_bits(self):
        """Width of an activation or weight word."""
        return 32 if self.precision == "fp32" else 16

    @property
    def partial_bits(self):
        return PARTIAL_BITS[self.precision]

    @property
    def pool_out(self):
        """Side of the SFU's output map (after the pool)."""
        if self.pool is None:
            return self.w_out
        k, s, _ = self.pool
        return (self.w_out - k) // s + 1

    @property
    def argmax_bits(self):
        """Bits of a pool-window index (0 without a pool)."""
        return 0 if self.pool is None else max(1, math.ceil(math.log2(self.pool[0] ** 2)))

    @property
    def out_beats(self):
        """Beats per image on the output stream (activations or partials)."""
        return (self.pool_out ** 2 if self.completes else self.pixels) * self.groups

    # -- adder-tree shape (the summation order; the golden model reduces alike) ---------
    @property
    def tile_levels(self):
        """Adder levels of a tile's tree over its K² products."""
        return math.ceil(math.log2(self.taps)) if self.taps > 1 else 0

    @property
    def ce_levels(self):
        """Adder levels of the tree over a CE's ``Q`` tile sums."""
        return math.ceil(math.log2(self.q)) if self.q > 1 else 0

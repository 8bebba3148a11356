"""The per-node configuration the mapper produces: one frozen :class:`NodePlan` per
FPGA of the chain, with one :class:`SegmentConfig` per layer segment it computes.

It lives in ``gen/fpdeep`` until the RTL generator (``hw/fpdeep``) exists; that generator
and the cluster simulator consume it (or ``mapping.json``, which holds the same fields).
"""

import dataclasses
import math

__all__ = ["SegmentConfig", "HostedBanks", "NodePlan", "STORAGE_KINDS", "pab_pixels"]

#: Storage kinds of a node (spec §2.9), in words of the cost model's width.
STORAGE_KINDS = ("lpram", "lgb", "bias", "bpram", "bgb", "act_ram", "line_buffers",
                 "pab", "error_buffer", "sfu_masks")


def pab_pixels(kind, pixels):
    """Output pixels the partial activation buffer (PAB) of a segment holds: one row of
    the output map (``W_out``) for a convolution of ``pixels = W_out²`` output pixels, the
    one output of a fully connected layer. The mapper sizes the PAB as this many pixels of
    ``n_out`` words; the cluster simulator stalls the segment's FP when it is full."""
    return math.isqrt(pixels) if kind == "conv" else 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class SegmentConfig:
    """One layer segment on a node.

    Attributes
    ----------
    layer : str
        The layer's name; ``index`` its position in the chain.
    kind : str
        ``"conv"`` or ``"fc"``.
    mode : str
        ``"ICP"`` (a range of input channels, partial sums of all outputs; a whole layer is
        ICP with every input channel) or ``"OCP"`` (a range of output channels from every
        input channel).
    lo, hi : int
        The channel range ``[lo, hi)`` (input channels under ICP, output under OCP).
    n_in, n_out : int
        Input and output channels the segment's MACs span.
    k, pixels : int
        Kernel side and output pixels per map (``W_out²``).
    p, q : int
        CEs and tiles per CE of each module.
    modules : int
        3 (FP, EB, PG), 2 on the first layer (no EB).
    mac_units, dsp, lut : int
        ``modules · P · Q · K²`` MAC units and their DSP slices and LUTs.
    cycles : int
        Cycles per sample (``pixels · ⌈n_out/P⌉ · ⌈n_in/Q⌉``).
    work : int
        Useful MACs per sample (all modules).
    completes : bool
        This node finishes the layer's outputs (adds the bias, applies ReLU/pool, keeps
        the SFU masks).
    residency : float
        Act-RAM residency ``R_s`` in samples (spec §2.9).
    stride, pad : int
        The convolution's stride and zero padding (``hw/fpdeep``'s line buffer).
    w_in : int
        Input feature-map side; 0 when unknown (a configuration written before the field
        existed), else ``pixels`` must be ``W_out²`` with ``W_out = (w_in + 2·pad − k) //
        stride + 1``.
    pool : tuple of int or None
        ``(kernel, stride, padding)`` of the max-pool after the layer (run by the SFU of the
        completing node).
    relu : bool
        A ReLU follows the layer (before the pool).
    act_ram_in_ddr : bool
        The segment's Act-RAM waits in the node's DDR (:mod:`.placement`): on chip only its
        staging rows, the FP and PG modules paced by the node's ``act_ddr_cycles``.
    line_pixels : int
        Input pixels a cycle its FP (and PG) line buffer takes (:func:`.cost.line_pixels_for`;
        1 is what the RTL line buffer builds).
    """

    layer: str
    index: int
    kind: str
    mode: str
    lo: int
    hi: int
    n_in: int
    n_out: int
    k: int
    pixels: int
    p: int
    q: int
    modules: int
    mac_units: int
    dsp: int
    lut: int
    cycles: int
    work: int
    completes: bool
    residency: float
    stride: int = 1
    pad: int = 0
    w_in: int = 0
    pool: tuple | None = None
    relu: bool = True
    act_ram_in_ddr: bool = False
    line_pixels: int = 1

    @property
    def pab_pixels(self):
        """Output pixels its PAB holds (:func:`pab_pixels`)."""
        return pab_pixels(self.kind, self.pixels)

    def __post_init__(self):
        if (not isinstance(self.line_pixels, int) or isinstance(self.line_pixels, bool)
                or self.line_pixels < 1):
            raise ValueError(f"line_pixels must be a positive integer, not {self.line_pixels!r}")
        if self.mode not in ("ICP", "OCP"):
            raise ValueError(f"mode must be ICP or OCP, not {self.mode!r}")
        span = self.n_in if self.mode == "ICP" else self.n_out
        if not 0 <= self.lo < self.hi or self.hi - self.lo != span:
            raise ValueError(f"channel range [{self.lo}, {self.hi}) must be non-empty and "
                             f"hold the segment's {span} {self.mode} channels")
        if self.mac_units != self.modules * self.p * self.q * self.k ** 2:
            raise ValueError(f"mac_units ({self.mac_units}) must be modules x P x Q x K^2 = "
                             f"{self.modules * self.p * self.q * self.k ** 2}")
        if self.w_in:
            w_out = (self.w_in + 2 * self.pad - self.k) // self.stride + 1
            if w_out < 1 or w_out ** 2 != self.pixels:
                raise ValueError(f"pixels ({self.pixels}) must be W_out² of w_in {self.w_in}, "
                                 f"k {self.k}, stride {self.stride}, pad {self.pad}: "
                                 f"W_out = (w_in + 2·pad − k) // stride + 1 = {w_out}")
        if self.pool is not None:
            object.__setattr__(self, "pool", tuple(self.pool))     # from JSON: a list
        cycles = self.pixels * -(-self.n_out // self.p) * -(-self.n_in // self.q)
        if self.cycles != cycles:
            raise ValueError(f"cycles ({self.cycles}) must be pixels x ceil(n_out / P) x "
                             f"ceil(n_in / Q) = {cycles}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class HostedBanks:
    """Parameter banks of ``consumer``'s segment of ``layer`` held by ``host`` (spec §2.6):
    ``banks`` banks (input channels under ICP, output channels under OCP) of ``words``
    weights in all; the host keeps them in BPRAM and their gradients in BGB, sends them
    downstream once per sample (DP5) and receives the gradients (DP6)."""

    host: int
    consumer: int
    layer: str
    banks: int
    words: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodePlan:
    """One FPGA of the chain (nodes are numbered from 1, upstream first).

    Attributes
    ----------
    node : int
    segments : tuple of SegmentConfig
    mac_units, dsp, lut : int
        Sums over the segments.
    storage : tuple of (str, int)
        Words per kind of :data:`STORAGE_KINDS` (on chip; FC weights live off chip).
    bram36 : int
        36 Kb block RAMs for ``storage`` (words / words per BRAM36, rounded up).
    hosted : tuple of HostedBanks
        Banks this node hosts for downstream consumers.
    offchip_words : int
        FC weights and gradients in DDR.
    word_bits : int
    act_ram_ddr_words : int
        Words of the Act-RAMs held in DDR (their depth beyond the staging rows, which
        ``storage``'s ``act_ram`` counts; :mod:`.placement`).
    act_ddr_cycles : int
        Cycles a sample of those Act-RAMs' DDR traffic takes on their channel.
    """

    node: int
    segments: tuple
    mac_units: int
    dsp: int
    lut: int
    storage: tuple
    bram36: int
    hosted: tuple
    offchip_words: int
    word_bits: int
    act_ram_ddr_words: int = 0
    act_ddr_cycles: int = 0

    def __post_init__(self):
        if self.mac_units != sum(s.mac_units for s in self.segments):
            raise ValueError(f"mac_units ({self.mac_units}) must be the segments' sum, "
                             f"{sum(s.mac_units for s in self.segments)}")
        if any(h.host != self.node or h.consumer <= self.node for h in self.hosted):
            raise ValueError(f"node {self.node} can host banks only for downstream nodes")

    @classmethod
    def from_json(cls, found):
        """The configuration from its entry in ``mapping.json``'s ``"nodes"``."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in found.items() if k in fields}
        values["segments"] = tuple(SegmentConfig(**s) for s in found["segments"])
        values["hosted"] = tuple(HostedBanks(**h) for h in found["hosted"])
        values["storage"] = tuple(found["storage"].items())
        return cls(**values)

    @property
    def storage_words(self):
        return sum(words for _, words in self.storage)

    def as_json(self):
        result = dataclasses.asdict(self)
        result["storage"] = dict(self.storage)
        result["storage_words"] = self.storage_words
        return result

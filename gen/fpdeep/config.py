"""The per-node configuration the mapper produces: one frozen :class:`FpdeepNodeConfig` per
FPGA of the chain, with one :class:`SegmentConfig` per layer segment it computes.

It lives in ``gen/fpdeep`` until the RTL generator (``hw/fpdeep``) exists; that generator
and the cluster simulator consume it (or ``mapping.json``, which holds the same fields).
"""

import dataclasses

__all__ = ["SegmentConfig", "HostedBanks", "FpdeepNodeConfig", "STORAGE_KINDS"]

#: Storage kinds of a node (spec §2.9), in words of the cost model's width.
STORAGE_KINDS = ("lpram", "lgb", "bias", "bpram", "bgb", "act_ram", "line_buffers",
                 "pab", "error_buffer", "sfu_masks")


@dataclasses.dataclass(frozen=True)
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


@dataclasses.dataclass(frozen=True)
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


@dataclasses.dataclass(frozen=True)
class FpdeepNodeConfig:
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

    @property
    def storage_words(self):
        return sum(words for _, words in self.storage)

    def as_json(self):
        result = dataclasses.asdict(self)
        result["storage"] = dict(self.storage)
        result["storage_words"] = self.storage_words
        return result

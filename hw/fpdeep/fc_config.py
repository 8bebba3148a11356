"""The FC engine's configuration (:mod:`.fc`): one frozen :class:`FcConfig` per fully
connected layer on the chain's last node. The RTL, the golden model
(:mod:`nnrtl.sim.golden.fpdeep.fc`), the bench and the cycle model take every size from it.

Data layout (the weight stream, the board's DDR)
------------------------------------------------
The bias is the weight matrix's last column, ``W⁺ = [W | b]`` (``n_out × (n_in + 1)``), and
every input vector is extended by a constant one, ``x⁺ = [x, 1]``: ``y = W⁺ x⁺`` is
``W x + b``, ``δW⁺ = Σ_b δy x⁺ᵀ`` holds ``δb`` in its last column, and the SGD step is one
rule for both. Row ``o`` of ``W⁺`` is :attr:`FcConfig.beats` beats of ``P`` words (word
``c`` of the row in beat ``c // P``, lane ``c % P``; zero past column ``n_in``), rows in
order: the layout of the weight region in DDR, read twice and written once per mini-batch.
"""

import dataclasses
import math

from ..checks import check_positive
from .config import PRECISIONS, SHIFTS

__all__ = ["FcConfig", "FIXED_SUM_BITS"]

#: Width of a fixed16 sum (products of 16-bit words summed exactly, the DSP48's accumulator).
FIXED_SUM_BITS = 48


@dataclasses.dataclass(frozen=True, kw_only=True)
class FcConfig:
    """One fully connected layer on the FC engine.

    Attributes
    ----------
    precision : str
        ``"fp32"`` or ``"fixed16"`` (:data:`~.config.PRECISIONS`).
    n_in, n_out : int
        Input and output features.
    p : int
        Weight words per beat: the forward pass's MACs a cycle (the backward pass's ``2·P``).
    batch : int
        Samples per mini-batch (each weight beat is used once per sample).
    frac_bits : int
        fixed16 fraction bits, 1 … 14 (the constant one of ``x⁺`` is a 16-bit code).
    input_relu : bool
        The input is the ReLU of the previous FC layer's output: the engine applies the ReLU
        as it stores ``x`` and masks ``δx`` by ``x ≠ 0`` (ReLU', 0 at 0) as it sends it.
    multiplier_stages, adder_stages : int
        Stages of the fp32 ``hw/arith`` units of the tree (0 … 6).
    multiplier_shifts, adder_shifts : str
        :data:`~.config.SHIFTS`, as :class:`~.config.FpConfig`.

    Raises
    ------
    TypeError
        A field of the wrong type or out of its range.
    ValueError
        ``p`` above ``n_in + 1``; a fixed16 sum over 2¹⁶ products.
    """

    precision: str
    n_in: int
    n_out: int
    p: int
    batch: int = 1
    frac_bits: int = 8
    input_relu: bool = False
    multiplier_stages: int = 3
    adder_stages: int = 3
    multiplier_shifts: str = "lut"
    adder_shifts: str = "dsp"

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise TypeError(f"precision must be one of {', '.join(PRECISIONS)}, "
                            f"not {self.precision!r}")
        for name in ("n_in", "n_out", "p", "batch"):
            check_positive(name, getattr(self, name))
        if self.p > self.columns:
            raise ValueError(f"p ({self.p}) must be at most n_in + 1 ({self.columns})")
        for name in ("multiplier_stages", "adder_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 6:
                raise TypeError(f"{name} must be an integer from 0 to 6, not {value!r}")
        for name in ("multiplier_shifts", "adder_shifts"):
            if getattr(self, name) not in SHIFTS:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, SHIFTS))}, "
                                 f"not {getattr(self, name)!r}")
        if (not isinstance(self.frac_bits, int) or isinstance(self.frac_bits, bool)
                or not 1 <= self.frac_bits <= 14):
            raise TypeError(f"frac_bits must be an integer from 1 to 14, not "
                            f"{self.frac_bits!r}")
        if self.precision == "fixed16":
            for name, terms in (("n_in + 1", self.columns), ("n_out", self.n_out),
                                ("batch", self.batch)):
                if terms > 1 << 16:
                    raise ValueError(f"fixed16: {name} = {terms} products exceed the 2^16 "
                                     f"a {FIXED_SUM_BITS}-bit sum holds exactly")

    @property
    def word_bits(self):
        """Bits of a word: 16 (fixed16) or 32 (fp32)."""
        return 32 if self.precision == "fp32" else 16

    @property
    def sum_bits(self):
        """Bits of an accumulator word: fixed16 :data:`FIXED_SUM_BITS`, fp32 32."""
        return 32 if self.precision == "fp32" else FIXED_SUM_BITS

    @property
    def columns(self):
        """Columns of ``W⁺``: ``n_in + 1`` (the bias last)."""
        return self.n_in + 1

    @property
    def beats(self):
        """Beats of ``P`` words per row of ``W⁺``."""
        return math.ceil(self.columns / self.p)

    @property
    def one(self):
        """The code of 1.0, the constant input of the bias column."""
        return 0x3F800000 if self.precision == "fp32" else 1 << self.frac_bits

    @property
    def pass_items(self):
        """Items of a forward or backward pass: ``n_out · beats · batch``, one a cycle."""
        return self.n_out * self.beats * self.batch

    @property
    def macs(self):
        """Useful MACs of a mini-batch: ``W x`` forward, ``Wᵀ δy`` and ``δy xᵀ`` backward,
        ``3 · B · n_out · n_in`` (the bias column's products by one not counted)."""
        return 3 * self.batch * self.n_out * self.n_in

    @property
    def weight_words(self):
        """Words of ``W⁺`` as stored (``n_out · beats · P``): read twice, written once per
        mini-batch."""
        return self.n_out * self.beats * self.p

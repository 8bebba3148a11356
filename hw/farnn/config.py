"""Configuration of the FARNN engine: the one object its RTL, golden model, host side,
performance model and design-space exploration derive from.

FARNN (Cho, Lee, Lee, "FARNN: FPGA-GPU Hybrid Acceleration Platform for Recurrent Neural
Networks", IEEE TPDS 33(7), 2022) trains LSTM
and GRU layers at small batch: the host (GPU) runs the input MVM of all steps, the BW input
MVM, the gradients and the update; the FPGA runs the recurrence of one layer at a time:

* :attr:`FarnnConfig.units` MVM units (4 for LSTM, 3 for GRU), unit ``k`` holding gate
  ``k``'s recurrent matrix ``R_k`` (PyTorch's gate order, :data:`GATES`); each unit is
  ``chains`` chains of ``chain_length`` weight-stationary fp32 PEs;
* each PE of a round holds one row of the matrix; a matrix with more rows than a unit has
  PEs runs in :attr:`MatrixShape.slices` rounds; with cell splitting (the paper's §5.1.3)
  the last of two or more rounds, if its rows fit, runs split: the chains form ``split``
  groups, each of its rows is computed by one PE of every group (group ``g`` summing chunk
  ``g`` of the vector) in ``ceil(n_in / split)`` cycles;
* FW uses ``R_k``, BW the host-transposed ``R_k^T``; the recurrent projection
  (``proj_size``, LSTM only) reuses the units (:meth:`FarnnConfig.matrix`).

The arithmetic is the contract in :mod:`nnrtl.hw.farnn` ("Arithmetic"), modelled bit for bit
by :mod:`nnrtl.sim.golden.farnn`.
"""

import dataclasses

from ..arith.dsp_usage import check_dsp_usage
from ..checks import by_distance, check_positive, check_range, is_int

__all__ = ["FarnnConfig", "MatrixShape", "CELLS", "GATES", "WEIGHT_DEPTHS", "MATRICES",
           "FP32_BITS", "chunk_bounds", "split_valid"]

#: Cell types.
CELLS = ("lstm", "gru")
#: Gate order of each cell, PyTorch's weight layout; MVM unit ``k`` holds gate ``k``.
GATES = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}
#: fp32 words a PE's weight memory holds: one URAM288 half (4K) or a whole one (8K).
WEIGHT_DEPTHS = (4096, 8192)
#: The matrices the MVM units run, by pass: FW ``recurrent`` (``R_k``), FW ``projection``
#: (``W_hr``), BW ``recurrent_t`` (``R_k^T``), BW ``projection_t`` (``W_hr^T``).
MATRICES = ("recurrent", "projection", "recurrent_t", "projection_t")
#: Bits of one word of the weight port (fp32).
FP32_BITS = 32


def _nearest(value, valid, limit):
    """The nearest valid values below and above ``value`` within ``1 .. limit`` (text)."""
    below = next((n for n in range(value - 1, 0, -1) if valid(n)), None)
    above = next((n for n in range(value + 1, limit + 1) if valid(n)), None)
    found = [str(n) for n in (below, above) if n is not None]
    return " or ".join(found) if found else "none"


def chunk_bounds(inputs, split):
    """``[(start, stop), ...]``: the ``split`` contiguous chunks of a vector of ``inputs``
    elements, chunk ``g`` = ``[g * c, min((g + 1) * c, inputs))`` with ``c = ceil(inputs /
    split)`` (the contract). A chunk may be empty when ``split`` is close to ``inputs``
    (5 elements in 4 chunks of 2: the last is ``(5, 5)``); :func:`split_valid` rejects
    that."""
    size = -(-inputs // split)
    return [(min(g * size, inputs), min((g + 1) * size, inputs)) for g in range(split)]


def split_valid(split, *, inputs):
    """Whether ``split`` leaves no chunk of a vector of ``inputs`` elements empty."""
    return all(start < stop for start, stop in chunk_bounds(inputs, split))


@dataclasses.dataclass(frozen=True)
class MatrixShape:
    """One matrix as the MVM units run it: its rows are cut over ``units`` units in
    contiguous blocks of :attr:`rows` rows (one block per unit; only the projection is
    cut, the gate matrices are one per unit), each block in rounds of ``pes_per_unit``
    rows, the units in lockstep (the largest block sets the rounds of all).

    The geometry is the MVM unit's (``hw/farnn/mvm.py``; its golden ``plan``,
    ``sim/golden/farnn/mvm.py``). In a full round ``r`` PE ``k`` of chain ``c`` computes row
    ``r * P + k * chains + c`` (``P = pes_per_unit``). The unit has a split factor ``s``
    (a divisor of ``chains``); the last round is split (:attr:`split_last`) when there are
    two or more rounds (round 0 is fed as the vector arrives, never split), its rows fit
    ``P / s`` PEs and no chunk of the vector is empty: the chains form ``s`` groups of
    ``lanes = chains / s``, and PE ``k`` of chain ``g * lanes + j`` sums chunk ``g`` of row
    ``(slices - 1) * P + k * lanes + j``.

    Attributes
    ----------
    name : str
        One of :data:`MATRICES`.
    total_rows : int
        Rows of the whole matrix (output elements per vector).
    inputs : int
        Its columns, the length ``n_in`` of the vector it multiplies.
    units : int
        Units it is cut over; unit ``u`` computes rows ``[u * rows, min((u + 1) * rows,
        total_rows))``.
    chains, chain_length : int
    split : int
        The unit's split factor ``s`` (1: none).
    """

    name: str
    total_rows: int
    inputs: int
    units: int
    chains: int
    chain_length: int
    split: int

    @property
    def rows(self):
        """Rows of the largest block, the one a unit computes: ``ceil(total_rows /
        units)``."""
        return -(-self.total_rows // self.units)

    @property
    def pes_per_unit(self):
        """``chains * chain_length``: the rows of a full round."""
        return self.chains * self.chain_length

    @property
    def slices(self):
        """Rounds (the paper's vector slices) ``S = ceil(rows / pes_per_unit)``."""
        return -(-self.rows // self.pes_per_unit)

    @property
    def last_rows(self):
        """Rows of the last round, ``rows - (slices - 1) * pes_per_unit``."""
        return self.rows - (self.slices - 1) * self.pes_per_unit

    @property
    def lanes(self):
        """Chains per split group, ``chains / split``."""
        return self.chains // self.split

    @property
    def chunk(self):
        """Elements of a chunk of a split round, ``ceil(inputs / split)``."""
        return -(-self.inputs // self.split)

    @property
    def split_last(self):
        """Whether the last round runs split (the class docstring's rule)."""
        return (self.split > 1 and self.slices >= 2
                and self.last_rows <= self.pes_per_unit // self.split
                and split_valid(self.split, inputs=self.inputs))

    @property
    def split_from(self):
        """First split row of a unit's block (:attr:`rows` when none is): the rows from
        here on are each summed by ``split`` PEs, one chunk of the vector each."""
        return (self.slices - 1) * self.pes_per_unit if self.split_last else self.rows

    @property
    def weights_per_pe(self):
        """Weights the busiest PE stores: ``slices * inputs``, or ``(slices - 1) * inputs
        + chunk`` with a split last round (the paper's 4 x 1,024 = 4,096)."""
        if self.split_last:
            return (self.slices - 1) * self.inputs + self.chunk
        return self.slices * self.inputs

    @property
    def cycles_per_vector(self):
        """MAC cycles of one vector, the spec's ``C_mvm``: ``(slices - 1) * inputs`` plus
        ``chunk`` or ``inputs`` for the last round (2,048 unsplit and 1,536 split by 2 for
        1,024 x 1,024 on 768 PEs)."""
        return self.weights_per_pe

    @property
    def macs_per_vector(self):
        """Useful multiply-accumulates per vector, ``total_rows * inputs``."""
        return self.total_rows * self.inputs


@dataclasses.dataclass(frozen=True)
class FarnnConfig:
    """Parameters of one FARNN engine and the workload it is sized for.

    Parameters
    ----------
    cell : str
        ``"lstm"`` or ``"gru"`` (PyTorch's ``nn.GRU``: the reset gate multiplies ``R_n h +
        bR_n``).
    input_size : int
        Features of the first layer's input ``x``.
    hidden_size : int
        Cells per layer ``H``; every layer has the same.
    proj_size : int
        Rows ``P`` of the recurrent projection ``W_hr`` (``nn.LSTM(proj_size=P)``), ``0 <
        P < hidden_size``; 0 for none. LSTM only.
    layers : int
        Stacked layers, run one after another (one layer's weights on chip at a time).
    seq_len : int
        Time steps ``T`` per sequence.
    batch : int
        Sequences ``B`` trained together; their vectors share the weights of each step.
    chain_length : int
        PEs per chain ``L``.
    chains : int
        Chains per MVM unit ``W``: one 32-bit lane each of the weight port (16: 512 bits).
    weight_depth : int
        fp32 words of a PE's weight memory, 4096 or 8192.
    split : int
        The MVM units' split factor ``s`` (cell splitting), a divisor of ``chains``; each
        matrix splits its last round by it where that round's rows fit (:class:`MatrixShape`)
        and runs unsplit elsewhere. 0 chooses the divisor with the fewest MAC cycles per
        step over every matrix of both passes (the spec's derived model: the largest
        ``s`` whose groups hold the last round's rows), the smallest on a tie.
    adder_stages : int
        Pipeline stages of the fp32 adders (the accumulator's slots), 1 to 6.
    multiplier_stages : int
        Pipeline stages of the fp32 multipliers, 0 to 6.
    dsp_usage : str
        How much of the PEs' multipliers and accumulator adders and the MVM units' fold
        adders DSP slices take (:mod:`~nnrtl.hw.arith.dsp_usage`; the same bits at every
        level): ``"some"`` (default: the multiplier's significand product, two DSP slices
        a PE), ``"max"`` (the shifts too: six a PE, fewer LUTs) or ``"none"`` (no DSP
        slice; the product in LUTs).

    Raises
    ------
    TypeError
        A parameter of the wrong type or out of its own range, e.g. ``hidden_size must
        be a positive integer, not -3``.
    ValueError
        Parameters that conflict, e.g. ``split (3) must divide chains (16): a split group
        is whole chains; nearest valid split: 2 or 4``.
    """

    cell: str = "lstm"
    input_size: int = 1024
    hidden_size: int = 1024
    proj_size: int = 0
    layers: int = 5
    seq_len: int = 1600
    batch: int = 1
    chain_length: int = 16
    chains: int = 16
    weight_depth: int = 4096
    split: int = 0
    adder_stages: int = 4
    multiplier_stages: int = 3
    dsp_usage: str = "some"

    def __post_init__(self):
        if self.cell not in CELLS:
            raise TypeError(f"cell must be one of {', '.join(CELLS)}, not {self.cell!r}")
        for name in ("input_size", "hidden_size", "layers", "seq_len", "batch",
                     "chain_length", "chains"):
            check_positive(name, getattr(self, name))
        if not is_int(self.proj_size) or self.proj_size < 0:
            raise TypeError(f"proj_size must be a non-negative integer, not "
                            f"{self.proj_size!r}")
        if not is_int(self.split) or self.split < 0:
            raise TypeError(f"split must be a non-negative integer (0: chosen), not "
                            f"{self.split!r}")
        if self.weight_depth not in WEIGHT_DEPTHS:
            raise TypeError(f"weight_depth must be one of "
                            f"{', '.join(map(str, WEIGHT_DEPTHS))}, not {self.weight_depth!r}")
        check_range("adder_stages", self.adder_stages, 1, 6)
        check_range("multiplier_stages", self.multiplier_stages, 0, 6)
        check_dsp_usage(self.dsp_usage)
        if self.proj_size:
            if self.cell != "lstm":
                raise ValueError(f"proj_size ({self.proj_size}) must be 0 for cell "
                                 f"{self.cell!r}: only an LSTM has a recurrent projection")
            if self.proj_size >= self.hidden_size:
                raise ValueError(f"proj_size ({self.proj_size}) must be less than "
                                 f"hidden_size ({self.hidden_size}), as nn.LSTM's; nearest "
                                 f"valid proj_size: {self.hidden_size - 1}")
        if self.split:
            if self.chains % self.split:
                raise ValueError(
                    f"split ({self.split}) must divide chains ({self.chains}): a split "
                    f"group is whole chains; nearest valid split: "
                    f"{_nearest(self.split, lambda s: self.chains % s == 0, self.chains)}")

    @classmethod
    def candidates(cls, values, pinned):
        """The free parameters' values to try when completing a partial configuration
        (:func:`nnrtl.gen.params.parse_params`), preferred first: ``split`` chosen (0) or a
        divisor of ``chains``; ``chain_length``, ``chains`` and ``weight_depth`` nearest
        their defaults (a board's budget may need fewer PEs, which then need deeper
        memories: :meth:`check_usable`); ``dsp_usage`` ``"some"``, else ``"max"`` (fewer
        LUTs a PE), else ``"none"`` (no DSP slice)."""
        del pinned
        chains = values["chains"]
        return {
            "split": [0] + ([d for d in range(1, chains + 1) if chains % d == 0]
                            if is_int(chains) and chains > 0 else []),
            "chain_length": by_distance(values["chain_length"], range(1, 65))[:48],
            "chains": by_distance(values["chains"], range(1, 33))[:6],
            "weight_depth": by_distance(values["weight_depth"], WEIGHT_DEPTHS),
            "dsp_usage": ["some", "max", "none"],
        }

    def check_usable(self):
        """Raise ``ValueError`` unless the design holds its workload: every pass's weights
        within ``weight_depth`` words per PE (:attr:`fits`). A design generated for a board
        is checked; a workload description (exploration) is not."""
        if not self.fits:
            raise ValueError(f"{self.max_weights_per_pe} weights per PE exceed weight_depth "
                             f"({self.weight_depth}) with {self.pes} PEs")

    def _shape(self, name, split):
        rows, inputs, units = self._sizes(name)
        return MatrixShape(name=name, total_rows=rows, inputs=inputs, units=units,
                           chains=self.chains, chain_length=self.chain_length, split=split)

    def _sizes(self, name):
        """``(total_rows, inputs, units)`` of a matrix."""
        hidden, recurrent = self.hidden_size, self.recurrent_size
        return {"recurrent": (hidden, recurrent, 1),
                "recurrent_t": (recurrent, hidden, 1),
                "projection": (self.proj_size, hidden, self.units),
                "projection_t": (hidden, self.proj_size, self.units)}[name]

    # -- The PE array --------------------------------------------------------------------

    @property
    def gates(self):
        """Gate names in unit order (:data:`GATES`)."""
        return GATES[self.cell]

    @property
    def units(self):
        """MVM units: 4 for LSTM, 3 for GRU, one per gate."""
        return len(self.gates)

    @property
    def pes_per_unit(self):
        """PEs of one MVM unit, ``chains * chain_length`` (the rows a round computes)."""
        return self.chains * self.chain_length

    @property
    def pes(self):
        """PEs of the engine, ``units * pes_per_unit``."""
        return self.units * self.pes_per_unit

    @property
    def recurrent_size(self):
        """Length of the recurrent vector: ``proj_size`` with a projection, else
        ``hidden_size``."""
        return self.proj_size or self.hidden_size

    @property
    def output_size(self):
        """Features of a layer's output: the recurrent vector's."""
        return self.recurrent_size

    # -- Matrices, slices and split ------------------------------------------------------

    @property
    def matrices(self):
        """Names of the matrices this engine runs (:data:`MATRICES`; the projections only
        with ``proj_size``)."""
        return MATRICES if self.proj_size else ("recurrent", "recurrent_t")

    @property
    def split_factor(self):
        """The MVM units' split factor: ``split`` if given, else the divisor of ``chains``
        with the fewest MAC cycles per vector summed over :attr:`matrices` (the smallest on
        a tie): 2 for 1,024 x 1,024 on 768 PEs per unit, 1 when no round is partial."""
        if self.split:
            return self.split
        divisors = [s for s in range(1, self.chains + 1) if self.chains % s == 0]
        return min(divisors, key=lambda s: (sum(self._shape(name, s).cycles_per_vector
                                                for name in self.matrices), s))

    def matrix(self, name):
        """The :class:`MatrixShape` of matrix ``name`` (one of :attr:`matrices`): FW
        ``recurrent`` ``R_k`` (``H x recurrent_size``, one per unit), FW ``projection``
        ``W_hr`` (``P x H``, its rows cut over all units), BW ``recurrent_t`` ``R_k^T``
        (``recurrent_size x H``), BW ``projection_t`` ``W_hr^T`` (``H x P``, cut over all
        units)."""
        if name not in self.matrices:
            raise ValueError(f"matrix must be one of {', '.join(self.matrices)}, not {name!r}")
        return self._shape(name, self.split_factor)

    def pass_matrices(self, phase):
        """The matrices of pass ``phase`` (``"fw"`` or ``"bw"``), on chip together."""
        if phase not in ("fw", "bw"):
            raise ValueError(f"phase must be fw or bw, not {phase!r}")
        names = ("recurrent", "projection") if phase == "fw" else ("recurrent_t",
                                                                   "projection_t")
        return tuple(self.matrix(name) for name in names if name in self.matrices)

    def weight_bases(self, phase):
        """The first weight address of each matrix of :meth:`pass_matrices` in a PE's
        memory: the gate matrix at 0, the projection block after it (at the gate
        matrix's :attr:`MatrixShape.weights_per_pe`, ``D_m``)."""
        shapes = self.pass_matrices(phase)
        return (0,) + (shapes[0].weights_per_pe,) * (len(shapes) - 1)

    def slices(self, phase):
        """Rounds ``S`` of the gate matrices in pass ``phase``: FW ``ceil(H / P_unit)``, BW
        ``ceil(recurrent_size / P_unit)`` (they differ with a projection)."""
        return self.pass_matrices(phase)[0].slices

    def weights_per_pe(self, phase):
        """Weight words the busiest PE stores in pass ``phase``: its rows of the gate
        matrix plus, with a projection, its rows of the projection matrix."""
        return sum(shape.weights_per_pe for shape in self.pass_matrices(phase))

    @property
    def max_weights_per_pe(self):
        """The larger of the FW and BW :meth:`weights_per_pe`."""
        return max(self.weights_per_pe("fw"), self.weights_per_pe("bw"))

    @property
    def fits(self):
        """Whether every pass's weights fit the PEs' memories (:attr:`max_weights_per_pe`
        <= ``weight_depth``)."""
        return self.max_weights_per_pe <= self.weight_depth

    # -- Work and traffic ----------------------------------------------------------------

    def mac_cycles_per_step(self, phase):
        """MAC cycles of one time step in pass ``phase``: every vector of the batch through
        every matrix of the pass (no latency: the spec's ``B * C_mvm``)."""
        return self.batch * sum(s.cycles_per_vector for s in self.pass_matrices(phase))

    def useful_macs_per_step(self, phase):
        """Useful multiply-accumulates of the MVM units per time step of pass ``phase``:
        ``batch * (units * H * recurrent_size + P * H)`` (the same in FW and BW)."""
        return self.batch * sum(shape.macs_per_vector * (self.units if shape.units == 1
                                                        else 1)
                                for shape in self.pass_matrices(phase))

    def useful_macs_per_pass(self, phase):
        """:meth:`useful_macs_per_step` times ``seq_len``: one layer's pass."""
        return self.seq_len * self.useful_macs_per_step(phase)

    @property
    def useful_macs(self):
        """Useful MACs of a training step's FPGA part: FW and BW of every layer."""
        return self.layers * (self.useful_macs_per_pass("fw") + self.useful_macs_per_pass("bw"))

    def weight_stream_beats(self, phase):
        """Beats of the weight port to load pass ``phase`` (each ``chains`` fp32 words):
        every unit's chains get ``chain_length * weights_per_pe(phase)`` words, one lane
        each, units one after another (:mod:`nnrtl.gen.farnn.host`)."""
        return self.units * self.chain_length * self.weights_per_pe(phase)

    def weight_stream_words(self, phase):
        """fp32 words of pass ``phase``'s weight stream, padding included."""
        return self.chains * self.weight_stream_beats(phase)

    @property
    def weight_port_bits(self):
        """Width of the weight port, ``chains * 32`` (512 by default)."""
        return self.chains * FP32_BITS

"""Configuration of the SBE (stall-free blocking-batching engine): the one object its RTL,
golden model, testbench, performance model and design-space exploration derive from.

The engine (Que et al., "Mapping Large LSTMs to FPGAs with Weight Reuse", J. Signal
Process. Syst. 92, 2020) runs LSTM inference
with its weights in off-chip memory:

* The four gate matrices are interleaved into one ``4 * hidden_size``-row matrix (row
  ``4 * j + g`` is row ``j`` of gate ``g``, gates in the order i, u, f, o: "Weights Matrix
  Partition", Fig. 5) whose columns are ``[x_t, h_{t-1}]``.
* ``pes`` PEs compute it column by column: each cycle one element of the vector (or
  ``pes / (4 * hidden_size)`` elements, see :attr:`SbeConfig.columns_per_cycle`) times
  one column ("Overcoming Data Dependency", Fig. 4), so the x part of a step runs before
  its h part is needed.
* The columns are cut into ``blocks`` blocks; two are on chip (double buffer) while the
  next streams in at ``bus_weights`` weights per cycle; each block is used for ``batch``
  consecutive time steps; per-PE BB-FIFOs carry the partial sums from block to block
  ("Novel Blocking-Batching Strategy", "SBE Architecture", "Consolidating after
  Blocking"). A *batch* is ``batch`` consecutive time steps of one sequence: the paper
  processes "multiple time-steps of the input vector in a batch", and its cases 2 and 3
  exist because "the next hidden vector in the batch has a dependency on the previous one".
* ``post_units`` post-processing units apply the optional batch normalisation, the
  piecewise-linear sigmoid/tanh and the cell and hidden updates.
"""

import dataclasses
import math

from ...boards.capacity import BRAM36_BITS, LUTRAM_DEPTH
from ..arith.fixed import QFormat
from ..bus import MAX_BUS_BITS, bus_bits
from ..checks import by_distance as _by_distance
from .checks import check_hidden_sizes, check_non_negative, check_positive, check_range, is_int
from .formats import Formats, HeaderLayout, StreamBits, pwl_tables_of
from .layer_shape import LayerShape
from .padding import is_power_of_two as _pow2
from .padding import nearest_valid as _nearest
from .padding import padded_sizes as _padded_sizes
from .register_map import register_map

__all__ = ["SbeConfig", "LayerShape", "GATES"]


#: Gate order of the interleaved matrix: input, cell candidate ("input modulation"),
#: forget, output -- the paper's Fig. 5 order; row ``4 * j + g`` is unit ``j`` of gate ``g``.
GATES = ("i", "u", "f", "o")


@dataclasses.dataclass(frozen=True)
class SbeConfig:
    """Parameters of one SBE engine.

    The sizes are the model's; the divisibility rules of the RTL below hold on the
    *padded* sizes (:attr:`padded_input_size`, :attr:`padded_hidden_size`: the smallest
    at least the model's that satisfy them). The engine runs the padded problem, zero
    weights in the padded rows and columns, and its outputs are cut back
    (:attr:`padded`, :func:`nnrtl.sim.golden.sbe.model.pad_params`); :attr:`macs_per_step` counts the
    model's work, :attr:`padding_macs_per_step` the padding's. The shape properties
    (:attr:`rows`, :meth:`layer`, :attr:`columns`, ...) are the padded ones.

    Parameters
    ----------
    input_size : int
        Length of the first layer's input vector x (the paper's ``Lx``).
    hidden_size : int
        Hidden units per layer (``Lh``); with :attr:`hidden_sizes`, the largest layer's,
        what the engine is sized for.
    hidden_sizes : tuple of int
        Hidden units of each layer, first layer first, for a model whose layers differ
        (a Keras stack tapering 16 -> 9: ``(16, 9)``; ``--param hidden_sizes=16,9``);
        ``()``, the default, gives every layer ``hidden_size``. Its length is ``layers``
        and its largest entry ``hidden_size``. Every layer runs padded to the same
        :attr:`padded_hidden_size` (units of zero weights and biases; their h meet only
        zero weights and are cut from the outputs), so a smaller layer costs the largest
        one's cycles and its missing MACs count as padding (:attr:`padding_macs_per_step`).
    layers : int
        Stacked LSTM layers, run one after another; layer ``k > 0`` reads layer ``k - 1``'s h.
    seq_len : int
        Time steps per sequence the engine is sized and modelled for.
    pes : int
        Processing elements, one multiplier each (``Npe``), a multiple of 4. It divides
        ``4 * padded_hidden_size`` (the rows then run in ``4 * padded_hidden_size / pes``
        passes) or is a multiple of it (``pes / (4 * padded_hidden_size)`` vector
        elements each cycle).
    batch : int
        Consecutive time steps that reuse each weight block (``B``); also the depth of a
        BB-FIFO per pass. A sequence shorter than ``batch`` (or the last batch of one) runs
        as a partial batch; when not given, it is at most ``seq_len``
        (:meth:`candidates`).
    blocks : int
        Blocks the columns are cut into (``Nb``); it divides every layer's padded
        columns.
    bus_weights : int
        Weights the DMA delivers per cycle (``Nt``); a power of two dividing ``pes`` (and
        ``4 * padded_hidden_size``); ``bus_weights * operand_width`` is the weight bus
        width.
    post_units : int
        Post-processing units (``PP``), each finishing one hidden unit per cycle; a power
        of two dividing ``pes / 4`` and the (padded) hidden units a pass completes.
    batch_norm : bool
        Whether the post-processing units include batch normalisation (an affine map per
        gate row; the paper's BN unit, which can be turned off at run time).
    operand_width : int
        Bits of the multiplier operands (weights, x and h), 2 to 18: one DSP48 multiplier.
    acc_width : int
        Bits of the accumulators and of the element-wise arithmetic, at least
        ``2 * operand_width``, at most 64 (the paper: 16-bit multiplies, 32-bit accumulation).
    weight_frac : int
        Fraction bits of the weights. Biases are kept at the accumulator format
        (``acc_width`` bits, :attr:`acc_frac` fraction bits): they are the accumulators'
        initial values.
    act_frac : int
        Fraction bits of the vector operand: the x inputs and the fed-back h.
    cell_frac : int
        Fraction bits of the ``acc_width``-bit element-wise format: gate activations, cell
        state and the products of the cell and hidden updates; at most ``acc_width - 2``
        so that 1.0 is representable.
    lut_multipliers : int
        PEs whose multiplier is built from LUTs instead of a DSP slice (the paper's ZC706
        design has 1024 PEs and 900 DSPs: "A few multiplication units are implemented using
        LUTs").

    Raises
    ------
    TypeError
        A parameter of the wrong type or out of its own range, e.g.
        ``hidden_size must be a positive integer, not -3``.
    ValueError
        Parameters that conflict, e.g.
        ``post_units (32) must divide pes / 4 (16), the hidden units a pass completes;
        nearest valid post_units: 16``.
    """

    input_size: int = 80
    hidden_size: int = 16
    hidden_sizes: tuple[int, ...] = ()
    layers: int = 1
    seq_len: int = 16
    pes: int = 64
    batch: int = 8
    blocks: int = 4
    bus_weights: int = 8
    post_units: int = 4
    batch_norm: bool = False
    operand_width: int = 16
    acc_width: int = 32
    weight_frac: int = 12
    act_frac: int = 12
    cell_frac: int = 16
    lut_multipliers: int = 0

    def __post_init__(self):
        for name in ("input_size", "hidden_size", "layers", "seq_len", "pes", "batch",
                     "blocks", "bus_weights", "post_units"):
            check_positive(name, getattr(self, name))
        if not isinstance(self.batch_norm, bool):
            raise TypeError(f"batch_norm must be a bool, not {self.batch_norm!r}")
        check_range("operand_width", self.operand_width, 2, 18)
        check_range("acc_width", self.acc_width, 4, 64)
        for name in ("weight_frac", "act_frac", "cell_frac", "lut_multipliers"):
            check_non_negative(name, getattr(self, name))
        object.__setattr__(self, "hidden_sizes", check_hidden_sizes(self))

        # Number formats.
        if self.acc_width < 2 * self.operand_width:
            raise ValueError(f"acc_width ({self.acc_width}) must be at least "
                             f"2 * operand_width ({2 * self.operand_width})")
        for name in ("weight_frac", "act_frac"):
            if getattr(self, name) > self.operand_width - 1:
                raise ValueError(f"{name} ({getattr(self, name)}) cannot exceed "
                                 f"operand_width - 1 ({self.operand_width - 1})")
        # weight_frac + act_frac <= 2 * operand_width - 2 <= acc_width - 2: a product's
        # fraction bits always leave the accumulator a sign bit.
        if self.cell_frac > self.acc_width - 2:
            raise ValueError(f"cell_frac ({self.cell_frac}) cannot exceed "
                             f"acc_width - 2 ({self.acc_width - 2})")

        # Size-independent rules: padding cannot help these.
        if self.pes % 4:
            raise ValueError(f"pes ({self.pes}) must be a multiple of 4: a pass computes "
                             f"the four gate rows of whole hidden units; nearest valid "
                             f"values: {_nearest(self.pes, lambda n: n % 4 == 0)}")
        if self.lut_multipliers > self.pes:
            raise ValueError(f"lut_multipliers ({self.lut_multipliers}) cannot exceed "
                             f"pes ({self.pes})")
        if self.bus_weights & (self.bus_weights - 1):
            raise ValueError(f"bus_weights ({self.bus_weights}) must be a power of two; "
                             f"nearest valid values: {_nearest(self.bus_weights, _pow2)}")
        if self.bus_weights * self.operand_width > MAX_BUS_BITS:
            raise ValueError(f"bus_weights * operand_width "
                             f"({self.bus_weights * self.operand_width}) cannot exceed "
                             f"{MAX_BUS_BITS}, the widest AXI4 data bus")
        if self.post_units & (self.post_units - 1):
            raise ValueError(f"post_units ({self.post_units}) must be a power of two; "
                             f"nearest valid values: {_nearest(self.post_units, _pow2)}")
        if self.pes % self.bus_weights:
            raise ValueError(f"bus_weights ({self.bus_weights}) must divide pes "
                             f"({self.pes}): a beat fills one group of PEs; nearest valid "
                             f"pes: {_nearest(self.pes, lambda n: n % self.bus_weights == 0)}")
        padded = _padded_sizes(self)
        if padded is None:
            units = self.pes // 4
            raise ValueError(f"post_units ({self.post_units}) must divide pes / 4 "
                             f"({units}), the hidden units a pass completes; nearest valid "
                             f"post_units: "
                             f"{_nearest(self.post_units, lambda n: _pow2(n) and units % n == 0)}")
        object.__setattr__(self, "_padded_sizes", padded)

        # The rules below hold on the padded shapes by construction of _padded_sizes;
        # they stay as the statement of what the RTL needs.
        # PE array: whole hidden units per pass, passes or columns per cycle.
        rows = self.rows
        if rows % self.pes and self.pes % rows:
            raise ValueError(f"pes ({self.pes}) must divide 4 * padded_hidden_size ({rows}) "
                             f"or be a multiple of it")

        # Blocks cut the columns of every layer evenly.
        widths = sorted({shape.columns for shape in self.layer_shapes})
        if any(width % self.blocks for width in widths):
            raise ValueError(f"blocks ({self.blocks}) must divide the padded columns of "
                             f"every layer: {widths}")
        step = self.columns_per_cycle
        if step & (step - 1):
            raise ValueError(f"pes / (4 * padded_hidden_size) ({step}) must be a power of two")
        for width in widths:
            if (width // self.blocks) % step:
                raise ValueError(f"columns per block ({width // self.blocks}) must be a "
                                 f"multiple of pes / (4 * padded_hidden_size) ({step}), the "
                                 f"columns a cycle consumes")

        # The DMA bus: power-of-two words, each beat inside one column.
        if rows % self.bus_weights:
            raise ValueError(f"bus_weights ({self.bus_weights}) must divide "
                             f"4 * padded_hidden_size ({rows}): a beat carries part of one "
                             f"column")

        for shape in self.layer_shapes:
            if shape.input_size % step:
                raise ValueError(f"the padded input size of layer {shape.index} "
                                 f"({shape.input_size}) must be a multiple of pes / "
                                 f"(4 * padded_hidden_size) ({step}): a column step reads "
                                 f"x or h, never both")
        if self.bus_weights * self.operand_width < self.acc_width:
            raise ValueError(f"bus_weights * operand_width "
                             f"({self.bus_weights * self.operand_width}) must be at least "
                             f"acc_width ({self.acc_width}): a header beat carries a bias")

        # Post-processing.
        if self.units_per_pass % self.post_units:
            raise ValueError(f"post_units ({self.post_units}) must divide the hidden units "
                             f"a pass completes ({self.units_per_pass})")

    @classmethod
    def candidates(cls, values, pinned):
        """The free parameters' values to try when completing a partial configuration
        (:func:`nnrtl.gen.params.parse_params`), preferred first: ``batch`` at most
        ``seq_len``; ``post_units``, ``bus_weights`` (at least ``acc_width`` bits a beat,
        at most the widest bus) and ``blocks`` nearest their defaults; ``lut_multipliers``
        at most ``pes``."""
        del pinned
        pow2 = [1 << n for n in range(8)]
        nearest = _by_distance
        batch, seq_len = values["batch"], values["seq_len"]
        bus = [n for n in pow2 if values["acc_width"] <= n * values["operand_width"]
               <= MAX_BUS_BITS]
        return {
            "batch": [min(batch, seq_len) if is_int(seq_len) and is_int(batch) else batch],
            "post_units": nearest(values["post_units"], pow2),
            "bus_weights": nearest(values["bus_weights"], bus),
            "blocks": nearest(values["blocks"], range(1, 33))[:8],
            "lut_multipliers": [min(values["lut_multipliers"], values["pes"])]
            if is_int(values["pes"]) and is_int(values["lut_multipliers"]) else [],
        }

    # -- Padding -------------------------------------------------------------------------

    @property
    def padded_input_size(self):
        """The first layer's input size the engine runs: ``input_size`` padded with zero
        inputs (and zero weight columns) up to the smallest size the RTL's rules accept."""
        return self._padded_sizes[0]

    @property
    def padded_hidden_size(self):
        """Hidden units the engine runs: ``hidden_size`` padded with units whose weights and
        biases are zero up to the smallest size the RTL's rules accept. Their h never
        reaches a true unit (the columns they feed have zero weights) and is cut from the
        outputs."""
        return self._padded_sizes[1]

    @property
    def is_padded(self):
        """Whether the engine runs a larger problem than the model's (odd sizes, or layers
        of different hidden sizes)."""
        return (self._padded_sizes != (self.input_size, self.hidden_size)
                or len(set(self.layer_hidden_sizes)) > 1)

    @property
    def padded(self):
        """This configuration with the padded sizes as its true ones, every layer of
        :attr:`padded_hidden_size` units (``self`` when not :attr:`is_padded`): what the
        RTL is built from and what the golden model runs."""
        if not self.is_padded:
            return self
        return dataclasses.replace(self, input_size=self.padded_input_size,
                                   hidden_size=self.padded_hidden_size, hidden_sizes=())

    @property
    def layer_hidden_sizes(self):
        """Hidden units of every layer of the model: :attr:`hidden_sizes`, or
        ``hidden_size`` for each layer."""
        return self.hidden_sizes or (self.hidden_size,) * self.layers

    def layer_sizes(self, index):
        """``(input_size, hidden_size)`` of layer ``index`` of the model (not padded)."""
        self.layer(index)
        sizes = self.layer_hidden_sizes
        return (self.input_size if index == 0 else sizes[index - 1]), sizes[index]

    @property
    def rows(self):
        """Rows of the interleaved matrix the engine runs, ``4 * padded_hidden_size``."""
        return 4 * self.padded_hidden_size

    @property
    def passes(self):
        """Passes over the rows per column: ``4 * hidden_size / pes`` when ``pes`` is
        smaller, else 1."""
        return max(1, self.rows // self.pes)

    @property
    def columns_per_cycle(self):
        """Vector elements (columns) the array consumes per cycle: ``pes / (4 *
        hidden_size)`` when ``pes`` is larger, else 1 ("the number of elements involved in
        the x_t vector each cycle depends on the parallelism of the system")."""
        return max(1, self.pes // self.rows)

    @property
    def rows_per_pass(self):
        """Matrix rows one pass computes, ``min(pes, 4 * hidden_size)``."""
        return min(self.pes, self.rows)

    @property
    def units_per_pass(self):
        """Hidden units a pass completes (four gate rows each)."""
        return self.rows_per_pass // 4

    @property
    def dsp(self):
        """DSP slices of the PE array: one per PE (a ``operand_width`` x ``operand_width``
        multiply fits one DSP48), less the LUT-built multipliers. The post-processing
        units' are counted by :func:`nnrtl.gen.sbe.resources.post_unit_dsp`."""
        return self.pes - self.lut_multipliers

    # -- Number formats ------------------------------------------------------------------

    @property
    def acc_frac(self):
        """Fraction bits of a product and of the accumulators, ``weight_frac + act_frac``."""
        return self.weight_frac + self.act_frac

    @property
    def formats(self):
        """The :class:`Formats` ``W``, ``V``, ``A`` and ``E``."""
        return Formats(weight=QFormat(self.operand_width, self.weight_frac),
                       vector=QFormat(self.operand_width, self.act_frac),
                       acc=QFormat(self.acc_width, self.acc_frac),
                       cell=QFormat(self.acc_width, self.cell_frac))

    @property
    def pwl_tables(self):
        """The :class:`PWLTables` of the post-processing units, each
        :func:`~nnrtl.hw.arith.pwl.pwl_table` with its defaults (64 segments); computed
        once per set of :attr:`formats`.

        Raises
        ------
        ValueError
            (from ``pwl_table``) if the formats leave fewer input codes than segments in a
            table's range (``acc_frac`` or ``cell_frac`` below 3).
        """
        return pwl_tables_of(self.formats)

    # -- Layers and blocks ---------------------------------------------------------------

    def layer(self, index):
        """The :class:`LayerShape` of layer ``index`` (0 first)."""
        if not is_int(index) or not 0 <= index < self.layers:
            raise TypeError(f"layer index must be an integer from 0 to {self.layers - 1}, "
                            f"not {index!r}")
        inputs = self.padded_input_size if index == 0 else self.padded_hidden_size
        columns = inputs + self.padded_hidden_size
        block_columns = columns // self.blocks
        first = inputs // block_columns
        hidden_blocks = self.blocks - first
        return LayerShape(
            index=index, input_size=inputs, hidden_size=self.padded_hidden_size,
            columns=columns,
            block_columns=block_columns, first_hidden_block=first,
            hidden_blocks=hidden_blocks,
            x_columns_in_hidden_blocks=inputs - first * block_columns,
            case=min(hidden_blocks, 3), alpha=first / self.blocks)

    @property
    def layer_shapes(self):
        """:class:`LayerShape` of every layer, first layer first."""
        return tuple(self.layer(index) for index in range(self.layers))

    @property
    def columns(self):
        """Columns of the first layer's matrix as the engine runs it, ``padded_input_size +
        padded_hidden_size``."""
        return self.padded_input_size + self.padded_hidden_size

    @property
    def block_columns(self):
        """Columns per block of the first layer."""
        return self.columns // self.blocks

    @property
    def max_block_columns(self):
        """Columns per block of the widest layer: what a block buffer holds."""
        return max(shape.block_columns for shape in self.layer_shapes)

    @property
    def hidden_blocks(self):
        """Blocks holding the first layer's h columns."""
        return self.layer(0).hidden_blocks

    @property
    def case(self):
        """The paper's case (1, 2 or 3) of the first layer."""
        return self.layer(0).case

    @property
    def cases(self):
        """The paper's case of every layer."""
        return tuple(shape.case for shape in self.layer_shapes)

    @property
    def weights_resident(self):
        """Whether all blocks fit the double buffer (``blocks <= 2``), so a layer's weights
        are loaded once per sequence instead of once per batch."""
        return self.blocks <= 2

    # -- Work and traffic ----------------------------------------------------------------

    @property
    def macs_per_step(self):
        """Useful multiply-accumulates per time step over all layers, those of the model:
        ``sum(4 * hidden_size * (inputs + hidden_size))``, padding not counted."""
        return sum(4 * hidden * (inputs + hidden)
                   for inputs, hidden in map(self.layer_sizes, range(self.layers)))

    @property
    def padded_macs_per_step(self):
        """Multiply-accumulates the engine issues per time step over all layers, padding
        included: ``sum(rows * columns)`` of the padded shapes."""
        return sum(self.rows * shape.columns for shape in self.layer_shapes)

    @property
    def padding_macs_per_step(self):
        """``padded_macs_per_step - macs_per_step``: the padding's share of the work."""
        return self.padded_macs_per_step - self.macs_per_step

    @property
    def weight_words(self):
        """Weights of all layers' interleaved matrices as streamed, padding included
        (biases not counted)."""
        return self.padded_macs_per_step

    @property
    def weight_words_per_batch(self):
        """Weights the DMA moves for one full batch of ``batch`` steps over all layers
        (:meth:`batch_blocks`); none when the weights are resident (amortised over the
        sequence)."""
        if self.weights_resident:
            return 0
        return sum(self.rows * shape.block_columns
                   * len(self.batch_blocks(shape.index, self.batch))
                   for shape in self.layer_shapes)

    def batches(self, steps):
        """``[(t0, n), ...]``: the batches of a run of ``steps`` steps, ``t0 = 0, B, 2B,
        ...`` and ``n = min(batch, steps - t0)``."""
        if not is_int(steps) or steps <= 0:
            raise TypeError(f"steps must be a positive integer, not {steps!r}")
        return [(t0, min(self.batch, steps - t0)) for t0 in range(0, steps, self.batch)]

    def batch_blocks(self, layer_index, size):
        """Blocks of layer ``layer_index`` the weight stream sends for one batch of
        ``size`` steps (weights not resident): blocks ``0 .. first_hidden_block - 1``
        once, then the h blocks once in cases 1 and 2 (both stay on chip for the batch)
        or once per step in case 3 (eqs. 5 and 6)."""
        shape = self.layer(layer_index)
        x_blocks = list(range(shape.first_hidden_block))
        h_blocks = list(range(shape.first_hidden_block, self.blocks))
        return x_blocks + h_blocks * (1 if shape.case < 3 else size)

    def block_schedule(self, layer_index, steps):
        """Block numbers in the order the weight stream sends them for one run of layer
        ``layer_index`` over ``steps`` steps (header not included): every block once if
        :attr:`weights_resident`, else :meth:`batch_blocks` batch after batch."""
        batches = self.batches(steps)
        if self.weights_resident:
            return list(range(self.blocks))
        return [block for _, size in batches for block in self.batch_blocks(layer_index, size)]

    # -- Memories ------------------------------------------------------------------------

    @property
    def bb_fifo_depth(self):
        """Entries of one PE's BB-FIFO: a partial sum per step of the batch and per pass."""
        return self.batch * self.passes

    @property
    def bb_fifo_in_lutram(self):
        """Whether the BB-FIFOs are shallow enough for LUTRAM (at most
        :data:`LUTRAM_DEPTH` entries), as the paper's ZC706 design keeps them."""
        return self.bb_fifo_depth <= LUTRAM_DEPTH

    @property
    def buffer_words(self):
        """Words of the double-buffered weight memory: two blocks of full rows."""
        return 2 * self.rows * self.max_block_columns

    @property
    def bram_eq7(self):
        """36 Kb block RAMs by the paper's eq. 7 for the first layer, with ``DW =
        operand_width``; the BB-FIFO term is left out when they are in LUTRAM.

        ``BRAM_Num = ((Lx + Lh) * (4 Lh + B) * DW * 2 / Nb + B * Npe * DW) / BRAM_size``
        """
        bits = (self.columns * (self.rows + self.batch) * self.operand_width * 2
                / self.blocks)
        if not self.bb_fifo_in_lutram:
            bits += self.batch * self.pes * self.operand_width
        return bits / BRAM36_BITS

    # -- Latency -------------------------------------------------------------------------

    @property
    def latency_stages(self):
        """Cycles of each stage between the cycle after a pass's last column step and the
        first hidden unit it yields being usable as a column operand, in order: the PE
        pipeline (operand registers, multiply, accumulate, capture by the
        interconnection), the post-processing unit's stages
        (:meth:`~nnrtl.hw.sbe.post.PostProcessingUnit.stage_latencies`, from the latencies of
        the arithmetic units it is built of) and the write into the h store."""
        from .post import PostProcessingUnit
        stages = {"operands": 1, "multiply": 1, "accumulate": 1, "capture": 1}
        stages.update(PostProcessingUnit.stage_latencies(self))
        stages["h write"] = 1
        return stages

    # -- Streams -------------------------------------------------------------------------

    @property
    def header_layout(self):
        """The :class:`HeaderLayout`: per hidden unit four biases, and with batch norm four
        scales and four shifts, gate by gate in :data:`GATES` order."""
        if self.batch_norm:
            return HeaderLayout(fields=12, bias=0, scale=4, shift=8)
        return HeaderLayout(fields=4, bias=0, scale=None, shift=None)

    @property
    def header_fields(self):
        """Values per hidden unit in a run's header (:attr:`header_layout`)."""
        return self.header_layout.fields

    @property
    def stream_bits(self):
        """The :class:`StreamBits` of ``s_weights`` (``bus_weights`` words), ``s_inputs``
        (``columns_per_cycle`` words) and ``m_axis`` (``post_units`` words), words of
        ``operand_width`` bits."""
        ow = self.operand_width
        return StreamBits(weights=bus_bits(self.bus_weights, ow),
                          inputs=bus_bits(self.columns_per_cycle, ow),
                          outputs=bus_bits(self.post_units, ow))

    @property
    def header_beats(self):
        """Weight-stream beats of a run's header: one value per beat."""
        return self.padded_hidden_size * self.header_fields

    @property
    def pipeline_latency(self):
        """Sum of :attr:`latency_stages`, in cycles."""
        return sum(self.latency_stages.values())

    @property
    def drain_cycles(self):
        """Cycles the post-processing units take for the hidden units of one pass."""
        return math.ceil(self.units_per_pass / self.post_units)

    # -- Registers -----------------------------------------------------------------------

    #: Read-only registers holding the configuration (name: attribute).
    _CONSTANTS = ("input_size", "hidden_size", "layers", "pes", "batch", "blocks",
                  "bus_weights", "post_units", "operand_width", "acc_width", "weight_frac",
                  "act_frac", "cell_frac")

    @property
    def register_constants(self):
        """``{register: value}`` of the read-only configuration registers."""
        hw = self.padded
        return {name: int(getattr(hw, name)) for name in self._CONSTANTS}

    @property
    def step_bits(self):
        """Width of the ``steps`` register: the longest run is ``2 ** step_bits - 1``
        steps."""
        return self.registers["steps"].width

    @property
    def registers(self):
        """The AXI4-Lite :class:`~nnrtl.hw.bus.RegisterMap` of the engine
        (:func:`~nnrtl.hw.sbe.register_map.register_map`)."""
        return register_map(self)

"""The SBE controller: issues one column step per cycle in the stall-free blocking-batching
order, and waits only for what a step needs.

Order of one layer's run of ``T`` steps, batch by batch (``n = min(batch, T - t0)``
steps), the schedule :mod:`nnrtl.gen.sbe.perf` models:

* **X phase** -- blocks ``0 .. F-1`` hold only x columns: for each block, for each step
  ``s`` of the batch, for each pass ``p``, its ``BS = block_columns / k`` column steps
  (one *segment*; the BB-FIFO entry ``s * passes + p`` carries the partial sums from block
  to block).
* **Hidden phase** -- the blocks holding h columns (their leading x columns first, so a
  step's x work runs before it needs the previous step's h):

  - one or two blocks (cases 1 and 2, *merged*): both are on chip; each step and pass is
    one segment over their columns, the final one;
  - more (case 3): for each step, block after block, each loaded for that step only.

A column step is issued when its weight block is loaded, its x vectors are loaded (x
columns) or the h elements it reads are written (h columns -- the only *stall* of the
paper), and, for the last step of a final segment (a *hand-over* of a pass's sums to the
post-processing units), when the previous hand-over's drain is over and the output FIFO
has room for the pass's hidden values.
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from .config import SbeConfig

__all__ = ["Controller", "LayerConstants", "Phase", "Waiting", "next_batch_size"]


class Phase(enum.Enum, shape=2):
    """What the controller is issuing: blocks of x columns only (``X``), the one or two
    hidden blocks of cases 1 and 2 (``MERGED``), or case 3's hidden blocks, one at a time
    (``CASE3``)."""

    X = 0
    MERGED = 1
    CASE3 = 2


class Waiting(data.Struct):
    """Why the controller issues nothing while busy (one reason at a time, checked in this
    order)."""

    weights: 1          # its weight block is not loaded
    inputs: 1           # its x vectors are not loaded
    hidden: 1           # the h elements it reads are not written (a stall)
    handover: 1         # a hand-over waits for the drain or for room in the output FIFO


def next_batch_size(config, steps, start):
    """Steps of the batch starting at step ``start`` of a run of ``steps`` steps:
    ``min(batch, steps - start)``, as an Amaranth value."""
    left = steps - start
    return Mux(left < config.batch, left, config.batch)


class LayerConstants:
    """Shape constants of the running layer as Amaranth values: those of layer 0, or of
    every later layer when ``later_layer`` is set (a multi-layer configuration's later layers
    all read ``hidden_size`` inputs)."""

    def __init__(self, config, later_layer):
        k = config.columns_per_cycle
        shapes = config.layer_shapes[:2]

        def value(getter):
            values = [getter(shape) for shape in shapes]
            if len(set(values)) == 1:
                return Const(values[0], range(values[0] + 1))
            return Mux(later_layer, values[-1], values[0])

        self.input_size = value(lambda s: s.input_size)
        self.block_columns = value(lambda s: s.block_columns)
        self.block_steps = value(lambda s: s.block_columns // k)
        self.first_hidden_block = value(lambda s: s.first_hidden_block)
        self.hidden_blocks = value(lambda s: s.hidden_blocks)
        self.tail_steps = value(lambda s: s.x_columns_in_hidden_blocks // k)
        self.merged = value(lambda s: int(s.hidden_blocks <= 2))
        self.hidden_column = value(lambda s: s.first_hidden_block * s.block_columns)
        self.entries = value(lambda s: config.passes * s.block_columns // k)


class Controller(wiring.Component):
    """Column-step sequencer of the SBE.

    Parameters
    ----------
    config : SbeConfig

    Attributes
    ----------
    start : In(1)
        Begin a run of ``steps`` steps (ignored while ``busy``); ``steps`` and
        ``later_layer`` (the run is of a layer after the first) must hold still during the
        run.
    steps, later_layer : In
    busy : Out(1)
        Column steps of the run remain to be issued.
    w_loaded, x_loaded : In(2)
        Which weight / vector buffer halves hold a loaded block.
    w_release, x_release : Out(2)
        Halves freed this cycle.
    h_produced : In(step_bits)
        Steps of the run whose h is completely written.
    h_count : In
        Units of step ``h_produced`` written so far.
    drain_free, out_room : In(1)
        A hand-over may be issued this cycle.
    issue : Out(1)
        A column step is issued this cycle; with it:
    w_addr, x_addr, h_addr : Out
        Weight buffer entry, vector buffer entry and h element index (of the first of the
        ``k`` columns).
    is_h : Out(1)
        The step reads h (else x).
    step : Out(step_bits)
        Step of the run (``t0 + s``).
    first, last, init_zero, bb_write, handover : Out(1)
    bb_addr : Out
    pass_index : Out
    waiting : Out(Waiting)
        Why nothing is issued while ``busy``.
    """

    def __init__(self, config):
        if not isinstance(config, SbeConfig):
            raise TypeError(f"config must be an SbeConfig, not {config!r}")
        self._config = config
        self._w_half = self.weight_half_depth(config)
        self._x_half = self.vector_half_depth(config)
        super().__init__({
            "start": In(1),
            "steps": In(config.step_bits),
            "later_layer": In(1),
            "busy": Out(1),
            "w_loaded": In(2),
            "x_loaded": In(2),
            "w_release": Out(2),
            "x_release": Out(2),
            "h_produced": In(config.step_bits),
            "h_count": In(range(config.hidden_size + 1)),
            "drain_free": In(1),
            "out_room": In(1),
            "issue": Out(1),
            "w_addr": Out(range(2 * self._w_half)),
            "x_addr": Out(range(2 * self._x_half)),
            "h_addr": Out(range(config.hidden_size)),
            "is_h": Out(1),
            "step": Out(config.step_bits),
            "first": Out(1),
            "last": Out(1),
            "init_zero": Out(1),
            "bb_write": Out(1),
            "handover": Out(1),
            "bb_addr": Out(range(config.bb_fifo_depth)),
            "pass_index": Out(range(config.passes)),
            "waiting": Out(Waiting),
        })

    @staticmethod
    def weight_half_depth(config):
        """Entries of one half of the weight buffer: the column steps of a block's passes,
        ``passes * max_block_columns / columns_per_cycle``."""
        return config.passes * config.max_block_columns // config.columns_per_cycle

    @staticmethod
    def vector_half_depth(config):
        """Entries of one half of the vector (x) buffer: a block's x for a whole batch,
        ``batch * max_block_columns / columns_per_cycle``."""
        return config.batch * config.max_block_columns // config.columns_per_cycle

    def elaborate(self, platform):
        m = Module()
        config = self._config
        k, P = config.columns_per_cycle, config.passes
        resident = config.weights_resident

        c = LayerConstants(config, self.later_layer)
        x_columns, block_columns, block_steps = c.input_size, c.block_columns, c.block_steps
        first_hidden, hidden_blocks, tail_steps = (c.first_hidden_block, c.hidden_blocks,
                                                   c.tail_steps)
        merged, hidden_column = c.merged, c.hidden_column

        t0 = Signal(config.step_bits)
        n = Signal(range(config.batch + 1))
        phase = Signal(Phase)
        s = Signal(range(config.batch))
        p = Signal(range(P))
        q = Signal(range(config.max_block_columns // k))
        hidden_part = Signal()                        # merged: which hidden block
        block = Signal(range(config.blocks))          # X phase block / case 3 hidden block
        block_column = Signal(range(config.columns + config.hidden_size + 1))  # its first
        column_offset = Signal(range(config.columns + config.hidden_size + 1))  # q * k
        p_base = Signal(range(2 * self._w_half + 1))  # p * block_steps
        x_base = Signal(range(2 * self._x_half + 1))  # s * (block_steps or tail_steps)
        bb = Signal(range(config.bb_fifo_depth + 1))  # BB-FIFO entry, s * passes + p
        bb_step = Signal(range(config.bb_fifo_depth + 1))   # case 3: entry of step s, pass 0
        w_half = Signal()                             # weight buffer half in use
        x_half = Signal()                             # vector buffer half in use

        def first_phase():
            return Mux(first_hidden != 0, Phase.X, Mux(merged, Phase.MERGED, Phase.CASE3))

        # -- What the current column step is -------------------------------------------
        col = Signal.like(block_column)
        m.d.comb += col.eq(block_column + column_offset)
        is_h = Signal()
        m.d.comb += is_h.eq(col >= x_columns)
        in_x = phase == Phase.X
        in_merged = phase == Phase.MERGED
        seg_first = (q == 0) & (~in_merged | (hidden_part == 0))
        seg_last = (q == block_steps - 1) & (~in_merged | (hidden_part == hidden_blocks - 1))
        final = Mux(in_x, 0, Mux(in_merged, 1, block == hidden_blocks - 1))
        handover = seg_last & final

        if resident:
            half = Mux(in_x, block, first_hidden + hidden_part)[:1]
        else:
            half = Mux(in_merged, w_half ^ hidden_part, w_half)
        m.d.comb += [
            self.w_addr.eq(Mux(half, self._w_half, 0) + p_base + q),
            self.x_addr.eq(Mux(x_half, self._x_half, 0) + x_base + q),
            self.h_addr.eq((col - x_columns)[:len(self.h_addr)]),
            self.is_h.eq(is_h),
            self.step.eq(t0 + s),
            self.first.eq(seg_first),
            self.last.eq(seg_last),
            self.init_zero.eq(Mux(in_x | (phase == Phase.CASE3), block == 0, 1)
                              & (in_x | (first_hidden == 0))),
            self.bb_write.eq(seg_last & ~final),
            self.handover.eq(handover),
            self.bb_addr.eq(bb),
            self.pass_index.eq(p),
        ]

        # -- Whether it can be issued ----------------------------------------------------
        step = t0 + s
        h_last = col - x_columns + k                # h elements needed: [.., h_last)
        h_ready = ((step == 0) | (self.h_produced >= step)
                   | ((self.h_produced + 1 == step) & (h_last <= self.h_count)))
        w_ok = Mux(half, self.w_loaded[1], self.w_loaded[0])
        x_ok = Mux(x_half, self.x_loaded[1], self.x_loaded[0]) | is_h
        h_ok = ~is_h | h_ready
        ho_ok = ~handover | (self.drain_free & self.out_room)
        go = Signal()
        m.d.comb += [
            go.eq(self.busy & w_ok & x_ok & h_ok & ho_ok),
            self.issue.eq(go),
        ]
        with m.If(self.busy & ~go):
            m.d.comb += [self.waiting.weights.eq(~w_ok),
                         self.waiting.inputs.eq(w_ok & ~x_ok),
                         self.waiting.hidden.eq(w_ok & x_ok & ~h_ok),
                         self.waiting.handover.eq(w_ok & x_ok & h_ok & ~ho_ok)]

        # -- Advancing -----------------------------------------------------------------
        def release_w(mask):
            if not resident:
                m.d.comb += self.w_release.eq(mask)

        def half_mask(half):
            return Mux(half, 0b10, 0b01)

        def release_tail():
            """The vector half holding the batch's x columns of the hidden blocks."""
            with m.If(tail_steps != 0):
                m.d.comb += self.x_release.eq(half_mask(x_half))
                m.d.sync += x_half.eq(~x_half)

        def end_of_batch():
            with m.If(t0 + n == self.steps):
                m.d.sync += self.busy.eq(0)
            with m.Else():
                m.d.sync += [t0.eq(t0 + n), n.eq(next_batch_size(config, self.steps, t0 + n)),
                             phase.eq(first_phase()), block.eq(0), block_column.eq(0),
                             x_base.eq(0), bb.eq(0), bb_step.eq(0)]

        def next_pass(on_wrap):
            """``p`` advances; ``on_wrap`` runs when it wraps."""
            with m.If(p == P - 1):
                m.d.sync += [p.eq(0), p_base.eq(0)]
                on_wrap()
            with m.Else():
                m.d.sync += [p.eq(p + 1), p_base.eq(p_base + block_steps)]

        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(self.steps != 0), t0.eq(0),
                         n.eq(next_batch_size(config, self.steps, 0)), phase.eq(first_phase()),
                         s.eq(0), p.eq(0), q.eq(0), hidden_part.eq(0), block.eq(0), block_column.eq(0),
                         column_offset.eq(0), p_base.eq(0), x_base.eq(0), bb.eq(0), bb_step.eq(0),
                         w_half.eq(0), x_half.eq(0)]

        with m.If(go):
            with m.If(q != block_steps - 1):
                m.d.sync += [q.eq(q + 1), column_offset.eq(column_offset + k)]
            with m.Else():
                m.d.sync += [q.eq(0), column_offset.eq(0)]
                with m.Switch(phase):
                    with m.Case(Phase.X):
                        def x_step():
                            with m.If(s == n - 1):
                                # Block done for the batch.
                                m.d.sync += [s.eq(0), x_base.eq(0), bb.eq(0),
                                             w_half.eq(~w_half), x_half.eq(~x_half),
                                             block.eq(block + 1), block_column.eq(block_column + block_columns)]
                                release_w(half_mask(w_half))
                                m.d.comb += self.x_release.eq(half_mask(x_half))
                                with m.If(block == first_hidden - 1):
                                    m.d.sync += [block.eq(0), hidden_part.eq(0),
                                                 phase.eq(Mux(merged, Phase.MERGED,
                                                              Phase.CASE3))]
                            with m.Else():
                                m.d.sync += [s.eq(s + 1), x_base.eq(x_base + block_steps),
                                             bb.eq(bb + 1)]
                        with m.If(p != P - 1):
                            m.d.sync += bb.eq(bb + 1)
                        next_pass(x_step)
                    with m.Case(Phase.MERGED):
                        with m.If(hidden_part != hidden_blocks - 1):
                            m.d.sync += [hidden_part.eq(1), block_column.eq(block_column + block_columns)]
                        with m.Else():
                            m.d.sync += [hidden_part.eq(0), block_column.eq(hidden_column)]

                            def merged_step():
                                with m.If(s == n - 1):
                                    m.d.sync += [s.eq(0), x_base.eq(0), bb.eq(0)]
                                    release_w(Mux(hidden_blocks == 2, 0b11, half_mask(w_half)))
                                    if not resident:
                                        m.d.sync += w_half.eq(w_half ^ (hidden_blocks == 1))
                                    release_tail()
                                    end_of_batch()
                                with m.Else():
                                    m.d.sync += [s.eq(s + 1), x_base.eq(x_base + tail_steps),
                                                 bb.eq(bb + 1)]
                            with m.If(p != P - 1):
                                m.d.sync += bb.eq(bb + 1)
                            next_pass(merged_step)
                    with m.Case(Phase.CASE3):
                        def block_done():
                            release_w(half_mask(w_half))
                            m.d.sync += w_half.eq(~w_half)
                            with m.If(block == hidden_blocks - 1):
                                m.d.sync += [block.eq(0), block_column.eq(hidden_column)]
                                with m.If(s == n - 1):
                                    release_tail()
                                    m.d.sync += [s.eq(0), x_base.eq(0), bb.eq(0),
                                                 bb_step.eq(0)]
                                    end_of_batch()
                                with m.Else():
                                    m.d.sync += [s.eq(s + 1), x_base.eq(x_base + tail_steps),
                                                 bb.eq(bb_step + P), bb_step.eq(bb_step + P)]
                            with m.Else():
                                m.d.sync += [block.eq(block + 1), block_column.eq(block_column + block_columns),
                                             bb.eq(bb_step)]
                        with m.If(p != P - 1):
                            m.d.sync += bb.eq(bb + 1)
                        next_pass(block_done)
        return m

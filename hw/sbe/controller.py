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

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Controller", "LayerConstants", "PHASE_X", "PHASE_MERGED", "PHASE_CASE3"]

PHASE_X, PHASE_MERGED, PHASE_CASE3 = 0, 1, 2
STEP_BITS = 32


class LayerConstants:
    """Shape constants of the running layer as Amaranth values: those of layer 0, or of
    every later layer when ``upper`` is set (a multi-layer configuration's later layers
    all read ``hidden_size`` inputs)."""

    def __init__(self, config, upper):
        k = config.columns_per_cycle
        shapes = config.layer_shapes[:2]

        def value(getter):
            values = [getter(shape) for shape in shapes]
            if len(set(values)) == 1:
                return Const(values[0], range(values[0] + 1))
            return Mux(upper, values[-1], values[0])

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
    config : SBEConfig

    Attributes
    ----------
    start : In(1)
        Begin a run of ``steps`` steps (ignored while ``busy``); ``steps`` and ``upper``
        (the run is of a layer after the first) must hold still during the run.
    steps, upper : In
    busy : Out(1)
        Column steps of the run remain to be issued.
    w_loaded, x_loaded : In(2)
        Which weight / vector buffer halves hold a loaded block.
    w_release, x_release : Out(2)
        Halves freed this cycle.
    h_produced : In(STEP_BITS)
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
    step : Out(STEP_BITS)
        Step of the run (``t0 + s``).
    first, last, init_zero, bb_write, handover : Out(1)
    bb_addr : Out
    pass_index : Out
    waiting : Out(unsigned(4))
        Why nothing is issued while ``busy``: bit 0 weights, bit 1 x, bit 2 h (a stall),
        bit 3 hand-over (drain or output room).
    """

    def __init__(self, config):
        self._config = config
        k = config.columns_per_cycle
        self._w_half = config.passes * config.max_block_columns // k
        self._x_half = config.batch * config.max_block_columns // k
        super().__init__({
            "start": In(1),
            "steps": In(STEP_BITS),
            "upper": In(1),
            "busy": Out(1),
            "w_loaded": In(2),
            "x_loaded": In(2),
            "w_release": Out(2),
            "x_release": Out(2),
            "h_produced": In(STEP_BITS),
            "h_count": In(range(config.hidden_size + 1)),
            "drain_free": In(1),
            "out_room": In(1),
            "issue": Out(1),
            "w_addr": Out(range(2 * self._w_half)),
            "x_addr": Out(range(2 * self._x_half)),
            "h_addr": Out(range(config.hidden_size)),
            "is_h": Out(1),
            "step": Out(STEP_BITS),
            "first": Out(1),
            "last": Out(1),
            "init_zero": Out(1),
            "bb_write": Out(1),
            "handover": Out(1),
            "bb_addr": Out(range(config.bb_fifo_depth)),
            "pass_index": Out(range(config.passes)),
            "waiting": Out(4),
        })

    @property
    def weight_half_depth(self):
        """Entries of one half of the weight buffer."""
        return self._w_half

    @property
    def vector_half_depth(self):
        """Entries of one half of the vector (x) buffer."""
        return self._x_half

    def elaborate(self, platform):
        m = Module()
        config = self._config
        k, P = config.columns_per_cycle, config.passes
        resident = config.weights_resident

        c = LayerConstants(config, self.upper)
        In_, BC, BS, F, HB, XTk, merged, hidden_col = (
            c.input_size, c.block_columns, c.block_steps, c.first_hidden_block,
            c.hidden_blocks, c.tail_steps, c.merged, c.hidden_column)

        t0 = Signal(STEP_BITS)
        n = Signal(range(config.batch + 1))
        phase = Signal(2)
        s = Signal(range(config.batch))
        p = Signal(range(P))
        q = Signal(range(config.max_block_columns // k))
        part = Signal()                               # merged: which hidden block
        blk = Signal(range(config.blocks))            # X phase block / case 3 hidden block
        blk_col = Signal(range(config.columns + config.hidden_size + 1))   # first column
        qk = Signal(range(config.columns + config.hidden_size + 1))        # q * k
        p_base = Signal(range(2 * self._w_half + 1))  # p * BS
        x_base = Signal(range(2 * self._x_half + 1))  # s * (BS or XT / k)
        bb = Signal(range(config.bb_fifo_depth + 1))  # s * passes + p
        bb_s = Signal(range(config.bb_fifo_depth + 1))
        w_use = Signal()
        x_use = Signal()

        def next_batch_size(start):
            left = self.steps - start
            return Mux(left < config.batch, left, config.batch)

        def first_phase():
            return Mux(F != 0, PHASE_X, Mux(merged, PHASE_MERGED, PHASE_CASE3))

        # -- What the current column step is -------------------------------------------
        col = Signal.like(blk_col)
        m.d.comb += col.eq(blk_col + qk)
        is_h = Signal()
        m.d.comb += is_h.eq(col >= In_)
        in_x = phase == PHASE_X
        in_merged = phase == PHASE_MERGED
        seg_first = (q == 0) & (~in_merged | (part == 0))
        seg_last = (q == BS - 1) & (~in_merged | (part == HB - 1))
        final = Mux(in_x, 0, Mux(in_merged, 1, blk == HB - 1))
        handover = seg_last & final

        if resident:
            half = Mux(in_x, blk, F + part)[:1]
        else:
            half = Mux(in_merged, w_use ^ part, w_use)
        m.d.comb += [
            self.w_addr.eq(Mux(half, self._w_half, 0) + p_base + q),
            self.x_addr.eq(Mux(x_use, self._x_half, 0) + x_base + q),
            self.h_addr.eq((col - In_)[:len(self.h_addr)]),
            self.is_h.eq(is_h),
            self.step.eq(t0 + s),
            self.first.eq(seg_first),
            self.last.eq(seg_last),
            self.init_zero.eq(Mux(in_x | (phase == PHASE_CASE3), blk == 0, 1) & (in_x | (F == 0))),
            self.bb_write.eq(seg_last & ~final),
            self.handover.eq(handover),
            self.bb_addr.eq(bb),
            self.pass_index.eq(p),
        ]

        # -- Whether it can be issued ----------------------------------------------------
        step = t0 + s
        h_last = col - In_ + k                      # h elements needed: [.., h_last)
        h_ready = ((step == 0) | (self.h_produced >= step)
                   | ((self.h_produced + 1 == step) & (h_last <= self.h_count)))
        w_ok = Mux(half, self.w_loaded[1], self.w_loaded[0])
        x_ok = Mux(x_use, self.x_loaded[1], self.x_loaded[0]) | is_h
        h_ok = ~is_h | h_ready
        ho_ok = ~handover | (self.drain_free & self.out_room)
        go = Signal()
        m.d.comb += [
            go.eq(self.busy & w_ok & x_ok & h_ok & ho_ok),
            self.issue.eq(go),
            self.waiting.eq(Mux(self.busy & ~go,
                                Cat(~w_ok, w_ok & ~x_ok, w_ok & x_ok & ~h_ok,
                                    w_ok & x_ok & h_ok & ~ho_ok), 0)),
        ]

        # -- Advancing -----------------------------------------------------------------
        def release_w(mask):
            if not resident:
                m.d.comb += self.w_release.eq(mask)

        def half_mask(half):
            return Mux(half, 0b10, 0b01)

        def release_tail():
            """The vector half holding the batch's x columns of the hidden blocks."""
            with m.If(XTk != 0):
                m.d.comb += self.x_release.eq(half_mask(x_use))
                m.d.sync += x_use.eq(~x_use)

        def end_of_batch():
            with m.If(t0 + n == self.steps):
                m.d.sync += self.busy.eq(0)
            with m.Else():
                m.d.sync += [t0.eq(t0 + n), n.eq(next_batch_size(t0 + n)),
                             phase.eq(first_phase()), blk.eq(0), blk_col.eq(0),
                             x_base.eq(0), bb.eq(0), bb_s.eq(0)]

        def next_pass(on_wrap):
            """``p`` advances; ``on_wrap`` runs when it wraps."""
            with m.If(p == P - 1):
                m.d.sync += [p.eq(0), p_base.eq(0)]
                on_wrap()
            with m.Else():
                m.d.sync += [p.eq(p + 1), p_base.eq(p_base + BS)]

        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(self.steps != 0), t0.eq(0),
                         n.eq(next_batch_size(0)), phase.eq(first_phase()),
                         s.eq(0), p.eq(0), q.eq(0), part.eq(0), blk.eq(0), blk_col.eq(0),
                         qk.eq(0), p_base.eq(0), x_base.eq(0), bb.eq(0), bb_s.eq(0),
                         w_use.eq(0), x_use.eq(0)]

        with m.If(go):
            with m.If(q != BS - 1):
                m.d.sync += [q.eq(q + 1), qk.eq(qk + k)]
            with m.Else():
                m.d.sync += [q.eq(0), qk.eq(0)]
                with m.Switch(phase):
                    with m.Case(PHASE_X):
                        def x_step():
                            with m.If(s == n - 1):
                                # Block done for the batch.
                                m.d.sync += [s.eq(0), x_base.eq(0), bb.eq(0),
                                             w_use.eq(~w_use), x_use.eq(~x_use),
                                             blk.eq(blk + 1), blk_col.eq(blk_col + BC)]
                                release_w(half_mask(w_use))
                                m.d.comb += self.x_release.eq(half_mask(x_use))
                                with m.If(blk == F - 1):
                                    m.d.sync += [blk.eq(0), part.eq(0),
                                                 phase.eq(Mux(merged, PHASE_MERGED,
                                                              PHASE_CASE3))]
                            with m.Else():
                                m.d.sync += [s.eq(s + 1), x_base.eq(x_base + BS),
                                             bb.eq(bb + 1)]
                        with m.If(p != P - 1):
                            m.d.sync += bb.eq(bb + 1)
                        next_pass(x_step)
                    with m.Case(PHASE_MERGED):
                        with m.If(part != HB - 1):
                            m.d.sync += [part.eq(1), blk_col.eq(blk_col + BC)]
                        with m.Else():
                            m.d.sync += [part.eq(0), blk_col.eq(hidden_col)]

                            def merged_step():
                                with m.If(s == n - 1):
                                    m.d.sync += [s.eq(0), x_base.eq(0), bb.eq(0)]
                                    release_w(Mux(HB == 2, 0b11, half_mask(w_use)))
                                    if not resident:
                                        m.d.sync += w_use.eq(w_use ^ (HB == 1))
                                    release_tail()
                                    end_of_batch()
                                with m.Else():
                                    m.d.sync += [s.eq(s + 1), x_base.eq(x_base + XTk),
                                                 bb.eq(bb + 1)]
                            with m.If(p != P - 1):
                                m.d.sync += bb.eq(bb + 1)
                            next_pass(merged_step)
                    with m.Case(PHASE_CASE3):
                        def block_done():
                            release_w(half_mask(w_use))
                            m.d.sync += w_use.eq(~w_use)
                            with m.If(blk == HB - 1):
                                m.d.sync += [blk.eq(0), blk_col.eq(hidden_col)]
                                with m.If(s == n - 1):
                                    release_tail()
                                    m.d.sync += [s.eq(0), x_base.eq(0), bb.eq(0),
                                                 bb_s.eq(0)]
                                    end_of_batch()
                                with m.Else():
                                    m.d.sync += [s.eq(s + 1), x_base.eq(x_base + XTk),
                                                 bb.eq(bb_s + P), bb_s.eq(bb_s + P)]
                            with m.Else():
                                m.d.sync += [blk.eq(blk + 1), blk_col.eq(blk_col + BC),
                                             bb.eq(bb_s)]
                        with m.If(p != P - 1):
                            m.d.sync += bb.eq(bb + 1)
                        next_pass(block_done)
        return m

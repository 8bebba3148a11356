# amaranth: UnusedElaboratable=no
"""The parts of the FARNN engine top (:class:`~nnrtl.hw.farnn.engine.FarnnEngine`), each a
method of :class:`EngineDatapath` named after the paper's blocks (Cho et al., TPDS 2022,
Sec. 5, Fig. 3): the stream edges and run state, the MVM units and their weight loader, the
on-chip buffers, the vector feed, the serializer of the units' result beats, the BW fold,
the projection sink, the activation wiring, the output streams and the counters. The
schedule they implement is stated once, in the module docstring of
:mod:`nnrtl.hw.farnn.engine`.

A step runs one *job* per matrix of the pass (:meth:`FarnnConfig.pass_matrices`): without a
projection one (``R_k`` / ``R_k^T``), with one two (FW ``R_k`` then ``W_hr``, BW ``R_k^T``
then ``W_hr^T``). The feed, the serializer and the units' configuration each follow their
own job; the job's geometry comes from its :class:`~nnrtl.hw.farnn.config.MatrixShape`
through :meth:`EngineDatapath.pick`.
"""

from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import connect, flipped

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from ..bus import AXI4StreamToStream, PerfCounter, RegisterFile, StreamToAXI4Stream
from .activation import SAVED
from .mvm import MVMUnit
from .pe import sideband
from .registers import COUNTERS, PHASES, register_constants, stream_bits, stream_words

__all__ = ["EngineDatapath"]

W = 32
#: fp32 ``-0``: ``fa(x, -0) = x`` (the ``dy`` of the BW activation with a projection).
NEGATIVE_ZERO = 0x80000000


def _all(values):
    total = Const(1)
    for value in values:
        total = total & value
    return total


def _rows_of_unit(shape, unit):
    """Real rows of ``unit``'s block of ``shape`` (all of them for a gate matrix)."""
    if shape.units == 1:
        return shape.total_rows
    return max(0, min(shape.rows, shape.total_rows - unit * shape.rows))


class EngineDatapath:
    """One elaboration of a :class:`~nnrtl.hw.farnn.engine.FarnnEngine` into module ``m``;
    :meth:`build` calls the parts in dependency order."""

    def __init__(self, engine, m):
        self.engine, self.m = engine, m
        cfg = self.cfg = engine.config
        self.units, self.chains, self.length = cfg.units, cfg.chains, cfg.chain_length
        self.hidden, self.max_batch = cfg.hidden_size, cfg.batch
        self.gru = cfg.cell == "gru"
        self.proj = bool(cfg.proj_size)
        self.jobs = 2 if self.proj else 1
        self.shapes = [cfg.pass_matrices("fw"), cfg.pass_matrices("bw")]
        self.pes = cfg.pes_per_unit
        all_shapes = self.shapes[0] + self.shapes[1]
        self.max_rows = max(shape.total_rows for shape in all_shapes)
        self.max_inputs = max(shape.inputs for shape in all_shapes)
        self.max_slices = max(shape.slices for shape in all_shapes)
        self.cells = self.max_batch * self.hidden

    def pick(self, bw, job, function):
        """``function(shape)`` (an int) of the job ``job`` of pass ``bw``, as a value."""
        def by_job(shapes):
            values = [function(shape) for shape in shapes]
            if len(values) == 1 or values[0] == values[1]:
                return values[0]
            return Mux(job, values[1], values[0])
        fw, bw_value = by_job(self.shapes[0]), by_job(self.shapes[1])
        if isinstance(fw, int) and isinstance(bw_value, int) and fw == bw_value:
            return fw
        return Mux(bw, bw_value, fw)

    def build(self):
        self.edges()
        self.run_state()
        self.mvm_units()
        self.weight_loader()
        self.buffers()
        self.feed()
        self.serializer()
        self.bw_fold()
        self.projection_sink()
        self.activation()
        self.outputs()
        self.counters()

    # -- edges, registers, run state -----------------------------------------------------

    def edges(self):
        m, engine = self.m, self.engine
        m.submodules.regfile = regfile = RegisterFile(engine.registers)
        connect(m, flipped(engine.s_axil), regfile.s_axil)
        self.regs = regfile.regs
        bits = stream_bits(self.cfg)
        self.rx, self.tx = {}, {}
        for name in ("weights", "imvm", "bw") + (("dy",) if self.proj else ()):
            edge = AXI4StreamToStream(bits["bw_in" if name == "bw" else name])
            m.submodules[f"rx_{name}"] = self.rx[name] = edge
            connect(m, flipped(getattr(engine, f"s_{name}")), edge.s_axis)
        for name in ("h", "saved", "deltas") + (("proj",) if self.proj else ()):
            edge = StreamToAXI4Stream(bits[name])
            m.submodules[f"tx_{name}"] = self.tx[name] = edge
            connect(m, edge.m_axis, flipped(getattr(engine, f"m_{name}")))
        control = engine.registers["control"]
        self.pulse = {name: self.regs.control[control.field(name).offset]
                      for name in ("start", "load", "clear")}

    def run_state(self):
        m, regs = self.m, self.regs
        self.running, self.loading, self.done = Signal(), Signal(), Signal()
        self.bw = Signal()                      # phase of the run
        self.steps = Signal(32)
        self.run_error = Signal()
        self.run_batch = Signal(range(self.max_batch + 1), init=self.max_batch)
        self.start = start = self.pulse["start"] & ~self.running & ~self.loading
        batch_ok = (regs.batch != 0) & (regs.batch <= self.max_batch)
        with m.If(start):
            m.d.sync += [self.bw.eq(regs.phase == PHASES["bw"]), self.steps.eq(regs.steps),
                         self.run_batch.eq(Mux(batch_ok, regs.batch, self.run_batch)),
                         self.running.eq(batch_ok & (regs.steps != 0)),
                         self.done.eq(~batch_ok | (regs.steps == 0)),
                         self.run_error.eq(~batch_ok | (regs.steps == 0))]
        self.go = Signal()                      # the run's state is reset, running set
        m.d.comb += self.go.eq(start & batch_ok & (regs.steps != 0))
        self.start_bw = regs.phase == PHASES["bw"]

    # -- MVM units and the weight loader -------------------------------------------------

    def mvm_units(self):
        """The ``units`` MVM units in lockstep; their configuration is the job of the
        load (while loading) or of the serializer (the run whose beats it takes)."""
        m, cfg = self.m, self.cfg
        self.mvms = []
        for k in range(self.units):
            unit = MVMUnit(FP32, chains=self.chains, chain_length=self.length,
                           weight_depth=cfg.weight_depth, adder_stages=cfg.adder_stages,
                           multiplier_stages=cfg.multiplier_stages,
                           split=cfg.split_factor,
                           vector_depth=self.max_batch * self.max_inputs)
            m.submodules[f"unit{k}"] = unit
            self.mvms.append(unit)
        self.load_bw, self.load_job, self.ser_job = Signal(), Signal(), Signal()
        job = Mux(self.loading, self.load_job, self.ser_job)
        bw = Mux(self.loading, self.load_bw, self.bw)
        bases = [[0] + [shapes[0].weights_per_pe] * (len(shapes) - 1)
                 for shapes in self.shapes]
        base = self.pick(bw, job, lambda shape: bases[shape.name.endswith("_t")][
            shape.name.startswith("projection")])
        for unit in self.mvms:
            m.d.comb += [unit.n_in.eq(self.pick(bw, job, lambda s: s.inputs)),
                         unit.rounds.eq(self.pick(bw, job, lambda s: s.slices)),
                         unit.split_last.eq(self.pick(bw, job, lambda s: int(s.split_last))),
                         unit.base.eq(base), unit.batch.eq(self.run_batch)]

    def weight_loader(self):
        """LOAD routes ``s_weights`` to unit 0 until a ``tlast``, (with a projection: its
        projection block until the next), then unit 1, ...; GRU FW then ``bR_n``."""
        m, regs, rx_w = self.m, self.regs, self.rx["weights"]
        units, chains, hidden = self.units, self.chains, self.hidden
        load_unit = Signal(range(units + 2))
        bias_rows = -(-hidden // chains)
        bias_beat = Signal(range(bias_rows + 1))
        self.bias_error = Signal()
        bias = Memory(shape=chains * W, depth=bias_rows, init=[])
        m.submodules.bias = bias
        bias_write = bias.write_port()
        self.bias_read = bias.read_port(domain="comb")
        loading = self.loading
        with m.If(self.pulse["load"] & ~self.running & ~loading):
            m.d.sync += [loading.eq(1), load_unit.eq(0), bias_beat.eq(0), self.load_job.eq(0),
                         self.load_bw.eq(regs.phase == PHASES["bw"])]
        for k, unit in enumerate(self.mvms):
            mine = loading & (load_unit == k)
            m.d.comb += [unit.w.valid.eq(rx_w.o.valid & mine),
                         unit.w.payload.last.eq(rx_w.o.payload.last)]
            m.d.comb += [unit.w.payload.data[c].eq(rx_w.o.payload.data[c * W:(c + 1) * W])
                         for c in range(chains)]
            with m.If(mine):
                m.d.comb += rx_w.o.ready.eq(unit.w.ready)
                with m.If(rx_w.o.valid & unit.w.ready & rx_w.o.payload.last):
                    next_unit = [load_unit.eq(k + 1)]
                    if k == units - 1:
                        next_unit.append(loading.eq(Const(int(self.gru)) & ~self.load_bw))
                    if self.proj:
                        m.d.sync += self.load_job.eq(~self.load_job)
                        with m.If(self.load_job):
                            m.d.sync += next_unit
                    else:
                        m.d.sync += next_unit
        with m.If(loading & (load_unit == units)):          # GRU FW: bR_n
            m.d.comb += [rx_w.o.ready.eq(1), bias_write.addr.eq(bias_beat),
                         bias_write.data.eq(rx_w.o.payload.data),
                         bias_write.en.eq(rx_w.o.valid)]
            with m.If(rx_w.o.valid):
                m.d.sync += bias_beat.eq(bias_beat + 1)
                final = bias_beat == bias_rows - 1
                with m.If(rx_w.o.payload.last | final):
                    m.d.sync += loading.eq(0)
                    with m.If(~(rx_w.o.payload.last & final)):
                        m.d.sync += self.bias_error.eq(1)

    # -- buffers and the vector feed -----------------------------------------------------

    def buffers(self):
        """``vectors`` (h in every unit's lane FW, the units' R-side deltas BW), ``state``
        (c / dc / GRU's direct), with a projection ``projected`` (r FW, dr^ BW)."""
        m, cells = self.m, self.cells
        vectors = Memory(shape=self.units * W, depth=cells, init=[])
        state = Memory(shape=W, depth=cells, init=[])
        m.submodules.vectors, m.submodules.state = vectors, state
        self.vec_write, self.state_write = vectors.write_port(), state.write_port()
        self.feed_read = vectors.read_port(domain="comb")
        self.hprev_read = vectors.read_port(domain="comb")
        self.state_act_read = state.read_port(domain="comb")
        self.state_fold_read = state.read_port(domain="comb")
        if self.proj:
            projected = Memory(shape=W, depth=self.max_batch * self.cfg.proj_size, init=[])
            m.submodules.projected = projected
            self.proj_write = projected.write_port()
            self.proj_feed_read = projected.read_port(domain="comb")

    def feed(self):
        """The units' ``x``: element ``e`` of vector ``b`` once its source row is written
        (``avail``; with a projection the R job waits for the whole vector)."""
        m, bw = self.m, self.bw
        size = max(self.hidden, self.cfg.proj_size) + 1
        self.avail = {name: Array(Signal(range(size), name=f"avail_{name}{b}")
                                  for b in range(self.max_batch))
                      for name in (("vectors", "projected") if self.proj else ("vectors",))}
        step, job = Signal(32), (Signal() if self.proj else Const(0))
        b, e = Signal(range(self.max_batch)), Signal(range(self.max_inputs))
        self.feed_b = b
        n_in = self.pick(bw, job, lambda s: s.inputs)
        # with a projection: the R job reads projected (full vector), W_hr^T too (by row)
        reads = {"recurrent": (1, 1), "projection": (0, 0), "recurrent_t": (0, 1),
                 "projection_t": (1, 0)}
        self.feed_projected = (self.pick(bw, job, lambda s: reads[s.name][0])
                               if self.proj else 0)
        full = self.pick(bw, job, lambda s: reads[s.name][1]) if self.proj else 0
        active = self.running & (step < self.steps)
        zero = ~bw & (step == 0) & (job == 0)
        avail = Mux(self.feed_projected, self.avail["projected"][b],
                    self.avail["vectors"][b]) if self.proj else self.avail["vectors"][b]
        element_ready = zero | Mux(full, avail == n_in, avail > e)
        valid = active & element_ready
        if self.proj:       # the units' configuration has been this job's for a cycle
            settled = Signal()
            m.d.sync += settled.eq(self.ser_job == job)
            valid = valid & settled & (self.ser_job == job)
        ready = Signal()
        m.d.comb += ready.eq(_all(unit.x.ready for unit in self.mvms))
        m.d.comb += self.feed_read.addr.eq(b * n_in + e)
        if self.proj:
            m.d.comb += self.proj_feed_read.addr.eq(b * n_in + e)
        for k, unit in enumerate(self.mvms):
            word = self.feed_read.data[k * W:(k + 1) * W]      # FW: h in every lane
            if self.proj:
                word = Mux(self.feed_projected, self.proj_feed_read.data, word)
            m.d.comb += [unit.x.valid.eq(valid), unit.x.payload.data.eq(Mux(zero, 0, word)),
                         unit.x.payload.last.eq(e == n_in - 1)]
        fed = valid & ready
        self.vector_end = fed & (e == n_in - 1)
        with m.If(self.go):
            # BW: step T - 1 runs no R^T job (its dh is +0)
            if self.proj:
                m.d.sync += [step.eq(0), job.eq(self.start_bw)]
            else:
                m.d.sync += step.eq(Mux(self.start_bw, 1, 0))
            m.d.sync += [b.eq(0), e.eq(0)]
        with m.Elif(fed):
            m.d.sync += e.eq(e + 1)
            with m.If(self.vector_end):
                m.d.sync += e.eq(0)
                with m.If(b == self.run_batch - 1):
                    m.d.sync += b.eq(0)
                    if self.proj:
                        m.d.sync += job.eq(~job)
                        with m.If(job):
                            m.d.sync += step.eq(step + 1)
                    else:
                        m.d.sync += step.eq(step + 1)
                with m.Else():
                    m.d.sync += b.eq(b + 1)
        self.activation_wait = active & ~element_ready

    # -- serializer: result beats -> cells -----------------------------------------------

    def serializer(self):
        """A beat of every unit's results is taken when the previous beat's last real
        row has gone; its real rows leave one per cycle (a gate matrix: one cell per row,
        all units' sums; the projection: unit by unit, its block's rows)."""
        m, bw, units, chains, length = self.m, self.bw, self.units, self.chains, self.length
        pes = self.pes
        beat = [[Signal(W, name=f"beat{k}_{c}") for c in range(chains)] for k in range(units)]
        self.beat = beat
        have = Signal()
        lane = Signal(range(chains + 1))
        u = Signal(range(units))                     # unit of a projection beat
        counts = [Signal(range(chains + 1), name=f"count{k}") for k in range(units)]
        row_bound = self.max_slices * pes + pes + 1
        beat_row = Signal(range(row_bound))
        beat_b = Signal(range(self.max_batch))
        beat_first, beat_zero, beat_job = Signal(), Signal(), Signal()
        # position of the next beat
        step, job = Signal(32), self.ser_job
        r = Signal(range(self.max_slices))
        b = Signal(range(self.max_batch))
        k = Signal(range(length))
        base = Signal(range(row_bound))              # first row of the beat in its block
        active = self.running & (step < self.steps)
        self.ser_done = step >= self.steps
        slices = self.pick(bw, job, lambda s: s.slices)
        split_round = self.pick(bw, job, lambda s: int(s.split_last)) & (r == slices - 1)
        width = Mux(split_round, self.pick(bw, job, lambda s: s.lanes), chains)
        zero_mode = bw & (step == 0) & (job == 0)
        joined = Signal()
        m.d.comb += joined.eq(_all(unit.o.valid for unit in self.mvms))
        in_valid = active & Mux(zero_mode, 1, joined)

        per_unit = self.pick(bw, beat_job, lambda s: int(s.units > 1)) if self.proj else 0
        count_u = Array(counts)[u] if self.proj else counts[0]
        last_u = (~per_unit | (Array(counts[1:] + [Const(0)])[u] == 0)) if self.proj else 1
        self.cell_valid = cell_valid = have & (lane < count_u)
        self.cell_ready = cell_ready = Signal()
        fire = cell_valid & cell_ready
        beat_done = have & ((counts[0] == 0) | (fire & (lane == count_u - 1) & last_u))
        in_ready = ~have | beat_done
        take = in_valid & in_ready
        for unit in self.mvms:
            m.d.comb += unit.o.ready.eq(active & ~zero_mode & joined & in_ready)
        with m.If(take):
            m.d.sync += [have.eq(1), lane.eq(0), u.eq(0), beat_row.eq(base), beat_b.eq(b),
                         beat_first.eq(step == 0), beat_zero.eq(zero_mode), beat_job.eq(job)]
            for unit_index, count in enumerate(counts):
                rows = self.pick(bw, job, lambda s: _rows_of_unit(s, unit_index))
                left = rows - base
                m.d.sync += count.eq(Mux(base >= rows, 0, Mux(left < width, left, width)))
            for index, unit in enumerate(self.mvms):
                m.d.sync += [beat[index][c].eq(Mux(zero_mode, 0, unit.o.payload.data[c]))
                             for c in range(chains)]
            # advance (round, vector, PE) of the next beat
            m.d.sync += [k.eq(k + 1), base.eq(base + width)]
            with m.If(k == length - 1):
                m.d.sync += [k.eq(0), base.eq(r * pes)]
                with m.If(b == self.run_batch - 1):
                    m.d.sync += [b.eq(0), r.eq(r + 1), base.eq((r + 1) * pes)]
                    with m.If(r == slices - 1):
                        m.d.sync += [r.eq(0), base.eq(0)]
                        if self.proj:
                            m.d.sync += job.eq(~job)
                            with m.If(job):
                                m.d.sync += step.eq(step + 1)
                        else:
                            m.d.sync += step.eq(step + 1)
                with m.Else():
                    m.d.sync += b.eq(b + 1)
        with m.Elif(beat_done):
            m.d.sync += have.eq(0)
        with m.Elif(fire):
            if self.proj:
                with m.If(per_unit & (lane == count_u - 1)):
                    m.d.sync += [u.eq(u + 1), lane.eq(0)]
                with m.Else():
                    m.d.sync += lane.eq(lane + 1)
                with m.If(~per_unit):
                    for index in range(units):
                        m.d.sync += [beat[index][c].eq(beat[index][c + 1])
                                     for c in range(chains - 1)]
            else:
                m.d.sync += lane.eq(lane + 1)
                for index in range(units):
                    m.d.sync += [beat[index][c].eq(beat[index][c + 1])
                                 for c in range(chains - 1)]
        with m.If(self.go):
            m.d.sync += [step.eq(0), job.eq(0), r.eq(0), b.eq(0), k.eq(0), base.eq(0),
                         have.eq(0)]
        total_rows = self.pick(bw, beat_job, lambda s: s.total_rows)
        block = self.pick(bw, beat_job, lambda s: s.rows if s.units > 1 else 0)
        self.cell_row = Signal(range(self.max_rows + row_bound + chains))
        m.d.comb += self.cell_row.eq(beat_row + lane + (u * block if self.proj else 0))
        self.cell_addr = Signal(range(max(self.cells, self.max_batch * self.max_rows)))
        m.d.comb += self.cell_addr.eq(beat_b * total_rows + self.cell_row)
        self.beat_b, self.beat_first, self.beat_job = beat_b, beat_first, beat_job
        self.useful = fire & ~beat_zero
        self.macs_per_cell = self.pick(
            bw, beat_job, lambda s: s.inputs * (units if s.units == 1 else 1))
        if self.proj:
            flat = [beat[index][c] for index in range(units) for c in range(chains)]
            self.cell_value = Array(flat)[u * chains + lane]

    # -- BW fold, projection sink --------------------------------------------------------

    def bw_fold(self):
        """``((u0 + u1) + u2) + (u3 | GRU's direct)`` of the R^T job's cells, with the
        cell's position beside the adders."""
        m, cfg = self.m, self.cfg
        meta = Cat(self.cell_addr, self.beat_b, self.cell_row, self.beat_first)
        self.meta = meta
        m.d.comb += self.state_fold_read.addr.eq(self.cell_addr)
        direct = Mux(self.beat_first, 0, self.state_fold_read.data)
        operands = [self.beat[k][0] for k in range(self.units)] + ([direct] if self.gru else [])
        valid = self.cell_valid & self.bw & (self.beat_job == 0)
        self.fold_ready = Signal()
        total, rest, meta_side = operands[0], operands[1:], meta
        previous = None
        for index in range(len(rest)):
            adder = FloatAdd(FP32, stages=cfg.adder_stages)
            m.submodules[f"fold{index}"] = adder
            m.d.comb += [adder.i.valid.eq(valid), adder.i.payload.a.eq(total),
                         adder.i.payload.b.eq(rest[index]), adder.i.payload.subtract.eq(0)]
            if previous is None:
                m.d.comb += self.fold_ready.eq(adder.i.ready)
            else:
                m.d.comb += previous.o.ready.eq(adder.i.ready)
            rest = rest[:index + 1] + [sideband(m, adder, value, f"fold{index}_u{j}")
                                       for j, value in enumerate(rest[index + 1:],
                                                                 start=index + 1)]
            meta_side = sideband(m, adder, meta_side, f"fold{index}_meta")
            total, valid, previous = adder.o.payload, adder.o.valid, adder
        self.fold_total, self.fold_valid, self.fold_meta = total, valid, meta_side
        self.fold_out_ready = Signal()
        m.d.comb += previous.o.ready.eq(self.fold_out_ready)

    def projection_sink(self):
        """With a projection: FW the ``W_hr`` job's cells (``r``), BW ``dr^ = fa(dv, dy)``
        of the R^T job's fold, to ``m_proj`` and the ``projected`` buffer."""
        if not self.proj:
            return
        m, bw, cfg = self.m, self.bw, self.cfg
        rx_dy, tx = self.rx["dy"], self.tx["proj"]
        addr_bits = len(self.cell_addr)
        adder = FloatAdd(FP32, stages=cfg.adder_stages)
        m.submodules.dr_add = adder
        m.d.comb += [adder.i.valid.eq(self.fold_valid & rx_dy.o.valid),
                     adder.i.payload.a.eq(self.fold_total),
                     adder.i.payload.b.eq(rx_dy.o.payload.data),
                     adder.i.payload.subtract.eq(0),
                     self.fold_out_ready.eq(rx_dy.o.valid & adder.i.ready),
                     rx_dy.o.ready.eq(self.fold_valid & adder.i.ready)]
        dr_meta = sideband(m, adder, self.fold_meta, "dr_meta")
        fw_valid = self.cell_valid & ~bw & self.beat_job
        valid = Mux(bw, adder.o.valid, fw_valid)
        meta = Mux(bw, dr_meta, self.meta)
        addr = meta[:addr_bits]
        vector = meta[addr_bits:addr_bits + len(self.beat_b)]
        count = Signal(range(self.max_batch * cfg.proj_size + 1))
        step_last = count == self.run_batch * cfg.proj_size - 1
        self.proj_step = Signal(32)
        fire = valid & tx.i.ready
        self.proj_fire, self.proj_vector = fire, vector
        m.d.comb += [tx.i.valid.eq(valid),
                     tx.i.payload.data.eq(Mux(bw, adder.o.payload, self.cell_value)),
                     tx.i.payload.last.eq(step_last),
                     adder.o.ready.eq(bw & tx.i.ready),
                     self.proj_write.addr.eq(addr),
                     self.proj_write.data.eq(tx.i.payload.data),
                     self.proj_write.en.eq(fire)]
        with m.If(fire):
            m.d.sync += count.eq(Mux(step_last, 0, count + 1))
            with m.If(step_last):
                m.d.sync += self.proj_step.eq(self.proj_step + 1)
        self.proj_end = fire & step_last & (self.proj_step == self.steps - 1)
        with m.If(self.go):
            m.d.sync += [count.eq(0), self.proj_step.eq(0)]

    # -- activation wiring and outputs ---------------------------------------------------

    def activation(self):
        """The cells into :class:`FwActivation` (FW R job) or :class:`BwActivation` (the
        fold's ``dh``; with a projection the ``W_hr^T`` job's ``dh^`` and ``dy = -0``),
        joined with ``s_imvm`` / ``s_bw`` and the state buffer."""
        m, cfg, bw, units = self.m, self.cfg, self.bw, self.units
        engine = self.engine
        fw_act, bw_act = engine._fw, engine._bw
        m.submodules.fw_activation, m.submodules.bw_activation = fw_act, bw_act
        rx_imvm, rx_bw = self.rx["imvm"], self.rx["bw"]
        meta_width = len(self.meta)
        addr_bits, b_bits = len(self.cell_addr), len(self.beat_b)
        src_meta = Signal(meta_width)
        if self.proj:       # FW: the R job's cells; BW: the W_hr^T job's
            act_job = Mux(bw, 1, 0)
            src_valid = self.cell_valid & (self.beat_job == act_job)
            m.d.comb += src_meta.eq(self.meta)
        else:
            src_valid = Mux(bw, self.fold_valid, self.cell_valid)
            m.d.comb += src_meta.eq(Mux(bw, self.fold_meta, self.meta))
        src_addr = src_meta[:addr_bits]
        src_row = src_meta[addr_bits + b_bits:-1]
        src_first = src_meta[-1]
        host = Mux(bw, rx_bw.o.valid, rx_imvm.o.valid)
        act_ready = Mux(bw, bw_act.i.ready, fw_act.i.ready)
        self.meta_fifo = meta_fifo = SyncFIFO(width=addr_bits + b_bits,
                                              depth=max(fw_act.latency, bw_act.latency) + 4)
        m.submodules.meta_fifo = meta_fifo
        act_valid = src_valid & host & meta_fifo.w_rdy
        accept = host & act_ready & meta_fifo.w_rdy
        if self.proj:
            m.d.comb += [
                self.cell_ready.eq(Mux(self.beat_job,
                                       Mux(bw, accept, self.tx["proj"].i.ready),
                                       Mux(bw, self.fold_ready, accept)))]
        else:
            m.d.comb += [self.cell_ready.eq(Mux(bw, self.fold_ready, accept)),
                         self.fold_out_ready.eq(accept)]
        chains = self.chains
        m.d.comb += [
            fw_act.i.valid.eq(act_valid & ~bw), bw_act.i.valid.eq(act_valid & bw),
            rx_imvm.o.ready.eq(~bw & src_valid & act_ready & meta_fifo.w_rdy),
            rx_bw.o.ready.eq(bw & src_valid & act_ready & meta_fifo.w_rdy),
            meta_fifo.w_en.eq(act_valid & act_ready),
            meta_fifo.w_data.eq(src_meta[:addr_bits + b_bits]),
            self.state_act_read.addr.eq(src_addr),
            self.hprev_read.addr.eq(src_addr),
            self.bias_read.addr.eq(src_row // chains) if chains > 1
            else self.bias_read.addr.eq(src_row),
        ]
        state_prev = Mux(src_first, 0, self.state_act_read.data)
        words = stream_words(cfg)
        host_words = [rx_imvm.o.payload.data[k * W:(k + 1) * W] for k in range(units)]
        bw_words = [rx_bw.o.payload.data[k * W:(k + 1) * W] for k in range(words["bw_in"])]
        fi, bi = fw_act.i.payload, bw_act.i.payload
        m.d.comb += [fi.imvm[k].eq(host_words[k]) for k in range(units)]
        m.d.comb += [fi.rmvm[k].eq(self.beat[k][0]) for k in range(units)]
        for j, name in enumerate(SAVED[cfg.cell]):
            m.d.comb += bi.saved[name].eq(bw_words[j])
        saved_count = len(SAVED[cfg.cell])
        if self.proj:
            m.d.comb += [bi.dh.eq(self.cell_value), bi.dy.eq(NEGATIVE_ZERO)]
        else:
            m.d.comb += [bi.dh.eq(self.fold_total), bi.dy.eq(bw_words[saved_count + 1])]
        if self.gru:
            bias_word = (self.bias_read.data.word_select(src_row % chains, W) if chains > 1
                         else self.bias_read.data)
            m.d.comb += [fi.bias_n.eq(bias_word),
                         fi.h_prev.eq(Mux(src_first, 0, self.hprev_read.data[:W])),
                         bi.h_prev.eq(bw_words[saved_count])]
        else:
            m.d.comb += [fi.c_prev.eq(state_prev), bi.c_prev.eq(bw_words[saved_count]),
                         bi.dc.eq(state_prev)]
        # the state before the step, for the FW save stream, travels beside the pipeline
        self.prev_fifo = prev_fifo = SyncFIFO(width=W, depth=meta_fifo.depth)
        m.submodules.prev_fifo = prev_fifo
        m.d.comb += [prev_fifo.w_en.eq(meta_fifo.w_en),
                     prev_fifo.w_data.eq(fi.h_prev if self.gru else fi.c_prev)]

    def outputs(self):
        """Fork the activation's outputs to the streams, write the buffers, count the
        rows written per vector (``avail``) and end the run with its last cell."""
        m, cfg, bw, engine = self.m, self.cfg, self.bw, self.engine
        fw_act, bw_act, meta_fifo, prev_fifo = engine._fw, engine._bw, self.meta_fifo, \
            self.prev_fifo
        tx_h, tx_saved, tx_deltas = self.tx["h"], self.tx["saved"], self.tx["deltas"]
        addr_bits = len(self.cell_addr)
        out_addr, out_b = meta_fifo.r_data[:addr_bits], meta_fifo.r_data[addr_bits:]
        out_count = Signal(range(self.cells + 1))   # cells of the current output step
        out_step = Signal(32)
        step_last = out_count == self.run_batch * self.hidden - 1
        h_taken, saved_taken = Signal(), Signal()
        fw_o, bw_o = fw_act.o, bw_act.o
        fw_fire = fw_o.valid & (tx_h.i.ready | h_taken) & (tx_saved.i.ready | saved_taken)
        bw_fire = bw_o.valid & tx_deltas.i.ready
        m.d.comb += [
            tx_h.i.valid.eq(fw_o.valid & ~h_taken),
            tx_h.i.payload.data.eq(fw_o.payload.h), tx_h.i.payload.last.eq(step_last),
            tx_saved.i.valid.eq(fw_o.valid & ~saved_taken),
            tx_saved.i.payload.data.eq(Cat(*(fw_o.payload.saved[name]
                                              for name in SAVED[cfg.cell]),
                                            prev_fifo.r_data)),
            tx_saved.i.payload.last.eq(step_last),
            fw_o.ready.eq(fw_fire),
            tx_deltas.i.valid.eq(bw_o.valid),
            tx_deltas.i.payload.data.eq(Cat(*(bw_o.payload.d[k] for k in range(self.units)),
                                             *([bw_o.payload.dhn] if self.gru else []))),
            tx_deltas.i.payload.last.eq(step_last),
            bw_o.ready.eq(tx_deltas.i.ready),
        ]
        with m.If(fw_fire):
            m.d.sync += [h_taken.eq(0), saved_taken.eq(0)]
        with m.Elif(fw_o.valid):
            m.d.sync += [h_taken.eq(h_taken | tx_h.i.ready),
                         saved_taken.eq(saved_taken | tx_saved.i.ready)]
        fire = fw_fire | bw_fire
        m.d.comb += [meta_fifo.r_en.eq(fire), prev_fifo.r_en.eq(fire),
                     self.vec_write.addr.eq(out_addr), self.state_write.addr.eq(out_addr),
                     self.vec_write.en.eq(fire),
                     self.state_write.en.eq(fire & (bw | ~Const(int(self.gru))))]
        if self.gru:
            d_rec = [bw_o.payload.d[0], bw_o.payload.d[1], bw_o.payload.dhn]
            state_bw = bw_o.payload.direct
        else:
            d_rec = [bw_o.payload.d[k] for k in range(self.units)]
            state_bw = bw_o.payload.dc_prev
        m.d.comb += [
            self.vec_write.data.eq(Mux(bw, Cat(*d_rec), Cat(*([fw_o.payload.h] * self.units)))),
            self.state_write.data.eq(Mux(bw, state_bw,
                                         fw_o.payload.saved["c"] if not self.gru else 0)),
        ]
        for b in range(self.max_batch):
            ends = self.vector_end & (self.feed_b == b)
            if self.proj:
                writes = {"vectors": fire & (out_b == b),
                          "projected": self.proj_fire & (self.proj_vector == b)}
                for name, write in writes.items():
                    mine = self.feed_projected if name == "projected" else ~self.feed_projected
                    with m.If(ends & mine):
                        m.d.sync += self.avail[name][b].eq(0)
                    with m.Elif(write):
                        m.d.sync += self.avail[name][b].eq(self.avail[name][b] + 1)
            else:
                with m.If(ends):
                    m.d.sync += self.avail["vectors"][b].eq(0)
                with m.Elif(fire & (out_b == b)):
                    m.d.sync += self.avail["vectors"][b].eq(self.avail["vectors"][b] + 1)
        with m.If(fire):
            m.d.sync += out_count.eq(Mux(step_last, 0, out_count + 1))
            with m.If(step_last):
                m.d.sync += out_step.eq(out_step + 1)
        # the run ends with the last cell of its last sink: FW with a projection r
        ends = fire & step_last & (out_step == self.steps - 1)
        if self.proj:
            ends = Mux(bw, ends, self.proj_end)
        # ... and not before the serializer took the units' last (padding) beats
        seen = Signal()
        with m.If((ends | seen) & self.ser_done):
            m.d.sync += [self.running.eq(0), self.done.eq(1), seen.eq(0)]
        with m.Elif(ends):
            m.d.sync += seen.eq(1)
        with m.If(self.go):
            m.d.sync += [out_count.eq(0), out_step.eq(0), seen.eq(0)]
            m.d.sync += [avail[b].eq(0) for avail in self.avail.values()
                         for b in range(self.max_batch)]

    # -- registers and counters ----------------------------------------------------------

    def counters(self):
        m, cfg, regs = self.m, self.cfg, self.regs
        status = self.engine.registers["status"]
        load_error, vector_error = self.bias_error, Const(0)
        for unit in self.mvms:
            load_error = load_error | unit.load_error
            vector_error = vector_error | unit.vector_error
        for name, value in {"busy": self.running, "done": self.done, "loading": self.loading,
                            "load_error": load_error, "vector_error": vector_error,
                            "run_error": self.run_error}.items():
            m.d.comb += regs.status[status.field(name).offset].eq(value)
        for name, value in register_constants(cfg).items():
            m.d.comb += getattr(regs, name).eq(value)
        ticks = {}
        for name in ("mac_cycles", "load_cycles"):
            seen = Signal(32, name=f"{name}_seen")
            m.d.sync += seen.eq(getattr(self.mvms[0], name))
            ticks[name] = getattr(self.mvms[0], name) != seen
        macs = max(shape.inputs * (self.units if shape.units == 1 else 1)
                   for shapes in self.shapes for shape in shapes)
        counters = {"cycles": (self.running, None), "mac_cycles": (ticks["mac_cycles"], None),
                    "load_cycles": (ticks["load_cycles"], None),
                    "activation_wait_cycles": (self.activation_wait, None),
                    "useful_macs": (self.useful, macs)}
        assert counters.keys() == COUNTERS.keys()
        for name, (enable, increment) in counters.items():
            width = 0 if increment is None else increment.bit_length()
            counter = PerfCounter(64, increment_width=width)
            m.submodules[f"{name}_counter"] = counter
            clear = self.pulse["clear"] | (self.start if name != "load_cycles" else 0)
            m.d.comb += [counter.enable.eq(enable), counter.clear.eq(clear),
                         getattr(regs, name).eq(counter.count)]
            if increment is not None:
                m.d.comb += counter.increment.eq(self.macs_per_cell)

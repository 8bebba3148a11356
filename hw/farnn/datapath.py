# amaranth: UnusedElaboratable=no
"""The parts of the FARNN engine top (:class:`~nnrtl.hw.farnn.engine.FarnnEngine`), each a
method of :class:`EngineDatapath` named after the paper's blocks (Cho et al., TPDS 2022,
Sec. 5, Fig. 3): the stream edges and run state, the MVM units and their weight loader, the
on-chip buffers, the vector feed, the serializer of the units' result beats, the BW fold,
the projection sink, the activation wiring, the output streams and the counters. The
schedule they implement is stated once, in the Notes of
:class:`~nnrtl.hw.farnn.engine.FarnnEngine`.

A step runs one *job* per matrix of the pass (:meth:`FarnnConfig.pass_matrices`): without a
projection one (``R_k`` / ``R_k^T``), with one two (FW ``R_k`` then ``W_hr``, BW ``R_k^T``
then ``W_hr^T``). The feed, the serializer and the units' configuration each follow their
own job; the job's geometry comes from its :class:`~nnrtl.hw.farnn.config.MatrixShape`
through :meth:`EngineDatapath.pick`.
"""

from amaranth.hdl import Array, Const, Mux, Signal
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import connect, flipped

from ..arith.float_format import FP32
from ..bus import AXI4StreamToStream, PerfCounter, RegisterFile, StreamToAXI4Stream
from .mvm import MVMUnit
from .sinks import CellSinks
from .registers import COUNTERS, PHASES, register_constants, stream_bits

__all__ = ["EngineDatapath"]

W = 32


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


class EngineDatapath(CellSinks):
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
                           dsp_usage=cfg.dsp_usage,
                           split=cfg.split_factor,
                           vector_depth=self.max_batch * self.max_inputs)
            m.submodules[f"unit{k}"] = unit
            self.mvms.append(unit)
        self.load_bw, self.load_job, self.ser_job = Signal(), Signal(), Signal()
        job = Mux(self.loading, self.load_job, self.ser_job)
        bw = Mux(self.loading, self.load_bw, self.bw)
        bases = [cfg.weight_bases(phase) for phase in ("fw", "bw")]
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
                    self._next_job(m, job, step)
                with m.Else():
                    m.d.sync += b.eq(b + 1)
        self.activation_wait = active & ~element_ready

    def _next_job(self, m, job, step):
        """After a job's last vector: the next job (with a projection, ``R`` then ``W_hr``),
        and after a step's last job the next step."""
        if self.proj:
            m.d.sync += job.eq(~job)
            with m.If(job):
                m.d.sync += step.eq(step + 1)
        else:
            m.d.sync += step.eq(step + 1)

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
                        self._next_job(m, job, step)
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

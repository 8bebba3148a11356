# amaranth: UnusedElaboratable=no
"""The cell sinks of the FARNN engine top (:class:`~nnrtl.hw.farnn.engine.FarnnEngine`):
where the serializer's cells go (Cho et al., TPDS 2022, Sec. 5.2-5.3): the BW fold of the
units' ``R_k^T`` products, the projection sink (``m_proj`` and the ``projected`` buffer),
the activation wiring (FW and BW activation units joined with the host's streams and the
state buffer) and the output streams with the buffer writes. A mixin of
:class:`~nnrtl.hw.farnn.datapath.EngineDatapath`, whose signals it uses; the schedule is in the
Notes of :class:`~nnrtl.hw.farnn.engine.FarnnEngine`.
"""

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.lib.fifo import SyncFIFO

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from .activation import SAVED
from .pe import sideband
from .registers import stream_words

__all__ = ["CellSinks"]

W = 32
#: fp32 ``-0``: ``fa(x, -0) = x`` (the ``dy`` of the BW activation with a projection).
NEGATIVE_ZERO = 0x80000000


class CellSinks:
    """The parts of :class:`~nnrtl.hw.farnn.datapath.EngineDatapath` after the
    serializer (see the module docstring)."""

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
        # at least one bit: one cell and batch 1 leave no address bits, and a zero-width
        # FIFO's storage is a memory Yosys cannot write
        self.meta_fifo = meta_fifo = SyncFIFO(width=max(1, addr_bits + b_bits),
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
            meta_fifo.w_data.eq(src_meta[:addr_bits + b_bits]),    # zero-extended
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
        b_bits = len(self.beat_b)
        out_addr = meta_fifo.r_data[:addr_bits]
        out_b = meta_fifo.r_data[addr_bits:addr_bits + b_bits]
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

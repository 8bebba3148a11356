# amaranth: UnusedElaboratable=no
"""The FARNN engine top (Cho et al., TPDS 2022, Sec. 5, Fig. 3): ``units`` MVM units in
lockstep, the FW and BW activation units, the on-chip vector and state buffers, the
AXI4-Stream edges and the AXI4-Lite registers. One run is one layer pass, FW or BW.

Scope: LSTM and GRU without a projection (``proj_size = 0``; :class:`FarnnEngine` refuses
one: the MVM unit has no weight base address for a second matrix per PE).

Ports (AXI4-Stream, fp32 words little-endian in ``tdata``, word ``i`` in bits ``32 i ..
32 i + 31``; :func:`~nnrtl.hw.farnn.registers.stream_words`)
-----------------------------------------------------------------------------------------
``s_weights`` (``chains`` words): after a LOAD, the pass's weights in
:func:`nnrtl.gen.farnn.host.pack_weights` order, units one after another, ``tlast`` on the
last beat of each unit's load; for GRU FW then :func:`~nnrtl.hw.farnn.schedule.bias_beats`
(``bR_n``, ``chains`` cells a beat, ``tlast`` on the last). ``s_imvm`` (FW, ``units``
words): the host's input MVM of one cell, gate order. ``m_h`` (FW, 1 word): ``h_t`` of one
cell. ``m_saved`` (FW): the saved values of one cell and the state before the step (LSTM
``i, f, g, o, c, c_{t-1}``; GRU ``r, z, n, hn, h_{t-1}``). ``s_bw`` (BW): a ``m_saved``
beat read back with ``dy`` appended. ``m_deltas`` (BW): the W side's gate deltas of one
cell in gate order (GRU: then ``dhn``, the R side's delta of n). Every cell stream of a
step is in :func:`~nnrtl.hw.farnn.schedule.cell_order` (the order the units' results come
out: round, vector, row), FW steps ``0 .. T-1``, BW ``T-1 .. 0``; ``tlast`` closes each
step on the output streams and is ignored on the inputs.

Data flow of a step
-------------------
FW step ``t``: the units' ``x`` is ``h_{t-1}`` of each vector of the batch, read from the
vector buffer (``batch * hidden_size`` words; zeros at ``t = 0``: the run starts from ``h =
c = +0``, no ``h0`` is taken). The units' result beats (``chains`` rows each) are
serialized to one cell per cycle (padding rows dropped), joined with ``s_imvm`` and the
state (LSTM ``c_{t-1}`` from the c buffer; GRU ``h_{t-1}`` from the vector buffer and
``bR_n``) into :class:`FwActivation`; its ``h`` goes to ``m_h`` and into the vector buffer,
``c`` into the c buffer, the saved values to ``m_saved``. BW step ``t``: unit ``k`` is fed
its own delta ``d_k*_{t+1}`` (the R side's: GRU's unit n takes ``dhn``), from the vector
buffer; its ``R_k^T`` products are folded per cell in gate order, ``((u_0 + u_1) + u_2) +
u_3`` (GRU: ``fa(((u_0 + u_1) + u_2), direct_{t+1})``, ``direct`` kept in the state
buffer), giving ``dh``; step ``T - 1`` runs no MVM (``dh = +0``, as the golden model's
initial ``dv``). :class:`BwActivation` takes ``dh``, the ``s_bw`` beat and ``dc`` (LSTM,
state buffer, ``+0`` at ``T - 1``); ``d*`` goes to ``m_deltas`` and the R side's deltas into
the vector buffer, ``dc_{t-1}`` / ``direct`` into the state buffer.

Schedule (the rule the cycle model follows)
-------------------------------------------
* Feed: the units take one element per cycle (their issue rules permitting: the
  accumulators' reduction gap, two streams outstanding, :class:`MVMUnit`). Element ``e``
  of vector ``b`` of run step ``j + 1`` is offered from the cycle after row ``e`` of vector
  ``b`` of run step ``j`` was written by the activation unit: a per-vector count of the
  rows written (``avail[b]``), compared with ``e``, reset when the feed of vector ``b``
  ends. Rows of a vector are written in increasing order (round by round), so this is
  the per-slice rule at row granularity: with ``S >= 2`` rounds the next step's round 0
  starts as soon as its unit is free and its elements of the earlier slices are long
  written, overlapping the activation of the last slice (the paper's latency hiding);
  only elements of the last slice can wait (``activation_wait_cycles``). The first FW
  step is fed zeros at once; the first BW step runs no MVM.
* An MVM unit starts a run (one step: ``batch`` vectors, ``S`` rounds) from Idle, two
  cycles after the last result beat of its previous run was taken.
* Serializer: a result beat (every unit's, joined) is taken when the previous beat's last
  real row has gone; its real rows (``min(width, hidden_size - first row)``, ``width`` =
  ``chains``, or ``chains / split`` in a split round) leave one per cycle from the next
  cycle; a beat of padding rows only takes one cycle. The activation units take one cell
  per cycle, so a stream of ``chains * chain_length`` rows takes at least that many cycles
  out of the units (a head hands out a beat every two cycles: no stall for ``chains <=
  2``).
* BW: the fold adds ``3 A`` cycles before :class:`BwActivation`.
* ``cycles`` counts from the cycle after the START write's pulse to the cycle the last
  cell of the last step leaves the activation unit, inclusive.
Without gaps and backpressure (and ``chains <= 2``) the ``cycles`` of a run are
:func:`~nnrtl.hw.farnn.schedule.run_cycles`, exactly.

Weight load: LOAD (control) with ``phase`` set routes ``s_weights`` to unit 0 until a
``tlast``, then unit 1, ...; a unit takes one RESTART cycle then one beat per cycle
(:class:`~nnrtl.hw.farnn.mvm.MVMUnit`).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out, connect, flipped

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from ..bus import (AXI4LiteSignature, AXI4StreamSignature, AXI4StreamToStream, PerfCounter,
                   RegisterFile, StreamToAXI4Stream)
from .activation import SAVED, BwActivation, FwActivation
from .config import FarnnConfig
from .mvm import MVMUnit
from .pe import sideband
from .registers import (COUNTERS, PHASES, register_constants, register_map, stream_bits,
                        stream_words)

__all__ = ["FarnnEngine"]

W = 32


def _all(values):
    total = Const(1)
    for value in values:
        total = total & value
    return total


def _check(config):
    if not isinstance(config, FarnnConfig):
        raise TypeError(f"config must be a FarnnConfig, not {config!r}")
    if config.proj_size:
        raise ValueError(f"proj_size ({config.proj_size}) must be 0 for FarnnEngine: the "
                         f"projection is not built yet (the MVM unit has no weight base "
                         f"address for a second matrix per PE)")
    if not config.fits:
        raise ValueError(f"weights per PE ({config.max_weights_per_pe}) must fit "
                         f"weight_depth ({config.weight_depth})")


class FarnnEngine(wiring.Component):
    """The FARNN engine: one layer pass (FW or BW) per run, module docstring.

    Parameters
    ----------
    config : FarnnConfig
        ``proj_size`` must be 0.

    Attributes
    ----------
    s_axil : In(AXI4LiteSignature)
        :attr:`registers`.
    s_weights, s_imvm, s_bw : In(AXI4StreamSignature)
    m_h, m_saved, m_deltas : Out(AXI4StreamSignature)
        Module docstring; widths :func:`~nnrtl.hw.farnn.registers.stream_bits`.
    registers : RegisterMap
    fw_latency, bw_latency : int
        The activation units' latencies.

    Raises
    ------
    TypeError
        If ``config`` is not a FarnnConfig.
    ValueError
        A projection, or weights that do not fit the PEs.
    """

    def __init__(self, config):
        _check(config)
        self._config = config
        self._registers = register_map(config)
        bits = stream_bits(config)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(self._registers.addr_width)),
            "s_weights": In(AXI4StreamSignature(bits["weights"])),
            "s_imvm": In(AXI4StreamSignature(bits["imvm"])),
            "s_bw": In(AXI4StreamSignature(bits["bw_in"])),
            "m_h": Out(AXI4StreamSignature(bits["h"])),
            "m_saved": Out(AXI4StreamSignature(bits["saved"])),
            "m_deltas": Out(AXI4StreamSignature(bits["deltas"])),
        })
        stages = dict(adder_stages=config.adder_stages,
                      multiplier_stages=config.multiplier_stages)
        self._fw = FwActivation(config.cell, **stages)
        self._bw = BwActivation(config.cell, **stages)

    config = property(lambda self: self._config)
    registers = property(lambda self: self._registers)
    fw_latency = property(lambda self: self._fw.latency)
    bw_latency = property(lambda self: self._bw.latency)

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        shape = cfg.matrix("recurrent")
        units, chains, length = cfg.units, cfg.chains, cfg.chain_length
        hidden, max_batch = cfg.hidden_size, cfg.batch
        gru = cfg.cell == "gru"
        words = stream_words(cfg)
        cells = max_batch * hidden

        # -- edges and registers ---------------------------------------------------------
        m.submodules.regfile = regfile = RegisterFile(self._registers)
        connect(m, flipped(self.s_axil), regfile.s_axil)
        regs = regfile.regs
        bits = stream_bits(cfg)
        edges = {}
        for name in ("weights", "imvm", "bw"):
            edge = AXI4StreamToStream(bits["bw_in" if name == "bw" else name])
            m.submodules[f"rx_{name}"] = edges[name] = edge
            connect(m, flipped(getattr(self, f"s_{name}")), edge.s_axis)
        for name in ("h", "saved", "deltas"):
            edge = StreamToAXI4Stream(bits[name])
            m.submodules[f"tx_{name}"] = edges[name] = edge
            connect(m, edge.m_axis, flipped(getattr(self, f"m_{name}")))
        rx_w, rx_imvm, rx_bw = edges["weights"], edges["imvm"], edges["bw"]
        tx_h, tx_saved, tx_deltas = edges["h"], edges["saved"], edges["deltas"]

        control = self._registers["control"]
        status = self._registers["status"]
        pulse = {name: regs.control[control.field(name).offset]
                 for name in ("start", "load", "clear")}

        # -- MVM units -------------------------------------------------------------------
        mvms = []
        for k in range(units):
            unit = MVMUnit(FP32, chains=chains, chain_length=length,
                           weight_depth=cfg.weight_depth, adder_stages=cfg.adder_stages,
                           multiplier_stages=cfg.multiplier_stages,
                           split=cfg.split_factor, vector_depth=cells)
            m.submodules[f"unit{k}"] = unit
            mvms.append(unit)
        run_batch = Signal(range(max_batch + 1), init=max_batch)
        for unit in mvms:
            m.d.comb += [unit.n_in.eq(shape.inputs), unit.rounds.eq(shape.slices),
                         unit.split_last.eq(shape.split_last), unit.batch.eq(run_batch)]

        # -- run state -------------------------------------------------------------------
        running = Signal()
        loading = Signal()
        done = Signal()
        bw = Signal()                       # phase of the run (and of the load)
        steps = Signal(32)
        run_error = Signal()
        start = pulse["start"] & ~running & ~loading
        batch_ok = (regs.batch != 0) & (regs.batch <= max_batch)
        with m.If(start):
            m.d.sync += [bw.eq(regs.phase == PHASES["bw"]), steps.eq(regs.steps),
                         run_batch.eq(Mux(batch_ok, regs.batch, run_batch)),
                         running.eq(batch_ok & (regs.steps != 0)),
                         done.eq(~batch_ok | (regs.steps == 0)),
                         run_error.eq(~batch_ok | (regs.steps == 0))]
        go = Signal()                       # the run's state is reset with running set
        m.d.comb += go.eq(start & batch_ok & (regs.steps != 0))
        start_bw = regs.phase == PHASES["bw"]

        # -- weight load -----------------------------------------------------------------
        load_unit = Signal(range(units + 2))
        bias_rows = -(-hidden // chains)
        bias_beat = Signal(range(bias_rows + 1))
        bias_error = Signal()
        bias = Memory(shape=chains * W, depth=bias_rows, init=[])
        m.submodules.bias = bias
        bias_write = bias.write_port()
        bias_read = bias.read_port(domain="comb")
        load_bw = Signal()
        with m.If(pulse["load"] & ~running & ~loading):
            m.d.sync += [loading.eq(1), load_unit.eq(0), bias_beat.eq(0),
                         load_bw.eq(regs.phase == PHASES["bw"])]
        for k, unit in enumerate(mvms):
            mine = loading & (load_unit == k)
            m.d.comb += [unit.w.valid.eq(rx_w.o.valid & mine),
                         unit.w.payload.last.eq(rx_w.o.payload.last)]
            m.d.comb += [unit.w.payload.data[c].eq(rx_w.o.payload.data[c * W:(c + 1) * W])
                         for c in range(chains)]
            with m.If(mine):
                m.d.comb += rx_w.o.ready.eq(unit.w.ready)
                with m.If(rx_w.o.valid & unit.w.ready & rx_w.o.payload.last):
                    last_unit = (k == units - 1)
                    if last_unit:
                        m.d.sync += [load_unit.eq(k + 1),
                                     loading.eq(Const(int(gru)) & ~load_bw)]
                    else:
                        m.d.sync += load_unit.eq(k + 1)
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
                        m.d.sync += bias_error.eq(1)

        # -- buffers ---------------------------------------------------------------------
        vectors = Memory(shape=units * W, depth=cells, init=[])   # h (FW) / d_k* (BW)
        state = Memory(shape=W, depth=cells, init=[])             # c / dc / direct
        m.submodules.vectors, m.submodules.state = vectors, state
        vec_write, state_write = vectors.write_port(), state.write_port()
        feed_read = vectors.read_port(domain="comb")
        hprev_read = vectors.read_port(domain="comb")
        state_act_read = state.read_port(domain="comb")
        state_fold_read = state.read_port(domain="comb")

        # -- feeder: x of the units ------------------------------------------------------
        avail = Array(Signal(range(hidden + 1), name=f"avail{b}") for b in range(max_batch))
        feed_step = Signal(32)
        feed_b = Signal(range(max_batch))
        feed_e = Signal(range(hidden))
        feed_active = running & (feed_step < steps)
        zero_feed = ~bw & (feed_step == 0)
        element_ready = zero_feed | (avail[feed_b] > feed_e)
        feed_valid = feed_active & element_ready
        feed_ready = Signal()
        m.d.comb += feed_ready.eq(_all(unit.x.ready for unit in mvms))
        m.d.comb += feed_read.addr.eq(feed_b * hidden + feed_e)
        for k, unit in enumerate(mvms):
            word = feed_read.data[k * W:(k + 1) * W]      # FW: h in every lane
            m.d.comb += [unit.x.valid.eq(feed_valid),
                         unit.x.payload.data.eq(Mux(zero_feed, 0, word)),
                         unit.x.payload.last.eq(feed_e == hidden - 1)]
        fed = feed_valid & feed_ready
        vector_end = fed & (feed_e == hidden - 1)
        with m.If(go):
            m.d.sync += [feed_step.eq(Mux(start_bw, 1, 0)), feed_b.eq(0), feed_e.eq(0)]
        with m.Elif(fed):
            m.d.sync += feed_e.eq(feed_e + 1)
            with m.If(vector_end):
                m.d.sync += feed_e.eq(0)
                with m.If(feed_b == run_batch - 1):
                    m.d.sync += [feed_b.eq(0), feed_step.eq(feed_step + 1)]
                with m.Else():
                    m.d.sync += feed_b.eq(feed_b + 1)
        activation_wait = feed_active & ~element_ready

        # -- serializer: result beats -> cells -------------------------------------------
        pes, lanes_split = shape.pes_per_unit, shape.lanes
        beat = [[Signal(W, name=f"beat{k}_{c}") for c in range(chains)] for k in range(units)]
        have = Signal()
        lane = Signal(range(chains + 1))
        count = Signal(range(chains + 1))            # real rows of the held beat
        beat_row = Signal(range(shape.slices * pes + 1))
        beat_b = Signal(range(max_batch))
        beat_first = Signal()
        beat_zero = Signal()                         # a beat of the MVM-less BW step
        # position of the next beat
        ser_step = Signal(32)
        ser_r = Signal(range(shape.slices))
        ser_b = Signal(range(max_batch))
        ser_k = Signal(range(length))
        ser_base = Signal(range(shape.slices * pes + pes + 1))   # first row of the beat
        ser_active = running & (ser_step < steps)
        split_round = (ser_r == shape.slices - 1) if shape.split_last else Const(0)
        width = Mux(split_round, lanes_split, chains)
        zero_mode = bw & (ser_step == 0)
        joined = Signal()
        m.d.comb += joined.eq(_all(unit.o.valid for unit in mvms))
        in_valid = ser_active & Mux(zero_mode, 1, joined)

        cell_valid = have & (lane < count)
        cell_ready = Signal()
        beat_done = have & ((count == 0) | (cell_valid & cell_ready & (lane == count - 1)))
        in_ready = ~have | beat_done
        take = in_valid & in_ready
        for unit in mvms:
            m.d.comb += unit.o.ready.eq(ser_active & ~zero_mode & joined & in_ready)
        rows_left = hidden - ser_base
        with m.If(take):
            m.d.sync += [have.eq(1), lane.eq(0), beat_row.eq(ser_base), beat_b.eq(ser_b),
                         beat_first.eq(ser_step == 0), beat_zero.eq(zero_mode),
                         count.eq(Mux(ser_base >= hidden, 0,
                                      Mux(rows_left < width, rows_left, width)))]
            for k, unit in enumerate(mvms):
                m.d.sync += [beat[k][c].eq(Mux(zero_mode, 0, unit.o.payload.data[c]))
                             for c in range(chains)]
            # advance (r, b, k) of the next beat
            m.d.sync += [ser_k.eq(ser_k + 1), ser_base.eq(ser_base + width)]
            with m.If(ser_k == length - 1):
                m.d.sync += [ser_k.eq(0), ser_base.eq(ser_r * pes)]
                with m.If(ser_b == run_batch - 1):
                    m.d.sync += [ser_b.eq(0), ser_r.eq(ser_r + 1),
                                 ser_base.eq((ser_r + 1) * pes)]
                    with m.If(ser_r == shape.slices - 1):
                        m.d.sync += [ser_r.eq(0), ser_base.eq(0),
                                     ser_step.eq(ser_step + 1)]
                with m.Else():
                    m.d.sync += ser_b.eq(ser_b + 1)
        with m.Elif(beat_done):
            m.d.sync += have.eq(0)
        with m.Elif(cell_valid & cell_ready):
            m.d.sync += lane.eq(lane + 1)
            for k in range(units):
                m.d.sync += [beat[k][c].eq(beat[k][c + 1]) for c in range(chains - 1)]
        with m.If(go):
            m.d.sync += [ser_step.eq(0), ser_r.eq(0), ser_b.eq(0), ser_k.eq(0),
                         ser_base.eq(0), have.eq(0)]
        cell_row = Signal(range(shape.slices * pes + chains + 1))
        m.d.comb += cell_row.eq(beat_row + lane)
        cell_addr = Signal(range(cells))
        m.d.comb += cell_addr.eq(beat_b * hidden + cell_row)
        useful = cell_valid & cell_ready & ~beat_zero

        # -- BW fold: ((u0 + u1) + u2) + (u3 | direct) -----------------------------------
        meta_width = len(cell_addr) + len(beat_b) + len(cell_row) + 1
        meta = Cat(cell_addr, beat_b, cell_row, beat_first)
        m.d.comb += state_fold_read.addr.eq(cell_addr)
        direct = Mux(beat_first, 0, state_fold_read.data)
        operands = [beat[k][0] for k in range(units)] + ([direct] if gru else [])
        fold_valid, fold_ready = cell_valid & bw, Signal()
        total = operands[0]
        rest = operands[1:]
        meta_side = meta
        for index in range(len(rest)):
            adder = FloatAdd(FP32, stages=cfg.adder_stages)
            m.submodules[f"fold{index}"] = adder
            m.d.comb += [adder.i.valid.eq(fold_valid), adder.i.payload.a.eq(total),
                         adder.i.payload.b.eq(rest[index]), adder.i.payload.subtract.eq(0)]
            if index == 0:
                m.d.comb += fold_ready.eq(adder.i.ready)
            else:
                m.d.comb += previous.o.ready.eq(adder.i.ready)
            rest = rest[:index + 1] + [sideband(m, adder, value, f"fold{index}_u{j}")
                                       for j, value in enumerate(rest[index + 1:],
                                                                 start=index + 1)]
            meta_side = sideband(m, adder, meta_side, f"fold{index}_meta")
            total, fold_valid, previous = adder.o.payload, adder.o.valid, adder
        fold_out_ready = Signal()
        m.d.comb += previous.o.ready.eq(fold_out_ready)
        assert meta_width == len(meta)

        # -- activation input join -------------------------------------------------------
        fw_act, bw_act = self._fw, self._bw
        m.submodules.fw_activation, m.submodules.bw_activation = fw_act, bw_act
        src_valid = Mux(bw, fold_valid, cell_valid)
        src_meta = Signal(meta_width)
        m.d.comb += src_meta.eq(Mux(bw, meta_side, meta))
        src_addr = src_meta[:len(cell_addr)]
        src_row = src_meta[len(cell_addr) + len(beat_b):-1]
        src_first = src_meta[-1]
        host = Mux(bw, rx_bw.o.valid, rx_imvm.o.valid)
        act_ready = Mux(bw, bw_act.i.ready, fw_act.i.ready)
        meta_fifo = SyncFIFO(width=len(cell_addr) + len(beat_b),
                             depth=max(self._fw.latency, self._bw.latency) + 4)
        m.submodules.meta_fifo = meta_fifo
        act_valid = src_valid & host & meta_fifo.w_rdy
        m.d.comb += [
            fw_act.i.valid.eq(act_valid & ~bw), bw_act.i.valid.eq(act_valid & bw),
            cell_ready.eq(Mux(bw, fold_ready, host & act_ready & meta_fifo.w_rdy)),
            fold_out_ready.eq(host & act_ready & meta_fifo.w_rdy),
            rx_imvm.o.ready.eq(~bw & src_valid & act_ready & meta_fifo.w_rdy),
            rx_bw.o.ready.eq(bw & src_valid & act_ready & meta_fifo.w_rdy),
            meta_fifo.w_en.eq(act_valid & act_ready),
            meta_fifo.w_data.eq(src_meta[:len(cell_addr) + len(beat_b)]),
            state_act_read.addr.eq(src_addr),
            hprev_read.addr.eq(src_addr),
            bias_read.addr.eq(src_row // chains) if chains > 1 else bias_read.addr.eq(src_row),
        ]
        state_prev = Mux(src_first, 0, state_act_read.data)
        host_words = [rx_imvm.o.payload.data[k * W:(k + 1) * W] for k in range(units)]
        bw_words = [rx_bw.o.payload.data[k * W:(k + 1) * W] for k in range(words["bw_in"])]
        fi, bi = fw_act.i.payload, bw_act.i.payload
        rmvm = [beat[k][0] for k in range(units)]
        m.d.comb += [fi.imvm[k].eq(host_words[k]) for k in range(units)]
        m.d.comb += [fi.rmvm[k].eq(rmvm[k]) for k in range(units)]
        for j, name in enumerate(SAVED[cfg.cell]):
            m.d.comb += bi.saved[name].eq(bw_words[j])
        saved_count = len(SAVED[cfg.cell])
        m.d.comb += [bi.dh.eq(total), bi.dy.eq(bw_words[saved_count + 1])]
        if gru:
            bias_word = bias_read.data.word_select(src_row % chains, W) if chains > 1 \
                else bias_read.data
            m.d.comb += [fi.bias_n.eq(bias_word),
                         fi.h_prev.eq(Mux(src_first, 0, hprev_read.data[:W])),
                         bi.h_prev.eq(bw_words[saved_count])]
        else:
            m.d.comb += [fi.c_prev.eq(state_prev), bi.c_prev.eq(bw_words[saved_count]),
                         bi.dc.eq(state_prev)]
        # the state before the step, for the FW save stream, travels beside the pipeline
        prev_fifo = SyncFIFO(width=W, depth=meta_fifo.depth)
        m.submodules.prev_fifo = prev_fifo
        m.d.comb += [prev_fifo.w_en.eq(meta_fifo.w_en),
                     prev_fifo.w_data.eq(fi.h_prev if gru else fi.c_prev)]

        # -- outputs: fork to the streams, write the buffers -----------------------------
        out_addr = meta_fifo.r_data[:len(cell_addr)]
        out_b = meta_fifo.r_data[len(cell_addr):]
        out_count = Signal(range(cells + 1))        # cells of the current output step
        out_step = Signal(32)
        step_last = out_count == run_batch * hidden - 1
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
            tx_deltas.i.payload.data.eq(Cat(*(bw_o.payload.d[k] for k in range(units)),
                                             *([bw_o.payload.dhn] if gru else []))),
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
                     vec_write.addr.eq(out_addr), state_write.addr.eq(out_addr),
                     vec_write.en.eq(fire), state_write.en.eq(fire & (bw | ~Const(int(gru))))]
        if gru:
            d_rec = [bw_o.payload.d[0], bw_o.payload.d[1], bw_o.payload.dhn]
            state_bw = bw_o.payload.direct
        else:
            d_rec = [bw_o.payload.d[k] for k in range(units)]
            state_bw = bw_o.payload.dc_prev
        m.d.comb += [
            vec_write.data.eq(Mux(bw, Cat(*d_rec), Cat(*([fw_o.payload.h] * units)))),
            state_write.data.eq(Mux(bw, state_bw, fw_o.payload.saved["c"] if not gru else 0)),
        ]
        for b in range(max_batch):
            with m.If(vector_end & (feed_b == b)):
                m.d.sync += avail[b].eq(0)
            with m.Elif(fire & (out_b == b)):
                m.d.sync += avail[b].eq(avail[b] + 1)
        with m.If(fire):
            m.d.sync += out_count.eq(Mux(step_last, 0, out_count + 1))
            with m.If(step_last):
                m.d.sync += out_step.eq(out_step + 1)
                with m.If(out_step == steps - 1):
                    m.d.sync += [running.eq(0), done.eq(1)]
        with m.If(go):
            m.d.sync += [out_count.eq(0), out_step.eq(0)]
            m.d.sync += [avail[b].eq(0) for b in range(max_batch)]

        # -- registers and counters ------------------------------------------------------
        load_error = bias_error
        vector_error = Const(0)
        for unit in mvms:
            load_error = load_error | unit.load_error
            vector_error = vector_error | unit.vector_error
        for name, value in {"busy": running, "done": done, "loading": loading,
                            "load_error": load_error, "vector_error": vector_error,
                            "run_error": run_error}.items():
            m.d.comb += regs.status[status.field(name).offset].eq(value)
        for name, value in register_constants(cfg).items():
            m.d.comb += getattr(regs, name).eq(value)
        ticks = {}
        for name in ("mac_cycles", "load_cycles"):
            previous_count = Signal(32, name=f"{name}_seen")
            m.d.sync += previous_count.eq(getattr(mvms[0], name))
            ticks[name] = getattr(mvms[0], name) != previous_count
        macs = units * shape.inputs
        counters = {"cycles": (running, None), "mac_cycles": (ticks["mac_cycles"], None),
                    "load_cycles": (ticks["load_cycles"], None),
                    "activation_wait_cycles": (activation_wait, None),
                    "useful_macs": (useful, macs)}
        assert counters.keys() == COUNTERS.keys()
        for name, (enable, increment) in counters.items():
            width = 0 if increment is None else increment.bit_length()
            counter = PerfCounter(64, increment_width=width)
            m.submodules[f"{name}_counter"] = counter
            clear = pulse["clear"] | (start if name != "load_cycles" else 0)
            m.d.comb += [counter.enable.eq(enable), counter.clear.eq(clear),
                         getattr(regs, name).eq(counter.count)]
            if increment is not None:
                m.d.comb += counter.increment.eq(increment)
        return m



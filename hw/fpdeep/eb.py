"""The EB module (error back-propagation, spec §3.5, paper Sec. 5.4) and the SFU's backward
step, fixed16 and fp32.

EB: ``Q`` CEs (``Q = S_IC`` without passes: one per input channel of the segment), each of
``P`` tiles of ``K × K`` MACs; every cycle the δ window of ``P`` output channels (one group)
is broadcast to all CEs; in pass ``r`` CE ``i``'s tile ``j`` multiplies it with the kernel
``W[g·P + j][r·Q + i]`` rotated by 180°, read from the LPRAM's second read port at the FP
module's row ``g·passes + r`` (bank ``(i, ky, kx)`` wired to tile position ``(K−1−ky,
K−1−kx)``, :class:`~.lpram.Lpram` ``eb_port``); the CE array is :func:`.conv.ce_array` (the
FP module's datapath, tile tree then CE tree). Every input channel ``c`` has a group-sum
register; the ``⌈OC/P⌉`` groups of a pixel are summed into it in order, then (OCP) the
partial error from downstream is added, then the result is rounded (fixed16, as the FP
output) or sent on un-rounded as a partial.

Streams
-------
``i``: δ of the segment's output map, one beat per pixel and group (``P`` words,
:func:`~.line_buffer.pixel_layout`, lanes past ``n_out`` zero), raster order, images back to
back; this is :class:`SfuBackward`'s ``o``.
``o`` (not ``partial_out``): the error of the segment's input map (:func:`error_layout`):
one beat per pixel of the ``w_in × w_in`` map, ``S_IC`` words and ``last``.
``i_partial`` (``partial_in``): the partial errors of the downstream OCP segment, one beat
per pixel of the ``w_in`` map in the order of ``o`` (:func:`partial_error_layout`: ``S_IC``
partial words, fixed16 exact 48-bit sums with ``2·frac_bits`` fraction bits, fp32 words).
``o_partial`` (``partial_out``): this node's partial errors in that layout, to the upstream
OCP segment (replaces ``o``).
``load`` (own LPRAM) or ``eb_addr``/``eb_en``/``eb_data`` (``shared_lpram=True``: wired to the
FP module's :class:`~.lpram.Lpram` built with ``eb_port=True``; ``eb_addr`` spans the
``rows = G·passes`` rows).

Latency and throughput: one δ window per cycle, an output pixel per ``G · passes`` cycles in
steady state (:attr:`EbModule.cycles`); latency from the completing δ beat: (stride > 1: the
dilation stage is combinational) line buffer 1 + feed 1 + ``ce_latency`` +
group sum 1 + (``partial_in``: fixed16 1, fp32 ``adder_stages``) + rescale 1 (not with
``partial_out``).
"""

from amaranth.hdl import Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from .conv import ce_array
from .fp import out_layout
from .line_buffer import LineBuffer, pixel_layout
from .segment import SegmentModule
from .pipe import Flow, float_unit, join, register_stage, sink, unit_stage

__all__ = ["EbModule", "SfuBackward", "error_layout", "partial_error_layout", "check_eb"]


def error_layout(cfg):
    """An EB output beat: ``data`` (``S_IC`` words) and ``last``."""
    return data.StructLayout({"data": data.ArrayLayout(cfg.word_bits, cfg.n_in), "last": 1})


def partial_error_layout(cfg):
    """A partial-error beat (``i_partial``, ``o_partial``): ``data`` (``S_IC`` partial words
    of ``partial_bits``) and ``last``."""
    return data.StructLayout({"data": data.ArrayLayout(cfg.partial_bits, cfg.n_in),
                              "last": 1})


def check_eb(cfg):
    """Refuse what the EB module does not build (``ValueError``)."""
    if cfg.precision == "fixed16" and cfg.n_out * cfg.taps > 1 << 16:
        raise ValueError(f"n_out·k² = {cfg.n_out * cfg.taps} products exceed the 2^16 a "
                         f"48-bit sum holds exactly")


class EbModule(SegmentModule):
    """The EB module of the segment :class:`~nnrtl.hw.fpdeep.config.FpConfig` ``cfg``.

    Parameters
    ----------
    cfg : FpConfig
        The segment (its FP module's configuration): ``q`` CEs, ``p`` tiles each,
        ``passes`` passes.
    shared_lpram : bool
        Read the weights through ``eb_addr``/``eb_en``/``eb_data`` from the FP module's
        LPRAM instead of an own one loaded through ``load``.
    partial_in : bool
        Add the downstream OCP segment's partial errors from ``i_partial``.
    partial_out : bool
        Send the un-rounded partial errors upstream on ``o_partial`` instead of the errors
        on ``o`` (an OCP segment that is not the most upstream one).

    Attributes
    ----------
    i, o, i_partial, o_partial : streams (module docstring)
    ce_latency : int
    macs : int
        ``Q · P · K²``, the FP module's count.
    cycles_per_pixel, cycles : int
        Steady-state cycles per output pixel (``G · passes``) and per image (``w_in²``
        pixels).

    Notes
    -----
    **Decisions ([U] in the spec)**

    * **Full convolution**: the δ line buffer pads the δ map by ``K − 1 − pad`` (``K − 1`` for
      an unpadded layer, the paper's Fig. 11), which gives back the ``w_in`` map at stride 1.
    * **Stride s > 1**: a dilation stage in front of the line buffer inserts ``s − 1`` zero
      beats between δ pixels (and zero rows between δ rows), and zero rows / columns after the
      last δ pixel up to the side ``w_in + 2·pad − K + 1`` (the input pixels the forward
      windows never reached get error 0); the line buffer then runs at stride 1 and gives the
      ``w_in × w_in`` map. A zero beat costs a line-buffer input cycle, so the δ map takes
      about ``s²`` times its beats — still about one beat per output window, the rate the CE
      array consumes windows at (``G · passes`` cycles a pixel). Decision: zeros are streamed,
      not skipped (a phase-split, ``s²`` sub-kernel EB would skip the zero products but needs
      its own LPRAM read order); the layer that needs stride most (AlexNet conv1, s = 4) is
      the first layer, which runs no EB.
    * **Passes (Q < S_IC)**: EB has ``Q`` CEs, one per LPRAM tile bank set, not ``S_IC`` (the
      LPRAM holds ``Q`` channels a row; ``S_IC`` CEs would need ``passes`` rows a cycle). Loop
      order as FP: pixel, group, pass innermost; a δ window is held for ``passes`` cycles and
      the LPRAM row counter runs ``0 … rows − 1`` per pixel. Pass ``r`` adds CE ``i``'s sum into
      channel ``r·Q + i``'s register (tiles past ``S_IC`` in the ragged last pass have zero
      weights and no register). An output pixel therefore costs ``G · passes`` cycles
      (:attr:`EbModule.cycles_per_pixel`), the FP module's rate: EB keeps pace with FP on the
      same ``P·Q·K²`` MACs. The summation order of each channel is unchanged by the passes.
    * **Group sum**: fixed16 an exact 48-bit add per cycle (the DSP48's accumulate); fp32 the
      order ``((s_0 + s_1) + s_2) + …`` over the groups, one rounding per add
      (:mod:`nnrtl.sim.golden.fpdeep.eb`), by a *combinational* ``hw/arith`` FloatAdd per CE
      (its register picked by the pass) in the accumulator loop (one group per cycle, the
      same bits as any pipelining; the cost is an fp32 add in one cycle's path: a pipelined
      adder of ``L`` stages needs ``L`` running sums interleaved over ``L`` pixels, i.e. a δ
      line buffer that issues pixels, not groups, innermost — not built).
    * **Partial add**: fixed16 one register of exact 48-bit adds; fp32 a pipelined FloatAdd
      (``adder_stages``) per channel, ``partial + local``.
    * **Output precision**: fixed16 16-bit words (``frac_bits``), round half up, saturate, as
      the FP module's completing node; fp32 the sum as it is. Partials leave un-rounded.

    OCP reduction (the rule of :mod:`nnrtl.gen.fpdeep.chain`, :func:`nnrtl.sim.golden.fpdeep.eb.
    eb_module`): the backward chain reduces an OCP layer's partial errors from the most
    downstream segment up, ``E_m = E_{m+1} + local_m``: the most downstream segment has no
    ``i_partial``, the most upstream has no ``o_partial`` and rounds (fixed16) once; fixed16 sums
    are exact 48-bit sums all the way, fp32 is one rounded add per segment, ``E_{m+1} + local``
    (the partial the first operand).
    """

    _tiles = "p"

    def __init__(self, cfg, *, shared_lpram=False, partial_in=False, partial_out=False):
        check_eb(cfg)
        self._partial_in = bool(partial_in)
        self._partial_out = bool(partial_out)
        ports = {"i": In(stream.Signature(pixel_layout(cfg.word_bits, cfg.p)))}
        if self._partial_in:
            ports["i_partial"] = In(stream.Signature(partial_error_layout(cfg)))
        if self._partial_out:
            ports["o_partial"] = Out(stream.Signature(partial_error_layout(cfg)))
        else:
            ports["o"] = Out(stream.Signature(error_layout(cfg)))
        super().__init__(cfg, ports, port="eb", shared_lpram=shared_lpram)

    @property
    def partial_in(self):
        return self._partial_in

    @property
    def partial_out(self):
        return self._partial_out

    @property
    def cycles_per_pixel(self):
        """``G · passes``: one pass of one group per cycle (the FP module's rate)."""
        return self._cfg.rows

    @property
    def cycles(self):
        """Steady-state cycles per image: ``w_in² · G · passes`` (the line buffer's fill
        and the pipeline come on top)."""
        return self._cfg.w_in ** 2 * self.cycles_per_pixel

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        G, K, K2, Q = cfg.groups, cfg.k, cfg.taps, cfg.q
        passes, rows = cfg.passes, cfg.rows
        m.submodules.lb = lb = LineBuffer(self.dilated_side, K, pad=K - 1 - cfg.pad,
                                          channels=cfg.p, word_bits=cfg.word_bits, groups=G)
        self._dilate(m, lb.i)
        eb_addr, eb_en, weights = self.lpram_read(m)

        # feed: one δ window (one group) held for `passes` cycles, LPRAM row g·passes + r
        row = Signal(range(rows))
        r = Signal(range(passes))
        f_valid, f_last, f_first, f_final = Signal(), Signal(), Signal(), Signal()
        f_pass = Signal(range(passes))
        f_taps = Signal.like(lb.o.payload.taps)
        feed = Flow(f_valid, "feed")
        advance = Signal()
        m.d.comb += [advance.eq(~f_valid | feed.ready),
                     lb.o.ready.eq(advance & (r == passes - 1)),
                     eb_en.eq(advance), eb_addr.eq(row)]
        with m.If(advance):
            m.d.sync += f_valid.eq(lb.o.valid)
            with m.If(lb.o.valid):
                m.d.sync += [f_taps.eq(lb.o.payload.taps), f_last.eq(lb.o.payload.last),
                             f_first.eq(row < passes), f_final.eq(row == rows - 1),
                             f_pass.eq(r), row.eq(Mux(row == rows - 1, 0, row + 1)),
                             r.eq(Mux(r == passes - 1, 0, r + 1))]

        # CE i, tile j, tap t = (a, b): δ[t][j] · W[g·P + j][r·Q + i][K−1−a][K−1−b]
        operands = [[[(f_taps[t][j], weights[i * K2 + K2 - 1 - t][j]) for t in range(K2)]
                     for j in range(cfg.p)] for i in range(Q)]
        flow, sums, (first, final, last, pass_) = ce_array(
            m, cfg, feed, operands, [f_first, f_final, f_last, f_pass], "eb")
        flow, acc, last = self._group_sum(m, flow, sums, first, final, last, pass_)

        if self._partial_in:
            upstream = Flow(self.i_partial.valid, "i_partial")
            m.d.comb += self.i_partial.ready.eq(upstream.ready)
            flow = join(m, flow, upstream, "partial_join")
            partial = [self.i_partial.payload.data[c] for c in range(cfg.n_in)]
            if cfg.precision == "fp32":
                units = [float_unit(m, f"partial_add_{c}",
                                    FloatAdd(FP32, stages=cfg.adder_stages))
                         for c in range(len(partial))]
                flow, acc, (last,) = unit_stage(
                    m, flow, units, [{"a": e, "b": s, "subtract": 0}
                                     for e, s in zip(partial, acc)], [last], "partial_add")
            else:
                flow, regs = register_stage(
                    m, flow, [Value.cast(e).as_signed() + Value.cast(s).as_signed()
                              for e, s in zip(partial, acc)] + [last], "partial_add")
                acc, last = regs[:-1], regs[-1]

        if self._partial_out:
            port, values = self.o_partial, acc
        elif cfg.precision == "fp32":
            flow, regs = register_stage(m, flow, acc + [last], "out")
            port, values, last = self.o, regs[:-1], regs[-1]
        else:
            f = cfg.frac_bits
            rounded = [(Value.cast(a).as_signed() + (1 << (f - 1))) >> f for a in acc]
            top, bottom = (1 << 15) - 1, -(1 << 15)
            flow, regs = register_stage(
                m, flow, [Mux(v > top, top, Mux(v < bottom, bottom, v))[:16]
                          for v in rounded] + [last], "rescale")
            port, values, last = self.o, regs[:-1], regs[-1]
        sink(m, flow, port)
        for c in range(cfg.n_in):
            m.d.comb += port.payload.data[c].eq(values[c])
        m.d.comb += port.payload.last.eq(last)
        return m

    @property
    def dilated_side(self):
        """Side of the δ map the line buffer takes: ``w_in + 2·pad − K + 1`` (``w_out`` at
        stride 1)."""
        cfg = self._cfg
        return cfg.w_in + 2 * cfg.pad - cfg.k + 1

    def _dilate(self, m, lb_in):
        """Feed the line buffer the δ map dilated by ``stride − 1`` zero pixels between δ
        pixels and zero rows / columns after the last up to :attr:`dilated_side`
        (:func:`nnrtl.sim.golden.fpdeep.eb.dilate_delta`): a zero beat is sent without
        taking an input beat, one beat per cycle. At stride 1 a wire."""
        cfg = self._cfg
        s, side, G = cfg.stride, self.dilated_side, cfg.groups
        if s == 1 and side == cfg.w_out:
            wiring.connect(m, wiring.flipped(self.i), lb_in)
            return
        span = (cfg.w_out - 1) * s                  # the last δ pixel's coordinate
        y, x, g = Signal(range(side)), Signal(range(side)), Signal(range(G))
        y_phase, x_phase = Signal(range(s)), Signal(range(s))
        real = Signal()
        inside = (y_phase == 0) & (x_phase == 0)
        if span < side - 1:                         # zero rows / columns after the last
            inside = inside & (y <= span) & (x <= span)
        m.d.comb += [real.eq(inside),
                     lb_in.valid.eq(~real | self.i.valid),
                     self.i.ready.eq(real & lb_in.ready)]
        with m.If(real):
            m.d.comb += lb_in.payload.eq(self.i.payload)
        with m.If(lb_in.valid & lb_in.ready):
            m.d.sync += g.eq(Mux(g == G - 1, 0, g + 1))
            with m.If(g == G - 1):
                m.d.sync += [x.eq(Mux(x == side - 1, 0, x + 1)),
                             x_phase.eq(Mux((x == side - 1) | (x_phase == s - 1), 0,
                                            x_phase + 1))]
                with m.If(x == side - 1):
                    m.d.sync += [y.eq(Mux(y == side - 1, 0, y + 1)),
                                 y_phase.eq(Mux((y == side - 1) | (y_phase == s - 1), 0,
                                                y_phase + 1))]

    def _group_sum(self, m, flow, sums, first, final, last, pass_):
        """Channel ``r·Q + i``'s register takes CE ``i``'s sum in pass ``r``: the first
        group's sum, then ``acc + sum`` per group in order (fixed16 exact 48-bit, fp32 a
        combinational FloatAdd per CE, its register picked by the pass). The flow of the
        complete sums (one item per pixel, after the pixel's last pass of its last group),
        the registers and ``last``."""
        cfg = self._cfg
        fp32 = cfg.precision == "fp32"
        acc = [Signal(32 if fp32 else signed(cfg.partial_bits), name=f"group_sum_{c}")
               for c in range(cfg.n_in)]
        s_valid, s_last = Signal(), Signal()
        summed = Flow(s_valid, "group_sum")
        enable = Signal()
        m.d.comb += [enable.eq(~s_valid | summed.ready), flow.ready.eq(enable)]
        with m.If(enable):
            m.d.sync += s_valid.eq(flow.valid & final)
            with m.If(flow.valid):
                m.d.sync += s_last.eq(last)
        for i in range(cfg.q):
            channels = [(n, n * cfg.q + i) for n in range(cfg.passes)
                        if n * cfg.q + i < cfg.n_in]
            held = Signal.like(acc[i], name=f"group_held_{i}")
            with m.Switch(pass_):
                for n, c in channels:
                    with m.Case(n):
                        m.d.comb += held.eq(acc[c])
            if fp32:
                adder = float_unit(m, f"group_add_{i}", FloatAdd(FP32, stages=0))
                m.d.comb += [adder.i.valid.eq(1), adder.o.ready.eq(1),
                             adder.i.payload.a.eq(held), adder.i.payload.b.eq(sums[i]),
                             adder.i.payload.subtract.eq(0)]
                added = Mux(first, sums[i], adder.o.payload)
            else:
                added = Mux(first, 0, held) + Value.cast(sums[i]).as_signed()
            with m.If(enable & flow.valid):
                with m.Switch(pass_):
                    for n, c in channels:
                        with m.Case(n):
                            m.d.sync += acc[c].eq(added)
        return summed, acc, s_last


class SfuBackward(wiring.Component):
    """The SFU's backward step on the node completing layer ``cfg`` (the layer ``t − 1`` of
    an EB): unpool from the argmax and ReLU' from the mask, spec §3.5.

    Parameters
    ----------
    cfg : FpConfig
        The completing segment whose SFU sent the masks (``completes``; its ``pool`` is
        ``None`` or ``(k, s, 0)``, overlapping (``k > s``, AlexNet's 3×3/2) or not).

    Attributes
    ----------
    i_error : In(stream.Signature(pixel_layout(word_bits, P)))
        The error of the SFU's output, one beat per pooled pixel and group (the order of the
        FP module's ``out`` beats).
    i_mask : In(stream.Signature(out_layout(cfg)))
        The SFU's ``out`` beats as the mask buffer returns them (``relu``, ``argmax``;
        ``data`` unused), one per ``i_error`` beat.
    o : Out(stream.Signature(pixel_layout(word_bits, P)))
        δ of the layer (``dL/dz``), one beat per pixel of the ``w_out`` map and group,
        raster order: :class:`EbModule`'s and :class:`~.pg.PgModule`'s δ input.

    Semantics (PyTorch's ``max_pool2d`` backward after a ReLU,
    :func:`nnrtl.sim.golden.fpdeep.eb.sfu_backward`): each pooled error goes to its
    window's argmax pixel (the forward SFU's first maximum in window raster order, torch's
    tie rule) if the mask bit sent with it is set; where windows overlap a pixel sums the
    errors routed to it, in pooled raster order (torch's ``grad_input[argmax] += grad``
    order; fixed16 the exact sum saturated to 16 bits once, fp32 one rounded add per
    further term); pixels no window reaches get 0.

    Buffer and schedule (the overlap decision): a pixel of map row ``y`` is reached by the
    pooled rows ``⌈(y − k + 1)/s⌉ … ⌊y/s⌋``, at most ``D = ⌊(k − 1)/s⌋ + 1`` of them (1 for
    ``k = s``, 2 for 3×3/2). The module keeps the last ``D`` pooled rows (a ring of ``D ·
    pool_out · G`` entries of ``P`` errors, ``P`` mask bits and ``P`` argmax indices: for
    AlexNet conv1, 27 · 2 · 96/P·P ≈ 5.2 k words) and *gathers*: after taking pooled row
    ``py`` (``pool_out·G`` beats, one a cycle) it sends the map rows ``py·s … py·s + s − 1``
    (after the last pooled row every remaining row, zeros past the pool's reach),
    ``w_out·G`` beats each, one a cycle; each output beat reads its ``D²`` candidate
    windows ``(⌊y/s⌋ − dy, ⌊x/s⌋ − dx)`` through ``D²`` read ports of the ring at once and
    sums the lanes whose argmax is the pixel. Taking and sending alternate (one ring, no
    read-add-write, so no hazard between neighbouring windows). The sum is combinational
    after the read (fp32: ``D² − 1`` FloatAdds in one cycle's path, 3 for 3×3/2; a
    pipelined sum is not built).

    Throughput and latency: a pooled beat a cycle while taking, a δ beat a cycle while
    sending (``pool_out²·G + w_out²·G`` cycles an image); a δ beat's valid one cycle after
    its read.
    """

    def __init__(self, cfg):
        if not cfg.completes:
            raise ValueError("SfuBackward runs on the node completing the layer")
        self._cfg = cfg
        beat = stream.Signature(pixel_layout(cfg.word_bits, cfg.p))
        super().__init__({"i_error": In(beat), "i_mask": In(stream.Signature(out_layout(cfg))),
                          "o": Out(beat)})

    @property
    def depth(self):
        """Pooled rows the ring holds: ``⌊(k − 1)/s⌋ + 1`` (0 without a pool)."""
        pool = self._cfg.pool
        return 0 if pool is None else (pool[0] - 1) // pool[1] + 1

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        P, G = cfg.p, cfg.groups
        err_flow = Flow(self.i_error.valid, "error")
        mask_flow = Flow(self.i_mask.valid, "mask")
        m.d.comb += [self.i_error.ready.eq(err_flow.ready),
                     self.i_mask.ready.eq(mask_flow.ready)]
        joined = join(m, err_flow, mask_flow, "joined")
        relu, argmax = self.i_mask.payload.relu, self.i_mask.payload.argmax
        if cfg.pool is None:
            flow, regs = register_stage(
                m, joined, [Mux(relu[j], self.i_error.payload[j], 0) for j in range(P)],
                "relu_backward")
            sink(m, flow, self.o)
            for j in range(P):
                m.d.comb += self.o.payload[j].eq(regs[j])
            return m

        kp, sp = cfg.pool[0], cfg.pool[1]
        D, po, side = self.depth, cfg.pool_out, cfg.w_out
        entry = data.StructLayout({"error": pixel_layout(cfg.word_bits, P),
                                   "relu": P, "argmax": argmax.shape()})
        buffer = Memory(shape=entry, depth=D * po * G, init=[])
        m.submodules.ring = buffer
        write = buffer.write_port()
        reads = [buffer.read_port() for _ in range(D * D)]

        taking = Signal(init=1)
        t_pos = Signal(range(po * G))                       # px·G + g
        t_slot = Signal(range(D))                           # py mod D
        py = Signal(range(po + 1))                          # pooled rows taken
        m.d.comb += [joined.ready.eq(taking),
                     write.en.eq(taking & joined.valid),
                     write.addr.eq(t_slot * (po * G) + t_pos),
                     write.data.error.eq(self.i_error.payload),
                     write.data.relu.eq(relu), write.data.argmax.eq(argmax)]
        # sending: row y = y_div·s + y_mod (r-th of the block), column x = x_div·s + x_mod
        rows = Signal(range(max(side, sp) + 1))             # rows in this block
        r = Signal(range(side))
        y, x, g = Signal(range(side)), Signal(range(side)), Signal(range(G))
        y_div, x_div = Signal(range(side // sp + 2)), Signal(range(side // sp + 2))
        y_mod, x_mod = Signal(range(sp)), Signal(range(sp))
        y_slot = Signal(range(D))                           # y_div mod D
        o_valid = Signal()
        advance = Signal()
        send = Signal()
        m.d.comb += [advance.eq(~o_valid | self.o.ready), send.eq(advance & ~taking)]
        with m.If(taking & joined.valid):
            with m.If(t_pos == po * G - 1):
                m.d.sync += [t_pos.eq(0), py.eq(py + 1), taking.eq(0), r.eq(0),
                             t_slot.eq(Mux(t_slot == D - 1, 0, t_slot + 1)),
                             rows.eq(Mux(py == po - 1, side - (po - 1) * sp, sp))]
            with m.Else():
                m.d.sync += t_pos.eq(t_pos + 1)

        # candidate (dy, dx): the window (y_div − dy, x_div − dx), tap (y_mod + dy·s,
        # x_mod + dx·s); what each read belongs to is registered with it
        candidates = [(dy, dx) for dy in reversed(range(D)) for dx in reversed(range(D))]
        o_keep = [Signal(name=f"o_inside_{n}") for n in range(D * D)]
        o_tap = [Signal(range(kp * kp), name=f"o_tap_{n}") for n in range(D * D)]
        for n, (dy, dx) in enumerate(candidates):
            inside = (y_div - dy < po) & (x_div - dx < po)
            if (dy + 1) * sp > kp:                  # the tap row can fall past the window
                inside &= y_mod + dy * sp < kp
            if (dx + 1) * sp > kp:
                inside &= x_mod + dx * sp < kp
            if dy:
                inside &= y_div >= dy
            if dx:
                inside &= x_div >= dx
            slot = Mux(y_slot >= dy, y_slot - dy, y_slot + D - dy) if dy else y_slot
            address = (slot * po + x_div - dx) * G + g
            m.d.comb += [reads[n].en.eq(advance),
                         reads[n].addr.eq(Mux(inside, address, 0))]
            with m.If(advance):
                m.d.sync += [o_keep[n].eq(inside),
                             o_tap[n].eq((y_mod + dy * sp) * kp + x_mod + dx * sp)]
        with m.If(advance):
            m.d.sync += o_valid.eq(send)
        with m.If(send):
            with m.If(g == G - 1):
                m.d.sync += g.eq(0)
                with m.If(x == side - 1):
                    m.d.sync += [x.eq(0), x_div.eq(0), x_mod.eq(0), r.eq(r + 1),
                                 y.eq(Mux(y == side - 1, 0, y + 1)),
                                 y_mod.eq(Mux((y_mod == sp - 1) | (y == side - 1), 0,
                                              y_mod + 1))]
                    with m.If(y == side - 1):
                        m.d.sync += [y_div.eq(0), y_slot.eq(0), py.eq(0), t_slot.eq(0)]
                    with m.Elif(y_mod == sp - 1):
                        m.d.sync += [y_div.eq(y_div + 1),
                                     y_slot.eq(Mux(y_slot == D - 1, 0, y_slot + 1))]
                    with m.If(r == rows - 1):
                        m.d.sync += taking.eq(1)
                with m.Else():
                    m.d.sync += [x.eq(x + 1), x_mod.eq(Mux(x_mod == sp - 1, 0, x_mod + 1)),
                                 x_div.eq(x_div + (x_mod == sp - 1))]
            with m.Else():
                m.d.sync += g.eq(g + 1)
        m.d.comb += self.o.valid.eq(o_valid)
        for j in range(P):
            terms = [(o_keep[n] & reads[n].data.relu[j] & (reads[n].data.argmax[j] == o_tap[n]),
                      reads[n].data.error[j]) for n in range(D * D)]
            m.d.comb += self.o.payload[j].eq(self._sum(m, terms, j))
        return m

    def _sum(self, m, terms, lane):
        """The kept terms ``[(keep, word)]`` summed in order: fixed16 exact, saturated to
        16 bits; fp32 the first kept word, then one combinational FloatAdd per further
        kept word; 0 if none is kept."""
        if len(terms) == 1:
            keep, word = terms[0]
            return Mux(keep, word, 0)
        if self._cfg.precision != "fp32":
            total = sum(Mux(keep, Value.cast(word).as_signed(), 0) for keep, word in terms)
            top, bottom = (1 << 15) - 1, -(1 << 15)
            return Mux(total > top, top, Mux(total < bottom, bottom, total))[:16]
        keep, acc = terms[0]
        acc, has = Mux(keep, acc, 0), keep
        for n, (keep, word) in enumerate(terms[1:], 1):
            adder = float_unit(m, f"unpool_add_{lane}_{n}", FloatAdd(FP32, stages=0))
            m.d.comb += [adder.i.valid.eq(1), adder.o.ready.eq(1),
                         adder.i.payload.a.eq(acc), adder.i.payload.b.eq(word),
                         adder.i.payload.subtract.eq(0)]
            acc = Mux(keep, Mux(has, adder.o.payload, word), acc)
            has = has | keep
        return acc

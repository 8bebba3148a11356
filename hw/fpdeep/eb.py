"""The EB module (error back-propagation, spec §3.5, paper Sec. 5.4) and the SFU's backward
step, fixed16 and fp32.

EB: ``S_IC`` CEs (one per input channel of the segment), each of ``P`` tiles of ``K × K``
MACs; every cycle the δ window of ``P`` output channels (one group) is broadcast to all CEs;
CE ``i``'s tile ``j`` multiplies it with the kernel ``W[g·P + j][i]`` rotated by 180°, read
from the LPRAM's second read port (bank ``(i, ky, kx)`` wired to tile position ``(K−1−ky,
K−1−kx)``, :class:`~.lpram.Lpram` ``eb_port``); the CE array is :func:`.conv.ce_array`
(the FP module's datapath, tile tree then CE tree); the ``⌈OC/P⌉`` groups of a pixel are
summed in order into the complete error (fixed16: rounded and saturated like the FP
output).

Streams
-------
``i``: δ of the segment's output map, one beat per pixel and group (``P`` words,
:func:`~.line_buffer.pixel_layout`, lanes past ``n_out`` zero), raster order, images back to
back; this is :class:`SfuBackward`'s ``o``.
``o``: the error of the segment's input map (:func:`error_layout`): one beat per pixel of the
``w_in × w_in`` map, ``S_IC`` words and ``last``.
``load`` (own LPRAM) or ``eb_addr``/``eb_en``/``eb_data`` (``shared_lpram=True``: wired to the
FP module's :class:`~.lpram.Lpram` built with ``eb_port=True``).

Decisions ([U] in the spec)
---------------------------
* **Full convolution**: the δ line buffer pads the δ map by ``K − 1 − pad`` (``K − 1`` for
  an unpadded layer, the paper's Fig. 11), which gives back the ``w_in`` map at stride 1.
* **Stride > 1 is refused** (``ValueError``): its error needs the δ map dilated by
  ``s − 1`` zeros between pixels (a line-buffer mode not built); the layers that need it
  (AlexNet conv1 s = 4) are the first layer, whose input error is not propagated anyway.
* **Group sum**: fixed16 an exact 48-bit add per cycle (the DSP48's accumulate); fp32 the
  order ``((s_0 + s_1) + s_2) + …`` over the groups, one rounding per add
  (:mod:`nnrtl.sim.golden.fpdeep.eb`), by a *combinational* ``hw/arith`` FloatAdd in the
  accumulator loop (one group per cycle, the same bits as any pipelining; the cost is an
  fp32 add in one cycle's path: a pipelined adder of ``L`` stages needs ``L`` running sums
  interleaved over ``L`` pixels, i.e. a δ line buffer that issues pixels, not groups,
  innermost — not built).
* **Output precision**: fixed16 16-bit words (``frac_bits``), round half up, saturate, as
  the FP module's completing node; fp32 the sum as it is. The segment holds all ``n_out``
  δ channels under ICP, so its errors are complete. (An OCP segment's errors are partial
  over output channels and would chain like FP partials: not built.)

Latency and throughput: one δ window per cycle, an output pixel per ``G`` cycles in steady
state; latency from the completing δ beat: line buffer 1 + feed 1 + ``ce_latency`` + group
sum 1 + rescale 1.
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
from .pipe import Flow, join, register_stage, sink

__all__ = ["EbModule", "SfuBackward", "error_layout", "check_eb"]


def error_layout(cfg):
    """An EB output beat: ``data`` (``S_IC`` words) and ``last``."""
    return data.StructLayout({"data": data.ArrayLayout(cfg.word_bits, cfg.n_in), "last": 1})


def check_eb(cfg):
    """Refuse what the EB module does not build (``ValueError``)."""
    if cfg.stride != 1:
        raise ValueError(f"EB is built for stride 1, not {cfg.stride}: the δ map of a "
                         f"strided layer must be dilated")
    if cfg.q < cfg.n_in:
        raise ValueError(f"EB is built for q = n_in, not q {cfg.q} < n_in {cfg.n_in}: its "
                         f"S_IC CEs read one LPRAM bank per input channel and tap, and a "
                         f"segment with passes stores Q channels a row")
    if cfg.precision == "fixed16" and cfg.n_out * cfg.taps > 1 << 16:
        raise ValueError(f"n_out·k² = {cfg.n_out * cfg.taps} products exceed the 2^16 a "
                         f"48-bit sum holds exactly")


class EbModule(SegmentModule):
    """The EB module of the segment :class:`~nnrtl.hw.fpdeep.config.FpConfig` ``cfg``.

    Parameters
    ----------
    cfg : FpConfig
        The segment (its FP module's configuration): ``n_in`` CEs, ``p`` tiles each.
    shared_lpram : bool
        Read the weights through ``eb_addr``/``eb_en``/``eb_data`` from the FP module's
        LPRAM instead of an own one loaded through ``load``.

    Attributes
    ----------
    i, o : streams (module docstring)
    ce_latency : int
    macs : int
        ``S_IC · P · K²``, the FP module's count.
    """

    _tiles = "p"

    def __init__(self, cfg, *, shared_lpram=False):
        check_eb(cfg)
        super().__init__(cfg, {
            "i": In(stream.Signature(pixel_layout(cfg.word_bits, cfg.p))),
            "o": Out(stream.Signature(error_layout(cfg))),
        }, port="eb", shared_lpram=shared_lpram)

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        G, K, K2 = cfg.groups, cfg.k, cfg.taps
        m.submodules.lb = lb = LineBuffer(cfg.w_out, K, pad=K - 1 - cfg.pad, channels=cfg.p,
                                          word_bits=cfg.word_bits, groups=G)
        wiring.connect(m, wiring.flipped(self.i), lb.i)
        eb_addr, eb_en, weights = self.lpram_read(m)

        # feed: one δ window (one group) per cycle, LPRAM row g read alongside
        g = Signal(range(G))
        f_valid, f_last, f_final = Signal(), Signal(), Signal()
        f_taps = Signal.like(lb.o.payload.taps)
        feed = Flow(f_valid, "feed")
        advance = Signal()
        m.d.comb += [advance.eq(~f_valid | feed.ready), lb.o.ready.eq(advance),
                     eb_en.eq(advance), eb_addr.eq(g)]
        with m.If(advance):
            m.d.sync += f_valid.eq(lb.o.valid)
            with m.If(lb.o.valid):
                m.d.sync += [f_taps.eq(lb.o.payload.taps), f_last.eq(lb.o.payload.last),
                             f_final.eq(g == G - 1), g.eq(Mux(g == G - 1, 0, g + 1))]

        # CE i, tile j, tap t = (a, b): δ[t][j] · W[g·P + j][i][K−1−a][K−1−b]
        operands = [[[(f_taps[t][j], weights[i * K2 + K2 - 1 - t][j]) for t in range(K2)]
                     for j in range(cfg.p)] for i in range(cfg.n_in)]
        flow, sums, (final, last) = ce_array(m, cfg, feed, operands, [f_final, f_last], "eb")

        # sum the groups of a pixel in order; emit on the last group. fixed16: exact, 48
        # bits; fp32: acc = sum_0, then acc + sum_g rounded once per group (a
        # combinational FloatAdd in the loop, see the module docstring)
        fp32 = cfg.precision == "fp32"
        acc = [Signal(32 if fp32 else signed(cfg.partial_bits), name=f"group_sum_{i}")
               for i in range(cfg.n_in)]
        s_valid, s_last = Signal(), Signal()
        summed = Flow(s_valid, "group_sum")
        enable = Signal()
        m.d.comb += [enable.eq(~s_valid | summed.ready), flow.ready.eq(enable)]
        first = Signal(init=1)              # the next item starts a pixel
        added = []
        for i in range(cfg.n_in):
            if fp32:
                adder = FloatAdd(FP32, stages=0)
                m.submodules[f"group_add_{i}"] = adder
                m.d.comb += [adder.i.valid.eq(1), adder.o.ready.eq(1),
                             adder.i.payload.a.eq(acc[i]), adder.i.payload.b.eq(sums[i]),
                             adder.i.payload.subtract.eq(0)]
                added.append(Mux(first, sums[i], adder.o.payload))
            else:
                added.append(Mux(first, 0, acc[i]) + Value.cast(sums[i]).as_signed())
        with m.If(enable):
            m.d.sync += s_valid.eq(flow.valid & final)
            with m.If(flow.valid):
                m.d.sync += [s_last.eq(last), first.eq(final)]
                m.d.sync += [a.eq(v) for a, v in zip(acc, added)]

        if fp32:
            flow, regs = register_stage(m, summed, acc + [s_last], "out")
        else:
            f = cfg.frac_bits
            rounded = [(a + (1 << (f - 1))) >> f for a in acc]
            top, bottom = (1 << 15) - 1, -(1 << 15)
            flow, regs = register_stage(
                m, summed, [Mux(r > top, top, Mux(r < bottom, bottom, r))[:16]
                            for r in rounded] + [s_last], "rescale")
        sink(m, flow, self.o)
        for i in range(cfg.n_in):
            m.d.comb += self.o.payload.data[i].eq(regs[i])
        m.d.comb += self.o.payload.last.eq(regs[-1])
        return m


class SfuBackward(wiring.Component):
    """The SFU's backward step on the node completing layer ``cfg`` (the layer ``t − 1`` of
    an EB): unpool from the argmax and ReLU' from the mask, spec §3.5.

    Parameters
    ----------
    cfg : FpConfig
        The completing segment whose SFU sent the masks (``completes``; its ``pool`` is
        ``None`` or non-overlapping, kernel = stride).

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

    Schedule: without a pool a beat per cycle (one register). With a ``k×k/k`` pool the
    module takes a pooled row (``pool_out·G`` beats) into a row buffer, then sends the ``k``
    map rows it covers (``w_out·G`` beats each, one per cycle) and, after the last pooled
    row, the rows the pool leaves out (zeros); taking and sending alternate (decision:
    one row buffer, the input is the slower side only by ``1/k``).

    Decision: an overlapping pool (AlexNet's 3×3/2) is refused (``ValueError``): a pixel
    in two windows sums two errors, which needs a read-add-write map buffer, not built.
    """

    def __init__(self, cfg):
        if not cfg.completes:
            raise ValueError("SfuBackward runs on the node completing the layer")
        if cfg.pool is not None and cfg.pool[0] != cfg.pool[1]:
            raise ValueError(f"pool {cfg.pool}: the backward step is built for "
                             f"non-overlapping pools (kernel = stride)")
        self._cfg = cfg
        beat = stream.Signature(pixel_layout(cfg.word_bits, cfg.p))
        super().__init__({"i_error": In(beat), "i_mask": In(stream.Signature(out_layout(cfg))),
                          "o": Out(beat)})

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

        kp = cfg.pool[0]
        side, covered = cfg.w_out, kp * cfg.pool_out
        entry = data.StructLayout({"error": pixel_layout(cfg.word_bits, P),
                                   "relu": P, "argmax": argmax.shape()})
        buffer = Memory(shape=entry, depth=cfg.pool_out * G, init=[])
        m.submodules.row_buffer = buffer
        write, read = buffer.write_port(), buffer.read_port()

        taking = Signal(init=1)
        t_pos = Signal(range(cfg.pool_out * G))             # px·G + g
        py = Signal(range(cfg.pool_out + 1))                # pooled rows taken
        m.d.comb += [joined.ready.eq(taking),
                     write.en.eq(taking & joined.valid), write.addr.eq(t_pos),
                     write.data.error.eq(self.i_error.payload),
                     write.data.relu.eq(relu), write.data.argmax.eq(argmax)]
        # sending: row r of the block, column x = x_div·k + x_mod, group g
        rows = Signal(range(kp + side + 1))                 # rows in this block
        r = Signal(range(kp + side))
        y = Signal(range(side))
        x_div = Signal(range(side // kp + 2))
        x_mod = Signal(range(kp))
        x = Signal(range(side))
        g = Signal(range(G))
        o_valid = Signal()
        advance = Signal()
        send = Signal()
        m.d.comb += [advance.eq(~o_valid | self.o.ready), send.eq(advance & ~taking),
                     read.en.eq(advance), read.addr.eq(x_div * G + g)]
        with m.If(taking & joined.valid):
            with m.If(t_pos == cfg.pool_out * G - 1):
                last_row = py == cfg.pool_out - 1
                m.d.sync += [t_pos.eq(0), py.eq(py + 1), taking.eq(0), r.eq(0),
                             rows.eq(Mux(last_row, side - covered + kp, kp))]
            with m.Else():
                m.d.sync += t_pos.eq(t_pos + 1)
        # what the read belongs to, registered with it
        o_tap = Signal(range(kp * kp))
        o_inside = Signal()
        with m.If(advance):
            m.d.sync += [o_valid.eq(send), o_tap.eq(r * kp + x_mod),
                         o_inside.eq((r < kp) & (x < covered))]
        with m.If(send):
            with m.If(g == G - 1):
                m.d.sync += g.eq(0)
                with m.If(x == side - 1):
                    m.d.sync += [x.eq(0), x_div.eq(0), x_mod.eq(0), r.eq(r + 1),
                                 y.eq(Mux(y == side - 1, 0, y + 1))]
                    with m.If(r == rows - 1):
                        m.d.sync += taking.eq(1)
                        with m.If(y == side - 1):
                            m.d.sync += py.eq(0)
                with m.Else():
                    m.d.sync += [x.eq(x + 1), x_mod.eq(Mux(x_mod == kp - 1, 0, x_mod + 1)),
                                 x_div.eq(x_div + (x_mod == kp - 1))]
            with m.Else():
                m.d.sync += g.eq(g + 1)
        m.d.comb += self.o.valid.eq(o_valid)
        for j in range(P):
            keep = o_inside & read.data.relu[j] & (read.data.argmax[j] == o_tap)
            m.d.comb += self.o.payload[j].eq(Mux(keep, read.data.error[j], 0))
        return m

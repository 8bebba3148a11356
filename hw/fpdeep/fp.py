"""The FP module of one layer segment (spec §3.4, paper Sec. 5.3, Fig. 12): line buffer →
``P`` CEs of ``Q`` tiles of ``K × K`` MACs fed by LPRAM rows, ``⌈S_IC/Q⌉`` passes per pixel
and group summed by a per-lane accumulator → chained partial add → (on the completing node)
bias and SFU, else partials downstream.

Streams (all ``amaranth.lib.stream``, valid/ready; every one may stall at any time)
----------------------------------------------------------------------------------
``act_in``: input activations, one pixel of ``S_IC`` words per beat, raster order, images
back to back (:func:`~.line_buffer.pixel_layout`).
``load``: LPRAM rows (:func:`~.lpram.load_layout`); load before the images that use them.
``part_in`` (``partial_in`` only): the upstream node's partials ``R_{m−1}``, one beat per
output pixel and group (``P`` partial words, :func:`partial_layout`), raster order of the
output pixels, groups in order within a pixel: the order this module produces them in.
``part_out`` (not ``completes``): ``R_m`` in that order.
``out`` (``completes``): the SFU's output (:func:`out_layout`): per output beat (pooled
pixel in raster order, group) ``data`` (``P`` activations), ``relu`` (``P`` mask bits:
ReLU'(z) at the value sent, which with a pool is the argmax position) and ``argmax``
(``P`` pool-window indices ``ky·k + kx``, 0 without a pool), and ``last`` (the image's last
beat). Decision: the mask and argmax travel with the data as a side field of the same beat
(EB keeps them beside the activations it caches for the node downstream; a separate buffer
would need its own addressing).

Schedule: one pass of one group per cycle, passes innermost (pixel → group → pass,
:mod:`.config`'s decision): a window is held for ``G · passes`` cycles (``G = ⌈n_out/P⌉``,
``passes = ⌈S_IC/Q⌉``) while the LPRAM rows ``0 … G·passes − 1`` are read (row ``g·passes
+ r``); tile ``i`` of pass ``r`` is fed channel ``r·Q + i`` of the window by a
``passes``-way multiplexer (zero past ``S_IC``: the ragged last pass), the line buffer still
delivering whole pixels of ``S_IC`` channels. With ``passes > 1`` a per-lane accumulator
(:meth:`FpModule._accumulate`) sums the passes of a group and sends one item per group, so
in steady state an output pixel costs ``G · passes`` cycles
(:attr:`FpConfig.cycles_per_pixel`, the mapper's model) as long as the line buffer is fed
at least ``s²`` pixels per ``G · passes`` cycles; with one pass the accumulator is left out
(the datapath is the ``Q = S_IC`` one).

Latency: line buffer (1) + feed register (1) + :attr:`FpModule.ce_latency` + the
accumulator (1, with ``passes > 1``) + chain add / bias / SFU stages.

Arithmetic: :mod:`nnrtl.sim.golden.fpdeep.fp` (bit-exact; the order of every sum there).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from .conv import ce_array
from .line_buffer import LineBuffer, pixel_layout
from .segment import SegmentModule
from .pipe import Flow, float_unit, join, register_stage, sink, unit_stage

__all__ = ["FpModule", "partial_layout", "out_layout"]


def partial_layout(cfg):
    """A partial beat: ``data`` (``P`` partial words) and ``last``."""
    return data.StructLayout({"data": data.ArrayLayout(cfg.partial_bits, cfg.p), "last": 1})


def out_layout(cfg):
    """An SFU output beat: ``data``, ``relu``, ``argmax``, ``last``."""
    return data.StructLayout({
        "data": data.ArrayLayout(cfg.word_bits, cfg.p),
        "relu": cfg.p,
        "argmax": data.ArrayLayout(max(1, cfg.argmax_bits), cfg.p),
        "last": 1,
    })


def _key(cfg, value):
    """An unsigned key ordered as the value (fp32: IEEE total order; fixed16: signed)."""
    if cfg.precision == "fp32":
        return Mux(value[31], Cat(~value[:31], Const(0, 1)), value | (1 << 31))
    return value ^ (1 << 15)


class FpModule(SegmentModule):
    """The FP module of :class:`~nnrtl.hw.fpdeep.config.FpConfig` ``cfg``.

    Attributes
    ----------
    act_in, load, part_in, part_out, out : streams (see the module docstring; ``part_in``
        only with ``cfg.partial_in``, ``part_out`` only without ``cfg.completes``, ``out``
        only with it)
    fp_addr, fp_en, fp_data : the LPRAM read port (``shared_lpram=True``, instead of
        ``load``): the FP module reads the LPRAM of the node (:mod:`.node`), shared with EB
        and the weight update (:class:`~.segment.SegmentModule`).
    cfg : FpConfig
    ce_latency : int
        Cycles through the CE array without stalls.

    Notes
    -----
    Costs to note: fp32 carries the bias row (``P`` words) along the CE pipeline as sideband
    registers (``ce_latency`` stages of ``P`` words); a bias register file would be smaller
    when ``G`` is small.
    """

    _tiles = "q"

    def __init__(self, cfg, *, shared_lpram=False):
        ports = {"act_in": In(stream.Signature(pixel_layout(cfg.word_bits, cfg.n_in)))}
        if cfg.partial_in:
            ports["part_in"] = In(stream.Signature(partial_layout(cfg)))
        if cfg.completes:
            ports["out"] = Out(stream.Signature(out_layout(cfg)))
        else:
            ports["part_out"] = Out(stream.Signature(partial_layout(cfg)))
        super().__init__(cfg, ports, port="fp", shared_lpram=shared_lpram)

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        K2, rows, passes = cfg.taps, cfg.rows, cfg.passes
        m.submodules.lb = lb = LineBuffer(cfg.w_in, cfg.k, stride=cfg.stride, pad=cfg.pad,
                                          channels=cfg.n_in, word_bits=cfg.word_bits)
        wiring.connect(m, wiring.flipped(self.act_in), lb.i)
        fp_addr, fp_en, weights = self.lpram_read(m)

        # feed: hold each window for G·passes cycles, reading LPRAM row g·passes + r in each
        row = Signal(range(rows))
        r = Signal(range(passes))
        f_valid = Signal()
        f_taps = Signal.like(lb.o.payload.taps)
        f_pass = Signal(range(passes))
        f_last = Signal()
        feed = Flow(f_valid, "feed")
        advance = Signal()
        m.d.comb += [
            advance.eq(~f_valid | feed.ready),
            lb.o.ready.eq(advance & (row == rows - 1)),
            fp_en.eq(advance),
            fp_addr.eq(row),
        ]
        with m.If(advance):
            m.d.sync += f_valid.eq(lb.o.valid)
            with m.If(lb.o.valid):
                m.d.sync += [
                    f_taps.eq(lb.o.payload.taps),
                    f_pass.eq(r),
                    f_last.eq(lb.o.payload.last & (row == rows - 1)),
                    row.eq(Mux(row == rows - 1, 0, row + 1)),
                    r.eq(Mux(r == passes - 1, 0, r + 1)),
                ]

        # tile i of pass r takes input channel r·Q + i (zero past S_IC: the ragged last pass)
        selected = [[Signal(cfg.word_bits, name=f"act_{i}_{t}") for t in range(K2)]
                    for i in range(cfg.q)]
        for i in range(cfg.q):
            for t in range(K2):
                if passes == 1:
                    m.d.comb += selected[i][t].eq(f_taps[t][i])
                    continue
                with m.Switch(f_pass):
                    for n in range(passes):
                        channel = n * cfg.q + i
                        if channel < cfg.n_in:
                            with m.Case(n):
                                m.d.comb += selected[i][t].eq(f_taps[t][channel])
        operands = [[[(selected[i][t], weights[i * K2 + t][j]) for t in range(K2)]
                     for i in range(cfg.q)] for j in range(cfg.p)]
        bias = [weights[cfg.banks][j] for j in range(cfg.p)] if cfg.completes else []
        flags = [f_pass == 0, f_pass == passes - 1] if passes > 1 else []
        flow, sums, sides = ce_array(m, cfg, feed, operands, bias + [f_last] + flags)
        if passes > 1:
            flow, sums, sides = self._accumulate(m, flow, sums, *sides[-2:], sides[:-2])
        bias, last = sides[:len(bias)], sides[len(bias)]

        # R_m = R_{m-1} + local
        if cfg.partial_in:
            upstream = Flow(self.part_in.valid, "part_in")
            m.d.comb += self.part_in.ready.eq(upstream.ready)
            flow = join(m, flow, upstream, "chain")
            previous = [self.part_in.payload.data[j] for j in range(cfg.p)]
            flow, sums, sides = self._add(m, flow, previous, sums, bias + [last], "chain_add")
            bias, last = sides[:len(bias)], sides[-1]

        if not cfg.completes:
            sink(m, flow, self.part_out)
            for j in range(cfg.p):
                m.d.comb += self.part_out.payload.data[j].eq(sums[j])
            m.d.comb += self.part_out.payload.last.eq(last)
            return m

        # z = R_m + bias; fixed16: round half up to frac_bits and saturate to 16 bits
        if cfg.precision == "fixed16":
            f = cfg.frac_bits
            flow, sides = register_stage(
                m, flow, [Value.cast(s).as_signed() + (Value.cast(b).as_signed() << f)
                          for s, b in zip(sums, bias)] + [last], "bias_add")
            z_wide, last = sides[:-1], sides[-1]
            rounded = [(z + (1 << (f - 1))) >> f for z in z_wide]
            flow, sides = register_stage(
                m, flow, [Mux(r > (1 << 15) - 1, (1 << 15) - 1,
                              Mux(r < -(1 << 15), -(1 << 15), r))[:16] for r in rounded]
                + [last], "rescale")
            z, last = sides[:-1], sides[-1]
        else:
            flow, z, sides = self._add(m, flow, sums, bias, [last], "bias_add")
            last = sides[0]

        # SFU: ReLU (and its mask), then max-pool (with argmax)
        relu_y, relu_mask = [], []
        for j in range(cfg.p):
            value = Signal(cfg.word_bits, name=f"z_{j}")
            m.d.comb += value.eq(z[j])
            negative = value[cfg.word_bits - 1]
            y = Signal(cfg.word_bits, name=f"relu_{j}")
            mask = Signal(name=f"relu_mask_{j}")
            if cfg.relu:
                m.d.comb += [y.eq(Mux(negative, 0, value)), mask.eq(y != 0)]
            else:
                m.d.comb += [y.eq(value), mask.eq(1)]
            relu_y.append(y)
            relu_mask.append(mask)

        if cfg.pool is None:
            sink(m, flow, self.out)
            for j in range(cfg.p):
                m.d.comb += [self.out.payload.data[j].eq(relu_y[j]),
                             self.out.payload.relu[j].eq(relu_mask[j])]
            m.d.comb += self.out.payload.last.eq(last)
            return m

        kp, sp, _ = cfg.pool
        m.submodules.pool_lb = pool_lb = LineBuffer(
            cfg.w_out, kp, stride=sp, channels=cfg.p, word_bits=cfg.word_bits + 1,
            groups=cfg.groups)
        m.d.comb += [pool_lb.i.valid.eq(flow.valid), flow.ready.eq(pool_lb.i.ready)]
        for j in range(cfg.p):
            m.d.comb += pool_lb.i.payload[j].eq(Cat(relu_y[j], relu_mask[j]))
        window = pool_lb.o.payload
        pooled = []
        for j in range(cfg.p):
            best = Value.cast(window.taps[0][j])
            best_t = Const(0, max(1, cfg.argmax_bits))
            for t in range(1, kp * kp):
                tap = Value.cast(window.taps[t][j])
                better = Signal(name=f"pool_better_{j}_{t}")
                m.d.comb += better.eq(_key(cfg, tap[:cfg.word_bits])
                                      > _key(cfg, best[:cfg.word_bits]))
                best = Mux(better, tap, best)
                best_t = Mux(better, t, best_t)
            pooled += [best, best_t]
        pool_flow = Flow(pool_lb.o.valid, "pool")
        m.d.comb += pool_lb.o.ready.eq(pool_flow.ready)
        flow, regs = register_stage(m, pool_flow, pooled + [window.last], "pool_out")
        sink(m, flow, self.out)
        for j in range(cfg.p):
            best, best_t = regs[2 * j], regs[2 * j + 1]
            m.d.comb += [self.out.payload.data[j].eq(best[:cfg.word_bits]),
                         self.out.payload.relu[j].eq(best[cfg.word_bits]),
                         self.out.payload.argmax[j].eq(best_t)]
        m.d.comb += self.out.payload.last.eq(regs[-1])
        return m

    def _accumulate(self, m, flow, sums, first, final, sides):
        """The per-lane pass accumulator: ``acc = s_0``, then ``acc = acc + s_r`` for the
        passes ``r = 1 … passes − 1`` of a group in order; one item (the group's sum, the
        ``sides`` of its last pass) leaves per ``passes`` items taken, one taken per cycle.
        fixed16: exact 48-bit adds. fp32: a combinational ``hw/arith`` FloatAdd (0 stages)
        per lane in the one-cycle loop ``acc → adder → acc``, so a pass still costs one
        cycle (decision: a pipelined adder would need ``adder_stages`` interleaved
        accumulators per lane or a stall per pass; the price is one unpipelined fp32 add
        in the clock period on this loop)."""
        cfg = self._cfg
        valid, done = Signal(name="acc_valid"), Signal(name="acc_done")
        out = Flow(Signal(name="acc_out_valid"), "acc")
        enable = Signal(name="acc_enable")
        m.d.comb += [out.valid.eq(valid & done), enable.eq(~out.valid | out.ready),
                     flow.ready.eq(enable)]
        accs = [Signal(cfg.partial_bits, name=f"acc_{j}") for j in range(len(sums))]
        nexts = []
        for j, (acc, value) in enumerate(zip(accs, sums)):
            if cfg.precision == "fp32":
                adder = float_unit(m, f"acc_add_{j}", FloatAdd(FP32, stages=0))
                m.d.comb += [adder.i.valid.eq(1), adder.o.ready.eq(1),
                             adder.i.payload.a.eq(acc), adder.i.payload.b.eq(value),
                             adder.i.payload.subtract.eq(0)]
                nexts.append(adder.o.payload)
            else:
                nexts.append(acc.as_signed() + Value.cast(value).as_signed())
        held = [Signal(Value.cast(side).shape(), name=f"acc_side_{n}")
                for n, side in enumerate(sides)]
        with m.If(enable):
            m.d.sync += valid.eq(flow.valid)
            with m.If(flow.valid):
                m.d.sync += done.eq(final)
                for acc, value, total in zip(accs, sums, nexts):
                    m.d.sync += acc.eq(Mux(first, value, total))
                for register, side in zip(held, sides):
                    m.d.sync += register.eq(side)
        return out, accs, held

    def _add(self, m, flow, a, b, sides, name):
        """``a[j] + b[j]`` per lane, one stage group."""
        cfg = self._cfg
        if cfg.precision == "fp32":
            units = [float_unit(m, f"{name}_{n}", FloatAdd(FP32, stages=cfg.adder_stages))
                     for n in range(len(a))]
            return unit_stage(m, flow, units, [{"a": x, "b": y, "subtract": 0}
                                               for x, y in zip(a, b)], sides, name)
        flow, registered = register_stage(
            m, flow, [Value.cast(x).as_signed() + Value.cast(y).as_signed()
                      for x, y in zip(a, b)] + sides, name)
        return flow, registered[:len(a)], registered[len(a):]

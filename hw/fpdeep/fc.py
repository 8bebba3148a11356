"""The FC engine of the chain's last node: a fully connected layer's forward pass, backward
pass, weight gradient and SGD step, with ``W⁺ = [W | b]`` streamed from the board's DDR and
written back (:mod:`.fc_config`: the layout, :mod:`nnrtl.sim.golden.fpdeep.fc`: the bits).

A mini-batch runs in four phases, one after the other:

1. **load**: ``i_x`` gives ``B · n_in`` words, sample-major (``x[b][i]``, ``i`` inner); the
   engine stores them (ReLU'd when ``input_relu``) in its input buffer, ``B · K`` rows of
   ``P`` words whose column ``n_in`` holds the constant one from the start;
2. **forward**: ``i_w`` gives ``W⁺``'s ``n_out · K`` beats; each is held ``B`` cycles,
   one item ``(o, k, b)`` a cycle: ``P`` MACs whose products a CE's tile tree reduces
   (:func:`.conv.ce_array`, the conv engines' units and order), then a per-sample
   accumulator (a ring of ``B`` registers) sums the beats; ``o_y`` sends ``y[b][o]``
   (feature-major: ``o`` outer, ``b`` inner);
3. **backward**: ``i_w`` gives ``W⁺`` again, ``i_dy`` gives ``δy[b][o]`` feature-major (taken
   at a row's first beat, kept in a ring for its other beats); each item runs ``2·P`` MACs:
   ``W·δy`` read-add-written into the ``δx`` buffer (``B · K`` rows of ``P`` sums, read
   transparent to the write), ``δy·x⁺`` summed over the ``B`` samples of the beat; after
   the beat's last sample the SGD step (:mod:`.update`'s arithmetic) sends the new beat on
   ``o_w`` (row order, the DDR region's);
4. **drain**: ``o_dx`` sends ``δx[b][i]`` feature-major (``i`` outer, ``b`` inner),
   rescaled (fixed16) and masked by ``x ≠ 0`` when ``input_relu``.

Feature-major out and sample-major in make a chain of FC engines need a buffer between
them; the engine stores every input, so it takes ``i_x`` in either order
(``input_order``).

Throughput: one item a cycle in the forward and backward passes (``P`` and ``2·P`` MACs),
one word a cycle in load and drain; cycles of a mini-batch without pauses:
:func:`nnrtl.gen.fpdeep.fc_cycles.fc_cycles`. The weight stream moves ``P`` words every
``B`` cycles in the passes.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from ..arith.float_mul import FloatMul
from .conv import ce_array, ce_latency
from .fc_config import FcConfig
from .pipe import Flow, float_unit, register_stage
from .update import RATE_BITS

__all__ = ["FcEngine", "INPUT_ORDERS", "Phase"]

#: Orders ``i_x`` may arrive in: ``"sample"`` (``x[b][i]``, ``i`` inner) or ``"feature"``.
INPUT_ORDERS = ("sample", "feature")


class Phase:
    """The ``phase`` output's values."""
    LOAD, FORWARD, BACKWARD, DRAIN = range(4)


def _clip16(wide):
    return Mux(wide > (1 << 15) - 1, (1 << 15) - 1, Mux(wide < -(1 << 15), -(1 << 15), wide))


def _rescale(value, f):
    """Round half up to ``f`` fraction bits (of ``2f``) and saturate to 16 bits."""
    return _clip16((Value.cast(value).as_signed() + (1 << (f - 1))) >> f)[:16]


class FcEngine(wiring.Component):
    """The FC engine of :class:`~.fc_config.FcConfig` ``cfg`` (module docstring).

    Parameters
    ----------
    cfg : FcConfig
    input_order : str
        :data:`INPUT_ORDERS` (default ``"sample"``).

    Attributes
    ----------
    lr : In(word_bits)
        ``rate = η/B``: fixed16 Q0.16, fp32 bits (as :class:`~.update.WeightUpdate`).
    i_x, i_dy : In(stream.Signature(word_bits))
    i_w : In(stream.Signature(ArrayLayout(word_bits, P)))
    o_y, o_dx : Out(stream.Signature(word_bits))
    o_w : Out(stream.Signature(ArrayLayout(word_bits, P)))
    phase : Out(2)
        :class:`Phase`.

    Raises
    ------
    TypeError
        ``cfg`` not an :class:`FcConfig`.
    ValueError
        ``input_order`` not one of :data:`INPUT_ORDERS`.
    """

    def __init__(self, cfg, *, input_order="sample"):
        if not isinstance(cfg, FcConfig):
            raise TypeError(f"cfg must be an FcConfig, not {cfg!r}")
        if input_order not in INPUT_ORDERS:
            raise ValueError(f"input_order must be one of {', '.join(INPUT_ORDERS)}, not "
                             f"{input_order!r}")
        self._cfg, self._order = cfg, input_order
        word = cfg.word_bits
        super().__init__({
            "lr": In(word),
            "i_x": In(stream.Signature(word)),
            "i_w": In(stream.Signature(data.ArrayLayout(word, cfg.p))),
            "i_dy": In(stream.Signature(word)),
            "o_y": Out(stream.Signature(word)),
            "o_w": Out(stream.Signature(data.ArrayLayout(word, cfg.p))),
            "o_dx": Out(stream.Signature(word)),
            "phase": Out(2),
        })

    @property
    def cfg(self):
        return self._cfg

    @property
    def backward_latency(self):
        """Cycles from a backward item's issue to its ``δx`` write: the operand register,
        the products, the read-add-write register."""
        return 2 + ce_latency(self._cfg, 1, 1)

    def _add(self, m, name, a, b):
        """``a + b``: fixed16 exact signed, fp32 a combinational FloatAdd."""
        if self._cfg.precision == "fp32":
            unit = float_unit(m, name, FloatAdd(FP32, stages=0, shifts=self._cfg.adder_shifts))
            m.d.comb += [unit.i.valid.eq(1), unit.o.ready.eq(1), unit.i.payload.a.eq(a),
                         unit.i.payload.b.eq(b), unit.i.payload.subtract.eq(0)]
            return unit.o.payload
        return Value.cast(a).as_signed() + Value.cast(b).as_signed()

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        P, K, B, f = cfg.p, cfg.beats, cfg.batch, cfg.frac_bits
        word, wide = cfg.word_bits, cfg.sum_bits
        fp32 = cfg.precision == "fp32"
        rows = B * K
        phase = Signal(2)
        m.d.comb += self.phase.eq(phase)

        # the input buffer: the constant one of column n_in is in the memory's init
        one_at = (cfg.n_in // P, cfg.n_in % P)
        init = [cfg.one << (one_at[1] * word) if r % K == one_at[0] else 0
                for r in range(rows)]
        m.submodules.x_buf = x_buf = Memory(shape=unsigned(P * word), depth=rows, init=init)
        x_write = x_buf.write_port(granularity=word)
        x_read = x_buf.read_port()
        m.submodules.dx_buf = dx_buf = Memory(shape=data.ArrayLayout(wide, P), depth=rows,
                                              init=[])
        dx_write = dx_buf.write_port()
        dx_read = dx_buf.read_port(transparent_for=(dx_write,))

        self._load(m, phase, x_write)
        drain = _Drain(cfg)
        issue_addr, s1, sides, bwd_fire = self._issue(m, phase, drain.owner)
        m.d.comb += [x_read.en.eq(Mux(drain.owner, drain.enable, s1.enable)),
                     x_read.addr.eq(Mux(drain.owner, drain.addr, issue_addr))]
        x_lanes = [x_read.data[j * word:(j + 1) * word] for j in range(P)]
        fwd = Flow(Signal(name="fc_fwd_valid"), "fc_fwd")
        bwd = Flow(Signal(name="fc_bwd_valid"), "fc_bwd")
        m.d.comb += [fwd.valid.eq(s1.flow.valid & ~sides["backward"]),
                     bwd.valid.eq(s1.flow.valid & sides["backward"]),
                     s1.flow.ready.eq(Mux(sides["backward"], bwd.ready, fwd.ready))]
        self._forward(m, fwd, x_lanes, sides)
        written = self._backward(m, bwd, x_lanes, sides, dx_read, dx_write, drain)
        inflight = Signal(range(self.backward_latency + 8), name="fc_inflight")
        m.d.sync += inflight.eq(inflight + bwd_fire - written)
        self._drain(m, drain, phase, inflight == 0, x_read, dx_read)
        return m

    # -- load ----------------------------------------------------------------------------
    def _load(self, m, phase, x_write):
        cfg = self._cfg
        P, K, B, word = cfg.p, cfg.beats, cfg.batch, cfg.word_bits
        b, k, j, i = (Signal(range(max(n, 2)), name=f"load_{s}")
                      for n, s in ((B, "b"), (K, "k"), (P, "j"), (cfg.n_in, "i")))
        x = self.i_x.payload
        if cfg.input_relu:
            negative = x[-1] if cfg.precision == "fp32" else x.as_signed() < 0
            x = Mux(negative, 0, x)
        take = self.i_x.valid & self.i_x.ready
        m.d.comb += [self.i_x.ready.eq(phase == Phase.LOAD),
                     x_write.addr.eq(b * K + k), x_write.data.eq(Cat(*([x] * P))),
                     x_write.en.eq(Mux(take, Const(1, P) << j, 0))]
        last_i, last_b = i == cfg.n_in - 1, b == B - 1
        with m.If(take):
            if self._order == "sample":
                with m.If(last_i):
                    m.d.sync += [i.eq(0), j.eq(0), k.eq(0), b.eq(Mux(last_b, 0, b + 1))]
                    with m.If(last_b):
                        m.d.sync += phase.eq(Phase.FORWARD)
                with m.Elif(j == P - 1):
                    m.d.sync += [i.eq(i + 1), j.eq(0), k.eq(k + 1)]
                with m.Else():
                    m.d.sync += [i.eq(i + 1), j.eq(j + 1)]
            else:
                with m.If(last_b):
                    m.d.sync += b.eq(0)
                    with m.If(last_i):
                        m.d.sync += [i.eq(0), j.eq(0), k.eq(0), phase.eq(Phase.FORWARD)]
                    with m.Elif(j == P - 1):
                        m.d.sync += [i.eq(i + 1), j.eq(0), k.eq(k + 1)]
                    with m.Else():
                        m.d.sync += [i.eq(i + 1), j.eq(j + 1)]
                with m.Else():
                    m.d.sync += b.eq(b + 1)

    # -- issue: the items (o, k, b) of both passes -----------------------------------------
    def _issue(self, m, phase, held):
        cfg = self._cfg
        K, B = cfg.beats, cfg.batch
        o = Signal(range(max(cfg.n_out, 2)), name="issue_o")
        k = Signal(range(max(K, 2)), name="issue_k")
        b = Signal(range(max(B, 2)), name="issue_b")
        backward = phase == Phase.BACKWARD
        ring = [Signal(cfg.word_bits, name=f"dy_ring_{n}") for n in range(B)]
        dy = Mux(k == 0, self.i_dy.payload, ring[0])
        valid = Signal()
        m.d.comb += valid.eq(~held & self.i_w.valid & (
            (phase == Phase.FORWARD) | (backward & ((k != 0) | self.i_dy.valid))))
        s1 = _Stage(Flow(valid, "fc_issue"))
        first_row, last_b = o == 0, b == B - 1
        flow, values = register_stage(m, s1.source, [
            backward, k == 0, k == K - 1, b == 0, last_b, first_row, b * K + k,
            Value.cast(self.i_w.payload), dy], "fc_s1")
        s1.flow, s1.enable = flow, s1.source.ready
        fire = valid & s1.enable
        m.d.comb += [self.i_w.ready.eq(fire & last_b),
                     self.i_dy.ready.eq(fire & backward & (k == 0))]
        with m.If(fire & backward):
            m.d.sync += [ring[n].eq(ring[n + 1]) for n in range(B - 1)]
            m.d.sync += ring[B - 1].eq(dy)
        with m.If(fire):
            with m.If(last_b):
                m.d.sync += b.eq(0)
                with m.If(k == K - 1):
                    m.d.sync += k.eq(0)
                    with m.If(o == cfg.n_out - 1):
                        m.d.sync += [o.eq(0), phase.eq(Mux(backward, Phase.DRAIN,
                                                           Phase.BACKWARD))]
                    with m.Else():
                        m.d.sync += o.eq(o + 1)
                with m.Else():
                    m.d.sync += k.eq(k + 1)
            with m.Else():
                m.d.sync += b.eq(b + 1)
        names = ["backward", "first_beat", "last_beat", "first_sample", "last_sample",
                 "first_row", "addr", "w", "dy"]
        sides = dict(zip(names, values))
        sides["w"] = data.ArrayLayout(cfg.word_bits, cfg.p)(sides["w"])
        return b * K + k, s1, sides, fire & backward

    # -- forward -------------------------------------------------------------------------
    def _forward(self, m, flow, x_lanes, sides):
        cfg = self._cfg
        w = sides["w"]
        flow, sums, (first, last) = ce_array(
            m, cfg, flow, [[[(x_lanes[j], w[j]) for j in range(cfg.p)]]],
            [sides["first_beat"], sides["last_beat"]], "fc_fwd")
        shape = unsigned(32) if cfg.precision == "fp32" else signed(cfg.sum_bits)
        ring = [Signal(shape, name=f"acc_ring_{n}") for n in range(cfg.batch)]
        total = Signal(shape)
        m.d.comb += total.eq(Mux(first, sums[0], self._add(m, "fc_acc_add", ring[0], sums[0])))
        y_valid = Signal()
        y_data = Signal(cfg.word_bits)
        m.d.comb += [flow.ready.eq(~y_valid | self.o_y.ready), self.o_y.valid.eq(y_valid),
                     self.o_y.payload.eq(y_data)]
        with m.If(self.o_y.ready):
            m.d.sync += y_valid.eq(0)
        with m.If(flow.valid & flow.ready):
            m.d.sync += [ring[n].eq(ring[n + 1]) for n in range(cfg.batch - 1)]
            m.d.sync += ring[-1].eq(total)
            with m.If(last):
                m.d.sync += [y_valid.eq(1),
                             y_data.eq(total if cfg.precision == "fp32"
                                       else _rescale(total, cfg.frac_bits))]

    # -- backward ------------------------------------------------------------------------
    def _backward(self, m, flow, x_lanes, sides, dx_read, dx_write, drain):
        cfg = self._cfg
        P, fp32 = cfg.p, cfg.precision == "fp32"
        w, dy = sides["w"], sides["dy"]
        operands = ([[[(dy, w[j])]] for j in range(P)]
                    + [[[(x_lanes[j], dy)]] for j in range(P)])
        keep = [sides["addr"], sides["first_row"], sides["first_sample"],
                sides["last_sample"], Value.cast(w)]
        flow, products, kept = ce_array(m, cfg, flow, operands, keep, "fc_bwd")
        a, regs = register_stage(m, flow, list(products) + kept, "fc_bwd_a")
        m.d.comb += [dx_read.addr.eq(Mux(drain.owner, drain.addr, kept[0])),
                     dx_read.en.eq(Mux(drain.owner, drain.enable, flow.ready))]
        pd, pg = regs[:P], regs[P:2 * P]
        addr, first_row, first_sample, last_sample, w_a = regs[2 * P:]
        fire = a.valid & a.ready
        m.d.comb += [dx_write.en.eq(fire), dx_write.addr.eq(addr)]
        grads = [Signal(cfg.sum_bits, name=f"grad_{j}") for j in range(P)]
        totals = []
        for j in range(P):
            m.d.comb += dx_write.data[j].eq(
                Mux(first_row, pd[j], self._add(m, f"fc_dx_add_{j}", dx_read.data[j], pd[j])))
            total = Signal(cfg.sum_bits, name=f"grad_total_{j}")
            m.d.comb += total.eq(Mux(first_sample, pg[j],
                                     self._add(m, f"fc_grad_add_{j}", grads[j], pg[j])))
            totals.append(total)
            with m.If(fire):
                m.d.sync += grads[j].eq(total)

        # the SGD step of the beat after its last sample
        u_flow = Flow(a.valid & last_sample, "fc_update")
        m.d.comb += a.ready.eq(u_flow.ready)
        u, uregs = register_stage(m, u_flow, totals + [w_a], "fc_u1")
        g, old = uregs[:P], data.ArrayLayout(cfg.word_bits, P)(uregs[P])
        lr = self.lr
        if fp32:
            steps = []
            for j in range(P):
                mul = float_unit(m, f"fc_rate_{j}", FloatMul(FP32, stages=0))
                m.d.comb += [mul.i.valid.eq(1), mul.o.ready.eq(1), mul.i.payload.a.eq(lr),
                             mul.i.payload.b.eq(g[j])]
                steps.append(mul.o.payload)
            u, uregs = register_stage(m, u, steps + [Value.cast(old)], "fc_u2")
            steps, old = uregs[:P], data.ArrayLayout(cfg.word_bits, P)(uregs[P])
            new = []
            for j in range(P):
                sub = float_unit(m, f"fc_sub_{j}", FloatAdd(FP32, stages=0))
                m.d.comb += [sub.i.valid.eq(1), sub.o.ready.eq(1), sub.i.payload.a.eq(old[j]),
                             sub.i.payload.b.eq(steps[j]), sub.i.payload.subtract.eq(1)]
                new.append(sub.o.payload)
        else:
            shift = RATE_BITS + cfg.frac_bits
            new = []
            for j in range(P):
                scaled = lr.as_unsigned() * Value.cast(g[j]).as_signed()
                delta = (scaled + (1 << (shift - 1))) >> shift
                new.append(_clip16(Value.cast(old[j]).as_signed() - delta)[:16])
        out, oregs = register_stage(m, u, [Cat(*new)], "fc_o_w")
        m.d.comb += [self.o_w.valid.eq(out.valid), out.ready.eq(self.o_w.ready),
                     self.o_w.payload.eq(oregs[0])]

        return fire

    # -- drain ---------------------------------------------------------------------------
    def _drain(self, m, drain, phase, settled, x_read, dx_read):
        """``δx[b][i]`` feature-major once every backward item has written (``settled``)."""
        cfg = self._cfg
        P, K, B = cfg.p, cfg.beats, cfg.batch
        b, k, j, i = (Signal(range(max(n, 2)), name=f"drain_{s}")
                      for n, s in ((B, "b"), (K, "k"), (P, "j"), (cfg.n_in, "i")))
        valid = Signal()
        m.d.comb += valid.eq((phase == Phase.DRAIN) & settled)
        out, (lane,) = register_stage(m, drain.flow, [j], "fc_drain")
        m.d.comb += [drain.flow.valid.eq(valid), drain.enable.eq(drain.flow.ready),
                     drain.addr.eq(b * K + k),
                     drain.owner.eq(valid | out.valid)]
        fire = valid & drain.flow.ready
        last_b = b == B - 1
        with m.If(fire):
            with m.If(last_b):
                m.d.sync += b.eq(0)
                with m.If(i == cfg.n_in - 1):
                    m.d.sync += [i.eq(0), j.eq(0), k.eq(0), phase.eq(Phase.LOAD)]
                with m.Elif(j == P - 1):
                    m.d.sync += [i.eq(i + 1), j.eq(0), k.eq(k + 1)]
                with m.Else():
                    m.d.sync += [i.eq(i + 1), j.eq(j + 1)]
            with m.Else():
                m.d.sync += b.eq(b + 1)
        value = Signal(cfg.word_bits)
        x = Signal(cfg.word_bits)
        word = cfg.word_bits
        with m.Switch(lane):
            for n in range(P):
                with m.Case(n):
                    sum_ = dx_read.data[n]
                    m.d.comb += [value.eq(sum_ if cfg.precision == "fp32"
                                          else _rescale(sum_, cfg.frac_bits)),
                                 x.eq(x_read.data[n * word:(n + 1) * word])]
        result = Mux(x == 0, 0, value) if cfg.input_relu else value
        m.d.comb += [self.o_dx.valid.eq(out.valid), out.ready.eq(self.o_dx.ready),
                     self.o_dx.payload.eq(result)]


class _Drain:
    """The drain's hold on the buffers' read ports: its flow, read enable and address, and
    ``owner`` (the drain reads, not the passes)."""

    def __init__(self, cfg):
        self.flow = Flow(Signal(name="fc_drain_valid"), "fc_drain_in")
        self.enable = Signal(name="fc_drain_enable")
        self.addr = Signal(range(max(cfg.batch * cfg.beats, 2)), name="fc_drain_addr")
        self.owner = Signal(name="fc_drain_owner")


class _Stage:
    """The issue's register stage: the source flow, the stage's flow and enable."""

    def __init__(self, source):
        self.source, self.flow, self.enable = source, None, None

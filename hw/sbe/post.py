"""A post-processing unit (PP) of the SBE (Fig. 7): bias, optional batch normalisation,
piecewise-linear sigmoid/tanh, cell update and hidden update for one hidden unit per cycle.

It is built from the verified arithmetic units of :mod:`nnrtl.hw.arith` (FixedAdd,
FixedMul, PWLSigmoid/PWLTanh tables) used as fixed-latency pipelines: their ``o.ready`` is
tied high, the engine never stalls them (it reserves room for every result before it hands
a pass over). The arithmetic is that of :func:`nnrtl.sim.golden.sbe.step`:

1. ``z = sat_A(acc + bias)``; with batch norm ``z = sat_A(rescale(z * scale) + shift)``
2. ``i, f, o = sigmoid(z)``, ``u = tanh(z)`` (PWL, A in, E out)
3. ``c = sat_E(rescale(f * c_prev) + rescale(i * u))``, stored in the unit's cell memory
4. ``h = rescale_V(o * tanh(c))``
"""

import dataclasses
import functools

from amaranth.hdl import Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arith import FixedAdd, FixedMul, QFormat
from ..arith.pwl import PiecewiseLinear, pwl_table

__all__ = ["PostProcessingUnit", "formats", "pwl_tables", "Formats"]


@dataclasses.dataclass(frozen=True)
class Formats:
    """The SBE's number formats: ``weight`` (W), ``vector`` (V: x and h), ``acc`` (A:
    accumulators, biases, batch-norm shift) and ``cell`` (E: activations, cell state,
    batch-norm scale)."""

    weight: QFormat
    vector: QFormat
    acc: QFormat
    cell: QFormat


def formats(config):
    """The :class:`Formats` of ``config``."""
    ow, aw = config.operand_width, config.acc_width
    return Formats(weight=QFormat(ow, config.weight_frac), vector=QFormat(ow, config.act_frac),
                   acc=QFormat(aw, config.acc_frac), cell=QFormat(aw, config.cell_frac))


def pwl_tables(config):
    """``(sigmoid A->E, tanh A->E, tanh E->E)``: the PWL tables of the gates and the cell
    (64 segments, the :func:`~nnrtl.hw.arith.pwl.pwl_table` defaults)."""
    return _tables(formats(config))


@functools.lru_cache(maxsize=32)
def _tables(f):
    return (pwl_table("sigmoid", f.acc, f.cell), pwl_table("tanh", f.acc, f.cell),
            pwl_table("tanh", f.cell, f.cell))


def _latency(unit):
    """The latency of a unit built only to ask it (not elaborated)."""
    unit._MustUse__silence = True
    return unit.latency


@functools.lru_cache(maxsize=32)
def _stage_latencies(f, batch_norm):
    add_a = _latency(FixedAdd(f.acc, f.acc, f.acc))
    stages = {"parameter read": 1, "bias add": add_a}
    if batch_norm:
        stages["batch norm"] = _latency(FixedMul(f.acc, f.cell, f.acc)) + add_a
    stages.update({
        "gate activation": _latency(PiecewiseLinear(_tables(f)[0])),
        "cell products": _latency(FixedMul(f.cell, f.cell, f.cell)),
        "cell add": _latency(FixedAdd(f.cell, f.cell, f.cell)),
        "cell activation": _latency(PiecewiseLinear(_tables(f)[2])),
        "hidden product": _latency(FixedMul(f.cell, f.cell, f.vector)),
    })
    return tuple(stages.items())


class PostProcessingUnit(wiring.Component):
    """One PP: a hidden unit per cycle, fixed latency :attr:`latency`.

    Parameters
    ----------
    config : SBEConfig

    Attributes
    ----------
    valid : In(1)
        ``acc`` holds the four gate sums of hidden unit ``addr * post_units + lane``.
    acc : In(unsigned(4 * acc_width))
        Gate sums, gate ``g`` in bits ``[g * aw, (g + 1) * aw)`` (i, u, f, o).
    addr : In
        The unit's entry in this PP's parameter and cell memories.
    fresh : In(1)
        Start from ``c_prev = 0`` (first step of a run without carried state).
    bn_enable : In(1)
        Apply the batch normalisation (configurations with ``batch_norm`` only).
    hdr_en, hdr_addr, hdr_field, hdr_data : In
        Write one header value (bias, scale or shift) into the parameter memory.
    h_valid, h : Out
        The hidden value, :attr:`latency` cycles after ``valid``.
    h_addr : Out
        ``addr`` delayed to ``h``.
    """

    def __init__(self, config):
        self._config = config
        aw, depth = config.acc_width, config.hidden_size // config.post_units
        self._fields = config.header_fields
        super().__init__({
            "valid": In(1),
            "acc": In(unsigned(4 * aw)),
            "addr": In(range(depth)),
            "fresh": In(1),
            "bn_enable": In(1),
            "hdr_en": In(1),
            "hdr_addr": In(range(depth)),
            "hdr_field": In(range(self._fields)),
            "hdr_data": In(unsigned(aw)),
            "h_valid": Out(1),
            "h": Out(unsigned(config.operand_width)),
            "h_addr": Out(range(depth)),
        })

    @staticmethod
    def stage_latencies(config):
        """Cycles of each stage, from ``valid`` to ``h_valid`` (in order)."""
        return dict(_stage_latencies(formats(config), config.batch_norm))

    @property
    def latency(self):
        return sum(self.stage_latencies(self._config).values())

    def elaborate(self, platform):
        m = Module()
        config = self._config
        f = formats(config)
        aw = config.acc_width
        depth = config.hidden_size // config.post_units
        sigmoid, tanh_gate, tanh_cell = pwl_tables(config)

        def delay(value, cycles, name):
            for index in range(cycles):
                reg = Signal(Value.cast(value).shape(), name=f"{name}_d{index + 1}")
                m.d.sync += reg.eq(value)
                value = reg
            return value

        # Parameters: one word of `fields` values per unit.
        m.submodules.params = params = Memory(
            shape=unsigned(self._fields * aw), depth=depth, init=[])
        hdr = params.write_port(granularity=aw)
        m.d.comb += [hdr.addr.eq(self.hdr_addr), hdr.data.eq(self.hdr_data.replicate(self._fields)),
                     hdr.en.eq(Mux(self.hdr_en, Const(1, self._fields) << self.hdr_field, 0))]
        param = params.read_port(domain="sync")
        m.d.comb += param.addr.eq(self.addr)

        def field(index):
            return param.data[index * aw:(index + 1) * aw]

        valid = delay(self.valid, 1, "valid")                           # parameter read
        acc = delay(self.acc, 1, "acc")
        addr = delay(self.addr, 1, "addr")
        fresh = delay(self.fresh, 1, "fresh")

        def unit(name, component, valid, **operands):
            m.submodules[name] = component
            m.d.comb += [component.i.valid.eq(valid), component.o.ready.eq(1)]
            for port, value in operands.items():
                m.d.comb += getattr(component.i.p, port).eq(value)
            return component

        z = []
        for g in range(4):
            out = unit(f"bias_{g}", FixedAdd(f.acc, f.acc, f.acc), valid,
                       a=acc[g * aw:(g + 1) * aw], b=field(g))
            z.append(out.o.p.sum)
        lat = out.latency
        valid, addr, fresh = (delay(s, lat, n) for s, n in
                              ((valid, "valid_z"), (addr, "addr_z"), (fresh, "fresh_z")))
        if config.batch_norm:
            mul_lat = _latency(FixedMul(f.acc, f.cell, f.acc))
            shift = [delay(field(8 + g), lat + mul_lat, f"shift{g}") for g in range(4)]
            scaled = []
            for g in range(4):
                # The parameter word is read once; scale waits for z (bias add latency).
                out = unit(f"bn_mul_{g}", FixedMul(f.acc, f.cell, f.acc), valid,
                           a=z[g], b=delay(field(4 + g), lat, f"bn_scale{g}"))
                scaled.append(out.o.p.product)
            valid2 = delay(valid, mul_lat, "valid_bnm")
            normed = []
            for g in range(4):
                out = unit(f"bn_add_{g}", FixedAdd(f.acc, f.acc, f.acc), valid2,
                           a=scaled[g], b=shift[g])
                normed.append(out.o.p.sum)
            bn_lat = mul_lat + lat
            z = [Mux(self.bn_enable, normed[g], delay(z[g], bn_lat, f"z{g}")) for g in range(4)]
            valid, addr, fresh = (delay(s, bn_lat, n) for s, n in
                                  ((valid, "valid_bn"), (addr, "addr_bn"), (fresh, "fresh_bn")))

        gates = []
        for g, table in enumerate((sigmoid, tanh_gate, sigmoid, sigmoid)):
            out = unit(f"act_{g}", PiecewiseLinear(table), valid, x=z[g])
            gates.append(out.o.p.y)
        act_lat = out.latency
        i_gate, u_gate, f_gate, o_gate = gates

        # The cell memory is read so that c_prev meets f at the cell products.
        m.submodules.cells = cells = Memory(shape=unsigned(aw), depth=depth, init=[])
        c_read = cells.read_port(domain="sync")
        c_write = cells.write_port()
        m.d.comb += c_read.addr.eq(delay(addr, act_lat - 1, "addr_c"))
        valid, addr, fresh = (delay(s, act_lat, n) for s, n in
                              ((valid, "valid_a"), (addr, "addr_a"), (fresh, "fresh_a")))
        c_prev = Mux(fresh, 0, c_read.data)

        # The activations take the multipliers only as wide as their values (y_fmt).
        fc = unit("mul_fc", FixedMul(sigmoid.y_fmt, f.cell, f.cell), valid, a=f_gate, b=c_prev)
        iu = unit("mul_iu", FixedMul(sigmoid.y_fmt, tanh_gate.y_fmt, f.cell), valid,
                  a=i_gate, b=u_gate)
        mul_lat = fc.latency
        valid, addr = delay(valid, mul_lat, "valid_p"), delay(addr, mul_lat, "addr_p")
        o_gate = delay(o_gate, mul_lat, "o_p")
        cell = unit("add_c", FixedAdd(f.cell, f.cell, f.cell), valid,
                    a=fc.o.p.product, b=iu.o.p.product)
        add_lat = cell.latency
        valid, addr = delay(valid, add_lat, "valid_c"), delay(addr, add_lat, "addr_c2")
        o_gate = delay(o_gate, add_lat, "o_c")
        m.d.comb += [c_write.en.eq(valid), c_write.addr.eq(addr), c_write.data.eq(cell.o.p.sum)]

        t = unit("act_c", PiecewiseLinear(tanh_cell), valid, x=cell.o.p.sum)
        valid, addr = delay(valid, act_lat, "valid_t"), delay(addr, act_lat, "addr_t")
        o_gate = delay(o_gate, act_lat, "o_t")
        h = unit("mul_h", FixedMul(sigmoid.y_fmt, tanh_cell.y_fmt, f.vector), valid,
                 a=o_gate, b=t.o.p.y)
        h_lat = h.latency
        m.d.comb += [self.h_valid.eq(delay(valid, h_lat, "valid_h")),
                     self.h_addr.eq(delay(addr, h_lat, "addr_h")), self.h.eq(h.o.p.product)]
        return m

# amaranth: UnusedElaboratable=no
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

from amaranth.hdl import Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arith import FixedAdd, FixedMul
from ..arith.pwl import PiecewiseLinear

__all__ = ["PostProcessingUnit"]


class _Units:
    """The arithmetic units of one PP, stage by stage: the one description of its pipeline.
    :meth:`PostProcessingUnit.elaborate` wires these very units, and
    :meth:`PostProcessingUnit.stage_latencies` reads their latencies from a set built only
    to ask (this file's first line tells Amaranth not to warn about those)."""

    def __init__(self, config):
        f, t = config.formats, config.pwl_tables
        self.bias = [FixedAdd(f.acc, f.acc, f.acc) for _ in range(4)]
        self.batch_norm = config.batch_norm
        if config.batch_norm:
            self.bn_mul = [FixedMul(f.acc, f.cell, f.acc) for _ in range(4)]
            self.bn_add = [FixedAdd(f.acc, f.acc, f.acc) for _ in range(4)]
        self.gates = [PiecewiseLinear(table) for table in (t.sigmoid, t.tanh, t.sigmoid,
                                                            t.sigmoid)]
        # The activations take the multipliers only as wide as their values (y_fmt).
        self.mul_fc = FixedMul(t.sigmoid.y_fmt, f.cell, f.cell)
        self.mul_iu = FixedMul(t.sigmoid.y_fmt, t.tanh.y_fmt, f.cell)
        self.add_c = FixedAdd(f.cell, f.cell, f.cell)
        self.act_c = PiecewiseLinear(t.cell_tanh)
        self.mul_h = FixedMul(t.sigmoid.y_fmt, t.cell_tanh.y_fmt, f.vector)

    @staticmethod
    def _same(units):
        """The one latency of units that run side by side."""
        latencies = {unit.latency for unit in units}
        assert len(latencies) == 1, latencies
        return latencies.pop()

    @property
    def stages(self):
        """``{stage: cycles}`` from ``valid`` to ``h_valid``, in order."""
        stages = {"parameter read": 1, "bias add": self._same(self.bias)}
        if self.batch_norm:
            stages["batch norm"] = self._same(self.bn_mul) + self._same(self.bn_add)
        stages.update({
            "gate activation": self._same(self.gates),
            "cell products": self._same([self.mul_fc, self.mul_iu]),
            "cell add": self.add_c.latency,
            "cell activation": self.act_c.latency,
            "hidden product": self.mul_h.latency,
        })
        return stages


_STAGE_LATENCIES = {}     # (formats, batch_norm) -> stages: the same units, the same latencies


class PostProcessingUnit(wiring.Component):
    """One PP: a hidden unit per cycle, fixed latency :attr:`latency` (the sum of
    :meth:`stage_latencies`).

    Parameters
    ----------
    config : SbeConfig

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
        Write one header value into the parameter memory: field ``hdr_field`` of
        :attr:`SbeConfig.header_layout` (bias, scale or shift of a gate).
    h_valid, h : Out
        The hidden value, :attr:`latency` cycles after ``valid``.
    """

    def __init__(self, config):
        self._config = config
        aw, depth = config.acc_width, self.depth(config)
        super().__init__({
            "valid": In(1),
            "acc": In(unsigned(4 * aw)),
            "addr": In(range(depth)),
            "fresh": In(1),
            "bn_enable": In(1),
            "hdr_en": In(1),
            "hdr_addr": In(range(depth)),
            "hdr_field": In(range(config.header_layout.fields)),
            "hdr_data": In(unsigned(aw)),
            "h_valid": Out(1),
            "h": Out(unsigned(config.operand_width)),
        })

    @staticmethod
    def depth(config):
        """Entries of a PP's parameter and cell memories: the hidden units it finishes,
        ``hidden_size / post_units``."""
        return config.hidden_size // config.post_units

    @staticmethod
    def stage_latencies(config):
        """Cycles of each stage, from ``valid`` to ``h_valid`` (in order), read from the
        arithmetic units the PP is built of."""
        key = (config.formats, config.batch_norm)
        if key not in _STAGE_LATENCIES:
            _STAGE_LATENCIES[key] = _Units(config).stages
        return dict(_STAGE_LATENCIES[key])

    @property
    def latency(self):
        """Cycles from ``valid`` to ``h_valid``."""
        return sum(self.stage_latencies(self._config).values())

    def elaborate(self, platform):
        m = Module()
        config = self._config
        aw = config.acc_width
        layout = config.header_layout
        fields = layout.fields
        units = _Units(config)
        stages = units.stages

        def delay(value, cycles, name):
            for index in range(cycles):
                reg = Signal(Value.cast(value).shape(), name=f"{name}_d{index + 1}")
                m.d.sync += reg.eq(value)
                value = reg
            return value

        def advance(cycles, name, *signals):
            return tuple(delay(value, cycles, f"{label}_{name}") for label, value in signals)

        # Parameters: one word of `fields` values per unit.
        m.submodules.params = params = Memory(
            shape=unsigned(fields * aw), depth=self.depth(config), init=[])
        hdr = params.write_port(granularity=aw)
        m.d.comb += [hdr.addr.eq(self.hdr_addr), hdr.data.eq(self.hdr_data.replicate(fields)),
                     hdr.en.eq(Mux(self.hdr_en, Const(1, fields) << self.hdr_field, 0))]
        param = params.read_port(domain="sync")
        m.d.comb += param.addr.eq(self.addr)

        def field(kind, gate):
            index = layout.index(kind, gate)
            return param.data[index * aw:(index + 1) * aw]

        def unit(name, component, valid, **operands):
            m.submodules[name] = component
            m.d.comb += [component.i.valid.eq(valid), component.o.ready.eq(1)]
            for port, value in operands.items():
                m.d.comb += getattr(component.i.p, port).eq(value)
            return component

        valid, acc, addr, fresh = advance(                                # parameter read
            stages["parameter read"], "p", ("valid", self.valid), ("acc", self.acc),
            ("addr", self.addr), ("fresh", self.fresh))

        lat = stages["bias add"]
        z = [unit(f"bias_{g}", units.bias[g], valid, a=acc[g * aw:(g + 1) * aw],
                  b=field("bias", g)).o.p.sum for g in range(4)]
        valid, addr, fresh = advance(lat, "z", ("valid", valid), ("addr", addr),
                                     ("fresh", fresh))
        if config.batch_norm:
            mul_lat = units.bn_mul[0].latency
            # The parameter word is read once; the scale waits for z, the shift for z * scale.
            scaled = [unit(f"bn_mul_{g}", units.bn_mul[g], valid, a=z[g],
                           b=delay(field("scale", g), lat, f"bn_scale{g}")).o.p.product
                      for g in range(4)]
            valid_scaled = delay(valid, mul_lat, "valid_bnm")
            normed = [unit(f"bn_add_{g}", units.bn_add[g], valid_scaled, a=scaled[g],
                           b=delay(field("shift", g), lat + mul_lat, f"shift{g}")).o.p.sum
                      for g in range(4)]
            bn_lat = stages["batch norm"]
            z = [Mux(self.bn_enable, normed[g], delay(z[g], bn_lat, f"z{g}"))
                 for g in range(4)]
            valid, addr, fresh = advance(bn_lat, "bn", ("valid", valid), ("addr", addr),
                                         ("fresh", fresh))

        act_lat = stages["gate activation"]
        i_gate, u_gate, f_gate, o_gate = (
            unit(f"act_{g}", units.gates[g], valid, x=z[g]).o.p.y for g in range(4))

        # The cell memory is read so that c_prev meets f at the cell products.
        m.submodules.cells = cells = Memory(shape=unsigned(aw), depth=self.depth(config),
                                            init=[])
        c_read = cells.read_port(domain="sync")
        c_write = cells.write_port()
        m.d.comb += c_read.addr.eq(delay(addr, act_lat - 1, "addr_cell_read"))
        valid, addr, fresh = advance(act_lat, "a", ("valid", valid), ("addr", addr),
                                     ("fresh", fresh))
        c_prev = Mux(fresh, 0, c_read.data)

        fc = unit("mul_fc", units.mul_fc, valid, a=f_gate, b=c_prev)
        iu = unit("mul_iu", units.mul_iu, valid, a=i_gate, b=u_gate)
        valid, addr, o_gate = advance(stages["cell products"], "m", ("valid", valid),
                                      ("addr", addr), ("o", o_gate))
        cell = unit("add_c", units.add_c, valid, a=fc.o.p.product, b=iu.o.p.product)
        valid, addr, o_gate = advance(stages["cell add"], "c", ("valid", valid),
                                      ("addr", addr), ("o", o_gate))
        m.d.comb += [c_write.en.eq(valid), c_write.addr.eq(addr), c_write.data.eq(cell.o.p.sum)]

        t = unit("act_c", units.act_c, valid, x=cell.o.p.sum)
        valid, o_gate = advance(stages["cell activation"], "t", ("valid", valid),
                                ("o", o_gate))
        h = unit("mul_h", units.mul_h, valid, a=o_gate, b=t.o.p.y)
        m.d.comb += [self.h_valid.eq(delay(valid, stages["hidden product"], "valid_h")),
                     self.h.eq(h.o.p.product)]
        return m

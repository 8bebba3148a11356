"""Test top for the Verilator bench of the FARNN MVM unit (:mod:`nnrtl.sim.tb.farnn.mvm`).

:class:`MVMUnitTop` puts AXI4-Stream ports on a :class:`~nnrtl.hw.farnn.MVMUnit` so that
cocotbext-axi drives and takes its streams: ``s_axis_w`` (the weight port, lane ``c`` in
bits ``32c .. 32c + 31``), ``s_axis_x`` (vector elements, ``tlast`` on each vector's last),
``m_axis`` (result beats, lanes as on ``s_axis_w``). The adapters pass straight through
(no register slice), so the cycles at the ports are the unit's. The run configuration
and the counters stay plain ports of the top, named as the unit's.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, flipped

from nnrtl.hw.bus import AXI4StreamSignature, AXI4StreamToStream, StreamToAXI4Stream
from nnrtl.hw.farnn.mvm import MVMUnit

__all__ = ["MVMUnitTop", "CONFIG_PORTS", "STATUS_PORTS"]

#: The unit's run configuration, inputs of the top.
CONFIG_PORTS = ("n_in", "rounds", "batch", "split_last")
#: The unit's status and counters, outputs of the top.
STATUS_PORTS = ("busy", "load_error", "vector_error", "mac_cycles", "load_cycles",
                "stall_cycles")


class MVMUnitTop(wiring.Component):
    """An :class:`~nnrtl.hw.farnn.MVMUnit` with AXI4-Stream ports.

    Parameters
    ----------
    **unit : keyword arguments
        Of :class:`~nnrtl.hw.farnn.MVMUnit` (its ``fmt`` first, positional).

    Attributes
    ----------
    s_axis_w, s_axis_x : In(AXI4StreamSignature)
    m_axis : Out(AXI4StreamSignature)
    n_in, rounds, batch, split_last : In
    busy, load_error, vector_error, mac_cycles, load_cycles, stall_cycles : Out
    unit : MVMUnit
    """

    def __init__(self, fmt, **unit):
        self._unit = MVMUnit(fmt, **unit)
        lanes = self._unit.chains * fmt.width
        members = {
            "s_axis_w": In(AXI4StreamSignature(lanes)),
            "s_axis_x": In(AXI4StreamSignature(fmt.width)),
            "m_axis": Out(AXI4StreamSignature(lanes)),
        }
        for name in CONFIG_PORTS + STATUS_PORTS:
            members[name] = self._unit.signature.members[name]
        super().__init__(members)

    @property
    def unit(self):
        return self._unit

    def elaborate(self, platform):
        m = Module()
        unit = m.submodules.unit = self._unit
        lanes = unit.chains * unit.fmt.width
        m.submodules.w = w = AXI4StreamToStream(lanes)
        m.submodules.x = x = AXI4StreamToStream(unit.fmt.width)
        m.submodules.o = o = StreamToAXI4Stream(lanes)
        wiring.connect(m, flipped(self.s_axis_w), w.s_axis)
        wiring.connect(m, flipped(self.s_axis_x), x.s_axis)
        wiring.connect(m, o.m_axis, flipped(self.m_axis))
        for source, sink in ((w.o, unit.w), (x.o, unit.x), (unit.o, o.i)):
            m.d.comb += [
                sink.valid.eq(source.valid),
                source.ready.eq(sink.ready),
                sink.payload.data.eq(source.payload.data),
                sink.payload.last.eq(source.payload.last),
            ]
        for name in CONFIG_PORTS:
            m.d.comb += getattr(unit, name).eq(getattr(self, name))
        for name in STATUS_PORTS:
            m.d.comb += getattr(self, name).eq(getattr(unit, name))
        return m

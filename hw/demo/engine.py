"""The demo engine: a MAC array between AXI4-Stream edges, behind an AXI4-Lite register
file. The smallest complete example of an nnrtl engine."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..bus import (AXI4LiteSignature, AXI4StreamSignature, AXI4StreamToStream, PerfCounter,
                   RegisterFile, StreamToAXI4Stream)
from .config import DemoConfig
from .mac_array import MacArray

__all__ = ["DemoEngine"]


class DemoEngine(wiring.Component):
    """MAC array engine with AXI4-Lite control and AXI4-Stream data.

    Parameters
    ----------
    config : DemoConfig

    Attributes
    ----------
    s_axil : In(AXI4LiteSignature)
        Registers of :attr:`DemoConfig.registers`.
    s_axis : In(AXI4StreamSignature(config.in_width))
        Operands: lane ``k`` takes ``a`` from bits ``[2kw, 2kw+w)`` and ``b`` from
        ``[2kw+w, 2kw+2w)`` (``w = operand_width``); ``tlast`` closes a frame.
    m_axis : Out(AXI4StreamSignature(config.out_width))
        One beat per frame: lane ``k``'s sum in bits ``[k*acc_width, (k+1)*acc_width)``,
        ``tlast`` set.
    """

    def __init__(self, config):
        if not isinstance(config, DemoConfig):
            raise TypeError(f"config must be a DemoConfig, not {config!r}")
        self._config = config
        super().__init__({
            "s_axil": In(AXI4LiteSignature(config.registers.addr_width)),
            "s_axis": In(AXI4StreamSignature(config.in_width)),
            "m_axis": Out(AXI4StreamSignature(config.out_width)),
        })

    @property
    def config(self):
        return self._config

    @property
    def registers(self):
        return self._config.registers

    def elaborate(self, platform):
        m = Module()
        config = self._config
        m.submodules.regfile = regfile = RegisterFile(config.registers)
        m.submodules.rx = rx = AXI4StreamToStream(config.in_width)
        m.submodules.tx = tx = StreamToAXI4Stream(config.out_width)
        m.submodules.array = array = MacArray(config)
        connect(m, flipped(self.s_axil), regfile.s_axil)
        connect(m, flipped(self.s_axis), rx.s_axis)
        connect(m, tx.m_axis, flipped(self.m_axis))

        w = config.operand_width
        m.d.comb += [
            array.i.valid.eq(rx.o.valid),
            rx.o.ready.eq(array.i.ready),
            array.i.p.last.eq(rx.o.p.last),
            tx.i.valid.eq(array.o.valid),
            array.o.ready.eq(tx.i.ready),
            tx.i.p.data.eq(array.o.p.as_value()),
            tx.i.p.last.eq(1),
        ]
        words = rx.o.p.data
        m.d.comb += [
            array.i.p.a.as_value().eq(Cat(*(words[(2 * k) * w:(2 * k + 1) * w]
                                            for k in range(config.lanes)))),
            array.i.p.b.as_value().eq(Cat(*(words[(2 * k + 1) * w:(2 * k + 2) * w]
                                            for k in range(config.lanes)))),
        ]

        regs = regfile.regs
        m.d.comb += [
            regs.status.eq(array.busy),
            regs.lanes.eq(config.lanes),
            regs.operand_width.eq(config.operand_width),
            regs.acc_width.eq(config.acc_width),
        ]
        clear_bit = config.registers["control"].fields[0]      # CONTROL.CLEAR
        clear = regs.control[clear_bit.offset]
        sent = Signal()
        m.d.comb += sent.eq(array.o.valid & array.o.ready)
        counters = {
            "cycles": (1, None),
            "busy_cycles": (array.busy, None),
            "stall_cycles": (array.stall, None),
            "useful_macs": (1, array.macs),
            "frames": (sent, None),
        }
        for name, (enable, increment) in counters.items():
            counter = PerfCounter(64, increment_width=0 if increment is None else len(increment))
            m.submodules[f"{name}_counter"] = counter
            m.d.comb += [
                counter.enable.eq(enable),
                counter.clear.eq(clear),
                getattr(regs, name).eq(counter.count),
            ]
            if increment is not None:
                m.d.comb += counter.increment.eq(increment)
        return m

"""Test tops for the Verilator benches of ``nnrtl.hw.bus`` (``bus_regs``, ``bus_stream``).

:class:`RegisterTestTop` wraps a :class:`~nnrtl.hw.bus.regs.RegisterFile` so that a bus
master alone can check it: ``RW`` registers are looped back to ``RO`` "echo" registers,
``cycles`` is a free-running 64-bit counter and ``starts`` counts the ``control.start``
pulses. :class:`StreamLoopbackTop` puts the two AXI4-Stream adapters back to back,
:class:`StreamRegisterTop` is one register stage between two ``amaranth.lib.stream`` ports.
The benches rebuild the register map from ``RegisterMap.as_dict()`` passed as a
parameter, so the map is written down once, in :func:`register_test_map`.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from nnrtl.hw.bus import (AXI4LiteSignature, AXI4StreamSignature, AXI4StreamToStream,
                          Access, Field, PerfCounter, Register, RegisterFile, RegisterMap,
                          StreamToAXI4Stream)


__all__ = ["register_test_map", "RegisterTestTop", "StreamLoopbackTop", "StreamRegisterTop"]


def register_test_map():
    """The register map of :class:`RegisterTestTop` (one of each kind, with echoes)."""
    return RegisterMap([
        Register("control", Access.PULSE, doc="Start and clear pulses.",
                 fields=[Field("start", 0), Field("clear", 1)]),
        Register("scratch", Access.RW, reset=0x1234_5678, doc="Looped back to scratch_echo."),
        Register("scratch_echo", Access.RO, doc="Value of scratch."),
        Register("starts", Access.RO, doc="Number of control.start pulses since clear."),
        Register("wide", Access.RW, width=64, reset=0x0bad_cafe_0000_0001,
                 doc="Looped back to wide_echo."),
        Register("wide_echo", Access.RO, width=64, doc="Value of wide."),
        Register("cycles", Access.RO, width=64, doc="Free-running cycle counter."),
        Register("mode", Access.RW, doc="Looped back to mode_echo.",
                 fields=[Field("kind", 0, 4), Field("enable", 8)]),
        Register("mode_echo", Access.RO, doc="Value of mode."),
    ])


class RegisterTestTop(wiring.Component):
    """A :class:`RegisterFile` on :func:`register_test_map` with self-checking loop-backs.

    Parameters
    ----------
    cycles_init : int
        Value of the ``cycles`` counter after reset (and after ``control.clear``); set it
        just below ``2**32`` to make the counter's high word change during a test.

    Attributes
    ----------
    s_axil : In(AXI4LiteSignature(regmap.addr_width))
    regmap : RegisterMap
    """

    def __init__(self, *, cycles_init=0):
        self._regmap = register_test_map()
        self._cycles_init = cycles_init
        super().__init__({"s_axil": In(AXI4LiteSignature(self._regmap.addr_width))})

    @property
    def regmap(self):
        return self._regmap

    def elaborate(self, platform):
        m = Module()
        m.submodules.regfile = regfile = RegisterFile(self._regmap)
        connect(m, flipped(self.s_axil), regfile.s_axil)
        regs = regfile.regs
        for register in self._regmap:
            if register.access is Access.RW and f"{register.name}_echo" in self._regmap:
                m.d.comb += getattr(regs, f"{register.name}_echo").eq(getattr(regs, register.name))
        clear = regs.control[1]

        cycles = Signal(64, init=self._cycles_init)
        with m.If(clear):
            m.d.sync += cycles.eq(self._cycles_init)
        with m.Else():
            m.d.sync += cycles.eq(cycles + 1)
        m.d.comb += regs.cycles.eq(cycles)

        m.submodules.starts = starts = PerfCounter(32)
        m.d.comb += [
            starts.enable.eq(regs.control[0]),
            starts.clear.eq(clear),
            regs.starts.eq(starts.count),
        ]
        return m


class StreamLoopbackTop(wiring.Component):
    """``AXI4StreamToStream`` followed by ``StreamToAXI4Stream``, plus a beat counter.

    Parameters
    ----------
    data_width, user_width, registered
        As for the adapters.

    Attributes
    ----------
    s_axis : In(AXI4StreamSignature(data_width, user_width=user_width))
    m_axis : Out(AXI4StreamSignature(data_width, user_width=user_width))
    beats : Out(32)
        Beats accepted on ``m_axis`` since reset.
    frames : Out(32)
        Beats with ``tlast`` accepted on ``m_axis`` since reset.
    """

    def __init__(self, data_width, *, user_width=0, registered=False):
        self._data_width = data_width
        self._user_width = user_width
        self._registered = registered
        signature = AXI4StreamSignature(data_width, user_width=user_width)
        super().__init__({
            "s_axis": In(signature),
            "m_axis": Out(signature),
            "beats": Out(32),
            "frames": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.rx = rx = AXI4StreamToStream(self._data_width, user_width=self._user_width,
                                                  registered=self._registered)
        m.submodules.tx = tx = StreamToAXI4Stream(self._data_width, user_width=self._user_width,
                                                  registered=self._registered)
        connect(m, flipped(self.s_axis), rx.s_axis)
        connect(m, rx.o, tx.i)
        connect(m, tx.m_axis, flipped(self.m_axis))
        m.submodules.beats = beats = PerfCounter(32)
        m.submodules.frames = frames = PerfCounter(32)
        handshake = self.m_axis.tvalid & self.m_axis.tready
        m.d.comb += [
            beats.enable.eq(handshake),
            frames.enable.eq(handshake & self.m_axis.tlast),
            self.beats.eq(beats.count),
            self.frames.eq(frames.count),
        ]
        return m


class StreamRegisterTop(wiring.Component):
    """One register stage between an ``amaranth.lib.stream`` input ``i`` and output
    ``o`` (both ``width`` bits), for the bench of the shared stream drivers
    (:mod:`nnrtl.sim.tb.stream_drivers`).

    Parameters
    ----------
    width : int
        Payload bits.
    broken : bool
        Break the handshake rule on purpose: ``o.valid`` stays high one cycle only,
        whether the word was taken or not (the bench must report it).

    Latency: a word taken at clock edge ``e`` is offered on ``o`` from edge ``e``;
    throughput one word per cycle.
    """

    def __init__(self, width, *, broken=False):
        self.broken = broken
        super().__init__({"i": In(stream.Signature(width)),
                          "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        full = Signal()
        m.d.comb += [self.o.valid.eq(full), self.i.ready.eq(~full | self.o.ready)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.payload.eq(self.i.payload), full.eq(1)]
        with m.Elif(self.o.ready | self.broken):
            m.d.sync += full.eq(0)
        return m

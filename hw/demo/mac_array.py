"""A row of multiply-accumulate lanes fed by one stream."""

from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import DemoConfig

__all__ = ["MacArray"]


class MacArray(wiring.Component):
    """``lanes`` multiply-accumulate lanes working in lock step.

    Parameters
    ----------
    config : DemoConfig

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"a", "b": ArrayLayout(signed(w), lanes), "last": 1})))
        One pair of operand vectors per beat; ``last`` closes a frame.
    o : Out(stream.Signature(ArrayLayout(signed(acc_width), lanes)))
        The sums of a frame, one beat per frame.
    busy : Out(1)
        A beat is accepted, a frame is in flight (some beats accepted, not its last) or a
        result waits.
    stall : Out(1)
        A result waits for ``o.ready``.
    macs : Out(range(lanes + 1))
        Multiply-accumulates done this cycle.

    Notes
    -----
    Throughput one beat per cycle; latency :attr:`DemoConfig.latency` (1) cycle from the
    last beat to the result. While a result waits for ``o.ready`` the array stalls.
    Accumulators wrap modulo ``2**acc_width``.
    """

    def __init__(self, config):
        if not isinstance(config, DemoConfig):
            raise TypeError(f"config must be a DemoConfig, not {config!r}")
        self._config = config
        operands = data.ArrayLayout(signed(config.operand_width), config.lanes)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"a": operands, "b": operands,
                                                        "last": 1}))),
            "o": Out(stream.Signature(data.ArrayLayout(signed(config.acc_width),
                                                       config.lanes))),
            "busy": Out(1),
            "stall": Out(1),
            "macs": Out(range(config.lanes + 1)),
        })

    @property
    def config(self):
        return self._config

    def elaborate(self, platform):
        m = Module()
        config = self._config
        in_frame = Signal()
        accept = Signal()
        m.d.comb += [
            self.i.ready.eq(~self.o.valid | self.o.ready),
            accept.eq(self.i.valid & self.i.ready),
            self.busy.eq(accept | in_frame | self.o.valid),
            self.stall.eq(self.o.valid & ~self.o.ready),
            self.macs.eq(accept * config.lanes),
        ]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(accept):
            m.d.sync += in_frame.eq(~self.i.p.last)
        # One statement per lane on per-lane signals, and one that gathers them: assigning
        # to slices of the wide output port lane by lane makes elaboration quadratic in
        # the number of lanes.
        results = []
        for lane in range(config.lanes):
            acc = Signal(signed(config.acc_width), name=f"acc{lane}")
            result = Signal(signed(config.acc_width), name=f"result{lane}")
            total = acc + self.i.p.a[lane] * self.i.p.b[lane]
            with m.If(accept):
                with m.If(self.i.p.last):
                    m.d.sync += [acc.eq(0), result.eq(total)]
                with m.Else():
                    m.d.sync += acc.eq(total)
            results.append(result)
        m.d.comb += self.o.p.as_value().eq(Cat(*results))
        with m.If(accept & self.i.p.last):
            m.d.sync += self.o.valid.eq(1)
        return m

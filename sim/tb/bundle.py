"""Several stream units side by side in one component, so that one Verilator build and
one simulation exercise them all (each cocotb process costs seconds to start), and the
cocotb side of the arithmetic benches that drive them.

:class:`StreamUnitBundle` exposes each unit's ``i`` / ``o`` as ``i_<name>`` / ``o_<name>``.
In a cocotb bench, a :class:`StreamLane` per unit holds the shared stream drivers
(:mod:`nnrtl.sim.tb.streams`) of its two ports, and :func:`run_lanes` runs all lanes under
one entry of the bench's ``patterns`` (:func:`pattern_kinds`: a pause pattern for sources
and sinks alike, or one for the sources and one for the sinks), bounded by the cycle
budget, and records the handshake cycles from which the benches measure latency and
throughput.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import connect, flipped
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout

from nnrtl.sim.patterns import PATTERNS, cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS
from nnrtl.sim.tb.streams import cycle_now

__all__ = ["StreamUnitBundle", "StreamLane", "pattern_kinds", "run_lanes"]


class StreamUnitBundle(wiring.Component):
    """Units with stream ports ``i`` / ``o``, each exposed as ``i_<name>`` / ``o_<name>``.

    Parameters
    ----------
    specs : dict
        ``{name: spec}``, JSON-able unit descriptions; ``name`` must be a Python
        identifier.
    build : callable
        ``build(spec)`` returns the unit.

    Attributes
    ----------
    i_<name> : In(the unit's ``i`` signature)
    o_<name> : Out(the unit's ``o`` signature)
        In Verilog: ``i_<name>__valid``, ``i_<name>__ready``, ``i_<name>__payload``, ...
    """

    def __init__(self, specs, build):
        self._specs = dict(specs)
        members = {}
        for name in self._specs:
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"unit name must be an identifier, not {name!r}")
        self._units = {name: build(spec) for name, spec in self._specs.items()}
        for name, unit in self._units.items():
            members[f"i_{name}"] = unit.signature.members["i"]
            members[f"o_{name}"] = unit.signature.members["o"]
        super().__init__(members)

    @property
    def specs(self):
        return dict(self._specs)

    def elaborate(self, platform):
        m = Module()
        for name, unit in self._units.items():
            m.submodules[name] = unit
            connect(m, flipped(getattr(self, f"i_{name}")), unit.i)
            connect(m, unit.o, flipped(getattr(self, f"o_{name}")))
        return m


def pattern_kinds(entry):
    """The source and sink patterns of a ``patterns`` entry of an arithmetic bench.

    Parameters
    ----------
    entry : str
        A name of :data:`nnrtl.sim.patterns.PATTERNS`, for the sources and the sinks
        alike, or ``"<source pattern>/<sink pattern>"`` (``"random/none"``: gaps in the
        input, no backpressure).

    Returns
    -------
    tuple of str
        ``(source pattern, sink pattern)``.

    Raises
    ------
    ValueError
        If a name is not a pattern.
    """
    kinds = tuple(entry.split("/")) if "/" in entry else (entry, entry)
    if len(kinds) != 2 or any(kind not in PATTERNS for kind in kinds):
        raise ValueError(f"a pattern is one of {', '.join(PATTERNS)} or two of them joined "
                         f"by '/', not {entry!r}")
    return kinds


class StreamLane:
    """One unit of a :class:`StreamUnitBundle` (or a unit on its own) in a cocotb bench, on
    the shared stream drivers (:class:`~nnrtl.sim.tb.streams.Streams`): a recording source
    on its input port, a sink on its output port.

    Parameters
    ----------
    streams : Streams
        The bench's drivers.
    name : str
        The unit's name, for messages.
    ports : tuple of str, optional
        The input and output ports (default ``i_<name>``, ``o_<name>``).

    Attributes
    ----------
    source : StreamSource
        On the input port, recording the cycle of every word taken.
    sink : StreamSink
        On the output port.
    words : list of int
        The input words of the present run (:meth:`send`).
    count : int
        The results the present run expects.
    """

    def __init__(self, streams, name, *, ports=None):
        i_port, o_port = ports or (f"i_{name}", f"o_{name}")
        self.name = name
        self.source = streams.source(i_port, record=True)
        self.sink = streams.sink(o_port)
        self.words, self.count = [], 0
        self._accepted_from = self._taken_from = 0

    def send(self, words, count):
        """Start a run: queue ``words`` (ints) on the input, expect ``count`` results."""
        self.words, self.count = [int(word) for word in words], count
        self._accepted_from, self._taken_from = len(self.source.cycles), len(self.sink.words)
        self.source.send_words(self.words)

    async def finish(self):
        """Wait for the run's results and until its last input word was taken."""
        await self.sink.receive(self.count - len(self.got))
        await self.source.wait()

    @property
    def got(self):
        """The results of the run received so far (ints)."""
        return self.sink.words[self._taken_from:]

    @property
    def taken(self):
        """The cycle each result of :attr:`got` was taken in."""
        return self.sink.cycles[self._taken_from:]

    @property
    def accepted(self):
        """The cycle each input word of the run was taken in, so far."""
        return self.source.cycles[self._accepted_from:]

    def progress(self):
        """How far the run got, for a message."""
        return (f"{self.name}: {len(self.accepted)} of {len(self.words)} inputs taken, "
                f"{len(self.got)} of {self.count} results")


async def run_lanes(streams, lanes, entry, rng, *, model_cycles, output_beats, settle):
    """One run of every lane (each :meth:`StreamLane.send` already called) under the
    ``patterns`` entry ``entry`` (:func:`pattern_kinds`).

    Every lane's source is paused by the entry's source pattern, its sink by the sink
    pattern; the wait for every result and every input taken is bounded by
    :func:`~nnrtl.sim.patterns.cycle_budget` of ``model_cycles`` (the slowest lane without
    pauses) and ``output_beats`` (the most results of a lane). Then ``settle`` cycles pass
    and the sinks must have taken nothing more.

    Parameters
    ----------
    streams : Streams
        The drivers the lanes were made from.
    lanes : list of StreamLane
        The lanes.
    entry : str
        The pattern entry.
    rng : random.Random
        Seeds the pause generators.
    model_cycles, output_beats, settle : int
        As above.

    Returns
    -------
    dict
        ``cycles`` (from the call to the last result taken, or to the end of the wait when
        there were none) and ``budget``.

    Raises
    ------
    AssertionError
        A budget overrun (naming each lane's progress), a result beyond the expected
        ones, or a broken handshake rule
        (:class:`~nnrtl.sim.tb.streams.StreamProtocolError`).
    """
    source_kind, sink_kind = pattern_kinds(entry)
    streams.pause(source_kind, rng, ports=[lane.source.name for lane in lanes])
    streams.pause(sink_kind, rng, ports=[lane.sink.name for lane in lanes])
    budget = cycle_budget(model_cycles, output_beats=output_beats,
                          patterns=[source_kind, sink_kind])
    start = cycle_now()

    async def traffic():
        for lane in lanes:
            await lane.finish()

    try:
        await with_timeout(traffic(), budget * CLOCK_PERIOD_NS, "ns")
    except SimTimeoutError:
        raise AssertionError(f"pattern {entry}: " + "; ".join(lane.progress() for lane in lanes)
                             + f" in the budget of {budget} cycles") from None
    ends = [lane.taken[-1] for lane in lanes if lane.taken]
    cycles = (max(ends) if ends else cycle_now()) - start
    await ClockCycles(streams.dut.clk, settle)
    for lane in lanes:
        extra = lane.sink.extra()
        assert not extra, f"pattern {entry}: {lane.name}: {len(extra)} results beyond the " \
            "expected ones"
    streams.check()
    return {"cycles": cycles, "budget": budget}

"""The stream drivers of every cocotb bench: cocotbext-axi sources and sinks on
``amaranth.lib.stream`` ports, paused by the project's patterns, with the handshake rules
checked and the handshake cycles recorded.

An Amaranth stream port ``o`` appears in Verilog as ``o__valid``, ``o__ready`` and
``o__payload``. :class:`StreamBus` names those signals for cocotbext-axi (``tvalid``,
``tready``, ``tdata``; no ``tlast``, ``tkeep``), so an :class:`~cocotbext.axi.AxiStreamSource`
or :class:`~cocotbext.axi.AxiStreamSink` drives it one payload word per beat. A bench opens
one :class:`Streams` and takes its drivers from it::

    streams = Streams(dut)
    load, out = streams.source("load"), streams.sink("o")
    for kind in PATTERNS:
        streams.pause(kind, rng)              # every driver: pauses of this pattern
        load.send_words(words)
        got = await out.receive(len(want))    # list of int payloads
        streams.check()                       # the handshake rules held

Every port has one driver for the whole test (a cocotbext-axi driver keeps driving its
bus until the simulation ends, so two on one port would fight); :meth:`Streams.pause`
changes their patterns between runs.

Timing (what the cycle models of the benches assume): a word queued by
:meth:`StreamSource.send_words` in the cycle of clock edge ``e`` is offered from edge
``e + 1`` on and can be taken at edge ``e + 2`` at the earliest; the words of one call
follow back to back, one per cycle, while the pattern does not pause. A sink's ``ready``
follows its pattern alone (never the number of words the bench still expects), so a
word the design sends beyond the expected ones is taken and reported by
:meth:`StreamSink.extra`.

The rules checked (:meth:`Streams.check`, raising :class:`StreamProtocolError`): on
every output port, once ``valid`` is high it stays high with the same payload until
``ready`` takes the word.
"""

import random

import cocotb
from cocotb.simtime import convert, get_sim_time
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from nnrtl.sim.patterns import pause_pattern
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS

__all__ = ["StreamBus", "StreamSource", "StreamSink", "Streams", "StreamProtocolError",
           "Forward", "cycle_now"]


class StreamProtocolError(AssertionError):
    """An output port broke the valid/ready rule: ``valid`` fell, or the payload
    changed, before the word was taken."""


def cycle_now():
    """Clock cycles since the simulation started."""
    return int(get_sim_time("ns") // CLOCK_PERIOD_NS)


class StreamBus(AxiStreamBus):
    """The Verilog signals of one ``amaranth.lib.stream`` port, by cocotbext-axi's names.

    Parameters
    ----------
    dut : cocotb handle
        The top level.
    port : str
        The port's name (``"o"``, ``"s0_load"``): signals ``<port>__payload``,
        ``<port>__valid``, ``<port>__ready``.
    """

    _signals = {"tdata": "payload"}
    _optional_signals = {"tvalid": "valid", "tready": "ready"}

    def __init__(self, dut, port):
        super().__init__(dut, port, bus_separator="__")


class StreamSource(AxiStreamSource):
    """Offers payload words on an input port of the design (cocotbext-axi's source, one
    word per beat).

    Parameters
    ----------
    dut : cocotb handle
        The top level, with clock ``clk`` and active-high reset ``rst``.
    port : str
        The input port's name.

    Attributes
    ----------
    name : str
        The port's name, for messages.
    cycles : list of int
        With :meth:`record` started: the cycle (:func:`cycle_now` at the clock edge) of
        every word the design took, in order.
    """

    def __init__(self, dut, port):
        super().__init__(StreamBus(dut, port), dut.clk, dut.rst, byte_lanes=1)
        self.name = port
        self.log.setLevel("WARNING")
        self.cycles = []
        self._recording = None

    def record(self):
        """Start recording the cycle of every word taken into :attr:`cycles` (a monitor
        at every clock edge: for benches that check latencies)."""
        if self._recording is None:
            self._recording = cocotb.start_soon(self._record())

    async def _record(self):
        edge, valid, ready = RisingEdge(self.clock), self.bus.tvalid, self.bus.tready
        while True:
            await edge
            if valid.value and ready.value and not self.reset.value:
                self.cycles.append(cycle_now())

    def send_words(self, words):
        """Queue ``words`` (ints) to be offered back to back, in order; returns at once
        (:meth:`wait` waits until the last one was taken)."""
        words = [int(word) for word in words]
        if words:
            self.send_nowait(AxiStreamFrame(words))


class StreamSink(AxiStreamSink):
    """Takes the words of an output port of the design (cocotbext-axi's sink) and checks
    that a word waiting for ``ready`` holds still.

    Parameters
    ----------
    dut : cocotb handle
        The top level, with clock ``clk`` and active-high reset ``rst``.
    port : str
        The output port's name.

    Attributes
    ----------
    name : str
        The port's name, for messages.
    words : list of int
        Every word received by :meth:`receive` and :meth:`received`, in order.
    cycles : list of int
        The cycle (:func:`cycle_now` at the clock edge) each of :attr:`words` was taken
        in.
    violation : str or None
        The first broken handshake rule, if any.
    """

    def __init__(self, dut, port):
        super().__init__(StreamBus(dut, port), dut.clk, dut.rst, byte_lanes=1)
        self.name = port
        self.log.setLevel("WARNING")
        self.words, self.cycles = [], []
        self.violation = None
        self._watching = None

    def watch(self):
        """Start checking the valid/ready rule at every clock edge (:class:`Streams`
        does this for its sinks)."""
        if self._watching is None:
            self._watching = cocotb.start_soon(self._watch())

    async def _watch(self):
        edge, held = RisingEdge(self.clock), None
        valid, ready, payload = self.bus.tvalid, self.bus.tready, self.bus.tdata
        while True:
            await edge
            if self.reset is not None and self.reset.value:
                held = None
                continue
            is_valid = bool(valid.value)
            if held is not None and self.violation is None:
                if not is_valid:
                    self.violation = (f"{self.name}: valid fell before the word {held:#x} "
                                      f"was taken (cycle {cycle_now()})")
                elif int(payload.value) != held:
                    self.violation = (f"{self.name}: the payload changed from {held:#x} to "
                                      f"{int(payload.value):#x} before it was taken "
                                      f"(cycle {cycle_now()})")
            held = int(payload.value) if is_valid and not ready.value else None

    def _take(self, frame):
        self.words.append(int(frame.tdata[0]))
        self.cycles.append(_steps_to_cycle(frame.sim_time_start))

    async def receive(self, count):
        """The next ``count`` words (ints), in order, as they are taken (each word is
        appended to :attr:`words` when it arrives, so a bench that gives up waiting can
        say how many came)."""
        first = len(self.words)
        while len(self.words) - first < count:
            self._take(await self.recv(compact=False))
        return self.words[first:]

    def received(self):
        """The words taken and not yet received, without waiting (ints, in order)."""
        first = len(self.words)
        while not self.empty():
            self._take(self.recv_nowait(compact=False))
        return self.words[first:]

    def extra(self):
        """The words taken beyond what the bench received (call after the run: empties
        the queue)."""
        return self.received()


def _steps_to_cycle(steps):
    return int(convert(steps, "step", to="ns", round_mode="floor") // CLOCK_PERIOD_NS)


class Streams:
    """The stream drivers of one bench, one per port for the whole test.

    Parameters
    ----------
    dut : cocotb handle
        The top level, with clock ``clk`` and active-high reset ``rst``.
    """

    def __init__(self, dut):
        self.dut = dut
        self._sources, self._sinks = {}, {}

    def source(self, port, *, record=False):
        """The :class:`StreamSource` of input port ``port`` (made on first use); with
        ``record``, its :meth:`~StreamSource.record` is started."""
        if port not in self._sources:
            self._sources[port] = StreamSource(self.dut, port)
        if record:
            self._sources[port].record()
        return self._sources[port]

    def sink(self, port):
        """The :class:`StreamSink` of output port ``port`` (made on first use; its rule
        check starts at once)."""
        if port not in self._sinks:
            self._sinks[port] = sink = StreamSink(self.dut, port)
            sink.watch()
        return self._sinks[port]

    @property
    def sources(self):
        return dict(self._sources)

    @property
    def sinks(self):
        return dict(self._sinks)

    def pause(self, kind, rng, *, ports=None, sources=True, sinks=True):
        """Pause the drivers by pattern ``kind`` (:data:`nnrtl.sim.patterns.PATTERNS`),
        each with its own generator seeded from ``rng``.

        Parameters
        ----------
        kind : str
            The pattern.
        rng : random.Random
            Seeds the generators, in the order the drivers were made.
        ports : iterable of str, optional
            Only these ports (default: every driver made so far).
        sources, sinks : bool
            Whether the sources, the sinks, are paused by ``kind`` (the others are set
            to ``"none"``).

        Raises
        ------
        ValueError
            If ``kind`` is not a pattern.
        """
        chosen = None if ports is None else set(ports)
        for group, paced in ((self._sources, sources), (self._sinks, sinks)):
            for port, driver in group.items():
                if chosen is not None and port not in chosen:
                    continue
                driver.set_pause_generator(pause_pattern(kind if paced else "none",
                                                         random.Random(rng.random())))

    def check(self):
        """Raise :class:`StreamProtocolError` naming the first broken rule of any sink."""
        for sink in self._sinks.values():
            if sink.violation is not None:
                raise StreamProtocolError(sink.violation)

    def idle(self):
        """Every source has offered its words and had the last one taken."""
        return all(source.idle() for source in self._sources.values())


class Forward:
    """Hands every word an output stream port gives to :attr:`callback` one clock edge
    early: in the read-only phase of the cycle whose closing edge takes it (``valid`` and
    ``ready`` high), while the port's :class:`StreamSink` takes and
    records it at that edge.

    A word a bench queues on a :class:`StreamSource` in the
    timestep of edge ``e`` is offered from ``e + 1``; queued by the callback of a word
    taken at edge ``c``, it is offered from ``c`` and can be taken at ``c + 1``: a bench
    standing in for a memory writes a result and offers what reads it in the next cycle,
    the read-after-write timing a cycle model may count.

    Parameters
    ----------
    dut : cocotb handle
        The top level, with clock ``clk`` and reset ``rst``.
    port : str
        The output port's name.

    Attributes
    ----------
    callback : callable or None
        Called with each word (int); ``None``: words pass unseen.
    """

    def __init__(self, dut, port):
        self.dut, self.callback = dut, None
        self._signals = [getattr(dut, f"{port}__{name}") for name in ("valid", "ready",
                                                                        "payload")]
        cocotb.start_soon(self._watch())

    async def _watch(self):
        edge, settled, rst = RisingEdge(self.dut.clk), ReadOnly(), self.dut.rst
        valid, ready, payload = self._signals
        while True:
            await edge
            await settled
            if self.callback is not None and valid.value and ready.value and \
                    not rst.value:
                self.callback(int(payload.value))

"""The generic cocotb bench of an engine: clock and reset, registers by name
(:class:`~nnrtl.sim.tb.registers.RegisterBus`, as ``bench.regs``), streams by port prefix,
budgeted waits, an in-order checker and the end-of-run checks.

An engine bench (:mod:`nnrtl.sim.tb.demo.engine`, :mod:`nnrtl.sim.tb.sbe.engine`) opens one
:class:`EngineBench` and drives the engine through it::

    async with EngineBench(dut, CONFIG.registers, sources=["s_axis"], sinks=["m_axis"],
                           params=PARAMS) as bench:
        await bench.regs.write_fields("control", clear=1)
        bench.begin("all frames", model_cycles, output_beats=frames)
        await bench.source("s_axis").send(...)
        frame = await bench.recv("m_axis", "frame 0")
        bench.check("m_axis", expected_words, got_words, frame=0)
        await bench.finish()
        report({**bench.result(), ...})

Two kinds of failure
--------------------
*A wrong value* on an output stream is counted, not asserted: :meth:`EngineBench.check`
records the first mismatch (stream, word index, expected, got) and the number of
mismatching words, and :meth:`EngineBench.result` reports ``bit_exact: false`` with
them, so ``nnrtl sim`` prints its JSON line and exits 1.

*A broken protocol* raises :class:`~nnrtl.sim.tb.registers.BenchFailure`, which fails
the cocotb test: a wait past its cycle budget (:func:`nnrtl.sim.patterns.cycle_budget`;
the message names what was awaited, the cycle, the budget and a snapshot of every
read-only register read over AXI4-Lite), a source that did not drain, a word count that
differs from the model's, an output the model does not have, a register answering
SLVERR, or reading a wrong configuration, or not answering within its own budget (fault
injection for the tests: Notes of :class:`EngineBench`). The message is written to the
result file as ``failure`` before the test fails, and :func:`nnrtl.sim.runner.simulate` raises
:class:`~nnrtl.sim.runner.SimulationError` with it as its first line.
"""

import itertools
import os
import random

from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamSink,
                           AxiStreamSource)

from nnrtl.sim.patterns import pause_pattern, cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset
from nnrtl.sim.tb.registers import BenchFailure, RegisterBus

__all__ = ["EngineBench", "FAULT_ENV", "FAULTS"]

#: Environment variable selecting a fault to inject (a test hook, see the module docs).
FAULT_ENV = "NNRTL_TB_FAULT"
#: The faults it may name.
FAULTS = ("corrupt-golden", "stall-sink")
#: Cycles between two reads of a status register while waiting for a field.
POLL_CYCLES = 8
#: Cycles the end-of-bench check waits for stray output.
SETTLE_CYCLES = 32


def _fault():
    fault = os.environ.get(FAULT_ENV) or None
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"{FAULT_ENV} must be one of {', '.join(FAULTS)}, not {fault!r}")
    return fault


class EngineBench:
    """One engine under Verilator, driven over AXI4-Lite and AXI4-Stream.

    Parameters
    ----------
    dut : cocotb handle
        The top level: clock ``clk``, reset ``rst`` (active high), the register file's
        AXI4-Lite slave with prefix ``s_axil_`` (reached through :attr:`regs`), the
        streams named below.
    registers : nnrtl.hw.bus.RegisterMap or None
        The engine's register map; every offset, width and field comes from it. None
        for a unit without AXI4-Lite (its bench reads ports; :attr:`regs` is None and a
        subclass gives :meth:`snapshot`).
    sources, sinks : sequence of str
        Port prefixes of the AXI4-Stream inputs (``"s_axis"``) and outputs (``"m_axis"``).
    params : dict
        The bench parameters: ``seed``, and ``source_pauses`` / ``sink_pauses`` (names of
        :data:`nnrtl.sim.patterns.PATTERNS`, default ``"none"``).

    Notes
    -----
    **Fault injection (a test hook)**

    The environment variable ``NNRTL_TB_FAULT`` (inherited by the simulator process) makes
    the bench misbehave on purpose, so the tests can show that the failures above happen:

    ``corrupt-golden``
        flip the lowest bit of the first expected word the checker compares: the run must
        report ``bit_exact: false`` with that word as its first mismatch.
    ``stall-sink``
        every sink holds ``tready`` low for ever: the first wait for an output must fail by
        its budget.

    The result carries ``fault`` (the variable's value, or ``None``).
    """

    def __init__(self, dut, registers, *, sources=(), sinks=(), params):
        self.dut = dut
        self.registers = registers
        self.source_names = tuple(sources)
        self.sink_names = tuple(sinks)
        self.source_pauses = params.get("source_pauses", "none")
        self.sink_pauses = params.get("sink_pauses", "none")
        # the pause patterns' own stream, apart from the bench's data drawn from the seed
        self.rng = random.Random(f"nnrtl-pauses-{params['seed']}")
        self.fault = _fault()
        self._corrupted = False
        self._sources, self._sinks = {}, {}
        self._words = {name: 0 for name in self.sink_names}
        self._frames = {name: 0 for name in self.sink_names}
        self.mismatches = 0
        self.first_mismatch = None
        self._work = None
        self._deadline = None
        self.budget_use = 0.0
        self.regs = None

    # -- set-up ----------------------------------------------------------------------

    async def __aenter__(self):
        await start_clock_and_reset(self.dut)
        dut = self.dut
        if self.registers is not None:
            self.regs = RegisterBus(AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"),
                                                  dut.clk, dut.rst), self.registers)
        for name in self.source_names:
            source = AxiStreamSource(AxiStreamBus.from_prefix(dut, f"{name}_"), dut.clk,
                                     dut.rst)
            source.set_pause_generator(pause_pattern(self.source_pauses,
                                                     random.Random(self.rng.random())))
            self._sources[name] = source
        for name in self.sink_names:
            sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, f"{name}_"), dut.clk, dut.rst)
            pauses = pause_pattern(self.sink_pauses, random.Random(self.rng.random()))
            if self.fault == "stall-sink":
                pauses = itertools.repeat(1)
            sink.set_pause_generator(pauses)
            self._sinks[name] = sink
        return self

    async def __aexit__(self, kind, error, traceback):
        if error is not None:
            message = str(error) if isinstance(error, BenchFailure) else \
                f"{type(error).__name__} in the bench at cycle {self.cycle}: {error}"
            report({"failure": message.splitlines()[0] if message else type(error).__name__,
                    **self.result()})
        return False

    def source(self, name):
        """The :class:`cocotbext.axi.AxiStreamSource` of port prefix ``name``."""
        return self._sources[name]

    def sink(self, name):
        """The :class:`cocotbext.axi.AxiStreamSink` of port prefix ``name``."""
        return self._sinks[name]

    @property
    def cycle(self):
        """Clock cycles since the simulation started."""
        return int(get_sim_time("ns") // CLOCK_PERIOD_NS)

    # -- budgets ---------------------------------------------------------------------

    def begin(self, work, model_cycles, *, output_beats=0):
        """Start the clock of a piece of work (a run): every wait until the next
        :meth:`begin` must end within :func:`~nnrtl.sim.patterns.cycle_budget` cycles of
        now.

        Parameters
        ----------
        work : str
            What the work is, for messages ("layer 1, steps 0-6").
        model_cycles : int
            The performance model's cycles for it.
        output_beats : int
            Beats the sinks receive during it.
        """
        self._end_work()
        budget = cycle_budget(model_cycles, output_beats=output_beats,
                              patterns=(self.source_pauses, self.sink_pauses))
        self._work = (work, self.cycle, budget, model_cycles, output_beats)
        self._deadline = self.cycle + budget

    def _end_work(self):
        if self._work is not None:
            _, start, budget, _, _ = self._work
            self.budget_use = max(self.budget_use, (self.cycle - start) / budget)

    async def _within_budget(self, awaitable, what):
        if self._deadline is None:
            raise RuntimeError("call EngineBench.begin before waiting")
        remaining = max(1, self._deadline - self.cycle)
        try:
            return await with_timeout(awaitable, remaining * CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            work, start, budget, model, beats = self._work
            raise BenchFailure(
                f"budget overrun: waiting for {what} at cycle {self.cycle}, "
                f"{self.cycle - start} cycles into {work} (budget {budget} cycles: "
                f"{model} model cycles, {beats} output beats, patterns "
                f"{self.source_pauses}/{self.sink_pauses}); "
                f"{await self.snapshot()}") from None

    async def snapshot(self):
        """The state for a failure message: ``registers: name=value ...`` (every
        read-only register, :meth:`RegisterBus.snapshot`)."""
        return f"registers: {await self.regs.snapshot()}"

    async def recv(self, sink, what):
        """The next frame of ``sink`` (a :class:`cocotbext.axi.AxiStreamFrame`);
        :class:`BenchFailure` if it does not come within the budget."""
        return await self._within_budget(self._sinks[sink].recv(), f"{sink} {what}")

    async def wait_field(self, register, field, value, what):
        """Poll ``register.field`` until it reads ``value``, within the budget."""
        async def poll():
            while await self.regs.read_field(register, field) != value:
                await ClockCycles(self.dut.clk, POLL_CYCLES)
        await self._within_budget(poll(), f"{register}.{field} == {value} ({what})")

    async def drain(self, source):
        """Wait, within the budget, until ``source`` has sent everything queued on it
        and its last beat was taken; a source the engine stops reading fails with
        ``did not drain``."""
        sender = self._sources[source]
        try:
            await self._within_budget(sender.wait(), f"{source} to drain")
        except BenchFailure as failure:
            raise BenchFailure(f"source {source} did not drain ({sender.count()} frames "
                               f"queued, frame in flight: {sender.active}); {failure}") \
                from None

    # -- checks ----------------------------------------------------------------------

    def check(self, stream, expected, got, *, frame=None):
        """Compare one output frame word by word, in order; count mismatches and record
        the first (``stream``, ``index`` of the word on the stream, ``expected``,
        ``got``, ``frame``). Frames of different lengths are a protocol failure."""
        expected, got = [int(word) for word in expected], [int(word) for word in got]
        frame = self._frames[stream] if frame is None else frame
        if len(expected) != len(got):
            raise BenchFailure(f"wrong word count: {stream} frame {frame} has {len(got)} "
                               f"words, the model {len(expected)}")
        if self.fault == "corrupt-golden" and not self._corrupted and expected:
            expected[0] ^= 1
            self._corrupted = True
        base = self._words[stream]
        for offset, (want, have) in enumerate(zip(expected, got)):
            if want != have:
                self.mismatches += 1
                if self.first_mismatch is None:
                    self.first_mismatch = {"stream": stream, "index": base + offset,
                                           "expected": want, "got": have, "frame": frame}
                    self.dut._log.error("first mismatch: %s", self.first_mismatch)
        self._words[stream] += len(got)
        self._frames[stream] += 1

    def expect_count(self, what, got, expected, *, source):
        """A count (a counter register, frames received) must equal the model's;
        :class:`BenchFailure` otherwise. ``source`` names where ``expected`` comes from."""
        if got != expected:
            raise BenchFailure(f"wrong word count: {what} is {got}, expected {expected} "
                               f"({source}; cycle {self.cycle})")

    async def finish(self):
        """The end of the traffic: every source drained (within the budget), and after
        :data:`SETTLE_CYCLES` cycles no sink holds a frame the bench did not take or
        has one half received."""
        for name in self.source_names:
            await self.drain(name)
        self._end_work()
        await ClockCycles(self.dut.clk, SETTLE_CYCLES)
        for name, sink in self._sinks.items():
            if not sink.empty() or sink.active:
                raise BenchFailure(f"extra output: {name} sent {sink.count()} frames after "
                                   f"the last one expected ({self._frames[name]} frames, "
                                   f"{self._words[name]} words)"
                                   + (", and a partial frame" if sink.active else ""))

    def result(self):
        """``bit_exact``, ``mismatches``, ``first_mismatch`` (or ``None``), ``fault``,
        ``budget_use`` (the largest fraction of a budget a piece of work took)."""
        return {"bit_exact": self.mismatches == 0, "mismatches": self.mismatches,
                "first_mismatch": self.first_mismatch, "fault": self.fault,
                "budget_use": round(self.budget_use, 4)}

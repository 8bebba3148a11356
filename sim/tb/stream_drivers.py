"""cocotb bench of the shared stream drivers (:mod:`nnrtl.sim.tb.streams`) on
:class:`nnrtl.sim.tb.bus_tops.StreamRegisterTop` under Verilator.

Parameters (``tb_params()``): ``words`` per pattern, ``width``, ``patterns`` (names from
:data:`nnrtl.sim.patterns.PATTERNS`, each used on the source and the sink), ``seed``.
Per pattern the bench sends random words and receives them; checked: every word, in order,
and the handshake rule (:meth:`~nnrtl.sim.tb.streams.Streams.check`). Reported: per
pattern ``cycles`` (first word queued to last word taken) and ``first`` (cycles from
queueing to the first word taken at the output), ``taken`` (to the first word the
design took), ``violation`` (the first broken rule, or
``None``).
"""

import random

import cocotb
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout

from nnrtl.sim.patterns import cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import StreamProtocolError, Streams, cycle_now


@cocotb.test()
async def words_pass_under_every_pattern(dut):
    params = tb_params()
    rng = random.Random(params["seed"])
    await start_clock_and_reset(dut)
    streams = Streams(dut)
    runs = {}
    try:
        await _run(params, rng, streams, runs)
    except StreamProtocolError as error:
        report({"runs": runs, "violation": str(error)})
        return
    report({"runs": runs, "violation": None})


async def _run(params, rng, streams, runs):
    source, sink = streams.source("i", record=True), streams.sink("o")
    for kind in params["patterns"]:
        streams.pause(kind, rng)
        words = [rng.getrandbits(params["width"]) for _ in range(params["words"])]
        start = cycle_now()
        source.send_words(words)
        budget = cycle_budget(len(words), output_beats=len(words), patterns=[kind])
        try:
            got = await with_timeout(sink.receive(len(words)), budget * CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            streams.check()             # a lost word: the broken rule says why
            raise
        await source.wait()
        assert got == words, f"pattern {kind}: words differ"
        runs[kind] = {"cycles": sink.cycles[-1] - start,
                      "first": sink.cycles[-len(words)] - start,
                      "taken": source.cycles[-len(words)] - start}
        await ClockCycles(streams.dut.clk, 4)
        assert not sink.extra(), f"pattern {kind}: words beyond the sent ones"
        streams.check()

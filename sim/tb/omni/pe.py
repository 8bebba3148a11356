"""Benches of the η-LSTM Omni-PE (:class:`nnrtl.hw.omni.pe.OmniPE`): the Amaranth-simulator
driver (:func:`amaranth_run`, :func:`check_in_amaranth`), the job mixes
(:func:`random_jobs`) the tests share, and the cocotb bench under Verilator
(:func:`omni_pe_matches_model`, run by ``tests/omni/sim/test_omni_pe_verilator.py``).

A run sends the commands on ``i_command``, the operands on ``i_input1`` / ``i_input2`` and
takes the results from ``o``, each input with its own gaps and the output with its own
stalls: in the Amaranth simulator from one testbench coroutine that samples every
handshake at the clock edge, under Verilator by the shared stream drivers
(:mod:`nnrtl.sim.tb.streams`) paused by the pattern. Expectations come from the
configuration alone: the results from :func:`nnrtl.sim.golden.omni.pe.run_jobs`, the
cycle counts from :meth:`~nnrtl.hw.omni.config.OmniPEConfig.run_cycles`.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout

from nnrtl.hw.omni.config import OmniJob, OmniMode
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.omni.pe import run_jobs
from nnrtl.sim.patterns import cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import Streams, cycle_now

__all__ = ["random_jobs", "random_operands", "amaranth_run", "check_in_amaranth",
           "command_word", "pe_spec", "build_pe", "PATTERNS", "omni_pe_matches_model"]

#: Gap / stall probabilities: none, gaps only, backpressure only, both.
PATTERNS = [(0.0, 0.0), (0.4, 0.0), (0.0, 0.5), (0.3, 0.4)]


def random_jobs(rng, count, *, max_length=40, modes=tuple(OmniMode)):
    """``count`` jobs of random modes and lengths (1, short odd and even ones, up to
    ``max_length``); ``rng`` a ``numpy.random.Generator``."""
    jobs = []
    for _ in range(count):
        mode = OmniMode(int(rng.choice([m.value for m in modes])))
        pick = rng.random()
        length = (1 if pick < 0.15 else int(rng.integers(2, 10)) if pick < 0.5
                  else int(rng.integers(1, max_length + 1)))
        subtract = bool(mode is OmniMode.EW_ADD and rng.random() < 0.5)
        jobs.append(OmniJob(mode, length, subtract))
    return jobs


def random_operands(fmt, rng, jobs):
    """Input1 and Input2 streams (bit patterns) for ``jobs``: normal values of mixed
    scales and signs, with a few zeros, subnormals, infinities and NaNs."""
    def draw(n):
        values = rng.normal(size=n) * 2.0 ** rng.integers(-6, 7, n)
        bits = to_bits(fmt, values).astype(np.uint64)
        special = rng.random(n) < 0.03
        pool = np.array([0, fmt.sign_mask, 1, fmt.infinity, fmt.canonical_nan,
                         fmt.sign_mask | fmt.max_finite], dtype=np.uint64)
        bits[special] = pool[rng.integers(0, len(pool), int(special.sum()))]
        return bits
    return (draw(sum(job.inputs1 for job in jobs)), draw(sum(job.inputs2 for job in jobs)))


def pe_spec(config):
    """A JSON-able description of ``config`` (an :class:`OmniPEConfig`)."""
    return {"fmt": [config.fmt.exponent_bits, config.fmt.mantissa_bits],
            "adder_stages": config.adder_stages,
            "multiplier_stages": config.multiplier_stages, "input_depth": config.input_depth,
            "partial_depth": config.partial_depth, "output_depth": config.output_depth,
            "max_length": config.max_length, "flush_subnormals": config.flush_subnormals}


def build_pe(spec):
    """The :class:`OmniPE` a :func:`pe_spec` describes."""
    from nnrtl.hw.arith.float_format import FloatFormat
    from nnrtl.hw.omni.config import OmniPEConfig
    from nnrtl.hw.omni.pe import OmniPE

    fields = dict(spec, fmt=FloatFormat(*spec["fmt"]))
    return OmniPE(OmniPEConfig(**fields))


def command_word(pe, job):
    """The ``i_command`` payload of ``job`` as an integer (offsets from the layout)."""
    layout = pe.config.command_layout
    return ((job.mode.value << layout["mode"].offset)
            | (job.length << layout["length"].offset)
            | (int(job.subtract) << layout["subtract"].offset))


async def amaranth_run(ctx, pe, jobs, input1, input2, *, rng, gap=0.0, stall=0.0,
                       timeout=2000):
    """Drive ``pe`` with ``jobs`` and their operands; return ``{"command", "input1",
    "input2", "output"}`` handshake cycles (from 1) and ``results``, ``lasts`` (ints)."""
    from amaranth.hdl import Value

    words = {"command": [command_word(pe, job) for job in jobs],
             "input1": [int(v) for v in input1], "input2": [int(v) for v in input2]}
    ports = {"command": pe.i_command, "input1": pe.i_input1, "input2": pe.i_input2}
    count = sum(job.results for job in jobs)
    layout = pe.config.output_layout
    data_field, last_field = layout["data"], layout["last"]
    sent = {name: 0 for name in ports}
    offering = {name: False for name in ports}
    cycles = {name: [] for name in (*ports, "output")}
    results, lasts = [], []
    for _ in range(pe.config.fill_cycles):
        await ctx.tick()
    cycle = idle = 0
    while len(results) < count:
        for name, port in ports.items():
            if not offering[name] and sent[name] < len(words[name]) and not rng.random() < gap:
                ctx.set(Value.cast(port.payload), words[name][sent[name]])
                ctx.set(port.valid, 1)
                offering[name] = True
        ctx.set(pe.o.ready, int(not rng.random() < stall))
        _clk, _rst, *sampled = await ctx.tick().sample(
            *(port.ready for port in ports.values()), pe.o.valid, pe.o.ready,
            Value.cast(pe.o.payload))
        cycle += 1
        idle += 1
        *readies, o_valid, o_ready, o_bits = sampled
        for (name, port), ready in zip(ports.items(), readies):
            if offering[name] and ready:
                cycles[name].append(cycle)
                sent[name] += 1
                offering[name] = False
                ctx.set(port.valid, 0)
        if o_valid and o_ready:
            cycles["output"].append(cycle)
            results.append((o_bits >> data_field.offset) & ((1 << data_field.width) - 1))
            lasts.append((o_bits >> last_field.offset) & 1)
            idle = 0
        assert idle < timeout, (f"no result for {timeout} cycles: {len(results)} of "
                                f"{count} taken")
    ctx.set(pe.o.ready, 0)
    return {**cycles, "results": results, "lasts": lasts}


def check_in_amaranth(pe, jobs, input1, input2, *, seed=0, patterns=PATTERNS, timed=True):
    """Run ``jobs`` through ``pe`` under each gap/stall pattern (Amaranth simulator): the
    results equal :func:`run_jobs` bit for bit with ``last`` on each job's last result,
    nothing more comes out, and (``timed``) without gaps or stalls the cycles of every
    output handshake equal :meth:`~nnrtl.hw.omni.config.OmniPEConfig.output_cycles`.
    Returns the runs, one per pattern."""
    from amaranth.sim import Simulator

    config = pe.config
    want = [int(v) for results in run_jobs(config, jobs, input1, input2) for v in results]
    want_last = [int(k == job.results - 1) for job in jobs for k in range(job.results)]
    rng = random.Random(seed)
    runs = []
    for gap, stall in patterns:
        outcome = {}

        async def bench(ctx):
            outcome["run"] = await amaranth_run(ctx, pe, jobs, input1, input2, rng=rng,
                                                gap=gap, stall=stall)
            for _ in range(config.adder_stages + config.multiplier_stages + 8):
                await ctx.tick()
                assert not ctx.get(pe.o.valid), "a result beyond the expected ones"

        sim = Simulator(pe)
        sim.add_clock(1e-8)
        sim.add_testbench(bench)
        sim.run()
        run = outcome["run"]
        bad = [k for k, (got, model) in enumerate(zip(run["results"], want)) if got != model]
        assert not bad, (f"results differ from the model (gap {gap}, stall {stall}): "
                         + ", ".join(f"#{k} got {run['results'][k]:#x} model {want[k]:#x}"
                                     for k in bad[:6]))
        assert run["lasts"] == want_last, f"last flags differ (gap {gap}, stall {stall})"
        if timed and gap == 0 and stall == 0:
            expected = config.output_cycles(jobs)
            assert run["output"] == expected, (
                f"output cycles differ from output_cycles: "
                + ", ".join(f"#{k} {got} vs {model}" for k, (got, model)
                            in enumerate(zip(run["output"], expected)) if got != model)[:400])
        runs.append(run)
    return runs


# -- cocotb bench (Verilator) ---------------------------------------------------------------
#
# Parameters (``tb_params()``): ``pe`` (a :func:`pe_spec`), ``jobs`` per pattern,
# ``max_length``, ``patterns`` (names of :data:`nnrtl.sim.patterns.PATTERNS`), ``seed``.
# Per pattern: a random job mix (:func:`random_jobs`, all four modes, lengths from 1) whose
# three input streams pause and whose output stalls by the pattern (the shared stream
# drivers of :mod:`nnrtl.sim.tb.streams`, each its own pause generator); every result
# checked against :func:`run_jobs` in order, with ``last``; every wait bounded by
# :func:`nnrtl.sim.patterns.cycle_budget` of the model's
# :meth:`~nnrtl.hw.omni.config.OmniPEConfig.run_cycles`. Reported: ``bit_exact``,
# ``mismatches``, ``jobs``, ``results`` and per pattern ``cycles`` (from the first cycle
# the words are offered to the last result taken) and ``model_cycles``.

#: The PE's input streams.
INPUTS = ("i_command", "i_input1", "i_input2")


async def _run_pattern(streams, pe, jobs, input1, input2, pattern, rng):
    """One job mix under one pause pattern on the drivers of ``streams``; returns
    ``(cycles, results, lasts)``."""
    config = pe.config
    words = {"i_command": [command_word(pe, job) for job in jobs],
             "i_input1": input1, "i_input2": input2}
    streams.pause(pattern, rng)
    count = sum(job.results for job in jobs)
    budget = cycle_budget(config.run_cycles(jobs), output_beats=count, patterns=(pattern,))
    sink = streams.sink("o")
    first = len(sink.words)
    start = cycle_now()
    for name in INPUTS:
        streams.source(name).send_words(words[name])
    try:
        got = await with_timeout(sink.receive(count), budget * CLOCK_PERIOD_NS, "ns")
    except SimTimeoutError:
        raise AssertionError(f"pattern {pattern}: {len(sink.words) - first} of {count} "
                             f"results after {cycle_now() - start} cycles (budget "
                             f"{budget})") from None
    data, last = config.output_layout["data"], config.output_layout["last"]
    results = [(word >> data.offset) & ((1 << data.width) - 1) for word in got]
    lasts = [(word >> last.offset) & 1 for word in got]
    return sink.cycles[-1] - start - 1, results, lasts


@cocotb.test()
async def omni_pe_matches_model(dut):
    params = tb_params()
    pe = build_pe(params["pe"])
    config = pe.config
    rng = np.random.default_rng(params["seed"])
    streams = Streams(dut)
    for name in INPUTS:
        streams.source(name)
    sink = streams.sink("o")
    await start_clock_and_reset(dut)
    await ClockCycles(dut.clk, config.fill_cycles)
    mismatches, total_jobs, total_results, per_pattern = 0, 0, 0, {}
    for pattern in params["patterns"]:
        jobs = random_jobs(rng, params["jobs"], max_length=params["max_length"])
        input1, input2 = random_operands(config.fmt, rng, jobs)
        want = [int(v) for results in run_jobs(config, jobs, input1, input2) for v in results]
        want_last = [int(k == job.results - 1) for job in jobs for k in range(job.results)]
        cycles, got, lasts = await _run_pattern(streams, pe, jobs, input1, input2, pattern,
                                                random.Random(int(rng.integers(1 << 31))))
        await ClockCycles(dut.clk, config.adder_stages + config.multiplier_stages + 8)
        assert not sink.extra() and not dut.o__valid.value, \
            f"pattern {pattern}: a result beyond the expected ones"
        assert streams.idle(), f"pattern {pattern}: input words left untaken"
        streams.check()
        bad = [k for k, (g, w) in enumerate(zip(got, want)) if g != w]
        for k in bad[:5]:
            dut._log.error("pattern %s result %d: got %#x, model %#x", pattern, k, got[k],
                           want[k])
        assert lasts == want_last, f"pattern {pattern}: last flags differ from the jobs"
        mismatches += len(bad)
        total_jobs += len(jobs)
        total_results += len(want)
        per_pattern[pattern] = {"cycles": cycles, "model_cycles": config.run_cycles(jobs),
                                "mismatches": len(bad)}
    report({"bit_exact": mismatches == 0, "mismatches": mismatches, "jobs": total_jobs,
            "results": total_results, "patterns": per_pattern})
    assert mismatches == 0, f"{mismatches} results differ from the model"

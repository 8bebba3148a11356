"""Benches of the η-LSTM Omni-PE (:class:`nnrtl.hw.omni.pe.OmniPE`): the Amaranth-simulator
driver (:func:`amaranth_run`, :func:`check_in_amaranth`) and the job mixes
(:func:`random_jobs`) the tests share.

A run sends the commands on ``i_command``, the operands on ``i_input1`` / ``i_input2`` and
takes the results from ``o``, each input with its own random gaps and the output with
random stalls, from one testbench coroutine that samples every handshake at the clock
edge. Expectations come from the configuration alone: the results from
:func:`nnrtl.sim.golden.omni.pe.run_jobs`, the cycle counts from
:meth:`~nnrtl.hw.omni.config.OmniPEConfig.run_cycles`.
"""

import random

import numpy as np

from nnrtl.hw.omni.config import OmniJob, OmniMode
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.omni.pe import run_jobs

__all__ = ["random_jobs", "random_operands", "amaranth_run", "check_in_amaranth",
           "command_word", "PATTERNS"]

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

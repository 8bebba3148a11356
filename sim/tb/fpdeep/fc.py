"""The FPDeep FC engine (:mod:`nnrtl.hw.fpdeep.fc`): stimulus and expected beats from the
golden model (:mod:`nnrtl.sim.golden.fpdeep.fc`), a run in the Amaranth simulator, and a
cocotb bench under Verilator with every backpressure pattern on all six streams.

The weight stream is the board's DDR region read in order (:mod:`nnrtl.hw.fpdeep.fc_config`):
per mini-batch ``W⁺`` twice (forward, backward), the second mini-batch reading the rows the
first one wrote (the golden model's, which the ``o_w`` check holds the engine's to).

Parameters of the cocotb bench (``tb_params()``): ``cfg`` (FcConfig fields), ``order``,
``batches``, ``patterns``, ``seed``. Per pattern the report gives ``beats`` per output
stream, ``cycles`` (first input beat queued to the last output beat taken), ``model_cycles``
(:func:`nnrtl.gen.fpdeep.fc_cycles.fc_cycles`) and ``mismatches``.
"""

import dataclasses
import random

import cocotb
import numpy as np
from amaranth.hdl import Value
from amaranth.sim import Simulator

from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout

from nnrtl.gen.fpdeep.fc_cycles import fc_cycles
from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.fc import FcEngine
from nnrtl.hw.fpdeep.fc_config import FcConfig
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.fpdeep.fc import fc_backward, fc_forward, weight_rows
from nnrtl.sim.patterns import cycle_budget, pause_pattern
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import Streams, cycle_now

__all__ = ["random_config", "random_case", "stimulus", "expected", "amaranth_run", "OUTPUTS", "INPUTS",
           "config_of"]

#: The engine's input and output streams.
INPUTS = ("i_x", "i_w", "i_dy")
OUTPUTS = ("o_y", "o_w", "o_dx")


def config_of(fields):
    return FcConfig(**fields)


def random_config(seed):
    """A random FC shape and input order (the engine's strategy over small shapes):
    precision, ``n_in`` 1-9, ``p`` 1 … ``n_in + 1``, ``n_out`` 1-4, ``batch`` 1-3, a ReLU input
    or not, fp32 unit stages 0-3, sample- or feature-major input."""
    r = random.Random(seed)
    n_in = r.randint(1, 9)
    cfg = FcConfig(precision=r.choice(["fixed16", "fp32"]), n_in=n_in, n_out=r.randint(1, 4),
                   p=r.randint(1, n_in + 1), batch=r.randint(1, 3),
                   input_relu=r.random() < 0.5, multiplier_stages=r.randint(0, 3),
                   adder_stages=r.randint(0, 3))
    return cfg, r.choice(["sample", "feature"])


def random_case(cfg, batches, seed, *, lr=None):
    """Random ``weights``, ``bias``, per mini-batch ``xs`` and ``dys``, and ``lr``: fixed16
    codes in ±2.0 (weights ±1.0), some outputs saturating; fp32 bits of normal values."""
    rng = np.random.default_rng(seed)
    shape_x, shape_y = (cfg.batch, cfg.n_in), (cfg.batch, cfg.n_out)
    if cfg.precision == "fp32":
        bits = lambda v: to_bits(FP32, np.asarray(v, np.float32)).astype(np.int64)
        return {"weights": bits(rng.standard_normal((cfg.n_out, cfg.n_in)) * 0.5),
                "bias": bits(rng.standard_normal(cfg.n_out) * 0.5),
                "xs": [bits(rng.standard_normal(shape_x)) for _ in range(batches)],
                "dys": [bits(rng.standard_normal(shape_y)) for _ in range(batches)],
                "lr": int(bits([0.0625 if lr is None else lr])[0])}
    one = 1 << cfg.frac_bits
    return {"weights": rng.integers(-one, one + 1, (cfg.n_out, cfg.n_in)),
            "bias": rng.integers(-one, one + 1, cfg.n_out),
            "xs": [rng.integers(-2 * one, 2 * one + 1, shape_x) for _ in range(batches)],
            "dys": [rng.integers(-2 * one, 2 * one + 1, shape_y) for _ in range(batches)],
            "lr": 3000 if lr is None else lr}


def _words(beat, word):
    return sum((int(v) & ((1 << word) - 1)) << (n * word) for n, v in enumerate(beat))


def _run_golden(cfg, case):
    rows = weight_rows(cfg, case["weights"], case["bias"])
    per = []
    for xs, dys in zip(case["xs"], case["dys"], strict=True):
        y = fc_forward(cfg, rows, xs)
        dx, new = fc_backward(cfg, rows, xs, dys, case["lr"])
        per.append((rows, y, dx, new))
        rows = new
    return per


def _beats(cfg, rows):
    return [_words(rows[o][k * cfg.p:(k + 1) * cfg.p], cfg.word_bits)
            for o in range(cfg.n_out) for k in range(cfg.beats)]


def stimulus(cfg, case, order="sample"):
    """Payload integers per input stream."""
    mask = (1 << cfg.word_bits) - 1
    out = {name: [] for name in INPUTS}
    for (rows, _, _, _), xs, dys in zip(_run_golden(cfg, case), case["xs"], case["dys"]):
        xs = np.asarray(xs)
        flat = xs if order == "sample" else xs.T
        out["i_x"] += [int(v) & mask for v in flat.ravel()]
        out["i_w"] += _beats(cfg, rows) * 2
        out["i_dy"] += [int(v) & mask for v in np.asarray(dys).T.ravel()]
    return out


def expected(cfg, case):
    """Payload integers per output stream: ``y`` and ``δx`` feature-major, the new rows."""
    mask = (1 << cfg.word_bits) - 1
    out = {name: [] for name in OUTPUTS}
    for _, y, dx, new in _run_golden(cfg, case):
        out["o_y"] += [int(v) & mask for v in np.asarray(y).T.ravel()]
        out["o_w"] += _beats(cfg, new)
        out["o_dx"] += [int(v) & mask for v in np.asarray(dx).T.ravel()]
    return out


def amaranth_run(cfg, case, *, order="sample", gap=0.0, stall=0.0, pattern=None, seed=0,
                 timeout=4000):
    """Run ``case`` in the Amaranth simulator, inputs with gap probability ``gap``, outputs
    with stall probability ``stall``, or every stream paused by ``pattern``
    (:data:`nnrtl.sim.patterns.PATTERNS`). Returns ``(got, want, cycles)``: payloads per
    output stream, the expected ones, and the cycle of the last output handshake counted
    from the first input cycle (0 is the first cycle ``i_x`` is offered)."""
    stim, want = stimulus(cfg, case, order), expected(cfg, case)
    dut = FcEngine(cfg, input_order=order)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got = {name: [] for name in OUTPUTS}
    last = [0]

    def pauses(rng, chance):
        if pattern is not None:
            return pause_pattern(pattern, rng)
        return iter(lambda: bool(chance) and rng.random() < chance, None)

    def sender(name, n):
        async def run(ctx):
            port, rng = getattr(dut, name), random.Random(seed * 7 + n)
            payload, pause = Value.cast(port.payload), pauses(rng, gap)
            for word in stim[name]:
                while next(pause):
                    await ctx.tick()
                ctx.set(payload, word)
                ctx.set(port.valid, 1)
                for _ in range(timeout):
                    _, _, ready = await ctx.tick().sample(port.ready)
                    if ready:
                        break
                else:
                    raise AssertionError(f"{name}: a beat not taken in {timeout} cycles")
                ctx.set(port.valid, 0)
        return run

    def receiver(name, n):
        async def run(ctx):
            port, rng = getattr(dut, name), random.Random(seed * 11 + n)
            payload, pause = Value.cast(port.payload), pauses(rng, stall)
            cycle, idle = 0, 0
            while len(got[name]) < len(want[name]):
                accept = not next(pause)
                ctx.set(port.ready, int(accept))
                _, _, valid, bits = await ctx.tick().sample(port.valid, payload)
                cycle, idle = cycle + 1, idle + 1
                if valid and accept:
                    got[name].append(bits)
                    last[0], idle = max(last[0], cycle), 0
                assert idle < timeout, f"{name}: beat {len(got[name])} not in {timeout} cycles"
            ctx.set(port.ready, 0)
        return run

    async def rate(ctx):
        ctx.set(dut.lr, case["lr"])

    sim.add_testbench(rate)
    for n, name in enumerate(INPUTS):
        sim.add_testbench(sender(name, n))
    for n, name in enumerate(OUTPUTS):
        sim.add_testbench(receiver(name, n))
    sim.run()
    return got, want, last[0]


def fields_of(cfg):
    """The JSON-able fields of ``cfg`` (for ``tb_params``)."""
    return dataclasses.asdict(cfg)


# -- cocotb bench (Verilator) ------------------------------------------------------------

@cocotb.test()
async def fc_engine_matches_golden(dut):
    params = tb_params()
    cfg, order, batches = config_of(params["cfg"]), params["order"], params["batches"]
    rng = random.Random(params["seed"])
    await start_clock_and_reset(dut)
    streams = Streams(dut)
    sources = {name: streams.source(name) for name in INPUTS}
    sinks = {name: streams.sink(name) for name in OUTPUTS}
    results, exact = {}, True
    model = fc_cycles(cfg, batches)
    for number, kind in enumerate(params["patterns"]):
        case = random_case(cfg, batches, params["seed"] + number)
        stim, want = stimulus(cfg, case, order), expected(cfg, case)
        dut.lr.value = case["lr"]
        streams.pause(kind, rng)
        total = sum(len(v) for v in want.values())
        budget = cycle_budget(model, output_beats=total, patterns=[kind])
        start = cycle_now()

        async def traffic():
            for name in INPUTS:
                sources[name].send_words(stim[name])
            got = {name: await sinks[name].receive(len(want[name])) for name in OUTPUTS}
            for source in sources.values():
                await source.wait()
            return got

        try:
            got = await with_timeout(traffic(), budget * CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            raise AssertionError(f"pattern {kind}: outputs not in the budget of {budget} "
                                 "cycles") from None
        cycles = max(sinks[name].cycles[-1] for name in OUTPUTS) - start
        await ClockCycles(dut.clk, 20)
        for name in OUTPUTS:
            assert not sinks[name].extra(), f"pattern {kind}: {name} beats beyond the expected"
        streams.check()
        wrong = [f"{name} beat {n}: got {a:#x}, golden {b:#x}" for name in OUTPUTS
                 for n, (a, b) in enumerate(zip(got[name], want[name])) if a != b][:6]
        exact = exact and not wrong
        results[kind] = {"beats": {name: len(got[name]) for name in OUTPUTS},
                         "cycles": cycles, "model_cycles": model, "budget": budget,
                         "mismatches": wrong}
        dut._log.info("pattern %s: %d cycles (model %d)", kind, cycles, model)
    report({"bit_exact": exact, "patterns": results, "model_cycles": model,
            "useful_macs": cfg.macs * batches})
    assert exact, "; ".join(m for r in results.values() for m in r["mismatches"])


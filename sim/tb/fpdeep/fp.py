"""The FPDeep FP module (:mod:`nnrtl.hw.fpdeep.fp`): stimulus and expected beats from the golden
model (:mod:`nnrtl.sim.golden.fpdeep.fp`), shared by the Amaranth-simulator tests, and a cocotb
bench under Verilator with every backpressure pattern on the activation-in, partial-in and
partial-out / out streams.

A case (:func:`random_case`) is random images, weights, bias and upstream partials for an
:class:`~nnrtl.hw.fpdeep.config.FpConfig`; :func:`stimulus` turns it into the integer payloads
of the ``load``, ``act_in`` and ``part_in`` streams, :func:`expected` into those of
``part_out`` or ``out``. Payloads are packed by the ports' own layouts (:func:`pack`).

Parameters of the cocotb bench (``tb_params()``): ``cfg`` (the FpConfig's fields),
``images``, ``patterns`` (names from :mod:`nnrtl.sim.patterns`), ``seed``. Per pattern the
bench loads the LPRAM, streams the images and checks every output beat; reported:
``bit_exact``, per pattern ``beats``, ``mismatches`` (the first few, naming stream, beat and
field), ``cycles``.
"""

import dataclasses
import random

import cocotb
import numpy as np
from amaranth.hdl import Shape, Value
from amaranth.lib import data
from amaranth.sim import Simulator
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout

from nnrtl.gen.fpdeep import from_network
from nnrtl.gen.models import Conv2d, Flatten, Linear, MaxPool2d, Network, ReLU
from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.config import FpConfig
from nnrtl.hw.fpdeep.fp import FpModule, out_layout, partial_layout
from nnrtl.hw.fpdeep.line_buffer import pixel_layout
from nnrtl.hw.fpdeep.lpram import load_layout
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.fpdeep.fp import fp_module, pad_bias, pass_weights
from nnrtl.sim.patterns import cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import Streams, cycle_now

__all__ = ["pack", "unpack", "random_case", "stimulus", "expected", "config_of", "fields_of",
           "model_cycles", "amaranth_run", "describe", "small_cnn"]


def pack(shape, value):
    """The integer of ``value`` (int, sequence or mapping) laid out as ``shape``."""
    if isinstance(shape, data.StructLayout):
        return sum(pack(field.shape, value[name]) << field.offset
                   for name, field in shape) if value is not None else 0
    if isinstance(shape, data.ArrayLayout):
        width = Shape.cast(shape.elem_shape).width if not isinstance(
            shape.elem_shape, data.Layout) else shape.elem_shape.size
        return sum(pack(shape.elem_shape, v) << (n * width) for n, v in enumerate(value))
    width = Shape.cast(shape).width
    return int(value) & ((1 << width) - 1)


def unpack(shape, bits):
    """The inverse of :func:`pack` (ints unsigned; lists and dicts)."""
    if isinstance(shape, data.StructLayout):
        return {name: unpack(field.shape, bits >> field.offset) for name, field in shape}
    if isinstance(shape, data.ArrayLayout):
        elem = shape.elem_shape
        width = elem.size if isinstance(elem, data.Layout) else Shape.cast(elem).width
        return [unpack(elem, bits >> (n * width)) for n in range(shape.length)]
    return bits & ((1 << Shape.cast(shape).width) - 1)


def small_cnn():
    """A small CNN for the mapper (:mod:`nnrtl.gen.fpdeep`): three 3×3 convolutions on a
    16 × 16 image (3 → 8 → 12 → 10 channels, 2×2 pools after the first two, the third
    without padding) and a Linear; on 2-3 VC709s the mapper gives it segments with
    ``Q < S_IC``."""
    layers = [Conv2d(np.zeros((8, 3, 3, 3)), padding=1), ReLU(), MaxPool2d(2),
              Conv2d(np.zeros((12, 8, 3, 3)), padding=1), ReLU(), MaxPool2d(2),
              Conv2d(np.zeros((10, 12, 3, 3)), padding=0), ReLU(), Flatten(),
              Linear(np.zeros((5, 40)))]
    return from_network(Network(layers), 16, "small")


def config_of(fields):
    """An FpConfig from its fields (a dict, e.g. from ``tb_params()``)."""
    fields = dict(fields)
    if fields.get("pool") is not None:
        fields["pool"] = tuple(fields["pool"])
    return FpConfig(**fields)


def random_case(cfg, images, seed):
    """Random ``act`` (images, w_in, w_in, n_in), ``weights``, ``bias`` and ``partial_in``
    (images, w_out², groups, P) as the module's words (fp32 bit patterns, fixed16 codes)."""
    rng = np.random.default_rng(seed)
    shape_w = (cfg.n_out, cfg.n_in, cfg.k, cfg.k)
    shape_p = (images, cfg.w_out ** 2, cfg.groups, cfg.p)
    shape_a = (images, cfg.w_in, cfg.w_in, cfg.n_in)
    if cfg.precision == "fp32":
        bits = lambda x: to_bits(FP32, x.astype(np.float32)).astype(np.int64)
        act = bits(rng.standard_normal(shape_a))
        weights = bits(rng.standard_normal(shape_w) * 0.5)
        bias = bits(rng.standard_normal(cfg.n_out) * 0.5)
        partial = bits(rng.standard_normal(shape_p) * 2) if cfg.partial_in else None
    else:
        one = 1 << cfg.frac_bits
        act = rng.integers(-one, one + 1, shape_a)
        weights = rng.integers(-one // 2, one // 2 + 1, shape_w)
        bias = rng.integers(-one, one + 1, cfg.n_out)
        partial = (rng.integers(-(one << cfg.frac_bits), one << cfg.frac_bits, shape_p)
                   if cfg.partial_in else None)
    return {"act": act, "weights": weights, "bias": bias, "partial_in": partial}


def stimulus(cfg, case):
    """Payload integers per input stream: ``load``, ``act_in``, ``part_in`` (if any)."""
    w = pass_weights(cfg, case["weights"])                 # (row, j, i, t)
    b = pad_bias(cfg, case["bias"])
    load = []
    for bank in range(cfg.banks):
        i, t = divmod(bank, cfg.taps)
        load += [pack(load_layout(cfg), {"bank": bank, "row": row,
                                         "data": list(w[row, :, i, t])})
                 for row in range(cfg.rows)]
    if cfg.completes:                      # the bias with the last pass of each group
        load += [pack(load_layout(cfg), {"bank": cfg.banks, "row": (g + 1) * cfg.passes - 1,
                                         "data": list(b[g])}) for g in range(cfg.groups)]
    pixel = pixel_layout(cfg.word_bits, cfg.n_in)
    act = [pack(pixel, list(image[y, x])) for image in case["act"]
           for y in range(cfg.w_in) for x in range(cfg.w_in)]
    result = {"load": load, "act_in": act}
    if cfg.partial_in:
        layout = partial_layout(cfg)
        beats = cfg.w_out ** 2 * cfg.groups
        result["part_in"] = [
            pack(layout, {"data": list(beat), "last": int(n == beats - 1)})
            for image in case["partial_in"]
            for n, beat in enumerate(image.reshape(beats, cfg.p))]
    return result


def expected(cfg, case):
    """``(stream name, payload integers)`` the module must send for ``case``."""
    beats = []
    for n, act in enumerate(case["act"]):
        partial = case["partial_in"][n] if cfg.partial_in else None
        result = fp_module(cfg, act, case["weights"], case["bias"], partial)
        if not cfg.completes:
            flat = result.partials.reshape(-1, cfg.p)
            beats += [pack(partial_layout(cfg), {"data": list(beat),
                                                 "last": int(k == len(flat) - 1)})
                      for k, beat in enumerate(flat)]
        else:
            data_, relu, argmax = (v.reshape(-1, cfg.p) for v in
                                   (result.data, result.relu, result.argmax))
            beats += [pack(out_layout(cfg), {"data": list(data_[k]), "relu": pack(
                data.ArrayLayout(1, cfg.p), list(relu[k])), "argmax": list(argmax[k]),
                "last": int(k == len(data_) - 1)}) for k in range(len(data_))]
    return ("out" if cfg.completes else "part_out"), beats


def fields_of(cfg):
    """The JSON-able fields of ``cfg`` (for ``tb_params``)."""
    return dataclasses.asdict(cfg)


def model_cycles(cfg, images, loads):
    """Cycles the work takes without pauses, at most: the LPRAM load, then per image the
    slower of the input (``w_in²`` beats) and the windows (``pixels · G · passes``) plus the
    fill (``K`` rows)."""
    return loads + images * (max(cfg.w_in ** 2, cfg.cycles)
                             + cfg.k * cfg.w_in) + 200


# -- Amaranth simulator ------------------------------------------------------------------

async def _send(ctx, port, words, rng, gap, timeout):
    payload = Value.cast(port.payload)
    for word in words:
        while gap and rng.random() < gap:
            await ctx.tick()
        ctx.set(payload, word)
        ctx.set(port.valid, 1)
        for _ in range(timeout):
            _clk, _rst, ready = await ctx.tick().sample(port.ready)
            if ready:
                break
        else:
            raise AssertionError(f"a beat of {len(words)} not taken in {timeout} cycles")
        ctx.set(port.valid, 0)


def amaranth_run(cfg, case, *, gap=0.0, stall=0.0, seed=0, timeout=5000):
    """Run ``case`` through an :class:`FpModule` in the Amaranth simulator, the inputs with
    gap probability ``gap``, the output with stall probability ``stall``. Returns ``(name,
    got, want, cycles)``: the output stream's name, its payloads, the expected ones and the
    cycle (from the first activation offered) of every output handshake."""
    stim = stimulus(cfg, case)
    name, want = expected(cfg, case)
    dut = FpModule(cfg)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got, cycles = [], []
    start = len(stim["load"]) + 2

    async def loader(ctx):
        await _send(ctx, dut.load, stim["load"], None, 0.0, timeout)

    async def activations(ctx):
        await ctx.tick().repeat(start)
        await _send(ctx, dut.act_in, stim["act_in"], random.Random(seed + 1), gap, timeout)

    async def partials(ctx):
        await ctx.tick().repeat(start)
        await _send(ctx, dut.part_in, stim["part_in"], random.Random(seed + 2), gap, timeout)

    async def collect(ctx):
        port, rng = getattr(dut, name), random.Random(seed + 3)
        payload = Value.cast(port.payload)
        cycle, idle, held = 0, 0, None
        while len(got) < len(want):
            accept = not (stall and rng.random() < stall)
            ctx.set(port.ready, int(accept))
            _clk, _rst, valid, bits = await ctx.tick().sample(port.valid, payload)
            cycle, idle = cycle + 1, idle + 1
            if valid and held is not None:
                assert bits == held, f"{name}: a beat changed before it was taken"
            if valid and accept:
                got.append(bits)
                cycles.append(cycle - start)
                held, idle = None, 0
            elif valid:
                held = bits
            assert idle < timeout, f"{name}: beat {len(got)} of {len(want)} not in {timeout} cycles"
        ctx.set(port.ready, 0)

    sim.add_testbench(loader)
    sim.add_testbench(activations)
    sim.add_testbench(collect)
    if cfg.partial_in:
        sim.add_testbench(partials)
    sim.run()
    return name, got, want, cycles


def describe_beats(layout, name, got, want, limit=3):
    """The first differing beats of stream ``name`` of ``layout``, naming beat and fields
    (empty if equal)."""
    lines = []
    if len(got) != len(want):
        lines.append(f"{name}: {len(got)} beats, {len(want)} expected")
    for n, (a, b) in enumerate(zip(got, want)):
        if a != b and len(lines) < limit:
            lines.append(f"{name} beat {n}: got {unpack(layout, a)}, golden {unpack(layout, b)}")
    return lines


def describe(cfg, name, got, want, limit=3):
    """:func:`describe_beats` of the FP module's stream ``name`` (``out`` or partials)."""
    layout = out_layout(cfg) if name == "out" else partial_layout(cfg)
    return describe_beats(layout, name, got, want, limit)


# -- cocotb bench (Verilator) ------------------------------------------------------------

async def run_patterns(dut, params, make, layout, name):
    """The bench loop of the FP, EB, PG, SFU and update benches, on the shared stream
    drivers (:class:`~nnrtl.sim.tb.streams.Streams`).

    Per pattern ``kind``, ``make(number)`` gives ``(sources [(port, payloads, paced)],
    expected payloads, model cycles)``; the sources not ``paced`` (the LPRAM load) are sent
    first without pauses and must drain, then the others, paused by ``kind`` like the sink
    ``name``. ``cycles`` counts from the first word queued to the last word taken; every
    wait is bounded by :func:`~nnrtl.sim.patterns.cycle_budget` of the model cycles.

    Raises
    ------
    AssertionError
        A budget overrun (naming the beats received), an output beyond the expected ones,
        a broken handshake rule, or (after the report) a mismatch.
    """
    rng = random.Random(params["seed"])
    await start_clock_and_reset(dut)
    streams = Streams(dut)
    sink = streams.sink(name)
    results, exact = {}, True
    for number, kind in enumerate(params["patterns"]):
        specs, want, cycles_model = make(number)
        sources = {port: streams.source(port) for port, _, _ in specs}
        paced = [port for port, _, is_paced in specs if is_paced]
        streams.pause(kind, rng, ports=paced + [name])
        streams.pause("none", rng, ports=[port for port in sources if port not in paced])
        budget = cycle_budget(cycles_model, output_beats=len(want), patterns=[kind])
        start = cycle_now()

        async def traffic():
            for port, words, is_paced in specs:
                if not is_paced:
                    sources[port].send_words(words)
            for port, _, is_paced in specs:
                if not is_paced:
                    await sources[port].wait()
            for port, words, is_paced in specs:
                if is_paced:
                    sources[port].send_words(words)
            got = await sink.receive(len(want))
            for source in sources.values():
                await source.wait()
            return got

        received = len(sink.words)
        try:
            got = await with_timeout(traffic(), budget * CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            raise AssertionError(f"pattern {kind}: {len(sink.words) - received} of "
                                 f"{len(want)} {name} beats in the budget of {budget} "
                                 "cycles") from None
        cycles = sink.cycles[-1] - start if want else cycle_now() - start
        await ClockCycles(dut.clk, 20)
        extra = sink.extra()
        assert not extra, f"pattern {kind}: {len(extra)} {name} beats beyond the expected"
        streams.check()
        wrong = describe_beats(layout, name, got, want)
        exact = exact and not wrong
        results[kind] = {"beats": len(got), "cycles": cycles, "budget": budget,
                         "mismatches": wrong}
        dut._log.info("pattern %s: %d beats in %d cycles", kind, len(got), cycles)
    report({"bit_exact": exact, "patterns": results})
    assert exact, "; ".join(m for r in results.values() for m in r["mismatches"])


@cocotb.test()
async def fp_module_matches_golden(dut):
    params = tb_params()
    cfg = config_of(params["cfg"])

    def make(number):
        case = random_case(cfg, params["images"], params["seed"] + number)
        stim = stimulus(cfg, case)
        name, want = expected(cfg, case)
        assert name == stream
        sources = [("load", stim["load"], False)] + [(port, stim[port], True)
                                                    for port in ("act_in", "part_in")
                                                    if port in stim]
        return sources, want, model_cycles(cfg, params["images"], len(stim["load"]))

    stream = "out" if cfg.completes else "part_out"
    layout = out_layout(cfg) if stream == "out" else partial_layout(cfg)
    await run_patterns(dut, params, make, layout, stream)

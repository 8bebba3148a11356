"""cocotb bench: a floating-point unit under Verilator, bit for bit against the numpy model.

The design is a :class:`nnrtl.hw.arith.float.FloatAdd` or ``FloatMul`` (ports
``i__payload``, ``i__valid``, ``i__ready``, ``o__payload``, ``o__valid``, ``o__ready``), or
a :class:`nnrtl.sim.tb.bundle.StreamUnitBundle` of units (ports ``i_<name>__payload``,
...), of which the bench drives one. Parameters (``tb_params()``):

``ports``
    Names of the unit's input and output ports in the design: ``{"i": "i", "o": "o"}``
    (the default) for a unit on its own, ``{"i": "i_add", "o": "o_add"}`` in a bundle.
``op``
    ``"add"``, ``"sub"`` (a ``FloatAdd`` with the ``subtract`` bit set) or ``"mul"``.
``exponent_bits``, ``mantissa_bits``, ``flush_subnormals``, ``latency``, ``offsets``
    The unit's format, mode, latency and payload bit offsets (``a``, ``b``, ``subtract``).
``operands``
    ``"ieee"`` (default) or ``"normal"``: the bench sends a multiplier's operands in the
    normal form (:func:`~nnrtl.sim.golden.float.to_normal_form`).
``count``, ``backpressure_count``
    Operand pairs streamed at full rate (``o.ready`` always high), and under pause
    patterns on ``i`` and ``o`` (0: skip).
``patterns``
    Entries of :func:`~nnrtl.sim.tb.bundle.pattern_kinds` over which the backpressure
    run's pairs are split (default ``["random"]``).
``seed``
    Of :func:`~nnrtl.sim.golden.float.random_operands` (``seed + 1`` for the second).

Operands are drawn in numpy and the results compared with the vectorised model at the
end. The full-rate run is a tight loop, one pair per clock edge (the shared stream
drivers take two to three times as long); it checks that the first result leaves
``latency`` cycles after the first input and ``count`` results take ``count + latency``
cycles. The backpressure run is on the shared drivers
(:class:`~nnrtl.sim.tb.bundle.StreamLane`), within the cycle budget; it checks that
``i.ready`` is ``~o.valid | o.ready``, that a stalled result holds still and that no
result comes beyond the expected ones.

Reported: ``vectors``, ``mismatches``, ``cycles``, ``vectors_per_second``,
``first_latency``; with backpressure ``backpressure_vectors``,
``backpressure_mismatches``, ``backpressure_cycles`` (first pair queued to last result
taken), ``backpressure_patterns`` (per entry ``vectors``, ``cycles``, ``budget``);
``examples``, ``backpressure_examples``: up to 8 mismatches, ``[a, b, got, expected]``.
"""

import random
import time

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from nnrtl.hw.arith.float_format import FloatFormat
from nnrtl.sim.golden.float import (float_add, float_mul, float_sub, random_operands,
                                    to_normal_form)
from nnrtl.sim.tb.bundle import StreamLane, run_lanes
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import Streams, cycle_now


PARAMS = tb_params()
MODELS = {"add": float_add, "sub": float_sub, "mul": float_mul}


def ports(dut):
    """The unit's ``i`` and ``o`` signals: payload, valid, ready of each."""
    names = PARAMS.get("ports", {"i": "i", "o": "o"})
    return [getattr(dut, f"{names[port]}__{signal}")
            for port in ("i", "o") for signal in ("payload", "valid", "ready")]


def operands(seed, count):
    """Operand pairs, their packed payloads and the model's results."""
    fmt = FloatFormat(PARAMS["exponent_bits"], PARAMS["mantissa_bits"])
    op = PARAMS["op"]
    a, b, _kinds = random_operands(fmt, op, count, seed)
    offsets = PARAMS["offsets"]
    extra = (1 << offsets["subtract"]) if op == "sub" else 0
    shift_a, shift_b = offsets["a"], offsets["b"]
    sent_a, sent_b = a, b
    if PARAMS.get("operands", "ieee") == "normal":
        sent_a, sent_b = to_normal_form(fmt, a), to_normal_form(fmt, b)
    payloads = [(x << shift_a) | (y << shift_b) | extra
                for x, y in zip(sent_a.tolist(), sent_b.tolist())]
    expected = MODELS[op](fmt, a, b, flush_subnormals=PARAMS["flush_subnormals"])
    return a, b, payloads, expected


def compare(a, b, got, expected):
    got = np.array(got, dtype=np.uint64)
    expected = expected.astype(np.uint64)
    if len(got) != len(expected):
        return len(expected), [["count", len(got), len(expected)]]
    bad = np.nonzero(got != expected)[0]
    return int(len(bad)), [[hex(int(a[k])), hex(int(b[k])), hex(int(got[k])),
                            hex(int(expected[k]))] for k in bad[:8]]


@cocotb.test()
async def full_rate(dut):
    """One operand pair per cycle, ``o.ready`` always high."""
    count = PARAMS["count"]
    latency = PARAMS["latency"]
    a, b, payloads, expected = operands(PARAMS["seed"], count)
    await start_clock_and_reset(dut)
    clk = dut.clk
    i_payload, i_valid, _i_ready, o_payload, o_valid, o_ready = ports(dut)
    o_ready.value = 1
    i_valid.value = 1
    got = []
    append = got.append
    first = last = None
    start = time.monotonic()
    # Values read right after ``await RisingEdge`` are the ones that edge sampled; values
    # written then are sampled at the next edge. So the pair written in iteration k is
    # taken at edge k, and a result read after edge k is handed over at edge k.
    for edge, payload in enumerate(payloads):
        i_payload.value = payload
        await RisingEdge(clk)
        if o_valid.value:
            append(int(o_payload.value))
            last = edge
            if first is None:
                first = edge
    i_valid.value = 0
    edge = count
    while len(got) < count and edge < count + latency + 10:
        await RisingEdge(clk)
        if o_valid.value:
            append(int(o_payload.value))
            last = edge
            if first is None:
                first = edge
        edge += 1
    seconds = time.monotonic() - start
    mismatches, examples = compare(a, b, got, expected)
    # cycles: edges from the one that takes the first pair to the one that hands over the
    # last result, both counted
    cycles = None if last is None else last + 1
    report({"vectors": count, "mismatches": mismatches, "cycles": cycles,
            "first_latency": first, "vectors_per_second": round(count / seconds),
            "examples": examples})
    assert mismatches == 0, examples
    assert first == latency, (first, latency)
    assert cycles == count + latency, (cycles, count, latency)


async def _ready_rule(dut, broken):
    """At every clock edge, check that ``i.ready`` is ``~o.valid | o.ready``; append the
    cycle of the first break to ``broken``."""
    _, _, i_ready, _, o_valid, o_ready = ports(dut)
    edge = RisingEdge(dut.clk)
    while not broken:
        await edge
        if int(i_ready.value) != int(not o_valid.value or o_ready.value):
            broken.append(cycle_now())


@cocotb.test()
async def random_backpressure(dut):
    """The pairs split over the pause patterns ``patterns`` on ``i`` and ``o``."""
    count = PARAMS["backpressure_count"]
    if count == 0:
        return
    rng = random.Random(PARAMS["seed"])
    latency = PARAMS["latency"]
    patterns = list(PARAMS.get("patterns", ["random"]))
    a, b, payloads, expected = operands(PARAMS["seed"] + 1, count)
    await start_clock_and_reset(dut)
    names = PARAMS.get("ports", {"i": "i", "o": "o"})
    streams = Streams(dut)
    lane = StreamLane(streams, "unit", ports=(names["i"], names["o"]))
    broken = []
    cocotb.start_soon(_ready_rule(dut, broken))
    got, runs, start = [], {}, cycle_now()
    for number, entry in enumerate(patterns):
        chunk = payloads[number * count // len(patterns):(number + 1) * count // len(patterns)]
        lane.send(chunk, len(chunk))
        run = await run_lanes(streams, [lane], entry, rng,
                              model_cycles=len(chunk) + latency, output_beats=len(chunk),
                              settle=latency + 2)
        got += lane.got
        runs[entry] = dict(run, vectors=len(chunk))
        assert not broken, f"pattern {entry}: i.ready is not ~o.valid | o.ready in cycle " \
            f"{broken[0]}"
    mismatches, examples = compare(a, b, got, expected)
    last = lane.taken[-1] if lane.taken else cycle_now()
    report({"backpressure_vectors": count, "backpressure_mismatches": mismatches,
            "backpressure_cycles": last - start, "backpressure_patterns": runs,
            "backpressure_examples": examples})
    assert mismatches == 0, examples

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
``exponent_bits``, ``mantissa_bits``, ``flush_subnormals``, ``latency``
    The unit's format, mode and latency.
``offsets``
    Bit offsets of the payload fields (``a``, ``b``, and ``subtract`` for an adder), taken
    from the unit's ``payload_layout``.
``count``
    Operand pairs streamed at full rate: one per cycle, ``o.ready`` always high.
``backpressure_count``
    Operand pairs streamed with random gaps on ``i.valid`` and random stalls on ``o.ready``
    (0: skip).
``seed``
    Seed of :func:`nnrtl.sim.golden.float.random_operands` (the second run uses
    ``seed + 1``).

The operands are drawn in numpy inside the bench, driven one per clock edge by a tight
loop, collected, and compared with the vectorised model once at the end. The full-rate run
also checks that the first result is handed over ``latency`` cycles after the first input
and that ``count`` results take ``count + latency`` cycles; the backpressure run checks
that ``i.ready`` follows ``~o.valid | o.ready`` and that a stalled result holds still.

Reported: ``vectors``, ``mismatches``, ``cycles``, ``vectors_per_second`` (wall clock
of the driving loop), ``first_latency``; with backpressure also ``backpressure_vectors``,
``backpressure_mismatches``, ``backpressure_cycles``; ``examples``: up to 8 mismatches as
``[a, b, got, expected]`` hex strings.
"""

import random
import time

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from nnrtl.hw.arith.float_format import FloatFormat
from nnrtl.sim.golden.float import float_add, float_mul, float_sub, random_operands
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params


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
    payloads = [(x << shift_a) | (y << shift_b) | extra
                for x, y in zip(a.tolist(), b.tolist())]
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


@cocotb.test()
async def random_backpressure(dut):
    """Random gaps on ``i.valid`` (probability 1/3) and stalls on ``o.ready`` (1/3)."""
    count = PARAMS["backpressure_count"]
    if count == 0:
        return
    rng = random.Random(PARAMS["seed"])
    a, b, payloads, expected = operands(PARAMS["seed"] + 1, count)
    clk = dut.clk
    i_payload, i_valid, i_ready, o_payload, o_valid, o_ready = ports(dut)
    o_ready.value = 0
    i_valid.value = 0
    await start_clock_and_reset(dut)
    got = []
    sent = 0
    offering = False
    held = None  # a result offered and not taken must stay put
    cycles = 0
    while len(got) < count:
        # drive the next edge
        ready = int(rng.random() >= 1 / 3)
        o_ready.value = ready
        if not offering and sent < count and rng.random() >= 1 / 3:
            offering = True
            i_payload.value = payloads[sent]
        i_valid.value = int(offering)
        await RisingEdge(clk)
        cycles += 1
        # what that edge saw
        valid = int(o_valid.value)
        assert int(i_ready.value) == int(not valid or ready), ("i.ready", cycles)
        if valid:
            value = int(o_payload.value)
            if held is not None:
                assert value == held, ("a stalled result changed", cycles)
            if ready:
                got.append(value)
                held = None
            else:
                held = value
        else:
            assert held is None, ("a stalled result vanished", cycles)
        if offering and int(i_ready.value):
            sent += 1
            offering = False
        assert cycles < 10 * count + 100, "the unit stopped"
    i_valid.value = 0
    mismatches, examples = compare(a, b, got, expected)
    report({"backpressure_vectors": count, "backpressure_mismatches": mismatches,
            "backpressure_cycles": cycles, "backpressure_examples": examples})
    assert mismatches == 0, examples

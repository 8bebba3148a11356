# amaranth: UnusedElaboratable=no
"""A channel's activation unit (hw/omni/activation.py, Amaranth simulator): the sigmoid
and the tanh table on one datapath, bit-exact against :mod:`nnrtl.sim.golden.activation`
with the function changing from input to input, under gaps and backpressure, and one
result per cycle at the latency of :class:`FloatActivation`; its checks.
"""

import random

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from nnrtl.hw.arith.activation import FloatActivation, activation_table
from nnrtl.hw.arith.float import BF16, FP16, FP32
from nnrtl.hw.omni.activation import SharedActivation
from nnrtl.sim.golden import activation as golden
from nnrtl.sim.golden.float import special_values, to_bits
from nnrtl.sim.tb.bus_amaranth import stream_through


def run(unit, words, *, gap, stall, seed):
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.dut = unit
    rng = random.Random(seed)
    result = []

    async def bench(ctx):
        result.extend(await stream_through(ctx, unit, words, len(words), rng=rng, gap=gap,
                                           stall=stall, timeout=50 * len(words) + 100))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result


def patterns(fmt, tables, count, seed):
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 1 << fmt.width, count, dtype=np.uint64),
             to_bits(fmt, rng.normal(size=count) * 4),
             np.asarray(list(special_values(fmt).values()), dtype=np.uint64)]
    for table in tables:
        boundaries = golden.sweep_patterns(fmt, count=1, random=0, table=table)
        parts.append(rng.choice(boundaries, count))
    x = np.concatenate(parts)
    return x, rng.integers(0, len(tables), len(x))


@pytest.mark.parametrize("fmt, flush, shifts, stages", [
    (FP32, True, "dsp", (3, 3)), (FP32, False, "lut", (2, 1)), (BF16, True, "dsp", (1, 0)),
    (FP16, False, "dsp", (3, 2))], ids=["fp32_flush_dsp", "fp32_lut", "bf16_flush_dsp",
                                        "fp16_dsp"])
def test_matches_model_with_the_function_changing(fmt, flush, shifts, stages):
    tables = (activation_table("sigmoid", fmt), activation_table("tanh", fmt))
    unit = SharedActivation(tables, adder_stages=stages[0], multiplier_stages=stages[1],
                            flush_subnormals=flush, shifts=shifts)
    assert unit.latency == FloatActivation(tables[0], adder_stages=stages[0],
                                           multiplier_stages=stages[1]).latency
    x, function = patterns(fmt, tables, 40, 7)
    want = np.empty(len(x), dtype=np.uint64)
    for index, table in enumerate(tables):
        chosen = function == index
        want[chosen] = golden.evaluate(table, x[chosen], flush_subnormals=flush)
    words = [int(v) | int(f) << fmt.width for v, f in zip(x, function)]
    for gap, stall in ((0.0, 0.0), (0.3, 0.4)):
        accepted, taken, got = run(unit, words, gap=gap, stall=stall, seed=3)
        assert got == [int(v) for v in want]
        if stall == 0:
            assert {t - a for t, a in zip(taken, accepted)} == {unit.latency}
        if gap == stall == 0:
            assert accepted == list(range(accepted[0], accepted[0] + len(words)))


def test_tables_regions():
    tables = (activation_table("sigmoid", FP32), activation_table("tanh", FP32))
    unit = SharedActivation(tables, flush_subnormals=True, shifts="dsp")
    assert [table.depth for table in tables] == [1668, 1540]
    assert unit.table_bits == 11
    assert (unit.tables, unit.shifts, unit.latency) == (tables, "dsp", 9)


def test_validation():
    with pytest.raises(TypeError, match=r"^tables must be a non-empty tuple of "
                                        r"ActivationTable, not \[\]$"):
        SharedActivation([])
    with pytest.raises(ValueError, match=r"^the tables' min_exponent differ \(-8 and -6\)$"):
        SharedActivation((activation_table("sigmoid", FP32),
                          activation_table("tanh", FP32, min_exponent=-6)))
    with pytest.raises(ValueError, match=r"^shifts must be 'lut' or 'dsp', not 'x'$"):
        SharedActivation((activation_table("tanh", FP32),), shifts="x")

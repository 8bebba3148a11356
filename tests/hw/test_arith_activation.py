# amaranth: UnusedElaboratable=no
"""Float sigmoid / tanh by table and interpolation, and the derivative units (Amaranth
simulator).

Random patterns, values in the interesting range, segment boundaries and special values
under random gaps and backpressure, bit-exact against :mod:`nnrtl.sim.golden.activation`;
every pattern of an 8-bit format; the latency property against the measured latency and
one result per cycle without gaps or stalls; the table shared with the model;
constructor checks.
"""

import random
import zlib

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from nnrtl.hw.arith.activation import (ActivationTable, FloatActivation, FloatSigmoid,
                                       FloatSigmoidDerivative, FloatTanh, FloatTanhDerivative,
                                       activation_table)
from nnrtl.hw.arith.float import BF16, FP16, FP32, FloatFormat
from nnrtl.sim.golden import activation as golden
from nnrtl.sim.golden.float import special_values, to_bits
from nnrtl.sim.tb.bus_amaranth import stream_through

E4M3 = FloatFormat(4, 3)


def model(unit, x):
    """The golden model's outputs for ``unit`` on patterns ``x``."""
    flush = unit.flush_subnormals
    if isinstance(unit, FloatActivation):
        return golden.evaluate(unit.table, x, flush_subnormals=flush)
    if isinstance(unit, FloatSigmoidDerivative):
        return golden.sigmoid_derivative(unit.fmt, x, flush_subnormals=flush)
    return golden.tanh_derivative(unit.fmt, x, flush_subnormals=flush)


def run(unit, inputs, *, gap, stall, seed):
    """Stream ``inputs`` through ``unit``; return (accepted cycles, taken cycles, outputs)."""
    top = Module()  # a clock for units with no registers
    top.domains.sync = ClockDomain()
    top.submodules.dut = unit
    rng = random.Random(seed)
    result = []

    async def bench(ctx):
        result.extend(await stream_through(ctx, unit, inputs, len(inputs), rng=rng, gap=gap,
                                           stall=stall, timeout=50 * len(inputs) + 100))
        for _ in range(unit.latency + 2):
            await ctx.tick()
            assert not ctx.get(unit.o.valid), "a result beyond the expected ones"

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return tuple(result)


def check(unit, inputs, *, seed, patterns=((0.0, 0.0), (0.3, 0.5))):
    want = [int(y) for y in model(unit, np.asarray(inputs, dtype=np.uint64))]
    for gap, stall in patterns:
        accepted, taken, got = run(unit, inputs, gap=gap, stall=stall, seed=seed)
        assert got == want, f"results differ from the model (gap {gap}, stall {stall})"
        if stall == 0:
            assert {t - a for t, a in zip(taken, accepted)} == {unit.latency}
        if gap == 0 and stall == 0:
            assert accepted == list(range(accepted[0], accepted[0] + len(inputs)))


def inputs_for(unit, count, seed):
    """Random patterns, values where the function bends, segment boundaries, specials."""
    fmt = unit.fmt
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 1 << fmt.width, count // 3, dtype=np.uint64),
             to_bits(fmt, rng.normal(size=count // 3) * 3),
             np.asarray(list(special_values(fmt).values()), dtype=np.uint64)]
    if isinstance(unit, FloatActivation):
        boundaries = golden.sweep_patterns(fmt, count=1, random=0, table=unit.table)
        parts.append(rng.choice(boundaries, count // 3))
    else:
        parts.append(to_bits(fmt, rng.random(count // 3) * 2 - 1))
    return np.concatenate(parts)


UNITS = {
    "sigmoid_fp32": lambda: FloatSigmoid(FP32),
    "tanh_fp32_flush_shallow": lambda: FloatTanh(FP32, adder_stages=1, multiplier_stages=0,
                                                 flush_subnormals=True),
    "sigmoid_bf16_small_table": lambda: FloatSigmoid(BF16, segment_bits=2, min_exponent=-4,
                                                     max_exponent=3, adder_stages=2),
    "tanh_fp16_deep": lambda: FloatTanh(FP16, adder_stages=6, multiplier_stages=6),
    "sigmoid_fp32_flush_dsp_shifts": lambda: FloatActivation(
        activation_table("sigmoid", FP32), flush_subnormals=True, shifts="dsp"),
    "tanh_bf16_dsp_shifts": lambda: FloatActivation(activation_table("tanh", BF16),
                                                    adder_stages=2, shifts="dsp"),
    "sigmoid_derivative_fp32": lambda: FloatSigmoidDerivative(FP32),
    "sigmoid_derivative_bf16_flush": lambda: FloatSigmoidDerivative(
        BF16, adder_stages=0, multiplier_stages=2, flush_subnormals=True),
    "tanh_derivative_fp32": lambda: FloatTanhDerivative(FP32, adder_stages=2,
                                                        multiplier_stages=1),
    "tanh_derivative_fp16_combinational": lambda: FloatTanhDerivative(
        FP16, adder_stages=0, multiplier_stages=0),
}


@pytest.mark.parametrize("name", UNITS)
def test_matches_model(name):
    unit = UNITS[name]()
    seed = zlib.crc32(name.encode())
    check(unit, inputs_for(unit, 120, seed), seed=seed)


@pytest.mark.parametrize("unit", [
    FloatSigmoid(E4M3, segment_bits=1, min_exponent=-3, max_exponent=3),
    FloatTanh(E4M3, segment_bits=3, flush_subnormals=True, adder_stages=1),
    FloatSigmoidDerivative(E4M3, adder_stages=1, multiplier_stages=1),
    FloatTanhDerivative(E4M3, adder_stages=1, multiplier_stages=1, flush_subnormals=True),
], ids=["sigmoid", "tanh_flush", "sigmoid_derivative", "tanh_derivative_flush"])
def test_every_pattern_of_an_8_bit_format(unit):
    check(unit, list(range(1 << E4M3.width)), seed=3, patterns=[(0.2, 0.3)])


def test_latency_and_ports():
    assert FloatSigmoid(FP32).latency == 9
    assert FloatTanh(BF16, adder_stages=1, multiplier_stages=0).latency == 2
    assert FloatSigmoidDerivative(FP16).latency == 6
    assert FloatTanhDerivative(FP16, adder_stages=2, multiplier_stages=0).latency == 2
    unit = FloatTanh(BF16, flush_subnormals=True)
    assert unit.i.payload.shape().width == unit.o.payload.shape().width == 16
    assert (unit.fmt, unit.function, unit.flush_subnormals) == (BF16, "tanh", True)
    assert (unit.adder_stages, unit.multiplier_stages) == (3, 3)


def test_units_share_the_table_with_the_model():
    unit = FloatSigmoid(FP16, segment_bits=4)
    assert unit.table == activation_table("sigmoid", FP16, segment_bits=4)
    assert unit.table == golden.activation_table("sigmoid", FP16, segment_bits=4)
    assert FloatActivation(unit.table).table is unit.table
    table = FloatTanh(FP32).table
    assert (table.segment_bits, table.min_exponent, table.max_exponent) == (6, -8, 4)
    assert (table.segments, table.depth, table.offset_bits) == (768, 1540, 17)
    assert FloatSigmoid(FP32).table.depth == 1668
    assert FloatSigmoid(BF16).table.segment_bits == 3
    assert FloatTanh(E4M3).table.min_exponent == -6  # capped to the format's emin


@pytest.mark.parametrize("call, error, message", [
    (lambda: activation_table("relu", FP32), ValueError,
     r"^function must be one of sigmoid, tanh, not 'relu'$"),
    (lambda: FloatSigmoid("fp32"), TypeError, r"^fmt must be a FloatFormat, not 'fp32'$"),
    (lambda: FloatTanh(FP16, segment_bits=11), TypeError,
     r"^segment_bits must be an integer from 0 to 10, not 11$"),
    (lambda: FloatTanh(FP16, min_exponent=-15), TypeError,
     r"^min_exponent must be an integer from -14 to 15, not -15$"),
    (lambda: FloatTanh(FP16, max_exponent=17), TypeError,
     r"^max_exponent must be an integer from -13 to 16, not 17$"),
    (lambda: FloatSigmoid(FP32, min_exponent=2, max_exponent=2), ValueError,
     r"^max_exponent \(2\) must exceed min_exponent \(2\)$"),
    (lambda: FloatSigmoid(FP32, adder_stages=0), TypeError,
     r"^adder_stages must be an integer from 1 to 8, not 0$"),
    (lambda: FloatTanh(FP32, multiplier_stages=7), TypeError,
     r"^multiplier_stages must be an integer from 0 to 6, not 7$"),
    (lambda: FloatTanh(FP32, flush_subnormals="yes"), TypeError,
     r"^flush_subnormals must be a bool, not 'yes'$"),
    (lambda: FloatActivation(3), TypeError, r"^table must be an ActivationTable, not 3$"),
    (lambda: FloatActivation(activation_table("tanh", FP32), shifts="dsps"), ValueError,
     r"^shifts must be 'lut' or 'dsp', not 'dsps'$"),
    (lambda: FloatSigmoidDerivative(FP32, adder_stages=-1), TypeError,
     r"^adder_stages must be an integer from 0 to 8, not -1$"),
    (lambda: FloatTanhDerivative(BF16, multiplier_stages=2.0), TypeError,
     r"^multiplier_stages must be an integer from 0 to 6, not 2\.0$"),
    (lambda: FloatTanhDerivative(None), TypeError, r"^fmt must be a FloatFormat, not None$"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_table_is_a_frozen_record():
    table = FloatSigmoid(BF16).table
    assert isinstance(table, ActivationTable)
    with pytest.raises(AttributeError):
        table.segment_bits = 2

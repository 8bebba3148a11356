# amaranth: UnusedElaboratable=no
"""FloatAdd and FloatMul (Amaranth simulator) against the numpy models, bit for bit;
FloatAdd with both ways of building its shifts (``shifts="lut"`` and ``"dsp"``), FloatMul
with both places of its normalisation (``normalize="operand"``, the default for these
formats, and ``"product"``, the tiny formats' only one)."""

import random
import re

import numpy as np
import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from nnrtl.hw.arith.float import BF16, FP16, FP32, FloatAdd, FloatFormat, FloatMul
from nnrtl.hw.arith.multiplier import dsp_slices, rtl_products
from nnrtl.sim.runner import to_verilog
from nnrtl.sim.golden.float import (float_add, float_mul, float_sub, random_operands,
                                    special_values)
from nnrtl.sim.tb.bus_amaranth import stream_receive, stream_send


FORMATS = [FP32, BF16, FP16]
MODELS = {"add": float_add, "sub": float_sub, "mul": float_mul}



def exponent_gap_pairs(rng, count):
    """``count`` fp32 operand pairs (bit patterns) whose exponents differ by 0 to 39 in
    turn, with random signs and fractions (the smaller operand subnormal where the gap
    reaches below the normal range)."""
    difference = np.arange(count) % 40
    large = rng.integers(1, 255, count)
    small = np.clip(large - difference, 0, 254)
    fraction = rng.integers(0, 1 << 23, (2, count))
    sign = rng.integers(0, 2, (2, count))
    a = ((sign[0] << 31) | (large << 23) | fraction[0]).astype(np.uint64)
    b = ((sign[1] << 31) | (small << 23) | fraction[1]).astype(np.uint64)
    return a, b

def make_unit(op, fmt, *, variant=None, **kwargs):
    """``variant``: the adder's ``shifts`` or the multiplier's ``normalize`` (None: the
    default)."""
    if variant is not None:
        kwargs["normalize" if op == "mul" else "shifts"] = variant
    return (FloatMul if op == "mul" else FloatAdd)(fmt, **kwargs)


def run(dut, *testbenches):
    top = Module()  # gives a combinational unit (stages=0) a clock to step with
    top.domains.sync = ClockDomain()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    sim.run()


def payloads(op, a, b):
    """Input payloads: an add unit gets the subtract bit (set for sub)."""
    extra = {} if op == "mul" else {"subtract": int(op == "sub")}
    return [{"a": int(x), "b": int(y), **extra} for x, y in zip(a, b)]


def stream_through(dut, op, a, b, *, gap=0.0, stall=0.0, seed=0):
    """Send the pairs through ``dut`` with random gaps and backpressure; the results."""
    results = []

    async def source(ctx):
        await stream_send(ctx, dut.i, payloads(op, a, b), rng=random.Random(seed),
                          gap_probability=gap)

    async def sink(ctx):
        results.extend(await stream_receive(ctx, dut.o, len(a), rng=random.Random(seed + 1),
                                            stall_probability=stall))

    run(dut, source, sink)
    return np.array(results, dtype=np.uint64)


def expected(op, fmt, a, b, flush):
    return MODELS[op](fmt, a, b, flush_subnormals=flush).astype(np.uint64)


def special_pairs(fmt):
    values = list(special_values(fmt).values())
    return (np.array([x for x in values for _ in values], dtype=np.uint64),
            np.array([y for _ in values for y in values], dtype=np.uint64))


def assert_bit_exact(op, fmt, a, b, got, flush):
    want = expected(op, fmt, a, b, flush)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), [(hex(int(a[k])), hex(int(b[k])), hex(int(got[k])), hex(int(want[k])))
                          for k in bad[:8]]


# every stages setting for fp32, the shallowest, default and deepest for the others;
# flush_subnormals at the shallowest and deepest
PIPELINES = [(0, False), (1, False), (2, False), (3, False), (4, False), (5, False),
             (6, False), (1, True), (6, True)]
RANDOM_CASES = [(op, fmt, stages, flush)
                for op in ("add", "sub", "mul") for fmt in FORMATS
                for stages, flush in PIPELINES if fmt == FP32 or stages not in (2, 4, 5)]
# the adder's 7 and 8 stages (η-LSTM's adder has 8): fp32, and bf16 flushing at 8
RANDOM_CASES += [(op, fmt, stages, flush) for op in ("add", "sub")
                 for fmt, stages, flush in [(FP32, 7, False), (FP32, 8, False), (BF16, 8, True)]]
RANDOM_CASES = [(*case, None if case[0] == "mul" else "lut") for case in RANDOM_CASES]
# the multiplier's normalisation on the product: fp32 unregistered, at 3 and 6 stages, bf16
RANDOM_CASES += [("mul", fmt, stages, False, "product")
                 for fmt, stages in [(FP32, 0), (FP32, 3), (FP32, 6), (BF16, 3)]]
# the DSP shifts: fp32 (the split alignment product) unregistered, at 3 and 8 stages (the
# DSP's input and output registers), flushing at 8; bf16 and fp16 (one product)
RANDOM_CASES += [(op, fmt, stages, flush, "dsp") for op in ("add", "sub")
                 for fmt, stages, flush in [(FP32, 0, False), (FP32, 3, False), (FP32, 8, False),
                                            (FP32, 8, True), (BF16, 8, True), (FP16, 3, False)]]


@pytest.mark.parametrize("op, fmt, stages, flush, shifts", RANDOM_CASES, ids=str)
def test_random_operands_bit_exact(op, fmt, stages, flush, shifts):
    seed = sum(map(ord, f"{op}{fmt}{stages}{flush}"))
    a, b, _kinds = random_operands(fmt, op, 300, seed)
    dut = make_unit(op, fmt, stages=stages, flush_subnormals=flush, variant=shifts)
    got = stream_through(dut, op, a, b, gap=0.3, stall=0.3, seed=seed)
    assert_bit_exact(op, fmt, a, b, got, flush)


@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("op, shifts", [("add", "lut"), ("sub", "lut"), ("mul", "operand"),
                                        ("mul", "product"), ("add", "dsp"), ("sub", "dsp")],
                         ids=str)
def test_special_value_table(op, shifts, fmt, flush):
    """Every pairing of ±0, ±min/max subnormal, ±min/max normal, ±1, ±inf, ±qNaN, ±sNaN."""
    a, b = special_pairs(fmt)
    dut = make_unit(op, fmt, stages=2, flush_subnormals=flush, variant=shifts)
    assert_bit_exact(op, fmt, a, b, stream_through(dut, op, a, b), flush)


@pytest.mark.parametrize("fmt, flush", [(FloatFormat(3, 2), False), (FloatFormat(2, 2), True)],
                         ids=str)
@pytest.mark.parametrize("op, shifts", [("add", "lut"), ("mul", None), ("add", "dsp")], ids=str)
def test_tiny_formats_exhaustively(op, shifts, fmt, flush):
    """All operand pairs of a 6-bit format (3 exponent bits, 2 fraction bits: 4096 pairs)
    and, flushing subnormals, of a 5-bit one (2 exponent bits, 1024 pairs)."""
    patterns = np.arange(1 << fmt.width, dtype=np.uint64)
    a, b = np.repeat(patterns, len(patterns)), np.tile(patterns, len(patterns))
    dut = make_unit(op, fmt, stages=2, flush_subnormals=flush, variant=shifts)
    assert_bit_exact(op, fmt, a, b, stream_through(dut, op, a, b), flush)


@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("op", ["add", "sub"])
def test_dsp_shifts_at_every_exponent_difference(op, flush):
    """fp32 pairs with exponent differences 0 to 39 (both halves of the split alignment
    product, its clamp at 27, cancellations needing every normalising shift), random
    signs and fractions, some with a subnormal smaller operand."""
    rng = np.random.default_rng(17 + flush)
    count = 320
    a, b = exponent_gap_pairs(rng, count)
    # a quarter of the pairs: b = a with low fraction bits changed and the effective
    # operation a subtraction (deep cancellation)
    near = rng.random(count) < 0.25
    flip = np.uint64(1 << 31) if op == "add" else np.uint64(0)
    b[near] = a[near] ^ rng.integers(1, 1 << 12, int(near.sum())).astype(np.uint64) ^ flip
    dut = make_unit(op, FP32, stages=0, flush_subnormals=flush, shifts="dsp")
    assert_bit_exact(op, FP32, a, b, stream_through(dut, op, a, b), flush)


def test_dsp_shifts_are_products():
    """The DSP adder's shifts are ``*`` cells: fp32 one signed 25 x 18 alignment product
    (one DSP48E2, its post-adder the significands' sum) and one 26 x 26 normalising
    product (two), the LUT adder has none."""
    assert rtl_products(FloatAdd(FP32, stages=8)) == []
    products = rtl_products(FloatAdd(FP32, stages=8, shifts="dsp"))
    assert sorted(products) == [(25, True, 18, True), (26, False, 26, False)]
    assert sum(dsp_slices(a, b, "xcup", a_signed=sa, b_signed=sb)
               for a, sa, b, sb in products) == 3


def test_dsp_adder_registers_stay_flip_flops():
    """The ``"dsp"`` adder's pipeline registers carry ``keep`` and ``shreg_extract =
    "no"`` (no shift-register LUTs); the ``"lut"`` adder's Verilog has neither."""
    dsp = to_verilog(FloatAdd(FP32, stages=8, flush_subnormals=True, shifts="dsp"), "add")
    lut = to_verilog(FloatAdd(FP32, stages=8, flush_subnormals=True), "add")
    registers = re.findall(r"^\s*reg (?:signed )?(?:\[\d+:0\] )?(\w+)", dsp, re.M)
    # the valid bits have a reset (never a shift register) and no attribute
    named = [name for name in registers
             if name.split("_")[0] in FloatAdd.STEPS and not name.endswith("_valid")]
    assert len(named) > 40
    for name in named:
        assert re.search(r'shreg_extract = "no" \*\)\s*reg (?:signed )?(?:\[\d+:0\] )?'
                         + name + r"\b", dsp), name
    assert "keep" in dsp and "shreg_extract" not in lut and "keep" not in lut


@pytest.mark.parametrize("op, stages", [(op, stages) for op in ("add", "mul")
                                         for stages in (0, 1, 3, 6)] + [("add", 8)])
def test_latency_and_full_throughput(op, stages):
    """With o.ready high, n pairs sent back to back give n results in n + latency cycles,
    the first one ``latency`` cycles after the first input handshake."""
    fmt = FP32
    dut = make_unit(op, fmt, stages=stages)
    assert dut.latency == stages
    a, b, _kinds = random_operands(fmt, op, 50, 7)
    items = payloads(op, a, b)
    seen = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.valid, 1)
        for cycle in range(len(items) + stages + 2):
            if cycle < len(items):
                ctx.set(dut.i.payload, items[cycle])
            else:
                ctx.set(dut.i.valid, 0)
            _clk, _rst, i_ready, o_valid, o_payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.payload)
            assert i_ready or cycle >= len(items)
            if o_valid:
                seen.append((cycle, o_payload))

    run(dut, bench)
    assert [cycle for cycle, _ in seen] == list(range(stages, stages + len(items)))
    got = np.array([value for _, value in seen], dtype=np.uint64)
    assert_bit_exact(op, fmt, a, b, got, False)


@pytest.mark.parametrize("op", ["add", "mul"])
def test_stall_holds_the_whole_pipeline(op):
    """While o.ready is low and o.valid high, i.ready is low and the result holds."""
    fmt = BF16
    dut = make_unit(op, fmt, stages=4)
    a, b, _kinds = random_operands(fmt, op, 8, 8)
    items = payloads(op, a, b)

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, items[0])
        ctx.set(dut.o.ready, 0)
        accepted = 0
        for _ in range(4):  # fill: the first result reaches o after 4 cycles
            *_, i_ready = await ctx.tick().sample(dut.i.ready)
            accepted += i_ready
            ctx.set(dut.i.payload, items[accepted])
        assert accepted == 4 and ctx.get(dut.o.valid)
        held = ctx.get(dut.o.payload)
        for _ in range(5):
            assert not ctx.get(dut.i.ready)
            await ctx.tick()
            assert ctx.get(dut.o.valid) and ctx.get(dut.o.payload) == held
        assert held == expected(op, fmt, a[:1], b[:1], False)[0]

    run(dut, bench)


def test_payload_layouts_and_properties():
    add = FloatAdd(FP16, stages=5, flush_subnormals=True)
    assert add.fmt is FP16 and add.stages == 5 and add.flush_subnormals
    assert add.shifts == "lut" and FloatAdd(FP16, shifts="dsp").shifts == "dsp"
    assert add.latency == 5
    assert add.registered_steps == ("swap", "align", "add", "count", "round")
    assert [(name, field.offset, field.width) for name, field in add.payload_layout] == \
        [("a", 0, 16), ("b", 16, 16), ("subtract", 32, 1)]
    assert add.o.payload.shape().width == 16
    mul = FloatMul(FP32)
    assert mul.stages == mul.latency == 3 and not mul.flush_subnormals
    assert mul.registered_steps == ("multiply", "normalize", "round")
    assert [(name, field.offset) for name, field in mul.payload_layout] == [("a", 0), ("b", 32)]
    assert FloatMul(FP32, stages=6).registered_steps == FloatMul.STEPS
    assert FloatAdd(BF16, stages=0).registered_steps == ()
    assert FloatAdd(FP32, stages=6).registered_steps == (
        "swap", "align", "add", "count", "normalize", "round")
    assert FloatAdd(FP32, stages=7).registered_steps == (
        "swap", "align", "add", "zeros", "count", "normalize", "round")
    assert FloatAdd(FP32, stages=8).registered_steps == FloatAdd.STEPS
    assert FloatAdd(FP32, stages=8).latency == 8


def test_formats():
    assert (FP32.width, FP32.bias, FP32.precision, FP32.emin, FP32.emax) == \
        (32, 127, 24, -126, 127)
    assert (FP32.canonical_nan, BF16.canonical_nan, FP16.canonical_nan) == \
        (0x7fc00000, 0x7fc0, 0x7e00)
    assert (FP16.infinity, FP16.max_finite, FP16.min_normal, FP16.sign_mask) == \
        (0x7c00, 0x7bff, 0x0400, 0x8000)
    assert (BF16.width, BF16.bias, BF16.name, str(FP16)) == (16, 127, "bf16", "fp16")
    assert FloatFormat(8, 23) == FP32 and FloatFormat(8, 23).name == "fp32"
    assert FloatFormat(4, 3).name == "e4m3" and FloatFormat(11, 52).width == 64


@pytest.mark.parametrize("args, message", [
    ((1, 23), r"^exponent_bits must be an integer from 2 to 11, not 1$"),
    ((12, 3), r"^exponent_bits must be an integer from 2 to 11, not 12$"),
    ((8.0, 23), r"^exponent_bits must be an integer from 2 to 11, not 8\.0$"),
    ((True, 23), r"^exponent_bits must be an integer from 2 to 11, not True$"),
    ((8, 0), r"^mantissa_bits must be an integer from 1 to 52, not 0$"),
    ((5, 53), r"^mantissa_bits must be an integer from 1 to 52, not 53$"),
    ((5, "10"), r"^mantissa_bits must be an integer from 1 to 52, not '10'$"),
])
def test_format_checks(args, message):
    with pytest.raises(TypeError, match=message):
        FloatFormat(*args)


@pytest.mark.parametrize("unit, highest", [(FloatAdd, 8), (FloatMul, 6)])
def test_unit_checks(unit, highest):
    with pytest.raises(TypeError, match=r"^fmt must be a FloatFormat, not 'fp32'$"):
        unit("fp32")
    with pytest.raises(TypeError, match=rf"^stages must be an integer from 0 to {highest}, "
                                        rf"not {highest + 1}$"):
        unit(FP32, stages=highest + 1)
    with pytest.raises(TypeError, match=rf"^stages must be an integer from 0 to {highest}, "
                                        r"not -1$"):
        unit(FP32, stages=-1)
    with pytest.raises(TypeError, match=rf"^stages must be an integer from 0 to {highest}, "
                                        r"not True$"):
        unit(FP32, stages=True)
    with pytest.raises(TypeError, match=r"^flush_subnormals must be a bool, not 1$"):
        unit(FP32, flush_subnormals=1)


def test_adder_shifts_checks():
    with pytest.raises(ValueError, match=r"^shifts must be 'lut' or 'dsp', not 'barrel'$"):
        FloatAdd(FP32, shifts="barrel")
    with pytest.raises(ValueError, match=r"^shifts must be 'lut' or 'dsp', not None$"):
        FloatAdd(FP32, shifts=None)
    with pytest.raises(ValueError, match=r"^shifts 'dsp' takes a precision of at most 26 bits, "
                                         r"not 53$"):
        FloatAdd(FloatFormat(11, 52), shifts="dsp")


def test_multiplier_normalize_checks():
    assert FloatMul(FP32).normalize == "operand"
    assert FloatMul(FloatFormat(3, 2)).normalize == "product"
    with pytest.raises(ValueError, match=r"^normalize must be one of product, operand, not "
                                         r"'lut'$"):
        FloatMul(FP32, normalize="lut")
    with pytest.raises(ValueError, match=r"^normalize 'operand' needs bias - 1 > "
                                         r"mantissa_bits \+ 1 .*use 'product'$"):
        FloatMul(FloatFormat(3, 2), normalize="operand")


def test_multiplier_normalize_on_subnormal_operands():
    """fp32: every leading-zero count of a subnormal operand against normals across the
    exponent range (products normal, subnormal, vanishing), both normalisations."""
    fmt = FP32
    rng = np.random.default_rng(7)
    subnormals = [(1 << k) | int(rng.integers(0, 1 << k)) for k in range(fmt.mantissa_bits)]
    normals = [(int(e) << fmt.mantissa_bits) | int(rng.integers(0, 1 << fmt.mantissa_bits))
               for e in range(1, 255, 3)]
    pairs = [(s | (int(rng.integers(0, 2)) << 31), n) for s in subnormals for n in normals]
    pairs += [(n, s) for s, n in pairs[::7]]
    a = np.array([x for x, _ in pairs], dtype=np.uint64)
    b = np.array([y for _, y in pairs], dtype=np.uint64)
    for normalize in ("operand", "product"):
        dut = make_unit("mul", fmt, stages=3, variant=normalize)
        assert_bit_exact("mul", fmt, a, b, stream_through(dut, "mul", a, b), False)


@pytest.mark.parametrize("fmt, flush", [(FloatFormat(3, 2), False), (FloatFormat(2, 2), True)],
                         ids=str)
@pytest.mark.parametrize("op", ["add", "sub"])
def test_dsp_adder_at_eight_stages_exhaustively(op, fmt, flush):
    """The ``"dsp"`` adder at 8 stages (the rounding's overflow and flush registered
    with the special cases) on every operand pair of the tiny formats."""
    patterns = np.arange(1 << fmt.width, dtype=np.uint64)
    a, b = np.repeat(patterns, len(patterns)), np.tile(patterns, len(patterns))
    dut = make_unit(op, fmt, stages=8, flush_subnormals=flush, shifts="dsp")
    assert_bit_exact(op, fmt, a, b, stream_through(dut, op, a, b), flush)


@pytest.mark.parametrize("fmt, stages", [(FP32, 0), (FP32, 4), (FP32, 6), (BF16, 4),
                                         (FloatFormat(2, 2), 2)], ids=str)
def test_flushing_multiplier_with_dsp_shifts(fmt, stages):
    """The flushing multiplier's one-bit normalisation as a product (``shifts="dsp"``):
    random operands with gaps and backpressure, every special pairing, and every pair
    of a 5-bit format."""
    dut = FloatMul(fmt, stages=stages, flush_subnormals=True, shifts="dsp")
    seed = 90 + stages
    a, b, _kinds = random_operands(fmt, "mul", 300, seed)
    special_a, special_b = special_pairs(fmt)
    a, b = np.concatenate([a, special_a]), np.concatenate([b, special_b])
    if fmt.width == 5:
        patterns = np.arange(1 << fmt.width, dtype=np.uint64)
        a, b = np.repeat(patterns, len(patterns)), np.tile(patterns, len(patterns))
    got = stream_through(dut, "mul", a, b, gap=0.3, stall=0.3, seed=seed)
    assert_bit_exact("mul", fmt, a, b, got, True)


def test_flushing_multiplier_dsp_shift_is_a_product():
    """fp32: the significands' 24 x 24 product and the one-bit normalisation, 26 x 2
    (one DSP48E2 more than the ``"lut"`` form)."""
    lut = rtl_products(FloatMul(FP32, stages=4, flush_subnormals=True))
    dsp = rtl_products(FloatMul(FP32, stages=4, flush_subnormals=True, shifts="dsp"))
    assert sorted(dsp) == sorted(lut + [(26, False, 2, False)])
    assert sum(dsp_slices(a, b, "xcup", a_signed=sa, b_signed=sb)
               for a, sa, b, sb in dsp) == 3

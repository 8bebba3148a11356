# amaranth: UnusedElaboratable=no
"""PerfCounter (Amaranth simulator)."""

import random

import pytest
from amaranth.sim import Simulator

from nnrtl.hw.bus import PerfCounter


def run(dut, testbench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


@pytest.mark.parametrize("width, increment_width", [(64, 0), (4, 0), (64, 8), (6, 3)])
def test_counts_against_model(width, increment_width):
    rng = random.Random(width * 100 + increment_width)
    dut = PerfCounter(width, increment_width=increment_width)
    assert dut.width == width and dut.increment_width == increment_width
    assert dut.latency == 1

    async def bench(ctx):
        model = 0
        assert ctx.get(dut.count) == 0
        for _ in range(1000):
            enable = int(rng.random() < 0.7)
            clear = int(rng.random() < 0.02)
            step = 1
            ctx.set(dut.enable, enable)
            ctx.set(dut.clear, clear)
            if increment_width:
                step = rng.getrandbits(increment_width)
                ctx.set(dut.increment, step)
            await ctx.tick()
            if clear:
                model = 0
            elif enable:
                model = (model + step) % (1 << width)
            assert ctx.get(dut.count) == model

    run(dut, bench)


def test_clear_has_priority_and_wraps():
    dut = PerfCounter(3)

    async def bench(ctx):
        ctx.set(dut.enable, 1)
        values = []
        for _ in range(9):
            await ctx.tick()
            values.append(ctx.get(dut.count))
        assert values == [1, 2, 3, 4, 5, 6, 7, 0, 1]
        ctx.set(dut.clear, 1)
        await ctx.tick()
        assert ctx.get(dut.count) == 0
        ctx.set(dut.clear, 0)
        ctx.set(dut.enable, 0)
        await ctx.tick()
        assert ctx.get(dut.count) == 0

    run(dut, bench)


def test_ports():
    assert list(PerfCounter().signature.members) == ["enable", "clear", "count"]
    assert list(PerfCounter(32, increment_width=8).signature.members) == \
        ["enable", "clear", "increment", "count"]


@pytest.mark.parametrize("call, error, message", [
    (lambda: PerfCounter(0), TypeError, r"^width must be a positive integer, not 0$"),
    (lambda: PerfCounter(True), TypeError, r"^width must be a positive integer, not True$"),
    (lambda: PerfCounter(8, increment_width=-1), TypeError,
     r"^increment_width must be a non-negative integer, not -1$"),
    (lambda: PerfCounter(8, increment_width=9), ValueError,
     r"^increment_width \(9\) cannot exceed width \(8\)$"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()

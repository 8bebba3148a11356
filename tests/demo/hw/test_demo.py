# amaranth: UnusedElaboratable=no
"""The demo engine's configuration and MAC array (Amaranth simulator)."""

import random

import pytest
from amaranth.sim import Simulator

from nnrtl.hw.demo import DemoConfig, DemoEngine, MacArray
from nnrtl.sim.golden.demo import dot_products
from nnrtl.sim.tb.bus_amaranth import stream_receive, stream_send


@pytest.mark.parametrize("kwargs, error, message", [
    ({"lanes": 0}, TypeError, r"^lanes must be an integer from 1 to 4096, not 0$"),
    ({"lanes": True}, TypeError, r"^lanes must be an integer from 1 to 4096, not True$"),
    ({"operand_width": 28}, TypeError,
     r"^operand_width must be an integer from 2 to 27, not 28$"),
    ({"acc_width": 65}, TypeError, r"^acc_width must be an integer from 8 to 64, not 65$"),
    ({"acc_width": 36}, ValueError, r"^acc_width \(36\) must be a multiple of 8$"),
    ({"operand_width": 20, "acc_width": 32}, ValueError,
     r"^acc_width \(32\) must be at least twice operand_width \(20\)$"),
])
def test_config_rejects(kwargs, error, message):
    with pytest.raises(error, match=message):
        DemoConfig(**kwargs)


def test_components_reject_other_configs():
    with pytest.raises(TypeError, match=r"^config must be a DemoConfig, not 3$"):
        MacArray(3)
    with pytest.raises(TypeError, match=r"^config must be a DemoConfig, not None$"):
        DemoEngine(None)


def test_config_derived_widths():
    config = DemoConfig(lanes=3, operand_width=5, acc_width=16)
    assert config.in_width == 32          # 30 bits of operands padded to bytes
    assert config.out_width == 48
    assert config.dsp == 3
    assert config.model_cycles([4, 1, 2]) == 8
    names = [register.name for register in config.registers]
    assert names[:2] == ["control", "status"]
    assert {"cycles", "busy_cycles", "stall_cycles", "useful_macs"} <= set(names)


def random_frames(config, rng, count, max_beats):
    low, high = -(1 << (config.operand_width - 1)), (1 << (config.operand_width - 1)) - 1
    frames = []
    for _ in range(count):
        beats = rng.randint(1, max_beats)
        a = [[rng.choice([low, high, rng.randint(low, high)]) for _ in range(config.lanes)]
             for _ in range(beats)]
        b = [[rng.choice([low, high, rng.randint(low, high)]) for _ in range(config.lanes)]
             for _ in range(beats)]
        frames.append((a, b))
    return frames


@pytest.mark.parametrize("config, gaps", [
    (DemoConfig(), 0.0),
    (DemoConfig(lanes=3, operand_width=5, acc_width=16), 0.3),   # sums wrap at 16 bits
    (DemoConfig(lanes=1, operand_width=27, acc_width=64), 0.5),
])
def test_mac_array_matches_model(config, gaps):
    rng = random.Random(hash((config, gaps)) & 0xFFFF)
    frames = random_frames(config, rng, 15, 9)
    dut = MacArray(config)
    beats = [{"a": a_row, "b": b_row, "last": int(index == len(a) - 1)}
             for a, b in frames for index, (a_row, b_row) in enumerate(zip(a, b))]
    received = []

    async def driver(ctx):
        await stream_send(ctx, dut.i, beats, rng=rng, gap_probability=gaps)

    async def monitor(ctx):
        received.extend(await stream_receive(ctx, dut.o, len(frames), rng=rng,
                                             stall_probability=gaps))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(driver)
    sim.add_testbench(monitor)
    sim.run()
    assert [[int(v) for v in sums] for sums in received] == \
        [dot_products(a, b, config) for a, b in frames]


def test_mac_array_busy_cycles_equal_model_without_gaps():
    config = DemoConfig(lanes=2)
    rng = random.Random(7)
    frames = random_frames(config, rng, 6, 5)
    dut = MacArray(config)
    beats = [{"a": a_row, "b": b_row, "last": int(index == len(a) - 1)}
             for a, b in frames for index, (a_row, b_row) in enumerate(zip(a, b))]
    busy = 0

    async def driver(ctx):
        await stream_send(ctx, dut.i, beats)

    async def monitor(ctx):
        await stream_receive(ctx, dut.o, len(frames))

    async def count_busy(ctx):
        nonlocal busy
        async for _clk, _rst, value in ctx.tick().sample(dut.busy):
            busy += value

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(driver)
    sim.add_testbench(monitor)
    sim.add_process(count_busy)
    sim.run_until(200e-6)
    assert busy == config.model_cycles([len(a) for a, _b in frames])

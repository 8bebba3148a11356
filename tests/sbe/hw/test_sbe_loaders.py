# amaranth: UnusedElaboratable=no
"""The SBE stream loaders (:class:`nnrtl.hw.sbe.WeightLoader`, :class:`~nnrtl.hw.sbe.InputLoader`)
in the Amaranth simulator: the golden model's streams (:func:`~nnrtl.sim.golden.sbe.weight_beats`,
:func:`~nnrtl.sim.golden.sbe.input_beats`) driven with random gaps
(:mod:`nnrtl.sim.tb.bus_amaranth`), a stand-in controller that frees each buffer half a
few cycles after it is loaded, and every write checked against the matrix and the x
vectors read by the contract's formulas (not through the packer)."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.sbe import Controller, InputLoader, SbeConfig, WeightLoader
from nnrtl.sim.golden import sbe as golden
from nnrtl.sim.tb.bus_amaranth import stream_send

CONFIGS = {
    # Case 3, two row passes, batch 1, no x columns in the hidden blocks.
    "case3-passes": SbeConfig(input_size=20, hidden_size=6, pes=12, batch=1, blocks=13,
                              seq_len=4, bus_weights=4, post_units=1),
    # Two columns per cycle, two layers (case 1, then case 2), x columns in the h blocks.
    "two-columns": SbeConfig(input_size=30, hidden_size=6, pes=48, batch=3, blocks=3,
                             seq_len=7, bus_weights=8, post_units=2, layers=2,
                             batch_norm=True),
    # Resident weights (two blocks), a last partial batch.
    "resident": SbeConfig(input_size=10, hidden_size=6, pes=24, batch=2, blocks=2,
                          seq_len=5, bus_weights=4, post_units=2),
}
CASES = [(name, layer) for name, config in CONFIGS.items() for layer in range(config.layers)]


def run(dut, config, layer, steps, beats, watch, *, release_after, seed):
    """Start a run, send ``beats`` with random gaps, free each half ``release_after``
    cycles after its ``done``; returns per cycle the sampled values of ``watch`` (names),
    and the halves' fills in order."""
    rng = random.Random(seed)
    samples, fills = [], []

    async def source(ctx):
        await ctx.tick()
        await stream_send(ctx, dut.i, [int(b) for b in beats], rng=rng, gap_probability=0.3)

    async def controller(ctx):
        ctx.set(dut.steps, steps)
        ctx.set(dut.later_layer, int(layer > 0))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        loaded, release = [0, 0], [None, None]
        signals = [getattr(dut, name) for name in watch] + [dut.done, dut.busy]
        for cycle in range(100000):
            ctx.set(dut.loaded, loaded[0] | loaded[1] << 1)
            _clk, _rst, *values = await ctx.tick().sample(*signals)
            *values, done, busy = values
            samples.append(dict(zip(watch, values), loaded=tuple(loaded)))
            for half in (0, 1):
                if release[half] == cycle:
                    loaded[half], release[half] = 0, None
                if done >> half & 1:
                    assert not loaded[half], f"half {half} done while loaded"
                    fills.append(half)
                    loaded[half] = 1
                    if release_after is not None:
                        release[half] = cycle + release_after
            if cycle > 1 and not busy:
                return
        raise AssertionError("the loader never finished")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(controller)
    sim.run()
    return samples, fills


def weight_entry(config, shape, matrix, block, entry, group):
    """The words PE group ``group`` holds at ``entry`` of block ``block``, by the contract:
    entry ``p * BS + q``, PE ``e = c * RPP + r`` holds ``W[p * RPP + r, b * BC + q * k + c]``."""
    k, rpp = config.columns_per_cycle, config.rows_per_pass
    steps = shape.block_columns // k
    p, q = divmod(entry, steps)
    words = []
    for n in range(config.bus_weights):
        c, r = divmod(group * config.bus_weights + n, rpp)
        words.append(int(matrix[p * rpp + r, block * shape.block_columns + q * k + c]))
    return words


@pytest.mark.parametrize("name, layer", CASES)
def test_weight_loader(name, layer):
    config = CONFIGS[name]
    shape = config.layer(layer)
    steps = config.seq_len
    rng = np.random.default_rng(len(name) + layer)
    params = golden.random_layer(config, layer, rng)
    beats = [golden.pack_beat(b, config.operand_width)
             for b in golden.weight_beats(config, layer, params, steps)]
    half_depth = Controller.weight_half_depth(config)
    dut = WeightLoader(config, half_depth=half_depth)
    watch = ("hdr_en", "hdr_lane", "hdr_addr", "hdr_field", "hdr_data", "w_en", "w_group",
             "w_addr", "w_data", "words")
    resident = config.weights_resident
    samples, fills = run(dut, config, layer, steps, beats, watch,
                         release_after=None if resident else 5, seed=layer)

    # The header: every value of every unit, where the PPs keep it.
    layout = config.header_layout
    parts = {"bias": params.bias}
    if config.batch_norm:
        parts.update(scale=params.bn_scale, shift=params.bn_shift)
    expected = {}
    for unit in range(config.hidden_size):
        lane, addr = unit % config.post_units, unit // config.post_units
        for kind, codes in parts.items():
            for gate in range(4):
                expected[(lane, addr, layout.index(kind, gate))] = \
                    int(codes[4 * unit + gate]) & ((1 << config.acc_width) - 1)
    header = {(s["hdr_lane"], s["hdr_addr"], s["hdr_field"]): s["hdr_data"]
              for s in samples if s["hdr_en"]}
    assert header == expected
    assert sum(s["hdr_en"] for s in samples) == len(expected)

    # The blocks: each fill of a half holds the next block of the schedule.
    schedule = golden.block_schedule(config, layer, steps)
    assert len(fills) == len(schedule)
    if resident:
        assert fills == [block % 2 for block in schedule]
    else:
        assert fills == [index % 2 for index in range(len(schedule))]
    writes = [s for s in samples if s["w_en"]]
    assert sum(s["words"] for s in samples) == len(writes) == len(beats) - len(expected)
    entries = config.passes * shape.block_columns // config.columns_per_cycle
    groups = config.pes // config.bus_weights
    for index, block in enumerate(schedule):
        half = fills[index]
        chunk = writes[index * entries * groups:(index + 1) * entries * groups]
        for write in chunk:
            assert not write["loaded"][half], "a loaded half was overwritten"
            assert write["w_addr"] // half_depth == half
            entry = write["w_addr"] - half * half_depth
            words = golden.unpack_beat(write["w_data"], config.bus_weights,
                                       config.operand_width)
            assert words == weight_entry(config, shape, params.matrix, block, entry,
                                         write["w_group"])
        assert sorted((w["w_group"], w["w_addr"] % half_depth) for w in chunk) == \
            [(g, e) for g in range(groups) for e in range(entries)]


@pytest.mark.parametrize("name, layer", CASES)
def test_input_loader(name, layer):
    config = CONFIGS[name]
    shape = config.layer(layer)
    steps = config.seq_len
    k = config.columns_per_cycle
    xs = golden.random_inputs(config, steps, np.random.default_rng(layer), layer_index=layer)
    beats = [golden.pack_beat(b, config.operand_width)
             for b in golden.input_beats(config, layer, xs)]
    half_depth = Controller.vector_half_depth(config)
    dut = InputLoader(config, half_depth=half_depth)
    samples, fills = run(dut, config, layer, steps, beats, ("x_en", "x_addr", "x_data"),
                         release_after=3, seed=10 + layer)

    # Per batch: each x-only block for the batch's steps, then the tail of x columns in
    # the first hidden block; entry s * (its column steps) + q holds x[t0 + s, column].
    bc, first = shape.block_columns, shape.first_hidden_block
    tail = shape.x_columns_in_hidden_blocks
    expected = []
    for t0, n in golden.batches(config, steps):
        regions = [(b * bc, bc) for b in range(first)] + ([(first * bc, tail)] if tail else [])
        for start, width in regions:
            fill = {}
            for s in range(n):
                for q in range(width // k):
                    fill[s * (width // k) + q] = [
                        int(xs[t0 + s, start + q * k + c]) for c in range(k)]
            expected.append(fill)
    assert len(fills) == len(expected)
    assert fills == [index % 2 for index in range(len(expected))]
    writes = [s for s in samples if s["x_en"]]
    assert len(writes) == len(beats)
    position = 0
    for half, fill in zip(fills, expected):
        got = {}
        for write in writes[position:position + len(fill)]:
            assert not write["loaded"][half], "a loaded half was overwritten"
            assert write["x_addr"] // half_depth == half
            got[write["x_addr"] - half * half_depth] = golden.unpack_beat(
                write["x_data"], k, config.operand_width)
        assert got == fill
        position += len(fill)


def test_loaders_check_their_parameters():
    config = CONFIGS["resident"]
    with pytest.raises(TypeError, match=r"^config must be an SbeConfig, not 3$"):
        WeightLoader(3, half_depth=4)
    with pytest.raises(TypeError, match=r"^half_depth must be a positive integer, not 0$"):
        InputLoader(config, half_depth=0)
    with pytest.raises(ValueError, match=r"^half_depth \(7\) must be at least 8, the "
                                         r"entries of the largest block$"):
        WeightLoader(config, half_depth=7)
    with pytest.raises(TypeError):
        WeightLoader(config, 8)                       # keyword-only

# amaranth: UnusedElaboratable=no
"""The FARNN activation units (:class:`nnrtl.hw.farnn.activation.FwActivation`,
:class:`~nnrtl.hw.farnn.activation.BwActivation`) in the Amaranth simulator: every output
field bit for bit against :mod:`nnrtl.sim.golden.farnn.cells` on random fp32 operands with
special values (zeros, infinities, NaNs, subnormals), LSTM and GRU, under each
backpressure pattern of :mod:`nnrtl.sim.patterns` on ``o`` and gaps on ``i``; without
either, one cell per cycle with every result ``latency`` cycles after its input, for the
default, the shallowest and the deepest stages."""

import random

import numpy as np
import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from nnrtl.hw.arith.float import FP32
from nnrtl.hw.farnn.activation import BwActivation, FwActivation
from nnrtl.sim.golden.farnn import cells
from nnrtl.sim.golden.float import special_values, to_bits
from nnrtl.sim.patterns import PATTERNS, pause_pattern

GATES = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}


def operands(rng, shape, *, low=-4.0, high=4.0, specials=0.1):
    """fp32 patterns uniform in ``[low, high)`` at mixed scales, a share ``specials``
    replaced by special values."""
    values = rng.uniform(low, high, shape) * 2.0 ** rng.integers(-3, 2, size=shape)
    values = np.asarray(to_bits(FP32, values), dtype=np.uint32)
    table = np.array(sorted(special_values(FP32).values()), dtype=np.uint32)
    mask = rng.random(shape) < specials
    values[mask] = rng.choice(table, size=int(mask.sum()))
    return values


def stimulus(phase, cell, count, rng):
    """``(inputs, expected)``: ``count`` cells' input payloads (nested dicts) and the
    golden's output payloads."""
    units = len(GATES[cell])
    if phase == "fw":
        x = dict(imvm=operands(rng, (units, count)), rmvm=operands(rng, (units, count)))
        if cell == "lstm":
            x["c_prev"] = operands(rng, count)
            h, _c, saved = cells.lstm_forward(x["imvm"], x["rmvm"], x["c_prev"])
        else:
            x["bias_n"], x["h_prev"] = operands(rng, count), operands(rng, count)
            h, saved = cells.gru_forward(x["imvm"], x["rmvm"], x["bias_n"], x["h_prev"])
        y = dict(h=h, saved=saved)
    else:
        # saved gates mostly in their range, some anywhere
        saved = {name: np.where(rng.random(count) < 0.7,
                                operands(rng, count, low=-1, high=1, specials=0.05),
                                operands(rng, count))
                 for name in cells.SAVED[cell]}
        x = dict(saved=saved, dh=operands(rng, count), dy=operands(rng, count))
        if cell == "lstm":
            x["c_prev"], x["dc"] = operands(rng, count), operands(rng, count)
            d, dc_prev = cells.lstm_backward(saved, x["c_prev"], x["dh"], x["dy"], x["dc"])
            y = dict(d=np.stack([d[g] for g in GATES[cell]]), dc_prev=dc_prev)
        else:
            x["h_prev"] = operands(rng, count)
            d, d_rec, direct = cells.gru_backward(saved, x["h_prev"], x["dh"], x["dy"])
            y = dict(d=np.stack([d[g] for g in GATES[cell]]), dhn=d_rec["n"], direct=direct)
    return [pick(x, k) for k in range(count)], [pick(y, k) for k in range(count)]


def pick(tree, k):
    """Cell ``k`` of a tree of arrays (the last axis is the cell) as nested dicts/lists."""
    if isinstance(tree, dict):
        return {name: pick(value, k) for name, value in tree.items()}
    value = np.asarray(tree)
    return [int(v) for v in value[..., k]] if value.ndim == 2 else int(value[k])


def read(layout, view):
    """A sampled payload as nested dicts/lists of ints, following ``layout``."""
    if isinstance(layout, data.StructLayout):
        return {name: read(field.shape, view[name]) for name, field in layout}
    if isinstance(layout, data.ArrayLayout):
        return [read(layout.elem_shape, view[k]) for k in range(layout.length)]
    return int(view)


def simulate(unit, inputs, *, sink="none", source="none", seed=0):
    """Send ``inputs`` to ``unit`` (gaps by ``source``), take its results (stalls by
    ``sink``). Returns the results and the cycles of the input and output handshakes."""
    gaps = pause_pattern(source, random.Random(seed))
    stalls = pause_pattern(sink, random.Random(seed + 1))
    out = {"results": [], "sent": [], "taken": []}
    budget = 2000 + 300 * len(inputs) + unit.latency

    async def driver(ctx):
        cycle = 0
        for payload in inputs:
            while next(gaps):
                ctx.set(unit.i.valid, 0)
                await ctx.tick()
                cycle += 1
            ctx.set(unit.i.payload, payload)
            ctx.set(unit.i.valid, 1)
            while True:
                _clk, _rst, ready = await ctx.tick().sample(unit.i.ready)
                cycle += 1
                if ready:
                    break
            out["sent"].append(cycle - 1)
        ctx.set(unit.i.valid, 0)

    async def receiver(ctx):
        cycle = 0
        while len(out["results"]) < len(inputs):
            ready = 0 if next(stalls) else 1
            ctx.set(unit.o.ready, ready)
            _clk, _rst, valid, payload = await ctx.tick().sample(unit.o.valid, unit.o.payload)
            cycle += 1
            assert cycle < budget, "the unit hangs (a result lost?)"
            if valid and ready:
                out["results"].append(read(unit.output_layout, payload))
                out["taken"].append(cycle - 1)
        ctx.set(unit.o.ready, 1)
        for _ in range(unit.latency + 4):
            _clk, _rst, valid = await ctx.tick().sample(unit.o.valid)
            assert not valid, "a result beyond the inputs"

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.add_testbench(receiver)
    sim.run()
    return out


UNITS = {"fw": FwActivation, "bw": BwActivation}
KINDS = [(phase, cell) for phase in UNITS for cell in GATES]


def mismatches(results, expected):
    return [k for k, (got, want) in enumerate(zip(results, expected)) if got != want]


@pytest.mark.parametrize("sink", PATTERNS)
@pytest.mark.parametrize("phase, cell", KINDS, ids=[f"{p}-{c}" for p, c in KINDS])
def test_bit_exact_under_backpressure(phase, cell, sink):
    seed = 10 * KINDS.index((phase, cell)) + PATTERNS.index(sink)
    rng = np.random.default_rng(seed)
    count = 40
    inputs, expected = stimulus(phase, cell, count, rng)
    unit = UNITS[phase](cell)
    source = "random" if sink in ("random", "bursty") else "none"
    got = simulate(unit, inputs, sink=sink, source=source, seed=seed)
    assert len(got["results"]) == count
    assert mismatches(got["results"], expected) == []


@pytest.mark.parametrize("stages", [(4, 3), (1, 0), (6, 6)], ids=["default", "shallowest",
                                                                  "deepest"])
@pytest.mark.parametrize("phase, cell", KINDS, ids=[f"{p}-{c}" for p, c in KINDS])
def test_gapless_one_cell_per_cycle_at_the_latency(phase, cell, stages):
    rng = np.random.default_rng(11)
    count = 24
    inputs, expected = stimulus(phase, cell, count, rng)
    unit = UNITS[phase](cell, adder_stages=stages[0], multiplier_stages=stages[1])
    got = simulate(unit, inputs)
    assert mismatches(got["results"], expected) == []
    assert got["sent"] == list(range(count))   # one cell per cycle, never refused
    assert [t - s for s, t in zip(got["sent"], got["taken"])] == [unit.latency] * count


def test_latency_is_the_critical_path_of_the_units():
    """The docstring's paths, from the unit stages: a table unit is ``2A + M``, a
    derivative ``A + M``; the paper's LSTM FW takes 204 cycles."""
    for a, m in [(4, 3), (1, 0), (6, 6), (2, 5)]:
        stages = dict(adder_stages=a, multiplier_stages=m)
        assert FwActivation("lstm", **stages).latency == 6 * a + 4 * m
        assert FwActivation("gru", **stages).latency == 7 * a + 4 * m
        assert BwActivation("lstm", **stages).latency == 4 * a + 6 * m
        assert BwActivation("gru", **stages).latency == a + 4 * m
    assert FwActivation("lstm").units == {"add": 5, "mul": 3, "sigmoid": 3, "tanh": 2}
    assert BwActivation("gru").units == {"add": 3, "mul": 8, "sigmoid_derivative": 2,
                                         "tanh_derivative": 1}


def test_units_check_their_parameters():
    with pytest.raises(TypeError, match=r"^cell must be one of lstm, gru, not 'rnn'$"):
        FwActivation("rnn")
    with pytest.raises(TypeError, match=r"^fmt must be a FloatFormat, not 'fp32'$"):
        BwActivation("lstm", fmt="fp32")
    with pytest.raises(TypeError, match=r"^adder_stages must be an integer from 1 to 6, "
                                        r"not 0$"):
        FwActivation("gru", adder_stages=0)
    with pytest.raises(TypeError, match=r"^multiplier_stages must be an integer from 0 to 6, "
                                        r"not True$"):
        BwActivation("gru", multiplier_stages=True)
    with pytest.raises(TypeError):
        FwActivation("lstm", FP32)   # keyword-only

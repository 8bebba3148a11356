# amaranth: UnusedElaboratable=no
"""The FARNN activation units (:class:`nnrtl.hw.farnn.activation.FwActivation`,
:class:`~nnrtl.hw.farnn.activation.BwActivation`) in the Amaranth simulator: every output
field bit for bit against :mod:`nnrtl.sim.golden.farnn.cells` on random fp32 operands with
special values (zeros, infinities, NaNs, subnormals), LSTM and GRU, under each
backpressure pattern of :mod:`nnrtl.sim.patterns` on ``o`` and gaps on ``i``; without
either, one cell per cycle with every result ``latency`` cycles after its input, for the
default stages (the shallowest and the deepest in ``make test-slow``)."""

import itertools
import random

import numpy as np
import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from nnrtl.hw.arith.float import FP32
from nnrtl.hw.farnn.activation import BwActivation, FwActivation
from nnrtl.hw.farnn.config import GATES
from nnrtl.sim.golden.farnn import cells
from nnrtl.sim.golden.float import special_values, to_bits
from nnrtl.sim.patterns import PATTERNS, pause_pattern



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


def simulate(unit, segments, *, seed=0):
    """Run ``segments``, each ``(inputs, sink, source)``, one after another through one
    simulation of ``unit`` (a segment starts when the previous one's results are all
    taken): send the inputs with gaps by ``source``, take the results with stalls by
    ``sink`` (a pattern name, or an iterable of pause bits). Returns per segment the
    results and the cycles of the input and output handshakes."""
    out = [{"results": [], "sent": [], "taken": []} for _ in segments]
    done = []
    budget = 2000 + sum(300 * len(inputs) + unit.latency for inputs, _s, _g in segments)
    cycle = {"driver": 0, "receiver": 0}   # both count their ticks from time 0

    async def driver(ctx):
        async def tick(*signals):
            cycle["driver"] += 1
            return (await ctx.tick().sample(*signals))[2:]

        for k, (inputs, _sink, source) in enumerate(segments):
            gaps = pause_pattern(source, random.Random(seed + 2 * k))
            while len(done) < k:
                await tick()
            for payload in inputs:
                while next(gaps):
                    ctx.set(unit.i.valid, 0)
                    await tick()
                ctx.set(unit.i.payload, payload)
                ctx.set(unit.i.valid, 1)
                while not (await tick(unit.i.ready))[0]:
                    pass
                out[k]["sent"].append(cycle["driver"] - 1)
            ctx.set(unit.i.valid, 0)

    async def receiver(ctx):
        async def tick(*signals):
            cycle["receiver"] += 1
            assert cycle["receiver"] < budget, "the unit hangs (a result lost?)"
            return (await ctx.tick().sample(*signals))[2:]

        for k, (inputs, sink, _source) in enumerate(segments):
            stalls = (pause_pattern(sink, random.Random(seed + 2 * k + 1))
                      if isinstance(sink, str) else iter(sink))
            while len(out[k]["results"]) < len(inputs):
                ready = 0 if next(stalls) else 1
                ctx.set(unit.o.ready, ready)
                valid, payload = await tick(unit.o.valid, unit.o.payload)
                if valid and ready:
                    out[k]["results"].append(read(unit.output_layout, payload))
                    out[k]["taken"].append(cycle["receiver"] - 1)
            ctx.set(unit.o.ready, 1)
            for _ in range(unit.latency + 4):
                valid, = await tick(unit.o.valid)
                assert not valid, f"segment {k}: a result beyond the inputs"
            done.append(k)

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.add_testbench(receiver)
    sim.run()
    return out


UNITS = {"fw": FwActivation, "bw": BwActivation}
KINDS = [(phase, cell) for phase in UNITS for cell in GATES]
STAGES = {"default": (4, 3), "shallowest": (1, 0), "deepest": (6, 6)}


def mismatches(results, expected):
    return [k for k, (got, want) in enumerate(zip(results, expected)) if got != want]


@pytest.mark.parametrize("stages", [
    pytest.param(name, marks=[] if name == "default" else pytest.mark.slow) for name in STAGES])
@pytest.mark.parametrize("phase, cell", KINDS, ids=[f"{p}-{c}" for p, c in KINDS])
def test_bit_exact_under_backpressure_and_gapless_at_the_latency(phase, cell, stages):
    """One segment per backpressure pattern on ``o`` (with gaps on ``i`` under random and
    bursty); the first, without either, also gives one cell per cycle in and out, each
    result ``latency`` cycles after its input."""
    seed = 10 * KINDS.index((phase, cell)) + list(STAGES).index(stages)
    rng = np.random.default_rng(seed)
    adder_stages, multiplier_stages = STAGES[stages]
    unit = UNITS[phase](cell, adder_stages=adder_stages, multiplier_stages=multiplier_stages)
    counts = {"none": 64, "cycle": 24, "random": 24, "bursty": 24}
    segments, expected = [], []
    for sink in PATTERNS:
        inputs, want = stimulus(phase, cell, counts[sink], rng)
        segments.append((inputs, sink, "random" if sink in ("random", "bursty") else "none"))
        expected.append(want)
    got = simulate(unit, segments, seed=seed)
    for sink, result, want in zip(PATTERNS, got, expected):
        assert len(result["results"]) == counts[sink], sink
        assert mismatches(result["results"], want) == [], sink
    gapless, count = got[0], counts["none"]
    start = gapless["sent"][0]
    assert gapless["sent"] == list(range(start, start + count))   # never refused
    assert [t - s for s, t in zip(gapless["sent"], gapless["taken"])] == [unit.latency] * count
    # the patterns did hold results back: some waited beyond the latency
    assert max(t - s for s, t in zip(got[3]["sent"], got[3]["taken"])) > unit.latency + 30


def test_stalled_from_reset():
    """Inputs from the first cycle while ``o`` is not ready for 100 cycles: the units,
    still filling after reset, stay in step with the pipeline (module docstring), the
    input is refused once a result waits, and nothing is lost."""
    rng = np.random.default_rng(5)
    unit = FwActivation("lstm", adder_stages=2, multiplier_stages=1)
    inputs, want = stimulus("fw", "lstm", 60, rng)
    got, = simulate(unit, [(inputs, itertools.chain([1] * 100, itertools.repeat(0)),
                            "none")])
    assert mismatches(got["results"], want) == []
    # the pipeline holds `latency` cells; the next waits until the first result is taken
    assert got["sent"][:unit.latency + 1] == list(range(unit.latency)) + [100]
    assert got["taken"][0] == 100


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
    with pytest.raises(TypeError, match=r"^adder_stages must be an integer from 1 to 8, "
                                        r"not 0$"):
        FwActivation("gru", adder_stages=0)
    with pytest.raises(TypeError, match=r"^multiplier_stages must be an integer from 0 to 6, "
                                        r"not True$"):
        BwActivation("gru", multiplier_stages=True)
    with pytest.raises(TypeError):
        FwActivation("lstm", FP32)   # keyword-only

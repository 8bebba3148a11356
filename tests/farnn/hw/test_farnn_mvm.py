# amaranth: UnusedElaboratable=no
"""The FARNN MVM unit (:class:`nnrtl.hw.farnn.MVMUnit`) in the Amaranth simulator: a
weight load from :func:`~nnrtl.sim.golden.farnn.mvm.pack_weights`, then runs whose result
beats must equal :func:`~nnrtl.sim.golden.farnn.mvm.result_beats` bit for bit, under
gaps on the weight and vector inputs and every backpressure pattern of
:mod:`nnrtl.sim.patterns` on the results; without gaps and backpressure the run's cycles
must equal :func:`~nnrtl.sim.golden.farnn.mvm.cycles` and the load's
:func:`~nnrtl.sim.golden.farnn.mvm.load_cycles`."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.arith.float import FP32
from nnrtl.hw.farnn.mvm import MVMUnit
from nnrtl.sim.golden.farnn import mvm as golden
from nnrtl.sim.patterns import pause_pattern


def simulate(unit, matrix, steps, *, rounds, split_last=False, sink="none", source="none",
             seed=0, weight_stream=None):
    """Load ``matrix`` (or the raw ``weight_stream`` beats), then run each batch of
    ``steps`` (arrays ``(batch, n_in)``). Returns a dict: ``beats`` per step (lists of
    ``(lanes, last)``), ``first_x`` / ``last_o`` cycles per step, the counters after the
    load and after the runs, and the error flags."""
    n_in = matrix.shape[1] if matrix is not None else steps[0].shape[1]
    if weight_stream is None:
        weight_stream = golden.pack_weights(matrix, chains=unit.chains,
                                            chain_length=unit.chain_length,
                                            split=unit.split, rounds=rounds,
                                            split_last=split_last)
    weight_stream = [[int(v) for v in row] for row in weight_stream]
    rng = random.Random(seed)
    gaps = pause_pattern(source, rng)
    stalls = pause_pattern(sink, random.Random(seed + 1))
    expected_beats = rounds * steps[0].shape[0] * unit.chain_length
    # the longest bursty pause per beat, the load and a margin
    budget = 2000 + len(weight_stream) * 4 + 300 * expected_beats * len(steps)
    out = {"beats": [[] for _ in steps], "first_x": [], "last_o": [], "refused": 0}
    finished = []   # steps whose beats are all in

    async def driver(ctx):
        cycle = 0   # both testbenches count their ticks from time 0

        async def tick(*signals):
            nonlocal cycle
            _clk, _rst, *values = await ctx.tick().sample(*signals)
            cycle += 1
            return values

        async def send(port, payload):
            while next(gaps):
                ctx.set(port.valid, 0)
                await tick()
            ctx.set(port.payload, payload)
            ctx.set(port.valid, 1)
            while not (await tick(port.ready))[0]:
                pass
            ctx.set(port.valid, 0)
            return cycle - 1   # the cycle of the handshake

        async def wait_idle():
            while (await tick(unit.busy))[0]:
                pass

        ctx.set(unit.n_in, n_in)
        ctx.set(unit.rounds, rounds)
        ctx.set(unit.batch, steps[0].shape[0])
        ctx.set(unit.split_last, split_last)
        await wait_idle()
        for k, row in enumerate(weight_stream):
            await send(unit.w, {"data": row, "last": int(k == len(weight_stream) - 1)})
        await wait_idle()
        out["load_cycles"] = ctx.get(unit.load_cycles)
        for s, vectors in enumerate(steps):
            handshakes = [await send(unit.x, {"data": int(value), "last": int(e == n_in - 1)})
                          for vector in vectors for e, value in enumerate(vector)]
            out["first_x"].append(handshakes[0])
            while len(finished) <= s:
                await tick()

    async def receiver(ctx):
        cycle = 0
        for s in range(len(steps)):
            while len(out["beats"][s]) < expected_beats:
                ready = 0 if next(stalls) else 1
                ctx.set(unit.o.ready, ready)
                _clk, _rst, valid, payload = await ctx.tick().sample(unit.o.valid,
                                                                     unit.o.payload)
                cycle += 1
                assert cycle < budget, "the unit hangs (beats lost?)"
                out["refused"] += bool(valid and not ready)
                if valid and ready:
                    lanes = tuple(int(payload.data[j]) for j in range(unit.chains))
                    out["beats"][s].append((lanes, bool(payload.last)))
                    last_o = cycle - 1
            out["last_o"].append(last_o)
            ctx.set(unit.o.ready, 1)
            for _ in range(8):
                _clk, _rst, valid = await ctx.tick().sample(unit.o.valid)
                cycle += 1
                assert not valid, "a result beat beyond the expected ones"
            finished.append(s)
        for name in ("mac_cycles", "stall_cycles", "load_error", "vector_error", "busy"):
            out[name] = ctx.get(getattr(unit, name))

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.add_testbench(receiver)
    sim.run()
    return out


#: chains, chain_length, weight_depth, split, n_in, n_out, batch, adder_stages, multiplier_stages
CONFIGS = {
    "s1_rounds2": (2, 2, 16, 1, 5, 7, 1, 4, 3),
    "s1_L3_batch2": (2, 3, 32, 1, 13, 12, 2, 4, 3),
    "s1_rounds1_batch3": (2, 3, 16, 1, 3, 6, 3, 4, 3),
    "s2_split_last": (4, 2, 64, 2, 9, 12, 1, 4, 3),
    "s2_L3_batch2": (2, 3, 32, 2, 9, 8, 2, 2, 1),
    "s2_unsplit_full_last": (2, 2, 32, 2, 5, 8, 1, 4, 3),
    "s2_split_rounds3_batch2": (2, 2, 32, 2, 7, 9, 2, 3, 2),
    "s4_short_last_chunk": (4, 2, 64, 4, 10, 10, 1, 4, 3),
    "credit_bound": (2, 3, 32, 1, 3, 10, 2, 1, 6),
}


def _run_config(name, *, sink="none", source="none", steps=1, specials=0.0,
                dsp_usage="some"):
    chains, length, depth, split, n_in, n_out, batch, adder, mul = CONFIGS[name]
    unit = MVMUnit(FP32, chains=chains, chain_length=length, weight_depth=depth,
                   adder_stages=adder, multiplier_stages=mul, split=split,
                   dsp_usage=dsp_usage)
    rng = np.random.default_rng(sum(map(ord, name)))
    matrix = golden.random_operands(rng, (n_out, n_in), specials=specials)
    vectors = [golden.random_operands(rng, (batch, n_in), specials=specials)
               for _ in range(steps)]
    layout = golden.plan(n_out, n_in, chains=chains, chain_length=length, split=split)
    rounds, split_last = layout["rounds"], layout["split_last"]
    got = simulate(unit, matrix, vectors, rounds=rounds, split_last=split_last, sink=sink,
                   source=source, seed=len(name))
    for s, x in enumerate(vectors):
        want = golden.result_beats(matrix, x, chains=chains, chain_length=length,
                                   split=split, adder_stages=adder)
        assert got["beats"][s] == want, f"step {s}"
        # the unit's rows (not padded) are in the beats where the geometry says
        sums = golden.mvm_unit(matrix, x, chains=chains, chain_length=length,
                               split=split, adder_stages=adder)
        for r in range(rounds):
            split_round = split_last and r == rounds - 1
            for b in range(batch):
                for k in range(length):
                    lane_values = got["beats"][s][(r * batch + b) * length + k][0]
                    for j in range(chains // split if split_round else chains):
                        row = golden.row_index(r, k, j, chains=chains, chain_length=length,
                                               split=split, split_round=split_round)
                        if row < n_out:
                            assert lane_values[j] == int(sums[b, row])
    assert not got["load_error"] and not got["vector_error"] and not got["busy"]
    model = golden.cycles(n_in, rounds=rounds, batch=batch, chains=chains,
                          chain_length=length, split=split, split_last=split_last,
                          adder_stages=adder, multiplier_stages=mul)
    assert got["mac_cycles"] == steps * model["mac_cycles"]
    return got, layout, model


@pytest.mark.parametrize("name", CONFIGS)
def test_gapless_runs_are_bit_exact_and_take_the_model_cycles(name):
    chains, length, depth, split, n_in, n_out, batch, adder, mul = CONFIGS[name]
    got, layout, model = _run_config(name, steps=2)
    for s in range(2):
        assert got["last_o"][s] - got["first_x"][s] + 1 == model["cycles"], f"step {s}"
    assert got["load_cycles"] == golden.load_cycles(
        n_in, rounds=layout["rounds"], chain_length=length, split=split,
        split_last=layout["split_last"])
    assert got["stall_cycles"] == 0
    if name == "credit_bound":
        assert model["credit_bound"], "the stimulus misses the two-stream credit"
    if name == "s1_L3_batch2":
        assert not model["credit_bound"]
    if name.startswith("s2_split") or name.startswith("s4"):
        assert layout["split_last"]
    if name == "s2_unsplit_full_last":
        assert not layout["split_last"]


@pytest.mark.parametrize("dsp_usage", ["max", "none"])
def test_every_dsp_usage_gives_the_same_sums_and_cycles(dsp_usage):
    """The PEs and the fold adders at DSP usage ``"max"`` and ``"none"``: the same bits
    and cycles on a split unit (its fold adders in use)."""
    name = next(name for name in CONFIGS if name.startswith("s2_split"))
    got, _layout, model = _run_config(name, dsp_usage=dsp_usage)
    assert got["last_o"][0] - got["first_x"][0] + 1 == model["cycles"]


@pytest.mark.parametrize("sink", ["cycle", "random", "bursty"])
@pytest.mark.parametrize("name", ["s1_L3_batch2", "s2_L3_batch2", "credit_bound"])
def test_backpressure_and_gaps_lose_nothing(name, sink):
    got, _layout, _model = _run_config(name, sink=sink, source="random", specials=0.1)
    assert got["stall_cycles"] == got["refused"]
    if sink != "cycle":   # one pause in four may fall between beats every time
        assert got["refused"] > 0


def test_wrong_weight_stream_length_sets_load_error():
    unit = MVMUnit(FP32, chains=2, chain_length=2, weight_depth=16)
    rng = np.random.default_rng(1)
    matrix = golden.random_operands(rng, (4, 3))
    stream = golden.pack_weights(matrix, chains=2, chain_length=2)
    got = {}

    async def bench(ctx):
        ctx.set(unit.n_in, 3)
        ctx.set(unit.rounds, 1)
        ctx.set(unit.batch, 1)
        while ctx.get(unit.busy):
            await ctx.tick()
        for k, row in enumerate(stream[:-1]):   # one beat short, last on the one before
            ctx.set(unit.w.payload, {"data": [int(v) for v in row],
                                     "last": int(k == len(stream) - 2)})
            ctx.set(unit.w.valid, 1)
            await ctx.tick().until(unit.w.ready)
        ctx.set(unit.w.valid, 0)
        for _ in range(4):
            await ctx.tick()
        got["load_error"] = ctx.get(unit.load_error)
        got["busy"] = ctx.get(unit.busy)

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == {"load_error": 1, "busy": 0}


def test_misplaced_vector_last_sets_vector_error():
    unit = MVMUnit(FP32, chains=2, chain_length=2, weight_depth=16)
    rng = np.random.default_rng(2)
    matrix = golden.random_operands(rng, (4, 3))
    stream = golden.pack_weights(matrix, chains=2, chain_length=2)
    got = {}

    async def bench(ctx):
        ctx.set(unit.n_in, 3)
        ctx.set(unit.rounds, 1)
        ctx.set(unit.batch, 1)
        ctx.set(unit.o.ready, 1)
        while ctx.get(unit.busy):
            await ctx.tick()
        for k, row in enumerate(stream):
            ctx.set(unit.w.payload, {"data": [int(v) for v in row],
                                     "last": int(k == len(stream) - 1)})
            ctx.set(unit.w.valid, 1)
            await ctx.tick().until(unit.w.ready)
        ctx.set(unit.w.valid, 0)
        while ctx.get(unit.busy):
            await ctx.tick()
        got["before"] = ctx.get(unit.vector_error)
        for e in range(3):   # last on the second element instead of the third
            ctx.set(unit.x.payload, {"data": 0x3F800000, "last": int(e == 1)})
            ctx.set(unit.x.valid, 1)
            await ctx.tick().until(unit.x.ready)
        ctx.set(unit.x.valid, 0)
        await ctx.tick().until(~unit.busy)
        got["after"] = ctx.get(unit.vector_error)
        got["load_error"] = ctx.get(unit.load_error)

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == {"before": 0, "after": 1, "load_error": 0}


def test_paper_slice_arithmetic_at_full_size():
    """1,024 x 1,024 (Sec. 5.1.3): the rounds, weights per PE and MAC cycles are the
    paper's; the totals add each stream's fill and collection (reported, not the
    paper's)."""
    cases = golden.paper_cases()
    assert {k: (v["rounds"], v["words_per_pe"], v["mac_cycles"]) for k, v in cases.items()} \
        == {"256 PEs": (4, 4096, 4096), "768 PEs": (2, 2048, 2048),
            "768 PEs, split 2": (2, 1536, 1536)}
    assert all(not case["credit_bound"] for case in cases.values())
    assert cases["768 PEs, split 2"]["cycles"] < cases["768 PEs"]["cycles"]


def test_scaled_paper_shapes_match_the_simulation():
    """The paper's three shapes scaled down (rows per PE kept): 4 rounds on 4 PEs;
    8 rows on 6 PEs (2 rounds, the second partly idle); the same with split 2 (the second
    round split: half the elements)."""
    for chains, length, split, n, macs in ((2, 2, 1, 16, 64), (2, 3, 1, 8, 16),
                                           (2, 3, 2, 8, 12)):
        unit = MVMUnit(FP32, chains=chains, chain_length=length, weight_depth=64,
                       split=split)
        rng = np.random.default_rng(n + split)
        matrix = golden.random_operands(rng, (n, n))
        x = golden.random_operands(rng, (1, n))
        layout = golden.plan(n, n, chains=chains, chain_length=length, split=split)
        got = simulate(unit, matrix, [x], rounds=layout["rounds"],
                       split_last=layout["split_last"])
        assert got["beats"][0] == golden.result_beats(
            matrix, x, chains=chains, chain_length=length, split=split,
            adder_stages=4)
        model = golden.cycles(n, rounds=layout["rounds"], chains=chains,
                              chain_length=length, split=split,
                              split_last=layout["split_last"], adder_stages=4,
                              multiplier_stages=3)
        assert got["last_o"][0] - got["first_x"][0] + 1 == model["cycles"]
        assert got["mac_cycles"] == model["mac_cycles"] == macs


def test_mvm_unit_checks_its_parameters():
    with pytest.raises(TypeError, match=r"^fmt must be a FloatFormat, not 3$"):
        MVMUnit(3, chain_length=2, weight_depth=16)
    with pytest.raises(TypeError, match=r"^chain_length must be a positive integer, not 0$"):
        MVMUnit(FP32, chain_length=0, weight_depth=16)
    with pytest.raises(ValueError, match=r"^split \(3\) must divide chains \(16\)$"):
        MVMUnit(FP32, chain_length=2, weight_depth=16, split=3)
    with pytest.raises(TypeError, match=r"^adder_stages must be an integer from 1 to 8, "
                                        r"not 0$"):
        MVMUnit(FP32, chain_length=2, weight_depth=16, adder_stages=0)
    unit = MVMUnit(FP32, chain_length=3, weight_depth=16, split=4)
    assert (unit.lanes, unit.pes, unit.reduction_cycles) == (4, 48, 11)
    assert len(unit.w.payload.data.as_value()) == len(unit.o.payload.data.as_value()) == 512


def test_two_matrices_at_two_base_addresses():
    """A PE holds two matrices (the engine's gate matrix and projection): matrix ``a``
    loaded at ``base`` 0, ``b`` at ``base`` = ``a``'s words per PE, each with its own
    ``n_in``/``rounds``/``split_last``; runs of ``b`` then ``a`` are both bit-exact, so
    neither load overwrote the other."""
    chains, length, split = 2, 2, 2
    unit = MVMUnit(FP32, chains=chains, chain_length=length, weight_depth=32, split=split)
    rng = np.random.default_rng(12)
    shapes = {"a": (7, 5), "b": (3, 9)}
    matrices = {name: golden.random_operands(rng, shape) for name, shape in shapes.items()}
    vectors = {name: golden.random_operands(rng, (1, shape[1]))
               for name, shape in shapes.items()}
    plans = {name: golden.plan(*shapes[name], chains=chains, chain_length=length, split=split)
             for name in shapes}
    streams = {name: golden.pack_weights(matrices[name], chains=chains, chain_length=length,
                                         split=split, rounds=plans[name]["rounds"],
                                         split_last=plans[name]["split_last"])
               for name in shapes}
    bases = {"a": 0, "b": len(streams["a"]) // length}
    got = {}

    async def bench(ctx):
        def configure(name):
            ctx.set(unit.n_in, shapes[name][1])
            ctx.set(unit.rounds, plans[name]["rounds"])
            ctx.set(unit.split_last, plans[name]["split_last"])
            ctx.set(unit.batch, 1)
            ctx.set(unit.base, bases[name])

        async def idle():
            for _ in range(3):                  # the configuration settles
                await ctx.tick()
            while ctx.get(unit.busy):
                await ctx.tick()

        ctx.set(unit.o.ready, 1)
        for name in ("a", "b"):
            configure(name)
            await idle()
            rows = [[int(v) for v in row] for row in streams[name]]
            for k, row in enumerate(rows):
                ctx.set(unit.w.payload, {"data": row, "last": int(k == len(rows) - 1)})
                ctx.set(unit.w.valid, 1)
                while not (await ctx.tick().sample(unit.w.ready))[2]:
                    pass
            ctx.set(unit.w.valid, 0)
        for name in ("b", "a"):
            configure(name)
            await idle()
            elements = [int(v) for v in vectors[name][0]]
            beats, e = [], 0
            expected = plans[name]["rounds"] * length
            for _ in range(500):
                if e < len(elements):
                    ctx.set(unit.x.payload, {"data": elements[e],
                                             "last": int(e == len(elements) - 1)})
                ctx.set(unit.x.valid, int(e < len(elements)))
                _clk, _rst, x_ready, valid, payload = await ctx.tick().sample(
                    unit.x.ready, unit.o.valid, unit.o.payload)
                e += bool(x_ready and e < len(elements))
                if valid:
                    beats.append((tuple(int(payload.data[j]) for j in range(chains)),
                                  bool(payload.last)))
                if len(beats) == expected:
                    break
            ctx.set(unit.x.valid, 0)
            got[name] = beats
        got["load_error"] = ctx.get(unit.load_error)

    sim = Simulator(unit)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not got["load_error"]
    for name in shapes:
        assert got[name] == golden.result_beats(matrices[name], vectors[name], chains=chains,
                                                chain_length=length, split=split,
                                                adder_stages=4), name

"""The SBE performance model: the paper's equations and figures, and the schedule's timeline
against an independent cycle-by-cycle simulation of the same schedule."""

import dataclasses
import math
import random

import numpy as np
import pytest

from nnrtl.gen.sbe import perf
from nnrtl.gen.sbe.perf import (balanced_batch, bram_eq7, case1_performance,
                                case2_performance, case3_performance, gops,
                                lower_bound_cycles, model_cycles, paper_performance,
                                predict, steady_state_performance)
from nnrtl.hw.sbe import PRESETS, VC709_LSTM512, ZC706_LSTM256, SbeConfig

Z = ZC706_LSTM256


# -- The paper's equations ---------------------------------------------------------------

def test_eq1_balanced_batch():
    # "the best batch size on Zynq can be easily calculated from equation (1), which shows
    # that B = Npe/Nt = 64"; "If the DMA data bus is 512-bit then the proper batch size is 32"
    assert balanced_batch(1024, 16) == 64
    assert balanced_batch(1024, 32) == 32


def test_eq2_eq3_roofline_case1():
    # Fig. 9 (left): P = B Nt below B = Npe / Nt, then flat at Npe.
    assert [case1_performance(1024, 16, b) for b in (8, 32, 63, 64, 128)] == \
        [128, 512, 1008, 1024, 1024]


def test_eq4_case2():
    assert case2_performance(1024, 16) == pytest.approx(1024 * 16 / 18)
    assert paper_performance(Z) == pytest.approx(1024 * 16 / 18)


def test_eq5_eq6_case3():
    alpha = 28 / 32
    # eqs. 5 and 6 meet at B = Npe / Nt ...
    assert case3_performance(1024, 16, 64, alpha) == pytest.approx(
        64 * 16 / (alpha + (1 - alpha) * 64))
    # ... and "The performance is not related to B when B >= Npe/Nt as shown in equations
    # (2) and (5)"
    assert case3_performance(1024, 16, 256, alpha) == case3_performance(1024, 16, 64, alpha)
    assert case3_performance(1024, 16, 8, alpha) < case3_performance(1024, 16, 32, alpha)
    assert paper_performance(dataclasses.replace(Z, blocks=32)) == pytest.approx(
        1024 * 16 / (alpha * 16 + (1 - alpha) * 1024))


def test_eq7_function_matches_the_config():
    assert bram_eq7(1792, 256, 64, 16, 1024, bb_fifo=False) == pytest.approx(Z.bram_eq7)
    assert bram_eq7(1792, 256, 64, 16, 1024) == pytest.approx(
        Z.bram_eq7 + 64 * 1024 * 16 / 36864)


@pytest.mark.parametrize("changes", [
    {}, {"blocks": 8}, {"blocks": 32}, {"batch": 32}, {"batch": 128, "blocks": 32},
    {"batch": 16, "blocks": 8}, {"blocks": 64, "batch": 8}])
def test_the_schedule_reduces_to_the_equations(changes):
    """Without pipeline latency the timeline's steady state is eqs. 2-6."""
    config = dataclasses.replace(Z, **changes)
    steady = steady_state_performance(config)
    if config.case != 2 or config.batch == config.pes // config.bus_weights:
        assert steady == pytest.approx(paper_performance(config))
    timeline = predict(config, pipeline_latency=0, seq_len=4096)
    assert timeline.useful_macs / timeline.cycles == pytest.approx(steady, rel=0.01)


# -- The paper's figures -----------------------------------------------------------------

def test_fig13_blocking_number():
    """Fig. 13: "the proper blocking number is 16"; "When the blocking number decreases from
    16 to 8, the performance can still be boosted by about 10%"; more blocks (case 3) cost
    much more."""
    util = {nb: predict(dataclasses.replace(Z, blocks=nb)).utilization
            for nb in (8, 16, 32)}
    assert util[8] / util[16] == pytest.approx(1.10, abs=0.03)     # ours: 1.115
    assert util[16] == pytest.approx(16 / 18, abs=0.015)           # ours: 0.877
    assert util[32] < 0.2 * util[16]


def test_case1_final_block_stall():
    """Case 1: "we find that these stalls cause the calculation of the final block to take
    about 10% longer time". With Nb = 8 the final block is the 256 h columns; the pipeline
    latency adds to each step's pass over it."""
    config = dataclasses.replace(Z, blocks=8)
    extra = model_cycles(config) - model_cycles(config, pipeline_latency=0)
    final_block = config.seq_len * 256
    assert 0.05 < extra / final_block < 0.15                       # ours: 19 / 256 = 7.4%


def test_fig14_batch_size():
    """Fig. 14 / eqs. 1-3: throughput grows with the batch up to B = Npe / Nt = 64 and
    little beyond."""
    util = {b: predict(dataclasses.replace(Z, batch=b)).utilization
            for b in (16, 32, 64, 128, 256)}
    assert util[16] < util[32] < util[64] < util[128] < util[256]
    assert util[64] / util[32] > 1.8
    assert util[128] / util[64] < 1.1


def test_vc709_throughput():
    """Performance comparison: "our system using Virtex 7 achieves 356 GOPS" at 125 MHz.
    The paper does not give that design's B, Nt and Nb; with the preset's the model (no
    DRAM inefficiency, no host overhead) predicts 384 GOPS, 7.9% above the measurement and
    below the 512 GOPS peak of 2048 PEs."""
    preset = PRESETS["vc709-lstm512"]
    peak = gops(VC709_LSTM512.pes, 1, preset.clock_hz)
    assert peak == pytest.approx(512)
    ours = predict(VC709_LSTM512).gops(preset.clock_hz)
    # Above the measurement (the model has no DRAM or host overhead), within 10% of it.
    assert 356 < ours < min(peak, 1.1 * 356)


def test_zc706_design():
    prediction = predict(Z)
    assert prediction.busy_cycles == Z.seq_len * Z.columns
    assert prediction.weight_words == (Z.seq_len // Z.batch) * Z.weight_words_per_batch
    assert prediction.gops(200e6) == pytest.approx(2 * prediction.useful_macs * 200e6
                                                   / prediction.cycles / 1e9)


# -- The timeline against a cycle-by-cycle simulation ------------------------------------

def reference_cycles(config, latency, seq_len):
    """Cycle-by-cycle simulation of the schedule described in :mod:`nnrtl.gen.sbe.perf`,
    written independently: a program of column steps, a DMA filling buffer halves in turn,
    and per-cycle issue rules."""
    k, passes = config.columns_per_cycle, config.passes
    units = config.units_per_pass
    batch = min(config.batch, seq_len)
    sizes = [batch] * (seq_len // batch) + ([seq_len % batch] if seq_len % batch else [])
    loads, program = [], []          # loads: words; program: instructions (dicts)

    def load(words):
        loads.append(words)
        return len(loads) - 1

    for layer, shape in enumerate(config.layer_shapes):
        c, block_words = shape.block_columns, config.rows * shape.block_columns
        first, xd = shape.first_hidden_block, shape.x_columns_in_hidden_blocks
        resident = [load(block_words) for _ in range(config.blocks)] \
            if config.blocks <= 2 else None
        step0 = 0
        for size in sizes:
            gate = (layer - 1, list(range(step0, step0 + size))) if layer else None
            for block in range(first):
                inst = (resident[block],) if resident else (load(block_words),)
                for _ in range(size * passes * (c // k)):
                    program.append(dict(needs=inst, gate=gate))
                    gate = None
                if not resident:
                    program[-1]["release"] = inst
            region = shape.hidden_blocks * c
            if shape.hidden_blocks <= 2:
                insts = tuple(resident[first:]) if resident else \
                    tuple(load(block_words) for _ in range(shape.hidden_blocks))
                segments = [(insts, 0, region, True)]
            for t in range(step0, step0 + size):
                if shape.hidden_blocks > 2:
                    segments = [((load(block_words),), b * c, (b + 1) * c,
                                 b == shape.hidden_blocks - 1)
                                for b in range(shape.hidden_blocks)]
                for insts, lo, hi, final in segments:
                    for p in range(passes):
                        for s in range(lo // k, hi // k):
                            cols = range(s * k, (s + 1) * k)
                            deps = [col - xd for col in cols if col >= xd]
                            # A column step needs only the block holding its columns.
                            block = (s * k - lo) // c
                            program.append(dict(needs=insts[block:block + 1], gate=gate,
                                                deps=(layer, t - 1, deps)))
                            gate = None
                        if final:
                            program[-1]["final"] = (layer, t, p)
                    if shape.hidden_blocks > 2:
                        program[-1]["release"] = insts
            if shape.hidden_blocks <= 2 and not resident:
                program[-1]["release"] = insts
            step0 += size
        if resident:
            program[-1]["release"] = tuple(resident)

    ready = {}                       # (layer, step) -> ready cycle of every h unit
    loaded, free = {}, [0, 0]        # load -> cycle done; half -> cycle free (None: held)
    dma_busy_until, next_load = 0, 0
    handover, pc, cycle = None, 0, 0
    while pc < len(program):
        if next_load < len(loads) and cycle >= dma_busy_until:
            half = next_load % 2
            if free[half] is not None and free[half] <= cycle:
                free[half] = None
                dma_busy_until = cycle + math.ceil(loads[next_load] / config.bus_weights)
                loaded[next_load] = dma_busy_until
                next_load += 1
        ins = program[pc]
        ok = all(i in loaded and loaded[i] <= cycle for i in ins["needs"])
        if ok and ins.get("gate"):
            lay, steps = ins["gate"]
            ok = max(max(ready[(lay, s)]) for s in steps) <= cycle
        if ok and ins.get("deps"):
            lay, t, deps = ins["deps"]
            ok = t < 0 or all(ready[(lay, t)][j] <= cycle for j in deps)
        if ok and "final" in ins and handover is not None:
            ok = cycle + 1 >= handover + config.drain_cycles
        if ok:
            if "final" in ins:
                lay, t, p = ins["final"]
                handover = cycle + 1
                hs = ready.setdefault((lay, t), [None] * config.hidden_size)
                for j in range(p * units, min((p + 1) * units, config.hidden_size)):
                    hs[j] = cycle + 1 + latency + (j - p * units) // config.post_units
            for i in ins.get("release", ()):
                free[i % 2] = cycle + 1
            pc += 1
        cycle += 1
    return max(ready[(config.layers - 1, seq_len - 1)])


def random_configs(count, seed):
    rng = random.Random(seed)
    configs = []
    while len(configs) < count:
        hidden = rng.choice([2, 3, 4, 6, 8])
        rows = 4 * hidden
        kwargs = dict(
            input_size=rng.choice([2, 3, 5, 8, 12, 16]), hidden_size=hidden,
            layers=rng.choice([1, 1, 2, 3]), seq_len=rng.randint(1, 13),
            pes=rng.choice([p for p in (4, 8, 12, 16, 24, 32, 48, 64, 96) if
                            rows % p == 0 or p % rows == 0]),
            bus_weights=rng.choice([n for n in (1, 2, 4, 8, 16) if rows % n == 0]),
            post_units=rng.choice([1, 2, 3, 4]), blocks=rng.randint(1, 12))
        kwargs["batch"] = rng.randint(1, kwargs["seq_len"])
        try:
            configs.append((SbeConfig(**kwargs), rng.choice([0, 1, 3, 17])))
        except ValueError:
            continue
    return configs


@pytest.mark.parametrize("config, latency", random_configs(60, seed=2024))
def test_timeline_matches_cycle_simulation(config, latency, monkeypatch):
    # Sizes the RTL refuses run padded: the reference simulates the padded shapes.
    expected = reference_cycles(config.padded, latency, config.seq_len)
    assert model_cycles(config, pipeline_latency=latency) == expected
    monkeypatch.setattr(perf, "_EXTRAPOLATE", False)
    assert model_cycles(config, pipeline_latency=latency) == expected
    assert lower_bound_cycles(config) <= expected


@pytest.mark.parametrize("changes", [
    {}, {"blocks": 8}, {"blocks": 32}, {"batch": 24}, {"pes": 256, "post_units": 4},
    {"pes": 2048}, {"blocks": 2}, {"layers": 2, "input_size": 256}])
def test_skipping_repeats_changes_nothing(changes, monkeypatch):
    config = dataclasses.replace(Z, **{"seq_len": 200, **changes})
    fast = predict(config)
    monkeypatch.setattr(perf, "_EXTRAPOLATE", False)
    assert predict(config) == fast


def long_runs(count, seed):
    """Configurations of every case (resident weights, one or two h blocks, more), of one
    to three layers, with sequence lengths of up to a few hundred steps, many of them not
    a multiple of the batch."""
    rng = random.Random(seed)
    runs = []
    while len(runs) < count:
        hidden = rng.choice([2, 3, 4, 6, 8, 12])
        rows = 4 * hidden
        seq_len = rng.randint(1, 300)
        kwargs = dict(
            input_size=rng.choice([2, 3, 5, 8, 12, 16, 40]), hidden_size=hidden,
            layers=rng.choice([1, 2, 3]), seq_len=seq_len,
            pes=rng.choice([p for p in (4, 8, 12, 16, 24, 32, 48, 64, 96) if
                            rows % p == 0 or p % rows == 0]),
            bus_weights=rng.choice([n for n in (1, 2, 4, 8, 16) if rows % n == 0]),
            post_units=rng.choice([1, 2, 3, 4]), blocks=rng.randint(1, 16),
            batch=rng.choice([rng.randint(1, min(seq_len, 6)), rng.randint(1, seq_len)]))
        try:
            config = SbeConfig(**kwargs)
        except ValueError:
            continue
        steps = rng.choice([seq_len, seq_len - 1, rng.randint(1, 700)]) or 1
        runs.append((config, rng.choice([0, 1, 3, 17]), steps))
    return runs


LONG_RUNS = long_runs(48, seed=11)


def test_long_runs_cover_every_case():
    cases = {shape.case for config, _, _ in LONG_RUNS for shape in config.layer_shapes}
    assert cases == {1, 2, 3}
    assert any(config.weights_resident for config, _, _ in LONG_RUNS)
    assert any(config.layers == 3 for config, _, _ in LONG_RUNS)
    assert sum(steps % config.batch != 0 for config, _, steps in LONG_RUNS) >= 20
    assert any(steps >= 10 * config.batch for config, _, steps in LONG_RUNS)


@pytest.mark.parametrize("config, latency, steps", LONG_RUNS)
def test_closed_form_equals_the_step_by_step_timeline(config, latency, steps, monkeypatch):
    """The timeline jumps over the batches (and steps) that repeat; the step-by-step
    timeline, which runs every one, gives the same prediction, cycle for cycle."""
    fast = predict(config, pipeline_latency=latency, seq_len=steps)
    runs = [perf.run_cycles(config, layer, steps) for layer in range(config.layers)]
    monkeypatch.setattr(perf, "_EXTRAPOLATE", False)
    assert predict(config, pipeline_latency=latency, seq_len=steps) == fast
    assert [perf.run_cycles(config, layer, steps) for layer in range(config.layers)] == runs
    assert lower_bound_cycles(config, seq_len=steps) <= fast.cycles


@pytest.mark.parametrize("config", [Z, dataclasses.replace(Z, layers=3, input_size=256,
                                                             batch=1)])
def test_a_billion_steps(config, monkeypatch):
    """A billion steps are predicted at once; past the first batches every batch of every
    layer repeats the last, so the billion steps take the cycles of 1024 steps plus, per
    batch more, what the step-by-step timeline adds from 1024 to 1024 + batch steps."""
    billion = 10 ** 9 // config.batch * config.batch
    prediction = predict(config, seq_len=billion)
    monkeypatch.setattr(perf, "_EXTRAPOLATE", False)
    base = model_cycles(config, seq_len=1024)
    per_batch = model_cycles(config, seq_len=1024 + config.batch) - base
    assert prediction.cycles == base + (billion - 1024) // config.batch * per_batch
    columns = sum(shape.columns for shape in config.layer_shapes)
    assert prediction.busy_cycles == billion * config.passes * columns \
        // config.columns_per_cycle
    assert prediction.useful_macs == billion * config.macs_per_step


def test_predict_checks_its_arguments():
    with pytest.raises(TypeError, match=r"^config must be an SbeConfig, not 3$"):
        predict(3)
    with pytest.raises(TypeError, match=r"^pipeline_latency must be a non-negative "
                                        r"integer, not -1$"):
        predict(SbeConfig(), pipeline_latency=-1)
    with pytest.raises(TypeError, match=r"^seq_len must be a positive integer, not 0$"):
        predict(SbeConfig(), seq_len=0)


def test_partial_batch_and_sequence_override():
    config = SbeConfig()
    assert predict(config, seq_len=5).useful_macs == 5 * config.macs_per_step
    assert model_cycles(config, seq_len=20) > model_cycles(config, seq_len=16)


def test_utilization_definition():
    p = predict(SbeConfig())
    assert p.utilization == pytest.approx(p.useful_macs / (64 * p.cycles))
    assert np.isclose(p.gops(1e9), 2 * p.useful_macs / p.cycles)


@pytest.mark.parametrize("kwargs, padded_macs", [
    (dict(input_size=39, hidden_size=19, seq_len=4, batch=2), 4 * 32 * (40 + 32)),
    (dict(input_size=123, hidden_size=100, layers=2, seq_len=4, batch=2),
     4 * 112 * (124 + 112) + 4 * 112 * (112 + 112)),
])
def test_padding_costs_cycles_but_is_not_useful_work(kwargs, padded_macs):
    """The padded problem's cycles; useful MACs and utilization of the model's sizes only;
    the padding's MACs on their own line."""
    config = SbeConfig(**kwargs)
    h, x, layers = config.hidden_size, config.input_size, config.layers
    useful = 4 * h * (x + h) + (layers - 1) * 4 * h * 2 * h      # written out
    prediction = predict(config)
    assert prediction.cycles == predict(config.padded).cycles
    assert prediction.useful_macs == config.seq_len * useful
    assert prediction.padding_macs == config.seq_len * (padded_macs - useful)
    assert prediction.utilization == useful * config.seq_len / (config.pes * prediction.cycles)
    assert predict(config.padded).padding_macs == 0

"""The FPDeep FP module and its line buffer in the Amaranth simulator, bit-exact against the
golden model (nnrtl.sim.golden.fpdeep.fp), and its cycles against the mapper's model (the
configuration itself: tests/fpdeep/hw/test_fpdeep_config.py)."""

import random

import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from nnrtl.boards import get_board
from nnrtl.gen.fpdeep import map_network
from nnrtl.hw.fpdeep import FpConfig, LineBuffer, partial_layout, window_layout
from nnrtl.sim.golden.fpdeep.fp import windows
from nnrtl.sim.tb.fpdeep.fp import (amaranth_run, describe, pack, random_case, small_cnn,
                                    unpack)


# -- line buffer -------------------------------------------------------------------------

LB_CASES = [  # width, k, stride, pad, channels, groups
    (5, 3, 1, 1, 2, 1), (6, 3, 2, 1, 1, 1), (4, 1, 1, 0, 3, 1), (7, 5, 2, 2, 1, 1),
    (5, 2, 2, 0, 2, 2), (6, 3, 1, 0, 1, 3), (5, 5, 1, 2, 1, 1),
]


@pytest.mark.parametrize("width,k,stride,pad,channels,groups", LB_CASES)
def test_line_buffer_windows(width, k, stride, pad, channels, groups):
    bits = 8
    lb = LineBuffer(width, k, stride=stride, pad=pad, channels=channels, word_bits=bits,
                    groups=groups)
    assert lb.depth_beats >= lb.min_depth == ((k - 1) * width + k) * groups
    cfg = FpConfig(precision="fixed16", k=k, stride=stride, pad=pad, w_in=width,
                   n_in=channels * groups, n_out=1, p=1)
    rng = np.random.default_rng(width * k)
    images = [rng.integers(0, 256, (width, width, channels * groups)) for _ in range(2)]
    beats = [sum(int(v) << (n * bits) for n, v in
                 enumerate(image[y, x, g * channels:(g + 1) * channels]))
             for image in images for y in range(width) for x in range(width)
             for g in range(groups)]
    layout = window_layout(bits, channels, k)
    want = []
    for image in images:
        win = windows(cfg, image)                 # (y, x, channel, tap)
        for y in range(lb.w_out):
            for x in range(lb.w_out):
                for g in range(groups):
                    taps = [list(win[y, x, g * channels:(g + 1) * channels, t])
                            for t in range(k * k)]
                    last = y == x == lb.w_out - 1 and g == groups - 1
                    want.append(pack(layout, {"taps": taps, "last": int(last)}))
    got = []
    sim = Simulator(lb)
    sim.add_clock(1e-8)

    async def send(ctx):
        rng = random.Random(1)
        for beat in beats:
            while rng.random() < 0.3:
                await ctx.tick()
            ctx.set(Value.cast(lb.i.payload), beat)
            ctx.set(lb.i.valid, 1)
            for _ in range(1000):
                if (await ctx.tick().sample(lb.i.ready))[2]:
                    break
            else:
                raise AssertionError("line buffer took no beat in 1000 cycles")
            ctx.set(lb.i.valid, 0)

    async def collect(ctx):
        rng, idle = random.Random(2), 0
        while len(got) < len(want):
            accept = rng.random() >= 0.4
            ctx.set(lb.o.ready, int(accept))
            _, _, valid, bits_ = await ctx.tick().sample(lb.o.valid, Value.cast(lb.o.payload))
            idle += 1
            if valid and accept:
                got.append(bits_)
                idle = 0
            assert idle < 1000, f"window {len(got)} of {len(want)} not in 1000 cycles"

    sim.add_testbench(send)
    sim.add_testbench(collect)
    sim.run()
    assert got == want


# -- FP module ---------------------------------------------------------------------------

FIXED_CASES = {  # name: FpConfig fields after precision (k, stride, pad, w_in, n_in, n_out, p)
    "first_icp_k3": dict(k=3, stride=1, pad=1, w_in=5, n_in=2, n_out=5, p=2, completes=False),
    "middle_icp_k1_s2": dict(k=1, stride=2, pad=0, w_in=6, n_in=3, n_out=4, p=3,
                             partial_in=True, completes=False),
    "complete_k5_s2_pool3": dict(k=5, stride=1, pad=2, w_in=7, n_in=1, n_out=3, p=2,
                                 partial_in=True, pool=(3, 2, 0)),
    "ocp_k3_s2_pool2_norelu": dict(k=3, stride=2, pad=1, w_in=9, n_in=2, n_out=3, p=3,
                                   relu=False, pool=(2, 2, 0)),
    "complete_k3_valid": dict(k=3, stride=1, pad=0, w_in=6, n_in=3, n_out=2, p=1,
                              partial_in=True),
    # Q < S_IC: passes of Q tiles, the last one ragged unless noted
    "q2_of5_complete_pool2": dict(k=3, stride=1, pad=1, w_in=5, n_in=5, n_out=3, p=2, q=2,
                                  partial_in=True, pool=(2, 2, 0)),
    "q1_of3_middle_s2": dict(k=3, stride=2, pad=1, w_in=7, n_in=3, n_out=4, p=3, q=1,
                             partial_in=True, completes=False),
    "q3_of7_first_k1": dict(k=1, stride=1, pad=0, w_in=5, n_in=7, n_out=5, p=5, q=3,
                            completes=False),
    "q2_of4_even_k5_pool3": dict(k=5, stride=1, pad=2, w_in=7, n_in=4, n_out=2, p=1, q=2,
                                 relu=False, pool=(3, 2, 0)),
}


@pytest.mark.parametrize("name", FIXED_CASES)
def test_fp_fixed16_bit_exact(name):
    cfg = FpConfig(precision="fixed16", **FIXED_CASES[name])
    stream, got, want, _ = amaranth_run(cfg, random_case(cfg, 2, seed=len(name)),
                                        gap=0.3, stall=0.3, seed=3)
    assert got == want, "\n".join(describe(cfg, stream, got, want))


def test_fp_fp32_bit_exact():
    """fp32 (hw/arith units, 3 stages each): a completing ICP node with partials in, bias,
    ReLU and a 2×2/2 pool, OC not a multiple of P. (The fp32 units are slow in the Amaranth
    simulator: larger layers are in the slow sweep below.)"""
    cfg = FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=4, n_in=1, n_out=3, p=2,
                   partial_in=True, pool=(2, 2, 0))
    stream, got, want, _ = amaranth_run(cfg, random_case(cfg, 1, seed=5), gap=0.2,
                                        stall=0.3, seed=4)
    assert got == want, "\n".join(describe(cfg, stream, got, want))


def test_fp_fp32_passes_bit_exact():
    """fp32 with Q < S_IC: S_IC = 3 on Q = 2 (a ragged second pass), the pass accumulator's
    combinational FloatAdd, then the chain add, bias and ReLU; OC = 3 on P = 2; the CE's
    multipliers and adders with their shifts on DSP slices."""
    cfg = FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=4, n_in=3, n_out=3, p=2, q=2,
                   partial_in=True, multiplier_shifts="dsp", adder_shifts="dsp")
    assert cfg.passes == 2
    stream, got, want, _ = amaranth_run(cfg, random_case(cfg, 1, seed=6), gap=0.2,
                                        stall=0.3, seed=5)
    assert got == want, "\n".join(describe(cfg, stream, got, want))


def random_config(rng, precision):
    """A small random FP segment: any K of 1, 3, 5, stride 1 or 2, padding, S_IC 1-5 on any
    Q ≤ S_IC (ragged passes), P not dividing OC, any position in the chain, pools 2×2/2 and
    3×3/2, ReLU or none."""
    k = int(rng.choice([1, 3, 5]))
    stride, pad = int(rng.integers(1, 3)), int(rng.integers(0, k // 2 + 1))
    w_in = int(rng.integers(max(k - 2 * pad, 1) + 2, 9))
    n_out = int(rng.integers(1, 6))
    completes, partial_in = bool(rng.integers(2)), bool(rng.integers(2))
    w_out = (w_in + 2 * pad - k) // stride + 1
    pools = [None] + [pool for pool in ((2, 2, 0), (3, 2, 0)) if pool[0] <= w_out]
    stages = {"multiplier_stages": int(rng.integers(0, 4)), "adder_stages": int(rng.integers(1, 4))}
    n_in = int(rng.integers(1, 6))
    return FpConfig(precision=precision, k=k, stride=stride, pad=pad, w_in=w_in, n_in=n_in,
                    n_out=n_out, p=int(rng.integers(1, n_out + 1)),
                    q=int(rng.integers(1, n_in + 1)), partial_in=partial_in, completes=completes,
                    relu=bool(rng.integers(2)),
                    pool=pools[int(rng.integers(len(pools)))] if completes else None,
                    **(stages if precision == "fp32" else {}))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_fp_random_layers_slow(seed):
    rng = np.random.default_rng(seed)
    for precision in ("fp32", "fixed16"):
        cfg = random_config(rng, precision)
        stream, got, want, _ = amaranth_run(cfg, random_case(cfg, 2, seed=seed), gap=0.3,
                                            stall=0.3, seed=seed)
        assert got == want, "\n".join([repr(cfg)] + describe(cfg, stream, got, want))


def test_fp_chain_fixed16():
    """Three ICP segments of one layer: node 1 starts the sum, node 2 adds its partials,
    node 3 completes with bias, ReLU and pool; every node's RTL output is the golden model's,
    and each feeds the next."""
    cuts, common = [(0, 2), (2, 3), (3, 5)], dict(k=3, stride=1, pad=1, w_in=6, n_out=4, p=3)
    rng = np.random.default_rng(7)
    weights = rng.integers(-128, 129, (4, 5, 3, 3))
    bias = rng.integers(-256, 257, 4)
    act = rng.integers(-256, 257, (1, 6, 6, 5))
    partial = None
    for number, (lo, hi) in enumerate(cuts):
        last = number == len(cuts) - 1
        cfg = FpConfig(precision="fixed16", n_in=hi - lo, partial_in=lo > 0, completes=last,
                       pool=(2, 2, 0) if last else None, **common)
        case = {"act": act[..., lo:hi], "weights": weights[:, lo:hi], "bias": bias,
                "partial_in": partial}
        stream, got, want, _ = amaranth_run(cfg, case, gap=0.2, stall=0.2, seed=number)
        assert got == want, "\n".join(describe(cfg, stream, got, want))
        if not last:
            beats = [unpack(partial_layout(cfg), bits)["data"] for bits in got]
            words = np.array(beats, np.int64)
            partial = np.where(words >= 1 << 47, words - (1 << 48), words).reshape(
                1, cfg.pixels, cfg.groups, cfg.p)


@pytest.mark.parametrize("q,expected", [(2, 3 * 1), (1, 3 * 2)])
def test_fp_cycles_per_pixel(q, expected):
    """Without gaps or stalls an output pixel leaves every ``⌈n_out/P⌉ · ⌈S_IC/Q⌉`` cycles
    in steady state (one pass of one group per cycle): OC = 7 on P = 3 is 3 groups, S_IC =
    2 on Q = 2 one pass, on Q = 1 two."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=6, n_in=2, n_out=7, p=3, q=q,
                   completes=False)
    _, got, want, cycles = amaranth_run(cfg, random_case(cfg, 1, seed=1))
    assert got == want
    starts = cycles[::cfg.groups]
    middle = np.diff(starts[cfg.w_out:-cfg.w_out])
    assert set(middle.tolist()) == {expected} == {cfg.cycles_per_pixel}
    assert np.all(np.diff(cycles) >= 1)


def test_fp_cycles_against_mapper():
    """The RTL's cycles per image (last output beat to last output beat, three images,
    no gaps or stalls) on the ``Q < S_IC`` segments the mapper makes for a small CNN on two
    VC709s, against the mapper's ``SegmentConfig.cycles``: the conv2 segments (S_IC 8 on
    Q = 2, pixels 64) take 264 for the mapper's 256 (+3.1 %: the line buffer's fill of
    ``K − 1 − pad`` = 1 row of 8 pixels between images), the conv3 one (S_IC 12 on Q = 1,
    4 pixels of 60 cycles) exactly its 240."""
    mapping = map_network(small_cnn(), 2, get_board("vc709"))
    measured = {}
    for node in mapping.nodes:
        for seg in node.segments:
            if seg.kind != "conv" or seg.q == seg.n_in:
                continue
            cfg = FpConfig.from_segment(seg, "fixed16")
            _, got, want, cycles = amaranth_run(cfg, random_case(cfg, 3, seed=seg.lo))
            assert got == want
            ends = [cycles[cfg.out_beats * (n + 1) - 1] for n in range(3)]
            measured[seg.layer, seg.lo] = (seg.cycles, *np.diff(ends).tolist())
    fill = 1 * 8                      # conv2: (K − 1 − pad) rows of w_in = 8 pixels
    assert measured == {("layers[3]", 0): (256, 256 + fill, 256 + fill),
                        ("layers[3]", 3): (256, 256 + fill, 256 + fill),
                        ("layers[6]", 0): (240, 240, 240)}

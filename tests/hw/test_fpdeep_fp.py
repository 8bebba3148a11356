"""The FPDeep FP module and its line buffer in the Amaranth simulator, bit-exact against the
golden model (nnrtl.sim.golden.fpdeep.fp), and the configuration derived from the mapper's."""

import random

import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from nnrtl.boards import get_board
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep import SegmentConfig, builtin, map_network
from nnrtl.hw.fpdeep import FpConfig, LineBuffer, partial_layout, window_layout
from nnrtl.sim.golden.fpdeep.fp import windows
from nnrtl.sim.tb.fpdeep_fp import amaranth_run, describe, pack, random_case, unpack


def segment(**fields):
    base = dict(layer="conv2", index=1, kind="conv", mode="ICP", lo=0, hi=3, n_in=3, n_out=5,
                k=3, pixels=36, p=2, q=3, modules=3, mac_units=3 * 2 * 3 * 9, dsp=162, lut=0,
                cycles=36 * 3, work=3 * 36 * 5 * 3 * 9, completes=True, residency=3.0,
                stride=1, pad=1, w_in=6, pool=(2, 2, 0), relu=True)
    base.update(fields)
    return SegmentConfig(**base)


# -- configuration -----------------------------------------------------------------------

def test_config_from_segment():
    cfg = FpConfig.from_segment(segment(), "fp32")
    assert (cfg.k, cfg.stride, cfg.pad, cfg.w_in, cfg.w_out) == (3, 1, 1, 6, 6)
    assert (cfg.n_in, cfg.n_out, cfg.p, cfg.groups) == (3, 5, 2, 3)
    assert cfg.cycles_per_pixel == 3 and cfg.banks == 27 and cfg.macs == 54
    assert not cfg.partial_in and cfg.completes and cfg.pool == (2, 2, 0)
    assert cfg.pool_out == 3 and cfg.argmax_bits == 2
    middle = FpConfig.from_segment(
        segment(lo=3, hi=6, completes=False, pool=None), "fixed16")
    assert middle.partial_in and not middle.completes and middle.partial_bits == 48
    ocp = FpConfig.from_segment(segment(mode="OCP", lo=5, hi=10, n_in=3, n_out=5), "fp32")
    assert not ocp.partial_in


def test_config_refusals():
    with pytest.raises(UsageError, match=r"q \(2\) must equal n_in \(3\)"):
        FpConfig.from_segment(segment(q=2, mac_units=3 * 2 * 2 * 9, cycles=36 * 3 * 2), "fp32")
    with pytest.raises(UsageError, match="no w_in"):
        FpConfig.from_segment(segment(w_in=0), "fp32")
    with pytest.raises(UsageError, match="precision must be one of"):
        FpConfig.from_segment(segment(), "fp16")
    with pytest.raises(UsageError, match="pool .* must be"):
        FpConfig("fp32", 3, 1, 1, 6, 3, 5, 2, pool=(3, 2, 1))
    with pytest.raises(UsageError, match="only the node completing"):
        FpConfig("fp32", 3, 1, 1, 6, 3, 5, 2, completes=False, pool=(2, 2, 0))
    with pytest.raises(ValueError, match="pixels .* must be W_out"):
        segment(pixels=25, cycles=25 * 3)


def test_config_from_mapper():
    """Every conv segment of a mapped network carries its layer's geometry; one whose CE
    has a tile per input channel (``q == n_in``) gives an FP module with the segment's
    pixels, the others are refused naming ``q`` and ``n_in`` (time-multiplexed input
    channels are not built yet)."""
    chain = builtin("alexnet")
    mapping = map_network(chain, 15, get_board("vc709"), check_storage=False)
    layers = {layer.name: layer for layer in chain.layers}
    built = refused = 0
    for node in mapping.nodes:
        for seg in node.segments:
            layer = layers[seg.layer]
            assert (seg.stride, seg.pad, seg.w_in, seg.pool, seg.relu) == \
                (layer.stride, layer.pad, layer.w_in, layer.pool, layer.relu)
            if seg.kind != "conv":
                continue
            if seg.q == seg.n_in:
                assert FpConfig.from_segment(seg, "fixed16").pixels == seg.pixels
                built += 1
            else:
                with pytest.raises(UsageError, match=rf"q \({seg.q}\) must equal n_in"):
                    FpConfig.from_segment(seg, "fixed16")
                refused += 1
    assert built >= 1 and refused >= 1


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
    cfg = FpConfig("fixed16", k, stride, pad, width, channels * groups, 1, 1)
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
}


@pytest.mark.parametrize("name", FIXED_CASES)
def test_fp_fixed16_bit_exact(name):
    cfg = FpConfig("fixed16", **FIXED_CASES[name])
    stream, got, want, _ = amaranth_run(cfg, random_case(cfg, 2, seed=len(name)),
                                        gap=0.3, stall=0.3, seed=3)
    assert got == want, "\n".join(describe(cfg, stream, got, want))


def test_fp_fp32_bit_exact():
    """fp32 (hw/arith units, 3 stages each): a completing ICP node with partials in, bias,
    ReLU and a 2×2/2 pool, OC not a multiple of P. (The fp32 units are slow in the Amaranth
    simulator: larger layers are in the slow sweep below.)"""
    cfg = FpConfig("fp32", 3, 1, 1, 4, 1, 3, 2, partial_in=True, pool=(2, 2, 0))
    stream, got, want, _ = amaranth_run(cfg, random_case(cfg, 1, seed=5), gap=0.2,
                                        stall=0.3, seed=4)
    assert got == want, "\n".join(describe(cfg, stream, got, want))


def random_config(rng, precision):
    """A small random FP segment: any K of 1, 3, 5, stride 1 or 2, padding, S_IC 1-3, P not
    dividing OC, any position in the chain, pools 2×2/2 and 3×3/2, ReLU or none."""
    k = int(rng.choice([1, 3, 5]))
    stride, pad = int(rng.integers(1, 3)), int(rng.integers(0, k // 2 + 1))
    w_in = int(rng.integers(max(k - 2 * pad, 1) + 2, 9))
    n_out = int(rng.integers(1, 6))
    completes, partial_in = bool(rng.integers(2)), bool(rng.integers(2))
    w_out = (w_in + 2 * pad - k) // stride + 1
    pools = [None] + [pool for pool in ((2, 2, 0), (3, 2, 0)) if pool[0] <= w_out]
    stages = {"multiplier_stages": int(rng.integers(0, 4)), "adder_stages": int(rng.integers(1, 4))}
    return FpConfig(precision, k, stride, pad, w_in, int(rng.integers(1, 4)), n_out,
                    int(rng.integers(1, n_out + 1)), partial_in=partial_in, completes=completes,
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
        cfg = FpConfig("fixed16", n_in=hi - lo, partial_in=lo > 0, completes=last,
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


def test_fp_cycles_per_pixel():
    """Without gaps or stalls an output pixel leaves every ``cycles_per_pixel`` cycles in
    steady state (one group per cycle)."""
    cfg = FpConfig("fixed16", 3, 1, 1, 6, 2, 7, 3, completes=False)
    _, got, want, cycles = amaranth_run(cfg, random_case(cfg, 1, seed=1))
    assert got == want
    starts = cycles[::cfg.groups]
    middle = np.diff(starts[cfg.w_out:-cfg.w_out])
    assert set(middle.tolist()) == {cfg.cycles_per_pixel}
    assert np.all(np.diff(cycles) >= 1)

"""The FP golden model (nnrtl.sim.golden.fpdeep.fp) against PyTorch: conv2d + bias + ReLU +
max_pool2d of the whole layer, the input channels split over a chain of ICP segments.

fp32 bound. Every output is a sum of ``n = IC·K²`` products and the bias, computed with one
rounding per product and per addition; along any path from a term to the result there are at
most ``r = 1 + L + (segments − 1) + 1`` roundings (the product, ``L`` = the deepest segment's
tile-tree + CE-tree (over ``Q`` tiles) levels + ``passes − 1`` pass-accumulator adds, one
chained add per later segment, the bias). So (Higham, Sec. 4.2)
``|ẑ − z| ≤ γ_r · (Σ|w·a| + |b|)``, ``γ_r = r·u / (1 − r·u)``, ``u = 2⁻²⁴``, with ``z`` exact
(float64 here: its own error is below ``n·2⁻⁵³·Σ|w·a|``, added to the bound). ReLU and max
are 1-Lipschitz: a pooled output is within the largest bound of its window.

fixed16: exactly an integer reference (float64 convolution of the integer codes, exact below
2⁵³), then the same rounding (half up) and saturation, ReLU and pool (torch's indices).
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.conv import tree_levels
from nnrtl.sim.golden.float import from_bits, to_bits
from nnrtl.sim.golden.fpdeep.fp import fp_module, tree_sum

CASES = [  # k, stride, pad, w_in, ic, oc, p, cuts, pool, relu, q (None: Q = S_IC)
    (3, 1, 1, 8, 5, 7, 3, (0, 2, 5), (2, 2, 0), True, None),
    (5, 2, 2, 11, 3, 4, 4, (0, 3), (3, 2, 0), True, None),
    (1, 1, 0, 6, 4, 5, 2, (0, 1, 2, 4), None, True, None),
    (3, 2, 0, 9, 2, 3, 2, (0, 1, 2), (2, 2, 0), False, None),
    (3, 1, 1, 7, 6, 2, 1, (0, 6), (3, 2, 0), True, None),
    # Q < S_IC: passes of Q tiles, ragged last passes (7 = 3 + 3 + 1, 5 = 2 + 2 + 1)
    (3, 1, 1, 8, 12, 5, 2, (0, 7, 12), (2, 2, 0), True, 2),
    (5, 2, 2, 9, 7, 3, 3, (0, 7), None, True, 3),
    (3, 1, 0, 7, 9, 4, 4, (0, 9), (3, 2, 0), True, 1),
]


def chain(precision, k, stride, pad, w_in, cuts, oc, p, pool, relu, act, weights, bias,
          q=None):
    """The golden model over ICP segments ``cuts`` (``q`` tiles per CE, at most the
    segment's channels): the last one's result."""
    partial = None
    for number, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        last = number == len(cuts) - 2
        cfg = FpConfig(precision=precision, k=k, stride=stride, pad=pad, w_in=w_in, n_in=hi - lo,
                       n_out=oc, p=p, partial_in=lo > 0, completes=last, relu=relu,
                       pool=pool if last else None, q=None if q is None else min(q, hi - lo))
        result = fp_module(cfg, act[..., lo:hi], weights[:, lo:hi], bias, partial)
        partial = result.partials
    return cfg, result


def to_maps(cfg, beats, side):
    """``(side², groups, P)`` beats → ``(n_out, side, side)``."""
    flat = beats.reshape(side, side, cfg.groups * cfg.p)[..., :cfg.n_out]
    return np.moveaxis(flat, -1, 0)


def window_index(indices, side_in, side_out, k, s):
    """torch's flat max-pool indices → the index ``ky·k + kx`` inside the window."""
    rows, cols = np.divmod(indices, side_in)
    oy = np.arange(side_out)[:, None]
    ox = np.arange(side_out)[None, :]
    return (rows - oy * s) * k + (cols - ox * s)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_fp32_against_torch(case):
    k, s, pad, w_in, ic, oc, p, cuts, pool, relu, q = CASES[case]
    rng = np.random.default_rng(case)
    act = rng.standard_normal((w_in, w_in, ic)).astype(np.float32)
    weights = (rng.standard_normal((oc, ic, k, k)) * 0.5).astype(np.float32)
    bias = (rng.standard_normal(oc) * 0.5).astype(np.float32)
    bits = lambda x: to_bits(FP32, x).astype(np.uint32)
    cfg, result = chain("fp32", k, s, pad, w_in, cuts, oc, p, pool, relu, bits(act),
                        bits(weights), bits(bias), q)
    x = torch.from_numpy(act.astype(np.float64)).permute(2, 0, 1)[None]
    w, b = torch.from_numpy(weights.astype(np.float64)), torch.from_numpy(bias.astype(np.float64))
    z = F.conv2d(x, w, b, stride=s, padding=pad)
    magnitude = F.conv2d(x.abs(), w.abs(), b.abs(), stride=s, padding=pad)
    def levels_of(n):                     # tile tree + CE tree over Q + pass accumulator
        tiles = n if q is None else min(q, n)
        return tree_levels(k * k) + tree_levels(tiles) + (-(-n // tiles) - 1)

    levels = max(levels_of(hi - lo) for lo, hi in zip(cuts, cuts[1:]))
    r = 1 + levels + (len(cuts) - 2) + 1
    u = 2.0 ** -24
    bound = (r * u / (1 - r * u) + ic * k * k * 2.0 ** -53) * magnitude
    got_z = torch.from_numpy(from_bits(FP32, to_maps(cfg, result.z, cfg.w_out)))[None]
    assert torch.all((got_z - z).abs() <= bound), float(((got_z - z).abs() / bound).max())
    assert torch.any(got_z != z)            # the bound is exercised, not trivially met
    y = F.relu(z) if relu else z
    if pool:
        y_ref, _ = F.max_pool2d(y, pool[0], pool[1], return_indices=True)
        bound = F.max_pool2d(bound, pool[0], pool[1])
    else:
        y_ref = y
    data = torch.from_numpy(from_bits(FP32, to_maps(cfg, result.data, cfg.pool_out)))[None]
    assert torch.all((data - y_ref).abs() <= bound)
    # the SFU's mask and argmax describe its own output: data = relu(z) at the argmax
    z_maps = from_bits(FP32, to_maps(cfg, result.z, cfg.w_out))
    argmax = to_maps(cfg, result.argmax, cfg.pool_out)
    relu_bits = to_maps(cfg, result.relu, cfg.pool_out)
    kp, sp = (pool[0], pool[1]) if pool else (1, 1)
    oy, ox = np.meshgrid(np.arange(cfg.pool_out), np.arange(cfg.pool_out), indexing="ij")
    at = z_maps[np.arange(oc)[:, None, None], oy * sp + argmax // kp, ox * sp + argmax % kp]
    chosen = np.maximum(at, 0) if relu else at
    assert np.array_equal(chosen, data[0].numpy())
    assert np.array_equal(relu_bits, (at > 0) if relu else np.ones_like(relu_bits))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_fixed16_against_integer_reference(case):
    k, s, pad, w_in, ic, oc, p, cuts, pool, relu, q = CASES[case]
    frac = 8
    rng = np.random.default_rng(100 + case)
    span = 16384 if case == 0 else 512               # case 0 saturates some outputs
    act = rng.integers(-span, span + 1, (w_in, w_in, ic))
    weights = rng.integers(-256, 257, (oc, ic, k, k))
    bias = rng.integers(-1024, 1025, oc)
    cfg, result = chain("fixed16", k, s, pad, w_in, cuts, oc, p, pool, relu, act, weights,
                        bias, q)
    x = torch.from_numpy(act.astype(np.float64)).permute(2, 0, 1)[None]
    exact = F.conv2d(x, torch.from_numpy(weights.astype(np.float64)), stride=s, padding=pad)
    wide = exact.numpy().astype(np.int64) + (bias.astype(np.int64) << frac)[None, :, None, None]
    z = np.clip((wide + (1 << (frac - 1))) >> frac, -(1 << 15), (1 << 15) - 1)
    assert np.array_equal(to_maps(cfg, result.z, cfg.w_out), z[0])
    assert (np.abs(wide) >> frac > 1 << 15).any() == (case == 0)
    y = torch.from_numpy(np.maximum(z, 0) if relu else z).double()
    if pool:
        pooled, indices = F.max_pool2d(y, pool[0], pool[1], return_indices=True)
        index = window_index(indices[0].numpy(), cfg.w_out, cfg.pool_out, pool[0], pool[1])
        assert np.array_equal(to_maps(cfg, result.argmax, cfg.pool_out), index)
    else:
        pooled = y
    assert np.array_equal(to_maps(cfg, result.data, cfg.pool_out), pooled[0].numpy())
    mask = to_maps(cfg, result.relu, cfg.pool_out)
    assert np.array_equal(mask, (pooled[0].numpy() > 0) if relu else np.ones_like(mask))


def test_tree_order():
    """The summation order: pairs per level, an odd last item carried up."""
    steps = []
    total = tree_sum(list("abcde"), lambda a, b: steps.append((a, b)) or f"({a}{b})")
    assert total == "(((ab)(cd))e)"
    assert steps == [("a", "b"), ("c", "d"), ("(ab)", "(cd)"), ("((ab)(cd))", "e")]
    assert [tree_levels(n) for n in (1, 2, 3, 9, 25)] == [0, 1, 2, 4, 5]
    assert math.ceil(math.log2(9)) == tree_levels(9)


def test_pass_order():
    """Q < S_IC: the CE sums of the passes are accumulated in pass order after each pass's
    Q-tile tree, the ragged last pass with a zero tile: with S_IC = 3 on Q = 2 and K = 1 an
    fp32 sum whose order matters, ``(a + b) + c`` with ``a = 1, b = 2⁻²⁴, c = 2⁻²⁴``
    rounds to 1 (ties to even twice), ``a + (b + c)`` would give ``1 + 2⁻²³``."""
    cfg = FpConfig(precision="fp32", k=1, stride=1, pad=0, w_in=1, n_in=3, n_out=1, p=1, q=2,
                   completes=False)
    act = to_bits(FP32, np.array([[[1.0, 2.0 ** -24, 2.0 ** -24]]], np.float32))
    one = to_bits(FP32, np.ones((1, 3, 1, 1), np.float32))
    result = fp_module(cfg, act.astype(np.uint32), one.astype(np.uint32))
    assert from_bits(FP32, result.partials.reshape(1))[0] == 1.0
    whole = FpConfig(precision="fp32", k=1, stride=1, pad=0, w_in=1, n_in=3, n_out=1, p=1,
                     completes=False)  # Q = S_IC
    tree = fp_module(whole, act.astype(np.uint32), one.astype(np.uint32))
    assert from_bits(FP32, tree.partials.reshape(1))[0] == 1.0          # ((a+b)+c) too
    later = to_bits(FP32, np.array([[[2.0 ** -24, 2.0 ** -24, 1.0]]], np.float32))
    result = fp_module(cfg, later.astype(np.uint32), one.astype(np.uint32))
    assert from_bits(FP32, result.partials.reshape(1))[0] == np.float32(1 + 2.0 ** -23)

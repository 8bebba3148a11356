"""The EB and SFU-backward golden models (nnrtl.sim.golden.fpdeep.eb) against PyTorch
autograd in float64.

Bound. fixed16 codes are integers; the float64 reference works on the same values (code ·
2⁻ᶠ) and every product and sum of them is exact in float64 here (below 2⁵³). So:

* EB: the golden model's exact sums equal ``x.grad · 2²ᶠ`` of ``conv2d(x, W, padding)``
  back-propagated with δ **exactly** (bound 0); its 16-bit output differs from ``x.grad``
  only by the final rounding, ``|E·2⁻ᶠ − x.grad| ≤ 2⁻ᶠ⁻¹`` where not saturated, and is
  the saturation limit where ``|x.grad|`` exceeds it.
* EB fp32: every error is a sum of ``n = n_out·K²`` products (zero lanes add exact
  zeros); along any path from a term to the result there are at most ``r = 1 + L_tile +
  L_CE + (G − 1)`` roundings (the product, the tile and CE tree levels, the group adds), so
  ``|ê − e| ≤ γ_r · Σ|W·δ|`` (Higham 4.2), ``γ_r = r·u/(1 − r·u)``, ``u = 2⁻²⁴``, with
  ``Σ|W·δ|`` the same back-propagation of ``|W|`` and ``|δ|``; float64's own error is
  below ``n·2⁻⁵³·Σ|W·δ|``, added.
* SFU backward: ``z.grad`` of ``max_pool2d(relu(z))`` (or ``relu(z)``) back-propagated with
  the error equals the golden δ exactly (torch's first-maximum rule and ReLU'(0) = 0, the
  SFU's).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.sim.golden.fpdeep.eb import eb_module, eb_sums, sfu_backward
from nnrtl.sim.golden.fpdeep.fp import fp_module

EB_CASES = [  # k, pad, w_in, ic, oc, p
    (3, 1, 7, 3, 5, 2), (3, 0, 6, 2, 4, 4), (5, 2, 9, 3, 3, 1), (1, 0, 5, 4, 6, 4),
    (2, 0, 5, 1, 3, 2), (5, 1, 8, 2, 7, 3),
]


def codes(rng, shape, scale):
    return rng.integers(-scale, scale + 1, shape)


@pytest.mark.parametrize("case", range(len(EB_CASES)))
def test_eb_against_torch(case):
    k, pad, w_in, ic, oc, p = EB_CASES[case]
    cfg = FpConfig("fixed16", k, 1, pad, w_in, ic, oc, p)
    f = cfg.frac_bits
    rng = np.random.default_rng(case)
    # up to ±16.0: large enough that some errors saturate in the 16-bit output
    weights = codes(rng, (oc, ic, k, k), 1 << (f + 4))
    delta = codes(rng, (cfg.w_out, cfg.w_out, oc), 1 << (f + 4))
    x = torch.zeros((1, ic, w_in, w_in), dtype=torch.float64, requires_grad=True)
    w = torch.from_numpy(weights / 2.0 ** f)
    z = F.conv2d(x, w, padding=pad)
    z.backward(torch.from_numpy(np.moveaxis(delta, -1, 0)[None] / 2.0 ** f))
    grad = x.grad[0].permute(1, 2, 0).numpy()                     # (y, x, i)
    assert np.array_equal(eb_sums(cfg, delta, weights), grad * 2.0 ** (2 * f))
    out = eb_module(cfg, delta, weights) / 2.0 ** f
    top, bottom = ((1 << 15) - 1) / 2.0 ** f, -(1 << 15) / 2.0 ** f
    inside = (grad <= top) & (grad >= bottom)
    assert np.all(np.abs(out - grad)[inside] <= 2.0 ** -(f + 1))
    assert np.array_equal(out[~inside], np.where(grad[~inside] > 0, top, bottom))
    assert inside.sum() > 0


@pytest.mark.parametrize("case", range(len(EB_CASES)))
def test_eb_fp32_against_torch(case):
    from nnrtl.hw.arith.float_format import FP32
    from nnrtl.hw.fpdeep.conv import tree_levels
    from nnrtl.sim.golden.float import from_bits, to_bits

    k, pad, w_in, ic, oc, p = EB_CASES[case]
    cfg = FpConfig("fp32", k, 1, pad, w_in, ic, oc, p)
    rng = np.random.default_rng(40 + case)
    weights = (rng.standard_normal((oc, ic, k, k)) * 0.5).astype(np.float32)
    delta = rng.standard_normal((cfg.w_out, cfg.w_out, oc)).astype(np.float32)
    bits = lambda v: to_bits(FP32, v).astype(np.int64)
    got = from_bits(FP32, eb_module(cfg, bits(delta), bits(weights))).astype(np.float64)

    def backward(w, d):
        x = torch.zeros((1, ic, w_in, w_in), dtype=torch.float64, requires_grad=True)
        F.conv2d(x, torch.from_numpy(w.astype(np.float64)), padding=pad).backward(
            torch.from_numpy(np.moveaxis(d, -1, 0)[None].astype(np.float64)))
        return x.grad[0].permute(1, 2, 0).numpy()

    exact = backward(weights, delta)
    magnitude = backward(np.abs(weights), np.abs(delta))
    r = 1 + tree_levels(k * k) + tree_levels(p) + cfg.groups - 1
    u = 2.0 ** -24
    bound = (r * u / (1 - r * u) + oc * k * k * 2.0 ** -53) * magnitude
    assert np.all(np.abs(got - exact) <= bound)
    assert np.abs(got - exact).max() > 0                 # the roundings show


def test_eb_saturates_somewhere():
    """The random magnitudes of the cases above reach the 16-bit limit (the saturation is
    exercised, not only the rounding)."""
    k, pad, w_in, ic, oc, p = EB_CASES[0]
    cfg = FpConfig("fixed16", k, 1, pad, w_in, ic, oc, p)
    rng = np.random.default_rng(0)
    f = cfg.frac_bits
    weights = codes(rng, (oc, ic, k, k), 1 << (f + 4))
    delta = codes(rng, (cfg.w_out, cfg.w_out, oc), 1 << (f + 4))
    out = eb_module(cfg, delta, weights)
    assert np.any(np.abs(out) >= (1 << 15) - 1)


def test_eb_refuses_stride():
    cfg = FpConfig("fixed16", 3, 2, 1, 7, 2, 3, 2)
    with pytest.raises(ValueError, match=r"^EB is built for stride 1, not 2$"):
        eb_sums(cfg, np.zeros((cfg.w_out, cfg.w_out, 3), np.int64), np.zeros((3, 2, 3, 3)))


SFU_CASES = [  # k, pad, w_in, oc, p, pool, relu
    (3, 1, 8, 5, 2, (2, 2, 0), True), (3, 1, 7, 3, 3, (2, 2, 0), True),
    (3, 0, 9, 4, 3, (3, 3, 0), True), (3, 1, 6, 3, 2, None, True),
    (1, 0, 5, 2, 1, (2, 2, 0), False),
]


@pytest.mark.parametrize("case", range(len(SFU_CASES)))
def test_sfu_backward_against_torch(case):
    k, pad, w_in, oc, p, pool, relu = SFU_CASES[case]
    cfg = FpConfig("fixed16", k, 1, pad, w_in, 2, oc, p, pool=pool, relu=relu)
    rng = np.random.default_rng(10 + case)
    one = 1 << cfg.frac_bits
    act = codes(rng, (w_in, w_in, 2), one)
    weights = codes(rng, (oc, 2, k, k), one // 2)
    result = fp_module(cfg, act, weights, codes(rng, oc, one))
    side = cfg.pool_out
    shape = (side, side, cfg.groups, cfg.p)
    error = codes(rng, shape, one)
    error.reshape(side, side, -1)[..., oc:] = 0
    delta = sfu_backward(cfg, error, result.relu.reshape(shape), result.argmax.reshape(shape))
    z = result.z.reshape(cfg.w_out, cfg.w_out, -1)[..., :oc]
    zt = torch.tensor(np.moveaxis(z, -1, 0)[None], dtype=torch.float64, requires_grad=True)
    y = F.relu(zt) if relu else zt
    if pool is not None:
        y = F.max_pool2d(y, pool[0], pool[1])
    err = error.reshape(side, side, -1)[..., :oc]
    y.backward(torch.tensor(np.moveaxis(err, -1, 0)[None], dtype=torch.float64))
    want = zt.grad[0].permute(1, 2, 0).numpy()
    got = delta.reshape(cfg.w_out, cfg.w_out, -1)
    assert np.array_equal(got[..., :oc], want)
    assert not got[..., oc:].any()
    assert got.any() and (pool is None or (got == 0).sum() > got.size // 2)


def test_sfu_backward_refuses_overlap():
    cfg = FpConfig("fixed16", 3, 1, 1, 8, 2, 3, 2, pool=(3, 2, 0))
    zeros = np.zeros((cfg.pool_out, cfg.pool_out, cfg.groups, cfg.p), np.int64)
    with pytest.raises(ValueError, match=r"^pool \(3, 2, 0\): the backward step is built "
                                         r"for non-overlapping pools \(kernel = stride\)$"):
        sfu_backward(cfg, zeros, zeros, zeros)

"""The FC engine's golden model (nnrtl.sim.golden.fpdeep.fc) against PyTorch in float64: the
layer ``y = W·relu?(x) + b`` (nn.functional.linear), autograd for ``δx`` and the gradients
with the loss ``Σ y·δy``, and torch.optim.SGD's step for the new ``W`` and ``b``.

Bounds, as the conv layers' (tests/fpdeep/golden/test_fpdeep_eb_golden.py):

* fixed16: codes are integers and every float64 product and sum of them here is exact, so
  each output differs from PyTorch's only by its one rounding, ``≤ 2⁻ᶠ⁻¹`` where not
  saturated (the saturation limit where PyTorch's value exceeds it); the new weights by
  the update's one rounding of ``rate·g`` (``≤ 2⁻ᶠ⁻¹``).
* fp32: a sum of ``n`` products with at most ``r`` roundings on any path (the product, the
  tile tree's ``⌈log2 P⌉`` levels and ``K − 1`` beat adds for ``y``; the product and
  ``n_out − 1`` adds for ``δx``; the product and ``B − 1`` adds for ``g``) is within
  ``γ_r · Σ|terms|`` (Higham 4.2, ``γ_r = r·u/(1 − r·u)``, ``u = 2⁻²⁴``); the SGD step
  adds two roundings (``fl(rate·g)``, ``fl(w − ·)``).
"""

import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.conv import tree_levels
from nnrtl.hw.fpdeep.fc_config import FcConfig
from nnrtl.sim.golden.float import from_bits
from nnrtl.sim.golden.fpdeep.fc import fc_step
from nnrtl.sim.tb.fpdeep.fc import random_case

U = 2.0 ** -24


def draw(seed, precision):
    r = random.Random(seed)
    n_in = r.randint(1, 40)
    return FcConfig(precision=precision, n_in=n_in, n_out=r.randint(1, 12),
                    p=r.randint(1, n_in + 1), batch=r.randint(1, 6),
                    input_relu=r.random() < 0.5)


def torch_step(cfg, w, b, x, dy, rate):
    """``(y, δx, W', b')`` of PyTorch in float64, and ``g`` (the summed gradients)."""
    t = lambda a: torch.tensor(np.asarray(a, np.float64))
    weight, bias = t(w).requires_grad_(), t(b).requires_grad_()
    xs = t(x).requires_grad_()
    inp = F.relu(xs) if cfg.input_relu else xs
    y = F.linear(inp, weight, bias)
    y.backward(t(dy))
    g = weight.grad.clone()
    torch.optim.SGD([weight, bias], lr=rate).step()
    return (y.detach().numpy(), xs.grad.numpy(), weight.detach().numpy(),
            bias.detach().numpy(), g.numpy())


def gamma(r):
    return r * U / (1 - r * U)


@pytest.mark.parametrize("seed", range(4))
def test_fc_fixed16_against_torch(seed):
    cfg = draw(seed, "fixed16")
    case = random_case(cfg, 1, seed)
    f, scale = cfg.frac_bits, 2.0 ** -cfg.frac_bits
    w, b, x, dy = case["weights"], case["bias"], case["xs"][0], case["dys"][0]
    y, dx, w2, b2 = fc_step(cfg, w, b, x, dy, case["lr"])
    ty, tdx, tw, tb, _ = torch_step(cfg, w * scale, b * scale, x * scale, dy * scale,
                                    case["lr"] / 2.0 ** 16)
    top, bottom = ((1 << 15) - 1) * scale, -(1 << 15) * scale
    for got, want in ((y, ty), (dx, tdx), (w2, tw), (b2, tb)):
        inside = (want <= top) & (want >= bottom)
        assert np.all(np.abs(got * scale - want)[inside] <= 2.0 ** -(f + 1))
        assert np.array_equal(got[~inside] * scale, np.where(want[~inside] > 0, top, bottom))


@pytest.mark.parametrize("seed", range(4))
def test_fc_fp32_against_torch(seed):
    cfg = draw(10 + seed, "fp32")
    case = random_case(cfg, 1, seed)
    val = lambda bits: from_bits(FP32, np.asarray(bits, np.uint32)).astype(np.float64)
    w, b = val(case["weights"]), val(case["bias"])
    x, dy, rate = val(case["xs"][0]), val(case["dys"][0]), float(val([case["lr"]])[0])
    y, dx, w2, b2 = (val(v) for v in fc_step(cfg, case["weights"], case["bias"],
                                              case["xs"][0], case["dys"][0], case["lr"]))
    ty, tdx, tw, tb, _ = torch_step(cfg, w, b, x, dy, rate)
    xr = np.maximum(x, 0) if cfg.input_relu else x
    ones = np.ones((cfg.batch, 1))
    xp = np.abs(np.hstack([xr, ones]))
    wp = np.abs(np.hstack([w, b[:, None]]))
    r_y = 1 + tree_levels(cfg.p) + cfg.beats - 1
    assert np.all(np.abs(y - ty) <= gamma(r_y) * xp @ wp.T)
    mask = (xr != 0) if cfg.input_relu else 1
    assert np.all(np.abs(dx - tdx) <= gamma(cfg.n_out) * (np.abs(dy) @ np.abs(w)) * mask)
    gabs = np.abs(dy).T @ xp                                       # Σ_b |δy| |x⁺|
    new = np.hstack([tw, tb[:, None]])
    bound = 2 * U * np.abs(new) + rate * (gamma(cfg.batch) + 2 * U) * gabs + 1e-300
    assert np.all(np.abs(np.hstack([w2, b2[:, None]]) - new) <= bound)


def test_fc_fixed16_saturates():
    # y = 80 · (1.0 · 2.0) ± 0.5 = 159.5 / -160.5, beyond Q8.8's ±128: the limits
    cfg = FcConfig(precision="fixed16", n_in=80, n_out=2, p=4, batch=1)
    one = 1 << cfg.frac_bits
    w = np.array([[one] * 80, [-one] * 80])
    y, _, _, _ = fc_step(cfg, w, np.array([-one // 2, -one // 2]), np.full((1, 80), 2 * one),
                         np.zeros((1, 2), np.int64), 0)
    assert y.tolist() == [[(1 << 15) - 1, -(1 << 15)]]

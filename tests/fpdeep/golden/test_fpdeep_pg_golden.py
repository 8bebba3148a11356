"""The PG golden model (nnrtl.sim.golden.fpdeep.pg) against PyTorch autograd in float64:
``W.grad`` and ``b.grad`` of ``conv2d(x, W, b, stride, padding)`` over a mini-batch,
back-propagated with δ. fixed16 codes are integers and every product and sum is exact in
float64 here (below 2⁵³), so the bound is 0: ``dW = W.grad · 2²ᶠ``, ``db = b.grad · 2ᶠ``
exactly.

fp32: each LGB word is ``+0`` plus ``n = pixels · batch`` rounded products, added one by one,
so a term meets at most ``r = n + 1`` roundings and ``|dŴ − dW| ≤ γ_r · Σ|δ·A|`` (Higham
4.2, ``u = 2⁻²⁴``), ``Σ|δ·A|`` the same autograd of ``|x|`` and ``|δ|``; the bias likewise
with ``r = n`` over ``Σ|δ|``."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.sim.golden.fpdeep.pg import lgb_rows, pg_batch

CASES = [  # k, stride, pad, w_in, ic, oc, p, batch
    (3, 1, 1, 7, 3, 5, 2, 3), (3, 2, 1, 9, 2, 3, 3, 2), (5, 2, 2, 11, 1, 4, 4, 1),
    (1, 1, 0, 5, 4, 3, 2, 2), (2, 1, 0, 6, 2, 7, 3, 4), (11, 4, 0, 27, 1, 2, 1, 2),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_pg_against_torch(case):
    k, s, pad, w_in, ic, oc, p, batch = CASES[case]
    cfg = FpConfig(precision="fixed16", k=k, stride=s, pad=pad, w_in=w_in, n_in=ic, n_out=oc, p=p)
    f = cfg.frac_bits
    rng = np.random.default_rng(case)
    one = 1 << f
    acts = rng.integers(-one, one + 1, (batch, w_in, w_in, ic))
    deltas = rng.integers(-one, one + 1, (batch, cfg.w_out, cfg.w_out, oc))
    dw, db = pg_batch(cfg, acts, deltas)
    x = torch.from_numpy(np.moveaxis(acts, -1, 1) / 2.0 ** f)
    w = torch.zeros((oc, ic, k, k), dtype=torch.float64, requires_grad=True)
    b = torch.zeros(oc, dtype=torch.float64, requires_grad=True)
    F.conv2d(x, w, b, stride=s, padding=pad).backward(
        torch.from_numpy(np.moveaxis(deltas, -1, 1) / 2.0 ** f))
    assert np.array_equal(dw, w.grad.numpy() * 2.0 ** (2 * f))
    assert np.array_equal(db, b.grad.numpy() * 2.0 ** f)
    rows = lgb_rows(cfg, dw, db)
    assert len(rows) == cfg.banks + 1 and all(len(r) == cfg.groups for r in rows)
    i, t = divmod(cfg.banks - 1, cfg.taps)
    assert rows[cfg.banks - 1][0][0] == dw[0, i, t // k, t % k]


def test_lgb_rows_with_passes():
    """Q < S_IC: the LGB rows in the LPRAM's layout, word by word: bank ``i·K² + t``, row
    ``g·passes + r``, lane ``j`` = ``dW[g·P + j][r·Q + i][t]`` (0 past ``n_out`` and in the
    ragged last pass), the bias at row ``g·passes + passes − 1``, its other rows 0."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=5, n_out=3, p=2,
                   q=2)  # 3 passes, G = 2
    rng = np.random.default_rng(9)
    dw = rng.integers(1, 1000, (3, 5, 3, 3))
    db = rng.integers(1, 1000, 3)
    rows = lgb_rows(cfg, dw, db)
    assert len(rows) == 2 * 9 + 1 and all(len(r) == 6 for r in rows)
    for i in range(2):
        for t in range(9):
            for g in range(2):
                for r in range(3):
                    for j in range(2):
                        o, c = g * 2 + j, r * 2 + i
                        want = dw[o, c, t // 3, t % 3] if o < 3 and c < 5 else 0
                        assert rows[i * 9 + t][g * 3 + r][j] == want
    assert rows[18] == [[0, 0], [0, 0], [db[0], db[1]], [0, 0], [0, 0], [db[2], 0]]


def test_pg_batch_shapes():
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=2, n_out=3, p=2)
    with pytest.raises(ValueError, match=r"^delta must be \(5, 5, 3\), not \(4, 4, 3\)$"):
        pg_batch(cfg, np.zeros((1, 5, 5, 2), np.int64), np.zeros((1, 4, 4, 3), np.int64))


CHAIN_CASES = [  # k1, pad1, w_in, ic, oc1 (= ic2), p1, pool, k2, pad2, oc2, p2
    (3, 1, 8, 2, 3, 2, (2, 2, 0), 3, 1, 4, 3),
    (3, 0, 9, 1, 4, 3, None, 2, 0, 3, 2),
    (5, 2, 7, 3, 2, 1, (2, 2, 0), 1, 0, 5, 5),
]


@pytest.mark.parametrize("case", range(len(CHAIN_CASES)))
def test_backward_chain_against_torch(case):
    """Two layers (conv + ReLU + pool, then conv): δ₂ → EB of layer 2 → SFU backward of
    layer 1 → PG of both layers, against autograd of the same forward values (the golden
    model's 16-bit activations ``z₁``, ``A₁``).

    Bound: ``dW₂`` exact (its inputs are exact). EB's 16-bit output is the only rounding
    (half up, ``≤ 2⁻ᶠ⁻¹``, no saturation at these magnitudes), and the unpool/ReLU' only
    selects, so ``|δ₁ − z₁.grad| ≤ 2⁻ᶠ⁻¹`` element-wise and ``|dW₁ − W₁.grad| ≤ 2⁻ᶠ⁻¹ ·
    Σ|x|`` over the pixels each weight sees (the autograd of ``conv2d(|x|, ·)`` with a
    ``2⁻ᶠ⁻¹`` output gradient)."""
    from nnrtl.sim.golden.fpdeep.eb import eb_module, sfu_backward
    from nnrtl.sim.golden.fpdeep.fp import fp_module

    k1, pad1, w_in, ic, oc1, p1, pool, k2, pad2, oc2, p2 = CHAIN_CASES[case]
    cfg1 = FpConfig(precision="fixed16", k=k1, stride=1, pad=pad1, w_in=w_in, n_in=ic, n_out=oc1,
                    p=p1, pool=pool)
    cfg2 = FpConfig(precision="fixed16", k=k2, stride=1, pad=pad2, w_in=cfg1.pool_out, n_in=oc1,
                    n_out=oc2, p=p2)
    f, rng = cfg1.frac_bits, np.random.default_rng(20 + case)
    one = 1 << f
    x = rng.integers(-one, one + 1, (w_in, w_in, ic))
    w1 = rng.integers(-one // 2, one // 2 + 1, (oc1, ic, k1, k1))
    b1 = rng.integers(-one // 4, one // 4 + 1, oc1)
    w2 = rng.integers(-one // 2, one // 2 + 1, (oc2, oc1, k2, k2))
    delta2 = rng.integers(-one, one + 1, (cfg2.w_out, cfg2.w_out, oc2))

    forward = fp_module(cfg1, x, w1, b1)
    side = cfg1.pool_out
    a1 = forward.data.reshape(side, side, -1)[..., :oc1]
    error1 = np.zeros((side, side, cfg1.groups * cfg1.p), np.int64)
    error1[..., :oc1] = eb_module(cfg2, delta2, w2)
    shape = (side, side, cfg1.groups, cfg1.p)
    delta1 = sfu_backward(cfg1, error1.reshape(shape), forward.relu.reshape(shape),
                          forward.argmax.reshape(shape))
    delta1 = delta1.reshape(cfg1.w_out, cfg1.w_out, -1)[..., :oc1]
    dw1, db1 = pg_batch(cfg1, [x], [delta1])
    dw2, _ = pg_batch(cfg2, [a1], [delta2])

    t = lambda v, scale=f: torch.tensor(np.moveaxis(v, -1, 0)[None] / 2.0 ** scale,
                                        dtype=torch.float64)
    z1 = forward.z.reshape(cfg1.w_out, cfg1.w_out, -1)[..., :oc1]
    z1t = t(z1).requires_grad_()
    y1 = F.relu(z1t)
    if pool is not None:
        y1 = F.max_pool2d(y1, pool[0], pool[1])
    assert torch.equal(y1.detach(), t(a1))                   # the same forward values
    w2t = torch.tensor(w2 / 2.0 ** f, requires_grad=True)
    F.conv2d(y1, w2t, padding=pad2).backward(t(delta2))
    assert np.array_equal(dw2, w2t.grad.numpy() * 2.0 ** (2 * f))
    grad_z1 = z1t.grad[0].permute(1, 2, 0).numpy()
    assert np.abs(delta1 / 2.0 ** f - grad_z1).max() <= 2.0 ** -(f + 1)
    assert np.abs(grad_z1).max() > 2.0 ** -f                   # errors reach layer 1

    w1t = torch.zeros((oc1, ic, k1, k1), dtype=torch.float64, requires_grad=True)
    b1t = torch.zeros(oc1, dtype=torch.float64, requires_grad=True)
    F.conv2d(t(x), w1t, b1t, padding=pad1).backward(z1t.grad)
    wbound = torch.zeros_like(w1t, requires_grad=True)
    F.conv2d(t(x).abs(), wbound, padding=pad1).backward(
        torch.full(z1t.shape, 2.0 ** -(f + 1), dtype=torch.float64))
    assert np.all(np.abs(dw1 / 2.0 ** (2 * f) - w1t.grad.numpy()) <= wbound.grad.numpy())
    assert np.all(np.abs(db1 / 2.0 ** f - b1t.grad.numpy())
                  <= 2.0 ** -(f + 1) * cfg1.pixels)


@pytest.mark.parametrize("case", range(4))
def test_pg_fp32_against_torch(case):
    from nnrtl.hw.arith.float_format import FP32
    from nnrtl.sim.golden.float import from_bits, to_bits

    k, s, pad, w_in, ic, oc, p, batch = CASES[case]
    cfg = FpConfig(precision="fp32", k=k, stride=s, pad=pad, w_in=w_in, n_in=ic, n_out=oc, p=p)
    rng = np.random.default_rng(50 + case)
    acts = rng.standard_normal((batch, w_in, w_in, ic)).astype(np.float32)
    deltas = rng.standard_normal((batch, cfg.w_out, cfg.w_out, oc)).astype(np.float32)
    bits = lambda v: to_bits(FP32, v).astype(np.int64)
    dw, db = pg_batch(cfg, bits(acts), bits(deltas))
    dw, db = (from_bits(FP32, v).astype(np.float64) for v in (dw, db))

    def grads(a, d):
        w = torch.zeros((oc, ic, k, k), dtype=torch.float64, requires_grad=True)
        b = torch.zeros(oc, dtype=torch.float64, requires_grad=True)
        F.conv2d(torch.from_numpy(np.moveaxis(a, -1, 1).astype(np.float64)), w, b, stride=s,
                 padding=pad).backward(torch.from_numpy(np.moveaxis(d, -1, 1).astype(np.float64)))
        return w.grad.numpy(), b.grad.numpy()

    (w_exact, b_exact), (w_mag, b_mag) = grads(acts, deltas), grads(np.abs(acts),
                                                                    np.abs(deltas))
    n, u = cfg.pixels * batch, 2.0 ** -24
    gamma = lambda r: r * u / (1 - r * u) + n * 2.0 ** -53
    assert np.all(np.abs(dw - w_exact) <= gamma(n + 1) * w_mag)
    assert np.all(np.abs(db - b_exact) <= gamma(n) * b_mag)
    assert np.abs(dw - w_exact).max() > 0

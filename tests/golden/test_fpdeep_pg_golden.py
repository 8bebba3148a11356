"""The PG golden model (nnrtl.sim.golden.fpdeep.pg) against PyTorch autograd in float64:
``W.grad`` and ``b.grad`` of ``conv2d(x, W, b, stride, padding)`` over a mini-batch,
back-propagated with δ. fixed16 codes are integers and every product and sum is exact in
float64 here (below 2⁵³), so the bound is 0: ``dW = W.grad · 2²ᶠ``, ``db = b.grad · 2ᶠ``
exactly."""

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
    cfg = FpConfig("fixed16", k, s, pad, w_in, ic, oc, p)
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


def test_pg_batch_shapes():
    cfg = FpConfig("fixed16", 3, 1, 1, 5, 2, 3, 2)
    with pytest.raises(ValueError, match=r"^delta must be \(5, 5, 3\), not \(4, 4, 3\)$"):
        pg_batch(cfg, np.zeros((1, 5, 5, 2), np.int64), np.zeros((1, 4, 4, 3), np.int64))

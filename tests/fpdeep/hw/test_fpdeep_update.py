# amaranth: UnusedElaboratable=no
"""The FPDeep weight update in the Amaranth simulator, on its LPRAM (the harness of
nnrtl.sim.tb.fpdeep.update): the new rows bit-exact against the golden model
(nnrtl.sim.golden.fpdeep.update) for fixed16 (weights and bias, saturation) and fp32, two
mini-batches (the second update reads the first's rows back), gaps and stalls; the golden
model against plain float arithmetic; the parameter checks."""

import numpy as np
import pytest

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.lpram import load_layout
from nnrtl.hw.fpdeep.update import RATE_BITS, WeightUpdate
from nnrtl.sim.golden.float import from_bits, to_bits
from nnrtl.sim.golden.fpdeep.update import sgd
from nnrtl.sim.tb.fpdeep.eb import describe, stream_run
from nnrtl.sim.tb.fpdeep.update import UpdateHarness, expected, random_case, stimulus


@pytest.mark.parametrize("cfg, lr", [
    (FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=2, n_out=3, p=2), 3000),
    (FpConfig(precision="fixed16", k=2, stride=1, pad=0, w_in=4, n_in=1, n_out=4, p=4,
              completes=False), 65535),
    (FpConfig(precision="fp32", k=2, stride=1, pad=1, w_in=4, n_in=1, n_out=3,
              p=2), int(to_bits(FP32, np.float32([0.125]))[0])),
    (FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=5, n_out=3, p=2,
              q=2), 3000),  # 3 passes, the last ragged
    (FpConfig(precision="fp32", k=2, stride=1, pad=1, w_in=4, n_in=3, n_out=3, p=2,
              q=2), int(to_bits(FP32, np.float32([0.125]))[0])),
], ids=["fixed16-bias", "fixed16-partial", "fp32", "fixed16-passes", "fp32-passes"])
def test_update_matches_golden(cfg, lr):
    batch = 2
    case = random_case(cfg, batch, 2, cfg.n_out + lr % 7)
    stim = stimulus(cfg, case, batch)
    want = expected(cfg, case, lr)
    assert len(want) == 2 * (cfg.banks + cfg.completes) * cfg.rows
    dut = UpdateHarness(cfg, batch=batch, lr=lr)
    got = stream_run(dut, stim, "o", len(want), first=("load",), gap=0.3, stall=0.3, seed=3)
    assert got == want, describe(load_layout(cfg), "o", got, want)


def test_update_changes_weights():
    """The case moves every weight that has a nonzero step (the check is not vacuous)."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=2, n_out=3, p=2)
    case = random_case(cfg, 2, 1, 5)
    new = sgd(cfg, case["weights"], case["dw"][0], 3000, 2 * cfg.frac_bits)
    assert (new != case["weights"]).mean() > 0.9
    assert (np.abs(new) == 1 << 15).any() or (new == (1 << 15) - 1).any()


def test_golden_fixed16_is_sgd():
    """fixed16: ``w − rate·g`` in real numbers, within half a code plus saturation."""
    cfg = FpConfig(precision="fixed16", k=1, stride=1, pad=0, w_in=2, n_in=1, n_out=1, p=1)
    rng = np.random.default_rng(1)
    w = rng.integers(-4000, 4000, 200)
    g = rng.integers(-(1 << 20), 1 << 20, 200)
    lr = 1234
    new = sgd(cfg, w, g, lr, 2 * cfg.frac_bits)
    exact = w / 256 - lr / (1 << RATE_BITS) * g / (1 << 16)
    assert np.all(np.abs(new / 256 - exact) <= 0.5 / 256 + 1e-12)


def test_golden_fp32_is_two_roundings():
    cfg = FpConfig(precision="fp32", k=1, stride=1, pad=0, w_in=2, n_in=1, n_out=1, p=1)
    rng = np.random.default_rng(2)
    w = rng.standard_normal(100).astype(np.float32)
    g = rng.standard_normal(100).astype(np.float32)
    rate = np.float32(0.01)
    new = sgd(cfg, to_bits(FP32, w), to_bits(FP32, g), int(to_bits(FP32, np.array([rate]))[0]), 0)
    assert np.array_equal(from_bits(FP32, new).astype(np.float32),
                          (w - (rate * g).astype(np.float32)).astype(np.float32))


def test_update_parameters():
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=2, n_out=3, p=2)
    with pytest.raises(TypeError, match=r"^batch must be a positive integer, not 0$"):
        WeightUpdate(cfg, batch=0)
    assert WeightUpdate(cfg).latency == 2
    assert WeightUpdate(FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=5, n_in=2, n_out=3,
                                 p=2)).latency == 3

"""gen/omni/training.py with MS1 and MS2 on: what is stored, what BP computes."""

import numpy as np
import pytest
import torch

from nnrtl.gen.omni.accounting import Workload, footprint
from nnrtl.gen.omni.cell import bp_ew_part1, fw_ew
from nnrtl.gen.omni.compress import decompress, prune
from nnrtl.gen.omni.training import FIELDS, MsConfig, backward, forward, layers_from_module


def _setup(layers=2, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    module = torch.nn.LSTM(4, 6, num_layers=layers)
    weights = layers_from_module(module, dtype)
    xs = torch.randn(8, 3, 4, dtype=dtype)
    dys = torch.randn(8, 3, 6, dtype=dtype)
    return weights, xs, dys


def test_ms2_all_kept_is_bit_identical_to_baseline():
    weights, xs, dys = _setup()
    _, tape = forward(weights, xs)
    base, _ = backward(weights, tape, dys)
    kept = np.ones((2, 8), dtype=bool)
    _, tape = forward(weights, xs, MsConfig(ms2=True, skip_threshold=0.0), kept)
    same, _ = backward(weights, tape, dys, factors=np.ones(2))
    for index in range(2):
        for field in FIELDS:
            assert torch.equal(base[index][field], same[index][field])


def _truncated_autograd(weights, xs, dy_last, first_kept, factor):
    """Single-layer, single-loss reference: cells before ``first_kept`` run with detached
    weights and their state is detached (truncated BPTT), by autograd."""
    params = {k: v.clone().requires_grad_(True) for k, v in weights[0].items()}
    hidden = params["weight_hh"].shape[1]
    h = torch.zeros(xs.shape[1], hidden, dtype=xs.dtype)
    s = torch.zeros_like(h)
    for t in range(xs.shape[0]):
        use = params if t >= first_kept else {k: v.detach() for k, v in params.items()}
        if t == first_kept:
            h, s = h.detach(), s.detach()
        pre = (xs[t] @ use["weight_ih"].t() + use["bias_ih"] + use["bias_hh"]
               + h @ use["weight_hh"].t())
        _, s, h = fw_ew(pre, s)
    (h * dy_last).sum().backward()
    return {k: v.grad * factor for k, v in params.items()}


def test_ms2_skipped_prefix_is_scaled_truncated_bptt():
    weights, xs, dys = _setup(layers=1)
    dys[:-1] = 0
    kept = np.zeros((1, 8), dtype=bool)
    kept[0, 3:] = True
    _, tape = forward(weights, xs, MsConfig(ms2=True), kept)
    grads, info = backward(weights, tape, dys, factors=[1.7])
    reference = _truncated_autograd(weights, xs, dys[-1], 3, 1.7)
    for field in FIELDS:
        assert torch.allclose(grads[0][field], reference[field], rtol=1e-12, atol=1e-14)
    assert not info["dxs"][:3].any() and info["dxs"][3:].abs().sum() > 0
    # skipped cells store nothing
    assert [cell is None for cell in tape.layers[0]["cells"]] == [True] * 3 + [False] * 5
    assert tape.stored["activations"] == 5 * 4 * 3 * (4 + 6)
    assert tape.stored["intermediates"] == 5 * 4 * 5 * 3 * 6


def test_ms2_per_timestamp_skips_the_latest_cells_and_their_dy():
    weights, xs, dys = _setup(layers=1)
    kept = np.zeros((1, 8), dtype=bool)
    kept[0, :5] = True
    _, tape = forward(weights, xs, MsConfig(ms2=True, loss_type="per-timestamp"), kept)
    grads, _ = backward(weights, tape, dys)
    # the full BP of the first five steps alone with their δY (up to the order of the
    # outer products' sums over 8 or 5 steps)
    _, short = forward(weights, xs[:5])
    expected, _ = backward(weights, short, dys[:5])
    for field in FIELDS:
        assert torch.allclose(grads[0][field], expected[0][field], rtol=0, atol=1e-14)


@pytest.mark.parametrize("threshold", [0.05, 0.1, 0.3])
def test_ms1_stores_compressed_and_bp_reads_the_pruned_part1(threshold):
    weights, xs, dys = _setup(dtype=torch.float32)
    config = MsConfig(ms1=True, prune_threshold=threshold)
    _, tape = forward(weights, xs, config)
    values, survivors = tape.stored["p1_values"], tape.stored["p1_survivors"]
    assert 0 < survivors < values == 2 * 8 * 6 * 3 * 6
    workload = Workload(input_size=4, hidden_size=6, layers=2, length=8, batch=3)
    model = footprint(workload, density=survivors / values)
    assert tape.stored["intermediates"] == pytest.approx(model["intermediates"], rel=1e-12)
    assert tape.stored["activations"] == model["activations"]
    # the decoded record is the pruned P1 of the same cell, recomputed from FW
    _, base = forward(weights, xs)
    for index in range(2):
        for t in (0, 5):
            gates, s = base.layers[index]["cells"][t]
            part1 = bp_ew_part1(gates, s, base.layers[index]["s_prev"][t])
            assert torch.equal(decompress(tape.layers[index]["cells"][t]),
                               prune(part1, threshold))
    grads, info = backward(weights, tape, dys)
    assert 0 < max(info["rows"]) <= 1
    assert all(torch.isfinite(g).all() for layer in grads for g in layer.values())

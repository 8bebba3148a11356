"""gen/omni/training.py + cell.py: the FW/BP decomposition against PyTorch autograd of
nn.LSTM, and MS1 at threshold 0 against the baseline order."""

import pytest
import torch

from nnrtl.gen.errors import UsageError
from nnrtl.gen.omni.cell import PART1, bp_ew_part1, bp_ew_part2, fw_ew, fw_matmul
from nnrtl.gen.omni.training import (FIELDS, FLOAT32_BOUND, MsConfig, backward, forward,
                                     layers_from_module)


def _autograd(module, xs, dys):
    inputs = xs.clone().requires_grad_(True)
    outputs = module(inputs)[0]
    outputs.backward(dys)
    return outputs.detach(), inputs.grad


def _relative(value, reference):
    return float((value.double() - reference).abs().max() / reference.abs().max())


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("loss_type", ["single", "per-timestamp"])
def test_gradients_equal_autograd_float64(layers, loss_type):
    torch.manual_seed(layers)
    module = torch.nn.LSTM(5, 7, num_layers=layers).double()
    xs = torch.randn(9, 3, 5, dtype=torch.float64)
    dys = torch.randn(9, 3, 7, dtype=torch.float64)
    if loss_type == "single":
        dys[:-1] = 0
    outputs, dxs = _autograd(module, xs, dys)
    weights = layers_from_module(module)
    ys, tape = forward(weights, xs, MsConfig(loss_type=loss_type))
    grads, info = backward(weights, tape, dys)
    assert _relative(ys, outputs) < 1e-12
    assert _relative(info["dxs"], dxs) < 1e-12
    for index in range(layers):
        for field in FIELDS:
            reference = getattr(module, f"{field}_l{index}").grad
            assert _relative(grads[index][field], reference) < 1e-12, (index, field)


def test_gradients_float32_within_documented_bound():
    torch.manual_seed(3)
    module = torch.nn.LSTM(16, 64, num_layers=2).double()
    xs = torch.randn(32, 4, 16, dtype=torch.float64)
    dys = torch.randn(32, 4, 64, dtype=torch.float64)
    _autograd(module, xs, dys)
    weights = layers_from_module(module, torch.float32)
    _, tape = forward(weights, xs.float())
    grads, _ = backward(weights, tape, dys.float())
    worst = max(_relative(grads[i][f], getattr(module, f"{f}_l{i}").grad)
                for i in range(2) for f in FIELDS)
    assert 0 < worst < FLOAT32_BOUND


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ms1_threshold_zero_is_bit_identical_to_baseline(dtype):
    torch.manual_seed(5)
    module = torch.nn.LSTM(6, 10, num_layers=2)
    weights = layers_from_module(module, dtype)
    xs = torch.randn(12, 3, 6, dtype=dtype)
    dys = torch.randn(12, 3, 10, dtype=dtype)
    runs = []
    for ms1 in (False, True):
        _, tape = forward(weights, xs, MsConfig(ms1=ms1, prune_threshold=0.0))
        runs.append(backward(weights, tape, dys))
    (base, base_info), (ms1, ms1_info) = runs
    assert torch.equal(base_info["dxs"], ms1_info["dxs"])
    for index in range(2):
        for field in FIELDS:
            assert torch.equal(base[index][field], ms1[index][field])


def test_bp_cell_parts_equal_autograd_of_one_cell():
    """BP-EW-P1 + P2 give the pre-activation gradients and δS_{t-1} of one FW cell."""
    torch.manual_seed(7)
    pre = torch.randn(3, 16, dtype=torch.float64, requires_grad=True)
    s_prev = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    _, s, h = fw_ew(pre, s_prev)
    dh, ds = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    torch.autograd.backward((h, s), (dh, ds))
    with torch.no_grad():
        gates, s, _ = fw_ew(pre, s_prev)
        part1 = bp_ew_part1(gates, s, s_prev)
        dgates, ds_prev = bp_ew_part2(part1, dh, ds)
    assert part1.shape == (3, len(PART1), 4)
    assert torch.allclose(dgates, pre.grad, rtol=0, atol=1e-14)
    assert torch.allclose(ds_prev, s_prev.grad, rtol=0, atol=1e-14)


def test_fw_matmul_is_eq1():
    projected = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    h = torch.tensor([[2.0]])
    u = torch.tensor([[1.0], [0.5], [-1.0], [0.0]])
    assert fw_matmul(projected, h, u).tolist() == [[3.0, 3.0, 1.0, 4.0]]


def test_config_errors():
    with pytest.raises(UsageError, match=r"^prune_threshold must be a finite number >= 0, "
                                         r"not -0\.1$"):
        MsConfig(prune_threshold=-0.1)
    with pytest.raises(UsageError, match=r"^skip_threshold must be a number from 0 to "
                                         r"below 1, not 1\.5$"):
        MsConfig(skip_threshold=1.5)
    with pytest.raises(UsageError, match=r"^loss_type must be one of single, "
                                         r"per-timestamp, not 'mse'$"):
        MsConfig(loss_type="mse")
    with pytest.raises(UsageError, match=r"^scaling must be one of predicted, measured, "
                                         r"count, not 'LL'$"):
        MsConfig(scaling="LL")
    with pytest.raises(UsageError, match=r"no projection$"):
        layers_from_module(torch.nn.LSTM(3, 4, proj_size=2))

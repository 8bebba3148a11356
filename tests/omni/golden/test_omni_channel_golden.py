"""Golden model of the η-LSTM channel (``sim/golden/omni/channel.py``) against PyTorch.

One FW cell and one BP cell of the golden model (fp32 arithmetic of the RTL, table-based
sigmoid/tanh) against float64 autograd of an ``nn.LSTMCell`` step on the same (fp32)
weights and inputs: ``h_t, s_t`` and, for ``loss = sum(h_t * (dY + dH)) + sum(s_t *
dS)``, the gradients of ``x, h_{t-1}, s_{t-1}``, ``W_ih, W_hh`` and the bias.

The bound (first-order error analysis; every quantity is a max over the cell, from the
float64 reference, never from the model), with ``u = 2**-24`` and the activation units'
absolute errors ``e_sig = 5e-6``, ``e_tanh = 1e-5`` (the bounds
``tests/hw/test_arith_activation.py`` asserts for fp32):

- pre-activation ``r``: ``(K + 1) u sum_k |W'[r,k] z'[k]|`` (a sum of ``K = I + H + 1``
  rounded products in any order);
- gates: ``e_sig + pre / 4`` (i, f, o), ``e_tanh + pre`` (g), per element;
- ``s_t``: ``|s_{t-1}| e_f + |c| e_i + |i| e_c + 3u (|f s_{t-1}| + |i c|)``: ``e_s``;
- ``h_t``: ``|o| (e_tanh + e_s + u) + |tanh s_t| e_o + 2u |h_t|``;
- BP-EW-P1 vectors, element by element: the errors of the factors times the partial
  derivatives of the product at the reference (``tanh(s_t)``, recomputed through the tanh
  unit, with ``e_tanh + e_s + u``), plus ``3u`` of the product (e.g. ``p_i = c i (1 - i)``:
  ``|i (1 - i)| e_c + |c (1 - 2i)| e_i + 3u |p_i|``);
- BP-EW-P2 likewise (``ds = dS + dh p_s``: ``|dh| e_ps + 2u (|dS| + |dh p_s|) + u |dh|``;
  ``di = ds p_i``: ``|ds| e_pi + e_ds |p_i| + u |di|``; ``dS_{t-1} = ds f``);
- eq. 2: ``sum_r |W[r,k]| e_dg[r] + (4H + 1) u sum_r |W[r,k] dg[r]|``; eq. 3:
  ``e_dg[r] |z[k]| + u |dW|``; the bias gradient ``e_dg + u |db|``.

Each is doubled for the second-order terms. Measured on the four cells below, the
largest error is 0.04 to 0.31 of its bound (``h_t`` 0.04-0.12, gradients up to 0.31).
Also: the model's results do not depend on the number of lanes (rows are independent and
every sum has the accumulator's fixed order), bit for bit.
"""

import numpy as np
import pytest
import torch

from nnrtl.hw.omni.channel_config import ChannelConfig
from nnrtl.sim.golden.float import from_bits
from nnrtl.sim.golden.omni.channel import bp_cell, bp_inputs, fw_cell
from nnrtl.sim.tb.omni.channel import random_cell

U = 2.0 ** -24
E_SIG, E_TANH = 5e-6, 1e-5


def torch_step(config, fw_pad, gradients):
    """float64 autograd of one ``nn.LSTMCell`` step on the scratchpad's values."""
    h, i_size = config.hidden_size, config.input_size
    f = lambda bits: from_bits(config.fmt, bits).astype(np.float64)
    weights = f(fw_pad["weights"]).reshape(4 * h, config.fw_row_length)
    z = f(fw_pad["z"])
    cell = torch.nn.LSTMCell(i_size, h, dtype=torch.float64)
    with torch.no_grad():
        cell.weight_ih.copy_(torch.tensor(weights[:, :i_size]))
        cell.weight_hh.copy_(torch.tensor(weights[:, i_size:i_size + h]))
        cell.bias_ih.copy_(torch.tensor(weights[:, -1]))
        cell.bias_hh.zero_()
    x = torch.tensor(z[:i_size]).reshape(1, -1).requires_grad_()
    h_prev = torch.tensor(z[i_size:i_size + h]).reshape(1, -1).requires_grad_()
    s_prev = torch.tensor(f(fw_pad["s_prev"])).reshape(1, -1).requires_grad_()
    h_t, s_t = cell(x, (h_prev, s_prev))
    dy, dh_next, ds_next = (torch.tensor(np.float32(g).astype(np.float64))
                            for g in gradients[:3])
    ((h_t * (dy + dh_next)).sum() + (s_t * ds_next).sum()).backward()
    pre = (torch.tensor(weights) @ torch.tensor(z)).numpy()
    gates = np.concatenate([1 / (1 + np.exp(-pre[:2 * h])), np.tanh(pre[2 * h:3 * h]),
                            1 / (1 + np.exp(-pre[3 * h:]))])
    return {"weights": weights, "z": z, "s_prev": s_prev.detach().numpy().ravel(),
            "gates": gates, "h": h_t.detach().numpy().ravel(),
            "s": s_t.detach().numpy().ravel(), "dh": (dy + dh_next).numpy().ravel(),
            "ds_next": ds_next.numpy().ravel(), "dx": x.grad.numpy().ravel(),
            "dh_prev": h_prev.grad.numpy().ravel(), "ds_prev": s_prev.grad.numpy().ravel(),
            "dw_ih": cell.weight_ih.grad.numpy(), "dw_hh": cell.weight_hh.grad.numpy(),
            "db": cell.bias_ih.grad.numpy()}


def bounds(config, ref):
    h = config.hidden_size
    k = config.fw_row_length
    weights, z, s_prev = ref["weights"], ref["z"], np.abs(ref["s_prev"])
    pre = (k + 1) * U * (np.abs(weights) @ np.abs(z))
    i, f, c, o = np.split(ref["gates"], 4)
    e_i, e_f, e_c, e_o = (E_SIG + pre[:h] / 4, E_SIG + pre[h:2 * h] / 4,
                          E_TANH + pre[2 * h:3 * h], E_SIG + pre[3 * h:] / 4)
    e_s = (s_prev * e_f + np.abs(c) * e_i + np.abs(i) * e_c
           + 3 * U * (np.abs(f) * s_prev + np.abs(i * c)))
    tanh_s = np.tanh(ref["s"])
    e_h = np.abs(o) * (E_TANH + e_s + U) + np.abs(tanh_s) * e_o + 2 * U * np.abs(ref["h"])
    # BP-EW-P1, element by element (derivatives of each product at the reference)
    e_t = E_TANH + e_s + U
    p_o, p_s = tanh_s * o * (1 - o), o * (1 - tanh_s ** 2)
    p_i, p_f, p_c = c * i * (1 - i), ref["s_prev"] * f * (1 - f), i * (1 - c ** 2)
    e_po = np.abs(o * (1 - o)) * e_t + np.abs(tanh_s * (1 - 2 * o)) * e_o + 3 * U * np.abs(p_o)
    e_ps = np.abs(1 - tanh_s ** 2) * e_o + 2 * np.abs(o * tanh_s) * e_t + 3 * U
    e_pi = np.abs(i * (1 - i)) * e_c + np.abs(c * (1 - 2 * i)) * e_i + 3 * U * np.abs(p_i)
    e_pf = s_prev * np.abs(1 - 2 * f) * e_f + 3 * U * np.abs(p_f)
    e_pc = np.abs(1 - c ** 2) * e_i + 2 * np.abs(i * c) * e_c + 3 * U * np.abs(p_c)
    # BP-EW-P2
    dh, ds_next = np.abs(ref["dh"]), np.abs(ref["ds_next"])
    ds = np.abs(ref["ds_next"] + ref["dh"] * p_s)
    e_ds = dh * e_ps + 2 * U * (ds_next + dh * np.abs(p_s)) + U * dh
    e_dg = np.concatenate([ds * e_pi + e_ds * np.abs(p_i), ds * e_pf + e_ds * np.abs(p_f),
                           ds * e_pc + e_ds * np.abs(p_c), dh * e_po + 2 * U * dh * np.abs(p_o)])
    dg_ref = np.abs(ref["db"])  # the bias gradient is the gate gradient
    e_dg = e_dg + U * dg_ref
    w = np.abs(weights[:, :k - 1])
    e_dz = w.T @ e_dg + (4 * h + 1) * U * (w.T @ dg_ref)
    dw = np.abs(np.concatenate([ref["dw_ih"], ref["dw_hh"]], axis=1))
    e_dw = e_dg[:, None] * np.abs(z[:k - 1])[None, :] + U * dw
    e_ds_prev = ds * e_f + e_ds * np.abs(f) + U * ds
    return {"h": 2 * e_h, "s": 2 * e_s, "dz": 2 * e_dz,
            "ds_prev": 2 * e_ds_prev, "dw": 2 * e_dw,
            "db": 2 * (e_dg + U * dg_ref)}


@pytest.mark.parametrize("lanes,input_size,hidden_size,seed", [
    (3, 3, 5, 0), (5, 6, 7, 1), (32, 40, 36, 2), (7, 64, 48, 3),
])
def test_golden_cell_against_torch(lanes, input_size, hidden_size, seed):
    config = ChannelConfig(pes_per_channel=lanes, input_size=input_size,
                           hidden_size=hidden_size)
    fw_pad, gradients = random_cell(config, np.random.default_rng(seed))
    gradients = gradients[:3] + (np.zeros((4 * hidden_size, input_size + hidden_size)),
                                 np.zeros(4 * hidden_size))
    fw = fw_cell(config, fw_pad)
    bp = bp_cell(config, bp_inputs(config, fw, *gradients))
    ref = torch_step(config, fw_pad, gradients)
    bound = bounds(config, ref)
    f = lambda bits: from_bits(config.fmt, bits).astype(np.float64)
    got = {"h": f(fw["h"]), "s": f(fw["s"]), "dz": f(bp["dz"]), "ds_prev": f(bp["ds_prev"]),
           "dw": f(bp["dw"]).reshape(4 * hidden_size, -1), "db": f(bp["db"])}
    want = {"h": ref["h"], "s": ref["s"], "dz": np.concatenate([ref["dx"], ref["dh_prev"]]),
            "ds_prev": ref["ds_prev"],
            "dw": np.concatenate([ref["dw_ih"], ref["dw_hh"]], axis=1), "db": ref["db"]}
    for name in got:
        error = np.abs(got[name] - want[name])
        worst = np.unravel_index(np.argmax(error / bound[name]), error.shape)
        assert np.all(error <= bound[name]), (
            f"{name}: error {error[worst]:.3g} beyond the bound {bound[name][worst]:.3g}")


def test_golden_cell_independent_of_lanes():
    base = ChannelConfig(pes_per_channel=1, input_size=5, hidden_size=6)
    fw_pad, gradients = random_cell(base, np.random.default_rng(9))
    results = []
    for lanes in (1, 4, 7, 32):
        config = ChannelConfig(pes_per_channel=lanes, input_size=5, hidden_size=6)
        fw = fw_cell(config, fw_pad)
        bp = bp_cell(config, bp_inputs(config, fw, *gradients))
        results.append([fw[name].tolist() for name in ("i", "f", "c", "o", "s", "h")]
                       + [bp[name].tolist() for name in ("dgates", "dz", "ds_prev", "dw", "db")])
    assert all(r == results[0] for r in results[1:])

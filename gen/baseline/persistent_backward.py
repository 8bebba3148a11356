"""The backward pass through time of the persistent RNN layer (:mod:`.persistent_rnn`).

The recurrent chain runs in the persistent backward kernel
(:func:`.persistent_kernel.build_backward`): each block keeps its units' columns of
``W_hh`` in registers and, from the last step to the first, forms its units'
pre-activation gradients, meets the grid, and computes ``dh_{t-1} = W_hh^T dz_h`` for its
units. What is not a chain is done after it as matrix products over all steps at once
(:func:`weight_gradients`): ``dW_hh = sum_t dz_h[t]^T h_{t-1}``, ``dW_ih = sum_t
dz_x[t]^T x_t``, the biases' sums and ``dx_t = dz_x[t] W_ih``.
:func:`schedule_model_backward` is the kernel's schedule in numpy for any number of blocks.
"""

import numpy as np

__all__ = ["backward", "schedule_model_backward", "weight_gradients", "torch_gradients",
           "backward_flops"]


def backward(p, dy, saved, y, h0, c0, w_hh):
    """Run the backward kernel of plan ``p``; returns ``(dz_x, dz_h, dh0, dc0,
    seconds)`` (``dc0`` None for a GRU)."""
    from numba import cuda

    from .persistent_rnn import backward_kernel, launch

    steps, batch, hidden = dy.shape
    rows = p.gates * hidden
    c0 = np.zeros((batch, hidden), np.float32) if c0 is None else c0
    host = {"dy": dy, "saved": saved, "y": y, "h0": h0, "c0": c0, "w_hh": w_hh,
            "dz_x": np.zeros((steps, batch, rows), np.float32),
            "dz_h": np.zeros((steps, batch, rows), np.float32),
            "dh_buf": np.zeros((2, batch, hidden), np.float32),
            "dc": np.zeros((batch, hidden), np.float32)}
    device = {name: cuda.to_device(np.ascontiguousarray(value, np.float32))
              for name, value in host.items()}
    seconds = launch(backward_kernel(p), p, [device[name] for name in host])
    dh0 = device["dh_buf"].copy_to_host()[steps % 2]
    dc0 = device["dc"].copy_to_host() if p.cell == "lstm" else None
    return (device["dz_x"].copy_to_host(), device["dz_h"].copy_to_host(), dh0, dc0,
            seconds)


def schedule_model_backward(p, dy, saved, y, h0, c0, w_hh):
    """The backward kernel's schedule in numpy, float32, any number of blocks (``dh_{t-1}``
    summed over the slices of ``W_hh``'s rows in slice order); returns ``(dz_x, dz_h, dh0,
    dc0)``."""
    steps, batch, hidden = dy.shape
    w = np.asarray(w_hh, np.float32)
    rows = p.gates * hidden
    per = -(-rows // p.slices)
    dz_x = np.zeros((steps, batch, rows), np.float32)
    dz_h = np.zeros_like(dz_x)
    dh = np.zeros((batch, hidden), np.float32)
    dc = np.zeros((batch, hidden), np.float32)
    one = np.float32(1)
    for t in reversed(range(steps)):
        total = dy[t] + dh
        parts = [saved[t, :, k * hidden:(k + 1) * hidden] for k in range(saved.shape[2] //
                                                                       hidden)]
        direct = np.zeros_like(total)
        if p.cell == "lstm":
            i, f, g, o, c = parts
            tc = np.tanh(c)
            prev = saved[t - 1, :, 4 * hidden:] if t else c0
            dct = dc + total * o * (one - tc * tc)
            dc = dct * f
            gates = [dct * g * i * (one - i), dct * prev * f * (one - f),
                     dct * i * (one - g * g), total * tc * o * (one - o)]
            dz_x[t] = dz_h[t] = np.concatenate(gates, axis=1)
        else:
            r, z, n, hn = parts
            prev = y[t - 1] if t else h0
            direct = total * z
            dn = total * (one - z) * (one - n * n)
            d_r = dn * hn * r * (one - r)
            d_z = total * (prev - n) * z * (one - z)
            dz_x[t] = np.concatenate([d_r, d_z, dn], axis=1)
            dz_h[t] = np.concatenate([d_r, d_z, dn * r], axis=1)
        dh = direct
        for s in range(p.slices):
            cut = slice(s * per, min((s + 1) * per, rows))
            dh = dh + dz_h[t][:, cut] @ w[cut]
    return dz_x, dz_h, dh, (dc if p.cell == "lstm" else None)


def weight_gradients(x, y, h0, dz_x, dz_h, w_ih):
    """``{"weight_ih", "weight_hh", "bias_ih", "bias_hh", "x"}``: the gradients that are
    matrix products over all steps (module docstring)."""
    previous = np.concatenate([np.asarray(h0, np.float32)[None], y[:-1]])
    return {"weight_ih": np.einsum("tbr,tbi->ri", dz_x, x),
            "weight_hh": np.einsum("tbr,tbh->rh", dz_h, previous),
            "bias_ih": dz_x.sum(axis=(0, 1)), "bias_hh": dz_h.sum(axis=(0, 1)),
            "x": dz_x @ np.asarray(w_ih, np.float32)}


def torch_gradients(cell, weights, x, h0, c0, dy):
    """PyTorch float64 autograd of ``sum(y * dy)`` through ``nn.LSTM`` / ``nn.GRU`` on the
    same weights: the gradients of :func:`weight_gradients`' names and ``"h0"``, ``"c0"``.
    """
    import torch

    from .persistent_rnn import torch_module
    module = torch_module(cell, weights)

    def leaf(value):
        return torch.tensor(np.asarray(value, np.float64), requires_grad=True)
    xs, h = leaf(x), leaf(np.asarray(h0)[None])
    c = leaf(np.asarray(c0)[None]) if cell == "lstm" else None
    y, _ = module(xs, (h, c) if cell == "lstm" else h)
    (y * torch.tensor(np.asarray(dy, np.float64))).sum().backward()
    grads = {name: getattr(module, f"{name}_l0").grad.numpy()
             for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    grads.update(x=xs.grad.numpy(), h0=h.grad.numpy()[0])
    if cell == "lstm":
        grads["c0"] = c.grad.numpy()[0]
    return grads


def backward_flops(cell, input_size, hidden_size, batch, steps):
    """Floating-point operations of the backward pass: ``W_hh^T dz_h`` every step and the
    three gradient products (``dW_hh``, ``dW_ih``, ``dx``), 2 per multiply-add: twice the
    forward's (:func:`.persistent_rnn.layer_flops`)."""
    from .persistent_rnn import layer_flops
    return 2 * layer_flops(cell, input_size, hidden_size, batch, steps)

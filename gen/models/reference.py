"""float64 numpy reference forward of every layer and of a :class:`~.network.Network`, the
equations of PyTorch (``nn.LSTM``, ``nn.GRU``, ``nn.Conv2d``, ...) and ONNX.

LSTM (gate blocks i, f, g, o), per direction, ``z = W_ih x_t + b_ih + W_hh h_{t-1} +
b_hh``: ``c_t = sigmoid(z_f + p_f c_{t-1}) c_{t-1} + sigmoid(z_i + p_i c_{t-1})
tanh(z_g)``, ``h_t = W_hr (sigmoid(z_o + p_o c_t) tanh(c_t))`` (no ``W_hr`` without a
projection, ``p = 0`` without peepholes). GRU (r, z, n): ``r, z = sigmoid(W_i x + b_i +
W_h h + b_h)``, ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`` (ONNX's
``linear_before_reset=0``: ``tanh(W_in x + b_in + W_hn (r * h) + b_hn)``), ``h_t = (1 -
z) n + z h_{t-1}``. A reverse direction reads the sequence from its end and
writes each output at its own step; a bidirectional layer's output is ``[forward,
reverse]`` along the features, and its states are stacked forward first. Sequences of
different lengths in one batch (``lengths``) follow ONNX's ``sequence_lens``
(:mod:`.sequences`).
"""

import numpy as np

from .layers import (LSTM, RNN_LAYERS, Conv2d, Dropout, Flatten, Linear, LocalResponseNorm,
                     MaxPool2d, ReLU, Sigmoid, Softmax, Tanh)
from .sequences import reverse_within, step_mask

__all__ = ["sigmoid", "rnn_layer_forward", "layer_forward", "forward"]


def sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _direction(layer, suffix, x, h, c, trace, mask=None):
    """One direction over ``x`` (T x N x I), time order as given; ``mask`` (T x N bool):
    the steps each sequence runs (its state stops and its outputs are zero after)."""
    w_ih, w_hh = getattr(layer, "weight_ih" + suffix), getattr(layer, "weight_hh" + suffix)
    b_ih, b_hh = getattr(layer, "bias_ih" + suffix), getattr(layer, "bias_hh" + suffix)
    if b_ih is None:
        b_ih = b_hh = np.zeros(w_ih.shape[0])
    lstm = isinstance(layer, LSTM)
    w_hr = getattr(layer, "weight_hr" + suffix) if lstm else None
    peep = getattr(layer, "weight_peep" + suffix) if lstm else None
    p_i, p_f, p_o = np.split(np.zeros(3 * c.shape[-1]) if peep is None else peep, 3)
    linear_before_reset = lstm or layer.linear_before_reset
    outputs = []
    for t, x_t in enumerate(x):
        h_before, c_before = h, c
        zx, zh = x_t @ w_ih.T + b_ih, h @ w_hh.T + b_hh
        if lstm:
            z = zx + zh
            i, f, g, o = np.split(z, 4, axis=-1)
            c = sigmoid(f + p_f * c) * c + sigmoid(i + p_i * c) * np.tanh(g)
            h = sigmoid(o + p_o * c) * np.tanh(c)
            if w_hr is not None:
                h = h @ w_hr.T
            if trace is not None:
                trace["z"].append(z)
                trace["c"].append(c)
        else:
            rx, zx_, nx = np.split(zx, 3, axis=-1)
            rh, zh_, nh = np.split(zh, 3, axis=-1)
            r, z = sigmoid(rx + rh), sigmoid(zx_ + zh_)
            if not linear_before_reset:
                rows = w_hh.shape[0] // 3
                nh = (r * h) @ w_hh[2 * rows:].T + b_hh[2 * rows:]
            h = (1.0 - z) * np.tanh(nx + r * nh if linear_before_reset else nx + nh) + z * h
            if trace is not None:
                trace["z"].extend((zx, zh))
        if mask is not None:
            keep = mask[t][:, None]
            h, c = np.where(keep, h, h_before), np.where(keep, c, c_before)
            outputs.append(np.where(keep, h, 0.0))
        else:
            outputs.append(h)
    return np.stack(outputs), h, c


def rnn_layer_forward(layer, x, state=None, *, lengths=None, trace=None):
    """One LSTM or GRU layer over ``x`` (``T x N x I``).

    Parameters
    ----------
    state : LSTM: ``(h0, c0)``; GRU: ``h0``; shapes ``(D, N, P or H)`` and ``(D, N, H)``
    lengths : array of N ints, optional
        Each sequence's steps (ONNX's ``sequence_lens``, :mod:`.sequences`): its state
        stops at its last step, a reverse direction starts there, and its outputs after
        it are zero. ``None``: every sequence is ``T`` steps.
    trace : dict, optional
        Filled with lists: ``"z"`` (pre-activations; a GRU's input and recurrent parts
        apart), ``"c"`` (LSTM cells) and ``"h"``.

    Returns
    -------
    output : ndarray, shape (T, N, D * (P or H))
    state : the final states, as ``state``
    """
    steps, count = x.shape[:2]
    out, hidden = layer.weight_hh.shape[1], layer.hidden_size
    lstm = isinstance(layer, LSTM)
    directions = layer.num_directions
    if state is None:
        h0 = np.zeros((directions, count, out))
        c0 = np.zeros((directions, count, hidden))
    else:
        h0, c0 = (state if lstm else (state, None))
        h0 = np.asarray(h0, dtype=np.float64).reshape(directions, count, out)
        c0 = np.zeros((directions, count, hidden)) if c0 is None else \
            np.asarray(c0, dtype=np.float64).reshape(directions, count, hidden)
    passes = {"forward": [("", False)], "reverse": [("", True)],
              "bidirectional": [("", False), ("_reverse", True)]}[layer.direction]
    outputs, h_n, c_n = [], [], []
    mask = None if lengths is None else step_mask(lengths, steps)

    def flip(values):
        return values[::-1] if lengths is None else reverse_within(values, lengths)

    for d, (suffix, backwards) in enumerate(passes):
        sequence = flip(x) if backwards else x
        y, h, c = _direction(layer, suffix, sequence, h0[d], c0[d], trace, mask)
        outputs.append(flip(y) if backwards else y)
        h_n.append(h)
        c_n.append(c)
    output = np.concatenate(outputs, axis=-1)
    if trace is not None:
        trace["h"].append(output)
    h_n = np.stack(h_n)
    return output, ((h_n, np.stack(c_n)) if lstm else h_n)


def _windows(x, kernel, stride, dilation):
    """``(a, b, view)`` for each kernel position: the inputs it meets, ``N x C x OH x OW``."""
    out_h = (x.shape[2] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    out_w = (x.shape[3] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    for a in range(kernel[0]):
        for b in range(kernel[1]):
            top, left = a * dilation[0], b * dilation[1]
            yield a, b, x[:, :, top:top + stride[0] * (out_h - 1) + 1:stride[0],
                          left:left + stride[1] * (out_w - 1) + 1:stride[1]]


def _pad(x, padding, value, end=None):
    end = padding if end is None else end
    return np.pad(x, ((0, 0), (0, 0), (padding[0], end[0]), (padding[1], end[1])),
                  constant_values=value)


def _lrn(layer, x):
    """ONNX's LRN (:class:`~.layers.LocalResponseNorm`) of ``N x C x ...``."""
    before, after = (layer.size - 1) // 2, layer.size // 2
    squares = np.pad(x * x, ((0, 0), (before, after)) + ((0, 0),) * (x.ndim - 2))
    total = sum(squares[:, j:j + x.shape[1]] for j in range(layer.size))
    return x / (layer.k + layer.alpha / layer.size * total) ** layer.beta


def layer_forward(layer, x):
    """One CNN or head layer over ``x`` (``N x C x H x W``, or ``... x F`` after a Flatten
    or in a head)."""
    if isinstance(layer, Conv2d):
        x = _pad(x, layer.padding, 0.0)
        groups, out = layer.groups, 0.0
        inputs, outputs = x.shape[1] // groups, layer.out_channels // groups
        for a, b, view in _windows(x, layer.kernel_size, layer.stride, layer.dilation):
            out = out + np.concatenate([
                np.einsum("nchw,oc->nohw", view[:, g * inputs:(g + 1) * inputs],
                          layer.weight[g * outputs:(g + 1) * outputs, :, a, b])
                for g in range(groups)], axis=1)
        if layer.bias is not None:
            out = out + layer.bias[None, :, None, None]
        return out
    if isinstance(layer, MaxPool2d):
        x = _pad(x, layer.padding, -np.inf, layer.padding_end)
        views = [view for _, _, view in _windows(x, layer.kernel_size, layer.stride, (1, 1))]
        return np.max(np.stack(views), axis=0)
    if isinstance(layer, ReLU):
        return np.maximum(x, 0.0)
    if isinstance(layer, Flatten):
        return x.reshape(x.shape[0], -1)
    if isinstance(layer, LocalResponseNorm):
        return _lrn(layer, x)
    if isinstance(layer, Dropout):
        return x
    if isinstance(layer, Softmax):
        shifted = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return shifted / np.sum(shifted, axis=-1, keepdims=True)
    if isinstance(layer, Tanh):
        return np.tanh(x)
    if isinstance(layer, Sigmoid):
        return sigmoid(x)
    if isinstance(layer, Linear):
        return x @ layer.weight.T + (0.0 if layer.bias is None else layer.bias)
    raise TypeError(f"not a CNN layer: {layer!r}")


def forward(network, x, states=None, *, lengths=None, trace=None):
    """float64 forward of a whole :class:`~.network.Network`.

    Parameters
    ----------
    network : Network
    x : array
        RNN: ``T x I`` or ``T x N x I`` (time first); CNN: ``N x C x H x W``.
    states : list, optional
        RNN only: per layer the initial state of :func:`rnn_layer_forward` (``None`` for
        zeros), without the ``N`` axis when ``x`` has none.
    lengths : array of N ints, optional
        RNN with ``T x N x I`` inputs only: each sequence's steps
        (:func:`rnn_layer_forward`).
    trace : dict, optional
        RNN only: per layer lists (``"x"``, ``"z"``, ``"c"``, ``"h"``), each a list over
        the layers of arrays over the steps.

    Returns
    -------
    RNN: ``(output, states)``, the last layer's output (``T x [N x] F``) and every layer's
    final state; CNN: the output array.
    """
    x = np.asarray(x, dtype=np.float64)
    if not network.is_rnn:
        if x.ndim != 4:
            raise ValueError(f"a CNN's input must be N x C x H x W, not {x.shape}")
        for layer in network.layers:
            x = layer_forward(layer, x)
        return x
    if x.ndim not in (2, 3) or x.shape[-1] != network.layers[0].input_size:
        raise ValueError(f"an RNN's input must be T x I or T x N x I with I = "
                         f"{network.layers[0].input_size}, not {x.shape}")
    single = x.ndim == 2
    if lengths is not None and single:
        raise ValueError("lengths are per sequence of a T x N x I batch")
    if single:
        x = x[:, None, :]
    finals = []
    for index, layer in enumerate(network.layers):
        assert isinstance(layer, RNN_LAYERS)
        state = None if states is None else states[index]
        if state is not None and single:
            state = tuple(s[:, None] for s in state) if isinstance(layer, LSTM) \
                else np.asarray(state)[:, None]
        layer_trace = None
        if trace is not None:
            layer_trace = {"z": [], "c": [], "h": []}
            trace.setdefault("x", []).append(x)
        x, final = rnn_layer_forward(layer, x, state, lengths=lengths, trace=layer_trace)
        if trace is not None:
            trace.setdefault("z", []).append(np.stack(layer_trace["z"]))
            trace.setdefault("c", []).append(np.stack(layer_trace["c"]) if layer_trace["c"]
                                             else np.zeros(0))
            trace.setdefault("h", []).append(x)
        if single:
            final = tuple(s[:, 0] for s in final) if isinstance(layer, LSTM) else final[:, 0]
        finals.append(final)
    return (x[:, 0] if single else x), finals

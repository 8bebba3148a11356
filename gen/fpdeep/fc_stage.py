"""The FC layers of ``nnrtl train fpdeep`` on the FC engine of the chain's last node
(:mod:`nnrtl.hw.fpdeep.fc`): the golden model (:mod:`nnrtl.sim.golden.fpdeep.fc`) gives the
words, and with ``--backend rtl`` every layer's mini-batch also runs through the engine's RTL
in the Amaranth simulator, checked bit-exact (``y``, ``δx``, the new ``W⁺`` rows) and its
cycles recorded beside :func:`.fc_cycles.fc_cycles`.

The engine runs a tail ``Flatten, Linear, (ReLU, Linear)*`` (a ReLU between two Linear
layers is the next engine's ``input_relu``); the host keeps only the loss. The flattened
input is the last conv layer's output in the chain's raster order (``H, W, C``): the first
layer's weight columns are stored in that order (PyTorch flattens ``C, H, W``), a layout of
the DDR region, undone for the gradients. Gradients are the engine's ``g`` sums (fixed16
``2·frac_bits`` fraction bits), as PG's for the convolutions; the engine's own SGD step with
the nodes' ``lr`` register (:func:`.chain_rtl.lr_word`) is checked, not used: the host's
master weights are loaded every step, as the conv layers'.
"""

import numpy as np

from nnrtl.hw.fpdeep.fc_config import FcConfig
from nnrtl.sim.golden.fpdeep.fc import fc_backward, fc_forward, fc_gradient, weight_rows

from ..errors import CheckFailed

__all__ = ["fc_tail", "FcStage", "FC_LANES"]

#: Weight words a beat of the training runs' FC engines (at most ``n_in + 1``).
FC_LANES = 4


def fc_tail(network, start):
    """``[(network index, input_relu)]`` of the Linear layers of the tail from ``start``, or
    None when the tail is not ``Flatten, Linear, (ReLU, Linear)*``."""
    from ..models import Flatten, Linear, ReLU
    layers = network.layers[start:]
    if len(layers) < 2 or not isinstance(layers[0], Flatten):
        return None
    found, relu = [], False
    for offset, layer in enumerate(layers[1:], start + 1):
        if isinstance(layer, Linear):
            found.append((offset, relu))
            relu = False
        elif isinstance(layer, ReLU) and found and not relu:
            relu = True
        else:
            return None
    return found if not relu else None


class FcStage:
    """The FC engine of the chain's last node over a mini-batch (module docstring).

    Parameters
    ----------
    tail : list
        :func:`fc_tail`.
    shape : tuple of int
        ``(H, W, C)`` of the last conv layer's output.
    codec : Codec
        The nodes' words (:class:`.chain.Codec`).
    lr : int
        The engine's ``lr`` register word (its SGD step is checked with ``rtl``; 0 leaves
        the rows unchanged).
    rtl : str, optional
        A pause pattern: each layer also runs through the RTL under it.
    """

    def __init__(self, tail, shape, codec, lr, rtl=None):
        self.tail, self.shape, self.codec, self.lr, self.rtl = tail, shape, codec, lr, rtl
        self.record = []

    def _configs(self, network, batch):
        height, width, channels = self.shape
        configs, n_in = [], height * width * channels
        for index, relu in self.tail:
            layer = network.layers[index]
            if layer.in_features != n_in:
                raise CheckFailed(f"layer {index}: {layer.in_features} inputs, the stage "
                                  f"gives {n_in}")
            configs.append(FcConfig(
                precision=self.codec.precision, n_in=n_in, n_out=layer.out_features,
                p=min(FC_LANES, n_in + 1), batch=batch, frac_bits=self.codec.frac_bits,
                input_relu=relu))
            n_in = layer.out_features
        return configs

    def _order(self):
        """Column ``c`` of the chain's raster order is PyTorch's column ``order[c]``."""
        height, width, channels = self.shape
        return np.arange(channels * height * width).reshape(channels, height, width) \
            .transpose(1, 2, 0).ravel()

    def forward(self, network, outputs):
        """The logits ``(B, classes)`` float64 from the last conv layer's outputs (``B``
        word arrays ``H × W × C``); keeps what the backward pass needs."""
        self.network = network
        self.configs = self._configs(network, len(outputs))
        xs = np.stack([np.asarray(out).reshape(-1) for out in outputs]).astype(np.int64)
        self.rows, self.inputs = [], []
        for n, ((index, _), cfg) in enumerate(zip(self.tail, self.configs)):
            layer = network.layers[index]
            weight = np.asarray(layer.weight, np.float64)
            if n == 0:
                weight = weight[:, self._order()]
            bias = layer.bias if layer.bias is not None else np.zeros(layer.out_features)
            rows = weight_rows(cfg, self.codec.encode(weight), self.codec.encode(bias))
            self.rows.append(rows)
            self.inputs.append(xs)
            xs = fc_forward(cfg, rows, xs)
        return self.codec.decode(xs)

    def backward(self, grad_outputs):
        """``(gradients {(network index, field): float64 array}, errors)``: the errors of
        the last conv layer's outputs, ``B`` word arrays ``H × W × C``."""
        dys = self.codec.encode(np.asarray(grad_outputs, np.float64)).astype(np.int64)
        self.saturated = self.codec.saturated(dys)
        gradients, self.record = {}, []
        for n in reversed(range(len(self.tail))):
            index, cfg = self.tail[n][0], self.configs[n]
            rows, xs = self.rows[n], self.inputs[n]
            dx, _ = fc_backward(cfg, rows, xs, dys, self.lr)
            g = fc_gradient(cfg, xs, dys)
            if self.rtl is not None:
                self._check(n, cfg, rows, xs, dys)
            g = (self.codec.decode(g) if cfg.precision == "fp32"
                 else np.asarray(g, np.float64) / 2.0 ** (2 * cfg.frac_bits))
            weight = g[:, :cfg.n_in]
            if n == 0:
                weight = weight[:, np.argsort(self._order())]
            gradients[(index, "weight")] = weight
            if self.network.layers[index].bias is not None:
                gradients[(index, "bias")] = g[:, cfg.n_in]
            dys = dx
        self.record.reverse()
        return gradients, [x.reshape(self.shape).astype(self.codec.dtype) for x in dys]

    def _check(self, n, cfg, rows, xs, dys):
        from nnrtl.gen.fpdeep.fc_cycles import fc_cycles
        from nnrtl.sim.tb.fpdeep.fc import amaranth_run

        case = {"weights": rows[:, :cfg.n_in], "bias": rows[:, cfg.n_in], "xs": [xs],
                "dys": [dys], "lr": self.lr}
        got, want, cycles = amaranth_run(cfg, case, pattern=self.rtl, timeout=100000)
        wrong = [name for name in want if got[name] != want[name]]
        if wrong:
            raise CheckFailed(f"FC layer {self.tail[n][0]}: the engine's {', '.join(wrong)} "
                              f"differ from the golden model")
        self.record.append({"layer": self.tail[n][0], "n_in": cfg.n_in, "n_out": cfg.n_out,
                            "p": cfg.p, "batch": cfg.batch, "input_relu": cfg.input_relu,
                            "cycles": cycles, "model_cycles": fc_cycles(cfg),
                            "pattern": self.rtl, "bit_exact": True})

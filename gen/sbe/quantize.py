"""Post-training fixed-point quantization of an LSTM for the SBE.

The SBE multiplies ``operand_width``-bit weights by ``operand_width``-bit vector elements
(x and the fed-back h share one format, since their products meet in one accumulator) and
accumulates at ``acc_width`` bits with ``weight_frac + act_frac`` fraction bits; the
element-wise arithmetic (gate activations, cell state) is ``acc_width`` bits with
``cell_frac`` fraction bits. This module chooses those fraction bits from the data:

* weights: the most fraction bits with which the largest ``|w|`` still fits, per model
  (one format, what :class:`~nnrtl.hw.sbe.SBEConfig` holds), per layer or per tensor;
* vector elements: likewise from the largest ``|x|`` of the calibration inputs and ``|h|``
  of every layer, found by running the float model (:func:`~.importers.lstm_forward`);
* cell format: from the largest ``|c|`` and 1.0 (the gates' range), at most
  ``acc_width - 2`` bits;
* if a gate pre-activation seen in calibration would overflow the accumulator, the larger
  of the weight and vector fraction bits is reduced until it fits.

Conversion: ``code = round(value * 2**frac)`` with round half to even (``numpy.rint``; the
``HALF_EVEN`` rounding of :mod:`nnrtl.sim.golden.fixed`) or, on request, half away from
zero; then saturation to ``[-2**(width-1), 2**(width-1) - 1]``. Biases are converted to the
accumulator format (``weight_frac + act_frac`` fraction bits, ``acc_width`` bits), so they
can be the accumulators' initial values.
"""

import dataclasses
import math

import numpy as np

from .importers import LSTMLayer, LSTMModel, lstm_forward

__all__ = ["fraction_bits", "to_fixed", "QuantizedLayer", "QuantizedLSTM", "calibrate",
           "quantize_model", "ROUNDINGS"]

#: Rounding modes of :func:`to_fixed`.
ROUNDINGS = ("half_even", "half_away")


def fraction_bits(max_abs, width):
    """Most fraction bits, from 0 to ``width - 1``, with which a signed ``width``-bit code
    holds ``max_abs``: ``max_abs * 2**f <= 2**(width - 1) - 1`` (``width - 1`` for 0)."""
    if not isinstance(width, int) or isinstance(width, bool) or width < 2:
        raise TypeError(f"width must be an integer of at least 2, not {width!r}")
    if not math.isfinite(max_abs) or max_abs < 0:
        raise ValueError(f"max_abs must be a finite non-negative number, not {max_abs!r}")
    top = (1 << (width - 1)) - 1
    if max_abs == 0:
        return width - 1
    bits = math.floor(math.log2(top / max_abs))
    while bits > 0 and max_abs * 2.0 ** bits > top:      # guard log2 rounding
        bits -= 1
    while bits < width - 1 and max_abs * 2.0 ** (bits + 1) <= top:
        bits += 1
    return max(0, min(bits, width - 1))


def to_fixed(values, frac, width, *, rounding="half_even"):
    """``(codes, saturated)``: ``values`` as int64 codes with ``frac`` fraction bits,
    rounded (``"half_even"`` or ``"half_away"``) and saturated to ``width`` signed bits;
    ``saturated`` counts the codes clamped."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {', '.join(ROUNDINGS)}, not {rounding!r}")
    scaled = np.asarray(values, dtype=np.float64) * 2.0 ** frac
    if rounding == "half_even":
        rounded = np.rint(scaled)
    else:
        rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    saturated = int(np.count_nonzero((rounded < low) | (rounded > high)))
    return np.clip(rounded, low, high).astype(np.int64), saturated


def calibrate(model, inputs):
    """Largest magnitudes seen running ``model`` on ``inputs`` (``T x I`` or ``T x N x I``,
    or a list of such sequences): ``{"x", "h", "z", "c"}`` over all layers, ``"x"`` the
    first layer's input only."""
    sequences = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    ranges = {"x": 0.0, "h": 0.0, "z": 0.0, "c": 0.0}
    for sequence in sequences:
        trace = {}
        lstm_forward(model.layers, sequence, trace=trace)
        ranges["x"] = max(ranges["x"], float(np.max(np.abs(trace["x"][0]), initial=0)))
        for key in ("h", "z", "c"):
            ranges[key] = max(ranges[key], max(float(np.max(np.abs(a), initial=0))
                                               for a in trace[key]))
    return ranges


@dataclasses.dataclass(frozen=True, eq=False)
class QuantizedLayer:
    """One layer in fixed point (gate blocks in :data:`~nnrtl.hw.sbe.GATES` order).

    Attributes
    ----------
    w_x, w_h : ndarray of int64
        Weight codes with ``w_x_frac`` and ``w_h_frac`` fraction bits.
    bias : ndarray of int64
        Bias codes at the accumulator format, ``w_x_frac + act_frac`` fraction bits.
    w_x_frac, w_h_frac : int
    """

    w_x: np.ndarray
    w_h: np.ndarray
    bias: np.ndarray
    w_x_frac: int
    w_h_frac: int


@dataclasses.dataclass(frozen=True, eq=False)
class QuantizedLSTM:
    """What :func:`quantize_model` returns.

    Attributes
    ----------
    layers : tuple of QuantizedLayer
    act_frac : int
        Fraction bits of x and h.
    cell_frac : int
        Fraction bits of the element-wise format.
    width, acc_width : int
    rounding : str
    ranges : dict
        Largest magnitudes seen: weights (``"w"``) and :func:`calibrate`'s.
    saturated : int
        Weight and bias codes clamped.
    """

    layers: tuple
    act_frac: int
    cell_frac: int
    width: int
    acc_width: int
    rounding: str
    ranges: dict
    saturated: int

    @property
    def weight_frac(self):
        """The one weight format of every tensor; ``ValueError`` if they differ."""
        fracs = {f for layer in self.layers for f in (layer.w_x_frac, layer.w_h_frac)}
        if len(fracs) != 1:
            raise ValueError(f"the weights have several formats ({sorted(fracs)}); an "
                             f"SBEConfig holds one: quantize with granularity='model'")
        return fracs.pop()

    def apply(self, config):
        """``config`` with these widths and fraction bits (``dataclasses.replace``)."""
        return dataclasses.replace(config, operand_width=self.width, acc_width=self.acc_width,
                                   weight_frac=self.weight_frac, act_frac=self.act_frac,
                                   cell_frac=self.cell_frac)

    def dequantized(self):
        """The :class:`LSTMModel` with the weights and biases these codes stand for."""
        return LSTMModel(tuple(
            LSTMLayer(w_x=layer.w_x * 2.0 ** -layer.w_x_frac,
                      w_h=layer.w_h * 2.0 ** -layer.w_h_frac,
                      bias=layer.bias * 2.0 ** -(layer.w_x_frac + self.act_frac))
            for layer in self.layers), source="dequantized")

    def interleaved(self, index):
        """Layer ``index``'s codes as the SBE's interleaved matrix and bias (row ``4 * j +
        g`` = unit ``j`` of gate ``g``); needs one format for ``w_x`` and ``w_h``."""
        layer = self.layers[index]
        if layer.w_x_frac != layer.w_h_frac:
            raise ValueError(f"layer {index}: w_x and w_h have different formats "
                             f"({layer.w_x_frac} and {layer.w_h_frac} fraction bits)")
        hidden = layer.w_h.shape[1]
        matrix = np.concatenate([layer.w_x, layer.w_h], axis=1)
        matrix = matrix.reshape(4, hidden, -1).transpose(1, 0, 2).reshape(4 * hidden, -1)
        return matrix, layer.bias.reshape(4, hidden).T.reshape(-1)


def quantize_model(model, calibration, *, width=16, acc_width=32, granularity="model",
                   rounding="half_even", margin_bits=0):
    """Quantize ``model`` for the SBE.

    Parameters
    ----------
    model : LSTMModel
    calibration : array or list of arrays
        Input sequences (``T x I`` or ``T x N x I``) the activation ranges come from.
    width, acc_width : int
        Operand and accumulator bits (the SBE's 16 and 32).
    granularity : {"model", "layer", "tensor"}
        One weight format for the whole model (what an SBEConfig holds), one per layer, or
        one per tensor (``w_x`` and ``w_h`` apart).
    rounding : {"half_even", "half_away"}
    margin_bits : int
        Fraction bits given up everywhere as headroom for data beyond the calibration's.

    Returns
    -------
    QuantizedLSTM
    """
    if granularity not in ("model", "layer", "tensor"):
        raise ValueError(f"granularity must be 'model', 'layer' or 'tensor', not "
                         f"{granularity!r}")
    ranges = calibrate(model, calibration)
    peaks = [(float(np.max(np.abs(layer.w_x))), float(np.max(np.abs(layer.w_h))))
             for layer in model.layers]
    ranges["w"] = max(max(peak) for peak in peaks)
    if granularity == "model":
        peaks = [(ranges["w"], ranges["w"])] * len(peaks)
    elif granularity == "layer":
        peaks = [(max(peak), max(peak)) for peak in peaks]
    fracs = [[max(0, fraction_bits(p, width) - margin_bits) for p in peak] for peak in peaks]
    act_frac = max(0, fraction_bits(max(ranges["x"], ranges["h"]), width) - margin_bits)
    cell_frac = min(acc_width - 2,
                    max(0, fraction_bits(max(ranges["c"], 1.0), acc_width) - margin_bits))
    limit = 2.0 ** (acc_width - 1)
    # Keep the pre-activations inside the accumulator: lower the largest formats.
    while True:
        top = max(max(pair) for pair in fracs)
        if ranges["z"] * 2.0 ** (top + act_frac) < limit or top + act_frac == 0:
            break
        if top >= act_frac:
            fracs = [[f - 1 if f == top else f for f in pair] for pair in fracs]
        else:
            act_frac -= 1
    layers, saturated = [], 0
    for layer, (x_frac, h_frac) in zip(model.layers, fracs):
        w_x, n_x = to_fixed(layer.w_x, x_frac, width, rounding=rounding)
        w_h, n_h = to_fixed(layer.w_h, h_frac, width, rounding=rounding)
        bias, n_b = to_fixed(layer.bias, x_frac + act_frac, acc_width, rounding=rounding)
        saturated += n_x + n_h + n_b
        layers.append(QuantizedLayer(w_x=w_x, w_h=w_h, bias=bias, w_x_frac=x_frac,
                                     w_h_frac=h_frac))
    return QuantizedLSTM(tuple(layers), act_frac=act_frac, cell_frac=cell_frac, width=width,
                         acc_width=acc_width, rounding=rounding, ranges=ranges,
                         saturated=saturated)

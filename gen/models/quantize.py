"""Post-training 16-bit fixed-point quantization of a network's RNN layers, shared by the
engines (the SBE's interleaved matrices are built from it in :mod:`nnrtl.gen.sbe`).

Formats chosen from the data: weights (``weight_ih``, ``weight_hh``, ``weight_hr``) get the
most fraction bits with which their largest ``|w|`` still fits ``width`` bits, per model,
per layer or per tensor (``weight_ih`` apart from ``weight_hh``/``weight_hr``); the vector
elements (x and the fed-back h share one format) from the largest ``|x|`` and ``|h|`` of a
float run on calibration inputs; the cell format from the largest ``|c|`` and 1.0, at most
``acc_width - 2`` bits. If a pre-activation seen in calibration would overflow the
``acc_width``-bit accumulator (``weight_frac + act_frac`` fraction bits), the larger of
the weight and vector fraction bits is reduced until it fits. Biases are converted to the
accumulator format. An LSTM's two biases are summed first (only their sum enters its
equations: ``bias_ih`` holds it, ``bias_hh`` is zero); a GRU's stay apart (``b_hn`` is
inside ``r * (...)``).

Conversion: ``code = round(value * 2**frac)``, round half to even (``numpy.rint``) or half
away from zero, then saturation to ``[-2**(width-1), 2**(width-1) - 1]``.
"""

import dataclasses
import math

import numpy as np

from .layers import LSTM
from .network import Network
from .reference import forward

__all__ = ["ROUNDINGS", "fraction_bits", "to_fixed", "calibrate", "QuantizedLayer",
           "QuantizedNetwork", "quantize"]

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


def calibrate(network, inputs):
    """Largest magnitudes seen running the RNN ``network`` on ``inputs`` (``T x I`` or ``T x
    N x I``, or a list of such sequences): ``{"x", "h", "z", "c"}`` over all layers,
    ``"x"`` the first layer's input only, ``"z"`` the pre-activations (a GRU's input and
    recurrent parts apart)."""
    sequences = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    ranges = {"x": 0.0, "h": 0.0, "z": 0.0, "c": 0.0}
    for sequence in sequences:
        trace = {}
        forward(network, sequence, trace=trace)
        ranges["x"] = max(ranges["x"], float(np.max(np.abs(trace["x"][0]), initial=0)))
        for key in ("h", "z", "c"):
            ranges[key] = max(ranges[key], max(float(np.max(np.abs(a), initial=0))
                                               for a in trace[key]))
    return ranges


@dataclasses.dataclass(frozen=True, eq=False)
class QuantizedLayer:
    """One RNN layer in fixed point, canonical layout (gate blocks as the layer's).

    Attributes
    ----------
    layer : LSTM or GRU
        The float layer quantized (its kind, direction and shapes).
    codes : dict
        Field name (``weight_ih``, ``bias_ih``, ``weight_hh_reverse``, ...) to int64 codes.
    fracs : dict
        Field name to fraction bits (biases: the accumulator's).
    """

    layer: object
    codes: dict
    fracs: dict

    def dequantized(self):
        """The float layer these codes stand for."""
        return dataclasses.replace(self.layer, **{
            field: codes * 2.0 ** -self.fracs[field] for field, codes in self.codes.items()})


@dataclasses.dataclass(frozen=True, eq=False)
class QuantizedNetwork:
    """What :func:`quantize` returns.

    Attributes
    ----------
    layers : tuple of QuantizedLayer
    act_frac, cell_frac : int
        Fraction bits of x and h, and of the element-wise (cell) format.
    width, acc_width : int
    rounding : str
    ranges : dict
        Largest magnitudes: weights (``"w"``) and :func:`calibrate`'s.
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

    def dequantized(self):
        """The float :class:`~.network.Network` these codes stand for."""
        return Network(tuple(layer.dequantized() for layer in self.layers),
                       source="dequantized")


def _merged(layer):
    """``layer`` with an LSTM's biases summed into ``bias_ih``."""
    if not isinstance(layer, LSTM) or not layer.has_bias:
        return layer
    fields = {}
    for suffix in ("", "_reverse") if layer.direction == "bidirectional" else ("",):
        fields["bias_ih" + suffix] = getattr(layer, "bias_ih" + suffix) + \
            getattr(layer, "bias_hh" + suffix)
        fields["bias_hh" + suffix] = np.zeros_like(fields["bias_ih" + suffix])
    return dataclasses.replace(layer, **fields)


def quantize(network, calibration, *, width=16, acc_width=32, granularity="model",
             rounding="half_even", margin_bits=0):
    """Quantize the RNN layers of ``network``.

    Parameters
    ----------
    network : Network
        A stack of LSTM/GRU layers.
    calibration : array or list of arrays
        Input sequences (``T x I`` or ``T x N x I``) the activation ranges come from.
    width, acc_width : int
        Operand and accumulator bits.
    granularity : {"model", "layer", "tensor"}
        One weight format for the whole network, one per layer, or ``weight_ih`` apart
        from ``weight_hh`` (and ``weight_hr``) per layer.
    rounding : {"half_even", "half_away"}
    margin_bits : int
        Fraction bits given up everywhere as headroom beyond the calibration's data.

    Returns
    -------
    QuantizedNetwork
    """
    if granularity not in ("model", "layer", "tensor"):
        raise ValueError(f"granularity must be 'model', 'layer' or 'tensor', not "
                         f"{granularity!r}")
    if not network.is_rnn:
        raise ValueError("quantize needs a network of LSTM/GRU layers")
    ranges = calibrate(network, calibration)
    layers = [_merged(layer) for layer in network.layers]

    def peak(layer, prefix):
        return max(float(np.max(np.abs(getattr(layer, field)))) for field in
                   layer.tensor_fields() if field.startswith(prefix))
    peaks = [(peak(layer, "weight_ih"), max(peak(layer, "weight_h"), 0.0))
             for layer in layers]
    ranges["w"] = max(max(p) for p in peaks)
    if granularity == "model":
        peaks = [(ranges["w"], ranges["w"])] * len(peaks)
    elif granularity == "layer":
        peaks = [(max(p), max(p)) for p in peaks]
    fracs = [[max(0, fraction_bits(p, width) - margin_bits) for p in pair] for pair in peaks]
    act_frac = max(0, fraction_bits(max(ranges["x"], ranges["h"]), width) - margin_bits)
    cell_frac = min(acc_width - 2,
                    max(0, fraction_bits(max(ranges["c"], 1.0), acc_width) - margin_bits))
    limit = 2.0 ** (acc_width - 1)
    while True:         # keep the pre-activations inside the accumulator
        top = max(max(pair) for pair in fracs)
        if ranges["z"] * 2.0 ** (top + act_frac) < limit or top + act_frac == 0:
            break
        if top >= act_frac:
            fracs = [[f - 1 if f == top else f for f in pair] for pair in fracs]
        else:
            act_frac -= 1
    quantized, saturated = [], 0
    for layer, (x_frac, h_frac) in zip(layers, fracs):
        codes, formats = {}, {}
        for field in layer.tensor_fields():
            if field.startswith("bias"):
                frac, bits = x_frac + act_frac, acc_width
            else:
                frac, bits = (x_frac if field.startswith("weight_ih") else h_frac), width
            codes[field], count = to_fixed(getattr(layer, field), frac, bits,
                                           rounding=rounding)
            formats[field] = frac
            saturated += count
        quantized.append(QuantizedLayer(layer, codes, formats))
    return QuantizedNetwork(tuple(quantized), act_frac=act_frac, cell_frac=cell_frac,
                            width=width, acc_width=acc_width, rounding=rounding,
                            ranges=ranges, saturated=saturated)

"""The convolution layers of a mapped CNN run through the chain of FPDeep nodes, one layer
segment at a time on the node that holds it, exactly as the nodes' FP, EB, PG modules and
SFU compute them: the training step of :mod:`.trainer` without the host part.

A :class:`NodeRunner` runs one module call of one node (:class:`GoldenRunner`: the
bit-exact golden models of :mod:`nnrtl.sim.golden.fpdeep`; an RTL runner driving each
node's Verilator model implements the same four methods). :class:`ConvChain` moves the
data between the nodes as the chain's datapaths do (spec §3.1):

* **FP** (DP1/DP2), per layer and image: an ICP layer's segments in node order, each on
  its input-channel range, node ``m`` adding its sums to the partials of node ``m − 1``
  (``R_m = R_{m−1} + local``); the node completing the layer adds the bias and runs the
  SFU (ReLU, max-pool, masks). An OCP layer's segments each compute their output-channel
  range from every input channel and complete it. Partials travel as channels: each
  node lays them out in its own ``⌈n_out/P⌉ × P`` lanes.
* **SFU backward** on the completing node(s): unpool to the argmax, ReLU' from the mask.
* **PG** per segment over the mini-batch (images in order): the gradient of the segment's
  weights (and the bias on a completing node).
* **EB** (DP3/DP4) on every layer but the first: an ICP segment computes the complete
  errors of its input channels (the errors of all output channels meet on it); an OCP
  segment computes partial errors of every input channel from its output channels, which
  the backward chain reduces from the most downstream segment up, ``E = E_{m+1} +
  local``: fixed16 as exact 48-bit sums rounded (half up, saturated) by the most upstream
  segment, as the FP partials are; fp32 one rounded add per segment. The golden model
  computes this reduction (:func:`nnrtl.sim.golden.fpdeep.eb.eb_module` with
  ``partial_in`` / ``rounded``); the RTL EB module (:mod:`nnrtl.hw.fpdeep.eb`) runs it with
  ``i_partial`` / ``o_partial`` and runs ``q < n_in`` and stride > 1 (a dilated δ map);
  it refuses (fixed16) more than 2^16 products per sum: :func:`rtl_limits` lists the
  segments it cannot run yet.

Values are the nodes' words (:class:`Codec`): fp32 bit patterns (``uint32``), fixed16
16-bit two's-complement codes with ``frac_bits`` fraction bits (``int64``); maps are
``H × W × C`` (rows first, as the line buffers stream them).
"""

import dataclasses
from typing import Protocol

import numpy as np

from nnrtl.hw.fpdeep.config import FpConfig
from nnrtl.sim.golden import fpdeep as golden

from ..errors import UsageError

__all__ = ["Codec", "NodeRunner", "GoldenRunner", "Segment", "ConvChain", "conv_segments",
           "rtl_limits", "check_layer"]


@dataclasses.dataclass(frozen=True)
class Codec:
    """The nodes' word format: host floats to words and back.

    fp32: float32 rounding (nearest, even), bit patterns. fixed16: ``x · 2^frac_bits``
    rounded half up and saturated to 16 bits (the FP module's completing rule)."""

    precision: str
    frac_bits: int

    def encode(self, values):
        values = np.asarray(values, np.float64)
        if self.precision == "fp32":
            return np.ascontiguousarray(values.astype(np.float32)).view(np.uint32)
        codes = np.floor(values * (1 << self.frac_bits) + 0.5)
        return np.clip(codes, -(1 << 15), (1 << 15) - 1).astype(np.int64)

    def decode(self, words):
        if self.precision == "fp32":
            return np.ascontiguousarray(np.asarray(words, np.uint32)).view(
                np.float32).astype(np.float64)
        return np.asarray(words, np.int64) / (1 << self.frac_bits)

    @property
    def dtype(self):
        return np.uint32 if self.precision == "fp32" else np.int64

    def saturated(self, words):
        """How many of ``words`` sit at a fixed16 limit (-2^15 or 2^15 - 1): values the
        format clipped, or may have; 0 in fp32."""
        if self.precision == "fp32":
            return 0
        words = np.asarray(words)
        return int(np.count_nonzero((words == -(1 << 15)) | (words == (1 << 15) - 1)))


class NodeRunner(Protocol):
    """One node's module calls (node numbers from 1, upstream first)."""

    def fp(self, node, cfg, act, weights, bias, partial_in):
        """FP of one image: a :class:`~nnrtl.sim.golden.fpdeep.FpResult`."""
        ...

    def sfu_backward(self, node, cfg, error, relu, argmax):
        """δ ``(w_out, w_out, groups, P)`` from the SFU output's error and masks."""
        ...

    def eb(self, node, cfg, delta, weights, partial_in, completes):
        """EB of one image: errors ``(w_in, w_in, n_in)``; ``partial_in`` the partial errors
        from downstream (or None); ``completes``: round to words (else wide partials)."""
        ...

    def pg(self, node, cfg, acts, deltas):
        """PG of a mini-batch: ``(dW (n_out, n_in, K, K), db (n_out,))``."""
        ...


class GoldenRunner:
    """:class:`NodeRunner` on the bit-exact golden models (every node alike)."""

    def fp(self, node, cfg, act, weights, bias, partial_in):
        return golden.fp_module(cfg, act, weights, bias, partial_in)

    def sfu_backward(self, node, cfg, error, relu, argmax):
        return golden.sfu_backward(cfg, error, relu, argmax)

    def eb(self, node, cfg, delta, weights, partial_in, completes):
        return golden.eb_module(cfg, delta, weights, partial_in, rounded=completes)

    def pg(self, node, cfg, acts, deltas):
        return golden.pg_batch(cfg, acts, deltas)


@dataclasses.dataclass(frozen=True)
class Segment:
    """A conv layer segment on a node: its :class:`FpConfig`, the node, the mapper's
    :class:`~.config.SegmentConfig` (mode, channel range ``[lo, hi)``, residency)."""

    node: int
    cfg: FpConfig
    seg: object

    @property
    def icp(self):
        return self.seg.mode == "ICP"

    @property
    def in_range(self):
        """The input channels the segment reads."""
        return slice(self.seg.lo, self.seg.hi) if self.icp else slice(None)

    @property
    def out_range(self):
        """The output channels the segment computes."""
        return slice(None) if self.icp else slice(self.seg.lo, self.seg.hi)


def conv_segments(mapping, precision, frac_bits):
    """``{chain layer index: [Segment, ...] in node order}`` of the conv layers (each
    checked by :func:`check_layer` first); :class:`UsageError` with the FP module's rule
    for a segment its configuration refuses."""
    layers = {}
    for node in mapping.nodes:
        for seg in node.segments:
            if seg.kind == "conv":
                check_layer(mapping.chain, seg.index)
                try:
                    cfg = FpConfig.from_segment(seg, precision, frac_bits=frac_bits)
                except (TypeError, ValueError) as error:
                    raise UsageError(str(error)) from None
                layers.setdefault(seg.index, []).append(Segment(node.node, cfg, seg))
    return layers


def rtl_limits(layers):
    """The segments the node RTL cannot run yet (the golden model runs them): ``[(layer,
    node, rule), ...]``."""
    found = []
    for index, segments in sorted(layers.items()):
        for n, s in enumerate(segments):
            if index == 0 or s.cfg.precision != "fixed16":
                continue                         # no EB on the first layer
            if s.cfg.n_out * s.cfg.taps > 1 << 16:
                found.append((s.seg.layer, s.node, f"EB sums n_out·k² = "
                              f"{s.cfg.n_out * s.cfg.taps} products, more than 2^16"))
            elif not s.icp:                      # its partial holds the downstream ones
                chained = sum(t.cfg.n_out * t.cfg.taps for t in segments[n:])
                if chained > 1 << 16:
                    found.append((s.seg.layer, s.node, f"EB's OCP partial errors sum "
                                  f"{chained} products up to this node, more than 2^16"))
    return found


def _lanes(cfg, channels):
    """``(..., n_out)`` → ``(..., groups, P)``, zero lanes appended."""
    full = np.zeros(channels.shape[:-1] + (cfg.groups * cfg.p,), channels.dtype)
    full[..., :cfg.n_out] = channels
    return full.reshape(channels.shape[:-1] + (cfg.groups, cfg.p))


def _channels(cfg, beats, side):
    """Beats ``(side², groups, P)`` → ``(side, side, n_out)``."""
    return np.asarray(beats).reshape(side, side, -1)[..., :cfg.n_out]


@dataclasses.dataclass
class _Saved:
    """What a layer's FP leaves for its backward pass, per image."""

    acts: list          # per segment: per image the segment's input words
    relu: list          # per segment: per image SFU mask (completing segments; else None)
    argmax: list


class ConvChain:
    """The conv layers of a mapping on the chain's nodes.

    Parameters
    ----------
    layers : dict
        :func:`conv_segments`.
    chain : Chain
        The mapper's layer chain (:mod:`.network`).
    codec : Codec
    runner : NodeRunner
    """

    def __init__(self, layers, chain, codec, runner):
        self.layers = layers
        self.chain = chain
        self.codec = codec
        self.runner = runner
        self._saved = {}
        self.saturated = 0

    def forward(self, image, weights):
        """One image ``(H, W, C)`` words through the conv layers in chain order;
        ``weights(index, segment)`` gives ``(W (OC, IC, K, K), bias (OC,))`` words the
        segment's FP uses. Returns the last conv layer's SFU output ``(side, side, OC)``
        words; the masks and inputs are kept for :meth:`backward`."""
        act = image
        for index, segments in sorted(self.layers.items()):
            layer = self.chain.layers[index]
            saved = self._saved.setdefault(index, _Saved([[] for _ in segments],
                                                         [[] for _ in segments],
                                                         [[] for _ in segments]))
            outputs = np.zeros((layer.w_pooled, layer.w_pooled, layer.oc), self.codec.dtype)
            partial = None
            for n, s in enumerate(segments):
                w, b = weights(index, s)
                seg_act = np.ascontiguousarray(act[..., s.in_range])
                saved.acts[n].append(seg_act)
                partial_in = None
                if s.cfg.partial_in:
                    partial_in = _lanes(s.cfg, partial)
                result = self.runner.fp(s.node, s.cfg, seg_act, w[s.out_range][:, s.in_range],
                                        b[s.out_range] if s.cfg.completes else None,
                                        partial_in)
                partial = _channels(s.cfg, result.partials, s.cfg.w_out)
                relu = argmax = None
                if s.cfg.completes:
                    side = s.cfg.pool_out
                    outputs[..., s.out_range] = _channels(s.cfg, result.data, side)
                    self.saturated += self.codec.saturated(result.z)
                    relu = result.relu.reshape(side, side, s.cfg.groups, s.cfg.p)
                    argmax = result.argmax.reshape(side, side, s.cfg.groups, s.cfg.p)
                saved.relu[n].append(relu)
                saved.argmax[n].append(argmax)
            act = outputs
        return act

    def clear(self):
        """Forget the saved images and the saturation count (a new mini-batch)."""
        self._saved = {}
        self.saturated = 0

    def backward(self, errors, weights):
        """Given the error of the last conv layer's SFU output per image (``(side, side,
        OC)`` words, in the order :meth:`forward` saw the images), the gradients
        ``{chain layer index: (dW (OC, IC, K, K), db (OC,))}`` as words (fixed16: exact
        sums, ``2·frac_bits`` and ``frac_bits`` fraction bits; fp32 bit patterns);
        ``weights(index, segment)`` as in :meth:`forward`, the weights EB uses."""
        grads = {}
        for index in sorted(self.layers, reverse=True):
            segments, saved = self.layers[index], self._saved[index]
            layer = self.chain.layers[index]
            w_full, _ = weights(index, segments[0])
            deltas = []                                  # per image (w_out, w_out, OC)
            for image, error in enumerate(errors):
                delta = np.zeros((layer.w_out, layer.w_out, layer.oc), self.codec.dtype)
                for n, s in enumerate(segments):
                    if s.cfg.completes:
                        lanes = self.runner.sfu_backward(
                            s.node, s.cfg, _lanes(s.cfg, error[..., s.out_range]),
                            saved.relu[n][image], saved.argmax[n][image])
                        delta[..., s.out_range] = lanes.reshape(
                            layer.w_out, layer.w_out, -1)[..., :s.cfg.n_out]
                deltas.append(delta)
            dw = np.zeros((layer.oc, layer.ic, layer.k, layer.k), self._wide)
            db = np.zeros(layer.oc, self._wide)
            for n, s in enumerate(segments):
                seg_dw, seg_db = self.runner.pg(s.node, s.cfg, saved.acts[n],
                                                [d[..., s.out_range] for d in deltas])
                dw[s.out_range, s.in_range] = seg_dw
                if s.cfg.completes:
                    db[s.out_range] = seg_db
            grads[index] = (dw, db)
            if index == min(self.layers):
                break
            errors = [self._eb(segments, delta, w_full) for delta in deltas]
        return grads

    @property
    def _wide(self):
        return np.uint32 if self.codec.precision == "fp32" else np.int64

    def _eb(self, segments, delta, w):
        """One image's errors of the layer's input ``(w_in, w_in, IC)`` words."""
        cfg0 = segments[0].cfg
        layer_ic = w.shape[1]
        out = np.zeros((cfg0.w_in, cfg0.w_in, layer_ic), self.codec.dtype)
        partial = None
        for n in reversed(range(len(segments))):          # the backward chain: downstream first
            s = segments[n]
            completes = s.icp or n == 0
            found = self.runner.eb(s.node, s.cfg, delta[..., s.out_range],
                                   w[s.out_range][:, s.in_range],
                                   None if s.icp else partial, completes)
            if s.icp:
                out[..., s.in_range] = found
            else:
                partial = found
        if not segments[0].icp:
            out[...] = partial
        self.saturated += self.codec.saturated(out)
        return out


def check_layer(chain, index):
    """UsageError naming a conv layer the chain cannot train."""
    layer = chain.layers[index]
    if layer.pool is not None and layer.pool[2]:
        raise UsageError(f"{layer.name}: max-pool {layer.pool[0]}x{layer.pool[0]} stride "
                         f"{layer.pool[1]} padding {layer.pool[2]}: the SFU's backward step "
                         f"unpools pools without padding only (padding 0; overlapping "
                         f"pools, kernel > stride, are summed)")


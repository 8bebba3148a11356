"""Bit-exact numpy model of one node's FP module (:mod:`nnrtl.hw.fpdeep.fp`): the
convolution engines' sums in their fixed order, the chained partial add, the bias, and the SFU
(ReLU, max-pool with its ReLU mask and argmax), for fp32 and fixed16 (:class:`FpConfig`).

Arithmetic (the RTL computes exactly this)
------------------------------------------
For output pixel ``(y, x)``, group ``g`` and lane ``j`` (output channel ``o = g·P + j``; lanes
past ``n_out`` have zero weights and bias):

1. window ``a[i][t]``, ``t = ky·K + kx`` (raster order in the window), zero (``+0``) outside
   the map (padding);
2. products ``w[o][i][t] · a[i][t]`` (fp32: rounded once);
3. **tile tree**: per input channel ``i``, the K² products reduced by :func:`tree_sum` (pairs
   ``(0,1), (2,3), …`` level by level, an odd last item passed to the next level unchanged);
4. **CE tree**: per pass ``r`` (``passes = ⌈S_IC/Q⌉``), the ``Q`` tile sums of input channels
   ``r·Q … r·Q + Q − 1`` reduced by :func:`tree_sum` likewise; channels past ``S_IC`` (the
   ragged last pass) are tiles of zero activations and weights (``+0`` products, summed
   like the others: in fp32 a ``−0`` sum meeting them becomes ``+0``);
4b. **pass accumulator**: ``acc = ce_0``, then ``acc = acc + ce_r`` for ``r = 1 … passes − 1``
   in order (one rounding per pass in fp32);
5. **chained partial**: ``R_m = R_{m-1} + local`` when partials arrive from upstream
   (``partial_in``), else ``R_m = local``;
6. on the completing node: ``z = R_m + bias[o]``; fixed16: ``z`` rounded half up to
   ``frac_bits`` fraction bits and saturated to 16 bits;
7. SFU: ReLU ``y = z`` if ``z`` is positive (fp32: sign bit clear; a NaN with the sign clear
   passes) else ``+0``; the mask bit ``relu = y ≠ +0`` (1 everywhere without a ReLU); max-pool
   over windows of the ReLU output by the value's order (fp32: the total order key of the
   bit pattern), the **first** maximum in window raster order wins (``argmax``; torch's rule),
   and the mask bit reported is that of the argmax position.

Values are bit patterns: fp32 ``uint32``; fixed16 activations, weights and bias ``int64``
codes of 16-bit words, partials ``int64`` codes of 48-bit words.
"""

import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.sim.golden.float import float_add, float_mul

__all__ = ["tree_sum", "windows", "conv_partials", "complete", "sfu", "FpResult", "fp_module",
           "order_key", "pad_weights", "pass_weights", "pad_bias"]


def tree_sum(items, add):
    """Reduce ``items`` (a list of arrays) pairwise, level by level: ``(0,1), (2,3), …``;
    an odd last item goes to the next level unchanged (the RTL's summation order)."""
    items = list(items)
    while len(items) > 1:
        level = [add(items[n], items[n + 1]) for n in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            level.append(items[-1])
        items = level
    return items[0]


def _ops(cfg):
    if cfg.precision == "fp32":
        return (lambda a, b: float_add(FP32, a, b)), (lambda a, b: float_mul(FP32, a, b))
    return (lambda a, b: a + b), (lambda a, b: a * b)


def windows(cfg, act):
    """The line buffer's windows: ``act`` (``w_in × w_in × n_in``, rows first) → ``(w_out,
    w_out, n_in, K²)`` with zeros injected for the padding and the stride applied."""
    act = np.asarray(act)
    if act.shape != (cfg.w_in, cfg.w_in, cfg.n_in):
        raise ValueError(f"act must be ({cfg.w_in}, {cfg.w_in}, {cfg.n_in}), not {act.shape}")
    padded = np.zeros((cfg.w_in + 2 * cfg.pad,) * 2 + (cfg.n_in,), act.dtype)
    padded[cfg.pad:cfg.pad + cfg.w_in, cfg.pad:cfg.pad + cfg.w_in] = act
    out = np.empty((cfg.w_out, cfg.w_out, cfg.n_in, cfg.taps), act.dtype)
    for ky in range(cfg.k):
        for kx in range(cfg.k):
            rows = padded[ky:ky + cfg.stride * cfg.w_out:cfg.stride,
                          kx:kx + cfg.stride * cfg.w_out:cfg.stride]
            out[:, :, :, ky * cfg.k + kx] = rows
    return out


def pad_weights(cfg, weights):
    """``weights`` ``(n_out, n_in, K, K)`` → ``(groups, P, n_in, K²)``, zero lanes appended."""
    weights = np.asarray(weights)
    if weights.shape != (cfg.n_out, cfg.n_in, cfg.k, cfg.k):
        raise ValueError(f"weights must be ({cfg.n_out}, {cfg.n_in}, {cfg.k}, {cfg.k}), "
                         f"not {weights.shape}")
    full = np.zeros((cfg.groups * cfg.p, cfg.n_in, cfg.taps), weights.dtype)
    full[:cfg.n_out] = weights.reshape(cfg.n_out, cfg.n_in, cfg.taps)
    return full.reshape(cfg.groups, cfg.p, cfg.n_in, cfg.taps)


def pad_bias(cfg, bias):
    """``bias`` ``(n_out,)`` → ``(groups, P)``, zero lanes appended."""
    bias = np.asarray(bias)
    if bias.shape != (cfg.n_out,):
        raise ValueError(f"bias must be ({cfg.n_out},), not {bias.shape}")
    full = np.zeros(cfg.groups * cfg.p, bias.dtype)
    full[:cfg.n_out] = bias
    return full.reshape(cfg.groups, cfg.p)


def pass_weights(cfg, weights):
    """``weights`` ``(n_out, n_in, K, K)`` → the LPRAM rows ``(rows, P, Q, K²)``: row
    ``g·passes + r`` holds ``w[g·P + j][r·Q + i]`` at ``[j, i]``, zero past ``n_out`` and
    past ``n_in`` (the ragged last pass)."""
    w = pad_weights(cfg, weights)                              # (g, j, i, t)
    full = np.zeros((cfg.groups, cfg.p, cfg.passes * cfg.q, cfg.taps), w.dtype)
    full[:, :, :cfg.n_in] = w
    full = full.reshape(cfg.groups, cfg.p, cfg.passes, cfg.q, cfg.taps)
    return np.moveaxis(full, 2, 1).reshape(cfg.rows, cfg.p, cfg.q, cfg.taps)


def conv_partials(cfg, act, weights, partial_in=None):
    """``R_m`` of every output beat: ``(w_out, w_out, groups, P)`` (steps 1-5)."""
    add, mul = _ops(cfg)
    win = windows(cfg, act)
    channels = cfg.passes * cfg.q                              # zero channels past n_in
    win = np.concatenate([win, np.zeros(win.shape[:2] + (channels - cfg.n_in, cfg.taps),
                                        win.dtype)], axis=2)[:, :, None, None]
    w = pass_weights(cfg, weights).reshape(cfg.groups, cfg.passes, cfg.p, cfg.q, cfg.taps)
    w = np.moveaxis(w, 1, 2).reshape(cfg.groups, cfg.p, channels, cfg.taps)[None, None]
    products = mul(w, win)                                     # (y, x, g, j, c, t)
    tiles = tree_sum([products[..., t] for t in range(cfg.taps)], add)
    local = None
    for r in range(cfg.passes):
        ce = tree_sum([tiles[..., r * cfg.q + i] for i in range(cfg.q)], add)
        local = ce if local is None else add(local, ce)
    if cfg.partial_in:
        if partial_in is None:
            raise ValueError("partial_in: this segment adds the upstream partials")
        partial_in = np.asarray(partial_in).reshape(local.shape)
        return add(partial_in.astype(local.dtype), local)
    if partial_in is not None:
        raise ValueError("partial_in given to a segment that starts its layer")
    return local


def order_key(cfg, values):
    """An integer key ordered as the values: fp32 patterns → the IEEE total order."""
    values = np.asarray(values).astype(np.int64)
    if cfg.precision == "fp32":
        return np.where(values >> 31 == 1, (~values) & 0x7fffffff, values | 0x80000000)
    return values


def complete(cfg, partials, bias):
    """Step 6: ``z`` on the completing node."""
    add, _ = _ops(cfg)
    b = pad_bias(cfg, bias)
    if cfg.precision == "fp32":
        return add(partials, b.astype(np.uint32))
    f = cfg.frac_bits
    z = partials + (b.astype(np.int64) << f)
    z = (z + (1 << (f - 1))) >> f
    return np.clip(z, -(1 << 15), (1 << 15) - 1)


def sfu(cfg, z):
    """Step 7 on ``z`` ``(w_out, w_out, groups, P)``: ``(data, relu, argmax)``, each
    ``(side, side, groups, P)`` with ``side`` = ``pool_out`` (argmax all 0 without a pool)."""
    z = np.asarray(z)
    if cfg.relu:
        positive = (z >> 31 == 0) if cfg.precision == "fp32" else z > 0
        y = np.where(positive, z, 0).astype(z.dtype)
        mask = y != 0
    else:
        y, mask = z, np.ones(z.shape, bool)
    if cfg.pool is None:
        return y, mask.astype(np.int64), np.zeros(z.shape, np.int64)
    k, s, _ = cfg.pool
    side = cfg.pool_out
    key = order_key(cfg, y)
    best = np.zeros((side, side) + z.shape[2:], np.int64)
    best_key = None
    for t in range(k * k):
        ky, kx = divmod(t, k)
        taps = key[ky:ky + s * side:s, kx:kx + s * side:s][:side, :side]
        if best_key is None:
            best_key = taps
        else:
            better = taps > best_key
            best = np.where(better, t, best)
            best_key = np.where(better, taps, best_key)
    ys, xs = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    rows = ys[..., None, None] * s + best // k
    cols = xs[..., None, None] * s + best % k
    g, j = np.meshgrid(np.arange(z.shape[2]), np.arange(z.shape[3]), indexing="ij")
    data = y[rows, cols, g, j]
    return data, mask[rows, cols, g, j].astype(np.int64), best


class FpResult:
    """What the FP module sends per image: ``partials`` (``R_m``, ``(w_out², groups, P)``
    beats, sent downstream when the node does not complete the layer), and on the
    completing node ``z`` and the SFU's ``data``, ``relu``, ``argmax`` as beats
    ``(pool_out², groups, P)``."""

    def __init__(self, cfg, partials, z=None, data=None, relu=None, argmax=None):
        beats = cfg.w_out ** 2, cfg.groups, cfg.p
        self.partials = partials.reshape(beats)
        if z is not None:
            side = cfg.pool_out ** 2, cfg.groups, cfg.p
            self.z = z.reshape(beats)
            self.data, self.relu, self.argmax = (v.reshape(side) for v in (data, relu, argmax))


def fp_module(cfg, act, weights, bias=None, partial_in=None):
    """One image through the FP module: a :class:`FpResult`."""
    partials = conv_partials(cfg, act, weights, partial_in)
    if not cfg.completes:
        return FpResult(cfg, partials)
    if bias is None:
        bias = np.zeros(cfg.n_out, np.int64 if cfg.precision == "fixed16" else np.uint32)
    z = complete(cfg, partials, bias)
    return FpResult(cfg, partials, z, *sfu(cfg, z))

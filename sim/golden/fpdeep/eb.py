"""Bit-exact numpy model of the EB module (:mod:`nnrtl.hw.fpdeep.eb`) and of the SFU's
backward step (unpool from the argmax, ReLU' from the mask), fixed16 and fp32.

Arithmetic (the RTL computes exactly this)
------------------------------------------
For a layer segment ``cfg`` (an :class:`~nnrtl.hw.fpdeep.config.FpConfig`) and the δ map
of its output channels, ``delta`` (``w_out × w_out × n_out`` codes of 16-bit words,
``frac_bits`` fraction bits), the error of the segment's input channels is the full
convolution with the 180°-rotated kernels::

    E[y][x][i] = Σ_o Σ_{ky,kx} δ[(y − ky + pad) / s][(x − kx + pad) / s][o] · W[o][i][ky][kx]

(δ at a non-integer or outside position is 0: the EB module dilates the δ map by ``s − 1``
zeros between pixels and its line buffer pads it by ``K − 1 − pad``,
:func:`dilate_delta`). The sum is
exact (products 32 bits, ``2·frac_bits`` fraction bits, summed in 48 bits; the order of an
exact sum does not change it, the RTL's is tile tree → CE tree → groups in order). Then
rounded half up to ``frac_bits`` fraction bits and saturated to 16 bits, as the FP module's
completing step.

fp32 (bit patterns, ``hw/arith`` RNE, each product and each add rounded once), in the RTL's
order: per output pixel, group ``g`` and input channel ``i``, the products
``W[g·P + j][i][K²−1−t] · δ[t][g·P + j]`` of the δ window's taps ``t`` (raster order; lanes
past ``n_out`` have zero weights and δ) reduced by :func:`~.fp.tree_sum` over ``t`` (tile
tree), then over the ``P`` tiles ``j`` (CE tree), then the groups in order
``((s_0 + s_1) + s_2) + …``; no rounding after. A segment with passes (``q < n_in``) sums
each input channel in this same order (the RTL's pass ``r`` computes channels ``r·Q …
r·Q + Q − 1``, each channel's sum its own register), so ``q`` changes the cycles, not the
bits.

OCP partial errors (:func:`eb_module` ``partial_in`` / ``rounded``): the rule of
:mod:`nnrtl.gen.fpdeep.chain`: fixed16 exact 48-bit sums reduced up the backward chain,
rounded once by the most upstream segment; fp32 ``partial + local`` rounded once per
segment.
"""

import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.sim.golden.float import float_add, float_mul

from .fp import pad_weights, tree_sum

__all__ = ["eb_sums", "eb_module", "eb_fp32", "rescale", "sfu_backward", "pad_delta",
           "dilate_delta"]


def rescale(cfg, wide):
    """Round half up to ``frac_bits`` fraction bits and saturate to 16 bits."""
    f = cfg.frac_bits
    return np.clip((np.asarray(wide, np.int64) + (1 << (f - 1))) >> f, -(1 << 15),
                   (1 << 15) - 1)


def pad_delta(cfg, delta):
    """``delta`` ``(w_out, w_out, n_out)`` → ``(w_out, w_out, groups, P)``, zero lanes
    appended (the δ stream's beats)."""
    delta = np.asarray(delta, np.int64)
    if delta.shape != (cfg.w_out, cfg.w_out, cfg.n_out):
        raise ValueError(f"delta must be ({cfg.w_out}, {cfg.w_out}, {cfg.n_out}), "
                         f"not {delta.shape}")
    full = np.zeros((cfg.w_out, cfg.w_out, cfg.groups * cfg.p), np.int64)
    full[..., :cfg.n_out] = delta
    return full.reshape(cfg.w_out, cfg.w_out, cfg.groups, cfg.p)


def dilate_delta(cfg, delta):
    """The δ map ``(w_out, w_out, ...)`` as the EB line buffer sees it: ``stride − 1`` zero
    pixels between δ pixels, then zero rows and columns up to the side ``w_in + 2·pad − K +
    1`` (the input pixels no window of the forward pass reached), padded by ``K − 1 − pad``
    on every side; its ``K × K`` windows at stride 1 are ``w_in × w_in``."""
    s, q = cfg.stride, cfg.k - 1 - cfg.pad
    side = cfg.w_in + 2 * cfg.pad - cfg.k + 1 + 2 * q
    out = np.zeros((side, side) + delta.shape[2:], delta.dtype)
    span = (cfg.w_out - 1) * s + 1
    out[q:q + span:s, q:q + span:s] = delta
    return out


def eb_sums(cfg, delta, weights):
    """The exact sums ``(w_in, w_in, n_in)`` (``2·frac_bits`` fraction bits)."""
    weights = np.asarray(weights, np.int64)
    d = pad_delta(cfg, delta).reshape(cfg.w_out, cfg.w_out, -1)[..., :cfg.n_out]
    padded = dilate_delta(cfg, d)
    out = np.zeros((cfg.w_in, cfg.w_in, cfg.n_in), np.int64)
    for g in range(cfg.groups):                       # groups in order, as the RTL
        lanes = slice(g * cfg.p, min((g + 1) * cfg.p, cfg.n_out))
        for a in range(cfg.k):
            for b in range(cfg.k):
                window = padded[a:a + cfg.w_in, b:b + cfg.w_in, lanes]     # (y, x, o)
                kernel = weights[lanes, :, cfg.k - 1 - a, cfg.k - 1 - b]   # (o, i)
                out += window @ kernel
    return out


def eb_fp32(cfg, delta, weights):
    """fp32: one image's errors ``(w_in, w_in, n_in)`` as bit patterns (``uint32``)."""
    add = lambda a, b: float_add(FP32, a, b)
    padded = dilate_delta(cfg, pad_delta(cfg, delta)).astype(np.uint32)   # (y, x, g, j)
    w = pad_weights(cfg, np.asarray(weights, np.int64)).astype(np.uint32)   # (g, j, i, t)
    products = []
    for t in range(cfg.taps):
        a, b = divmod(t, cfg.k)
        window = padded[a:a + cfg.w_in, b:b + cfg.w_in][..., None]          # (y, x, g, j, 1)
        kernel = w[None, None, :, :, :, cfg.taps - 1 - t]                   # (1, 1, g, j, i)
        products.append(float_mul(FP32, kernel, window))
    tiles = tree_sum(products, add)                                          # (y, x, g, j, i)
    sums = tree_sum([tiles[:, :, :, j] for j in range(cfg.p)], add)          # (y, x, g, i)
    total = sums[:, :, 0]
    for g in range(1, cfg.groups):
        total = add(total, sums[:, :, g])
    return total.astype(np.uint32)


def eb_module(cfg, delta, weights, partial_in=None, *, rounded=True):
    """One image's errors ``(w_in, w_in, n_in)``: fixed16 16-bit codes, fp32 bit
    patterns.

    ``partial_in`` (``(w_in, w_in, n_in)``, the RTL's ``i_partial``): the partial errors of
    the downstream OCP segment, added to the local sums: fixed16 exact (48-bit sums,
    ``2·frac_bits`` fraction bits), fp32 one rounded add ``partial_in + local``. With
    ``rounded=False`` (the RTL's ``o_partial``) fixed16 returns the exact sums un-rounded
    (fp32 words are the same either way)."""
    if cfg.precision == "fp32":
        local = eb_fp32(cfg, delta, weights)
        if partial_in is None:
            return local
        return float_add(FP32, np.asarray(partial_in, np.uint32), local).astype(np.uint32)
    wide = eb_sums(cfg, delta, weights)
    if partial_in is not None:
        wide = wide + np.asarray(partial_in, np.int64)
    return rescale(cfg, wide) if rounded else wide


def sfu_backward(cfg, error, relu, argmax):
    """δ ``(w_out, w_out, groups, P)`` of the layer ``cfg`` completes, from the error of its
    SFU output ``(pool_out, pool_out, groups, P)`` and the SFU's ``relu`` / ``argmax``
    fields of the same shape.

    Notes
    -----
    SFU backward (:func:`sfu_backward`) on the node completing layer ``t − 1``: the error of the
    pooled activations (``pool_out²`` pixels × groups × P) goes to the argmax position of its
    window if the ReLU mask bit sent with it is set; without a pool, ``δ = error · relu``.
    Overlapping pools (kernel > stride, AlexNet's 3×3/2): a position reached by several windows
    sums their errors in pooled raster order, PyTorch's ``max_pool2d`` backward
    (``grad_input[argmax] += grad_output`` over the pooled pixels in order): fixed16 the exact sum
    saturated to 16 bits, fp32 the first term, then one rounded add per further term. Positions
    no window routes to (not the argmax, or not covered: ``w_out`` past the pool's reach) get 0.
    """
    error, relu, argmax = (np.asarray(v, np.int64) for v in (error, relu, argmax))
    shape = (cfg.pool_out, cfg.pool_out, cfg.groups, cfg.p)
    for name, value in (("error", error), ("relu", relu), ("argmax", argmax)):
        if value.shape != shape:
            raise ValueError(f"{name} must be {shape}, not {value.shape}")
    kept = np.where(relu != 0, error, 0)
    if cfg.pool is None:
        return kept
    kp, sp, _ = cfg.pool
    fp32 = cfg.precision == "fp32"
    delta = np.zeros((cfg.w_out, cfg.w_out, cfg.groups, cfg.p), np.int64)
    reached = np.zeros(delta.shape, bool)
    for py in range(cfg.pool_out):                    # pooled raster order
        for px in range(cfg.pool_out):
            for t in range(kp * kp):
                a, b = divmod(t, kp)
                y, x = py * sp + a, px * sp + b
                route = (argmax[py, px] == t) & (relu[py, px] != 0)
                word = error[py, px]
                if fp32:
                    added = float_add(FP32, delta[y, x].astype(np.uint32),
                                      word.astype(np.uint32)).astype(np.int64)
                    total = np.where(reached[y, x], added, word)
                else:
                    total = delta[y, x] + word
                delta[y, x] = np.where(route, total, delta[y, x])
                reached[y, x] |= route
    return delta if fp32 else np.clip(delta, -(1 << 15), (1 << 15) - 1)

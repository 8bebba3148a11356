"""Bit-exact numpy model of the FC engine (:mod:`nnrtl.hw.fpdeep.fc`), fixed16 and fp32.

With ``W⁺ = [W | b]`` and ``x⁺ = [x, 1]`` (:mod:`nnrtl.hw.fpdeep.fc_config`), ``P`` words a
beat, ``K`` beats a row (zero words past column ``n_in``), for a mini-batch of ``B`` samples:

* **input**: ``x ← max(x, 0)`` when ``input_relu`` (fp32: a set sign bit gives ``+0``);
* **forward** ``y[b][o]``: per beat ``k`` the ``P`` products ``W⁺[o][kP + j] · x⁺[b][kP + j]``
  reduced by :func:`~.fp.tree_sum` (the CE's tile tree), then the beats in order ``acc =
  s_0, acc = acc + s_k``; fixed16 exact, rounded half up to ``frac_bits`` and saturated to
  16 bits (:func:`~.eb.rescale`, as the FP module's bias step);
* **backward** ``δx[b][i] = Σ_o W[o][i] · δy[b][o]``, the rows ``o`` in order (``acc =
  p_0``, ``acc = acc + p_o``), fixed16 exact then rescaled; times ``x ≠ 0`` when
  ``input_relu``;
* **gradient** ``g[o][c] = Σ_b δy[b][o] · x⁺[b][c]``, the samples in order (``acc = p_0``,
  ``acc = acc + p_b``), fixed16 exact with ``2·frac_bits`` fraction bits;
* **update** ``W⁺ ← W⁺ − rate · g`` (:func:`~.update.sgd`, the conv update's arithmetic:
  fixed16 ``lr`` a Q0.16 code, fp32 the bits of ``η/B``).

fp32 values are bit patterns, each product and add rounded once (``hw/arith`` RNE); fixed16
values are ``int64`` codes.
"""

import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.sim.golden.float import float_add, float_mul

from .eb import rescale
from .fp import tree_sum
from .update import sgd

__all__ = ["extend", "stored_input", "fc_forward", "fc_backward", "fc_gradient", "fc_step",
           "weight_rows"]


def _ops(cfg):
    if cfg.precision == "fp32":
        return (lambda a, b: float_add(FP32, a, b).astype(np.int64),
                lambda a, b: float_mul(FP32, a, b).astype(np.int64))
    return (lambda a, b: a + b), (lambda a, b: a * b)


def _check(name, value, shape):
    value = np.asarray(value, np.int64)
    if value.shape != shape:
        raise ValueError(f"{name} must be {shape}, not {value.shape}")
    return value


def stored_input(cfg, xs):
    """``xs`` ``(B, n_in)`` as the engine stores them (ReLU applied when ``input_relu``)."""
    xs = _check("xs", xs, (cfg.batch, cfg.n_in))
    if not cfg.input_relu:
        return xs
    if cfg.precision == "fp32":
        return np.where(xs >> 31 == 1, 0, xs)
    return np.maximum(xs, 0)


def extend(cfg, xs):
    """``x⁺`` padded to ``K·P`` words: ``(B, K·P)``, the one at column ``n_in``."""
    out = np.zeros((cfg.batch, cfg.beats * cfg.p), np.int64)
    out[:, :cfg.n_in] = stored_input(cfg, xs)
    out[:, cfg.n_in] = cfg.one
    return out


def weight_rows(cfg, weights, bias):
    """``W⁺`` padded to ``K·P`` columns: ``(n_out, K·P)`` (the DDR region's words)."""
    weights = _check("weights", weights, (cfg.n_out, cfg.n_in))
    out = np.zeros((cfg.n_out, cfg.beats * cfg.p), np.int64)
    out[:, :cfg.n_in] = weights
    out[:, cfg.n_in] = _check("bias", bias, (cfg.n_out,))
    return out


def fc_forward(cfg, rows, xs):
    """``y`` ``(B, n_out)`` from ``rows`` (:func:`weight_rows`) and ``xs`` ``(B, n_in)``."""
    add, mul = _ops(cfg)
    x = extend(cfg, xs)
    rows = _check("rows", rows, (cfg.n_out, cfg.beats * cfg.p))
    products = mul(rows[None, :, :], x[:, None, :])                # (b, o, c)
    acc = None
    for k in range(cfg.beats):
        beat = [products[:, :, k * cfg.p + j] for j in range(cfg.p)]
        s = tree_sum(beat, add)
        acc = s if acc is None else add(acc, s)
    return acc if cfg.precision == "fp32" else rescale(cfg, acc)


def fc_backward(cfg, rows, xs, dys, lr):
    """``(δx (B, n_in), rows')``: the input error and the updated ``W⁺`` rows from the
    mini-batch's ``xs`` and output errors ``dys`` ``(B, n_out)``."""
    add, mul = _ops(cfg)
    x = extend(cfg, xs)
    rows = _check("rows", rows, (cfg.n_out, cfg.beats * cfg.p))
    dys = _check("dys", dys, (cfg.batch, cfg.n_out))
    dx = None
    for o in range(cfg.n_out):
        p = mul(rows[o][None, :], dys[:, o][:, None])             # (b, c)
        dx = p if dx is None else add(dx, p)
    dx = dx[:, :cfg.n_in]
    if cfg.precision == "fixed16":
        dx = rescale(cfg, dx)
    if cfg.input_relu:
        dx = np.where(x[:, :cfg.n_in] != 0, dx, 0)
    new = sgd(cfg, rows, fc_gradient(cfg, xs, dys), lr, 2 * cfg.frac_bits)
    return dx.astype(np.int64), new


def fc_gradient(cfg, xs, dys):
    """``g`` ``(n_out, K·P)``: ``Σ_b δy[b][o] · x⁺[b][c]``, the samples in order (fixed16
    exact, ``2·frac_bits`` fraction bits; column ``n_in`` the bias's)."""
    add, mul = _ops(cfg)
    x = extend(cfg, xs)
    dys = _check("dys", dys, (cfg.batch, cfg.n_out))
    g = None
    for b in range(cfg.batch):
        p = mul(dys[b][:, None], x[b][None, :])                   # (o, c)
        g = p if g is None else add(g, p)
    return g


def fc_step(cfg, weights, bias, xs, dys, lr):
    """One mini-batch: ``(y, δx, weights', bias')`` (the ``δy`` given, as the host's loss
    gives it after ``y``)."""
    rows = weight_rows(cfg, weights, bias)
    y = fc_forward(cfg, rows, xs)
    dx, new = fc_backward(cfg, rows, xs, dys, lr)
    return y, dx, new[:, :cfg.n_in], new[:, cfg.n_in]

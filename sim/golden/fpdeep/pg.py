"""Bit-exact numpy model of the PG module (:mod:`nnrtl.hw.fpdeep.pg`), fixed16.

For a layer segment ``cfg`` and a mini-batch of images, with ``A`` the segment's input
activations (``w_in × w_in × n_in`` codes) and ``δ`` its output channels' errors
(``w_out × w_out × n_out`` codes, after the SFU backward)::

    dW[o][i][ky][kx] = Σ_images Σ_{y,x} δ[y][x][o] · A[y·s + ky − pad][x·s + kx − pad][i]
    db[o]            = Σ_images Σ_{y,x} δ[y][x][o]            (on the completing node)

(``A`` outside the map is 0): the K×K small convolutions of the paper's cut, exact integer
sums (``dW`` with ``2·frac_bits`` fraction bits, ``db`` with ``frac_bits``), the LGB words of
:attr:`PgModule.lgb_bits <nnrtl.hw.fpdeep.pg.PgModule.lgb_bits>` bits hold them without
overflow. The order of an exact sum does not matter.

fp32 (bit patterns, ``hw/arith`` RNE): every LGB word starts at ``+0`` and takes one
rounded product ``δ · A`` and one rounded add per output pixel, in the order the RTL
visits them: images in order, pixels in raster order (``dW ← dW + δ·A``; the bias bank
``db ← db + δ``). Lanes past ``n_out`` get the zero δ's products.
"""

import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.sim.golden.float import float_add, float_mul

from .eb import pad_delta
from .fp import windows

__all__ = ["pg_batch", "lgb_rows"]


def pg_batch(cfg, acts, deltas):
    """``(dW (n_out, n_in, K, K), db (n_out,))`` of one mini-batch (lists of images):
    fixed16 integer codes, fp32 bit patterns."""
    if cfg.precision == "fp32":
        return _pg_fp32(cfg, acts, deltas)
    dw = np.zeros((cfg.n_out, cfg.n_in, cfg.taps), np.int64)
    db = np.zeros(cfg.n_out, np.int64)
    for act, delta in zip(acts, deltas, strict=True):
        delta = np.asarray(delta, np.int64)
        if delta.shape != (cfg.w_out, cfg.w_out, cfg.n_out):
            raise ValueError(f"delta must be ({cfg.w_out}, {cfg.w_out}, {cfg.n_out}), "
                             f"not {delta.shape}")
        win = windows(cfg, np.asarray(act, np.int64))          # (y, x, i, t)
        dw += np.einsum("yxo,yxit->oit", delta, win)
        db += delta.sum(axis=(0, 1))
    return dw.reshape(cfg.n_out, cfg.n_in, cfg.k, cfg.k), db


def _pg_fp32(cfg, acts, deltas):
    lanes = cfg.groups * cfg.p
    dw = np.zeros((lanes, cfg.n_in, cfg.taps), np.uint32)
    db = np.zeros(lanes, np.uint32)
    for act, delta in zip(acts, deltas, strict=True):
        d = pad_delta(cfg, delta).reshape(cfg.w_out, cfg.w_out, lanes).astype(np.uint32)
        win = windows(cfg, np.asarray(act, np.int64)).astype(np.uint32)   # (y, x, i, t)
        for y in range(cfg.w_out):
            for x in range(cfg.w_out):
                products = float_mul(FP32, d[y, x][:, None, None], win[y, x][None])
                dw = float_add(FP32, dw, products).astype(np.uint32)
                db = float_add(FP32, db, d[y, x]).astype(np.uint32)
    return (dw[:cfg.n_out].reshape(cfg.n_out, cfg.n_in, cfg.k, cfg.k),
            db[:cfg.n_out])


def lgb_rows(cfg, dw, db):
    """The LGB as ``rows[bank][row]`` of ``P`` words (bank ``i·K² + t``, the bias bank
    ``S_IC·K²`` on the completing node only), lanes past ``n_out`` zero."""
    g, p = cfg.groups, cfg.p
    full = np.zeros((g * p, cfg.n_in, cfg.taps), np.int64)
    full[:cfg.n_out] = np.asarray(dw).reshape(cfg.n_out, cfg.n_in, cfg.taps)
    rows = [[list(full[r * p:(r + 1) * p, i, t]) for r in range(g)]
            for i in range(cfg.n_in) for t in range(cfg.taps)]
    if cfg.completes:
        bias = np.zeros(g * p, np.int64)
        bias[:cfg.n_out] = db
        rows.append([list(bias[r * p:(r + 1) * p]) for r in range(g)])
    return rows

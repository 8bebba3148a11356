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
``db ← db + δ``). Lanes past ``n_out`` get the zero δ's products. A segment with passes
(``q < n_in``) gives every word the same terms in the same order (the RTL's pass ``r``
computes channels ``r·Q … r·Q + Q − 1``), so ``q`` changes only the LGB's row layout
(:func:`lgb_rows`, the LPRAM's), not the sums.
"""

import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.sim.golden.float import float_add, float_mul

from .eb import pad_delta
from .fp import pad_bias, pass_weights, windows

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
    """The LGB as ``rows[bank][row]`` of ``P`` words in the LPRAM's layout
    (:func:`~.fp.pass_weights`): bank ``i·K² + t``, row ``g·passes + r`` holds
    ``dW[g·P + j][r·Q + i][t]`` (zero past ``n_out`` and past ``n_in``); the bias bank
    ``Q·K²`` (completing node only) holds ``db`` of group ``g`` at row ``g·passes + passes −
    1``, its other rows zero."""
    full = pass_weights(cfg, np.asarray(dw, np.int64))         # (rows, P, Q, K²)
    rows = [[list(full[row, :, i, t]) for row in range(cfg.rows)]
            for i in range(cfg.q) for t in range(cfg.taps)]
    if cfg.completes:
        bias = np.zeros((cfg.rows, cfg.p), np.int64)
        bias[cfg.passes - 1::cfg.passes] = pad_bias(cfg, np.asarray(db, np.int64))
        rows.append([list(words) for words in bias])
    return rows

"""Bit-exact numpy model of the weight update (:mod:`nnrtl.hw.fpdeep.update`): plain SGD
``w ← w − rate · g`` with ``rate = η/B`` (the ``lr`` register) and ``g`` the mini-batch's
summed gradient (:func:`.pg.pg_batch`).

fixed16: ``lr`` an unsigned Q0.16 code; ``Δ = ⌊(lr · g + 2^(s−1)) / 2^s⌋`` with ``s = 16 +
frac_bits`` for weights (``g`` with ``2·frac_bits`` fraction bits) and ``s = 16`` for the
bias (``frac_bits``), ``w' = clip(w − Δ, −2¹⁵, 2¹⁵ − 1)``.
fp32 (bit patterns): ``w' = fl(w − fl(rate · g))``, RNE, ``hw/arith``'s units.
"""

import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.update import RATE_BITS
from nnrtl.sim.golden.float import float_mul, float_sub

__all__ = ["sgd", "update_segment"]


def sgd(cfg, words, grads, lr, grad_frac_bits):
    """``words − rate · grads`` elementwise: fixed16 codes (``grads`` with
    ``grad_frac_bits`` fraction bits), fp32 bit patterns."""
    words = np.asarray(words, np.int64)
    grads = np.asarray(grads, np.int64)
    if cfg.precision == "fp32":
        product = float_mul(FP32, np.uint32(lr), grads.astype(np.uint32))
        return float_sub(FP32, words.astype(np.uint32), product).astype(np.int64)
    shift = RATE_BITS + grad_frac_bits - cfg.frac_bits
    scaled = [int(lr) * int(g) for g in grads.ravel()]
    delta = np.array([(s + (1 << (shift - 1))) >> shift for s in scaled],
                     dtype=object).reshape(grads.shape)
    return np.clip(words - delta, -(1 << 15), (1 << 15) - 1).astype(np.int64)


def update_segment(cfg, weights, bias, dw, db, lr):
    """``(weights', bias')`` of a segment after one mini-batch: ``weights (n_out, n_in, K,
    K)``, ``bias (n_out,)`` and the gradients ``dw``, ``db`` of
    :func:`~.pg.pg_batch`. The bias changes on the completing node only (the others hold
    none)."""
    new_w = sgd(cfg, weights, dw, lr, 2 * cfg.frac_bits)
    new_b = sgd(cfg, bias, db, lr, cfg.frac_bits) if cfg.completes else np.asarray(bias)
    return new_w, new_b

"""Random parameters and inputs for the SBE golden model and its testbenches."""

import math

import numpy as np

from .model import LayerParams, _is_int

__all__ = ["random_layer", "random_inputs"]


def _uniform_codes(rng, fmt, low, high, size):
    """Codes of values uniform in ``[low, high]``, clipped to ``fmt``."""
    low = max(math.ceil(low * 2 ** fmt.fraction_bits), fmt.min_code)
    high = min(math.floor(high * 2 ** fmt.fraction_bits), fmt.max_code)
    return rng.integers(low, max(low, high), size=size, endpoint=True, dtype=np.int64)


def random_layer(config, layer_index, rng, *, scale=0.25, batch_norm=None):
    """Random :class:`LayerParams` for layer ``layer_index`` of ``config``.

    Weights are uniform over ``+-scale * W.max_code / sqrt(C)`` codes (at least one
    code): with :func:`random_inputs` and the default formats the x part of a
    pre-activation then has a standard deviation of about 2.7, so it mostly stays inside
    the PWL ranges (sigmoid ``[-8, 8)``, tanh ``[-4, 4)``) and sometimes saturates.
    Biases are uniform in ``[-1, 1]``; with batch norm (default ``config.batch_norm``)
    scales are uniform in ``[0.5, 1.5]`` and shifts in ``[-0.25, 0.25]``.

    Parameters
    ----------
    config : SbeConfig
    layer_index : int
    rng : numpy.random.Generator
    scale : float
        Fraction of the weight range, before the ``1 / sqrt(C)``.
    batch_norm : bool, optional
    """
    inputs, hidden = config.layer_sizes(layer_index)
    columns = inputs + hidden
    fmts = config.formats
    rows = 4 * hidden
    limit = max(1, min(fmts.weight.max_code,
                       round(scale * fmts.weight.max_code / math.sqrt(columns))))
    matrix = rng.integers(-limit, limit, size=(rows, columns), endpoint=True,
                          dtype=np.int64)
    bias = _uniform_codes(rng, fmts.acc, -1.0, 1.0, rows)
    if config.batch_norm if batch_norm is None else batch_norm:
        bn_scale = _uniform_codes(rng, fmts.cell, 0.5, 1.5, rows)
        bn_shift = _uniform_codes(rng, fmts.acc, -0.25, 0.25, rows)
    else:
        bn_scale = bn_shift = None
    return LayerParams(matrix=matrix, bias=bias, bn_scale=bn_scale, bn_shift=bn_shift)


def random_inputs(config, steps, rng, *, layer_index=0):
    """``steps x In`` random x codes (``V``) of layer ``layer_index`` (default the first),
    uniform over the middle half of ``V``'s codes."""
    if not _is_int(steps) or steps < 0:
        raise TypeError(f"steps must be a non-negative integer, not {steps!r}")
    vector = config.formats.vector
    size = (steps, config.layer_sizes(layer_index)[0])
    return rng.integers(vector.min_code // 2, vector.max_code // 2, size=size,
                        endpoint=True, dtype=np.int64)

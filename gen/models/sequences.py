"""Sequences of different lengths in one time-first batch (ONNX's ``sequence_lens``,
PyTorch's packed sequences): each sequence ``n`` is its first ``lengths[n]`` steps, the
steps after it padding.

An RNN layer over such a batch computes each sequence alone: a forward direction runs
its steps and stops, a reverse one starts at the sequence's last step (not at the batch's
last step), and the outputs past a sequence's end are zero (ONNX's ``Y``; PyTorch's
``pad_packed_sequence``). So a layer that runs the whole padded batch forward in time
computes the same values on every valid step when the host gives a reverse direction each
sequence reversed within its length (:func:`reverse_within`, its own inverse) and zeroes
the outputs past the ends (:func:`step_mask`).
"""

import numpy as np

from ..errors import UsageError

__all__ = ["check_lengths", "step_mask", "reverse_within"]


def check_lengths(lengths, steps, batch, *, name="--lengths"):
    """``lengths`` as an int64 array of ``batch`` entries from 1 to ``steps``.

    Raises
    ------
    UsageError
        Another shape, a non-integer value or one outside 1 .. ``steps``, naming
        ``name``, the value and the rule.
    """
    values = np.asarray(lengths)
    if values.shape != (batch,):
        raise UsageError(f"{name} must hold one length per sequence (shape ({batch},)), "
                         f"not shape {values.shape}")
    if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
        raise UsageError(f"{name} must be integers, not {values.tolist()}")
    bad = [int(v) for v in values if not 1 <= v <= steps]
    if bad:
        raise UsageError(f"{name} must be from 1 to the sequence length {steps}, not "
                         f"{bad[0]}")
    return values.astype(np.int64)


def step_mask(lengths, steps):
    """``T x N`` bool: ``True`` on each sequence's own steps."""
    return np.arange(steps)[:, None] < np.asarray(lengths)[None, :]


def reverse_within(values, lengths):
    """``values`` (``T x N x ...``) with each sequence's first ``lengths[n]`` steps in
    reverse order and its padding where it was; a copy."""
    values = np.asarray(values)
    steps = values.shape[0]
    index = np.arange(steps)[:, None]
    lengths = np.asarray(lengths)[None, :]
    source = np.where(index < lengths, lengths - 1 - index, index)
    columns = np.arange(values.shape[1])[None, :]
    return values[source, columns].copy()

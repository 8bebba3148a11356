"""The η-LSTM training step's gradient bound (:func:`gradient_bound`): how far a weight
gradient of the channel's fp32 arithmetic may be from float64 autograd, derived from the
arithmetic (one rounding per operation, the MVM sums' length) and the PWL sigmoid and tanh
tables' errors; :class:`~.trainer.OmniTrainer` states it to :mod:`nnrtl.gen.train`.
"""

import functools

__all__ = ["FP32_TABLE_ERRORS", "gradient_bound"]


#: The tables' absolute error bounds the activation tests assert for fp32 at the default
#: 6 segment bits (:mod:`nnrtl.hw.arith.activation`: measured 4.88e-6 and 9.72e-6).
FP32_TABLE_ERRORS = {"sigmoid": 5e-6, "tanh": 1e-5}


@functools.lru_cache(maxsize=None)
def _measured_error(function, fmt, segment_bits, flush_subnormals):
    from nnrtl.hw.arith.activation import activation_table
    from nnrtl.sim.golden.activation import max_abs_error
    table = activation_table(function, fmt, segment_bits=segment_bits)
    return max_abs_error(table, flush_subnormals=flush_subnormals)[0]


def _table_error(config, function):
    """``e_σ`` or ``e_tanh`` of ``config``'s table: the tested fp32 bound, else measured
    (:func:`~nnrtl.sim.golden.activation.max_abs_error`, seconds; once per table)."""
    from nnrtl.hw.arith.float_format import FP32

    table = config.table(function)
    if config.fmt == FP32 and table.segment_bits == 6:
        return FP32_TABLE_ERRORS[function]
    return _measured_error(function, config.fmt, table.segment_bits,
                           config.flush_subnormals)


def gradient_bound(config):
    """The largest difference of a weight gradient from float64 autograd the channel's
    arithmetic allows for ``config`` (:class:`OmniTrainConfig`; derivation in Notes):
    ``LN * LL * (2 e_σ + 2 e_tanh + K u)``.

    Notes
    -----
    The gradient bound (:func:`gradient_bound`) is derived from the channel's arithmetic:
    fp32 with one rounding per operation (unit roundoff ``u = 2^-24``), MVM sums of at most
    ``K`` = :attr:`~nnrtl.hw.omni.channel_config.ChannelConfig.longest_job` terms (relative error ``<= K u`` of the sum of
    magnitudes), and the PWL sigmoid and tanh tables (absolute errors ``e_σ``, ``e_tanh``:
    :data:`FP32_TABLE_ERRORS`, 5e-6 and 1e-5 for fp32, else measured). A cell
    routes two table outputs into every value BP uses (a gate, then ``tanh(s_t)``), so a cell
    adds at most ``δ = 2 e_σ + 2 e_tanh + K u`` to the values it passes on (BP-EW's dozen
    products add ``12 u``, negligible). An error reaches a weight gradient through at most
    ``LN * LL`` cells (the recurrence of its layer and the layers below), so every term
    ``δgates ⊗ [x; h]`` of eq. 3 is within ``LN LL δ`` of its value relative to its size, and
    the gradient, the sum of the terms, within ``LN LL δ S``, ``S`` the sum of the terms'
    magnitudes. With the interface's losses (means over the outputs: ``|δY|`` sums to at most
    ``2 max|y - target|`` for mse, 2 for cross-entropy; gates and ``h`` are below 1 in
    magnitude; inputs of order one), ``S <= 1``: the bound is ``LN LL δ`` (6.4e-4 for 2
    layers of 10 steps, I = H = 8). Measured errors are two orders of magnitude below it
    (tests/omni/gen/test_omni_trainer.py pins the margin): the errors do not add coherently.
    """
    worst = 0.0
    for channel in config.channels:
        u = 2.0 ** -(channel.fmt.mantissa_bits + 1)
        delta = (2 * _table_error(channel, "sigmoid") + 2 * _table_error(channel, "tanh")
                 + channel.longest_job * u)
        worst = max(worst, delta)
    return config.layers * config.seq_len * worst

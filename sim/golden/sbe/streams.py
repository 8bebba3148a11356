"""The SBE's stream formats: the beats of ``s_weights``, ``s_inputs`` and ``m_axis`` for
one run, and the packing of words into beats (symbols: :mod:`nnrtl.sim.golden.sbe`).

AXI4-Stream; little-endian words: word ``n`` of a beat is bits ``[n*w, (n+1)*w)``.
One *run* is one layer ``l`` over ``T`` steps. Batches (:func:`batches`): steps ``t0 = 0,
B, 2B, ...``, batch size ``n = min(B, T - t0)``. Word arrays here hold *unsigned* codes
(two's complement masked to the word width), one row per beat; :func:`pack_beat` turns a
row into the integer a testbench drives, :func:`unpack_beat` the reverse.

``s_weights`` (:func:`weight_beats`), ``Nt`` words of ``operand_width`` bits per beat:

1. Header (:attr:`~nnrtl.hw.sbe.SbeConfig.header_layout`): for unit ``j = 0 .. H-1``:
   ``bias_i, bias_u, bias_f, bias_o`` and, if ``config.batch_norm``, ``scale_i ..
   scale_o, shift_i .. shift_o``: one value per beat,
   its ``acc_width``-bit two's complement code in the low ``acc_width`` bits, the upper
   bits zero. ``H * (12 if batch_norm else 4)`` beats.
2. Blocks in consumption order (:meth:`~nnrtl.hw.sbe.SbeConfig.block_schedule`): if ``config.weights_resident``
   (``Nb <= 2``) blocks ``0 .. Nb-1`` once per run; else per batch blocks ``0 .. F-1``,
   then if ``HB <= 2`` blocks ``F .. Nb-1`` once, else for each of the ``n`` steps blocks
   ``F .. Nb-1``. Block ``b`` is entries ``(p, q)``, ``p = 0 .. P-1`` outer, ``q = 0 ..
   BS-1`` inner; entry ``(p, q)`` is ``n_pe`` words (``n_pe / Nt`` beats), word ``e = c *
   RPP + r`` (``c = 0 .. k-1`` outer, ``r = 0 .. RPP-1`` inner) being ``W[p*RPP + r, b*BC
   + q*k + c]``.

``s_inputs`` (:func:`input_beats`), ``k`` words per beat (x codes, ``V``): per batch, for
x block ``b = 0 .. F-1``, for ``s = 0 .. n-1``, for ``q = 0 .. BS-1``: ``x[t0+s, b*BC +
q*k + c]``, ``c = 0 .. k-1``; then if ``XT > 0``, for ``s``, for ``q = 0 .. XT/k - 1``:
``x[t0+s, F*BC + q*k + c]``.

``m_axis`` (:func:`output_beats`, :func:`unpack_outputs`), ``PP`` words per beat (h codes,
``V``): per step ``H / PP`` beats, beat ``d`` carrying ``h_t[d*PP + m]`` in word ``m``;
``tlast`` on each step's last beat (:func:`output_last`).

Beats per run (:func:`beat_counts`): header ``H * (12 or 4)``; weights ``rows * BC / Nt``
per block sent; inputs ``T * In / k``; outputs ``T * H / PP``.
"""

import numpy as np

from .model import _check_codes, _codes_array, _is_int, pad_columns, pad_params

__all__ = ["batches", "block_schedule", "weight_beats", "input_beats", "output_beats",
           "output_last", "unpack_outputs", "pack_beat", "unpack_beat", "beat_counts"]


def _check_steps(steps):
    if not _is_int(steps) or steps <= 0:
        raise TypeError(f"steps must be a positive integer, not {steps!r}")


def _unsigned(values, width):
    """Two's complement codes as unsigned ``width``-bit words (int64)."""
    return np.asarray(values, dtype=np.int64) & ((1 << width) - 1)


def _signed(words, width):
    """Unsigned (or signed) ``width``-bit words as two's complement codes (int64)."""
    words = np.asarray(words, dtype=np.int64) & ((1 << width) - 1)
    return words - (((words >> (width - 1)) & 1) << width)


def batches(config, steps):
    """``[(t0, n), ...]``: the batches of a run of ``steps`` steps
    (:meth:`~nnrtl.hw.sbe.SbeConfig.batches`)."""
    return config.batches(steps)


def block_schedule(config, layer_index, steps):
    """Block numbers in the order ``s_weights`` sends them for one run of layer
    ``layer_index`` over ``steps`` steps, header not included
    (:meth:`~nnrtl.hw.sbe.SbeConfig.block_schedule`)."""
    config.layer(layer_index)
    return config.block_schedule(layer_index, steps)


def _header_words(config, params):
    """The header's beats: ``header_layout.fields`` rows per hidden unit, each of ``Nt``
    words, values placed by :attr:`~nnrtl.hw.sbe.SbeConfig.header_layout`."""
    layout = config.header_layout
    values = np.zeros((config.hidden_size, layout.fields), dtype=np.int64)
    parts = {"bias": params.bias}
    if config.batch_norm:
        if params.has_batch_norm:
            parts.update(scale=params.bn_scale, shift=params.bn_shift)
        else:  # the unit exists but the layer has none: the identity
            parts.update(scale=np.full(config.rows, 1 << config.formats.cell.fraction_bits,
                                       dtype=np.int64),
                         shift=np.zeros(config.rows, dtype=np.int64))
    for kind, codes in parts.items():
        per_unit = codes.reshape(-1, 4)
        for gate in range(4):
            values[:, layout.index(kind, gate)] = per_unit[:, gate]
    values = values.reshape(-1)                           # unit-major
    width, acc_width = config.operand_width, config.acc_width
    words = np.zeros((values.size, config.bus_weights), dtype=np.int64)
    for n in range(config.bus_weights):
        bits = min(width, acc_width - n * width)
        if bits > 0:
            words[:, n] = (values >> (n * width)) & ((1 << bits) - 1)
    return words


def _block_words(config, shape, matrix, block):
    """Block ``block``'s words in stream order: entries ``(p, q)``, words ``c * RPP +
    r``."""
    k, columns = config.columns_per_cycle, shape.block_columns
    part = matrix[:, block * columns:(block + 1) * columns]
    part = part.reshape(config.passes, config.rows_per_pass, columns // k, k)
    return part.transpose(0, 2, 3, 1).reshape(-1)             # (p, q, c, r)


def weight_beats(config, layer_index, params, steps):
    """``s_weights`` of one run: header then blocks, one row of ``Nt`` unsigned words
    (``operand_width`` bits each) per beat.

    A config with batch norm sends scales and shifts in the header even if they are
    disabled at run time; if ``params`` has none, the identity (scale 1.0, shift 0).

    Returns
    -------
    ndarray of int64, shape (beats, bus_weights)
    """
    params = pad_params(config, layer_index, params)
    config = config.padded
    shape = config.layer(layer_index)
    params.check(config, layer_index)
    order = block_schedule(config, layer_index, steps)
    matrix = _unsigned(params.matrix, config.operand_width)
    blocks = {b: _block_words(config, shape, matrix, b) for b in sorted(set(order))}
    body = np.concatenate([blocks[b] for b in order]).reshape(-1, config.bus_weights)
    return np.concatenate([_header_words(config, params), body])


def input_beats(config, layer_index, xs):
    """``s_inputs`` of one run: one row of ``k`` unsigned x words per beat.

    Parameters
    ----------
    xs : array of int, shape (T, In)
        Codes of ``V`` of layer ``layer_index``'s x.

    Returns
    -------
    ndarray of int64, shape (T * In / k, columns_per_cycle)
    """
    inputs, _ = config.layer_sizes(layer_index)
    xs = _codes_array(xs, "xs", 2)
    if xs.shape[1] != inputs:
        raise ValueError(f"xs must have shape (steps, {inputs}), not {xs.shape}")
    _check_codes(xs, config.formats.vector, "xs")
    config = config.padded
    shape = config.layer(layer_index)
    xs = pad_columns(xs, shape.input_size)
    k = config.columns_per_cycle
    first, columns = shape.first_hidden_block, shape.block_columns
    words = _unsigned(xs, config.operand_width)
    parts = [np.zeros((0, k), dtype=np.int64)]
    for t0, n in batches(config, xs.shape[0]) if len(xs) else ():
        batch = words[t0:t0 + n]
        x_blocks = batch[:, :first * columns].reshape(n, first, columns // k, k)
        parts.append(x_blocks.transpose(1, 0, 2, 3).reshape(-1, k))   # (b, s, q)
        parts.append(batch[:, first * columns:].reshape(-1, k))          # (s, q)
    return np.concatenate(parts)


def output_beats(config, hs):
    """``m_axis`` of a run: ``hs`` (``T x H`` codes of ``V``) as rows of ``PP`` unsigned
    words, ``H / PP`` beats per step (``H`` the padded hidden size; ``hs`` of a layer's
    model size gets the padded units as zeros)."""
    hs = _codes_array(hs, "hs", 2)
    if hs.shape[1] in config.layer_hidden_sizes:    # the model's units
        hs = pad_columns(hs, config.padded_hidden_size)
    config = config.padded
    if hs.shape[1] != config.hidden_size:
        raise ValueError(f"hs must have shape (steps, {config.hidden_size}), "
                         f"not {hs.shape}")
    _check_codes(hs, config.formats.vector, "hs")
    return _unsigned(hs, config.operand_width).reshape(-1, config.post_units)


def output_last(config, steps):
    """``tlast`` of each ``m_axis`` beat of a run of ``steps`` steps (bool array)."""
    _check_steps(steps)
    per_step = config.padded_hidden_size // config.post_units
    return np.arange(steps * per_step) % per_step == per_step - 1


def unpack_outputs(config, words, layer_index=None):
    """The inverse of :func:`output_beats`: ``T x H`` signed h codes from rows of ``PP``
    words (unsigned or signed), ``H`` the model's hidden size of layer ``layer_index``
    (default: the last layer, whose h is the model's output)."""
    layer_index = config.layers - 1 if layer_index is None else layer_index
    hidden = config.layer_sizes(layer_index)[1]
    words = _codes_array(words, "words", 2)
    padded = config.padded_hidden_size
    per_step = padded // config.post_units
    if words.shape[1] != config.post_units or words.shape[0] % per_step:
        raise ValueError(f"words must have shape (steps * {per_step}, "
                         f"{config.post_units}), not {words.shape}")
    hs = _signed(words, config.operand_width).reshape(-1, padded)
    return hs[:, :hidden]


def pack_beat(words, width):
    """The integer of a beat (``tdata``) whose word ``n`` is bits ``[n*width,
    (n+1)*width)``; words are taken modulo ``2**width`` (two's complement)."""
    mask = (1 << width) - 1
    value = 0
    for n, word in enumerate(words):
        value |= (int(word) & mask) << (n * width)
    return value


def unpack_beat(value, count, width, signed=True):
    """The ``count`` words of a beat's integer ``value`` (list of int), two's complement
    if ``signed``."""
    value = int(value)
    mask = (1 << width) - 1
    words = [(value >> (n * width)) & mask for n in range(count)]
    if signed:
        words = [w - (1 << width) if w >> (width - 1) else w for w in words]
    return words


def beat_counts(config, layer_index, steps):
    """Beats of each stream in one run of layer ``layer_index`` over ``steps`` steps.

    Returns
    -------
    dict
        ``header`` (``H * header_layout.fields``), ``weights`` (the blocks of
        :func:`block_schedule`, ``rows * BC / Nt`` beats each, header excluded),
        ``inputs`` (``T * In / k``), ``outputs`` (``T * H / PP``).
    """
    shape = config.layer(layer_index)
    per_block = config.rows * shape.block_columns // config.bus_weights
    return dict(header=config.header_beats,
                weights=len(config.block_schedule(layer_index, steps)) * per_block,
                inputs=steps * shape.input_size // config.columns_per_cycle,
                outputs=steps * config.padded_hidden_size // config.post_units)

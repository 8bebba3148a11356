"""The arithmetic of the SBE golden model: parameters as codes and one step of a layer,
vectorised over the rows (symbols and number formats: :mod:`nnrtl.sim.golden.sbe`).

For every row ``r``: ``acc[r] = wrap_acc_width(sum_c W[r, c] * v[c])`` with ``v =
concat(x_t, h_{t-1})``: the exact integer sum, then a two's complement wrap to
``acc_width`` bits (the accumulators wrap like a DSP48; the order does not matter)
(:func:`accumulate`). Then, with :mod:`nnrtl.sim.golden.fixed` (``HALF_UP``,
``SATURATE``), for unit ``j`` and gate ``g`` (row ``4j + g``):

1. ``z = add(acc, bias, A, A, A)``                                  (:func:`preactivation`)
2. with batch norm: ``z = add(mul(z, scale, A, E, A), shift, A, A, A)``
3. ``i, u, f, o = SIG(z_i), TANH_A(z_u), SIG(z_f), SIG(z_o)``        (:func:`cell_update`)
   with ``SIG = pwl_table("sigmoid", A, E)``, ``TANH_A = pwl_table("tanh", A, E)``
   (64 segments), evaluated by :func:`nnrtl.sim.golden.pwl.evaluate` (:func:`tables`)
4. ``c = add(mul(f, c_prev, E, E, E), mul(i, u, E, E, E), E, E, E)``
5. ``t = TANH_E(c)`` with ``TANH_E = pwl_table("tanh", E, E)``
6. ``h = mul(o, t, E, E, V)``

``h_{-1} = c_{-1} = 0`` unless a state is carried over. :func:`step` is one step,
:func:`run_layer` a sequence, :func:`run_model` stacked layers (layer ``l + 1`` reads layer
``l``'s h codes, already in ``V``). The models are vectorised over the rows; the products
are exact (float64 BLAS when every partial sum is an integer below ``2**53``, int64
otherwise), so the paper's VC709 layer (2048 rows x 2304 columns) runs 64 steps in about
a second. ``acc_width`` above 61 is not modelled: the PWL model
(:func:`~nnrtl.sim.golden.pwl.evaluate`) does not index its table with wider codes.
"""

import dataclasses

import numpy as np

from nnrtl.hw.sbe.config import GATES

from .. import fixed
from ..pwl import evaluate

__all__ = ["MAX_MODELLED_ACC_WIDTH", "tables", "LayerParams", "pad_params", "pad_columns", "accumulate", "preactivation",
           "cell_update", "step", "run_layer", "run_model"]

#: Widest accumulator the model evaluates (:func:`nnrtl.sim.golden.pwl.evaluate` keeps
#: input codes of at most 61 bits in int64).
MAX_MODELLED_ACC_WIDTH = 61

_EXACT_FLOAT = 1 << 53          # integers below this are exact in float64
_EXACT_INT64 = 1 << 63


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _codes_array(values, name, ndim):
    array = np.asarray(values)
    if array.dtype.kind not in "iu" and not (array.dtype == object and all(
            _is_int(v) for v in array.flat)):
        raise TypeError(f"{name} must be an array of integer codes, not {array.dtype}")
    array = array.astype(np.int64)
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension{'s' * (ndim > 1)}, "
                         f"not shape {array.shape}")
    return array


def _check_codes(values, fmt, name):
    if values.size and (values.min() < fmt.min_code or values.max() > fmt.max_code):
        raise ValueError(f"{name} has codes outside {fmt} [{fmt.min_code}, {fmt.max_code}]")



def tables(config):
    """The PWL tables of ``config`` (:attr:`~nnrtl.hw.sbe.SbeConfig.pwl_tables`), once its
    accumulators are narrow enough for the model.

    Raises
    ------
    ValueError
        If ``config.acc_width`` exceeds :data:`MAX_MODELLED_ACC_WIDTH`, or (from
        ``pwl_table``) the formats leave fewer input codes than segments in a table's
        range (``acc_frac`` or ``cell_frac`` below 3).
    """
    if config.acc_width > MAX_MODELLED_ACC_WIDTH:
        raise ValueError(f"acc_width ({config.acc_width}) above {MAX_MODELLED_ACC_WIDTH} "
                         f"is not modelled: the PWL model takes int64 codes")
    return config.pwl_tables


@dataclasses.dataclass(frozen=True, eq=False)
class LayerParams:
    """One layer's parameters as codes, in the engine's interleaved row order.

    Attributes
    ----------
    matrix : ndarray of int64, shape (4H, In + H)
        Weight codes (``W``), row ``4 * j + g`` unit ``j`` of gate ``g``, columns
        ``[x, h]``.
    bias : ndarray of int64, shape (4H,)
        Bias codes (``A``).
    bn_scale : ndarray of int64, shape (4H,), or None
        Batch-norm scale per row (``E``); ``None`` without batch norm.
    bn_shift : ndarray of int64, shape (4H,), or None
        Batch-norm shift per row (``A``); given exactly when ``bn_scale`` is.

    Raises
    ------
    TypeError
        If an array does not hold integers.
    ValueError
        If the shapes do not fit each other, or only one of the BN arrays is given.
    """

    matrix: np.ndarray
    bias: np.ndarray
    bn_scale: np.ndarray | None = None
    bn_shift: np.ndarray | None = None

    def __post_init__(self):
        matrix = _codes_array(self.matrix, "matrix", 2)
        rows = matrix.shape[0]
        if rows == 0 or rows % 4:
            raise ValueError(f"matrix must have 4 * hidden_size rows, not {rows}")
        object.__setattr__(self, "matrix", matrix)
        if (self.bn_scale is None) != (self.bn_shift is None):
            raise ValueError("bn_scale and bn_shift must be given together")
        for name in ("bias", "bn_scale", "bn_shift"):
            value = getattr(self, name)
            if value is None:
                continue
            value = _codes_array(value, name, 1)
            if value.shape != (rows,):
                raise ValueError(f"{name} must have shape ({rows},), not {value.shape}")
            object.__setattr__(self, name, value)

    @property
    def rows(self):
        """``4 * hidden_size``."""
        return self.matrix.shape[0]

    @property
    def hidden_size(self):
        return self.rows // 4

    @property
    def has_batch_norm(self):
        return self.bn_scale is not None

    @classmethod
    def from_quantized(cls, quantized, index, *, bn_scale=None, bn_shift=None):
        """The parameters of layer ``index`` of a
        :class:`~nnrtl.gen.sbe.frommodel.QuantizedLSTM` (its
        :meth:`~nnrtl.gen.sbe.frommodel.QuantizedLSTM.interleaved` matrix and bias), with
        optional batch-norm codes."""
        matrix, bias = quantized.interleaved(index)
        return cls(matrix=matrix, bias=bias, bn_scale=bn_scale, bn_shift=bn_shift)

    def check(self, config, layer_index):
        """Raise ``ValueError`` unless these parameters fit layer ``layer_index`` of
        ``config``: shapes and codes inside ``config.formats``. Returns ``self``."""
        inputs, hidden = config.layer_sizes(layer_index)
        expected = (4 * hidden, inputs + hidden)
        if self.matrix.shape != expected:
            raise ValueError(f"layer {layer_index}: matrix must have shape {expected}, "
                             f"not {self.matrix.shape}")
        fmts = config.formats
        _check_codes(self.matrix, fmts.weight, "matrix")
        _check_codes(self.bias, fmts.acc, "bias")
        if self.has_batch_norm:
            _check_codes(self.bn_scale, fmts.cell, "bn_scale")
            _check_codes(self.bn_shift, fmts.acc, "bn_shift")
        return self


# -- Padding -------------------------------------------------------------------------------

def pad_columns(values, size):
    """``values`` (codes, last axis the vector) with zeros appended up to ``size``
    entries on the last axis."""
    values = np.asarray(values, dtype=np.int64)
    pad = size - values.shape[-1]
    if pad < 0:
        raise ValueError(f"cannot pad {values.shape[-1]} entries to {size}")
    return np.concatenate([values, np.zeros(values.shape[:-1] + (pad,), dtype=np.int64)],
                          axis=-1)


def pad_params(config, layer_index, params):
    """``params`` of layer ``layer_index`` of ``config`` (the model's sizes) on the padded
    shapes of ``config.padded``: zero rows for the padded units (weights, bias, batch-norm
    scale and shift all zero, so their pre-activations are 0) and zero columns for the
    padded x and h entries (so whatever a padded unit's h is, no true unit sees it).

    Notes
    -----
    A config whose ``input_size`` or ``hidden_size`` the RTL cannot run as they are, or whose
    layers have different hidden sizes (``config.hidden_sizes``: every layer runs padded to
    the largest, ``config.padded_hidden_size``)
    (:attr:`~nnrtl.hw.sbe.SbeConfig.is_padded`), runs the problem of ``config.padded``:
    :func:`pad_params` puts the model's rows first (unit ``j < H`` keeps rows ``4j + g``) and
    zeros in the padded units' rows (weights, bias, batch-norm scale and shift), and the
    model's x and h columns at their places in ``[x (padded In), h (padded H)]`` with zero
    columns between. A padded unit's pre-activations are 0, so it computes whatever the PWL
    tables give for 0 (not necessarily h = 0), but every column it feeds has zero weights:
    the model's units are exact. :func:`step`, :func:`run_layer`, :func:`run_model` and the
    stream functions take the model's sizes (layer ``l``: ``config.layer_sizes(l)``, its x the
    previous layer's h cut to that layer's model size), run the padded problem and cut the
    outputs back (:func:`unpack_outputs`); :func:`accumulate`, :func:`preactivation` and
    :func:`cell_update` work on the shapes the engine runs.
    """
    params.check(config, layer_index)
    if not config.is_padded:
        return params
    inputs, hidden = config.layer_sizes(layer_index)
    shape = config.layer(layer_index)
    rows = config.rows
    matrix = np.zeros((rows, shape.columns), dtype=np.int64)
    matrix[:4 * hidden, :inputs] = params.matrix[:, :inputs]
    matrix[:4 * hidden, shape.input_size:shape.input_size + hidden] = params.matrix[:, inputs:]
    extra = {}
    if params.has_batch_norm:
        extra = dict(bn_scale=pad_columns(params.bn_scale, rows),
                     bn_shift=pad_columns(params.bn_shift, rows))
    return LayerParams(matrix=matrix, bias=pad_columns(params.bias, rows), **extra)


# -- Arithmetic ----------------------------------------------------------------------------

class _ExactProduct:
    """``vectors @ matrix.T`` of integer codes, exact (int64): float64 BLAS while every
    partial sum is an integer below ``2**53``, int64 otherwise. The matrix is prepared
    once, for the many products of a sequence."""

    def __init__(self, matrix):
        self._matrix = matrix
        self._peak = int(np.max(np.abs(matrix))) if matrix.size else 0
        self._float = None

    def __call__(self, vectors):
        matrix = self._matrix
        if not matrix.size or not vectors.size:
            return np.zeros(vectors.shape[:-1] + matrix.shape[:1], dtype=np.int64)
        bound = self._peak * int(np.max(np.abs(vectors))) * matrix.shape[1]
        if bound < _EXACT_FLOAT:
            if self._float is None:
                self._float = np.ascontiguousarray(matrix.T, dtype=np.float64)
            return (vectors.astype(np.float64) @ self._float).astype(np.int64)
        assert bound < _EXACT_INT64
        return vectors @ matrix.T


def _wrap(exact, fmt):
    """Exact int64 sums wrapped to ``fmt`` (two's complement, as the accumulators do)."""
    if fmt.width <= 62:
        return fixed.overflow_codes(exact, fmt, fixed.Overflow.WRAP)
    wide = fixed.codes(exact, 64 + fmt.width)
    return fixed.overflow_codes(wide, fmt, fixed.Overflow.WRAP).astype(np.int64)


def _int64(values):
    return np.asarray(values).astype(np.int64)


def _vector(values, length, fmt, name):
    values = _codes_array(values, name, 1)
    if values.shape != (length,):
        raise ValueError(f"{name} must have shape ({length},), not {values.shape}")
    _check_codes(values, fmt, name)
    return values


def _state(values, config, fmt, name):
    if values is None:
        return np.zeros(config.hidden_size, dtype=np.int64)
    return _vector(values, config.hidden_size, fmt, name)


def _layer_index_of(config, params):
    """A layer index whose shape ``params`` fits (for :func:`step`, which has none)."""
    for shape in config.layer_shapes:
        if params.matrix.shape == (config.rows, shape.columns):
            return shape.index
    raise ValueError(f"matrix shape {params.matrix.shape} fits no layer of the config: "
                     f"expected {config.rows} rows and one of "
                     f"{sorted({s.columns for s in config.layer_shapes})} columns")


def _true_layer_index_of(config, params):
    """A layer index whose model sizes ``params`` fits."""
    for index in range(config.layers):
        inputs, hidden = config.layer_sizes(index)
        if params.matrix.shape == (4 * hidden, inputs + hidden):
            return index
    raise ValueError(f"matrix shape {params.matrix.shape} fits no layer of the config")


def accumulate(config, params, x, h_prev):
    """The accumulators of one step: ``wrap_acc_width(matrix @ concat(x, h_prev))``,
    codes of ``A`` (int64, ``4H``)."""
    fmts = config.formats
    index = _layer_index_of(config, params)
    params.check(config, index)
    inputs = config.layer(index).input_size
    x = _vector(x, inputs, fmts.vector, "x")
    h_prev = _vector(h_prev, config.hidden_size, fmts.vector, "h_prev")
    return _wrap(_ExactProduct(params.matrix)(np.concatenate([x, h_prev])), fmts.acc)


def _batch_norm_flag(config, params, batch_norm):
    batch_norm = config.batch_norm if batch_norm is None else batch_norm
    if not isinstance(batch_norm, (bool, np.bool_)):
        raise TypeError(f"batch_norm must be a bool or None, not {batch_norm!r}")
    batch_norm = bool(batch_norm)
    if batch_norm and not config.batch_norm:
        raise ValueError("batch_norm cannot be enabled: the config has no batch-norm unit "
                         "(config.batch_norm is False)")
    if batch_norm and not params.has_batch_norm:
        raise ValueError("batch_norm is enabled but the parameters have no bn_scale and "
                         "bn_shift")
    return batch_norm


def preactivation(config, params, acc, *, batch_norm=None):
    """Steps 1 and 2: ``z = add(acc, bias)``, then with batch norm ``add(mul(z, scale),
    shift)``; codes of ``A`` (int64, ``4H``). ``batch_norm`` defaults to
    ``config.batch_norm``."""
    fmts = config.formats
    batch_norm = _batch_norm_flag(config, params, batch_norm)
    A, E = fmts.acc, fmts.cell
    z = fixed.add(acc, params.bias, A, A, A)
    if batch_norm:
        z = fixed.add(fixed.mul(z, params.bn_scale, A, E, A), params.bn_shift, A, A, A)
    return _int64(z)


def cell_update(config, z, c_prev):
    """Steps 3 to 6 for every unit: the gates from the pre-activations ``z`` (``4H``
    codes of ``A``, interleaved), then ``c`` and ``h``.

    Returns
    -------
    h : ndarray of int64, shape (H,)
        Codes of ``V``.
    c : ndarray of int64, shape (H,)
        Codes of ``E``.
    """
    fmts = config.formats
    table = tables(config)
    E = fmts.cell
    z = np.asarray(z, dtype=np.int64).reshape(config.hidden_size, 4)
    i = evaluate(table.sigmoid, z[:, GATES.index("i")])
    u = evaluate(table.tanh, z[:, GATES.index("u")])
    f = evaluate(table.sigmoid, z[:, GATES.index("f")])
    o = evaluate(table.sigmoid, z[:, GATES.index("o")])
    c = _int64(fixed.add(fixed.mul(f, c_prev, E, E, E), fixed.mul(i, u, E, E, E), E, E, E))
    t = evaluate(table.cell_tanh, c)
    h = _int64(fixed.mul(o, t, E, E, fmts.vector))
    return h, c


def step(config, params, x, h_prev, c_prev, *, batch_norm=None):
    """One time step of one layer, exactly as the engine computes it.

    Parameters
    ----------
    config : SbeConfig
    params : LayerParams
    x : array of int, shape (In,)
        Codes of ``V``.
    h_prev : array of int, shape (H,)
        Codes of ``V``.
    c_prev : array of int, shape (H,)
        Codes of ``E``.
    batch_norm : bool, optional
        Whether the batch-norm unit is enabled; default ``config.batch_norm``.

    Returns
    -------
    (h, c) : int64 arrays of shape (H,)
        Codes of ``V`` and ``E``.

    Raises
    ------
    ValueError
        If a shape does not fit ``config``, a code is outside its format, or batch norm
        is enabled without a unit or parameters for it.
    """
    if config.is_padded:
        index = _true_layer_index_of(config, params)
        hidden = config.layer_sizes(index)[1]
        hw = config.padded
        h, c = step(hw, pad_params(config, index, params),
                    pad_columns(x, hw.layer(index).input_size),
                    pad_columns(h_prev, hw.hidden_size),
                    None if c_prev is None else pad_columns(c_prev, hw.hidden_size),
                    batch_norm=batch_norm)
        return h[:hidden], c[:hidden]
    c_prev = _state(c_prev, config, config.formats.cell, "c_prev")
    acc = accumulate(config, params, x, h_prev)
    return cell_update(config, preactivation(config, params, acc, batch_norm=batch_norm),
                       c_prev)


def run_layer(config, layer_index, params, xs, h0=None, c0=None, *, batch_norm=None):
    """Layer ``layer_index`` over a sequence: :func:`step` for ``t = 0 .. T-1``.

    The x part of every step's products is computed at once; each step adds its h part
    before the one wrap, which is :func:`step` exactly (wrapping is order independent).

    Parameters
    ----------
    xs : array of int, shape (T, In)
        Codes of ``V``.
    h0, c0 : array of int, shape (H,), optional
        Initial state (``V`` and ``E`` codes); zeros by default.
    batch_norm : bool, optional
        Default ``config.batch_norm``.

    Returns
    -------
    hs : ndarray of int64, shape (T, H)
        h at every step (``V``).
    c_last : ndarray of int64, shape (H,)
        The cell state after the last step (``E``; ``c0`` if ``T == 0``).
    """
    if config.is_padded:
        hw = config.padded
        xs = _codes_array(xs, "xs", 2)
        inputs, hidden = config.layer_sizes(layer_index)
        if xs.shape[1] != inputs:
            raise ValueError(f"xs must have shape (steps, {inputs}), not {xs.shape}")
        hs, c = run_layer(hw, layer_index, pad_params(config, layer_index, params),
                          pad_columns(xs, hw.layer(layer_index).input_size),
                          None if h0 is None else pad_columns(h0, hw.hidden_size),
                          None if c0 is None else pad_columns(c0, hw.hidden_size),
                          batch_norm=batch_norm)
        return hs[:, :hidden], c[:hidden]
    fmts = config.formats
    shape = config.layer(layer_index)
    params.check(config, layer_index)
    batch_norm = _batch_norm_flag(config, params, batch_norm)
    xs = _codes_array(xs, "xs", 2)
    if xs.shape[1] != shape.input_size:
        raise ValueError(f"xs must have shape (steps, {shape.input_size}), not {xs.shape}")
    _check_codes(xs, fmts.vector, "xs")
    h = _state(h0, config, fmts.vector, "h0")
    c = _state(c0, config, fmts.cell, "c0")
    x_part = _ExactProduct(params.matrix[:, :shape.input_size])(xs)
    h_part = _ExactProduct(params.matrix[:, shape.input_size:])
    hs = np.zeros((xs.shape[0], config.hidden_size), dtype=np.int64)
    for t in range(xs.shape[0]):
        acc = _wrap(x_part[t] + h_part(h), fmts.acc)
        z = preactivation(config, params, acc, batch_norm=batch_norm)
        h, c = cell_update(config, z, c)
        hs[t] = h
    return hs, c


def run_model(config, layers_params, xs, h0=None, c0=None, *, batch_norm=None, trace=None):
    """Stacked layers run one after another (:func:`run_layer`), as
    :func:`nnrtl.gen.models.forward` runs them in float64.

    Parameters
    ----------
    layers_params : sequence of LayerParams
        One per layer of ``config``.
    xs : array of int, shape (T, input_size)
        The first layer's x codes (``V``); layer ``l + 1`` reads layer ``l``'s h codes.
    h0, c0 : array of int, shape (layers, H), optional
        Initial states; zeros by default. With layers of different hidden sizes
        (``config.hidden_sizes``), a sequence of one array per layer.
    batch_norm : bool, optional
        Default ``config.batch_norm``.
    trace : dict, optional
        Filled with per-layer lists ``"x"`` (layer inputs), ``"h"`` (``T x H``) and
        ``"c"`` (the last cell state).

    Returns
    -------
    hs : ndarray of int64, shape (T, H)
        The last layer's h at every step.
    (h_n, c_n) : ndarrays of int64, shape (layers, H)
        Each layer's last h and c (with layers of different hidden sizes, tuples of one
        array per layer).
    """
    if len(layers_params) != config.layers:
        raise ValueError(f"layers_params must have {config.layers} entries "
                         f"(config.layers), not {len(layers_params)}")
    h_n, c_n = [], []
    for index, params in enumerate(layers_params):
        h_init = None if h0 is None else h0[index]
        c_init = None if c0 is None else c0[index]
        hs, c = run_layer(config, index, params, xs, h_init, c_init, batch_norm=batch_norm)
        if trace is not None:
            for key, value in (("x", _codes_array(xs, "xs", 2)), ("h", hs), ("c", c)):
                trace.setdefault(key, []).append(value)
        hidden = config.layer_sizes(index)[1]
        h_n.append(hs[-1] if len(hs) else np.zeros(hidden, dtype=np.int64)
                   if h_init is None else _vector(h_init, hidden, config.formats.vector, "h0"))
        c_n.append(c)
        xs = hs
    if len(set(config.layer_hidden_sizes)) > 1:
        return xs, (tuple(h_n), tuple(c_n))
    return xs, (np.stack(h_n), np.stack(c_n))

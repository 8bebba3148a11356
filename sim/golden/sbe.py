"""Bit-exact golden model of the SBE (:mod:`nnrtl.hw.sbe`) and its stream formats.

This module is the executable form of the contract between the SBE's RTL and its golden
model (``briefs/sbe_spec.md``, issue 4); everything here is derived from one
:class:`~nnrtl.hw.sbe.SBEConfig`. Symbols: ``H = hidden_size``, ``rows = 4H``, ``k =
config.columns_per_cycle``, ``P = config.passes``, ``RPP = config.rows_per_pass``, ``PP =
post_units``, ``Nt = bus_weights``, ``n_pe = pes``; per layer ``shape = config.layer(l)``:
``In = shape.input_size``, ``C = shape.columns`` (``In + H``), ``BC = shape.block_columns``,
``BS = BC // k``, ``F = shape.first_hidden_block``, ``HB = shape.hidden_blocks``, ``XT =
shape.x_columns_in_hidden_blocks``, ``Nb = config.blocks``. Row ``4 * j + g`` of the
interleaved matrix is unit ``j`` of gate ``g`` (gates i, u, f, o,
:data:`~nnrtl.hw.sbe.GATES`); its columns are ``[x_t (In), h_{t-1} (H)]``.

Number formats (:func:`formats`)
--------------------------------
``W = QFormat(operand_width, weight_frac)`` weights; ``V = QFormat(operand_width,
act_frac)`` x inputs and h; ``A = QFormat(acc_width, weight_frac + act_frac)``
accumulators, biases, BN shift; ``E = QFormat(acc_width, cell_frac)`` gate activations,
cell state, BN scale.

Arithmetic of one time step of one layer
----------------------------------------
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

Streams (AXI4-Stream; little-endian words: word ``n`` of a beat is bits ``[n*w, (n+1)*w)``)
-------------------------------------------------------------------------------------------
One *run* is one layer ``l`` over ``T`` steps. Batches (:func:`batches`): steps ``t0 = 0,
B, 2B, ...``, batch size ``n = min(B, T - t0)``. Word arrays here hold *unsigned* codes
(two's complement masked to the word width), one row per beat; :func:`pack_beat` turns a
row into the integer a testbench drives, :func:`unpack_beat` the reverse.

``s_weights`` (:func:`weight_beats`), ``Nt`` words of ``operand_width`` bits per beat:

1. Header: for unit ``j = 0 .. H-1``: ``bias_i, bias_u, bias_f, bias_o`` and, if
   ``config.batch_norm``, ``scale_i .. scale_o, shift_i .. shift_o``: one value per beat,
   its ``acc_width``-bit two's complement code in the low ``acc_width`` bits, the upper
   bits zero. ``H * (12 if batch_norm else 4)`` beats.
2. Blocks in consumption order (:func:`block_schedule`): if ``config.weights_resident``
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

Accuracy against PyTorch
------------------------
Measured by ``tests/golden/test_sbe_golden.py``: ``torch.nn.LSTM`` (float64, default
initialisation) of 1 and 2 layers with input/hidden sizes 12/10, 40/24 and 16/32 (2
layers), inputs uniform in ``[-1, 1]``, quantized by
:func:`nnrtl.gen.sbe.quantize.quantize_model` (16-bit operands, 32-bit accumulators,
calibrated on the same inputs), 10, 30 and 50 steps, 3 seeds each:

===============  ===========================  ================  =================
``margin_bits``  fraction bits W, V, E; A     golden vs torch   float64, dequant.
===============  ===========================  ================  =================
0                15, 15, 30; A in [-2, 2)     2.7e-4 (<= 6e-4)  4.4e-5 (<= 1e-4)
2                13, 13, 28; A in [-32, 32)   1.1e-3 (<= 2e-3)  1.7e-4 (<= 4e-4)
===============  ===========================  ================  =================

(``max |h - torch|`` over every step, unit and case; the bound the test asserts in
brackets.) The float64 LSTM with the dequantized weights shows the weight quantization's
share; the rest, almost all of it, is the fixed-point post-processing, mostly the
piecewise-linear activations (3.9e-4 for the sigmoid over ``[-8, 8)`` and 7.6e-4 for tanh
over ``[-4, 4)`` at 64 segments). With ``margin_bits=0`` the quantizer fits ``A`` to the
largest calibration pre-activation (below 2 here), so the tables span only ``[-2, 2)``
(their range is capped to ``A``'s) with finer segments; a pre-activation beyond the
calibration's would saturate there (sigmoid(2) = 0.88). Batch norm: the
pre-activation is within half an ``A`` LSB of ``(acc + bias) * scale + shift`` (one
rounding), and one step's c and h within 8.2e-4 and 1.2e-3 of the float formula.
"""

import dataclasses
import functools
import math
from typing import NamedTuple

import numpy as np

from nnrtl.hw.arith.fixed import QFormat
from nnrtl.hw.arith.pwl import PWLTable, pwl_table
from nnrtl.hw.sbe.config import GATES

from . import fixed
from .pwl import evaluate

__all__ = ["Formats", "formats", "Tables", "tables", "LayerParams", "random_layer",
           "random_inputs", "accumulate", "preactivation", "cell_update", "step",
           "run_layer", "run_model", "batches", "block_schedule", "weight_beats",
           "input_beats", "output_beats", "output_last", "unpack_outputs", "pack_beat",
           "unpack_beat", "beat_counts", "MAX_MODELLED_ACC_WIDTH"]

#: Widest accumulator the model evaluates (:func:`nnrtl.sim.golden.pwl.evaluate` keeps
#: input codes of at most 61 bits in int64).
MAX_MODELLED_ACC_WIDTH = 61

_EXACT_FLOAT = 1 << 53          # integers below this are exact in float64
_EXACT_INT64 = 1 << 63


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# -- Formats and tables --------------------------------------------------------------------

class Formats(NamedTuple):
    """The four number formats of an engine (:func:`formats`).

    Attributes
    ----------
    weight : QFormat
        ``W``: weights, ``operand_width`` bits, ``weight_frac`` fraction bits.
    vector : QFormat
        ``V``: x inputs and h, ``operand_width`` bits, ``act_frac`` fraction bits.
    acc : QFormat
        ``A``: accumulators, biases and BN shifts, ``acc_width`` bits,
        ``weight_frac + act_frac`` fraction bits.
    cell : QFormat
        ``E``: gate activations, cell state and BN scales, ``acc_width`` bits,
        ``cell_frac`` fraction bits.
    """

    weight: QFormat
    vector: QFormat
    acc: QFormat
    cell: QFormat


def formats(config):
    """The :class:`Formats` of ``config`` (an :class:`~nnrtl.hw.sbe.SBEConfig`)."""
    return Formats(weight=QFormat(config.operand_width, config.weight_frac),
                   vector=QFormat(config.operand_width, config.act_frac),
                   acc=QFormat(config.acc_width, config.acc_frac),
                   cell=QFormat(config.acc_width, config.cell_frac))


class Tables(NamedTuple):
    """The post-processing units' piecewise-linear tables (:func:`tables`).

    Attributes
    ----------
    sigmoid : PWLTable
        ``SIG``: sigmoid, ``A`` -> ``E`` (gates i, f, o).
    tanh : PWLTable
        ``TANH_A``: tanh, ``A`` -> ``E`` (the cell candidate u).
    cell_tanh : PWLTable
        ``TANH_E``: tanh, ``E`` -> ``E`` (of the cell state).
    """

    sigmoid: PWLTable
    tanh: PWLTable
    cell_tanh: PWLTable


@functools.lru_cache(maxsize=64)
def _tables(fmts):
    return Tables(sigmoid=pwl_table("sigmoid", fmts.acc, fmts.cell),
                  tanh=pwl_table("tanh", fmts.acc, fmts.cell),
                  cell_tanh=pwl_table("tanh", fmts.cell, fmts.cell))


def tables(config):
    """The :class:`Tables` of ``config``, each :func:`~nnrtl.hw.arith.pwl.pwl_table` with
    its defaults (64 segments); computed once per set of :func:`formats`.

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
    return _tables(formats(config))


# -- Parameters and random data ------------------------------------------------------------

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
        :class:`~nnrtl.gen.sbe.quantize.QuantizedLSTM` (its
        :meth:`~nnrtl.gen.sbe.quantize.QuantizedLSTM.interleaved` matrix and bias), with
        optional batch-norm codes."""
        matrix, bias = quantized.interleaved(index)
        return cls(matrix=matrix, bias=bias, bn_scale=bn_scale, bn_shift=bn_shift)

    def check(self, config, layer_index):
        """Raise ``ValueError`` unless these parameters fit layer ``layer_index`` of
        ``config``: shapes and codes inside :func:`formats`. Returns ``self``."""
        shape = config.layer(layer_index)
        expected = (config.rows, shape.columns)
        if self.matrix.shape != expected:
            raise ValueError(f"layer {layer_index}: matrix must have shape {expected}, "
                             f"not {self.matrix.shape}")
        fmts = formats(config)
        _check_codes(self.matrix, fmts.weight, "matrix")
        _check_codes(self.bias, fmts.acc, "bias")
        if self.has_batch_norm:
            _check_codes(self.bn_scale, fmts.cell, "bn_scale")
            _check_codes(self.bn_shift, fmts.acc, "bn_shift")
        return self


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
    config : SBEConfig
    layer_index : int
    rng : numpy.random.Generator
    scale : float
        Fraction of the weight range, before the ``1 / sqrt(C)``.
    batch_norm : bool, optional
    """
    shape = config.layer(layer_index)
    fmts = formats(config)
    rows = config.rows
    limit = max(1, min(fmts.weight.max_code,
                       round(scale * fmts.weight.max_code / math.sqrt(shape.columns))))
    matrix = rng.integers(-limit, limit, size=(rows, shape.columns), endpoint=True,
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
    vector = formats(config).vector
    size = (steps, config.layer(layer_index).input_size)
    return rng.integers(vector.min_code // 2, vector.max_code // 2, size=size,
                        endpoint=True, dtype=np.int64)


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


def accumulate(config, params, x, h_prev):
    """The accumulators of one step: ``wrap_acc_width(matrix @ concat(x, h_prev))``,
    codes of ``A`` (int64, ``4H``)."""
    fmts = formats(config)
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
    fmts = formats(config)
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
    fmts = formats(config)
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
    config : SBEConfig
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
    c_prev = _state(c_prev, config, formats(config).cell, "c_prev")
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
    fmts = formats(config)
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
    :func:`nnrtl.gen.sbe.importers.lstm_forward` runs them in float64.

    Parameters
    ----------
    layers_params : sequence of LayerParams
        One per layer of ``config``.
    xs : array of int, shape (T, input_size)
        The first layer's x codes (``V``); layer ``l + 1`` reads layer ``l``'s h codes.
    h0, c0 : array of int, shape (layers, H), optional
        Initial states; zeros by default.
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
        Each layer's last h and c.
    """
    if len(layers_params) != config.layers:
        raise ValueError(f"layers_params must have {config.layers} entries "
                         f"(config.layers), not {len(layers_params)}")
    h_n, c_n = [], []
    for index, params in enumerate(layers_params):
        h_init = None if h0 is None else np.asarray(h0)[index]
        c_init = None if c0 is None else np.asarray(c0)[index]
        hs, c = run_layer(config, index, params, xs, h_init, c_init, batch_norm=batch_norm)
        if trace is not None:
            for key, value in (("x", _codes_array(xs, "xs", 2)), ("h", hs), ("c", c)):
                trace.setdefault(key, []).append(value)
        h_n.append(hs[-1] if len(hs) else _state(h_init, config, formats(config).vector,
                                                 "h0"))
        c_n.append(c)
        xs = hs
    return xs, (np.stack(h_n), np.stack(c_n))


# -- Streams -------------------------------------------------------------------------------

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
    """``[(t0, n), ...]``: the batches of a run of ``steps`` steps, ``t0 = 0, B, 2B, ...``
    and ``n = min(B, steps - t0)``."""
    _check_steps(steps)
    return [(t0, min(config.batch, steps - t0)) for t0 in range(0, steps, config.batch)]


def block_schedule(config, layer_index, steps):
    """Block numbers in the order ``s_weights`` sends them for one run of layer
    ``layer_index`` over ``steps`` steps (header not included)."""
    shape = config.layer(layer_index)
    _check_steps(steps)
    everything = list(range(config.blocks))
    if config.weights_resident:
        return everything
    x_blocks = everything[:shape.first_hidden_block]
    h_blocks = everything[shape.first_hidden_block:]
    order = []
    for _, n in batches(config, steps):
        order += x_blocks + h_blocks * (1 if shape.hidden_blocks <= 2 else n)
    return order


def _header_words(config, params):
    """The header's beats as ``H * (12 or 4)`` rows of ``Nt`` words."""
    fmts = formats(config)
    rows = config.rows
    groups = [params.bias.reshape(-1, 4)]
    if config.batch_norm:
        if params.has_batch_norm:
            scale, shift = params.bn_scale, params.bn_shift
        else:  # the unit exists but the layer has none: the identity
            scale = np.full(rows, 1 << fmts.cell.fraction_bits, dtype=np.int64)
            shift = np.zeros(rows, dtype=np.int64)
        groups += [scale.reshape(-1, 4), shift.reshape(-1, 4)]
    values = np.concatenate(groups, axis=1).reshape(-1)    # unit-major, 4 or 12 per unit
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
    shape = config.layer(layer_index)
    xs = _codes_array(xs, "xs", 2)
    if xs.shape[1] != shape.input_size:
        raise ValueError(f"xs must have shape (steps, {shape.input_size}), not {xs.shape}")
    _check_codes(xs, formats(config).vector, "xs")
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
    words, ``H / PP`` beats per step."""
    hs = _codes_array(hs, "hs", 2)
    if hs.shape[1] != config.hidden_size:
        raise ValueError(f"hs must have shape (steps, {config.hidden_size}), "
                         f"not {hs.shape}")
    _check_codes(hs, formats(config).vector, "hs")
    return _unsigned(hs, config.operand_width).reshape(-1, config.post_units)


def output_last(config, steps):
    """``tlast`` of each ``m_axis`` beat of a run of ``steps`` steps (bool array)."""
    _check_steps(steps)
    per_step = config.hidden_size // config.post_units
    return np.arange(steps * per_step) % per_step == per_step - 1


def unpack_outputs(config, words):
    """The inverse of :func:`output_beats`: ``T x H`` signed h codes from rows of ``PP``
    words (unsigned or signed)."""
    words = _codes_array(words, "words", 2)
    per_step = config.hidden_size // config.post_units
    if words.shape[1] != config.post_units or words.shape[0] % per_step:
        raise ValueError(f"words must have shape (steps * {per_step}, "
                         f"{config.post_units}), not {words.shape}")
    return _signed(words, config.operand_width).reshape(-1, config.hidden_size)


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
        ``header`` (``H * (12 if batch_norm else 4)``), ``weights`` (the blocks: ``rows *
        BC / Nt`` beats per block sent, header excluded), ``inputs`` (``T * In / k``),
        ``outputs`` (``T * H / PP``).
    """
    shape = config.layer(layer_index)
    _check_steps(steps)
    per_block = config.rows * shape.block_columns // config.bus_weights
    if config.weights_resident:
        blocks = config.blocks
    else:
        runs = -(-steps // config.batch)
        h_sends = runs if shape.hidden_blocks <= 2 else steps
        blocks = runs * shape.first_hidden_block + h_sends * shape.hidden_blocks
    return dict(header=config.hidden_size * (12 if config.batch_norm else 4),
                weights=blocks * per_block,
                inputs=steps * shape.input_size // config.columns_per_cycle,
                outputs=steps * config.hidden_size // config.post_units)

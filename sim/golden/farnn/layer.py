"""Bit-exact model of one layer's FW and BW pass on the FARNN FPGA part, over ``T`` steps
and a batch of ``B`` sequences, on fp32 bit patterns (``uint32``).

Every operation is one rounding (round to nearest, ties to even) through the goldens of
the units the RTL is built of: ``fa`` = :func:`~nnrtl.sim.golden.float.float_add`,
``fm`` = :func:`~nnrtl.sim.golden.float.float_mul`, ``sig`` / ``tanh`` = the PWL table
units (:mod:`nnrtl.sim.golden.activation`, default fp32 tables), ``sig'(s) = s * (1 -
s)`` and ``tanh'(t) = 1 - t * t`` the derivative units, ``mvm`` = the PE MAC with cell
splitting (:func:`~nnrtl.sim.golden.farnn.rmvm.unit_mvm`), ``fold(a, b, c, ...)`` =
``((a + b) + c) + ...``, ``-x`` a sign flip (exact). One step's cell arithmetic (the
FW and BW lines below but the MVMs and folds) is :mod:`.cells`'s, called here. Gate
order: LSTM (i, f, g, o), GRU (r, z, n); unit ``k`` holds gate ``k``. The recurrent
state starts at +0 (h, c in FW; the recurrent deltas in BW). ``imvm`` is the host's input
MVM with its biases: ``W_k x + bW_k + bR_k`` for the LSTM gates and GRU r, z; ``W_n x +
bW_n`` for GRU n.
"""

import dataclasses

import numpy as np

from nnrtl.hw.farnn.config import GATES

from . import cells
from .rmvm import fold, fp32_add, unit_mvm

__all__ = ["LayerWeights", "ForwardResult", "BackwardResult", "forward", "backward",
           "to_bits", "from_bits"]


def to_bits(values):
    """fp32 bit patterns of ``values`` (rounded to float32 by numpy: nearest, even)."""
    return np.ascontiguousarray(np.asarray(values, dtype=np.float32)).view(np.uint32)


def from_bits(bits):
    """float32 values of fp32 bit patterns."""
    return np.ascontiguousarray(np.asarray(bits, dtype=np.uint32)).view(np.float32)


@dataclasses.dataclass(frozen=True, eq=False)
class LayerWeights:
    """What the FPGA holds of one layer, fp32 bit patterns.

    Attributes
    ----------
    recurrent : ndarray, shape (units, H, recurrent_size)
        ``R_k`` per gate (PyTorch's ``weight_hh`` cut into gate blocks), FW.
    recurrent_t : ndarray, shape (units, recurrent_size, H)
        ``R_k^T`` as the host transposes it, BW.
    bias_n : ndarray, shape (H,)
        GRU's ``bR_n`` (``bias_hh``'s n block; zeros without biases); None for LSTM.
    projection, projection_t : ndarray, shapes (P, H) and (H, P), or None
        ``W_hr`` and its transpose.
    """

    recurrent: np.ndarray
    recurrent_t: np.ndarray
    bias_n: np.ndarray = None
    projection: np.ndarray = None
    projection_t: np.ndarray = None

    @classmethod
    def from_arrays(cls, config, weight_hh, bias_hh=None, weight_hr=None):
        """From PyTorch-layout float arrays (``weight_hh`` ``units*H x recurrent_size``,
        ``bias_hh`` ``units*H``, ``weight_hr`` ``P x H``), rounded to fp32."""
        units, hidden = config.units, config.hidden_size
        recurrent = to_bits(weight_hh).reshape(units, hidden, config.recurrent_size)
        bias_n = None
        if config.cell == "gru":
            bias_n = (np.zeros(hidden, np.uint32) if bias_hh is None
                      else to_bits(bias_hh)[2 * hidden:])
        projection = None if weight_hr is None else to_bits(weight_hr)
        return cls(recurrent=recurrent,
                   recurrent_t=np.ascontiguousarray(recurrent.transpose(0, 2, 1)),
                   bias_n=bias_n, projection=projection,
                   projection_t=None if projection is None
                   else np.ascontiguousarray(projection.T))


@dataclasses.dataclass(frozen=True, eq=False)
class ForwardResult:
    """A FW pass, arrays ``T x B x ...`` of fp32 patterns.

    Attributes
    ----------
    h : (T, B, H) hidden state.
    y : (T, B, recurrent_size) output: ``h``, or ``r = W_hr h`` with a projection.
    c : (T, B, H) cell state (LSTM; None for GRU).
    saved : dict of (T, B, H)
        The save stream: LSTM ``i, f, g, o, c``; GRU ``r, z, n, hn``.
    """

    h: np.ndarray
    y: np.ndarray
    c: np.ndarray
    saved: dict


@dataclasses.dataclass(frozen=True, eq=False)
class BackwardResult:
    """A BW pass, arrays ``T x B x ...`` of fp32 patterns (index ``t`` = step ``t``).

    Attributes
    ----------
    d_input : (T, B, units, H) the W side's gate deltas ``d*_t``.
    d_recurrent : (T, B, units, H) the R side's (differs from ``d_input`` in GRU's n).
    dv_prev : (T, B, recurrent_size) the recurrent delta step ``t`` hands to ``t - 1``
        (``dh_{t-1}``, or ``dr_{t-1}`` with a projection).
    dc_prev : (T, B, H) ``dc_{t-1}`` (LSTM; None for GRU).
    dr_hat : (T, B, P) the projection's output delta ``dr^_t`` (None without one).
    """

    d_input: np.ndarray
    d_recurrent: np.ndarray
    dv_prev: np.ndarray
    dc_prev: np.ndarray
    dr_hat: np.ndarray


def _mvm(config, name, weights, x, per_group):
    return unit_mvm(config.matrix(name), weights, x, per_group=per_group,
                    adder_stages=config.adder_stages,
                    multiplier_stages=config.multiplier_stages)


def _check_shape(name, array, shape):
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, not {array.shape}")


def forward(config, weights, imvm_bits):
    """One layer's FW pass (notation: the module docstring; equations: Notes).

    Parameters
    ----------
    config : FarnnConfig
    weights : LayerWeights
    imvm_bits : array_like of uint32, shape (T, B, units, H)
        The host's input MVM with biases, per step, vector and gate.

    Returns
    -------
    ForwardResult

    Notes
    -----
    FW (the contract of :mod:`nnrtl.hw.farnn`), per step ``t``, with ``v`` the recurrent vector (``h_{t-1}``, or
    ``r_{t-1}`` with a projection)::

        LSTM  a_k = fa(imvm_k, mvm(R_k, v));  i = sig(a_i); f = sig(a_f); g = tanh(a_g);
              o = sig(a_o);  c = fa(fm(f, c_prev), fm(i, g));  h = fm(o, tanh(c))
              projection: r = mvm(W_hr, h)  (the output and the next step's v)
              saved: i, f, g, o, c
        GRU   r = sig(fa(imvm_r, mvm(R_r, v)));  z = sig(fa(imvm_z, mvm(R_z, v)));
              hn = fa(mvm(R_n, v), bR_n);  n = tanh(fa(imvm_n, fm(r, hn)));
              h = fa(fm(fa(1, -z), n), fm(z, h_prev))
              saved: r, z, n, hn   (bR_n is +0 for a layer without biases: always added)
    """
    imvm = np.asarray(imvm_bits, dtype=np.uint32)
    steps, batch = imvm.shape[:2]
    hidden, units, recurrent = config.hidden_size, config.units, config.recurrent_size
    _check_shape("imvm_bits", imvm, (steps, batch, units, hidden))
    lstm = config.cell == "lstm"
    h_all = np.zeros((steps, batch, hidden), np.uint32)
    y_all = np.zeros((steps, batch, recurrent), np.uint32)
    names = cells.SAVED[config.cell]
    saved = {name: np.zeros((steps, batch, hidden), np.uint32) for name in names}
    v = np.zeros((batch, recurrent), np.uint32)
    c = h = np.zeros((batch, hidden), np.uint32)
    for t in range(steps):
        rm = _mvm(config, "recurrent", weights.recurrent, v, False)   # (B, units, H)
        if lstm:
            h, c, values = cells.lstm_forward(imvm[t], rm, c, axis=1)
        else:
            h, values = cells.gru_forward(imvm[t], rm, weights.bias_n, h, axis=1)
        for name in names:
            saved[name][t] = values[name]
        v = h
        if config.proj_size:
            v = _mvm(config, "projection", weights.projection[None], h, False)[:, 0]
        h_all[t], y_all[t] = h, v
    return ForwardResult(h=h_all, y=y_all, c=saved["c"] if lstm else None, saved=saved)


def backward(config, weights, fw, dy_bits):
    """One layer's BW pass from its FW pass ``fw`` (notation: the module docstring;
    equations: Notes).

    Parameters
    ----------
    config : FarnnConfig
    weights : LayerWeights
    fw : ForwardResult
    dy_bits : array_like of uint32, shape (T, B, recurrent_size)
        The host's delta of the layer's output at every step.

    Returns
    -------
    BackwardResult

    Notes
    -----
    BW per step ``t = T-1 .. 0``; ``dy`` the host's delta of the output, ``dv`` the recurrent
    delta from step ``t + 1`` (+0 at ``T - 1``); each unit's ``R_k^T`` is the host's
    transposed copy. LSTM (the contract)::

        dh^ = fa(dv, dy)                      [with a projection: see below]
        tc = tanh(c);  dc^ = fa(dc, fm(fm(tanh'(tc), o), dh^))
        do* = fm(sig'(o), fm(tc, dh^));       dg* = fm(tanh'(g), fm(i, dc^))
        di* = fm(sig'(i), fm(g, dc^));        df* = fm(sig'(f), fm(c_prev, dc^))
        dc_prev = fm(f, dc^)
        dv_prev = fold(mvm(R_i^T, di*), mvm(R_f^T, df*), mvm(R_g^T, dg*), mvm(R_o^T, do*))

    LSTM with a projection (``r = W_hr h`` is the output and the recurrent vector; decision of
    this model, the RTL's contract)::

        dr^ = fa(dv, dy)                      (P elements; sent to the host for dW_hr)
        dh^ = mvm(W_hr^T, dr^)                (no further addition: dy enters at dr^)
        ... then the LSTM lines above from tc on, dv_prev of length P (R_k^T is P x H).

    GRU (decision of this model, the RTL's contract; the BW reads ``h_{t-1}`` back with the
    saved gates: it is the FW output of step ``t - 1``, +0 for ``t = 0``)::

        dh^ = fa(dv, dy);  omz = fa(1, -z)
        dn* = fm(tanh'(n), fm(omz, dh^))
        dz* = fm(sig'(z), fm(fa(h_prev, -n), dh^))
        dhn = fm(r, dn*)                      (the R side's delta of n: R_n multiplies before r)
        dr* = fm(sig'(r), fm(hn, dn*))
        dv_prev = fa(fold(mvm(R_r^T, dr*), mvm(R_z^T, dz*), mvm(R_n^T, dhn)), fm(z, dh^))

    Out to the host: the W side's deltas (LSTM di*, df*, dg*, do*; GRU dr*, dz*, dn*) and the
    R side's (the same, but ``dhn`` for GRU n): ``dW_k = sum_t dW-side_k x_t``, ``dbW_k`` their
    sum, ``dR_k = sum_t dR-side_k v_{t-1}``, ``dbR_k`` their sum; with a projection also
    ``dr^`` for ``dW_hr = sum_t dr^_t h_t`` (so the FW sends ``h_t`` as well as ``r_t``).
    """
    dy = np.asarray(dy_bits, dtype=np.uint32)
    steps, batch = fw.h.shape[:2]
    hidden, units, recurrent = config.hidden_size, config.units, config.recurrent_size
    _check_shape("dy_bits", dy, (steps, batch, recurrent))
    lstm = config.cell == "lstm"
    d_input = np.zeros((steps, batch, units, hidden), np.uint32)
    d_recurrent = np.zeros_like(d_input)
    dv_prev = np.zeros((steps, batch, recurrent), np.uint32)
    dc_prev = np.zeros((steps, batch, hidden), np.uint32) if lstm else None
    dr_hat = np.zeros((steps, batch, recurrent), np.uint32) if config.proj_size else None
    zero = np.zeros((batch, hidden), np.uint32)
    dv = np.zeros((batch, recurrent), np.uint32)
    dc = zero
    gates = GATES[config.cell]
    for t in reversed(range(steps)):
        saved = {name: values[t] for name, values in fw.saved.items()}
        dy_t = dy[t]
        if config.proj_size:
            dr_hat[t] = fp32_add(dv, dy[t])
            dv = _mvm(config, "projection_t", weights.projection_t[None], dr_hat[t],
                      False)[:, 0]
            dy_t = None            # dy entered at dr^
        if lstm:
            c_prev = fw.saved["c"][t - 1] if t else zero
            d, dc = cells.lstm_backward(saved, c_prev, dv, dy_t, dc)
            dc_prev[t] = dc
            d_input[t] = d_recurrent[t] = np.stack([d[k] for k in gates], axis=1)
            direct = []
        else:
            h_prev = fw.h[t - 1] if t else zero
            d_in, d_rec, direct = cells.gru_backward(saved, h_prev, dv, dy_t)
            d_input[t] = np.stack([d_in[k] for k in gates], axis=1)
            d_recurrent[t] = np.stack([d_rec[k] for k in gates], axis=1)
            direct = [direct]
        u = _mvm(config, "recurrent_t", weights.recurrent_t, d_recurrent[t], True)
        dv = fold([u[:, k] for k in range(units)] + direct)
        dv_prev[t] = dv
    return BackwardResult(d_input=d_input, d_recurrent=d_recurrent, dv_prev=dv_prev,
                          dc_prev=dc_prev, dr_hat=dr_hat)

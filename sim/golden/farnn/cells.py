"""Bit-exact models of the FARNN activation units (:mod:`nnrtl.hw.farnn.activation`): one
LSTM or GRU cell's FW and BW arithmetic, elementwise on fp32 bit patterns (``uint32``
arrays of any shape, broadcast against each other).

The equations and their operation order are those of :mod:`nnrtl.sim.golden.farnn.layer`
(the contract of :mod:`nnrtl.hw.farnn`), written out per operation so that the
RTL can follow them unit by unit: ``fa`` = :func:`~nnrtl.sim.golden.float.float_add`,
``fm`` = :func:`~nnrtl.sim.golden.float.float_mul`, ``sig`` / ``tanh`` the PWL table units
(:func:`nnrtl.sim.golden.activation.evaluate` on the default fp32 tables), ``sig'(s) = s *
(1 - s)`` and ``tanh'(t) = 1 - t * t`` the derivative units, ``-x`` a sign flip (exact;
the RTL's adder does ``fa(a, -b)`` with its ``subtract`` bit, the same bits). Every
operation rounds once to nearest even, subnormals kept.

FW (``imvm`` the host's input MVM with its biases, ``rmvm`` the FPGA's recurrent MVM)::

    LSTM  a_k = fa(imvm_k, rmvm_k)  (k = i, f, g, o)
          i = sig(a_i); f = sig(a_f); g = tanh(a_g); o = sig(a_o)
          c = fa(fm(f, c_prev), fm(i, g));  h = fm(o, tanh(c))       saved: i, f, g, o, c
    GRU   r = sig(fa(imvm_r, rmvm_r));  z = sig(fa(imvm_z, rmvm_z))
          hn = fa(rmvm_n, bR_n);  n = tanh(fa(imvm_n, fm(r, hn)))
          h = fa(fm(fa(1, -z), n), fm(z, h_prev))                    saved: r, z, n, hn

BW (``dh`` the recurrent delta, the fold of the units' ``R_k^T`` products; ``dy`` the
host's delta of the output)::

    LSTM  dh^ = fa(dh, dy);  tc = tanh(c)
          dc^ = fa(dc, fm(fm(tanh'(tc), o), dh^))
          do* = fm(sig'(o), fm(tc, dh^));   dg* = fm(tanh'(g), fm(i, dc^))
          di* = fm(sig'(i), fm(g, dc^));    df* = fm(sig'(f), fm(c_prev, dc^))
          dc_prev = fm(f, dc^)
    GRU   dh^ = fa(dh, dy);  omz = fa(1, -z)
          dn* = fm(tanh'(n), fm(omz, dh^));  dz* = fm(sig'(z), fm(fa(h_prev, -n), dh^))
          dhn = fm(r, dn*);  dr* = fm(sig'(r), fm(hn, dn*))
          direct = fm(z, dh^)    (added to the fold of the R_k^T products: dh_prev)

With a projection the LSTM's ``dh^`` is the projection's ``W_hr^T dr^`` and no ``dy`` is
added (``dy=None`` here). The RTL always adds: its top feeds ``dy = -0``, for which
``fa(x, -0) = x`` bit for bit for every ``x`` but a non-canonical NaN (which no float unit
produces).
"""

import functools

import numpy as np

from nnrtl.hw.arith.activation import activation_table
from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.farnn.activation import SAVED
from nnrtl.hw.farnn.config import GATES

from .. import activation
from ..float import float_add, float_mul

__all__ = ["SAVED", "NEGATIVE_ZERO", "lstm_forward", "gru_forward", "lstm_backward",
           "gru_backward"]

#: fp32 ``-0``: ``fa(x, -0) = x`` (the ``dy`` the RTL's top feeds with a projection).
NEGATIVE_ZERO = np.uint32(0x80000000)

_SIGN = np.uint32(0x80000000)
_ONE = np.uint32(0x3F800000)


@functools.cache
def _table(function):
    return activation_table(function, FP32)


def _bits(value):
    return np.asarray(value, dtype=np.uint32)


def _fa(a, b):
    return float_add(FP32, a, b)


def _fm(a, b):
    return float_mul(FP32, a, b)


def _sig(x):
    return activation.evaluate(_table("sigmoid"), x).astype(np.uint32)


def _tanh(x):
    return activation.evaluate(_table("tanh"), x).astype(np.uint32)


def _dsig(s):
    return activation.sigmoid_derivative(FP32, s)


def _dtanh(t):
    return activation.tanh_derivative(FP32, t)


def _gates(name, values, cell, axis):
    """The per-gate arrays of ``values`` along ``axis``, checked for their count."""
    values = _bits(values)
    units = len(GATES[cell])
    if values.ndim == 0 or values.shape[axis] != units:
        raise ValueError(f"{name} must have {units} gates ({', '.join(GATES[cell])}) along "
                         f"axis {axis}, not shape {values.shape}")
    return [np.take(values, k, axis=axis) for k in range(units)]


def _saved(name, saved, cell):
    missing = [key for key in SAVED[cell] if key not in saved]
    if missing:
        raise ValueError(f"{name} must hold {', '.join(SAVED[cell])}; missing "
                         f"{', '.join(missing)}")
    return [_bits(saved[key]) for key in SAVED[cell]]


def lstm_forward(imvm, rmvm, c_prev, *, axis=0):
    """One LSTM cell's FW activation (module docstring).

    Parameters
    ----------
    imvm, rmvm : array_like of uint32
        The host's input MVM (with ``bW + bR``) and the recurrent MVM, the four gates
        (i, f, g, o) along ``axis``.
    c_prev : array_like of uint32
        The cell state of the previous step (broadcast against one gate's array).
    axis : int
        The gate axis of ``imvm`` and ``rmvm``.

    Returns
    -------
    h, c : ndarray of uint32
    saved : dict of ndarray
        ``i, f, g, o, c`` (:data:`SAVED`).
    """
    a = [_fa(x, y) for x, y in zip(_gates("imvm", imvm, "lstm", axis),
                                   _gates("rmvm", rmvm, "lstm", axis))]
    i, f, g, o = _sig(a[0]), _sig(a[1]), _tanh(a[2]), _sig(a[3])
    c = _fa(_fm(f, _bits(c_prev)), _fm(i, g))
    h = _fm(o, _tanh(c))
    return h, c, dict(i=i, f=f, g=g, o=o, c=c)


def gru_forward(imvm, rmvm, b_rn, h_prev, *, axis=0):
    """One GRU cell's FW activation, PyTorch's ``nn.GRU`` form (module docstring).

    Parameters
    ----------
    imvm : array_like of uint32
        The host's input MVM, gates (r, z, n) along ``axis``: ``W x + bW + bR`` for r and
        z, ``W_n x + bW_n`` for n.
    rmvm : array_like of uint32
        The recurrent MVM ``R_k h_prev``, gates along ``axis``.
    b_rn : array_like of uint32
        ``bR_n``, added to ``R_n h_prev`` before the reset gate.
    h_prev : array_like of uint32
    axis : int

    Returns
    -------
    h : ndarray of uint32
    saved : dict of ndarray
        ``r, z, n, hn`` (:data:`SAVED`).
    """
    xr, xz, xn = _gates("imvm", imvm, "gru", axis)
    mr, mz, mn = _gates("rmvm", rmvm, "gru", axis)
    r = _sig(_fa(xr, mr))
    z = _sig(_fa(xz, mz))
    hn = _fa(mn, _bits(b_rn))
    n = _tanh(_fa(xn, _fm(r, hn)))
    h = _fa(_fm(_fa(_ONE, z ^ _SIGN), n), _fm(z, _bits(h_prev)))
    return h, dict(r=r, z=z, n=n, hn=hn)


def _dh_hat(dh, dy):
    return _bits(dh) if dy is None else _fa(_bits(dh), _bits(dy))


def lstm_backward(saved, c_prev, dh, dy, dc):
    """One LSTM cell's BW activation (module docstring).

    Parameters
    ----------
    saved : mapping
        ``i, f, g, o, c`` of the step, as :func:`lstm_forward` returns them.
    c_prev : array_like of uint32
        The cell state of the step before (+0 at step 0).
    dh : array_like of uint32
        The recurrent delta (from step ``t + 1``), or with a projection ``W_hr^T dr^``.
    dy : array_like of uint32 or None
        The host's delta of the output, added to ``dh``; None with a projection.
    dc : array_like of uint32
        The cell delta from step ``t + 1`` (kept on chip; +0 at the last step).

    Returns
    -------
    d : dict of ndarray
        ``i, f, g, o``: the gate deltas ``d*`` (to the host and to the MVM units).
    dc_prev : ndarray of uint32
        The cell delta for step ``t - 1``.
    """
    i, f, g, o, c = _saved("saved", saved, "lstm")
    dh_hat = _dh_hat(dh, dy)
    tc = _tanh(c)
    dc_hat = _fa(_bits(dc), _fm(_fm(_dtanh(tc), o), dh_hat))
    d = dict(i=_fm(_dsig(i), _fm(g, dc_hat)),
             f=_fm(_dsig(f), _fm(_bits(c_prev), dc_hat)),
             g=_fm(_dtanh(g), _fm(i, dc_hat)),
             o=_fm(_dsig(o), _fm(tc, dh_hat)))
    return d, _fm(f, dc_hat)


def gru_backward(saved, h_prev, dh, dy):
    """One GRU cell's BW activation (module docstring).

    Parameters
    ----------
    saved : mapping
        ``r, z, n, hn`` of the step, as :func:`gru_forward` returns them.
    h_prev : array_like of uint32
        The FW output of the step before (+0 at step 0).
    dh, dy : array_like of uint32
        The recurrent delta from step ``t + 1`` and the host's delta of the output.

    Returns
    -------
    d_input : dict of ndarray
        ``r, z, n``: the W side's deltas ``dr*, dz*, dn*`` (to the host).
    d_recurrent : dict of ndarray
        ``r, z, n``: the R side's, ``dr*, dz*, dhn = fm(r, dn*)`` (to the MVM units and the
        host).
    direct : ndarray of uint32
        ``fm(z, dh^)``; the recurrent delta of step ``t - 1`` is ``fa(fold(R_r^T dr*,
        R_z^T dz*, R_n^T dhn), direct)``.
    """
    r, z, n, hn = _saved("saved", saved, "gru")
    dh_hat = _dh_hat(dh, dy)
    omz = _fa(_ONE, z ^ _SIGN)
    dn = _fm(_dtanh(n), _fm(omz, dh_hat))
    dz = _fm(_dsig(z), _fm(_fa(_bits(h_prev), n ^ _SIGN), dh_hat))
    dhn = _fm(r, dn)
    dr = _fm(_dsig(r), _fm(hn, dn))
    return dict(r=dr, z=dz, n=dn), dict(r=dr, z=dz, n=dhn), _fm(z, dh_hat)

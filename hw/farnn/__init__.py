"""FARNN: chained weight-stationary fp32 PEs for small-batch LSTM/GRU training
(Cho, Lee, Lee, IEEE TPDS 2022; design decisions in ``docs/engines/farnn/spec.md``).

:class:`FarnnConfig` (``config.py``) is the single source of truth of an engine. The
bit-exact model is :mod:`nnrtl.sim.golden.farnn`; the host side of a training step is
:mod:`nnrtl.gen.farnn`.

Arithmetic (the contract between the RTL and the golden model)
--------------------------------------------------------------
RTL and golden model follow this exactly, so that they agree bit for bit. All arithmetic
is IEEE fp32 (``hw/arith`` FloatFormat for fp32; ``flush_subnormals=False``), every operation
one rounding (RNE) through the existing units and their goldens in sim/golden/float.py,
accumulator.py, activation.py.
- Gate order as PyTorch's weight layout: LSTM (i, f, g, o), GRU (r, z, n). MVM unit k
  holds gate k's rows.
- PE MAC: PE j of a pass holds row j of R_k (its "column" in the paper's words). For an
  input vector x of length N_in, the products p_e = float_mul(w[j, e], x[e]) are fed in
  element order e = 0..N_in-1 into a StreamingAccumulator with ``adder_stages = A`` (a
  config parameter, default 4; FloatAdd allows 1..6); the result is ``streaming_sum(fp32,
  p, adder_stages=A)``.
- Cell splitting with factor s (s divides the chain count, 16 by default): the vector is
  cut into s contiguous chunks, chunk g = elements [g*c, min((g+1)*c, N_in)) with c =
  ceil(N_in / s); PE group g accumulates chunk g as its own stream (streaming_sum of that
  chunk); the s partials are combined at the chain heads by a left fold in group order:
  ((q0 + q1) + q2) + ... with float_add.
- Multiplier: FloatMul stages and adder stages are config parameters (defaults: mul 3, add
  4); latency is a property of each unit, never restated.
- Biases: the host (GPU side) adds bW + bR to its I-MVM result for LSTM gates and for GRU
  r, z; for GRU n the host sends W_n x + bW_n and the FPGA adds bR_n to R_n h before the
  reset gate (PyTorch nn.GRU form).
- FW activation per cell, in this order (fa = float_add, fm = float_mul, sig/tanh = the
  hw/arith PWL table units FloatSigmoid / FloatTanh with their default fp32 tables, golden
  sim/golden/activation.sigmoid/tanh): LSTM: a_k = fa(imvm_k, rmvm_k); i = sig(a_i); f =
  sig(a_f); g = tanh(a_g); o = sig(a_o); c = fa(fm(f, c_prev), fm(i, g)); h = fm(o,
  tanh(c)). Saved for BW: i, f, g, o, c (c_t saved). GRU:  r = sig(fa(imvm_r, rmvm_r)); z
  = sig(fa(imvm_z, rmvm_z)); hn = fa(rmvm_n, bR_n); n = tanh(fa(imvm_n, fm(r, hn))); h =
  fa(fm(fa(1, -z), n), fm(z, h_prev))  [(1-z) as fa(1, neg z)]. Saved: r, z, n, hn.
  Projection (proj_size P > 0, LSTM only): h_proj = MVM of the projection matrix (P x H)
  on h, same PE MAC.
- BW: derivatives from saved values with FloatSigmoidDerivative s*(1-s) and
  FloatTanhDerivative 1-t*t (golden sigmoid_derivative / tanh_derivative). LSTM, with
  dh_hat = fa(dh, dy): tc = tanh(c) (recomputed through the tanh unit from saved c);
  dc_hat = fa(dc, fm(fm(tanh_derivative(tc), o), dh_hat)); do* = fm(sigmoid_derivative(o),
  fm(tc, dh_hat)); dg* = fm(tanh_derivative(g), fm(i, dc_hat)); di* =
  fm(sigmoid_derivative(i), fm(g, dc_hat)); df* = fm(sigmoid_derivative(f), fm(c_prev,
  dc_hat)); dc_prev = fm(f, dc_hat). Then dh_prev = left fold over units in gate order of
  R_k^T d_k* (each by the PE MAC above on the host-transposed R^T): ((u_i + u_f) + u_g) +
  u_o. GRU and projection BW: the golden helper writes the equations in the same style
  (one rounding per op, order written in the docstring) and that text becomes the contract
  for the RTL.
- Host (PyTorch, float32 on CUDA if present else CPU): I-MVM for all steps, BW I-MVM,
  gradient computation (dW = sum_t x_t outer d*_t, dR = sum_t h_{t-1} outer d*_t, bias
  grads sum_t d*_t), SGD update, transposed weight layout and its stream packing. These
  are not bit-exact with the FPGA side and need not be.

Where the golden model and the RTL decided further (the split of the last round only,
the GRU save set with ``h_{t-1}``, the projection's BW), their docstrings say so:
:mod:`nnrtl.sim.golden.farnn.layer`, :mod:`nnrtl.hw.farnn.mvm`; the projection's schedule in
the engine (two jobs a step, its rows cut over the units in blocks, FW ``r`` and BW ``dr^``
on ``m_proj``): :mod:`nnrtl.hw.farnn.engine`.
"""

from .chain import PEChain
from .engine import FarnnEngine
from .config import CELLS, GATES, MATRICES, WEIGHT_DEPTHS, FarnnConfig, MatrixShape
from .mvm import MVMUnit
from .pe import FarnnPE

__all__ = ["FarnnConfig", "MatrixShape", "CELLS", "GATES", "MATRICES", "WEIGHT_DEPTHS",
           "FarnnPE", "PEChain", "MVMUnit", "FarnnEngine"]

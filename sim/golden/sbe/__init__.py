"""Bit-exact golden model of the SBE (:mod:`nnrtl.hw.sbe`) and its stream formats.

This package is the executable form of the contract between the SBE's RTL and its golden
model; everything here is derived from one :class:`~nnrtl.hw.sbe.SBEConfig`. The
arithmetic is in :mod:`.model`, the stream formats in :mod:`.streams`, random parameters
and inputs in :mod:`.random_data`. Symbols: ``H = hidden_size``, ``rows = 4H``, ``k =
config.columns_per_cycle``, ``P = config.passes``, ``RPP = config.rows_per_pass``, ``PP =
post_units``, ``Nt = bus_weights``, ``n_pe = pes``; per layer ``shape = config.layer(l)``:
``In = shape.input_size``, ``C = shape.columns`` (``In + H``), ``BC = shape.block_columns``,
``BS = BC // k``, ``F = shape.first_hidden_block``, ``HB = shape.hidden_blocks``, ``XT =
shape.x_columns_in_hidden_blocks``, ``Nb = config.blocks``. Row ``4 * j + g`` of the
interleaved matrix is unit ``j`` of gate ``g`` (gates i, u, f, o,
:data:`~nnrtl.hw.sbe.GATES`); its columns are ``[x_t (In), h_{t-1} (H)]``.

Number formats (:attr:`SBEConfig.formats <nnrtl.hw.sbe.SBEConfig.formats>`)
---------------------------------------------------------------------------
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

Padding (sizes the RTL's rules refuse)
--------------------------------------
A config whose ``input_size`` or ``hidden_size`` the RTL cannot run as they are, or whose
layers have different hidden sizes (``config.hidden_sizes``: every layer runs padded to
the largest, ``config.padded_hidden_size``)
(:attr:`~nnrtl.hw.sbe.SBEConfig.is_padded`), runs the problem of ``config.padded``:
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

Streams (AXI4-Stream; little-endian words: word ``n`` of a beat is bits ``[n*w, (n+1)*w)``)
-------------------------------------------------------------------------------------------
One *run* is one layer ``l`` over ``T`` steps. Batches (:func:`batches`): steps ``t0 = 0,
B, 2B, ...``, batch size ``n = min(B, T - t0)``. Word arrays here hold *unsigned* codes
(two's complement masked to the word width), one row per beat; :func:`pack_beat` turns a
row into the integer a testbench drives, :func:`unpack_beat` the reverse.

``s_weights`` (:func:`weight_beats`), ``Nt`` words of ``operand_width`` bits per beat:

1. Header (:attr:`~nnrtl.hw.sbe.SBEConfig.header_layout`): for unit ``j = 0 .. H-1``:
   ``bias_i, bias_u, bias_f, bias_o`` and, if ``config.batch_norm``, ``scale_i ..
   scale_o, shift_i .. shift_o``: one value per beat,
   its ``acc_width``-bit two's complement code in the low ``acc_width`` bits, the upper
   bits zero. ``H * (12 if batch_norm else 4)`` beats.
2. Blocks in consumption order (:meth:`~nnrtl.hw.sbe.SBEConfig.block_schedule`): if ``config.weights_resident``
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
Measured by ``tests/sbe/golden/test_sbe_golden.py``: ``torch.nn.LSTM`` (float64, default
initialisation) of 1 and 2 layers with input/hidden sizes 12/10, 40/24 and 16/32 (2
layers), inputs uniform in ``[-1, 1]``, quantized by
:func:`nnrtl.gen.sbe.frommodel.quantize_model` (16-bit operands, 32-bit accumulators,
calibrated on the same inputs), 10, 30 and 50 steps, 3 seeds each:

===============  ===========================  ================  =================
``margin_bits``  fraction bits W, V, E; A     golden vs torch   float64, dequant.
===============  ===========================  ================  =================
0                15, 15, 30; A in [-2, 2)     2.7e-4 (<= 6e-4)  4.4e-5 (<= 1e-4)
2                13, 13, 28; A in [-32, 32)   1.1e-3 (<= 2e-3)  1.7e-4 (<= 4e-4)
===============  ===========================  ================  =================

(``max |h - torch|`` over every step, unit and case; the bound the test asserts in
brackets.) Stacks of ``nn.LSTM`` modules of different hidden sizes on 12 inputs (16 -> 9,
9 -> 16, 24 -> 16 -> 9; 20 steps, 2 seeds, ``margin_bits=0``, each layer padded to the
largest): 1.7e-4 (<= 6e-4). The float64 LSTM with the dequantized weights shows the weight quantization's
share; the rest, almost all of it, is the fixed-point post-processing, mostly the
piecewise-linear activations (3.9e-4 for the sigmoid over ``[-8, 8)`` and 7.6e-4 for tanh
over ``[-4, 4)`` at 64 segments). With ``margin_bits=0`` the quantizer fits ``A`` to the
largest calibration pre-activation (below 2 here), so the tables span only ``[-2, 2)``
(their range is capped to ``A``'s) with finer segments; a pre-activation beyond the
calibration's would saturate there (sigmoid(2) = 0.88). Batch norm: the
pre-activation is within half an ``A`` LSB of ``(acc + bias) * scale + shift`` (one
rounding), and one step's c and h within 8.2e-4 and 1.2e-3 of the float formula.
"""

from .model import (MAX_MODELLED_ACC_WIDTH, LayerParams, accumulate, cell_update,
                    pad_columns, pad_params, preactivation, run_layer, run_model, step,
                    tables)
from .random_data import random_inputs, random_layer
from .streams import (batches, beat_counts, block_schedule, input_beats, output_beats,
                      output_last, pack_beat, unpack_beat, unpack_outputs, weight_beats)

__all__ = ["tables", "LayerParams", "pad_params", "pad_columns", "random_layer", "random_inputs", "accumulate",
           "preactivation", "cell_update", "step", "run_layer", "run_model", "batches",
           "block_schedule", "weight_beats", "input_beats", "output_beats", "output_last",
           "unpack_outputs", "pack_beat", "unpack_beat", "beat_counts",
           "MAX_MODELLED_ACC_WIDTH"]

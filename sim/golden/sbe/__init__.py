"""Bit-exact golden model of the SBE (:mod:`nnrtl.hw.sbe`) and its stream formats.

This package is the executable form of the contract between the SBE's RTL and its golden
model; everything here is derived from one :class:`~nnrtl.hw.sbe.SbeConfig`. The
arithmetic is in :mod:`.model`, the stream formats in :mod:`.streams`, random parameters
and inputs in :mod:`.random_data`. Symbols: ``H = hidden_size``, ``rows = 4H``, ``k =
config.columns_per_cycle``, ``P = config.passes``, ``RPP = config.rows_per_pass``, ``PP =
post_units``, ``Nt = bus_weights``, ``n_pe = pes``; per layer ``shape = config.layer(l)``:
``In = shape.input_size``, ``C = shape.columns`` (``In + H``), ``BC = shape.block_columns``,
``BS = BC // k``, ``F = shape.first_hidden_block``, ``HB = shape.hidden_blocks``, ``XT =
shape.x_columns_in_hidden_blocks``, ``Nb = config.blocks``. Row ``4 * j + g`` of the
interleaved matrix is unit ``j`` of gate ``g`` (gates i, u, f, o,
:data:`~nnrtl.hw.sbe.GATES`); its columns are ``[x_t (In), h_{t-1} (H)]``.

Number formats (:attr:`SbeConfig.formats <nnrtl.hw.sbe.SbeConfig.formats>`)
---------------------------------------------------------------------------
``W = QFormat(operand_width, weight_frac)`` weights; ``V = QFormat(operand_width,
act_frac)`` x inputs and h; ``A = QFormat(acc_width, weight_frac + act_frac)``
accumulators, biases, BN shift; ``E = QFormat(acc_width, cell_frac)`` gate activations,
cell state, BN scale.

The arithmetic of one time step is stated in :mod:`.model`, the padding of sizes the RTL
refuses in :func:`.model.pad_params`, the stream formats in :mod:`.streams`.

Accuracy against PyTorch (``tests/sbe/golden/test_sbe_golden.py``, quantized by
:func:`nnrtl.gen.sbe.frommodel.quantize_model`): ``max |h - torch|`` within 6e-4 at
``margin_bits=0`` and 2e-3 at 2; almost all of it is the fixed-point post-processing,
mostly the piecewise-linear activations, the weight quantization's share is small.
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

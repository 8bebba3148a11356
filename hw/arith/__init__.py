"""Arithmetic units: fixed point, parametric floating point, accumulators, activations.

Every unit is a ``wiring.Component`` with ``amaranth.lib.stream`` ports ``i`` / ``o``, a
``latency`` property and a bit-exact numpy model in :mod:`nnrtl.sim.golden`.
"""

from .fixed import (QFormat, Rounding, Overflow, round_shift, rescale_value, Rescale, FixedMul,
                    FixedAdd, FixedMac)
from .pwl import (FUNCTIONS, PWLTable, pwl_table, PiecewiseLinear, PWLSigmoid, PWLTanh,
                  SigmoidDerivative, TanhDerivative)
from .float import FloatFormat, FP32, BF16, FP16, FloatAdd, FloatMul
from .accumulator import StreamingAccumulator, ReductionStep, reduction_schedule
from .activation import (ActivationTable, activation_table, FloatActivation, FloatSigmoid,
                         FloatTanh, FloatSigmoidDerivative, FloatTanhDerivative)

__all__ = [
    "QFormat", "Rounding", "Overflow", "round_shift", "rescale_value", "Rescale", "FixedMul",
    "FixedAdd", "FixedMac",
    "FUNCTIONS", "PWLTable", "pwl_table", "PiecewiseLinear", "PWLSigmoid", "PWLTanh",
    "SigmoidDerivative", "TanhDerivative",
    "FloatFormat", "FP32", "BF16", "FP16", "FloatAdd", "FloatMul",
    "StreamingAccumulator", "ReductionStep", "reduction_schedule",
    "ActivationTable", "activation_table", "FloatActivation", "FloatSigmoid", "FloatTanh",
    "FloatSigmoidDerivative", "FloatTanhDerivative",
]

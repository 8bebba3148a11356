"""Parametric floating point: formats, a pipelined adder/subtractor and a multiplier.

Formats are :class:`FloatFormat` ``(exponent_bits, mantissa_bits)``; presets ``FP32``,
``BF16``, ``FP16``. The units take operands and give results as bit patterns on
``amaranth.lib.stream`` ports, one operation per cycle, with IEEE 754 semantics for the
format's widths: round to nearest, ties to even; signed zeros and infinities; one
canonical quiet NaN out (``fmt.canonical_nan``) for every invalid operation and every NaN
operand; subnormals exact, or flushed to zero with ``flush_subnormals=True``.

=================  =========================================================  ==========
unit               payload of ``i``                                           ``stages``
=================  =========================================================  ==========
:class:`FloatAdd`  ``{"a": width, "b": width, "subtract": 1}`` → ``a ± b``   0–6 (3)
:class:`FloatMul`  ``{"a": width, "b": width}`` → ``a * b``                   0–6 (3)
=================  =========================================================  ==========

``latency`` equals ``stages``. The bit-exact numpy models are
:func:`nnrtl.sim.golden.float.float_add`, ``float_sub`` and ``float_mul``.

A fused multiply-add is not provided: it needs a ``3p``-bit alignment and addition, not
the adder's ``p + 3`` bits, so it does not come cheap from these two units.
"""

from .float_add import FloatAdd
from .float_format import BF16, FP16, FP32, FloatFormat
from .float_mul import FloatMul


__all__ = ["FloatFormat", "FP32", "BF16", "FP16", "FloatAdd", "FloatMul"]

"""Arithmetic units: fixed point, parametric floating point, accumulators, activations."""

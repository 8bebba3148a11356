"""Bit-exact numpy models of the FPDeep node modules (:mod:`nnrtl.hw.fpdeep`): the FP module
(:mod:`.fp`)."""

from .fp import FpResult, complete, conv_partials, fp_module, sfu, tree_sum, windows

__all__ = ["FpResult", "complete", "conv_partials", "fp_module", "sfu", "tree_sum", "windows"]

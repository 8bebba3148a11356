"""Bit-exact numpy models of the FPDeep node modules (:mod:`nnrtl.hw.fpdeep`): the FP module
(:mod:`.fp`), the EB module and the SFU backward step (:mod:`.eb`), the PG module (:mod:`.pg`)."""

from .eb import eb_module, sfu_backward
from .fp import FpResult, complete, conv_partials, fp_module, sfu, tree_sum, windows
from .pg import lgb_rows, pg_batch

__all__ = ["FpResult", "complete", "conv_partials", "fp_module", "sfu", "tree_sum", "windows",
           "eb_module", "sfu_backward", "pg_batch", "lgb_rows"]

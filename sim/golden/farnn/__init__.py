"""Bit-exact numpy model of the FARNN engine's FPGA part (:mod:`nnrtl.hw.farnn`): the MVM
arithmetic (:mod:`.rmvm`) and one layer's FW and BW passes (:mod:`.layer`), per the
arithmetic contract ``briefs/farnn-contract.md``."""

from .layer import (BackwardResult, ForwardResult, LayerWeights, backward, forward)
from .rmvm import fold, rmvm, unit_mvm

__all__ = ["rmvm", "unit_mvm", "fold", "LayerWeights", "ForwardResult", "BackwardResult",
           "forward", "backward"]

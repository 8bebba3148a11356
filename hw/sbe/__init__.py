"""The SBE: stall-free blocking-batching LSTM inference with the weights in off-chip memory
(``papers/sbe-weight-reuse-large-lstm.txt``).

:class:`SBEConfig` is the single source of truth of an engine; the paper's two designs are
:data:`PRESETS`.
"""

from .config import (BRAM36_BITS, GATES, LUTRAM_DEPTH, MAX_BUS_BITS, PRESETS, VC709_LSTM512,
                     ZC706_LSTM256, LayerShape, SBEConfig, SBEPreset)

__all__ = ["SBEConfig", "LayerShape", "SBEPreset", "PRESETS", "ZC706_LSTM256",
           "VC709_LSTM512", "GATES", "BRAM36_BITS", "LUTRAM_DEPTH", "MAX_BUS_BITS"]

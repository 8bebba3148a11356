"""η-LSTM Omni-PE channels (issue 13, spec omni.md §3): :mod:`.config` and :mod:`.pe` (the
Omni-PE), :mod:`.r2a` (the R2A scheduler), :mod:`.dma_config`, :mod:`.compress`,
:mod:`.decode` and :mod:`.dma` (the compressing DMA)."""

from .config import IP_ACCUMULATOR_LATENCY, OmniJob, OmniMode, OmniPEConfig
from .pe import OmniPE

__all__ = ["OmniPEConfig", "OmniJob", "OmniMode", "OmniPE", "IP_ACCUMULATOR_LATENCY"]

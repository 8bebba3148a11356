"""η-LSTM Omni-PE channels (spec omni.md §3): :mod:`.config` (:class:`OmniPEConfig`,
:class:`OmniJob`, :class:`OmniMode`) and :mod:`.pe` (:class:`OmniPE`)."""

from .config import IP_ACCUMULATOR_LATENCY, OmniJob, OmniMode, OmniPEConfig
from .pe import OmniPE

__all__ = ["OmniPEConfig", "OmniJob", "OmniMode", "OmniPE", "IP_ACCUMULATOR_LATENCY"]

"""η-LSTM Omni-PE channels (spec §3): :mod:`.config` and :mod:`.pe` (the
Omni-PE: a PE control, :mod:`.pe_control`, and a lane, :mod:`.lane`),
:mod:`.channel_config`, :mod:`.channel_program` and :mod:`.channel` (the channel: one PE
control for its lanes, its controller and activation units), :mod:`.r2a` (the R2A
scheduler), :mod:`.dma_config`, :mod:`.compress`, :mod:`.decode` and :mod:`.dma` (the
compressing DMA), :mod:`.top_config`, :mod:`.top_program` and :mod:`.top` (the top)."""

from .channel import Channel
from .channel_config import Activation, ChannelConfig, ChannelInstruction, Source
from .config import IP_ACCUMULATOR_LATENCY, OmniJob, OmniMode, OmniPEConfig
from .lane import OmniLane
from .pe import OmniPE
from .pe_control import OmniPEControl
from .top import OmniTop
from .top_config import OmniConfig

__all__ = ["OmniPEConfig", "OmniJob", "OmniMode", "OmniPE", "OmniLane", "OmniPEControl",
           "IP_ACCUMULATOR_LATENCY",
           "ChannelConfig", "ChannelInstruction", "Source", "Activation", "Channel",
           "OmniConfig", "OmniTop"]

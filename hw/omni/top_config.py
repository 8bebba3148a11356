"""Configuration of the η-LSTM top (:class:`~nnrtl.hw.omni.top.OmniTop`): the one object its
RTL, register map, C header, manifest, resource and cycle models and bench derive from.

η-LSTM (ISCA 2021, Sec. V-D, Fig. 13a; spec §3.6): ``channels`` channels of
``pes_per_channel`` Omni-PEs (40 x 32 = 1,280 on the VCU128), the η-LSTM controller
running the R2A scheduler (``swing_channels`` of them swing), ``hbm_ports`` compressing
DMAs toward the HBM. :class:`OmniConfig` holds the issue's parameters (the LSTM's
``input_size``, ``hidden_size``, ``layers``, ``seq_len``, ``batch``; the hardware's
``channels``, ``pes_per_channel``, ``swing_channels``, ``adder_stages``,
``prune_threshold``, ``hbm_ports``) and derives
the unit configurations from them: :attr:`OmniConfig.channel`
(:class:`~.channel_config.ChannelConfig`), :attr:`OmniConfig.r2a`
(:class:`~.r2a.R2AConfig`), :attr:`OmniConfig.dma` (:class:`~.dma_config.DmaConfig`, each
DMA's).
Every other width, depth and stage count is those units' default.
"""

import dataclasses
import math

from ..checks import by_distance, check_positive, check_range, is_int
from .channel_config import ChannelConfig
from .dma_config import DmaConfig, threshold_bits
from .r2a import R2AConfig

__all__ = ["OmniConfig", "TASK_KINDS", "HBM_DATA_WIDTH", "HBM_PSEUDO_CHANNELS",
           "PAPER_HBM_PORTS"]

#: The R2A task kinds, in the order of their code in the task table (0 MatMul, 1 EW).
TASK_KINDS = ("matmul", "ew")

#: Width of a DMA's AXI4 port: an HBM pseudo-channel port of the VCU128's HBM IP is
#: 256 bits (at 450 MHz); [U] decided here.
HBM_DATA_WIDTH = 256
#: HBM pseudo-channels of the VCU128 (Xilinx PG276: two stacks of 16), the most ports.
HBM_PSEUDO_CHANNELS = 32
#: The default ``hbm_ports``: the paper's 224 GB/s (§VI-A) at its 500 MHz over ports of
#: :data:`HBM_DATA_WIDTH` bits, one beat a cycle: ``224e9 / (32 * 500e6) = 14``.
PAPER_HBM_PORTS = 14


@dataclasses.dataclass(frozen=True)
class OmniConfig:
    """The η-LSTM top's parameters.

    Attributes
    ----------
    input_size, hidden_size : int
        ``I`` (layer 0's input; the other layers take ``H``) and ``H`` of the LSTM the
        channels' cell programs are built for (set the longest job, the channel's
        ``max_length``).
    layers, seq_len, batch : int
        LN, LL and B of the training workload (the cycle model's; the R2A's static split).
    channels : int
        Channels (40 on the VCU128, at least 2: one per R2A group).
    pes_per_channel : int
        Omni-PEs per channel (32).
    swing_channels : int
        Channels that swing between the R2A groups (2, Fig. 13a).
    adder_stages : int
        Pipeline stages of every PE's fp32 adder (8, the paper's).
    prune_threshold : float
        θ, the reset value of the DMA's threshold register (0.1, "around 0.1").
    dsp_primitives : bool
        Of every PE's adder and multiplier (:class:`~.config.OmniPEConfig`): ``True``
        (default) builds their alignment and significand products on ``DSP48E2``
        Instances (the same DSP count, 67 LUTs a lane fewer by
        :mod:`nnrtl.gen.omni.resources`; Verilator runs them with the model
        :func:`nnrtl.sim.runner.build` appends), ``False`` leaves them to the tool;
        ``"behaviour"`` (not a ``--param`` value) the Instances' behaviour in Amaranth,
        for Amaranth's simulator, which runs no Instance.
    max_tasks : int
        Entries of the R2A task table (a window of the iteration's graph).
    hbm_ports : int
        DMAs of the top, each on its own HBM pseudo-channel port of
        :data:`HBM_DATA_WIDTH` bits (1 to :data:`HBM_PSEUDO_CHANNELS`; default
        :data:`PAPER_HBM_PORTS`, the paper's 224 GB/s at 500 MHz).

    Raises
    ------
    TypeError
        A parameter of the wrong type or out of range (the units' own checks name it).
    ValueError
        A combination the units refuse (``swing_channels`` above ``channels``, ...);
        ``channels`` or ``max_tasks`` above 64 (the width of their registers);
        ``hbm_ports`` not an integer from 1 to :data:`HBM_PSEUDO_CHANNELS`.
    """

    input_size: int = 8
    hidden_size: int = 8
    layers: int = 2
    seq_len: int = 3
    batch: int = 1
    channels: int = 40
    pes_per_channel: int = 32
    swing_channels: int = 2
    adder_stages: int = 8
    prune_threshold: float = 0.1
    dsp_primitives: bool = True
    max_tasks: int = 64
    hbm_ports: int = PAPER_HBM_PORTS

    def __post_init__(self):
        for name in ("layers", "seq_len", "batch"):
            check_positive(name, getattr(self, name))
        check_range("hbm_ports", self.hbm_ports, 1, HBM_PSEUDO_CHANNELS)
        threshold = self.prune_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (
                math.isfinite(threshold) and threshold >= 0):
            raise TypeError(f"prune_threshold must be a finite number of at least 0, not "
                            f"{threshold!r}")
        # the units check their own parameters, with these names
        self.channel, self.r2a, self.dma    # noqa: B018
        for name, registers in (("channels", "ew_mask and swing_mask registers have"),
                                ("max_tasks", "task_deps register has")):
            if getattr(self, name) > 64:
                raise ValueError(f"{name} ({getattr(self, name)}) cannot exceed 64: the "
                                 f"{registers} 64 bits")

    @classmethod
    def candidates(cls, values, pinned):
        """The free parameters' values to try when completing a partial configuration
        (:func:`nnrtl.gen.params.parse_params`), preferred first: ``channels`` nearest its
        default, from 2 to 64 (a board's budget may need fewer), at least the swing
        channels; ``swing_channels`` at most ``channels`` (the R2A's rule)."""
        del pinned
        channels, swing = values["channels"], values["swing_channels"]
        options = {"channels": by_distance(channels, range(2, 65))}
        if is_int(channels) and is_int(swing) and channels > 1:
            options["swing_channels"] = [min(swing, channels)]
        return options

    # -- the units ---------------------------------------------------------------------

    @property
    def channel(self):
        """The :class:`ChannelConfig` of every channel (layer 0's sizes; its
        ``max_length`` covers every layer, :meth:`layer_channel`)."""
        return ChannelConfig(pes_per_channel=self.pes_per_channel,
                             input_size=self.input_size, hidden_size=self.hidden_size,
                             adder_stages=self.adder_stages,
                             dsp_primitives=self.dsp_primitives)

    def layer_channel(self, layer):
        """The channel configuration of ``layer``'s cell programs: its input size, the
        channel's ``max_length`` (one RTL for every layer)."""
        if not is_int(layer) or not 0 <= layer < self.layers:
            raise ValueError(f"layer must be an integer from 0 to {self.layers - 1}, not "
                             f"{layer!r}")
        channel = self.channel
        return dataclasses.replace(channel, input_size=self.layer_input(layer),
                                   max_length=channel.pe.max_length)

    def layer_input(self, layer):
        """Input size of ``layer``: ``input_size`` for layer 0, ``hidden_size`` above."""
        return self.input_size if layer == 0 else self.hidden_size

    @property
    def r2a(self):
        """The :class:`R2AConfig`: this top's channels; a kind switch costs the adder's
        drain (``adder_stages`` cycles, the R2A's own rule)."""
        return R2AConfig(channels=self.channels, pes_per_channel=self.pes_per_channel,
                         swing_channels=self.swing_channels,
                         switch_cycles=self.adder_stages, max_tasks=self.max_tasks)

    @property
    def dma(self):
        """The :class:`DmaConfig`: an HBM port of :data:`HBM_DATA_WIDTH` bits; vectors up
        to ``max(4H, I + H)`` (a gate vector, ``z``); records of up to ``max(4H, 6 B)``
        blocks (the rows of ``δW``; MS1's six P1 vectors per sample); rows up to
        ``I + H + 1`` words."""
        h = self.hidden_size
        return DmaConfig(data_width=HBM_DATA_WIDTH, max_length=max(4 * h, self.input_size + h),
                         max_blocks=max(4 * h, 6 * self.batch),
                         max_row_words=self.input_size + h + 1)

    # -- derived facts -------------------------------------------------------------------

    @property
    def pes(self):
        """Omni-PEs of the top: ``channels * pes_per_channel``."""
        return self.channels * self.pes_per_channel

    @property
    def threshold_bits(self):
        """The threshold register's reset value (θ as fp32 bits)."""
        return threshold_bits(self.prune_threshold)

    @property
    def peak_macs_per_cycle(self):
        """Every PE doing one MAC a cycle: :attr:`pes`."""
        return self.pes

"""The R2A scheduler (runtime resource allocation, spec §3.4, paper §V-C), channel granularity.

:class:`R2AConfig` is the one source of truth of the scheduler; :class:`R2AScheduler` is
its RTL, and :func:`nnrtl.gen.omni.r2a.schedule` its cycle model: both follow the
decisions written in :mod:`nnrtl.gen.omni.r2a` (split, swing channels, trigger,
priority, switch cost, timing) and agree cycle for cycle (``tests/hw/test_omni_r2a.py``).

Task table [U, decided here]
    Tasks are loaded through the ``load`` stream before ``start``; a task's id is its
    load position (0 .. ``max_tasks - 1``), which is also its priority. A task carries
    its ``kind`` (0 MatMul, 1 EW), its ``length`` in PE-cycles and a dependency
    *bitmask* over the ids (bit ``k``: needs task ``k``). A bitmask makes "every input
    ready" one AND-reduction per task, with no successor lists to walk, at the price of
    ``max_tasks`` bits per task: the table is a window of the iteration's graph that
    the η-LSTM controller refills (a task may depend only on tasks of the same window;
    the controller cuts windows at phase boundaries, where everything earlier is done).
"""

import dataclasses

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..checks import check_non_negative, check_positive

__all__ = ["R2AConfig", "R2AScheduler"]


@dataclasses.dataclass(frozen=True)
class R2AConfig:
    """The scheduler and the channels it drives.

    Parameters
    ----------
    channels : int
        Channels (40 on the VCU128, spec §3.6); at least 2 (one per group).
    pes_per_channel : int
        Omni-PEs per channel (32).
    swing_channels : int
        Swing channels of dynamic allocation (2, as Fig. 13a shows).
    switch_cycles : int
        Extra cycles a channel takes when its task's kind differs from its previous one.
    max_tasks : int
        Entries of the RTL's task table.
    length_bits : int
        Width of a task's length (PE-cycles).
    counter_bits : int
        Width of the RTL's cycle, busy and swing counters.
    """

    channels: int = 40
    pes_per_channel: int = 32
    swing_channels: int = 2
    switch_cycles: int = 8
    max_tasks: int = 64
    length_bits: int = 32
    counter_bits: int = 48

    def __post_init__(self):
        for name in ("channels", "pes_per_channel", "max_tasks", "length_bits",
                     "counter_bits"):
            check_positive(name, getattr(self, name))
        for name in ("swing_channels", "switch_cycles"):
            check_non_negative(name, getattr(self, name))
        if self.channels < 2:
            raise ValueError(f"channels ({self.channels}) must be at least 2: one MatMul "
                             f"and one EW group channel")
        if self.swing_channels > self.channels:
            raise ValueError(f"swing_channels ({self.swing_channels}) cannot exceed "
                             f"channels ({self.channels})")

    @property
    def task_bits(self):
        """Width of a task id."""
        return max(1, (self.max_tasks - 1).bit_length())

    @property
    def issue_overhead(self):
        """Cycles a task holds its channel beyond its ``D`` working cycles without
        backpressure: the decision cycle and the cycle its done is registered."""
        return 2

    def duration(self, length, switch):
        """``D``: the cycles a channel works on a task of ``length`` PE-cycles, plus
        :attr:`switch_cycles` when its mode changes (``switch``)."""
        return -(-length // self.pes_per_channel) + (self.switch_cycles if switch else 0)

    def task_layout(self):
        """Payload of the ``load`` stream."""
        return data.StructLayout({"kind": 1, "length": self.length_bits,
                                  "deps": self.max_tasks})

    def issue_layout(self):
        """Payload of a channel's issue port."""
        return data.StructLayout({"task": self.task_bits, "kind": 1,
                                  "length": self.length_bits, "switch": 1})

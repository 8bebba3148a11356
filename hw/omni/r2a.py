"""The R2A scheduler (runtime resource allocation, spec §3.4, paper §V-C), channel granularity.

:class:`R2AConfig` is the one source of truth of the scheduler; :class:`R2AScheduler` is
its RTL, and :func:`nnrtl.gen.omni.r2a.schedule` its cycle model: both follow the
decisions written in :mod:`nnrtl.gen.omni.r2a` (split, swing channels, trigger,
priority, switch cost, timing) and agree cycle for cycle (``tests/omni/hw/test_omni_r2a.py``).

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


class R2AScheduler(wiring.Component):
    """The R2A scheduler: task table, group and swing registers, issue logic, counters.

    Parameters
    ----------
    config : R2AConfig

    Attributes
    ----------
    load : In(stream), payload :meth:`R2AConfig.task_layout`
        Appends a task to the table (ready while not running and the table has room).
    clear : In(1)
        Empties the table (while not running).
    start : In(1)
        Starts a run over the loaded tasks; latches ``ew_mask`` and ``swing_mask``
        (the group membership registers: bit ``c`` set = channel ``c`` is in the EW
        group / swings) and clears the counters. Ignored while running.
    ew_mask, swing_mask : In(channels)
    issue : Out(stream).array(channels), payload :meth:`R2AConfig.issue_layout`
        Per channel, the task descriptor it is to run (``switch``: its mode changes).
    done : In(channels)
        Bit ``c`` high for one cycle: channel ``c`` finished the task it took.
    count : Out(task_bits + 1)
        Tasks in the table.
    running, finished : Out(1)
        A run is under way / the last run finished (every task done).
    cycles, swings, returns, busy_matmul, busy_ew : Out(counter_bits)
        Of the current or last run: cycles until every task was done; tasks issued to a
        channel of the other group and own-group tasks issued after one; channel-cycles
        busy of the MatMul and the EW group (descriptor offered to done).

    Timing: one decision per cycle (lowest-index channel that can take a task; lowest
    ready id of the kind it takes); the descriptor is offered the next cycle; a done
    makes the channel free and the task's successors ready the cycle after it. See
    :mod:`nnrtl.gen.omni.r2a`, whose model this RTL matches cycle for cycle.
    """

    def __init__(self, config):
        if not isinstance(config, R2AConfig):
            raise TypeError(f"config must be an R2AConfig, not {config!r}")
        self._config = config
        counter = config.counter_bits
        super().__init__({
            "load": In(stream.Signature(config.task_layout())),
            "clear": In(1), "start": In(1),
            "ew_mask": In(config.channels), "swing_mask": In(config.channels),
            "issue": Out(stream.Signature(config.issue_layout())).array(config.channels),
            "done": In(config.channels),
            "count": Out(config.task_bits + 1),
            "running": Out(1), "finished": Out(1),
            "cycles": Out(counter), "swings": Out(counter), "returns": Out(counter),
            "busy_matmul": Out(counter), "busy_ew": Out(counter),
        })

    @property
    def config(self):
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        n, channels = cfg.max_tasks, cfg.channels

        kinds = Signal(n)            # bit k: task k is EW
        lengths = Array(Signal(cfg.length_bits, name=f"length_{k}") for k in range(n))
        deps = [Signal(n, name=f"deps_{k}") for k in range(n)]
        loaded = Signal(n)
        issued = Signal(n)
        done_mask = Signal(n)
        ew = Signal(channels)        # group membership registers
        swing = Signal(channels)
        busy = Signal(channels)
        last = Signal(channels)      # kind of each channel's last task (its mode)
        current = [Signal(cfg.task_bits, name=f"current_{c}") for c in range(channels)]

        # Loading the table.
        room = self.count < n
        m.d.comb += self.load.ready.eq(~self.running & room)
        with m.If(self.load.valid & self.load.ready):
            m.d.sync += [self.count.eq(self.count + 1),
                         loaded.eq(loaded | (Const(1, n) << self.count)[:n]),
                         kinds.eq(kinds | (self.load.payload.kind << self.count)[:n])]
            for k in range(n):
                with m.If(self.count == k):
                    m.d.sync += [lengths[k].eq(self.load.payload.length),
                                 deps[k].eq(self.load.payload.deps)]
        with m.If(self.clear & ~self.running):
            m.d.sync += [self.count.eq(0), loaded.eq(0), kinds.eq(0)]

        # Ready tasks and the lowest ready id of each kind.
        ready = Signal(n)
        m.d.comb += ready.eq(Cat(loaded[k] & ~issued[k] & ~(deps[k] & ~done_mask).any()
                                 for k in range(n)))
        lowest = [Signal(cfg.task_bits, name=f"lowest_{kind}") for kind in ("matmul", "ew")]
        has = Signal(2)
        for kind, of_kind in enumerate((ready & ~kinds, ready & kinds)):
            m.d.comb += has[kind].eq(of_kind.any())
            for k in reversed(range(n)):
                with m.If(of_kind[k]):
                    m.d.comb += lowest[kind].eq(k)

        # The channel that takes a task this cycle and the task.
        all_done = ~(loaded & ~done_mask).any()
        deciding = self.running & ~all_done
        want = Signal(channels)
        m.d.comb += want.eq(Cat(
            deciding & ~busy[c] & (Mux(ew[c], has[1], has[0])
                                   | (swing[c] & Mux(ew[c], has[0], has[1])))
            for c in range(channels)))
        chosen = Signal(range(channels))
        for c in reversed(range(channels)):
            with m.If(want[c]):
                m.d.comb += chosen.eq(c)
        home = ew.bit_select(chosen, 1)
        kind = Signal()
        m.d.comb += kind.eq(Mux(has.bit_select(home, 1), home, ~home))
        task = Signal(cfg.task_bits)
        m.d.comb += task.eq(Mux(kind, lowest[1], lowest[0]))
        switch = kind != last.bit_select(chosen, 1)
        fire = want.any()

        # Channels: issue, handshake, done.
        finishing = Signal(channels)
        finished_tasks = Signal(n)
        m.d.comb += finishing.eq(Cat(self.done[c] & busy[c] & ~self.issue[c].valid
                                     for c in range(channels)))
        m.d.comb += finished_tasks.eq(Cat(
            Cat(finishing[c] & (current[c] == k) for c in range(channels)).any()
            for k in range(n)))
        for c in range(channels):
            port = self.issue[c]
            with m.If(port.valid & port.ready):
                m.d.sync += port.valid.eq(0)
            with m.If(finishing[c]):
                m.d.sync += busy[c].eq(0)
            with m.If(fire & (chosen == c)):
                m.d.sync += [port.valid.eq(1), busy[c].eq(1), current[c].eq(task),
                             last[c].eq(kind), port.payload.task.eq(task),
                             port.payload.kind.eq(kind), port.payload.switch.eq(switch),
                             port.payload.length.eq(lengths[task])]
        with m.If(fire):
            m.d.sync += [issued.eq(issued | Cat(task == k for k in range(n))),
                         self.swings.eq(self.swings + (kind != home)),
                         self.returns.eq(self.returns + ((kind == home) & switch))]
        m.d.sync += done_mask.eq(done_mask | finished_tasks)

        # Counters and the run.
        with m.If(deciding):
            m.d.sync += [self.cycles.eq(self.cycles + 1),
                         self.busy_matmul.eq(self.busy_matmul + sum(busy & ~ew)),
                         self.busy_ew.eq(self.busy_ew + sum(busy & ew))]
        with m.If(self.running & all_done):
            m.d.sync += [self.running.eq(0), self.finished.eq(1)]
        with m.If(self.start & ~self.running):
            m.d.sync += [self.running.eq(1), self.finished.eq(0), issued.eq(0),
                         done_mask.eq(0), busy.eq(0), ew.eq(self.ew_mask),
                         swing.eq(self.swing_mask), last.eq(self.ew_mask),
                         self.cycles.eq(0), self.swings.eq(0), self.returns.eq(0),
                         self.busy_matmul.eq(0), self.busy_ew.eq(0)]
        return m

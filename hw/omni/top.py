"""The η-LSTM top (ISCA 2021, Sec. V-D, Fig. 13a; spec §3.6): ``channels``
:class:`~.channel.Channel` s of ``pes_per_channel`` Omni-PEs, the η-LSTM controller's R2A
scheduler (:class:`~.r2a.R2AScheduler`) dispatching the tasks of a cell-program graph to
the channels, the compressing DMA (:class:`~.dma.OmniDMA`) on the HBM port, and the
AXI4-Lite registers with the run's counters.

Dispatch
    The host loads a window of the iteration's task graph into the R2A task table through
    the registers (``task_kind``, ``task_length``, ``task_deps``, then ``control.push``),
    sets the groups (``ew_mask``, ``swing_mask``: their reset is the configuration's
    static split, :func:`register_map`) and writes ``control.start``. The scheduler
    offers each task to one channel on ``m_task[c]`` (id, kind, length, whether the
    channel's mode switches); the scratchpad side takes it and streams the task's
    instructions and operands into that channel (``s_command[c]``, ``s_operand[c]``,
    ``s_broadcast[c]``) and writes its results from ``m_result[c]``.
    A task is *done* when ``m_result[c]`` has handed over ``length`` beats (the
    ``length`` of a task in the table is its result beats, so the top sees the end of a
    task on its own ports); the channel is free and the task's successors ready the
    cycle after (the R2A's rule).

Counters (64-bit, cleared by ``start``)
    ``cycles`` (the R2A run: start to the last task done); ``busy_matmul`` /
    ``busy_ew``: channel-cycles holding a task of each kind (task taken to its last
    result beat); ``group_busy_matmul`` / ``group_busy_ew``:
    the R2A's channel-cycles busy per home group; ``swings`` / ``returns``: tasks run
    outside the channel's group and returns home; DMA: ``bytes_written``,
    ``bytes_read``, ``values_pruned``, ``values_kept`` (cleared by ``control.clear``);
    per PE mode (:class:`~.config.OmniMode`) ``busy_mvm``, ``busy_ew_mul``,
    ``busy_outer``, ``busy_ew_add``: channel-cycles of a held task whose *oldest
    unfinished instruction* (given on ``s_command[c]``, or offered there when none is
    left, and not all of its result beats out on ``m_result[c]``) is a job of that mode.

Latency and throughput: each channel ``pes_per_channel`` MACs / products / sums a cycle
and one activation a cycle (:class:`~.channel.Channel`); the scheduler decides one task a
cycle and offers it the next; a task's channel is free two cycles after its last result
beat (:attr:`~.r2a.R2AConfig.issue_overhead`). Registers: :class:`~nnrtl.hw.bus.RegisterFile`
(read 1 cycle, write 2).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..bus import Access, AXI4LiteSignature, Field, Register, RegisterFile, RegisterMap
from ..hierarchy import shared
from .channel import Channel
from .config import OmniMode
from .dma import OmniDMA, read_command_layout, write_command_layout
from .decode import output_layout
from .dma_config import axi4_signature
from .r2a import R2AScheduler
from .top_config import OmniConfig
from .workload import Workload, allocation, static_split, training_graph

__all__ = ["OmniTop", "register_map", "operand_layout", "mode_queue_depth", "COUNTERS",
           "MODE_COUNTERS", "CONSTANTS", "dma_port_names"]


def operand_layout(channel):
    """A beat of a channel's operand port: ``data`` (one word per lane) and ``which``
    (0: for Input1, 1: for Input2)."""
    return data.StructLayout({"data": channel.beat_layout, "which": 1})

#: The 64-bit counters, in register order.
COUNTERS = {
    "cycles": "Cycles of the last R2A run, start to its last task done",
    "busy_matmul": "Channel-cycles holding a MatMul task (taken on m_task to its last "
                   "result beat)",
    "busy_ew": "Channel-cycles holding an EW task",
    "group_busy_matmul": "The R2A's channel-cycles busy of the MatMul group's channels",
    "group_busy_ew": "The R2A's channel-cycles busy of the EW group's channels",
    "swings": "Tasks issued to a channel of the other group (swing events)",
    "returns": "Own-group tasks issued to a channel whose previous task was foreign",
    "bytes_written": "DMA: bytes written to the HBM port (strobes set)",
    "bytes_read": "DMA: bytes of records and dense operands read from the HBM port",
    "values_pruned": "DMA: values of sparse transfers pruned (|v| < threshold)",
    "values_kept": "DMA: values of sparse transfers kept",
    **{f"busy_{mode.name.lower()}": f"Channel-cycles whose oldest unfinished instruction "
                                    f"is a {mode.name} job (module docstring)"
       for mode in OmniMode},
}

#: The per-PE-mode counters (a subset of :data:`COUNTERS`), by :class:`~.config.OmniMode`.
MODE_COUNTERS = {mode: f"busy_{mode.name.lower()}" for mode in OmniMode}


def mode_queue_depth(channel):
    """Entries of the top's per-channel queue of instructions given to a channel whose
    results are not all out (their mode and result beats): every instruction the channel
    can hold, ``instruction_depth`` in its collector, ``activation_slots`` words in its
    activation units, one gathered beat and ``result_depth`` beats in its output queue,
    plus one."""
    return (channel.instruction_depth + channel.activation_slots + channel.result_depth
            + 2)


#: Read-only configuration registers.
CONSTANTS = ("channels", "pes_per_channel", "swing_channels", "max_tasks", "hidden_size",
             "input_size")


def dma_port_names(port):
    """The top's member names of DMA ``port`` (0 to ``hbm_ports - 1``), by the DMA's port
    they carry (``wr_cmd``, ``wr_data``, ``rd_cmd``, ``rd_data``, ``m_axi``):
    ``s_dma_wr_cmd`` ... ``m_axi`` for port 0, ``s_dma{p}_wr_cmd`` ... ``m_axi{p}`` for
    port ``p``."""
    tag = str(port) if port else ""
    return {"wr_cmd": f"s_dma{tag}_wr_cmd", "wr_data": f"s_dma{tag}_wr_data",
            "rd_cmd": f"s_dma{tag}_rd_cmd", "rd_data": f"m_dma{tag}_rd_data",
            "m_axi": f"m_axi{tag}"}


def _allocation(config):
    """``(ew_mask, swing_mask)`` of the static split of the configuration's training
    graph (:func:`.workload.static_split`, one tile per channel) and its swing channels
    (:func:`.workload.allocation`)."""
    workload = Workload(input_size=config.input_size, hidden_size=config.hidden_size,
                        layers=config.layers, length=config.seq_len, batch=config.batch)
    r2a = config.r2a
    split = static_split(training_graph(workload, tiles=config.channels), r2a)
    groups, swing = allocation(r2a, split, dynamic=True)
    return (sum(g << c for c, g in enumerate(groups)),
            sum(int(s) << c for c, s in enumerate(swing)))


def register_map(config):
    """The AXI4-Lite :class:`~nnrtl.hw.bus.RegisterMap` of an η-LSTM top: control, status,
    the task being loaded, the groups, θ, configuration constants and the counters."""
    if not isinstance(config, OmniConfig):
        raise TypeError(f"config must be an OmniConfig, not {config!r}")
    ew_mask, swing_mask = _allocation(config)
    mask_width = 32 if config.channels <= 32 else 64
    return RegisterMap([
        Register("control", Access.PULSE, doc="Write 1 to a field to pulse it",
                 fields=[Field("start", 0, doc="run the loaded tasks (latches ew_mask and "
                               "swing_mask, clears the R2A counters)"),
                         Field("push", 1, doc="append task_kind / task_length / task_deps "
                               "to the task table"),
                         Field("clear_tasks", 2, doc="empty the task table"),
                         Field("clear", 3, doc="zero the DMA counters and push_dropped")]),
        Register("status", Access.RO, doc="State of the run, the DMA and sticky errors",
                 fields=[Field("running", 0, doc="a run is under way"),
                         Field("finished", 1, doc="the last run finished (every task done)"),
                         Field("dma_write_busy", 2), Field("dma_read_busy", 3),
                         Field("dma_error", 4, doc="an AXI4 response was not OKAY"),
                         Field("push_dropped", 5, doc="a push found the table full or a run "
                               "under way; sticky until clear")]),
        Register("task_count", Access.RO, doc="Tasks in the table"),
        Register("task_kind", Access.RW, doc="Kind of the next pushed task: 0 MatMul, 1 EW"),
        Register("task_length", Access.RW, doc="Result beats of the next pushed task (its "
                 "end: the last beat on m_result)"),
        Register("task_deps", Access.RW, width=64 if config.max_tasks > 32 else 32,
                 doc="Dependencies of the next pushed task: bit k = needs task k"),
        Register("ew_mask", Access.RW, width=mask_width, reset=ew_mask,
                 doc="Bit c: channel c is in the EW group (reset: the static split)"),
        Register("swing_mask", Access.RW, width=mask_width, reset=swing_mask,
                 doc="Bit c: channel c swings (reset: the swing channels)"),
        Register("threshold", Access.RW, reset=config.threshold_bits,
                 doc="θ of the DMA's compression, fp32 bits (reset: prune_threshold)"),
        *(Register(name, Access.RO, doc=f"Configuration: {name}") for name in CONSTANTS),
        *(Register(name, Access.RO, width=64, doc=doc) for name, doc in COUNTERS.items()),
    ])


class OmniTop(wiring.Component):
    """The η-LSTM top (module docstring).

    Parameters
    ----------
    config : OmniConfig

    Attributes
    ----------
    s_axil : In(AXI4LiteSignature)
        :attr:`registers`.
    m_task : Out(stream.Signature(r2a.issue_layout())).array(channels)
        The task each channel is to run (``task``, ``kind``, ``length``, ``switch``).
    s_command, s_broadcast : In(stream.Signature(...)).array(channels)
        Each channel's instructions and broadcast words (:class:`~.channel.Channel`'s
        ``i_command``, ``i_broadcast``).
    s_operand : In(stream.Signature(operand_layout(channel))).array(channels)
        Each channel's lane operands, one beat a cycle, ``which`` naming the PEs' input
        queue (Notes below).
    m_result : Out(stream.Signature(channel.beat_layout)).array(channels)
        Each channel's results.
    s_dma_wr_cmd, s_dma_wr_data, s_dma_rd_cmd : In(stream.Signature(...))
    m_dma_rd_data : Out(stream.Signature(...))
        The first DMA's descriptors and data (:class:`~.dma.OmniDMA`); DMA ``p`` of the
        others has them as ``s_dma{p}_wr_cmd`` ... (:func:`dma_port_names`).
    m_axi : Out(axi4_signature(dma))
        The first HBM port; ``m_axi{p}`` the others' (``hbm_ports`` in all).
    registers : RegisterMap

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`OmniConfig`.

    Notes
    -----
    **Decisions the paper leaves open ([U] of spec §3.6)**

    - *Kinds of the counters*: ``busy_matmul`` / ``busy_ew`` count the R2A's two kinds
      (MatMul, EW), the granularity at which channels are allocated; the four PE modes
      have counters of their own (next point).
    - *Per-mode counters* [U, decided here]: channel-cycles, not PE-cycles, attributed to
      the mode of the oldest instruction whose results are not all out. The channel runs
      its lanes in lockstep on one instruction stream (SIMT), so every active PE of a
      channel is in the same mode; the top sees each instruction's mode on its command port
      and its end on the result port (a queue of :func:`mode_queue_depth` entries per
      channel), so the counters need no signal from inside the PEs; and they partition a
      task's cycles: with the scratchpad keeping up, ``busy_mvm + busy_ew_mul + busy_outer
      + busy_ew_add == busy_matmul + busy_ew``, each task's cycles split at its
      instructions' last result beats (the model: :func:`nnrtl.gen.omni.perf.
      top_mode_cycles`). A cycle of a held task with no instruction given or offered (the
      scratchpad late with the next one) counts in no mode. PE-cycles would follow by
      weighting with the instructions' ``lanes``, a multiplier per channel the counters
      avoid.
    - *Scratchpad*: outside this top. The paper gives neither its size, banking nor address
      generation (§3.6 [U]); each channel's scratchpad port is brought out: instructions,
      one broadcast word a cycle, one result beat a cycle and *one operand beat a cycle*
      (``s_operand[c]``, ``which`` naming Input1 or Input2; a register per input passes one
      beat a cycle on). One beat rather than the channel's two operand streams because the
      40-channel top's input ports must stay under Amaranth's 65,536 top-level input bits
      (two 1,024-bit streams a channel need 84,400): MVM and outer products (one lane
      operand an element) run at full rate, element-wise operations with two lane operands
      at one element every two cycles. The benches (:mod:`nnrtl.sim.tb.omni.top`) are the
      scratchpad, streaming each task's steps of :mod:`.channel_program` in program order
      with the read-after-write order a real scratchpad keeps.
    - *DMA side*: ``hbm_ports`` DMAs, each on its own AXI4 port (an HBM pseudo-channel
      port of :data:`~.top_config.HBM_DATA_WIDTH` bits), each with its own descriptor and
      data streams (``s_dma_wr_cmd``, ``s_dma_wr_data``, ``s_dma_rd_cmd``,
      ``m_dma_rd_data`` for the first, :func:`dma_port_names`), which are the
      scratchpad's: it places each record on a port and gives its addresses (a
      pseudo-channel's own space). Independent engines rather than one DMA striping over
      the ports, because one DMA moves one beat a cycle, a port's worth. ``threshold``
      (θ, fp32 bits, reset to ``prune_threshold``) and ``clear`` are shared; the byte and
      value counters are the DMAs' sums, the status bits their OR.
    - *Task table loading* through AXI4-Lite (one task = three register writes and a push):
      the table is a window of at most ``max_tasks`` tasks; a push while a run is under way
      or the table is full is dropped and sets the sticky ``status.push_dropped``.
    - *Several layers and timestamps* share the channels; the channel RTL is one
      configuration whose ``max_length`` covers every layer's longest job.
    """

    def __init__(self, config):
        if not isinstance(config, OmniConfig):
            raise TypeError(f"config must be an OmniConfig, not {config!r}")
        self._config = config
        self._registers = register_map(config)
        channel, r2a, dma = config.channel, config.r2a, config.dma
        n = config.channels
        super().__init__({
            "s_axil": In(AXI4LiteSignature(self._registers.addr_width)),
            "m_task": Out(stream.Signature(r2a.issue_layout())).array(n),
            "s_command": In(stream.Signature(channel.command_layout)).array(n),
            "s_operand": In(stream.Signature(operand_layout(channel))).array(n),
            "s_broadcast": In(stream.Signature(channel.fmt.width)).array(n),
            "m_result": Out(stream.Signature(channel.beat_layout)).array(n),
            **{name: member for port in range(config.hbm_ports)
               for name, member in zip(dma_port_names(port).values(), (
                   In(stream.Signature(write_command_layout(dma))),
                   In(stream.Signature(32)),
                   In(stream.Signature(read_command_layout(dma))),
                   Out(stream.Signature(output_layout(dma))),
                   Out(axi4_signature(dma))))},
        })

    config = property(lambda self: self._config)
    registers = property(lambda self: self._registers)

    def elaborate(self, platform):
        m = Module()
        config = self._config
        n = config.channels
        m.submodules.registers = regfile = RegisterFile(self._registers)
        wiring.connect(m, wiring.flipped(self.s_axil), regfile.s_axil)
        regs = regfile.regs
        control = {field.name: regs.control[field.offset]
                   for field in self._registers["control"].fields}
        m.submodules.r2a = r2a = R2AScheduler(config.r2a)
        dmas = []
        for port in range(config.hbm_ports):
            dmas.append(OmniDMA(config.dma))
            m.submodules[f"dma{port or ''}"] = dmas[-1]

        # -- channels: their streams are the top's scratchpad ports ----------------------
        modes = []                   # per channel: (counted, mode) this cycle
        for c in range(n):
            unit = Channel(config.channel)
            m.submodules[f"channel_{c}"] = shared(unit, key=config.channel)
            modes.append(self._mode_tracker(m, c, unit))
            wiring.connect(m, wiring.flipped(self.s_broadcast[c]), unit.i_broadcast)
            wiring.connect(m, unit.o, wiring.flipped(self.m_result[c]))
            # the operand port: a beat for Input1 or Input2, each held in a register
            # that passes one beat a cycle on
            port = self.s_operand[c]
            for which, member in enumerate((unit.i_input1, unit.i_input2)):
                accept = port.valid & (port.payload.which == which) & (
                    ~member.valid | member.ready)
                with m.If(accept):
                    m.d.sync += [member.valid.eq(1), member.payload.eq(port.payload.data)]
                with m.Elif(member.ready):
                    m.d.sync += member.valid.eq(0)
            m.d.comb += port.ready.eq(Mux(port.payload.which, ~unit.i_input2.valid
                                          | unit.i_input2.ready,
                                          ~unit.i_input1.valid | unit.i_input1.ready))

        # -- dispatch: R2A issue ports, and done at a task's last result beat -------------
        done = []
        holding = Signal(n)          # channel c holds a task (taken on m_task, not done)
        holding_ew = Signal(n)       # ... of kind EW
        for c in range(n):
            task = self.m_task[c]
            wiring.connect(m, r2a.issue[c], wiring.flipped(task))
            length = Signal.like(task.payload.length, name=f"length_{c}")
            beats = Signal.like(task.payload.length, name=f"beats_{c}")
            result = self.m_result[c]
            beat = result.valid & result.ready
            last = Signal(name=f"done_{c}")
            m.d.comb += last.eq(holding[c] & beat & (beats + 1 == length))
            done.append(last)
            with m.If(task.valid & task.ready):
                m.d.sync += [length.eq(task.payload.length), beats.eq(0),
                             holding[c].eq(1), holding_ew[c].eq(task.payload.kind)]
            with m.Elif(last):
                m.d.sync += holding[c].eq(0)
            with m.Elif(beat):
                m.d.sync += beats.eq(beats + 1)
        m.d.comb += r2a.done.eq(Cat(done))

        # -- task table loading and the run ----------------------------------------------
        push_dropped = Signal()
        m.d.comb += [
            r2a.load.valid.eq(control["push"]),
            r2a.load.payload.kind.eq(regs.task_kind[0]),
            r2a.load.payload.length.eq(regs.task_length),
            r2a.load.payload.deps.eq(regs.task_deps),
            r2a.clear.eq(control["clear_tasks"]),
            r2a.start.eq(control["start"]),
            r2a.ew_mask.eq(regs.ew_mask),
            r2a.swing_mask.eq(regs.swing_mask),
        ]
        with m.If(control["clear"]):
            m.d.sync += push_dropped.eq(0)
        with m.Elif(control["push"] & ~r2a.load.ready):
            m.d.sync += push_dropped.eq(1)

        # -- the DMA -----------------------------------------------------------------------
        for port, dma in enumerate(dmas):
            names = dma_port_names(port)
            for unit_port in ("wr_cmd", "wr_data", "rd_cmd"):
                wiring.connect(m, wiring.flipped(getattr(self, names[unit_port])),
                               getattr(dma, unit_port))
            wiring.connect(m, dma.rd_data, wiring.flipped(getattr(self, names["rd_data"])))
            wiring.connect(m, dma.m_axi, wiring.flipped(getattr(self, names["m_axi"])))
            m.d.comb += [dma.threshold.eq(regs.threshold), dma.clear.eq(control["clear"])]

        def any_of(name):
            return Cat(*(getattr(dma, name) for dma in dmas)).any()

        def sum_of(name):
            return sum(getattr(dma, name) for dma in dmas)

        # -- counters and status -----------------------------------------------------------
        busy_matmul = Signal(64)
        busy_ew = Signal(64)
        busy_mode = {mode: Signal(64, name=name) for mode, name in MODE_COUNTERS.items()}
        with m.If(control["start"] & ~r2a.running):
            m.d.sync += [busy_matmul.eq(0), busy_ew.eq(0),
                         *(counter.eq(0) for counter in busy_mode.values())]
        with m.Elif(r2a.running):
            m.d.sync += [busy_matmul.eq(busy_matmul + sum(holding & ~holding_ew)),
                         busy_ew.eq(busy_ew + sum(holding & holding_ew))]
            for mode, counter in busy_mode.items():
                in_mode = Cat(holding[c] & counted & (mode_c == mode)
                              for c, (counted, mode_c) in enumerate(modes))
                m.d.sync += counter.eq(counter + sum(in_mode))
        constants = {"channels": n, "pes_per_channel": config.pes_per_channel,
                     "swing_channels": config.swing_channels, "max_tasks": config.max_tasks,
                     "hidden_size": config.hidden_size, "input_size": config.input_size}
        m.d.comb += [getattr(regs, name).eq(value) for name, value in constants.items()]
        m.d.comb += [
            regs.status.eq(Cat(r2a.running, r2a.finished, any_of("wr_busy"),
                               any_of("rd_busy"), any_of("error"), push_dropped)),
            regs.task_count.eq(r2a.count),
            regs.cycles.eq(r2a.cycles),
            regs.busy_matmul.eq(busy_matmul),
            regs.busy_ew.eq(busy_ew),
            regs.group_busy_matmul.eq(r2a.busy_matmul),
            regs.group_busy_ew.eq(r2a.busy_ew),
            regs.swings.eq(r2a.swings),
            regs.returns.eq(r2a.returns),
            regs.bytes_written.eq(sum_of("bytes_written")),
            regs.bytes_read.eq(sum_of("bytes_read")),
            regs.values_pruned.eq(sum_of("values_pruned")),
            regs.values_kept.eq(sum_of("values_kept")),
            *(getattr(regs, MODE_COUNTERS[mode]).eq(counter)
              for mode, counter in busy_mode.items()),
        ]
        return m

    def _mode_tracker(self, m, c, unit):
        """Channel ``c``'s command port into ``unit``, and a queue of the mode and result
        beats of every instruction given to it whose results are not all out on
        ``m_result[c]`` (:func:`mode_queue_depth` entries: never full, the command port
        waits if it were). Returns ``(counted, mode)``: the mode of the oldest such
        instruction, or of the instruction offered on ``s_command[c]`` when none is
        left (the channel is waiting for it), and whether there is one of either."""
        channel = self._config.channel
        port = self.s_command[c]
        command = port.payload
        results = Signal.like(command.length, name=f"results_{c}")
        m.d.comb += results.eq(Mux((command.mode == OmniMode.MVM) | (command.length == 0),
                                   1, command.length))
        entry = data.StructLayout({"mode": OmniMode, "results": results.shape()})
        queue = SyncFIFO(width=entry.size, depth=mode_queue_depth(channel))
        m.submodules[f"mode_queue_{c}"] = queue
        head = data.View(entry, queue.r_data)
        beat = Signal.like(results, name=f"head_beat_{c}")
        out = self.m_result[c]
        result_taken = out.valid & out.ready & queue.r_rdy
        last = beat + 1 == head.results
        m.d.comb += [
            unit.i_command.valid.eq(port.valid & queue.w_rdy),
            unit.i_command.payload.eq(command),
            port.ready.eq(unit.i_command.ready & queue.w_rdy),
            queue.w_en.eq(port.valid & port.ready),
            queue.w_data.eq(Cat(command.mode, results)),
            queue.r_en.eq(result_taken & last),
        ]
        with m.If(result_taken):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))
        mode = Signal(OmniMode, name=f"mode_{c}")
        m.d.comb += mode.eq(Mux(queue.r_rdy, head.mode.as_value(), command.mode.as_value()))
        return queue.r_rdy | port.valid, mode


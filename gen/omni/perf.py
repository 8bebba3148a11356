"""Cycle models of the η-LSTM top (:class:`~nnrtl.hw.omni.top.OmniTop`).

:func:`predict` (the engine's hook)
    One training iteration of the configuration's LSTM (``input_size``, ``hidden_size``,
    ``layers``, ``seq_len``, ``batch``) on its channels under R2A: the task graph of
    :func:`.workload.training_graph` (one tile per channel) scheduled by the R2A's cycle
    model :func:`.r2a.schedule`, dynamic (with the swing channels) and static (the same
    split, no swinging). Task lengths are PE-cycles at one MAC, multiply or add per PE a
    cycle, σ / tanh serialized (:mod:`.workload`).
:func:`top_schedule` (the bench's ``model_cycles``)
    The top's own task graph (:func:`nnrtl.hw.omni.top_program.top_tasks`: the cell
    programs cut into four tasks a cell) through the same R2A model (no switch cost: the
    programs carry their own mode switches), each task lasting :func:`task_cycles`.
:func:`task_cycles`
    A task on one channel, gapless, step by step: a step's first element goes in when
    the lanes have taken the previous step's elements (plus the PEs' mode-switch wait,
    :meth:`~nnrtl.hw.omni.config.OmniPEConfig.switch_cycles`) and every vector it reads
    has its last result out (the scratchpad's read-after-write order); its elements go
    in one a cycle, or one every two cycles for an element-wise job with both operands
    from the lanes (the top's one operand port); results leave
    :meth:`~nnrtl.hw.omni.config.OmniPEConfig.result_offset` after the start, through an
    activation unit one word a cycle behind its latency. Measured on the small preset
    (``nnrtl sim omni --preset small --backpressure none``): the RTL takes 3,337 cycles,
    this model 3,023 (-9.4 %; the channel's own estimate,
    :meth:`~nnrtl.hw.omni.channel_config.ChannelConfig.program_cycles`, gives 2,187).
"""

import dataclasses

from ...hw.omni.channel_config import Activation, Source
from ...hw.omni.channel_timing import program_cycles
from ...hw.omni.config import OmniMode
from ...hw.omni.top import register_map
from ...hw.omni.top_config import OmniConfig
from ...hw.omni.top_program import top_tasks
from ..errors import UsageError
from .r2a import schedule
from .workload import Task, training_graph

__all__ = ["workload_of", "predict", "top_schedule", "top_task_cycles", "task_cycles",
           "ew_channels"]


def workload_of(config):
    """The :class:`.accounting.Workload` of ``config``'s LSTM."""
    from .accounting import Workload
    return Workload(config.input_size, config.hidden_size, config.layers, config.seq_len,
                    config.batch)


def ew_channels(config):
    """Channels of the EW group at reset (the ``ew_mask`` register's reset value)."""
    return bin(register_map(config)["ew_mask"].reset).count("1")


def predict(config, workload):
    """The engine hook. ``workload`` may hold ``ms1`` (bool), ``kept`` (MS2's kept cells,
    ``layers x seq_len`` booleans), ``density`` (MS1's surviving share of BP-EW-P2).

    Returns
    -------
    dict
        ``cycles``, ``useful_macs`` (MatMul operations), ``useful_ops`` (every PE
        operation), ``utilization`` (useful operations per PE and cycle), ``swings``,
        ``returns``, ``busy`` (channel-cycles per task kind), ``ew_channels``,
        ``static_cycles``, ``static_utilization``, ``tasks``.
    """
    if not isinstance(config, OmniConfig):
        raise UsageError(f"config must be an OmniConfig, not {config!r}")
    workload = dict(workload or {})
    unknown = set(workload) - {"ms1", "kept", "density"}
    if unknown:
        raise UsageError(f"omni predict takes ms1, kept and density, not "
                         f"{', '.join(sorted(unknown))}")
    tasks = training_graph(workload_of(config), tiles=config.channels,
                           ms1=bool(workload.get("ms1", False)), kept=workload.get("kept"),
                           density=workload.get("density", 1.0))
    dynamic = schedule(tasks, config.r2a, dynamic=True)
    static = schedule(tasks, config.r2a, ew_channels=dynamic.ew_channels, dynamic=False)
    return {"cycles": dynamic.cycles,
            "useful_macs": sum(t.ops for t in tasks if t.kind == "matmul"),
            "useful_ops": dynamic.useful, "utilization": dynamic.utilization,
            "swings": dynamic.swings, "returns": dynamic.returns,
            "busy": dynamic.busy_kind, "ew_channels": dynamic.ew_channels,
            "static_cycles": static.cycles, "static_utilization": static.utilization,
            "tasks": len(tasks)}


def task_cycles(task):
    """Cycles of ``task`` (a :class:`~nnrtl.hw.omni.top_program.CellTask`) on one
    channel, first element in to last result out (module docstring)."""
    channel = task.channel
    pe = channel.pe
    free, unit_free, last, previous = 0, 0, 0, None
    ends = {}             # vector -> the cycle its readers' first element can go in
    for step in task.steps:
        instruction = step.instruction
        job = instruction.job
        start = max([free] + [ends[access.name] for access in (step.operand1, step.operand2)
                              if access.name in ends])
        if previous is not None and job.length >= pe.switch_length:
            start += pe.switch_cycles(previous, job)
        rate = 2 if (job.mode in (OmniMode.EW_MUL, OmniMode.EW_ADD)
                     and instruction.source1 is Source.LANES
                     and instruction.source2 is Source.LANES) else 1
        first = start + pe.result_offset(job)
        out = first if job.mode is OmniMode.MVM else first + (job.results - 1) * rate
        if instruction.activation is not Activation.NONE:
            unit_free = max(unit_free, first) + instruction.lanes * job.results
            out = max(out, unit_free) + channel.activation_latency + 1
        # a reader's operands are offered the cycle after the last beat is seen, and
        # enter the PEs the cycle after that
        ends[step.result.name] = max(ends.get(step.result.name, 0), out + 2)
        last = max(last, out + 1)
        free = start + job.length * rate + (pe.reduction_cycles if job.mode is OmniMode.MVM
                                            else 0)
        previous = job
    return last


def top_schedule(config, tasks=None):
    """The R2A model's :class:`~.r2a.Schedule` of the top's task graph (module
    docstring), with the reset split of the ``ew_mask`` register."""
    tasks = top_tasks(config) if tasks is None else tasks
    pes = config.pes_per_channel
    graph = [Task(task.id, task.kind, len(task.steps) * pes, 0, task.deps,
                  task.part, task.layer, task.step) for task in tasks]
    r2a = dataclasses.replace(config.r2a, switch_cycles=0)
    return schedule(graph, r2a, ew_channels=ew_channels(config), dynamic=True,
                    durations=[top_task_cycles(task) for task in tasks])


def top_task_cycles(task):
    """``D`` of ``task`` on the top: the cycles from the scratchpad taking it on
    ``m_task`` to its last result beat, the exact channel cycle model
    (:func:`~nnrtl.hw.omni.channel_timing.program_cycles`) of its steps with the top's
    operand port (``operand_port=True``)."""
    return program_cycles(task.channel, list(task.steps), operand_port=True)

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
    programs cut into four tasks a cell) through the same R2A model, which is the R2A
    RTL's dispatch cycle for cycle (a task decided in ``a`` is offered in ``a + 1``, its
    channel and successors free the cycle after its done), each task holding its
    channel :func:`top_task_cycles`. No R2A switch cost (``switch_cycles=0``): the top
    sees a task's end at its last result beat, so the PEs' mode-switch waits are inside
    the programs' cycles, which the channel model counts.
:func:`top_task_cycles`
    ``D`` of a task: the exact channel cycle model of its steps with the top's operand
    port (its docstring).
:func:`top_mode_cycles` / :func:`top_mode_busy` (the bench's ``model_busy_*``)
    The top's per-PE-mode counters (``busy_mvm`` ...): a task's cycles split at its
    instructions' last result beats, instruction ``k`` holding the channel from the end
    of ``k - 1`` to its own last beat. Step ``k``'s last beat is the channel cycle
    model's count for the program cut after step ``k`` (the channel is in order: a later
    instruction never delays an earlier one). The counters are sums over tasks, so they
    do not depend on the schedule.

:func:`step_cycles`
    A training step's tiled run (:class:`.top_passes.StepGraph`) in windows of
    ``max_tasks`` tasks, each :func:`top_schedule` from an idle top, summed.
:func:`step_memory` / :func:`step_bound`
    The HBM term (:mod:`.memory`): the bytes a step of ``config``'s LSTM moves, the
    cycles the top's ports need for them, and the step's time ``max(compute, memory)``
    with the bound named. The compute counters above do not wait on memory (the benches
    feed the channels); the bound says what a step would take if the HBM set it.

Without gaps or stalls these equal the RTL's counters (Amaranth and Verilator; tests:
``tests/omni/gen/test_omni_perf.py``, ``test_omni_train_top.py``, ``tests/omni/sim/``).
"""

import dataclasses

from ...hw.omni.channel_timing import program_cycles
from ...hw.omni.top import MODE_COUNTERS, register_map
from ...hw.omni.top_config import OmniConfig
from ...hw.omni.top_program import top_tasks
from ..errors import UsageError
from .memory import PAPER_CLOCK_HZ, hbm_bandwidth, memory_cycles, step_bytes
from .memory import step_time
from .r2a import schedule
from .workload import Task, training_graph

__all__ = ["workload_of", "predict", "top_schedule", "top_task_cycles", "top_mode_cycles",
           "top_mode_busy", "ew_channels", "step_cycles", "step_memory", "step_bound"]


def workload_of(config):
    """The :class:`.accounting.Workload` of ``config``'s LSTM."""
    from .accounting import Workload
    return Workload(input_size=config.input_size, hidden_size=config.hidden_size,
                    layers=config.layers, length=config.seq_len, batch=config.batch)


def ew_channels(config):
    """Channels of the EW group at reset (the ``ew_mask`` register's reset value)."""
    return bin(register_map(config)["ew_mask"].reset).count("1")


def predict(config, workload):
    """The engine hook. ``workload`` may hold ``ms1`` (bool), ``kept`` (MS2's kept cells,
    ``layers x seq_len`` booleans), ``density`` (MS1's surviving share of BP-EW-P2),
    ``hbm_ports`` (the memory term's ports, default the configuration's).

    Returns
    -------
    dict
        ``cycles``, ``useful_macs`` (MatMul operations), ``useful_ops`` (every PE
        operation), ``utilization`` (useful operations per PE and cycle), ``swings``,
        ``returns``, ``busy`` (channel-cycles per task kind), ``ew_channels``,
        ``static_cycles``, ``static_utilization``, ``tasks``; the memory term
        (:func:`step_bound` of the dynamic cycles): ``memory_bytes``,
        ``memory_cycles``, ``bound`` (``"compute"`` / ``"memory"``), ``bound_cycles``.
    """
    if not isinstance(config, OmniConfig):
        raise UsageError(f"config must be an OmniConfig, not {config!r}")
    workload = dict(workload or {})
    unknown = set(workload) - {"ms1", "kept", "density", "hbm_ports"}
    if unknown:
        raise UsageError(f"omni predict takes ms1, kept, density and hbm_ports, not "
                         f"{', '.join(sorted(unknown))}")
    tasks = training_graph(workload_of(config), tiles=config.channels,
                           ms1=bool(workload.get("ms1", False)), kept=workload.get("kept"),
                           density=workload.get("density", 1.0))
    dynamic = schedule(tasks, config.r2a, dynamic=True)
    static = schedule(tasks, config.r2a, ew_channels=dynamic.ew_channels, dynamic=False)
    ms1 = bool(workload.get("ms1", False))
    bound = step_bound(config, dynamic.cycles, kept=workload.get("kept"),
                       density=workload.get("density", 1.0) if ms1 else None,
                       ports=workload.get("hbm_ports"))
    return {"cycles": dynamic.cycles,
            "useful_macs": sum(t.ops for t in tasks if t.kind == "matmul"),
            "useful_ops": dynamic.useful, "utilization": dynamic.utilization,
            "swings": dynamic.swings, "returns": dynamic.returns,
            "busy": dynamic.busy_kind, "ew_channels": dynamic.ew_channels,
            "static_cycles": static.cycles, "static_utilization": static.utilization,
            "tasks": len(tasks), "memory_bytes": bound["memory_bytes"],
            "memory_cycles": bound["memory_cycles"], "bound": bound["bound"],
            "bound_cycles": bound["cycles"]}


def top_schedule(config, tasks=None, *, dynamic=True, ew_channels=None):
    """The R2A model's :class:`~.r2a.Schedule` of the top's task graph (module
    docstring), with the reset split of the ``ew_mask`` register (or ``ew_channels``
    EW-group channels); ``dynamic=False``: no swing channels (``swing_mask`` 0)."""
    tasks = top_tasks(config) if tasks is None else tasks
    pes = config.pes_per_channel
    durations = [top_task_cycles(task) for task in tasks]
    graph = [Task(id=task.id, kind=task.kind, ops=cycles * pes, activations=0,
                  deps=task.deps, phase=task.part, layer=task.layer, step=task.step)
             for task, cycles in zip(tasks, durations)]
    r2a = dataclasses.replace(config.r2a, switch_cycles=0)
    split = (bin(register_map(config)["ew_mask"].reset).count("1") if ew_channels is None
             else ew_channels)
    return schedule(graph, r2a, ew_channels=split, dynamic=dynamic, durations=durations)


def top_task_cycles(task):
    """``D`` of ``task`` on the top: the cycles from the scratchpad taking it on
    ``m_task`` to its last result beat, the exact channel cycle model
    (:func:`~nnrtl.hw.omni.channel_timing.program_cycles`) of its steps with the top's
    operand port (``operand_port=True``: one lane-operand beat a cycle tagged Input1 /
    Input2, through a register per input, so an element-wise step with two lane operands
    takes two cycles an element). The scratchpad takes a task on ``m_task`` in cycle
    ``h`` and offers its first command in ``h + 1``; the channel is drained between
    tasks (a task ends at its last result beat), the state the model starts from."""
    return program_cycles(task.channel, list(task.steps), operand_port=True)


def top_mode_cycles(task):
    """``{OmniMode: cycles}`` of ``task`` on the top (module docstring): the cycles of
    :func:`top_task_cycles` split by the mode of the oldest unfinished instruction; they
    sum to :func:`top_task_cycles`."""
    steps = list(task.steps)
    split = dict.fromkeys(MODE_COUNTERS, 0)
    before = 0
    for index, step in enumerate(steps):
        end = program_cycles(task.channel, steps[:index + 1], operand_port=True)
        split[step.instruction.job.mode] += end - before
        before = end
    return split


def top_mode_busy(config, tasks=None):
    """The per-mode counters of one run of the top's task graph, by counter name
    (:data:`~nnrtl.hw.omni.top.MODE_COUNTERS`): :func:`top_mode_cycles` summed over the
    tasks."""
    tasks = top_tasks(config) if tasks is None else tasks
    total = dict.fromkeys(MODE_COUNTERS.values(), 0)
    for task in tasks:
        for mode, cycles in top_mode_cycles(task).items():
            total[MODE_COUNTERS[mode]] += cycles
    return total


def step_cycles(config, tasks, *, dynamic=True, ew_channels=None):
    """The R2A model's cycles of one run of a training step's ``tasks`` on ``config``
    (module docstring; ``dynamic``, ``ew_channels``: :func:`top_schedule`'s):
    ``(cycles, swings)``, summed over the windows."""
    from .top_passes import windows

    cycles = swings = 0
    for _, window in windows(tasks, config.max_tasks):
        model = top_schedule(config, window, dynamic=dynamic, ew_channels=ew_channels)
        cycles += model.cycles
        swings += model.swings
    return cycles, swings


def step_memory(config, *, kept=None, density=None, ports=None, clock_hz=PAPER_CLOCK_HZ):
    """The HBM term of one training step of ``config``'s LSTM (:mod:`.memory`):
    ``{"bytes" (:func:`.memory.step_bytes`' categories and total), "bandwidth"
    (:func:`.memory.hbm_bandwidth`), "memory_cycles"}``. ``kept``: MS2's kept cells;
    ``density``: MS1's surviving share of the P1 values (``None``: MS1 off); ``ports``
    HBM ports of the top's width at ``clock_hz`` (default ``config.hbm_ports``)."""
    moved = step_bytes(workload_of(config), density=density, kept=kept)
    bandwidth = hbm_bandwidth(config.hbm_ports if ports is None else ports, clock_hz)
    return {"bytes": moved, "bandwidth": bandwidth,
            "memory_cycles": memory_cycles(moved["total"], bandwidth)}


def step_bound(config, compute_cycles, **memory):
    """:func:`.memory.step_time` of ``compute_cycles`` and :func:`step_memory`
    (``memory``: its keywords), plus ``memory_bytes`` (the total) and ``ports``."""
    term = step_memory(config, **memory)
    return dict(step_time(compute_cycles, term["memory_cycles"]),
                memory_bytes=term["bytes"]["total"], ports=term["bandwidth"]["ports"])

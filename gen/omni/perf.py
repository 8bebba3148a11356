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
    programs cut into four tasks a cell) through the same R2A model, each task lasting
    its channel program's estimate
    (:meth:`~nnrtl.hw.omni.channel_config.ChannelConfig.program_cycles`) and no switch
    cost (the programs carry their own mode switches). The estimate leaves out the
    scratchpad's read-after-write waits and the top's one-operand-beat port (EW
    operations with two lane operands at one element every two cycles), so the RTL takes
    longer: the factor measured is in ``tests/gen/test_omni_engine.py``.
"""

import dataclasses

from ...hw.omni.top import register_map
from ...hw.omni.top_config import OmniConfig
from ...hw.omni.top_program import top_tasks
from ..errors import UsageError
from .r2a import schedule
from .workload import Task, training_graph

__all__ = ["workload_of", "predict", "top_schedule", "ew_channels"]


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


def top_schedule(config, tasks=None):
    """The R2A model's :class:`~.r2a.Schedule` of the top's task graph (module
    docstring), with the reset split of the ``ew_mask`` register."""
    tasks = top_tasks(config) if tasks is None else tasks
    pes = config.pes_per_channel
    graph = [Task(task.id, task.kind, max(1, task.model_cycles) * pes, 0, task.deps,
                  task.part, task.layer, task.step) for task in tasks]
    r2a = dataclasses.replace(config.r2a, switch_cycles=0)
    return schedule(graph, r2a, ew_channels=ew_channels(config), dynamic=True)

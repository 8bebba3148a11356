"""The task graph of one LSTM training iteration, as the R2A scheduler sees it (spec §1, §3.4):
:mod:`nnrtl.hw.omni.workload` builds it (the tiles, operation counts and dependency rules
are written there, beside R2A's static split the top's registers take); here the same
functions raise :class:`UsageError`, and :func:`check_graph` checks a graph the scheduler
model (:mod:`.r2a`) is given.
"""

from ...hw.omni import workload as _graph
from ...hw.omni.workload import KINDS, PHASES, Task, estimate
from ..errors import UsageError

__all__ = ["KINDS", "PHASES", "Task", "training_graph", "estimate", "check_graph", "kept_mask"]


def kept_mask(workload, kept):
    """:func:`nnrtl.hw.omni.workload.kept_mask`; :class:`UsageError` for a ``kept`` of
    another shape than ``workload``'s."""
    try:
        return _graph.kept_mask(workload, kept)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None


def training_graph(workload, *, tiles, ms1=False, kept=None, density=1.0):
    """The tasks of one training iteration (:func:`nnrtl.hw.omni.workload.training_graph`);
    :class:`UsageError` for arguments it refuses."""
    try:
        return _graph.training_graph(workload, tiles=tiles, ms1=ms1, kept=kept,
                                     density=density)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None


def check_graph(tasks):
    """Raise :class:`UsageError` unless ``tasks`` is a graph the scheduler can run: ids
    0..n-1 in order, kinds of :data:`KINDS`, positive ``ops``, non-negative
    ``activations``, dependencies on existing other tasks and no cycle."""
    count = len(tasks)
    for position, task in enumerate(tasks):
        if not isinstance(task, Task) or task.id != position:
            raise UsageError(f"task {position} must be a Task with id {position}, not "
                             f"{task!r}")
        if task.kind not in KINDS:
            raise UsageError(f"task {position}: kind must be one of {', '.join(KINDS)}, not "
                             f"{task.kind!r}")
        if task.ops < 1 or task.activations < 0:
            raise UsageError(f"task {position}: ops must be positive and activations not "
                             f"negative, not {task.ops} and {task.activations}")
        for dep in task.deps:
            if not 0 <= dep < count or dep == position:
                raise UsageError(f"task {position}: dependency {dep} is not another task "
                                 f"of the graph (0..{count - 1})")
    state = [0] * count  # 0 new, 1 on the path, 2 finished
    for root in range(count):
        if state[root]:
            continue
        stack = [(root, iter(tasks[root].deps))]
        state[root] = 1
        while stack:
            node, deps = stack[-1]
            for dep in deps:
                if state[dep] == 1:
                    raise UsageError(f"task {dep} depends on itself through task {node}: "
                                     f"the graph must have no cycle")
                if state[dep] == 0:
                    state[dep] = 1
                    stack.append((dep, iter(tasks[dep].deps)))
                    break
            else:
                state[node] = 2
                stack.pop()

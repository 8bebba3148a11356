"""The task graph the η-LSTM top runs (:class:`~.top.OmniTop`): one training iteration's FW
and BP cells of an ``layers`` x ``seq_len`` LSTM, each cell program of
:mod:`.channel_program` cut into R2A tasks.

Tasks [U, decided here]
    Each cell is four tasks, each a contiguous part of its channel program: ``fw_mm``
    (the gate MVMs through σ / tanh, kind MatMul), ``fw_ew`` (``s_t``, ``tanh(s_t)``,
    ``h_t``: EW), ``bp_ew`` (BP-EW-P1 and P2: EW) and ``bp_mm`` (eq. 2, eq. 3 and the
    ``δW``, ``δb`` accumulation: MatMul). A task runs on one channel from its first
    instruction to its last result beat (the top's *done*); the scratchpad holds the
    cell's vectors, so a cell's tasks may run on different channels.

Dependencies (cell ``(l, t)``; the data each part reads)
    ``fw_mm(l,t)`` needs ``fw_ew(l,t-1)`` (``h_{t-1}``, ``s_{t-1}``) and ``fw_ew(l-1,t)``
    (``x_t``); ``fw_ew(l,t)`` needs ``fw_mm(l,t)``; ``bp_ew(l,t)`` needs the loss
    (``fw_ew(LN-1,LL-1)``, after every FW task), ``bp_mm(l,t+1)`` (``δH_t``, ``δS_t``
    and the ``δW`` accumulated so far) and ``bp_mm(l+1,t)`` (``δY_t``); ``bp_mm(l,t)``
    needs ``bp_ew(l,t)``. Ids (the R2A's priority): FW tasks by timestamp then layer,
    then BP tasks by descending timestamp then descending layer.
"""

import dataclasses

from .channel_program import bp_program, fw_program
from .config import OmniMode
from .top_config import TASK_KINDS, OmniConfig

__all__ = ["CellTask", "PARTS", "top_tasks", "task_count"]

#: The parts of a cell and their kind.
PARTS = {"fw_mm": "matmul", "fw_ew": "ew", "bp_ew": "ew", "bp_mm": "matmul"}


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class CellTask:
    """One task of the top's graph.

    Attributes
    ----------
    id : int
    part : str
        One of :data:`PARTS`.
    layer, step : int
        The cell.
    steps : tuple of Step
        Its instructions with their scratchpad accesses.
    first : int
        Index of its first step in the cell's program (FW program then BP program).
    deps : tuple of int
    channel : ChannelConfig
        The layer's (:meth:`~.top_config.OmniConfig.layer_channel`).
    """

    id: int
    part: str
    layer: int
    step: int
    steps: tuple
    first: int
    deps: tuple
    channel: object

    @property
    def kind(self):
        """``"matmul"`` or ``"ew"``."""
        return PARTS[self.part]

    @property
    def kind_code(self):
        """The task table's ``kind``: its index in :data:`~.top_config.TASK_KINDS`."""
        return TASK_KINDS.index(self.kind)

    @property
    def out_beats(self):
        """Result beats: the task table's ``length`` (the top's end of a task)."""
        return sum(step.instruction.out_beats for step in self.steps)

    @property
    def model_cycles(self):
        """The channel's estimate of the part's cycles
        (:meth:`~.channel_config.ChannelConfig.program_cycles`)."""
        return self.channel.program_cycles(self.steps)


def _split(program):
    """``(head, tail)``: the program cut where its steps stop (FW) or start (BP) being
    MVMs."""
    mvm = [step.instruction.job.mode is OmniMode.MVM for step in program]
    cut = next(index for index in range(1, len(program)) if mvm[index] != mvm[index - 1])
    return program[:cut], program[cut:]


def task_count(config):
    """Tasks of the graph: ``4 * layers * seq_len``."""
    return 4 * config.layers * config.seq_len


def top_tasks(config):
    """The tasks of one training iteration of ``config`` (module docstring), by id.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`OmniConfig`.
    ValueError
        If the graph has more than ``max_tasks`` tasks (the R2A table's window).
    """
    if not isinstance(config, OmniConfig):
        raise TypeError(f"config must be an OmniConfig, not {config!r}")
    count = task_count(config)
    if count > config.max_tasks:
        raise ValueError(f"layers x seq_len x 4 ({count} tasks) cannot exceed max_tasks "
                         f"({config.max_tasks}): the task table holds one window")
    layers, length = config.layers, config.seq_len
    parts = {}
    for layer in range(layers):
        channel = config.layer_channel(layer)
        fw, bp = fw_program(channel), bp_program(channel)
        fw_mm, fw_ew = _split(fw)
        bp_ew, bp_mm = _split(bp)
        firsts = (0, len(fw_mm), len(fw), len(fw) + len(bp_ew))
        parts[layer] = (channel, dict(zip(PARTS, zip((fw_mm, fw_ew, bp_ew, bp_mm), firsts))))
    order = [(part, l, t) for t in range(length) for l in range(layers)
             for part in ("fw_mm", "fw_ew")]
    order += [(part, l, t) for t in reversed(range(length)) for l in reversed(range(layers))
              for part in ("bp_ew", "bp_mm")]
    ids = {key: index for index, key in enumerate(order)}

    def deps(part, l, t):
        if part == "fw_mm":
            return [ids[key] for key in (("fw_ew", l, t - 1), ("fw_ew", l - 1, t))
                    if key in ids]
        if part == "fw_ew":
            return [ids["fw_mm", l, t]]
        if part == "bp_ew":
            return [ids["fw_ew", layers - 1, length - 1]] + [
                ids[key] for key in (("bp_mm", l, t + 1), ("bp_mm", l + 1, t)) if key in ids]
        return [ids["bp_ew", l, t]]

    tasks = []
    for index, (part, l, t) in enumerate(order):
        channel, cut = parts[l]
        steps, first = cut[part]
        tasks.append(CellTask(id=index, part=part, layer=l, step=t, steps=tuple(steps),
                              first=first, deps=tuple(sorted(set(deps(part, l, t)))),
                              channel=channel))
    return tasks

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

Tiles (:func:`tile_steps`, the training step's graph, :mod:`nnrtl.gen.omni.top_passes`)
    A part cut along the hidden units as :func:`~.workload.training_graph` cuts it
    (:func:`unit_tiles`: slices differing by at most one): ``fw_mm`` tile ``j`` the MVM
    rounds of the four gates' rows of its units (``[W U b]`` rows against the whole
    ``z``: the channel's row is one job, so the paper's ``fw_mm_x`` and ``fw_mm_h`` are
    one task), ``fw_ew`` (with MS1 followed by BP-EW-P1) and ``bp_ew`` (BP-EW-P1 unless
    MS1 moved it, then P2) the element-wise steps of its units, ``bp_inner_x`` /
    ``bp_inner_h`` the eq. 2 columns of its slice of ``x`` / ``h``, ``bp_outer`` the eq.
    3 rows of its units' four gates with their ``δW`` and ``δb`` accumulation. Every
    element's arithmetic is the untiled program's (same operations, same order), so the
    tiles' results are the cell programs' bit for bit.
"""

import dataclasses

from .channel_config import Activation
from .channel_program import (GATES, Access, Step, bp_p1_steps, bp_p2_steps, bp_program,
                              elementwise, fw_ew_steps, fw_program, inner_steps, mvm_steps,
                              outer_steps)
from .config import OmniMode
from .top_config import TASK_KINDS, OmniConfig

__all__ = ["CellTask", "PARTS", "TILE_PARTS", "top_tasks", "task_count", "unit_tiles",
           "tile_steps"]

#: The parts of a cell and their kind.
PARTS = {"fw_mm": "matmul", "fw_ew": "ew", "bp_ew": "ew", "bp_mm": "matmul"}
#: The parts of a tiled cell (:func:`tile_steps`) and their kind.
TILE_PARTS = {"fw_mm": "matmul", "fw_ew": "ew", "bp_ew": "ew", "bp_inner_x": "matmul",
              "bp_inner_h": "matmul", "bp_outer": "matmul"}


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
    tile : int
        Its tile (:func:`tile_steps`), -1 for a whole part.
    """

    id: int
    part: str
    layer: int
    step: int
    steps: tuple
    first: int
    deps: tuple
    channel: object
    tile: int = -1

    @property
    def kind(self):
        """``"matmul"`` or ``"ew"``."""
        return {**PARTS, **TILE_PARTS}[self.part]

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


def unit_tiles(size, tiles):
    """``[(first, count)]``: ``size`` elements cut into ``min(tiles, size)`` slices whose
    counts differ by at most one (the larger first), as
    :func:`~.workload.training_graph` cuts the hidden units."""
    count = min(tiles, size)
    out, first = [], 0
    for j in range(count):
        length = size // count + (1 if j < size % count else 0)
        out.append((first, length))
        first += length
    return out


def _shifted(steps, first):
    """``steps`` with every access moved ``first`` elements on (the broadcast 1.0
    stays)."""
    def move(access):
        return access if access.name == "one" else Access(access.name, access.index + first)
    return [Step(s.instruction, move(s.operand1), move(s.operand2), move(s.result))
            for s in steps]


def tile_steps(channel, part, first, count, *, ms1=False):
    """The steps of tile ``(first, count)`` of ``part`` (:data:`TILE_PARTS`; module
    docstring) of a cell on ``channel``: hidden units ``first ..`` for every part but
    ``bp_inner_x`` / ``bp_inner_h`` (columns of ``x`` / of ``h``). ``ms1``: ``fw_ew``
    ends with BP-EW-P1, ``bp_ew`` starts without it.

    Raises
    ------
    ValueError
        An unknown ``part``.
    """
    h, k = channel.hidden_size, channel.fw_row_length
    if part == "fw_mm":
        steps = []
        for g, gate in enumerate(GATES):
            activation = Activation.TANH if gate == "c" else Activation.SIGMOID
            steps += mvm_steps(channel, (gate, first), (g * h + first, count), k,
                               lambda row, col: row * k + col, "z", activation)
        return steps
    if part == "fw_ew":
        steps = fw_ew_steps(channel, count) + (bp_p1_steps(channel, count) if ms1 else [])
        return _shifted(steps, first)
    if part == "bp_ew":
        steps = ([] if ms1 else bp_p1_steps(channel, count)) + bp_p2_steps(
            channel, count, [g * h for g in range(4)])
        return _shifted(steps, first)
    if part == "bp_inner_x":
        return inner_steps(channel, count, first)
    if part == "bp_inner_h":
        return inner_steps(channel, count, channel.input_size + first)
    if part == "bp_outer":
        steps = []
        for g in range(4):
            steps += outer_steps(channel, count, g * h + first)
        for g in range(4):
            steps += elementwise(channel, OmniMode.EW_ADD, ("db", g * h + first),
                                 ("db_acc", g * h + first), ("dgates", g * h + first),
                                 count)
        return steps
    raise ValueError(f"part must be one of {', '.join(TILE_PARTS)}, not {part!r}")

"""The R2A scheduler's cycle model at channel granularity (spec §3.4, paper §V-C, Fig. 10).

:func:`schedule` runs a task graph (:mod:`.workload`) on the channels of an
:class:`~nnrtl.hw.omni.r2a.R2AConfig` cycle by cycle, exactly as the RTL
(:class:`~nnrtl.hw.omni.r2a.R2AScheduler`) does: the tests compare issue order and cycle
count for equality. :func:`static_split` and :func:`allocation` give the group of every
channel; :func:`utilization_rows` is the bench material (dynamic against static on the
six Table I shapes).

No deadlock: a task waits only for its dependencies (the graph has no cycle,
:func:`.workload.check_graph`), each group has at least one channel, so some channel can
run every kind, tasks are never preempted and take finite time: as long as a task is not
done, one is ready or running. Tested on random graphs
(``tests/omni/gen/test_omni_r2a_model.py``).
"""

import bisect
import dataclasses
import functools
import heapq
import math

from ...hw.omni.channel_config import Activation, ChannelConfig
from ...hw.omni.channel_program import (GATES, bp_p1_steps, bp_p2_steps, elementwise,
                                        fw_ew_steps, inner_steps, mvm_steps, outer_steps)
from ...hw.omni.config import OmniMode
from ...hw.omni.r2a import R2AConfig
from ...hw.omni.workload import allocation as _allocation, static_split
from ..errors import UsageError
from .workload import KINDS, PHASES, check_graph, estimate, training_graph

__all__ = ["Schedule", "static_split", "allocation", "schedule", "run", "scaled",
           "SCALED_CONFIG", "FULL_CONFIG", "utilization_rows", "main", "task_program",
           "channel_durations"]


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The outcome of :func:`schedule`.

    Attributes
    ----------
    cycles : int
        From the first decision cycle until every task is done.
    useful : int
        Useful PE operations (the tasks' ``ops``).
    utilization : float
        ``useful / (channels * pes_per_channel * cycles)``.
    busy_group : dict
        Channel-cycles busy per home group (``"matmul"``, ``"ew"``).
    busy_kind : dict
        Channel-cycles busy per kind of task run.
    swings, returns : int
        Swing events (tasks run outside the channel's group) and returns.
    ew_channels : int
    swing : tuple of bool
        The swing channels.
    issues : tuple of (cycle, channel, task)
        The decisions in order.
    """

    cycles: int
    useful: int
    utilization: float
    busy_group: dict
    busy_kind: dict
    swings: int
    returns: int
    ew_channels: int
    swing: tuple
    issues: tuple


def allocation(config, ew_channels, *, dynamic):
    """``(groups, swing)``: per channel its group's kind index (0 MatMul, 1 EW) and
    whether it swings (only with ``dynamic``; :func:`nnrtl.hw.omni.workload.allocation`);
    :class:`UsageError` unless ``ew_channels`` leaves both groups a channel."""
    try:
        return _allocation(config, ew_channels, dynamic=dynamic)
    except TypeError as error:
        raise UsageError(str(error)) from None


def task_program(channel, phase, size, *, density=1.0):
    """The channel program one sample of a task runs (a list of
    :class:`~nnrtl.hw.omni.channel_program.Step`): ``phase`` of
    :data:`.workload.PHASES` on a tile of ``size`` hidden units (inputs for
    ``bp_inner_x``) of the layer ``channel`` is for [decided here]:

    - ``fw_mm_x``: the ``4 size`` gate rows ``[W_g b_g]`` against ``[x; 1]``, direct;
      ``fw_mm_h``: the rows of ``U_g`` against ``h_{t-1}``, direct (a round of ``P``
      rows per step, as the FW cell's MVM);
    - ``fw_ew``: per gate the sum of the two parts (an EW add) through the sigmoid (i,
      f, o) or the tanh unit (c) -- the activations ride on the adds -- then the FW
      cell's element-wise tail (:func:`~nnrtl.hw.omni.channel_program.fw_ew_steps`);
    - ``bp_p1`` / ``bp_p2``: the BP cell's BP-EW-P1 / P2 steps over ``size`` units
      (P2 over ``ceil(size * density)``: MS1's decoder feeds only the survivors);
    - ``bp_inner_h`` / ``bp_inner_x``: eq. 2 over ``size`` columns (rows of ``4H``);
    - ``bp_outer``: eq. 3 over the ``4 size`` rows (outer product, then the ``+=``).
    """
    mul_rows = 4 * size
    if phase == "fw_mm_x":
        k = channel.input_size + 1
        return mvm_steps(channel, ("gx", 0), (0, mul_rows), k, lambda r, c: r * k + c,
                         "x1", Activation.NONE)
    if phase == "fw_mm_h":
        k = channel.hidden_size
        return mvm_steps(channel, ("gh", 0), (0, mul_rows), k, lambda r, c: r * k + c,
                         "h_prev", Activation.NONE)
    if phase == "fw_ew":
        steps = []
        for g, gate in enumerate(GATES):
            steps += elementwise(channel, OmniMode.EW_ADD, (gate, 0), ("gx", g * size),
                                 ("gh", g * size), size,
                                 activation=Activation.TANH if gate == "c"
                                 else Activation.SIGMOID)
        return steps + fw_ew_steps(channel, size)
    if phase == "bp_p1":
        return bp_p1_steps(channel, size)
    if phase == "bp_p2":
        return bp_p2_steps(channel, max(1, math.ceil(size * density)))
    if phase in ("bp_inner_h", "bp_inner_x"):
        return inner_steps(channel, size)
    if phase == "bp_outer":
        return outer_steps(channel, mul_rows)
    raise UsageError(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")


def _batch_cycles(channel, program, batch):
    """Cycles of ``batch`` samples of ``program`` back to back: the channel model of one
    and of two samples, then one period per further sample (the second sample's
    increment repeats: the pipeline state between samples is the same)."""
    one = channel.program_cycles(program)
    if batch == 1:
        return one
    two = channel.program_cycles(program + program)
    return one + (batch - 1) * (two - one)


def channel_durations(tasks, workload, config, *, density=1.0):
    """Per task, the cycles a channel works on it (``D`` without the switch): the
    channel cycle model (:meth:`~nnrtl.hw.omni.channel_config.ChannelConfig.
    program_cycles`, exact against the Channel RTL) of :func:`task_program` for the
    task's tile, over the workload's batch. Tasks of a random graph (phase ``"task"``)
    keep :meth:`~nnrtl.hw.omni.r2a.R2AConfig.duration`."""
    durations = []
    for task in tasks:
        if task.phase not in PHASES:
            durations.append(config.duration(task.length(config.pes_per_channel), False))
            continue
        layer_input = workload.layer_input(task.layer)
        size = (_tile_size(task.ops, 4 * workload.hidden_size * workload.batch)
                if task.phase == "bp_inner_x" else _unit_count(task, workload, layer_input,
                                                               density))
        durations.append(_phase_cycles(config.pes_per_channel, layer_input,
                                       workload.hidden_size, workload.batch, task.phase,
                                       size, density))
    return durations


@functools.lru_cache(maxsize=4096)
def _phase_cycles(pes, layer_input, hidden, batch, phase, size, density):
    """Cycles of ``batch`` samples of a task on a channel of the paper's pipelines (the
    :class:`~nnrtl.hw.omni.channel_config.ChannelConfig` defaults)."""
    channel = ChannelConfig(pes_per_channel=pes, input_size=layer_input, hidden_size=hidden)
    return _batch_cycles(channel, task_program(channel, phase, size, density=density), batch)


def _tile_size(ops, per_unit):
    return max(1, round(ops / per_unit))


def _unit_count(task, workload, layer_input, density):
    """The hidden units of ``task``'s tile, from its ``ops`` (:mod:`.workload`'s
    table)."""
    hidden, batch = workload.hidden_size, workload.batch
    per_unit = {"fw_mm_x": 4 * layer_input, "fw_mm_h": 4 * hidden, "fw_ew": 4,
                "bp_p1": 15, "bp_p2": 8 * density, "bp_inner_h": 4 * hidden,
                "bp_outer": 4 * (layer_input + hidden)}[task.phase]
    return _tile_size(task.ops, per_unit * batch)


def schedule(tasks, config, *, ew_channels=None, dynamic=True, log=False, durations=None):
    """Run ``tasks`` on the channels of ``config`` (decisions: Notes below).

    Parameters
    ----------
    tasks : list of :class:`.workload.Task`
    config : R2AConfig
    ew_channels : int, optional
        The EW group's size (default :func:`static_split` of ``tasks``).
    dynamic : bool
        R2A with swing channels (``False``: static allocation).
    log : bool
        Keep the decisions in ``issues``.
    durations : list of int, optional
        Per task the cycles a channel works on it, without the switch (default
        :meth:`~nnrtl.hw.omni.r2a.R2AConfig.duration` of its length, as the R2A RTL's
        bench channels; :func:`channel_durations`: the channel cycle model).

    Returns
    -------
    Schedule

    Notes
    -----
    Decisions [U] (the paper gives none of these; spec §3.4, §6.7)
        * Step 2, the split: ``ew_channels = round(channels * L_ew / (L_mm + L_ew))``
          clamped to ``1 .. channels - 1``, where ``L_k`` is the PE-cycles the kind holds a
          channel (:func:`.workload.estimate`: operations plus the σ / tanh cycles, which
          occupy an EW channel too). Channels ``0 .. m-1`` form the MatMul group,
          ``m .. channels-1`` the EW group (``m = channels - ew_channels``). The split is
          fixed for the run (MS1 / MS2 sparsity does not update it).
        * ``static``: no channel leaves its group (the paper's baseline, Fig. 10);
          "TREC10-fixed" is the split of TREC-10's estimate applied to every shape
          (Static-Arch, spec §4).
        * ``dynamic`` (R2A): the same split plus ``swing_channels`` swing channels, the ones
          straddling the group boundary (``max(0, min(m - s//2, channels - s))`` onwards:
          half from each group, so work can swing both ways: EW-group channels help MatMul
          while EW waits on MatMul outputs, MatMul-group channels help the EW phases that
          sit on the dependency chain). Granularity: whole channels (no swing PEs inside a
          channel: a channel runs one task with all its PEs, SIMT).
        * Trigger: a free swing channel takes a task of the other kind only when no task of
          its own group's kind is ready; it is never preempted, and when free again it
          takes its own group's work first (the "return"). Swing events: tasks issued to a
          channel of the other group; returns: own-group tasks issued to a channel whose
          previous task was foreign.
        * Validation: the schedule issues per task one channel program per sample
          (:func:`task_program`); their cycles are the channel cycle model's, checked equal
          to the Channel RTL's (``tests/omni/gen/test_omni_r2a_model.py``); on the top's own
          task graph the model is the top's RTL cycle for cycle (:func:`.perf.top_schedule`).
        * Switch cost: ``switch_cycles`` extra channel cycles when a channel's task kind
          differs from its previous one (default 8: the PEs' 8-stage adder drains before the
          mode changes). Channels start in their group's mode.
        * Priority: one task issued per cycle; among ready tasks of a kind the lowest id
          (the graph's order); among channels the lowest index that can take a task (its
          group's kind if ready, else, for a swing channel, the other kind).
        * Timing (the RTL's, :attr:`~nnrtl.hw.omni.r2a.R2AConfig.issue_overhead`): a task
          decided in cycle ``a`` is offered on the channel's issue port in ``a + 1``; a
          channel taking it in cycle ``h`` signals done in ``h + D``,
          ``D = work + switch``, ``work`` the channel cycle model's cycles of the task's
          channel program (:func:`channel_durations`, :func:`task_program`: exact against
          the Channel RTL; the bench and :func:`utilization_rows`) or, as the R2A RTL's
          bench channels take it, ``ceil(length / pes)`` (the default of :func:`schedule`); the channel and the task's successors are
          free / ready from ``h + D + 1``. Without backpressure a task holds its channel
          ``D + 2`` cycles. The run lasts until every task is done (``cycles``); busy cycles
          of a channel count ``D + 1`` per task (descriptor offered to done).
    """
    if not isinstance(config, R2AConfig):
        raise UsageError(f"config must be an R2AConfig, not {config!r}")
    check_graph(tasks)
    if ew_channels is None:
        ew_channels = static_split(tasks, config)
    groups, swing = allocation(config, ew_channels, dynamic=dynamic)
    pes, switch_cycles = config.pes_per_channel, config.switch_cycles
    overhead = config.issue_overhead
    count = len(tasks)
    waiting = [len(set(task.deps)) for task in tasks]
    successors = [[] for _ in tasks]
    for task in tasks:
        for dep in set(task.deps):
            successors[dep].append(task.id)
    ready = ([], [])
    kind_index = {kind: index for index, kind in enumerate(KINDS)}
    kinds = [kind_index[task.kind] for task in tasks]
    for task in tasks:
        if not waiting[task.id]:
            heapq.heappush(ready[kinds[task.id]], task.id)
    free = {(home, swinging): [] for home in (0, 1) for swinging in (False, True)}
    for channel in range(config.channels):
        free[groups[channel], swing[channel]].append(channel)
    last = list(groups)
    events = []  # (cycle the channel and its task's successors are free, channel, task)
    busy_group, busy_kind = [0, 0], [0, 0]
    swings = returns = done = 0
    issues = []
    cycle = 0
    while done < count:
        while events and events[0][0] <= cycle:
            _, channel, finished = heapq.heappop(events)
            done += 1
            for successor in successors[finished]:
                waiting[successor] -= 1
                if not waiting[successor]:
                    heapq.heappush(ready[kinds[successor]], successor)
            bisect.insort(free[groups[channel], swing[channel]], channel)
        if done == count:
            break
        has = (bool(ready[0]), bool(ready[1]))
        candidates = []
        for home in (0, 1):
            if has[home]:
                candidates += [lst[0] for lst in (free[home, False], free[home, True]) if lst]
            elif has[1 - home] and free[home, True]:
                candidates.append(free[home, True][0])
        if not candidates:
            if not events:
                raise RuntimeError("R2A model: no task can run and none is running")
            cycle = events[0][0]
            continue
        channel = min(candidates)
        home = groups[channel]
        kind = home if has[home] else 1 - home
        task = heapq.heappop(ready[kind])
        free[home, swing[channel]].remove(channel)
        work = (durations[task] if durations is not None
                else -(-tasks[task].length(pes) // pes))
        cost = work + (switch_cycles if kind != last[channel] else 0)
        swings += kind != home
        returns += kind == home and last[channel] != home
        last[channel] = kind
        busy_group[home] += cost + 1
        busy_kind[kind] += cost + 1
        heapq.heappush(events, (cycle + cost + overhead, channel, task))
        if log:
            issues.append((cycle, channel, task))
        cycle += 1
    useful = sum(task.ops for task in tasks)
    total_pes = config.channels * pes
    return Schedule(cycles=cycle, useful=useful,
                    utilization=useful / (total_pes * cycle) if cycle else 0.0,
                    busy_group=dict(zip(KINDS, busy_group)),
                    busy_kind=dict(zip(KINDS, busy_kind)), swings=swings, returns=returns,
                    ew_channels=ew_channels, swing=swing, issues=tuple(issues))


def run(workload, config, *, ms1=False, kept=None, density=1.0, tiles=None,
        ew_channels=None, dynamic=True):
    """:func:`schedule` of :func:`.workload.training_graph` (one tile per channel by
    default)."""
    tasks = training_graph(workload, tiles=tiles or config.channels, ms1=ms1, kept=kept,
                           density=density)
    return schedule(tasks, config, ew_channels=ew_channels, dynamic=dynamic)


#: The engine of the scaled bench: a quarter of the VCU128's 40 channels.
SCALED_CONFIG = R2AConfig(channels=10)
#: The evaluated instance (spec §3.6): 40 channels of 32 PEs, two swing channels.
FULL_CONFIG = R2AConfig(channels=40)


def scaled(workload):
    """A Table I shape scaled down for the bench [decided here]: hidden and input size
    / 8, length / 8 (rounded up, at least 2), batch 16, the same layers."""
    from .accounting import Workload
    return Workload(input_size=max(1, workload.input_size // 8),
                    hidden_size=max(1, workload.hidden_size // 8), layers=workload.layers,
                    length=max(2, math.ceil(workload.length / 8)), batch=16)


def utilization_rows(*, full=("TREC-10",), skip_threshold=0.02, density=None,
                     channel_model=True):
    """PE utilization of dynamic (R2A) against static allocation on the six Table I shapes.

    Every shape runs :func:`scaled` on :data:`SCALED_CONFIG`; the shapes named in
    ``full`` also run at full size on :data:`FULL_CONFIG`. Each with MS1 / MS2 off and
    on (MS1: P1 in FW, P2 scaled by ``density``, default the paper's 35 % survivors,
    :data:`.accounting.PAPER_DENSITY`; MS2: the kept cells of
    :func:`.accounting.table_one_kept` at ``skip_threshold``). With ``channel_model``
    (default) a task holds its channel the cycles of the channel cycle model
    (:func:`channel_durations`); without, ``ceil(length / pes)``.

    Returns
    -------
    list of dict
        ``shape``, ``scale`` (``"scaled"``/``"full"``), ``options`` (``baseline``,
        ``ms1``, ``ms2``, ``ms1+ms2``), ``ew_channels`` (own split), ``trec10_ew_channels``,
        ``static`` / ``static_trec10`` / ``dynamic`` utilization, their ``*_cycles``,
        ``swings``, ``returns``, ``static_busy`` / ``dynamic_busy`` (channel-cycles per
        group), ``gain`` (dynamic / static).
    """
    from .accounting import PAPER_DENSITY, TABLE_I, TABLE_I_LOSS, table_one_kept
    density = PAPER_DENSITY if density is None else density
    rows = []
    plans = [("scaled", SCALED_CONFIG, name, scaled(shape)) for name, shape in TABLE_I.items()]
    plans += [("full", FULL_CONFIG, name, TABLE_I[name]) for name in full]
    for scale, config, name, shape in plans:
        trec = TABLE_I["TREC-10"] if scale == "full" else scaled(TABLE_I["TREC-10"])
        for ms1 in (False, True):
            for ms2 in (False, True):
                kept = table_one_kept(shape, TABLE_I_LOSS[name], skip_threshold) if ms2 \
                    else None
                options = dict(ms1=ms1, kept=kept, density=density if ms1 else 1.0)
                tasks = training_graph(shape, tiles=config.channels, **options)
                trec_kept = table_one_kept(trec, TABLE_I_LOSS["TREC-10"], skip_threshold) \
                    if ms2 else None
                trec_split = static_split(training_graph(
                    trec, tiles=config.channels, ms1=ms1, kept=trec_kept,
                    density=options["density"]), config)
                durations = (channel_durations(tasks, shape, config,
                                               density=options["density"])
                             if channel_model else None)
                static = schedule(tasks, config, dynamic=False, durations=durations)
                fixed = static if trec_split == static.ew_channels else schedule(
                    tasks, config, ew_channels=trec_split, dynamic=False,
                    durations=durations)
                dynamic = schedule(tasks, config, dynamic=True, durations=durations)
                rows.append(dict(
                    shape=name, scale=scale,
                    options="+".join(n for n, on in (("ms1", ms1), ("ms2", ms2)) if on)
                    or "baseline",
                    tasks=len(tasks), ew_channels=static.ew_channels,
                    trec10_ew_channels=trec_split, static=static.utilization,
                    static_trec10=fixed.utilization, dynamic=dynamic.utilization,
                    static_cycles=static.cycles, static_trec10_cycles=fixed.cycles,
                    dynamic_cycles=dynamic.cycles, swings=dynamic.swings,
                    returns=dynamic.returns, static_busy=static.busy_group,
                    dynamic_busy=dynamic.busy_group,
                    gain=dynamic.utilization / static.utilization))
    return rows


def main(argv=None):
    """``python -m nnrtl.gen.omni.r2a [SHAPE ...]``: :func:`utilization_rows` as JSON, one
    line per row; the shapes named also run at full size (default TREC-10)."""
    import json
    import sys

    from .accounting import TABLE_I
    names = tuple(sys.argv[1:] if argv is None else argv) or ("TREC-10",)
    unknown = [name for name in names if name not in TABLE_I]
    if unknown:
        raise UsageError(f"shape must be one of {', '.join(TABLE_I)}, not {unknown[0]!r}")
    for row in utilization_rows(full=names):
        print(json.dumps(row))


if __name__ == "__main__":
    main()

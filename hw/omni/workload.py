"""The task graph of one LSTM training iteration, as the R2A scheduler sees it (spec §1,
§3.4), and R2A's static split of it over the channels (:func:`static_split`,
:func:`allocation`: the reset values of the η-LSTM top's ``ew_mask`` and ``swing_mask``
registers, :mod:`.top`).

Every FW and BP cell of :mod:`nnrtl.gen.omni.cell` is cut into *tasks*, each of one
kind -- ``"matmul"`` (FW-MatMul, BP-MatMul eqs. 2-3) or ``"ew"`` (FW-EW, BP-EW-P1,
BP-EW-P2) -- that one channel runs from start to end. :func:`training_graph` builds the
graph; :func:`estimate` is R2A's step 1, the workload estimate (operation counts per kind
over the iteration).

Tiles [U, decided here]
    Each phase of a cell is cut into ``tiles`` tasks along the hidden units: tile ``j``
    owns a slice of the H hidden units (sizes differ by at most one) and, for the MatMul
    phases, the 4 gate rows of those units. Cutting along the hidden units keeps FW-EW
    tile ``j`` dependent on FW-MatMul tile ``j`` only (the four gates of a unit are in
    one tile), so EW can start as soon as "adequate MatMul outputs" exist (paper §V-C).
    ``inner_x`` (δX, eq. 2 with W) is cut along the I inputs instead. The default is one
    tile per channel, so a MatMul phase can fill every channel.
"""

import dataclasses

import numpy as np

__all__ = ["Workload", "KINDS", "PHASES", "Task", "training_graph", "estimate", "kept_mask",
           "static_split", "allocation"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Workload:
    """One LSTM training iteration's shape: ``input_size`` of layer 0 (the others take H),
    ``hidden_size``, ``layers`` (LN), ``length`` (LL, timestamps) and ``batch``;
    ``TypeError`` unless each is a positive integer."""

    input_size: int
    hidden_size: int
    layers: int
    length: int
    batch: int

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TypeError(f"{field.name} must be a positive integer, not {value!r}")

    def layer_input(self, layer):
        return self.input_size if layer == 0 else self.hidden_size


#: The two kinds of task, in the order of the scheduler's groups.
KINDS = ("matmul", "ew")
#: Every phase of a cell and its kind.
PHASES = {"fw_mm_x": "matmul", "fw_mm_h": "matmul", "fw_ew": "ew", "bp_p1": "ew",
          "bp_p2": "ew", "bp_inner_h": "matmul", "bp_inner_x": "matmul",
          "bp_outer": "matmul"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Task:
    """One task of the graph.

    Attributes
    ----------
    id : int
        Its index in the graph; also its priority (lower first).
    kind : str
        ``"matmul"`` or ``"ew"``.
    ops : int
        Useful PE operations (MACs, multiplies, adds).
    activations : int
        Cycles of the channel's σ / tanh units, serialized with the PE work.
    deps : tuple of int
        Ids of the tasks that must be done before it starts.
    phase : str
        One of :data:`PHASES` (``"task"`` in a random graph).
    layer, step, tile : int
        Where it sits in the unrolled LSTM (-1 in a random graph).
    """

    id: int
    kind: str
    ops: int
    activations: int = 0
    deps: tuple = ()
    phase: str = "task"
    layer: int = -1
    step: int = -1
    tile: int = -1

    def length(self, pes):
        """PE-cycles the task holds a channel of ``pes`` PEs: ``ops + pes * activations``
        (the channel takes ``ceil(length / pes)`` cycles)."""
        return self.ops + pes * self.activations


def _slices(size, tiles):
    """Sizes of ``tiles`` slices of ``size`` (differing by at most one, none empty)."""
    count = min(tiles, size)
    return [size // count + (1 if j < size % count else 0) for j in range(count)]


def kept_mask(workload, kept):
    """``kept`` (MS2's kept cells, ``layers x length`` booleans; ``None``: all) as a
    boolean array; ``ValueError`` unless it has ``workload``'s shape."""
    if kept is None:
        return np.ones((workload.layers, workload.length), dtype=bool)
    kept = np.asarray(kept, dtype=bool)
    if kept.shape != (workload.layers, workload.length):
        raise ValueError(f"kept must be layers x length = {workload.layers} x "
                         f"{workload.length}, not {kept.shape}")
    return kept


def training_graph(workload, *, tiles, ms1=False, kept=None, density=1.0):
    """The tasks of one training iteration (tiles: the module docstring; operation counts
    and dependencies: Notes below).

    Parameters
    ----------
    workload : Workload
        The LSTM shape (:class:`.accounting.Workload`).
    tiles : int
        Tasks per phase of a cell (capped at the hidden size; ``inner_x`` at I).
    ms1 : bool
        BP-EW-P1 runs in FW.
    kept : LN x LL bool array, optional
        MS2's kept cells (``None``: every cell runs BP).
    density : float
        Fraction of BP-EW-P2 operations left by MS1's computation skipping (1 = none).

    Returns
    -------
    list of Task, indexed by id.

    Raises
    ------
    TypeError
        ``workload`` no :class:`Workload`, ``tiles`` no positive integer, ``density``
        outside (0, 1].
    ValueError
        ``kept`` not ``layers x length``.

    Notes
    -----
    Operation counts (PE-cycles: one MAC, multiply or add per PE per cycle; spec §1.3), for
    a tile of ``h`` hidden units, batch B, layer input I:

    ==============  ======  =====================  ==============================
    task            kind    ``ops``                ``activations`` (cycles)
    ==============  ======  =====================  ==============================
    ``fw_mm_x``     matmul  4 h I B  (W x_t + b)   0
    ``fw_mm_h``     matmul  4 h H B  (U h_{t-1})   0
    ``fw_ew``       ew      4 h B (3 mul, 1 add)   3 h B (σ for i, f, o)
    ``bp_p1``       ew      15 h B                 h B in BP (tanh(s_t) again),
                                                   0 with MS1 (FW-EW's is reused)
    ``bp_p2``       ew      8 h B × density        0
    ``bp_inner_h``  matmul  4 H h B (U^T δgates)   0
    ``bp_inner_x``  matmul  4 H i B (W^T δgates,   0
                            i inputs of the tile)
    ``bp_outer``    matmul  4 h (I + H) B          0
    ==============  ======  =====================  ==============================

    Activations: a channel has one σ and one tanh unit (spec §3.3) working side by side, so
    FW-EW's 3 σ and 2 tanh per unit take 3 cycles per unit and sample; they are serialized
    with the PE work of the task [U: conservative, the PEs wait for the activations]. The
    bias add of ``W x_t + b`` starts the accumulation and costs nothing. ``density`` (MS1's
    computation skipping, paper Fig. 7) scales BP-EW-P2 only: P2 multiplies element by
    element and the decoder feeds only surviving P1 values, while a BP-MatMul row is skipped
    only when its δgate is zero in every sample of the batch, which per-sample pruning at
    θ = 0.1 rarely gives [U].

    Dependency rules (cell ``(l, t)``, layer l of LN, timestamp t of LL; "all X" = every tile
    of X; only edges not implied by others are listed):

    * ``fw_mm_x(l,t)[j]`` needs all ``fw_ew(l-1,t)`` (x_t is h_t of the layer below; none
      for l = 0, the input is in memory).
    * ``fw_mm_h(l,t)[j]`` needs all ``fw_ew(l,t-1)`` (h_{t-1}; t = 0 multiplies the zero
      initial state, as :func:`nnrtl.gen.omni.cell.fw_matmul` does, and needs nothing).
    * ``fw_ew(l,t)[j]`` needs ``fw_mm_x(l,t)[j]`` and ``fw_mm_h(l,t)[j]`` (s_{t-1} slice j
      comes with h_{t-1}).
    * The loss needs all ``fw_ew(LN-1,LL-1)``: BP starts after the whole FW (both loss types).
    * ``G(l,t)``, the gradients a kept BP cell waits for: all ``bp_inner_h(l,t+1)`` (δH_t) if
      cell (l,t+1) is kept, all ``bp_inner_x(l+1,t)`` (δY_t) if cell (l+1,t) is kept; the
      loss if neither exists (the top layer's first BP cell, a cell after skipped ones).
      δS_t comes with δH_t.
    * ``bp_p1(l,t)[j]`` needs ``fw_ew(l,t)[j]``; without MS1 it runs in the BP cell and also
      waits for ``G(l,t)`` (its FW intermediates are loaded when the BP cell starts, paper
      Fig. 10); with MS1 it runs in FW right after FW-EW (spec §2.1).
    * ``bp_p2(l,t)[j]`` needs ``bp_p1(l,t)[j]`` (and ``G(l,t)`` with MS1).
    * ``bp_inner_h(l,t)[j]`` (only if t > 0 and cell (l,t-1) is kept) and
      ``bp_inner_x(l,t)[j]`` (only if l > 0 and cell (l-1,t) is kept) need all
      ``bp_p2(l,t)``: a skipped cell's gradients are treated as 0 (spec §2.2 [U]).
    * ``bp_outer(l,t)[j]`` needs ``bp_p2(l,t)[j]`` and the previous ``bp_outer[j]`` of the
      layer (the kept cell above in time): δW and δU rows of tile j are accumulated by
      one channel at a time.
    * MS2: a skipped cell (``kept[l, t]`` false) has no BP tasks (and no ``bp_p1`` in FW).

    Task ids are the priority order of the scheduler (lowest first): FW tasks by timestamp,
    then layer; then BP tasks by descending timestamp, then layer from the top; the
    ``bp_outer`` tasks last (accumulations off the critical path fill the gaps).
    """
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload, not {workload!r}")
    if isinstance(tiles, bool) or not isinstance(tiles, int) or tiles < 1:
        raise TypeError(f"tiles must be a positive integer, not {tiles!r}")
    if not isinstance(density, (int, float)) or not 0 < density <= 1:
        raise TypeError(f"density must be a number in (0, 1], not {density!r}")
    kept = kept_mask(workload, kept)
    ln, ll, batch, hidden = workload.layers, workload.length, workload.batch, workload.hidden_size
    units = _slices(hidden, tiles)
    tasks, index = [], {}

    def add(phase, layer, step, sizes, cost, deps_of):
        ids = []
        for tile, size in enumerate(sizes):
            ops, activations = cost(size)
            task = Task(id=len(tasks), kind=PHASES[phase], ops=max(1, int(ops)),
                        activations=int(activations), deps=tuple(deps_of(tile)),
                        phase=phase, layer=layer, step=step, tile=tile)
            tasks.append(task)
            ids.append(task.id)
        index[phase, layer, step] = ids
        return ids

    def every(phase, layer, step):
        return index.get((phase, layer, step), [])

    for t in range(ll):
        for l in range(ln):
            inputs = workload.layer_input(l)
            below = every("fw_ew", l - 1, t) if l else []
            before = every("fw_ew", l, t - 1)
            mm_x = add("fw_mm_x", l, t, units, lambda h: (4 * h * inputs * batch, 0),
                       lambda j: below)
            mm_h = add("fw_mm_h", l, t, units, lambda h: (4 * h * hidden * batch, 0),
                       lambda j: before)
            ew = add("fw_ew", l, t, units, lambda h: (4 * h * batch, 3 * h * batch),
                     lambda j: (mm_x[j], mm_h[j]))
            if ms1 and kept[l, t]:
                add("bp_p1", l, t, units, lambda h: (15 * h * batch, 0), lambda j: (ew[j],))
    loss = every("fw_ew", ln - 1, ll - 1)
    outer_plan = []
    for t in reversed(range(ll)):
        for l in reversed(range(ln)):
            if not kept[l, t]:
                continue
            grads = []
            if t + 1 < ll and kept[l, t + 1]:
                grads += every("bp_inner_h", l, t + 1)
            if l + 1 < ln and kept[l + 1, t]:
                grads += every("bp_inner_x", l + 1, t)
            grads = grads or loss
            if ms1:
                p1 = every("bp_p1", l, t)
                p2 = add("bp_p2", l, t, units, lambda h: (8 * h * batch * density, 0),
                         lambda j: [p1[j]] + grads)
            else:
                ew = every("fw_ew", l, t)
                p1 = add("bp_p1", l, t, units, lambda h: (15 * h * batch, h * batch),
                         lambda j: [ew[j]] + grads)
                p2 = add("bp_p2", l, t, units, lambda h: (8 * h * batch * density, 0),
                         lambda j: (p1[j],))
            if t > 0 and kept[l, t - 1]:
                add("bp_inner_h", l, t, units, lambda h: (4 * hidden * h * batch, 0),
                    lambda j: p2)
            inputs = workload.layer_input(l)
            if l > 0 and kept[l - 1, t]:
                add("bp_inner_x", l, t, _slices(inputs, tiles),
                    lambda i: (4 * hidden * i * batch, 0), lambda j: p2)
            outer_plan.append((l, t, p2, inputs))
    previous = {}
    for l, t, p2, inputs in outer_plan:
        last = previous.get(l)
        ids = add("bp_outer", l, t, units, lambda h: (4 * h * (inputs + hidden) * batch, 0),
                  lambda j: [p2[j]] + ([last[j]] if last else []))
        previous[l] = ids
    return tasks


def estimate(tasks, pes):
    """R2A step 1: the workload estimate of a graph.

    Returns ``{"ops": {kind: useful PE operations}, "activations": {kind: cycles},
    "length": {kind: PE-cycles held on channels of pes PEs}, "tasks": {kind: count}}``.
    """
    result = {key: dict.fromkeys(KINDS, 0) for key in ("ops", "activations", "length",
                                                        "tasks")}
    for task in tasks:
        result["ops"][task.kind] += task.ops
        result["activations"][task.kind] += task.activations
        result["length"][task.kind] += task.length(pes)
        result["tasks"][task.kind] += 1
    return result


def static_split(tasks, config):
    """R2A step 2: the number of EW-group channels for ``tasks`` on the channels of
    ``config`` (an :class:`~.r2a.R2AConfig`; the rule: :mod:`nnrtl.gen.omni.r2a`)."""
    length = estimate(tasks, config.pes_per_channel)["length"]
    total = length["matmul"] + length["ew"]
    share = length["ew"] / total if total else 0.5
    return min(config.channels - 1, max(1, round(config.channels * share)))


def allocation(config, ew_channels, *, dynamic):
    """``(groups, swing)``: per channel of ``config`` (an :class:`~.r2a.R2AConfig`) its
    group's kind index (0 MatMul, 1 EW) and whether it swings (only with ``dynamic``;
    the rule: :mod:`nnrtl.gen.omni.r2a`); ``TypeError`` unless ``ew_channels`` is an
    integer from 1 to ``channels - 1``."""
    if isinstance(ew_channels, bool) or not isinstance(ew_channels, int) or not (
            1 <= ew_channels <= config.channels - 1):
        raise TypeError(f"ew_channels must be an integer from 1 to {config.channels - 1} "
                        f"(both groups need a channel), not {ew_channels!r}")
    matmul = config.channels - ew_channels
    groups = tuple(int(c >= matmul) for c in range(config.channels))
    count = config.swing_channels if dynamic else 0
    first = max(0, min(matmul - count // 2, config.channels - count))
    swing = tuple(first <= c < first + count for c in range(config.channels))
    return groups, swing

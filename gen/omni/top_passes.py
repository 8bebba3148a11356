"""A training step's FW and BP as task graphs of the η-LSTM top
(:class:`~nnrtl.hw.omni.top.OmniTop`), with the scratchpad model that feeds them: what
:mod:`.train_top` runs through the top's R2A (bench :mod:`nnrtl.sim.tb.omni.train_top`).

A step is two runs of the top: ``fw`` (every layer's FW cells) and ``bp`` (every kept
BP cell, MS2's skipped ones left out). A cell is one sample of one timestamp of one layer
(``(l, t, b)``), cut into tiles along the hidden units, one per channel by default, as
:func:`nnrtl.hw.omni.workload.training_graph` cuts it: per tile ``j`` the tasks of
:func:`nnrtl.hw.omni.top_program.tile_steps` (``fw_mm``, ``fw_ew``; ``bp_ew``,
``bp_inner_x``, ``bp_inner_h``, ``bp_outer``). ``bp_inner_h`` does not run at ``t = 0``
(``δH_{-1}`` is not used); ``bp_inner_x`` runs in every layer (layer 0's is the input
gradient).

Dependencies (what a task reads; "all X" = every tile of X)
    ``fw_mm(l,t,b)[j]`` needs all ``fw_ew(l,t-1,b)`` and all ``fw_ew(l-1,t,b)`` (``z =
    [x_t; h_{t-1}; 1]``, ``s_{t-1}``); ``fw_ew[j]`` its cell's ``fw_mm[j]``.
    ``bp_ew(l,t,b)[j]`` needs all ``bp_inner_h(l,t+1,b)`` (``δH_t``; ``δS_t`` comes
    with it) and all ``bp_inner_x(l+1,t,b)`` (``δY_t``), where those cells run;
    ``bp_inner_*[j]`` need all ``bp_ew`` of the cell (the whole ``δgates``);
    ``bp_outer(l,t,b)[j]`` needs ``bp_ew[j]`` and the layer's previous BP cell's
    ``bp_outer[j]`` (the ``δW``, ``δb`` rows of tile ``j`` accumulated in
    :func:`.channel_passes.bp_pass`'s order: timestamps descending, samples ascending).
    Ids (the R2A's priority): FW by timestamp, layer, sample; BP by descending timestamp,
    descending layer, sample; the ``bp_outer`` tasks last (as the paper's graph has them).

The scratchpad model (:class:`StepGraph`) holds each cell's vectors, built when its first
task is dispatched from the vectors earlier cells hold (the RTL's results, in the bench);
a task reads a copy taken at its dispatch and writes back the elements its steps write;
``bp_outer`` reads the layer's accumulated ``δW``, ``δb``. Every element's arithmetic is
the cell programs', so the outputs are :func:`.channel_passes.fw_pass` / ``bp_pass``'s bit
for bit (:func:`run_golden`; tests/omni/gen/test_omni_top_passes.py).
"""

import numpy as np

from nnrtl.hw.omni.top_program import CellTask, tile_steps, unit_tiles

from .channel_passes import PART1_VECTORS, SAVED, _constant_one, _z

__all__ = ["StepGraph", "run_golden", "windows"]


class StepGraph:
    """One run (``fw`` or ``bp``) of a training step on the top: its tasks and the
    scratchpad model.

    Parameters
    ----------
    top : OmniConfig
        The top; its :meth:`~nnrtl.hw.omni.top_config.OmniConfig.layer_channel` are the
        layers' channels.
    phase : str
        ``"fw"`` or ``"bp"``.
    arrays : dict
        Bit patterns (``uint64``). ``fw``: ``weights`` (a list, per layer
        :func:`.channel_passes.weights_vector`), ``xs`` (layer 0's input, T x B x I).
        ``bp``: ``weights``, ``xs`` and ``hs`` (lists, per layer its input and FW output),
        ``stored`` (a list of dicts, what FW stored), ``dys`` (the loss gradient at the
        last layer's output, T x B x H).
    kept : ndarray of bool, layers x T
        MS2's kept cells.
    ms1 : bool
    tiles : int, optional
        Tiles of a cell (default ``top.channels``).

    Attributes
    ----------
    tasks : list of CellTask
        By id; ``cells[id]`` is the task's ``(l, t, b)``.

    Raises
    ------
    ValueError
        ``phase`` neither ``"fw"`` nor ``"bp"``.
    """

    def __init__(self, top, phase, arrays, kept, ms1, tiles=None):
        if phase not in ("fw", "bp"):
            raise ValueError(f"phase must be 'fw' or 'bp', not {phase!r}")
        self.top, self.phase, self.ms1 = top, phase, bool(ms1)
        self.tiles = top.channels if tiles is None else tiles
        self.arrays = arrays
        self.kept = np.asarray(kept, bool)
        self.layers = top.layers
        self.length, self.batch = np.asarray(arrays["xs"] if phase == "fw"
                                              else arrays["xs"][0]).shape[:2]
        self.channels = [top.layer_channel(l) for l in range(self.layers)]
        self.one = _constant_one(self.channels[0])
        self.tasks, self.cells = [], []
        self._pads = {}
        self._sums = [{"dw": np.zeros(4 * c.hidden_size * (c.input_size + c.hidden_size),
                                      np.uint64), "db": np.zeros(4 * c.hidden_size, np.uint64)}
                      for c in self.channels]
        self._build()

    @classmethod
    def of_shape(cls, top, phase, kept, ms1, tiles=None):
        """The graph of ``top``'s shape (``seq_len`` x ``batch``) on zero data: its tasks
        do not depend on the values (the cycle model's input, :func:`.perf.step_cycles`)."""
        h, length, batch, layers = top.hidden_size, top.seq_len, top.batch, top.layers
        zeros = np.zeros((length, batch, top.input_size), np.uint64)
        if phase == "fw":
            arrays = {"weights": [None] * layers, "xs": zeros}
        else:
            arrays = {"weights": [None] * layers,
                      "xs": [zeros] + [np.zeros((length, batch, h), np.uint64)] * (layers - 1),
                      "hs": [], "stored": [], "dys": None}
        return cls(top, phase, arrays, kept, ms1, tiles)

    # -- the graph ---------------------------------------------------------------------

    def _add(self, part, cell, slices, deps_of):
        l, t, _ = cell
        ids = []
        for j, (first, count) in enumerate(slices):
            steps = tile_steps(self.channels[l], part, first, count,
                               ms1=self.ms1 and (self.phase == "bp" or self.kept[l, t]))
            self.tasks.append(CellTask(id=len(self.tasks), part=part, layer=l, step=t,
                                       steps=tuple(steps), first=0,
                                       deps=tuple(sorted(set(deps_of(j)))),
                                       channel=self.channels[l], tile=j))
            self.cells.append(cell)
            ids.append(len(self.tasks) - 1)
        self._ids[(part, *cell)] = ids
        return ids

    def _every(self, part, l, t, b):
        return self._ids.get((part, l, t, b), [])

    def _build(self):
        layers, length, batch, kept = self.layers, self.length, self.batch, self.kept
        self._ids = {}
        units = unit_tiles(self.top.hidden_size, self.tiles)
        every = self._every
        if self.phase == "fw":
            for t in range(length):
                for l in range(layers):
                    for b in range(batch):
                        before = every("fw_ew", l, t - 1, b) + every("fw_ew", l - 1, t, b)
                        mm = self._add("fw_mm", (l, t, b), units, lambda j: before)
                        self._add("fw_ew", (l, t, b), units, lambda j: (mm[j],))
            return
        cells = [(l, t, b) for t in reversed(range(length)) for l in reversed(range(layers))
                 for b in range(batch) if kept[l, t]]
        for l, t, b in cells:
            grads = every("bp_inner_h", l, t + 1, b) + every("bp_inner_x", l + 1, t, b)
            ew = self._add("bp_ew", (l, t, b), units, lambda j: grads)
            if t > 0:
                self._add("bp_inner_h", (l, t, b), units, lambda j: ew)
            self._add("bp_inner_x", (l, t, b),
                      unit_tiles(self.channels[l].input_size, self.tiles), lambda j: ew)
        previous = {}
        for l, t, b in cells:
            ew, last = every("bp_ew", l, t, b), previous.get(l)
            previous[l] = self._add("bp_outer", (l, t, b), units,
                                    lambda j: [ew[j]] + ([last[j]] if last else []))

    # -- the scratchpad model ----------------------------------------------------------

    def pad_for(self, task_id):
        """The scratchpad of task ``task_id`` before its first step (a copy of its cell's
        vectors; every task it depends on must have finished)."""
        task, cell = self.tasks[task_id], self.cells[task_id]
        if cell not in self._pads:
            self._pads[cell] = (self._fw_pad if self.phase == "fw" else self._bp_pad)(*cell)
        pad = {name: v.copy() for name, v in self._pads[cell].items()}
        if task.part == "bp_outer":
            pad["dw_acc"] = self._sums[task.layer]["dw"].copy()
            pad["db_acc"] = self._sums[task.layer]["db"].copy()
        return pad

    def _fw_pad(self, l, t, b):
        h = self.channels[l].hidden_size
        x = (np.asarray(self.arrays["xs"][t, b], np.uint64) if l == 0
             else self._pads[l - 1, t, b]["h"])
        before = self._pads.get((l, t - 1, b))
        h_prev = before["h"] if before else np.zeros(h, np.uint64)
        s_prev = before["s"] if before else np.zeros(h, np.uint64)
        return {"weights": np.asarray(self.arrays["weights"][l], np.uint64),
                "z": _z(x, h_prev, self.one), "s_prev": s_prev.copy(), "one": self.one}

    def _bp_pad(self, l, t, b):
        h, i_size = self.channels[l].hidden_size, self.channels[l].input_size
        a = self.arrays
        zero = np.zeros(h, np.uint64)
        h_prev = np.asarray(a["hs"][l][t - 1, b], np.uint64) if t else zero
        above = self._pads.get((l + 1, t, b))
        dy = (np.asarray(a["dys"][t, b], np.uint64) if l == self.layers - 1
              else above["dz"][:h].copy() if above else zero.copy())
        later = self._pads.get((l, t + 1, b))
        pad = {"weights": np.asarray(a["weights"][l], np.uint64),
               "z": _z(np.asarray(a["xs"][l][t, b], np.uint64), h_prev, self.one),
               "one": self.one, "dy": dy,
               "dh_next": later["dz"][i_size:].copy() if later else zero.copy(),
               "ds_next": later["ds_prev"].copy() if later else zero.copy(),
               "dz": np.zeros(i_size + h, np.uint64)}
        pad.update({name: np.asarray(v[t, b], np.uint64).copy()
                    for name, v in a["stored"][l].items()})
        return pad

    def finish(self, task_id, pad):
        """Task ``task_id`` wrote ``pad`` (its scratchpad after its last step): the
        elements its steps write go back to its cell's vectors (and ``δW``, ``δb`` to
        the layer's sums)."""
        task, cell = self.tasks[task_id], self.cells[task_id]
        target = self._pads[cell]
        for step in task.steps:
            name, index = step.result.name, step.result.index
            if name not in target:
                target[name] = np.zeros_like(np.asarray(pad[name], np.uint64))
            target[name][index] = np.asarray(pad[name], np.uint64)[index]
            if name in ("dw", "db"):
                self._sums[task.layer][name][index] = target[name][index]

    def results(self):
        """Per layer, the run's outputs (bits): ``fw``: ``h`` and the stored vectors (T x
        B x H); ``bp``: ``dx``, ``dgates``, ``dw`` (4H x (I + H)), ``db``; zeros where
        a cell did not run."""
        out = []
        for l, channel in enumerate(self.channels):
            h, i_size = channel.hidden_size, channel.input_size
            shape = (self.length, self.batch)
            if self.phase == "fw":
                names = ("h", *(PART1_VECTORS if self.ms1 else SAVED))
                layer = {n: np.zeros((*shape, h), np.uint64) for n in names}
            else:
                layer = {"dx": np.zeros((*shape, i_size), np.uint64),
                         "dgates": np.zeros((*shape, 4 * h), np.uint64),
                         "dw": self._sums[l]["dw"].reshape(4 * h, i_size + h).copy(),
                         "db": self._sums[l]["db"].copy()}
            for t in range(self.length):
                for b in range(self.batch):
                    pad = self._pads.get((l, t, b))
                    if pad is None:
                        continue
                    if self.phase == "bp":
                        layer["dx"][t, b] = pad["dz"][:i_size]
                        layer["dgates"][t, b] = pad["dgates"]
                        continue
                    for name in layer:
                        if name == "h" or self.kept[l, t]:
                            layer[name][t, b] = pad[name]
            out.append(layer)
        return out


def windows(tasks, size):
    """The task table's windows: ``tasks`` cut into runs of at most ``size`` consecutive
    ids, each a list of :class:`CellTask` renumbered from 0 (dependencies on an earlier
    window dropped: it has finished), with the first global id of each."""
    out = []
    for start in range(0, len(tasks), size):
        chunk = []
        for task in tasks[start:start + size]:
            deps = tuple(d - start for d in task.deps if d >= start)
            chunk.append(CellTask(id=task.id - start, part=task.part, layer=task.layer,
                                  step=task.step, steps=task.steps, first=task.first,
                                  deps=deps, channel=task.channel, tile=task.tile))
        out.append((start, chunk))
    return out


def run_golden(graph):
    """Run ``graph``'s tasks in id order on the golden channel model; returns
    :meth:`StepGraph.results`."""
    from nnrtl.sim.golden.omni.channel import run_program

    for task in graph.tasks:
        pad = graph.pad_for(task.id)
        run_program(task.channel, list(task.steps), pad)
        graph.finish(task.id, pad)
    return graph.results()

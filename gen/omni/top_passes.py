"""A training step's FW and BP as task graphs of the η-LSTM top
(:class:`~nnrtl.hw.omni.top.OmniTop`), with the scratchpad model that feeds them: what
:mod:`.train_top` runs through the top's R2A (bench :mod:`nnrtl.sim.tb.omni.train_top`).

A step is two runs of the top: ``fw`` (every layer's FW cells) and ``bp`` (every kept
BP cell, MS2's skipped ones left out). A cell is one sample of one timestamp of one layer
(``(l, t, b)``); its program (:func:`.channel_passes.programs`: ``fw``, ``fw_ms1``,
``bp``, ``bp_ms1``) is cut into two tasks as :mod:`nnrtl.hw.omni.top_program` cuts it
(``fw_mm`` / ``fw_ew``, ``bp_ew`` / ``bp_mm``: the MVM head or tail and the rest).

Dependencies (what a task reads)
    ``fw_mm(l,t,b)`` needs ``fw_ew(l,t-1,b)`` (``h_{t-1}``, ``s_{t-1}``) and
    ``fw_ew(l-1,t,b)`` (``x_t``); ``fw_ew`` needs its cell's ``fw_mm``. ``bp_ew(l,t,b)``
    needs ``bp_mm(l,t+1,b)`` (``δH``, ``δS``) and ``bp_mm(l+1,t,b)`` (``δY``), where those
    cells run; ``bp_mm(l,t,b)`` needs its cell's ``bp_ew`` and the layer's previous BP
    cell's ``bp_mm`` (the ``δW``, ``δb`` accumulation, in :func:`.channel_passes.bp_pass`'s
    order: timestamps descending, samples ascending). Ids (the R2A's priority): FW by
    timestamp, layer, sample; BP by descending timestamp, descending layer, sample.

The scratchpad model (:class:`StepGraph`) builds a cell's vectors when its first task is
dispatched, from the results earlier tasks wrote (the RTL's, in the bench), gives
``bp_mm`` the accumulated ``δW``, ``δb`` when it is dispatched, and collects the outputs
as :func:`.channel_passes.fw_pass` / ``bp_pass`` return them: the same programs on the
same vectors in the same accumulation order, so the graph's outputs are those passes'
bit for bit (:func:`run_golden`; tests/omni/gen/test_omni_top_passes.py).
"""

import numpy as np

from nnrtl.hw.omni.config import OmniMode
from nnrtl.hw.omni.top_program import CellTask

from .channel_passes import PART1_VECTORS, SAVED, _constant_one, _z, programs

__all__ = ["StepGraph", "run_golden", "windows"]


def _cut(program):
    """``(head, tail)`` of a cell program at its one change between MVM and other steps."""
    mvm = [step.instruction.job.mode is OmniMode.MVM for step in program]
    cut = next(k for k in range(1, len(program)) if mvm[k] != mvm[k - 1])
    return program[:cut], program[cut:]


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

    Attributes
    ----------
    tasks : list of CellTask
        By id; ``cells[id]`` is the task's ``(l, t, b)``.
    """

    def __init__(self, top, phase, arrays, kept, ms1):
        if phase not in ("fw", "bp"):
            raise ValueError(f"phase must be 'fw' or 'bp', not {phase!r}")
        self.top, self.phase, self.ms1 = top, phase, bool(ms1)
        self.arrays = arrays
        self.kept = np.asarray(kept, bool)
        self.layers = top.layers
        self.length, self.batch = np.asarray(arrays["xs"] if phase == "fw"
                                              else arrays["xs"][0]).shape[:2]
        self.channels = [top.layer_channel(l) for l in range(self.layers)]
        self.one = _constant_one(self.channels[0])
        self.tasks, self.cells = [], []
        self._pads = {}
        self._build()
        self._start_outputs()

    # -- the graph ---------------------------------------------------------------------

    def _program(self, l, t):
        name = self.phase + ("_ms1" if self.ms1 and (self.phase == "bp" or self.kept[l, t])
                             else "")
        return _cut(programs(self.channels[l])[name])

    def _build(self):
        layers, length, batch, kept = self.layers, self.length, self.batch, self.kept
        if self.phase == "fw":
            cells = [(l, t, b) for t in range(length) for l in range(layers)
                     for b in range(batch)]
            parts = ("fw_mm", "fw_ew")
        else:
            cells = [(l, t, b) for t in reversed(range(length))
                     for l in reversed(range(layers)) for b in range(batch) if kept[l, t]]
            parts = ("bp_ew", "bp_mm")
        ids = {(part, *cell): 2 * k + j for k, cell in enumerate(cells)
               for j, part in enumerate(parts)}
        self._chain = {}
        previous = {}
        for cell in cells:          # BP: the layer's δW accumulation order
            if self.phase == "bp":
                self._chain[cell] = previous.get(cell[0])
                previous[cell[0]] = cell
        for k, (l, t, b) in enumerate(cells):
            head, tail = self._program(l, t)
            first = 0
            for j, (part, steps) in enumerate(zip(parts, (head, tail))):
                deps = self._deps(part, l, t, b, ids)
                self.tasks.append(CellTask(id=2 * k + j, part=part, layer=l, step=t,
                                           steps=tuple(steps), first=first,
                                           deps=tuple(sorted(set(deps))),
                                           channel=self.channels[l]))
                self.cells.append((l, t, b))
                first += len(steps)

    def _deps(self, part, l, t, b, ids):
        keys = {"fw_mm": [("fw_ew", l, t - 1, b), ("fw_ew", l - 1, t, b)],
                "fw_ew": [("fw_mm", l, t, b)],
                "bp_ew": [("bp_mm", l, t + 1, b), ("bp_mm", l + 1, t, b)],
                "bp_mm": [("bp_ew", l, t, b)]}[part]
        if part == "bp_mm" and self._chain[l, t, b] is not None:
            keys.append(("bp_mm", *self._chain[l, t, b]))
        return [ids[key] for key in keys if key in ids]

    # -- the scratchpad model ----------------------------------------------------------

    def _start_outputs(self):
        length, batch = self.length, self.batch
        self.outputs = []
        for channel in self.channels:
            h, i_size = channel.hidden_size, channel.input_size
            if self.phase == "fw":
                names = ("h", *(PART1_VECTORS if self.ms1 else SAVED))
                self.outputs.append({n: np.zeros((length, batch, h), np.uint64)
                                     for n in names})
            else:
                self.outputs.append({
                    "dx": np.zeros((length, batch, i_size), np.uint64),
                    "dgates": np.zeros((length, batch, 4 * h), np.uint64),
                    "dw": np.zeros(4 * h * (i_size + h), np.uint64),
                    "db": np.zeros(4 * h, np.uint64)})
        self._states = {}       # (l, t, b) -> the finished cell's pad

    def pad_for(self, task_id):
        """The scratchpad of task ``task_id`` before its first step (the cell's vectors;
        every task it depends on must have finished)."""
        task, (l, t, b) = self.tasks[task_id], self.cells[task_id]
        if task.first:
            pad = self._pads[l, t, b]
        else:
            pad = self._fw_pad(l, t, b) if self.phase == "fw" else self._bp_pad(l, t, b)
        if task.part == "bp_mm":
            before = self._chain[l, t, b]
            if before is None:
                h, i_size = self.channels[l].hidden_size, self.channels[l].input_size
                pad["dw_acc"] = np.zeros(4 * h * (i_size + h), np.uint64)
                pad["db_acc"] = np.zeros(4 * h, np.uint64)
            else:
                pad["dw_acc"] = self._states[before]["dw"].copy()
                pad["db_acc"] = self._states[before]["db"].copy()
        return pad

    def _fw_pad(self, l, t, b):
        h = self.channels[l].hidden_size
        x = (np.asarray(self.arrays["xs"][t, b], np.uint64) if l == 0
             else self._states[l - 1, t, b]["h"])
        before = self._states.get((l, t - 1, b))
        h_prev = before["h"] if before else np.zeros(h, np.uint64)
        s_prev = before["s"] if before else np.zeros(h, np.uint64)
        return {"weights": np.asarray(self.arrays["weights"][l], np.uint64),
                "z": _z(x, h_prev, self.one), "s_prev": s_prev.copy(), "one": self.one}

    def _bp_pad(self, l, t, b):
        h, i_size = self.channels[l].hidden_size, self.channels[l].input_size
        a = self.arrays
        zero = np.zeros(h, np.uint64)
        h_prev = np.asarray(a["hs"][l][t - 1, b], np.uint64) if t else zero
        dy = (np.asarray(a["dys"][t, b], np.uint64) if l == self.layers - 1
              else self.outputs[l + 1]["dx"][t, b].copy())
        later = self._states.get((l, t + 1, b))
        pad = {"weights": np.asarray(a["weights"][l], np.uint64),
               "z": _z(np.asarray(a["xs"][l][t, b], np.uint64), h_prev, self.one),
               "one": self.one, "dy": dy,
               "dh_next": later["dz"][i_size:].copy() if later else zero.copy(),
               "ds_next": later["ds_prev"].copy() if later else zero.copy()}
        pad.update({name: np.asarray(v[t, b], np.uint64).copy()
                    for name, v in a["stored"][l].items()})
        return pad

    def finish(self, task_id, pad):
        """Task ``task_id`` wrote ``pad`` (its scratchpad after its last step)."""
        task, cell = self.tasks[task_id], self.cells[task_id]
        pad = {name: np.asarray(v, np.uint64).copy() for name, v in pad.items()}
        if task.part in ("fw_mm", "bp_ew"):
            self._pads[cell] = pad
            return
        l, t, b = cell
        self._states[cell] = pad
        self._pads.pop(cell, None)
        out = self.outputs[l]
        if self.phase == "fw":
            for name in ("h", *(PART1_VECTORS if self.ms1 else SAVED)):
                if name == "h" or self.kept[l, t]:
                    out[name][t, b] = pad[name]
            return
        i_size = self.channels[l].input_size
        out["dx"][t, b] = pad["dz"][:i_size]
        out["dgates"][t, b] = pad["dgates"]
        out["dw"], out["db"] = pad["dw"].copy(), pad["db"].copy()

    def results(self):
        """Per layer, the run's outputs (bits): ``fw``: ``h`` and the stored vectors (T x
        B x H); ``bp``: ``dx``, ``dgates``, ``dw`` (4H x (I + H)), ``db``."""
        if self.phase == "fw":
            return [dict(out) for out in self.outputs]
        return [dict(out, dw=out["dw"].reshape(4 * c.hidden_size, -1))
                for out, c in zip(self.outputs, self.channels)]


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
                                  deps=deps, channel=task.channel))
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

"""A training step's FW and BP through the η-LSTM top under Verilator: the ``rtl`` backend
of :class:`~.trainer.OmniTrainer` when the configuration has a top
(:attr:`~.trainer.OmniTrainConfig.top`, a ``--param channels=...``).

Each run (``fw``, ``bp``) is one run of the bench :mod:`nnrtl.sim.tb.omni.train_top`: the
run's task graph (:class:`~.top_passes.StepGraph`) loaded into the R2A's task table, in
windows of ``max_tasks`` consecutive tasks, dispatched by the RTL to its channels (swings
included), the bench the host and the scratchpad (its model: :class:`~.top_passes.
StepGraph`, fed by the RTL's result beats, each checked bit for bit against the golden
model). With MS1 the FW run ends with every kept timestamp's P1 record of each layer
written through the top's DMA (compress, at θ in the ``threshold`` register) into the HBM
model and read back (decode), checked against :mod:`nnrtl.sim.golden.omni.dma`; BP reads
the decoded vectors.

The Verilog is converted once per trainer and its Verilator build cached by its text. A
run that is not bit-exact or fails the bench's checks raises
:class:`~nnrtl.gen.errors.CheckFailed` naming the run and the bench's first failure.
"""

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from ..errors import CheckFailed

__all__ = ["RtlTop", "save_arrays", "load_arrays", "RUN_COUNTERS"]

#: The top's counters a run reports, summed over its windows (and the DMA's, once).
RUN_COUNTERS = ("cycles", "model_cycles", "busy_matmul", "busy_ew", "group_busy_matmul",
                "group_busy_ew", "swings", "returns", "bytes_written", "bytes_read",
                "values_kept", "values_pruned")


def save_arrays(path, arrays):
    """Write nested arrays (lists and dicts of arrays) to ``path`` (``.npz``), keys joined
    by ``.``."""
    flat = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}{key}.", item)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(f"{prefix}{index}.", item)
        else:
            flat[prefix[:-1]] = np.asarray(value)
    walk("", arrays)
    np.savez(path, **flat)


def load_arrays(path):
    """The nested arrays :func:`save_arrays` wrote (numeric keys back into lists)."""
    tree = {}
    with np.load(path) as data:
        for key in data.files:
            node, parts = tree, key.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = data[key]

    def lists(node):
        if not isinstance(node, dict):
            return node
        if node and all(key.isdigit() for key in node):
            return [lists(node[str(k)]) for k in range(len(node))]
        return {key: lists(value) for key, value in node.items()}
    return lists(tree)


class RtlTop:
    """The runs of one :class:`~.trainer.OmniTrainConfig` (with a top) through the bench.

    Parameters
    ----------
    config : OmniTrainConfig
    seed : int
    log : callable, optional

    Attributes
    ----------
    records : list of dict
        One per run since :meth:`clear`: ``phase``, ``tasks``, ``windows``, the
        :data:`RUN_COUNTERS`, ``build_cached``, ``seconds``.
    dma : dict
        The DMA counters of the last ``fw`` run (empty without MS1).
    allocation : dict or None
        The R2A's split for the runs: ``None`` (default) the ``ew_mask`` and
        ``swing_mask`` reset values (dynamic R2A), or ``{"ew_channels": k, "dynamic":
        bool}`` (``dynamic=False``: static allocation, no swing channels).
    """

    def __init__(self, config, *, seed=1, log=None):
        self.config = config
        self.seed = seed
        self.log = log
        self.allocation = None
        self.records = []
        self.dma = {}
        self.kept = None
        self._verilog = None

    def clear(self):
        """Forget the records (a new training step)."""
        self.records = []
        self.dma = {}
        self.kept = None

    def _design(self):
        if self._verilog is None:
            from .engine import ENGINE
            self._verilog = ENGINE.verilog(self.config.top)
        return self._verilog

    def run(self, phase, arrays, kept, ms1):
        """Run ``phase`` (``"fw"`` / ``"bp"``) of the step on the top; ``arrays`` as
        :class:`~.top_passes.StepGraph` takes them, ``kept`` MS2's kept cells (layers x
        T). Returns per layer the outputs (:meth:`~.top_passes.StepGraph.results`, with
        MS1 in FW the P1 vectors the DMA decoded)."""
        from nnrtl.sim.runner import SimulationError, simulate

        what = f"the step's {phase.upper()} run on the top RTL"
        start = time.monotonic()
        memory = self.config.memory
        with tempfile.TemporaryDirectory(prefix="nnrtl-omni-top-") as directory:
            inputs, outputs = Path(directory) / "inputs.npz", Path(directory) / "outputs.npz"
            save_arrays(inputs, dict(arrays, kept=np.asarray(kept, bool)))
            params = {"config": dataclasses.asdict(self.config.top), "phase": phase,
                      "ms1": bool(ms1), "threshold": float(memory.prune_threshold),
                      "allocation": self.allocation,
                      "inputs": str(inputs), "outputs": str(outputs), "pattern": "none"}
            try:
                result = simulate(self._design(), test_module="nnrtl.sim.tb.omni.train_top",
                                  params=params, seed=self.seed, name="nnrtl_omni",
                                  log=self.log)
            except SimulationError as error:
                raise CheckFailed(f"{what} failed: {str(error).splitlines()[0]}") from None
            if result.get("bit_exact") is not True:
                raise CheckFailed(f"{what} is not bit-exact against the golden model or "
                                  f"failed its checks: {result.get('mismatches')} result "
                                  f"beats differ (first {result.get('first_mismatch')}); "
                                  f"failures {result.get('failures', [])[:3]}; its "
                                  f"outputs are not used")
            out = load_arrays(outputs)["layers"]
        record = {"phase": phase, "tasks": result["tasks"], "windows": result["windows"],
                  **{name: result[name] for name in RUN_COUNTERS},
                  "build_cached": result["build_cached"],
                  "seconds": round(time.monotonic() - start, 3)}
        self.records.append(record)
        self.kept = np.asarray(kept, bool)
        if phase == "fw" and ms1:
            self.dma = {name: result[name] for name in ("bytes_written", "bytes_read",
                                                       "values_kept", "values_pruned")}
        return out

    def counters(self, useful_macs):
        """The step's top counters (its runs summed): ``cycles``, ``model_cycles``,
        ``utilization`` (``useful_macs`` per PE and cycle), ``busy_matmul`` /
        ``busy_ew`` (channel-cycles per task kind), ``swings``, ``returns``,
        ``dma_bytes`` (written plus read), and ``runs`` (the records); the HBM term
        (:func:`.perf.step_bound` of the ``cycles`` counter, MS2's kept cells and, with
        MS1, the density the DMA's counters measured, at the top's ``hbm_ports``):
        ``memory_bytes``, ``memory_intermediates``
        (the model's MS1 record bytes, which the DMA's ``dma_bytes`` equal),
        ``memory_cycles``, ``bound`` and ``bound_cycles``."""
        from .perf import step_memory, step_time

        total = {name: sum(r[name] for r in self.records) for name in RUN_COUNTERS}
        cycles = total["cycles"]
        density = None
        if self.dma:
            values = self.dma["values_kept"] + self.dma["values_pruned"]
            density = self.dma["values_kept"] / values if values else 0.0
        term = step_memory(self.config.top, kept=self.kept, density=density)
        bound = step_time(cycles, term["memory_cycles"])
        return {"memory_bytes": term["bytes"]["total"],
                "memory_intermediates": term["bytes"]["intermediates"],
                "memory_cycles": bound["memory_cycles"], "bound": bound["bound"],
                "bound_cycles": bound["cycles"], "hbm_ports": term["bandwidth"]["ports"],
                "cycles": cycles, "model_cycles": total["model_cycles"],
                "utilization": useful_macs / (self.config.top.pes * cycles)
                if cycles else None,
                "busy_matmul": total["busy_matmul"], "busy_ew": total["busy_ew"],
                "swings": total["swings"], "returns": total["returns"],
                "dma_bytes": total["bytes_written"] + total["bytes_read"],
                "runs": list(self.records)}

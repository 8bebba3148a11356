"""The FPGA part of a FARNN training step on the RTL: each layer pass (FW or BW) one run of
the engine's Verilator bench (:mod:`nnrtl.sim.tb.farnn.engine`) on the trainer's data, the
trainer's ``rtl`` backend (:class:`~nnrtl.gen.farnn.trainer.FarnnTrainer`).

A pass's inputs (the weight stream as :func:`~nnrtl.gen.farnn.host.pack_weights` packed
it, the host's input MVM results, or the saved values and ``dy``) go to the bench as an
``.npz`` file (:mod:`nnrtl.sim.tb.farnn.io` names the arrays); the bench checks the RTL's
outputs against the golden model on the same inputs and writes them to another ``.npz``,
which becomes the pass's result. The Verilog is converted once per configuration in a
process (:meth:`nnrtl.gen.engines.Engine.verilog`) and built once (the Verilator cache is
keyed by it): every pass and layer of every step reuses the build.

A pass that is not bit-exact or fails the bench's protocol checks (a budget overrun: the
bench never hangs) raises :class:`~nnrtl.gen.errors.CheckFailed` (exit code 1) naming the
layer, the pass and the bench's reason; its outputs are not used. A configuration the top
refuses raises :class:`~nnrtl.gen.errors.UsageError` (exit code 2).
"""

import dataclasses
import tempfile
import time
from pathlib import Path

from ..errors import CheckFailed, UsageError

__all__ = ["RtlPasses"]


class RtlPasses:
    """Layer passes of one configuration through the Verilator bench.

    Parameters
    ----------
    config : FarnnConfig
        The engine (``seq_len`` and ``batch`` those of the data).
    seed : int
        The bench's seed (its stream pause patterns; none are used: ``none``).
    log : callable, optional
        Progress lines (the Verilator build's, the first time).

    Attributes
    ----------
    records : list of dict
        One per pass run since the last :meth:`clear`: ``layer``, ``phase``, the RTL's
        counters (``cycles``, ``mac_cycles``, ``load_cycles``, ``activation_wait_cycles``,
        ``useful_macs``), ``model_cycles``, ``build_cached`` and ``seconds`` (wall time of
        the run, the build or cache look-up included).
    """

    def __init__(self, config, *, seed=1, log=None):
        from ...sim.tb.farnn.io import check_supported

        try:
            check_supported(config)
        except ValueError as error:
            raise UsageError(f"--backend rtl: {error}; use --backend golden") from None
        self.config = config
        self.seed = seed
        self.log = log
        self.records = []

    def clear(self):
        """Forget the records (a new training step)."""
        self.records = []

    def run(self, layer, phase, data):
        """Pass ``phase`` (``"fw"`` or ``"bw"``) of layer number ``layer`` on ``data`` (the
        input arrays, :mod:`nnrtl.sim.tb.farnn.io`); returns its output arrays, the
        RTL's."""
        from ...sim.runner import SimulationError
        from ...sim.runner import simulate
        from ...sim.tb.farnn import io as farnn_io
        from .engine import ENGINE

        config = self.config
        what = f"layer {layer}'s {phase.upper()} pass on the RTL"
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="nnrtl-farnn-pass-") as directory:
            inputs, outputs = Path(directory) / "inputs.npz", Path(directory) / "outputs.npz"
            farnn_io.save(inputs, {name: data[name]
                                   for name in farnn_io.input_names(config, phase)})
            params = {"config": dataclasses.asdict(config), "steps": config.seq_len,
                      "phases": [phase], "inputs": str(inputs), "outputs": str(outputs),
                      "source_pauses": "none", "sink_pauses": "none"}
            try:
                result = simulate(ENGINE.verilog(config), test_module="nnrtl.sim.tb.farnn.engine",
                                  params=params, seed=self.seed, name="nnrtl_farnn",
                                  log=self.log)
            except SimulationError as error:
                lines = str(error).splitlines()
                log = next((line.rpartition("; log ")[2].rstrip(":") for line in lines
                            if "; log " in line), None)
                raise CheckFailed(f"{what} failed: {lines[0]}"
                                 + (f" (log {log})" if log else "")) from None
            if result.get("bit_exact") is not True:
                raise CheckFailed(f"{what} is not bit-exact against the golden model: "
                                 f"{result.get('mismatches')} words differ, the first "
                                 f"{result.get('first_mismatch')}; its outputs are not used")
            arrays = farnn_io.load(outputs)
        (counters,) = result["phases"]
        self.records.append({"layer": layer, **counters,
                             "build_cached": result["build_cached"],
                             "seconds": round(time.monotonic() - start, 3)})
        return arrays

    def counters(self):
        """The RTL's counters summed over :attr:`records` (``cycles``, ``mac_cycles``,
        ``load_cycles``, ``activation_wait_cycles``, ``useful_macs``), ``utilization``
        (useful MACs per PE and cycle of the runs, loads excluded), and ``passes`` (the
        records)."""
        sums = {name: sum(record[name] for record in self.records)
                for name in ("cycles", "mac_cycles", "load_cycles", "activation_wait_cycles",
                             "useful_macs")}
        cycles = sums["cycles"]
        return {**sums,
                "utilization": sums["useful_macs"] / (self.config.pes * cycles) if cycles
                else None,
                "passes": list(self.records)}

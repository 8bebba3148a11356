"""The channel part of an η-LSTM training step on the RTL: each layer pass (FW or BP) one
run of the Verilator bench :mod:`nnrtl.sim.tb.omni.train` (the Channel RTL running the
pass's cell programs, every result beat checked against the golden model), the
``rtl`` backend of :class:`~.trainer.OmniTrainer`.

The pass's arrays go to the bench as an ``.npz`` file, its outputs (the vectors the RTL
wrote) come back in another. The Channel's Verilog is converted once per trainer: the
layers' channels differ only in the sizes of their programs (one ``max_length``, the
longest job of any layer, :func:`~.trainer.config_for`), which the RTL does not depend
on, so one Verilator build (cached by the text) runs every pass of every step.

A pass that is not bit-exact or fails the bench's checks (a cycle budget overrun: the
bench never hangs) raises :class:`~nnrtl.gen.errors.CheckFailed` naming the layer, the
pass and the bench's reason; its outputs are not used.
"""

import tempfile
import time
from pathlib import Path

from ..errors import CheckFailed

__all__ = ["RtlCells", "PATTERN"]

#: The stream pause pattern of the training passes: none (the bench's checks of every
#: pattern are the channel's tests; a step only needs the RTL's values).
PATTERN = "none"


class RtlCells:
    """Layer passes of one :class:`~.trainer.OmniTrainConfig` through the bench.

    Parameters
    ----------
    config : OmniTrainConfig
    seed : int
    log : callable, optional
        Progress lines (the Verilator build's, the first time).

    Attributes
    ----------
    records : list of dict
        One per pass since :meth:`clear`: ``layer``, ``phase``, ``cells``, ``cycles``,
        ``model_cycles``, ``build_cached``, ``seconds``.
    """

    def __init__(self, config, *, seed=1, log=None):
        self.config = config
        self.seed = seed
        self.log = log
        self.records = []
        self._verilog = None

    def clear(self):
        """Forget the records (a new training step)."""
        self.records = []

    def _design(self):
        if self._verilog is None:
            from nnrtl.hw.omni.channel import Channel
            from nnrtl.sim.runner import to_verilog
            self._verilog = to_verilog(Channel(self.config.channels[0]), "omni_channel")
        return self._verilog

    def run(self, layer, phase, arrays):
        """Pass ``phase`` (``"fw"``/``"bp"``) of layer ``layer`` on ``arrays`` (the
        keyword arrays of :func:`~.channel_passes.fw_pass` / ``bp_pass``, ``ms1``
        included); returns its outputs, the RTL's."""
        from nnrtl.sim.runner import SimulationError, simulate
        from nnrtl.sim.tb.omni.channel import channel_spec
        from nnrtl.sim.tb.omni.train import load_arrays, save_arrays

        what = f"layer {layer}'s {phase.upper()} pass on the channel RTL"
        start = time.monotonic()
        arrays = dict(arrays)
        ms1 = bool(arrays.pop("ms1"))
        with tempfile.TemporaryDirectory(prefix="nnrtl-omni-pass-") as directory:
            inputs, outputs = Path(directory) / "inputs.npz", Path(directory) / "outputs.npz"
            save_arrays(inputs, arrays)
            params = {"channel": channel_spec(self.config.channels[layer]), "phase": phase,
                      "inputs": str(inputs), "outputs": str(outputs), "ms1": ms1,
                      "pattern": PATTERN}
            try:
                result = simulate(self._design(), test_module="nnrtl.sim.tb.omni.train",
                                  params=params, seed=self.seed, name="omni_channel",
                                  log=self.log)
            except SimulationError as error:
                raise CheckFailed(f"{what} failed: {str(error).splitlines()[0]}") from None
            if result.get("bit_exact") is not True:
                raise CheckFailed(f"{what} is not bit-exact against the golden model: "
                                  f"{result.get('mismatches')} result beats differ, the "
                                  f"first {result.get('first_mismatch')}; its outputs are "
                                  f"not used")
            out = load_arrays(outputs)
        self.records.append({"layer": layer, "phase": phase, "cells": result["cells"],
                             "cycles": result["cycles"],
                             "model_cycles": result["model_cycles"],
                             "build_cached": result["build_cached"],
                             "seconds": round(time.monotonic() - start, 3)})
        return out

    def counters(self, useful_macs):
        """``cycles`` (summed over the passes), ``utilization`` (``useful_macs`` per lane
        and cycle) and ``passes`` (the records)."""
        cycles = sum(record["cycles"] for record in self.records)
        lanes = self.config.channels[0].pes_per_channel
        return {"cycles": cycles,
                "utilization": useful_macs / (lanes * cycles) if cycles else None,
                "passes": list(self.records)}

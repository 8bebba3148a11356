"""The η-LSTM channel under Verilator running one layer pass of a training step: the
``rtl`` backend of :class:`nnrtl.gen.omni.trainer.OmniTrainer` (:mod:`nnrtl.gen.omni.
train_rtl` runs it).

The pass is :mod:`nnrtl.gen.omni.channel_passes`'s generator on the trainer's arrays:
every cell program it yields is run through the Channel with the channel bench's
scratchpad (:class:`nnrtl.sim.tb.omni.channel.Scratchpad`: each result beat checked, bit
for bit and in order, against the golden model on the same inputs; every wait bounded by
a cycle budget), and the generator is sent the scratchpad the RTL wrote, so the next cell
runs on the RTL's values. The pass's outputs go to an ``.npz`` file for the trainer.

Parameters (``tb_params()``): ``channel`` (a :func:`~nnrtl.sim.tb.omni.channel.
channel_spec`, the layer's sizes), ``phase`` (``"fw"`` or ``"bp"``), ``inputs`` and
``outputs`` (``.npz`` paths: the pass's keyword arrays, a dict ``stored`` flattened as
``stored_<name>``; the outputs likewise), ``ms1`` (bool), ``pattern`` (a backpressure
pattern of :data:`nnrtl.sim.patterns.PATTERNS`), ``seed``. Reported: ``bit_exact``,
``mismatches`` (result beats differing from the model), ``first_mismatch``, ``cells``,
``cycles``, ``model_cycles`` (the channel's estimate, summed over the cells).
"""

import random

import cocotb
import numpy as np

from nnrtl.gen.omni.channel_passes import PASSES, programs
from nnrtl.sim.tb.common import report, tb_params
from nnrtl.sim.tb.omni.channel import _run, check_drained, config_from_spec, reset_channel

__all__ = ["save_arrays", "load_arrays", "omni_train_pass"]


def save_arrays(path, arrays):
    """Write a pass's arrays (``stored`` flattened) to ``path`` (``.npz``)."""
    flat = {}
    for key, value in arrays.items():
        if isinstance(value, dict):
            flat.update({f"{key}_{name}": v for name, v in value.items()})
        else:
            flat[key] = np.asarray(value)
    np.savez(path, **flat)


def load_arrays(path):
    """The arrays :func:`save_arrays` wrote (``stored_*`` back into a dict)."""
    with np.load(path) as data:
        arrays, stored = {}, {}
        for key in data.files:
            if key.startswith("stored_"):
                stored[key[len("stored_"):]] = data[key]
            else:
                arrays[key] = data[key]
    if stored:
        arrays["stored"] = stored
    return arrays


@cocotb.test()
async def omni_train_pass(dut):
    params = tb_params()
    spec = params["channel"]
    config = config_from_spec(spec)
    table = programs(config)
    arrays = load_arrays(params["inputs"])
    generator = PASSES[params["phase"]](config, ms1=params["ms1"], **arrays)
    rng = random.Random(params["seed"])
    bench = await reset_channel(dut, spec)
    cells = cycles = model_cycles = mismatches = 0
    first = None
    try:
        request = next(generator)
        while True:
            name, pad = request
            spent, estimate, board = await _run(bench, config, table[name], pad,
                                                params["pattern"], rng)
            cells += 1
            cycles += spent
            model_cycles += estimate
            if board.mismatches:
                mismatches += len(board.mismatches)
                first = first or f"cell {cells} ({name}): {board.describe_mismatches(1)}"
                break                      # the pass's outputs would not be the RTL's
            request = generator.send(board.pad)
    except StopIteration as stop:
        save_arrays(params["outputs"], stop.value)
    await check_drained(bench, spec, "the pass")
    report({"bit_exact": mismatches == 0, "mismatches": mismatches,
            "first_mismatch": first, "cells": cells, "cycles": cycles,
            "model_cycles": model_cycles})

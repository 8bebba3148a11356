"""cocotb bench: the SBE engine end to end under Verilator.

Parameters (``tb_params()``): ``config`` (the :class:`~nnrtl.hw.sbe.SBEConfig` fields),
``steps`` (sequence length), ``split`` (0, or the step at which layer 0's sequence is cut
into two runs, the second continuing the first's state with ``keep_state``),
``batch_norm`` (run-time switch, configurations with batch norm), ``source_pauses`` /
``sink_pauses`` (:func:`nnrtl.sim.tb.common.pause_pattern` names), ``seed``; optionally
``model`` (a path to an ``.npz`` with the layers' ``matrix{l}``, ``bias{l}``, ``bn_scale{l}``,
``bn_shift{l}`` codes and the input codes ``xs``) instead of random weights and inputs, and
``outputs`` (a path where the last layer's h codes are saved as ``.npy``).

Driver: for each layer, one run per part of the sequence: registers ``steps``, ``layer``,
``flags``, then ``control.start``; the header and weight blocks on ``s_weights`` and the x
vectors on ``s_inputs`` (:mod:`nnrtl.sim.golden.sbe` packs both), the h vectors collected
from ``m_axis`` (one frame per step) and compared with :func:`nnrtl.sim.golden.sbe.run_layer`.
The next layer's x are the previous layer's h codes. Reported: ``bit_exact``, ``cycles``
(sum of the runs' ``cycles`` counters), ``model_cycles`` (:func:`nnrtl.gen.sbe.perf.run_cycles`
of the same runs), ``useful_macs``, ``utilization``, ``stall_cycles`` and the other wait
counters, ``weight_words``, ``runs`` (per-run counters).
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from nnrtl.gen.sbe.perf import run_cycles
from nnrtl.hw.sbe import SBEConfig
from nnrtl.hw.sbe.engine import bus_bits
from nnrtl.sim.golden import sbe as golden
from nnrtl.sim.tb.common import pause_pattern, report, start_clock_and_reset, tb_params

PARAMS = tb_params()
CONFIG = SBEConfig(**PARAMS["config"])
REGS = CONFIG.registers
COUNTERS = ("cycles", "stall_cycles", "weight_wait_cycles", "input_wait_cycles",
            "handover_wait_cycles", "column_steps", "useful_macs", "weight_words")


def beats_to_bytes(beats, width, bus_bits):
    """The bytes of a stream of beats (rows of unsigned words of ``width`` bits) on a bus of
    ``bus_bits`` bits."""
    beats = np.asarray(beats)
    words = beats.shape[1]
    if width in (8, 16, 32) and words * width == bus_bits:
        return beats.astype(f"<u{width // 8}").tobytes()
    size = bus_bits // 8
    return b"".join(golden.pack_beat(row, width).to_bytes(size, "little") for row in beats)


async def read_register(master, name):
    register = REGS[name]
    data = await master.read(REGS.offset_of(name), register.width // 8)
    return int.from_bytes(data.data, "little")


async def write_register(master, name, value):
    await master.write(REGS.offset_of(name), int(value).to_bytes(4, "little"))


def layer_inputs(rng):
    """Per-layer parameters and the first layer's x codes."""
    steps = PARAMS["steps"]
    if PARAMS.get("model"):
        data = np.load(PARAMS["model"])
        layers = []
        for l in range(CONFIG.layers):
            bn = {}
            if f"bn_scale{l}" in data:
                bn = {"bn_scale": data[f"bn_scale{l}"], "bn_shift": data[f"bn_shift{l}"]}
            layers.append(golden.LayerParams(matrix=data[f"matrix{l}"], bias=data[f"bias{l}"],
                                             **bn))
        return layers, data["xs"]
    np_rng = np.random.default_rng(rng.getrandbits(32))
    layers = [golden.random_layer(CONFIG, l, np_rng) for l in range(CONFIG.layers)]
    return layers, golden.random_inputs(CONFIG, steps, np_rng)


@cocotb.test()
async def runs_match_golden_model(dut):
    rng = random.Random(PARAMS["seed"])
    await start_clock_and_reset(dut)
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
    weights = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_weights_"), dut.clk, dut.rst)
    inputs = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_inputs_"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk, dut.rst)
    for stream in (weights, inputs):
        stream.set_pause_generator(pause_pattern(PARAMS["source_pauses"],
                                                 random.Random(rng.random())))
    sink.set_pause_generator(pause_pattern(PARAMS["sink_pauses"], random.Random(rng.random())))

    for name, value in CONFIG.register_constants.items():
        assert await read_register(master, name) == value, name

    steps, split = PARAMS["steps"], PARAMS.get("split", 0)
    batch_norm = PARAMS.get("batch_norm", CONFIG.batch_norm)
    layers, xs = layer_inputs(rng)
    ow = CONFIG.operand_width
    w_bits = bus_bits(CONFIG.bus_weights, ow)
    x_bits = bus_bits(CONFIG.columns_per_cycle, ow)
    o_bits = bus_bits(CONFIG.post_units, ow)
    out_words = CONFIG.post_units

    mismatches, runs = 0, []
    for l, params in enumerate(layers):
        expected, _ = golden.run_layer(CONFIG, l, params, xs, batch_norm=batch_norm)
        parts = [(0, split), (split, steps)] if (l == 0 and 0 < split < steps) else [(0, steps)]
        got = []
        for index, (first, last) in enumerate(parts):
            count = last - first
            await write_register(master, "steps", count)
            await write_register(master, "layer", l)
            await write_register(master, "flags", (index > 0) | (batch_norm << 1))
            await weights.send(AxiStreamFrame(beats_to_bytes(
                golden.weight_beats(CONFIG, l, params, count), ow, w_bits)))
            x_beats = golden.input_beats(CONFIG, l, xs[first:last])
            if len(x_beats):
                await inputs.send(AxiStreamFrame(beats_to_bytes(x_beats, ow, x_bits)))
            await write_register(master, "control", 1)
            words = []
            for t in range(count):
                frame = await sink.recv()
                data = int.from_bytes(bytes(frame.tdata), "little")
                beats = len(frame.tdata) * 8 // o_bits
                assert beats == CONFIG.hidden_size // out_words, \
                    f"step {first + t}: {beats} beats in the frame"
                row = [word for b in range(beats) for word in golden.unpack_beat(
                    data >> (b * o_bits), out_words, ow)]
                words.append(row)
            while await read_register(master, "status") & 1:
                await ClockCycles(dut.clk, 8)
            counters = {name: await read_register(master, name) for name in COUNTERS}
            counters.update(layer=l, steps=count,
                            model_cycles=run_cycles(CONFIG, l, count))
            runs.append(counters)
            got.extend(words)
        got = np.array(got, dtype=np.int64)
        bad = np.argwhere(got != expected)
        if len(bad):
            mismatches += len(bad)
            t, j = bad[0]
            dut._log.error("layer %d: %d h values differ; first at step %d unit %d: got %d, "
                           "expected %d", l, len(bad), t, j, got[t, j], expected[t, j])
        xs = expected
    await ClockCycles(dut.clk, 4)
    assert sink.empty(), "the engine sent more hidden vectors than steps"
    if PARAMS.get("outputs"):
        np.save(PARAMS["outputs"], xs)

    total = {name: sum(run[name] for run in runs) for name in COUNTERS}
    model = sum(run["model_cycles"] for run in runs)
    report({
        "bit_exact": mismatches == 0,
        "cycles": total["cycles"],
        "model_cycles": model,
        "model_error": (total["cycles"] - model) / model,
        "useful_macs": total["useful_macs"],
        "utilization": total["useful_macs"] / (CONFIG.pes * total["cycles"]),
        **{name: total[name] for name in COUNTERS if name not in ("cycles", "useful_macs")},
        "expected_macs": steps * CONFIG.macs_per_step,
        "runs": runs,
    })
    assert total["useful_macs"] == steps * CONFIG.macs_per_step
    assert mismatches == 0, f"{mismatches} h values differ from the golden model"

"""cocotb bench: the SBE engine end to end under Verilator, on the generic
:class:`~nnrtl.sim.tb.engine_bench.EngineBench`.

Parameters (``tb_params()``): ``config`` (the :class:`~nnrtl.hw.sbe.SbeConfig` fields),
``steps`` (sequence length), ``split`` (0, or the step at which layer 0's sequence is cut
into two runs, the second continuing the first's state with ``keep_state``),
``batch_norm`` (run-time switch, configurations with batch norm), ``source_pauses`` /
``sink_pauses`` (names of :data:`nnrtl.sim.patterns.PATTERNS`), ``seed``; optionally
``model`` (a path to an ``.npz`` with the layers' ``matrix{l}``, ``bias{l}``, ``bn_scale{l}``,
``bn_shift{l}`` codes and the input codes ``xs``) instead of random weights and inputs, and
``outputs`` (a path where the h codes the engine sent for the last layer are saved as
``.npy``).

Driver: for each layer, one run per part of the sequence: registers ``steps``, ``layer``,
``flags`` (``keep_state``, ``batch_norm``), then ``control.start``; the header and weight
blocks on ``s_weights`` and the x vectors on ``s_inputs`` (:mod:`nnrtl.sim.golden.sbe`
packs both), the h vectors taken from ``m_axis`` (one frame per step) and checked in order
against :func:`nnrtl.sim.golden.sbe.run_layer`. The next layer's x are the previous
layer's golden h codes.

Every wait of a run shares the run's budget from :func:`nnrtl.gen.sbe.perf.run_cycles`.
Protocol failures: a frame of the wrong length, ``status.done`` not set after a run,
a source not drained at the end of its run, the ``weight_words`` counter differing from
the golden model's beat counts (:func:`~nnrtl.sim.golden.sbe.beat_counts`, words =
beats x ``bus_weights``), the ``useful_macs`` counter (MACs issued, padding included)
differing from ``steps x padded_macs_per_step``, and
output after the last run. Reported: the checker's ``bit_exact``, ``mismatches``,
``first_mismatch``, ``fault``, ``budget_use``; ``cycles`` (sum of the runs' ``cycles``
counters), ``model_cycles`` (:func:`~nnrtl.gen.sbe.perf.run_cycles` of the same runs: the
model of gapless streams), ``model_error`` (``cycles / model_cycles - 1``, only when both
stream patterns are ``none``: the model has no other pattern to compare with),
``useful_macs`` (the model's: ``steps x macs_per_step``), ``padding_macs`` (the MACs the
padding of sizes the RTL refuses costs), ``expected_macs``, ``utilization`` (useful MACs
only), ``stall_cycles``
and the other wait counters, ``weight_words``, ``runs`` (per-run counters).
"""

import random

import cocotb
import numpy as np
from cocotbext.axi import AxiStreamFrame

from nnrtl.gen.sbe.perf import run_cycles
from nnrtl.hw.sbe import SbeConfig
from nnrtl.sim.golden import sbe as golden
from nnrtl.sim.tb.common import report, tb_params
from nnrtl.sim.tb.engine_bench import EngineBench
from nnrtl.sim.tb.registers import BenchFailure

PARAMS = tb_params()
CONFIG = SbeConfig(**PARAMS["config"])
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


async def run(bench, layer, params, xs, first, last, *, keep_state, batch_norm, expected):
    """One run: steps ``first .. last - 1`` of layer ``layer``; returns its counters and
    the h codes the engine sent (``count x`` the layer's model hidden size)."""
    count = last - first
    ow = CONFIG.operand_width
    counts = golden.beat_counts(CONFIG, layer, count)
    await bench.regs.write("steps", count)
    await bench.regs.write("layer", layer)
    await bench.regs.write_fields("flags", keep_state=keep_state, batch_norm=batch_norm)
    await bench.source("s_weights").send(AxiStreamFrame(beats_to_bytes(
        golden.weight_beats(CONFIG, layer, params, count), ow, CONFIG.stream_bits.weights)))
    x_beats = golden.input_beats(CONFIG, layer, xs[first:last])
    if len(x_beats):
        await bench.source("s_inputs").send(AxiStreamFrame(beats_to_bytes(
            x_beats, ow, CONFIG.stream_bits.inputs)))
    model = run_cycles(CONFIG, layer, count)
    bench.begin(f"the run of layer {layer}, steps {first}-{last - 1}", model,
                output_beats=counts["outputs"])
    await bench.regs.write_fields("control", start=1)

    o_bits = CONFIG.stream_bits.outputs
    beats_per_step = CONFIG.padded_hidden_size // CONFIG.post_units
    hs = []
    for t in range(first, last):
        frame = await bench.recv("m_axis", f"h of layer {layer} step {t}")
        data = int.from_bytes(bytes(frame.tdata), "little")
        beats = len(frame.tdata) * 8 // o_bits
        bench.expect_count(f"the m_axis frame of layer {layer} step {t}", beats,
                           beats_per_step,
                           source="beats per step, padded_hidden_size / post_units")
        row = [word for b in range(beats)
               for word in golden.unpack_beat(data >> (b * o_bits), CONFIG.post_units, ow)]
        row = row[:CONFIG.layer_sizes(layer)[1]]      # the padded units' h are cut
        bench.check("m_axis", expected[t], row)
        hs.append(row)
    await bench.wait_field("status", "busy", 0, f"the end of layer {layer} steps {first}-"
                                                f"{last - 1}")
    if await bench.regs.read_field("status", "done") != 1:
        raise BenchFailure(f"status.done is 0 after the run of layer {layer} steps {first}-"
                           f"{last - 1} (cycle {bench.cycle})")
    for name in ("s_weights", "s_inputs"):
        await bench.drain(name)
    counters = await bench.regs.read_many(COUNTERS)
    bench.expect_count(f"the weight_words counter of layer {layer} steps {first}-{last - 1}",
                       counters["weight_words"], counts["weights"] * CONFIG.bus_weights,
                       source="golden.beat_counts weights x bus_weights")
    counters.update(layer=layer, steps=count, model_cycles=model)
    return counters, hs


@cocotb.test()
async def runs_match_golden_model(dut):
    rng = random.Random(PARAMS["seed"])
    async with EngineBench(dut, CONFIG.registers, sources=["s_weights", "s_inputs"],
                           sinks=["m_axis"], params=PARAMS) as bench:
        await bench.regs.expect(CONFIG.register_constants)
        steps, split = PARAMS["steps"], PARAMS.get("split", 0)
        batch_norm = PARAMS.get("batch_norm", CONFIG.batch_norm)
        layers, xs = layer_inputs(rng)
        runs = []
        for l, params in enumerate(layers):
            expected, _ = golden.run_layer(CONFIG, l, params, xs, batch_norm=batch_norm)
            parts = [(0, split), (split, steps)] if (l == 0 and 0 < split < steps) \
                else [(0, steps)]
            got = []
            for index, (first, last) in enumerate(parts):
                counters, hs = await run(bench, l, params, xs, first, last,
                                         keep_state=index > 0, batch_norm=batch_norm,
                                         expected=expected)
                runs.append(counters)
                got += hs
            xs = expected
        await bench.finish()
        if PARAMS.get("outputs"):
            # what the engine sent, not the golden model's h (they differ if not bit-exact)
            np.save(PARAMS["outputs"], np.array(got, dtype=np.int64).reshape(steps, -1))

        total = {name: sum(run[name] for run in runs) for name in COUNTERS}
        model = sum(run["model_cycles"] for run in runs)
        # The counter counts what the array issues, padding included.
        bench.expect_count("the useful_macs counters (sum of the runs)", total["useful_macs"],
                           steps * CONFIG.padded_macs_per_step,
                           source="steps x padded_macs_per_step")
        useful = steps * CONFIG.macs_per_step
        gapless = (PARAMS.get("source_pauses", "none") == "none"
                   and PARAMS.get("sink_pauses", "none") == "none")
        report({
            **bench.result(),
            "cycles": total["cycles"],
            "model_cycles": model,
            **({"model_error": (total["cycles"] - model) / model} if gapless else {}),
            "useful_macs": useful,
            "padding_macs": total["useful_macs"] - useful,
            "utilization": useful / (CONFIG.pes * total["cycles"]),
            **{name: total[name] for name in COUNTERS if name not in ("cycles", "useful_macs")},
            "expected_macs": steps * CONFIG.macs_per_step,
            "runs": runs,
        })

"""cocotb bench: the FARNN engine (:class:`~nnrtl.hw.farnn.engine.FarnnEngine`) end to end
under Verilator, on the generic :class:`~nnrtl.sim.tb.engine_bench.EngineBench`.

Parameters (``tb_params()``): ``config`` (the :class:`~nnrtl.hw.farnn.FarnnConfig` fields),
``steps`` (time steps of the layer pass), ``source_pauses`` / ``sink_pauses`` (names of
:data:`nnrtl.sim.patterns.PATTERNS`), ``seed``.

Driver: random weights (``weight_hh``, ``bias_hh``), the host's input MVM and ``dy`` drawn
from the seed; then for the FW pass and the BW pass in turn: registers ``phase``,
``steps``, ``batch``, ``control.load``; the pass's weights on ``s_weights``
(:func:`nnrtl.gen.farnn.host.pack_weights`, one frame per unit, GRU FW then the ``bR_n``
beats as one frame), ``status.loading`` awaited; ``control.start``; the input cells on
``s_imvm`` (FW) or ``s_bw`` (BW: the saved values read back with ``dy``), one frame a step;
``m_h`` and ``m_saved`` (FW) or ``m_deltas`` (BW) taken one frame a step (``tlast`` closes
each step) and checked in order against :mod:`nnrtl.sim.golden.farnn.layer`.

Every wait shares its piece of work's budget (:func:`nnrtl.sim.patterns.cycle_budget`): a
load's is its beats plus a RESTART cycle per unit, a run's
:func:`~nnrtl.hw.farnn.schedule.run_cycles`. Protocol failures: a frame of the wrong
length, an error flag in ``status`` after a pass, a source not drained, output after the
last run. Reported: the checker's fields, ``cycles`` (sum of the passes' counters),
``model_cycles`` (sum of ``run_cycles``; ``None`` for ``chains > 2``), ``model_error`` (gapless patterns and ``chains <=
2`` only: the model's scope), ``useful_macs`` (sum of the counters), ``utilization``,
``stall_cycles`` (the ``activation_wait_cycles`` counters: the feed waiting for the
recurrence), the sums of ``mac_cycles``, ``load_cycles``, ``activation_wait_cycles``, and
``phases`` (per pass: ``phase``, ``model_cycles`` and its counters).
"""

import dataclasses
import random

import cocotb
import numpy as np
from cocotbext.axi import AxiStreamFrame

from nnrtl.gen.farnn.host import pack_weights
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.hw.farnn.registers import COUNTERS, PHASES, register_map
from nnrtl.hw.farnn.schedule import bias_beats, cell_order, run_cycles
from nnrtl.sim.golden.farnn import layer as golden
from nnrtl.sim.tb.common import report, tb_params
from nnrtl.sim.tb.engine_bench import EngineBench
from nnrtl.sim.tb.registers import BenchFailure

PARAMS = tb_params()
CONFIG = dataclasses.replace(FarnnConfig(**PARAMS["config"]), seq_len=PARAMS["steps"])
ERRORS = ("load_error", "vector_error", "run_error")


def budget_model(phase, steps):
    """``(model, budget cycles)`` of a run: :func:`run_cycles` for ``chains <= 2`` (its
    scope); beyond, no model, and the budget from the two-chain engine of the same PEs
    times ``chains / 2`` (the serializer hands out a beat's rows one a cycle)."""
    if CONFIG.chains <= 2:
        model = run_cycles(CONFIG, phase, steps)
        return model, model
    pairs = dataclasses.replace(CONFIG, chains=2,
                                chain_length=CONFIG.chain_length * CONFIG.chains // 2)
    return None, run_cycles(pairs, phase, steps) * CONFIG.chains // 2


def _bytes(rows):
    """A frame's bytes from rows of fp32 bit patterns (one row a beat)."""
    return np.asarray(rows, dtype=np.int64).astype("<u4").tobytes()


def _words(frame, count):
    """The beats of a received frame as lists of ``count`` words."""
    words = np.frombuffer(bytes(frame.tdata), dtype="<u4").astype(np.int64)
    return words.reshape(-1, count).tolist()


def weight_frames(weights, phase):
    """The load of pass ``phase``: one frame per unit, then (GRU FW) the ``bR_n`` beats."""
    matrices = weights.recurrent if phase == "fw" else weights.recurrent_t
    stream = np.asarray(pack_weights(CONFIG, phase, matrices))
    per_unit = CONFIG.chain_length * CONFIG.weights_per_pe(phase)
    frames = [stream[i:i + per_unit] for i in range(0, len(stream), per_unit)]
    if CONFIG.cell == "gru" and phase == "fw":
        frames.append(np.asarray(bias_beats(CONFIG, weights.bias_n)))
    return frames


def stimulus(rng):
    """Weights, golden FW/BW results and the streams' cells, from ``rng``."""
    steps, batch, hidden, units = CONFIG.seq_len, CONFIG.batch, CONFIG.hidden_size, \
        CONFIG.units
    weight_hh = rng.standard_normal((units * hidden, hidden)) * 0.4
    bias_hh = rng.standard_normal(units * hidden) * 0.3
    weights = golden.LayerWeights.from_arrays(CONFIG, weight_hh, bias_hh)
    imvm = golden.to_bits(rng.standard_normal((steps, batch, units, hidden)))
    fw = golden.forward(CONFIG, weights, imvm)
    dy = golden.to_bits(rng.standard_normal((steps, batch, hidden)))
    bw = golden.backward(CONFIG, weights, fw, dy)
    return weights, imvm, fw, dy, bw


async def load(bench, weights, phase):
    """LOAD of pass ``phase``: its weight frames, ``status.loading`` awaited."""
    frames = weight_frames(weights, phase)
    beats = sum(len(frame) for frame in frames)
    bench.begin(f"the {phase} weight load", beats + CONFIG.units)
    await bench.regs.write("phase", PHASES[phase])
    await bench.regs.write("steps", CONFIG.seq_len)
    await bench.regs.write("batch", CONFIG.batch)
    await bench.regs.write_fields("control", load=1)
    for frame in frames:
        await bench.source("s_weights").send(AxiStreamFrame(_bytes(frame)))
    await bench.drain("s_weights")
    await bench.wait_field("status", "loading", 0, f"the end of the {phase} load")


async def run(bench, phase, source, inputs, sinks):
    """START of pass ``phase``: ``inputs`` (one list of beats a step) on ``source``; each
    sink's frames checked against ``sinks[name]`` (one list of beats a step). Returns the
    pass's counters."""
    steps, cells = CONFIG.seq_len, len(inputs[0])
    model, budget = budget_model(phase, steps)
    bench.begin(f"the {phase} run", budget, output_beats=steps * cells * len(sinks))
    await bench.regs.write_fields("control", start=1)
    for beats in inputs:
        await bench.source(source).send(AxiStreamFrame(_bytes(beats)))
    for index in range(steps):
        for name, expected in sinks.items():
            frame = await bench.recv(name, f"{phase} frame {index}")
            width = len(expected[index][0])
            got = _words(frame, width)
            bench.expect_count(f"the beats of {name} frame {index}", len(got), cells,
                               source="cells per step, cell_order")
            bench.check(name, [w for beat in expected[index] for w in beat],
                        [w for beat in got for w in beat])
    await bench.wait_field("status", "busy", 0, f"the end of the {phase} run")
    await bench.drain(source)
    status = {name: await bench.regs.read_field("status", name) for name in ERRORS}
    if any(status.values()) or await bench.regs.read_field("status", "done") != 1:
        raise BenchFailure(f"status after the {phase} run: {status}, done expected 1 "
                           f"(cycle {bench.cycle})")
    counters = await bench.regs.read_many(tuple(COUNTERS))
    return {"phase": phase, "model_cycles": model, **counters}


@cocotb.test()
async def layer_pass_matches_golden_model(dut):
    rng = np.random.default_rng(random.Random(PARAMS["seed"]).getrandbits(32))
    weights, imvm, fw, dy, bw = stimulus(rng)
    lstm = CONFIG.cell == "lstm"
    order = cell_order(CONFIG, CONFIG.batch)
    steps = CONFIG.seq_len

    def saved(t, b, row):
        before = 0 if t == 0 else int((fw.c if lstm else fw.h)[t - 1, b, row])
        return [int(fw.saved[name][t, b, row]) for name in fw.saved] + [before]

    fw_in = [[list(imvm[t, b, :, row]) for b, row in order] for t in range(steps)]
    fw_h = [[[int(fw.h[t, b, row])] for b, row in order] for t in range(steps)]
    fw_saved = [[saved(t, b, row) for b, row in order] for t in range(steps)]
    back = list(reversed(range(steps)))
    bw_in = [[saved(t, b, row) + [int(dy[t, b, row])] for b, row in order] for t in back]
    bw_deltas = [[[int(v) for v in bw.d_input[t, b, :, row]]
                  + ([] if lstm else [int(bw.d_recurrent[t, b, 2, row])])
                  for b, row in order] for t in back]

    async with EngineBench(dut, register_map(CONFIG), sources=["s_weights", "s_imvm", "s_bw"],
                           sinks=["m_h", "m_saved", "m_deltas"], params=PARAMS) as bench:
        phases = []
        await load(bench, weights, "fw")
        phases.append(await run(bench, "fw", "s_imvm", fw_in,
                                {"m_h": fw_h, "m_saved": fw_saved}))
        await load(bench, weights, "bw")
        phases.append(await run(bench, "bw", "s_bw", bw_in, {"m_deltas": bw_deltas}))
        await bench.finish()

        cycles = sum(p["cycles"] for p in phases)
        model = None if CONFIG.chains > 2 else sum(p["model_cycles"] for p in phases)
        useful = sum(p["useful_macs"] for p in phases)
        gapless = (PARAMS.get("source_pauses", "none") == "none"
                   and PARAMS.get("sink_pauses", "none") == "none")
        report({
            **bench.result(),
            "cycles": cycles,
            "model_cycles": model,
            **({"model_error": (cycles - model) / model}
               if gapless and model else {}),
            "useful_macs": useful,
            "utilization": useful / (CONFIG.pes * cycles),
            # the cycles the units' feed waited for the recurrence: the FARNN's stall
            "stall_cycles": sum(p["activation_wait_cycles"] for p in phases),
            **{name: sum(p[name] for p in phases)
               for name in ("mac_cycles", "load_cycles", "activation_wait_cycles")},
            "phases": phases,
        })


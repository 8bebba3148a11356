"""cocotb bench: the FARNN engine (:class:`~nnrtl.hw.farnn.engine.FarnnEngine`) end to end
under Verilator, on the generic :class:`~nnrtl.sim.tb.engine_bench.EngineBench`: layer
passes on the given or drawn data, every output checked against the golden model.

Parameters (``tb_params()``): ``config`` (the :class:`~nnrtl.hw.farnn.FarnnConfig` fields),
``steps`` (time steps of a pass), ``phases`` (the passes to run in order, default ``["fw",
"bw"]``), ``inputs`` (optional: an ``.npz`` of the passes' inputs), ``outputs`` (optional:
the ``.npz`` the RTL's outputs are written to), ``source_pauses`` / ``sink_pauses``
(names of :data:`nnrtl.sim.patterns.PATTERNS`), ``seed``, ``weight_load`` (``"stream"``,
the default; ``"backdoor"``: :func:`backdoor_load`, for full-size runs; ``"stream+check"``:
the stream load, then every PE memory compared with what the back door writes).

One data path (:mod:`nnrtl.sim.tb.farnn.io`: the arrays, their streams and shapes): the
inputs are the file's (what the trainer's ``rtl`` backend sends: its weight streams, input
MVM results, saved values and ``dy``), or, without ``inputs``, drawn from the seed
(:func:`~nnrtl.sim.tb.farnn.io.random_inputs`: random weights, input MVM and ``dy``, the
BW's saved values the golden FW's). The expected outputs are the golden model's
(:mod:`nnrtl.sim.golden.farnn.layer`) on those inputs. Then for each pass in turn:
registers ``phase``, ``steps``, ``batch``, ``control.load``; the pass's weight stream on
``s_weights`` (one frame a load, GRU FW then the ``bR_n`` beats as one frame),
``status.loading`` awaited; ``control.start``; the input cells on ``s_imvm`` (FW) or
``s_bw`` (BW; with a projection also ``s_dy``), one frame a step; ``m_h`` and ``m_saved``
(FW) or ``m_deltas`` (BW), with a projection also ``m_proj``, taken one frame a step
(``tlast`` closes each step) and checked in order. The words received
are what ``outputs`` gets (:func:`~nnrtl.sim.tb.farnn.io.arrays_of`), written once every
pass has ended its checks.

Every wait shares its piece of work's budget (:func:`nnrtl.sim.patterns.cycle_budget`): a
load's is its beats plus a RESTART cycle per unit, a run's
:func:`~nnrtl.hw.farnn.schedule.run_cycles`. Protocol failures: a frame of the wrong
length, an error flag in ``status`` after a pass, a source not drained, output after the
last run. Reported: the checker's fields, ``cycles`` (sum of the passes' counters),
``model_cycles`` (sum of ``run_cycles``), ``model_error`` (gapless patterns only: the
model's scope), ``useful_macs`` (sum of
the counters), ``utilization``, ``stall_cycles`` (the ``activation_wait_cycles`` counters:
the feed waiting for the recurrence), the sums of ``mac_cycles``, ``load_cycles``,
``activation_wait_cycles``, ``phases`` (per pass: ``phase``, ``model_cycles`` and its
counters) and ``outputs`` (the file written, or None).
"""

import dataclasses
import random

import cocotb
import numpy as np
from cocotbext.axi import AxiStreamFrame

from nnrtl.hw.arith.float import FP32
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.hw.farnn.pair import memory_word
from nnrtl.hw.farnn.registers import COUNTERS, PHASES, register_map
from nnrtl.hw.farnn.schedule import run_cycles
from nnrtl.sim.golden.float import to_normal_form
from nnrtl.sim.tb.farnn import io as farnn_io
from nnrtl.sim.tb.common import report, tb_params
from nnrtl.sim.tb.engine_bench import EngineBench
from nnrtl.sim.tb.registers import BenchFailure

PARAMS = tb_params()
CONFIG = dataclasses.replace(FarnnConfig(**PARAMS["config"]), seq_len=PARAMS["steps"])
ERRORS = ("load_error", "vector_error", "run_error")


def _bytes(rows):
    """A frame's bytes from rows of fp32 bit patterns (one row a beat)."""
    return np.asarray(rows, dtype=np.int64).astype("<u4").tobytes()


def _words(frame, count):
    """The beats of a received frame as lists of ``count`` words."""
    words = np.frombuffer(bytes(frame.tdata), dtype="<u4").astype(np.int64)
    return words.reshape(-1, count).tolist()


def inputs(phases):
    """The passes' input arrays: the ``inputs`` file's, or drawn from the seed; checked
    against the shapes :mod:`~nnrtl.sim.tb.farnn.io` names."""
    farnn_io.check_supported(CONFIG)
    if PARAMS.get("inputs"):
        data = farnn_io.load(PARAMS["inputs"])
    else:
        rng = np.random.default_rng(random.Random(PARAMS["seed"]).getrandbits(32))
        data = farnn_io.random_inputs(CONFIG, rng)
    for phase in phases:
        farnn_io.check_inputs(CONFIG, phase, data)
    return data


async def load(bench, data, phase):
    """LOAD of pass ``phase``: its weight frames, ``status.loading`` awaited."""
    frames = farnn_io.weight_frames(CONFIG, phase, data)
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


def backdoor_writes(config, phase, data):
    """What :func:`load` of pass ``phase`` leaves in the PEs' weight memories, as
    ``(unit, chain, pe, base, words)`` blocks: the MVM unit's load rule
    (:mod:`nnrtl.hw.farnn.mvm`) -- lane ``c`` of a unit's frame feeds chain ``c``, PE
    ``k`` keeps the ``k``-th block of :attr:`~nnrtl.hw.farnn.config.MatrixShape.
    weights_per_pe` words (in the normal form, :func:`~nnrtl.sim.golden.float.
    to_normal_form`, as the chain head converts them), written from the matrix's
    :meth:`~nnrtl.hw.farnn.FarnnConfig.weight_bases` on. GRU's ``bR_n`` frame is not
    here (:func:`backdoor_load` writes the ``bias`` memory)."""
    frames = farnn_io.weight_frames(config, phase, data)
    shapes = config.pass_matrices(phase)
    bases = config.weight_bases(phase)
    for index, frame in enumerate(frames[:config.units * len(shapes)]):
        unit, job = divmod(index, len(shapes))
        words = shapes[job].weights_per_pe
        frame = np.asarray(frame).reshape(config.chain_length, words, config.chains)
        for chain in range(config.chains):
            for pe in range(config.chain_length):
                yield unit, chain, pe, bases[job], to_normal_form(FP32, frame[pe, :, chain])


async def backdoor_load(bench, data, phase):
    """LOAD of pass ``phase`` through the simulator instead of ``s_weights``: each
    PE's weight memory written directly (:func:`backdoor_writes`; GRU FW: the ``bias``
    rows too), in no simulated time. For full-size runs, where the stream load is
    about 2 cycles a beat over ``units * chain_length * weights_per_pe`` beats (some
    524,000 cycles for the LSTM preset's 1,024 PEs) at some 130 simulated cycles a
    second; the stream load itself is checked on the scaled configurations, and ``tests/farnn/sim/test_farnn_verilator.py``
    checks that this back door leaves exactly what the stream load leaves."""
    from cocotb.handle import Immediate

    await bench.regs.write("phase", PHASES[phase])
    await bench.regs.write("steps", CONFIG.seq_len)
    await bench.regs.write("batch", CONFIG.batch)
    for memory, base, words in _memory_blocks(bench.dut, CONFIG, phase, data):
        for address, word in enumerate(words):
            memory[base + address].value = Immediate(word)
    if CONFIG.cell == "gru" and phase == "fw":
        frames = farnn_io.weight_frames(CONFIG, phase, data)
        for row, beat in enumerate(np.asarray(frames[-1]).tolist()):
            dut.bias[row].value = Immediate(
                sum(int(word) << (32 * lane) for lane, word in enumerate(beat)))


def _memory_blocks(dut, config, phase, data):
    """:func:`backdoor_writes` as ``(memory handle, base, words)``: a chain's PEs in
    pairs (:class:`~nnrtl.hw.farnn.pair.PEPair`: both lanes of one memory word), an odd
    tail alone."""
    pairs = {}
    for unit, chain, pe, base, words in backdoor_writes(config, phase, data):
        parent = getattr(getattr(dut, f"unit{unit}"), f"chain{chain}")
        if pe // 2 * 2 + 1 < config.chain_length:
            pairs.setdefault((unit, chain, pe // 2, base), [parent, None, None])[
                1 + pe % 2] = words.tolist()
        else:
            yield getattr(parent, f"pe{pe}").memory, base, words.tolist()
    for (_unit, _chain, pair, base), (parent, first, second) in pairs.items():
        yield (getattr(parent, f"pair{pair}").memory, base,
               [memory_word(FP32, x, y) for x, y in zip(first, second)])


async def memory_words(bench, config, phase, data):
    """The PEs' weight memories where :func:`backdoor_writes` writes, read back: a
    list of ``(memory handle name, base, want, got)`` blocks that differ (empty:
    identical)."""
    differ = []
    for memory, base, words in _memory_blocks(bench.dut, config, phase, data):
        got = [int(memory[base + a].value) for a in range(len(words))]
        if got != words:
            differ.append((memory._path, base, words, got))
    return differ


async def run(bench, phase, data, expected):
    """START of pass ``phase``: its input cells (:func:`farnn_io.input_cells` of ``data``)
    one frame a step; each sink's frames checked against the cells of ``expected`` (the
    golden outputs). Returns the pass's counters and the frames received (``{sink:
    frames}``)."""
    steps = CONFIG.seq_len
    sources = farnn_io.input_cells(CONFIG, phase, data)
    sinks = farnn_io.output_cells(CONFIG, phase, expected)
    model = run_cycles(CONFIG, phase, steps)        # also the run's budget
    beats = sum(len(frame) for frames in sinks.values() for frame in frames)
    bench.begin(f"the {phase} run", model, output_beats=beats)
    await bench.regs.write_fields("control", start=1)
    for name, frames in sources.items():
        for frame in frames:
            await bench.source(name).send(AxiStreamFrame(_bytes(frame)))
    received = {name: [] for name in sinks}
    for index in range(steps):
        for name, want in sinks.items():
            frame = await bench.recv(name, f"{phase} frame {index}")
            got = _words(frame, len(want[index][0]))
            bench.expect_count(f"the beats of {name} frame {index}", len(got),
                               len(want[index]), source="cells per step, cell_order")
            bench.check(name, [w for beat in want[index] for w in beat],
                        [w for beat in got for w in beat])
            received[name].append(got)
    await bench.wait_field("status", "busy", 0, f"the end of the {phase} run")
    for name in sources:
        await bench.drain(name)
    status = {name: await bench.regs.read_field("status", name) for name in ERRORS}
    if any(status.values()) or await bench.regs.read_field("status", "done") != 1:
        raise BenchFailure(f"status after the {phase} run: {status}, done expected 1 "
                           f"(cycle {bench.cycle})")
    counters = await bench.regs.read_many(tuple(COUNTERS))
    return {"phase": phase, "model_cycles": model, **counters}, received


@cocotb.test()
async def layer_pass_matches_golden_model(dut):
    phases = PARAMS.get("phases", list(farnn_io.PHASES))
    sources = ["s_weights"] + [name for phase in farnn_io.PHASES
                               for name in farnn_io.sources(CONFIG, phase)]
    sinks = [name for phase in farnn_io.PHASES for name in farnn_io.sinks(CONFIG, phase)]
    async with EngineBench(dut, register_map(CONFIG), sources=list(dict.fromkeys(sources)),
                           sinks=list(dict.fromkeys(sinks)), params=PARAMS) as bench:
        # inside the bench: a bad input file is reported as its failure
        data = inputs(phases)
        expected = {phase: farnn_io.expected_outputs(CONFIG, phase, data) for phase in phases}
        records, outputs = [], {}
        weight_load = PARAMS.get("weight_load", "stream")
        for phase in phases:
            if weight_load == "backdoor":
                await backdoor_load(bench, data, phase)
            else:
                await load(bench, data, phase)
                if weight_load == "stream+check":
                    differ = await memory_words(bench, CONFIG, phase, data)
                    if differ:
                        memory, base, want, got = differ[0]
                        raise BenchFailure(
                            f"{len(differ)} PE memories differ from the back door's "
                            f"words after the {phase} stream load; first {memory} from "
                            f"address {base}: want {want[:4]}..., got {got[:4]}...")
            record, received = await run(bench, phase, data, expected[phase])
            records.append(record)
            outputs.update(farnn_io.arrays_of(CONFIG, phase, received))
        await bench.finish()
        if PARAMS.get("outputs"):
            farnn_io.save(PARAMS["outputs"], outputs)

        cycles = sum(p["cycles"] for p in records)
        model = sum(p["model_cycles"] for p in records)
        useful = sum(p["useful_macs"] for p in records)
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
            "stall_cycles": sum(p["activation_wait_cycles"] for p in records),
            **{name: sum(p[name] for p in records)
               for name in ("mac_cycles", "load_cycles", "activation_wait_cycles")},
            "weight_load": weight_load,
            "phases": records,
            "outputs": PARAMS.get("outputs") or None,
        })

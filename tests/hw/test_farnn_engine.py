# amaranth: UnusedElaboratable=no
"""The whole FARNN engine (:class:`nnrtl.hw.farnn.engine.FarnnEngine`) in the Amaranth
simulator on tiny configurations: weights through ``s_weights`` in the host's packing
(:func:`nnrtl.gen.farnn.host.pack_weights`), registers through AXI4-Lite, every output of a
FW and a BW pass bit-exact against :mod:`nnrtl.sim.golden.farnn.layer`, and the ``cycles``
counter of a gapless run equal to :func:`~nnrtl.hw.farnn.engine.run_cycles`."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.gen.farnn.host import pack_weights
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.hw.farnn.engine import FarnnEngine, bias_beats, cell_order
from nnrtl.hw.farnn.registers import PHASES, stream_words
from nnrtl.sim.golden.farnn import layer as golden
from nnrtl.sim.tb.bus_amaranth import axil_read, axil_write, axis_receive, axis_send

TIMEOUT = 3000


def _pack(words):
    """One beat's ``tdata`` from fp32 patterns, word ``i`` in bits ``32 i ..``."""
    value = 0
    for i, word in enumerate(words):
        value |= int(word) << (32 * i)
    return value


def _unpack(value, count):
    return [(value >> (32 * i)) & 0xFFFFFFFF for i in range(count)]


def _weight_beats(config, phase, weights):
    """The load of pass ``phase``: each unit's beats with ``tlast`` on its last, then
    (GRU FW) the ``bR_n`` beats."""
    matrices = weights.recurrent if phase == "fw" else weights.recurrent_t
    stream = pack_weights(config, phase, matrices)
    per_unit = config.chain_length * config.weights_per_pe(phase)
    beats = [(_pack(row), int((i + 1) % per_unit == 0)) for i, row in enumerate(stream)]
    if config.cell == "gru" and phase == "fw":
        extra = bias_beats(config, weights.bias_n)
        beats += [(_pack(row), int(i == len(extra) - 1)) for i, row in enumerate(extra)]
    return beats


def run_pass(config, phase, weights, cell_beats, outputs, *, batch, steps):
    """Load, run and collect one pass; returns ``({port: [words per beat]}, counters,
    status)``."""
    dut = FarnnEngine(config)
    regs = dut.registers
    result = {}
    w_beats = _weight_beats(config, phase, weights)
    in_port = dut.s_imvm if phase == "fw" else dut.s_bw
    sinks = {name: getattr(dut, f"m_{name}") for name in outputs}
    widths = stream_words(config)

    async def host(ctx):
        await axil_write(ctx, dut.s_axil, regs.offset_of("phase"), PHASES[phase])
        await axil_write(ctx, dut.s_axil, regs.offset_of("steps"), steps)
        await axil_write(ctx, dut.s_axil, regs.offset_of("batch"), batch)
        await axil_write(ctx, dut.s_axil, regs.offset_of("control"),
                         1 << regs["control"].field("load").offset)
        loading = 1 << regs["status"].field("loading").offset
        for _ in range(TIMEOUT):
            status, _ = await axil_read(ctx, dut.s_axil, regs.offset_of("status"))
            if not status & loading:
                break
        await axil_write(ctx, dut.s_axil, regs.offset_of("control"),
                         1 << regs["control"].field("start").offset)
        busy = 1 << regs["status"].field("busy").offset
        for _ in range(TIMEOUT):
            status, _ = await axil_read(ctx, dut.s_axil, regs.offset_of("status"))
            if not status & busy:
                break
        else:
            raise AssertionError("the engine never finished")
        result["status"] = status
        result["counters"] = {}
        for name in ("cycles", "mac_cycles", "load_cycles", "activation_wait_cycles",
                     "useful_macs"):
            low, _ = await axil_read(ctx, dut.s_axil, regs.offset_of(name))
            high, _ = await axil_read(ctx, dut.s_axil, regs.offset_of(name) + 4)
            result["counters"][name] = low | high << 32

    async def weights_source(ctx):
        await axis_send(ctx, dut.s_weights, w_beats, timeout=TIMEOUT)

    async def cells_source(ctx):
        await axis_send(ctx, in_port, [(_pack(words), 0) for words in cell_beats],
                        timeout=TIMEOUT)

    def sink(name, count):
        async def receive(ctx):
            beats = await axis_receive(ctx, sinks[name], count, timeout=TIMEOUT)
            result[name] = [(_unpack(data, widths[name]), last) for data, last in beats]
        return receive

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host)
    sim.add_testbench(weights_source)
    sim.add_testbench(cells_source)
    for name, count in outputs.items():
        sim.add_testbench(sink(name, count))
    sim.run()
    return {name: result[name] for name in outputs}, result["counters"], result["status"]


def random_bits(rng, shape, scale=1.0):
    return golden.to_bits(rng.standard_normal(shape) * scale)


def random_weights(config, rng):
    hidden, units = config.hidden_size, config.units
    weight_hh = rng.standard_normal((units * hidden, hidden)) * 0.4
    bias_hh = rng.standard_normal(units * hidden) * 0.3
    return golden.LayerWeights.from_arrays(config, weight_hh, bias_hh)


def check(config, seed):
    """FW then BW of one layer, bit-exact; returns the two runs' counters."""
    rng = np.random.default_rng(seed)
    steps, batch, hidden, units = config.seq_len, config.batch, config.hidden_size, config.units
    weights = random_weights(config, rng)
    imvm = random_bits(rng, (steps, batch, units, hidden))
    fw = golden.forward(config, weights, imvm)
    order = cell_order(config, batch)
    saved_names = list(fw.saved)
    lstm = config.cell == "lstm"

    def prev_state(t, b, row):
        if t == 0:
            return 0
        return int((fw.c if lstm else fw.h)[t - 1, b, row])

    imvm_beats = [imvm[t, b, :, row] for t in range(steps) for b, row in order]
    total = steps * len(order)
    out, fw_counters, status = run_pass(config, "fw", weights, imvm_beats,
                                        {"h": total, "saved": total}, batch=batch,
                                        steps=steps)
    assert status & 0b111000 == 0, f"error flags {status:#x}"
    expected_h = [[int(fw.h[t, b, row])] for t in range(steps) for b, row in order]
    assert [words for words, _ in out["h"]] == expected_h
    expected_saved = [[int(fw.saved[name][t, b, row]) for name in saved_names]
                      + [prev_state(t, b, row)] for t in range(steps) for b, row in order]
    assert [words for words, _ in out["saved"]] == expected_saved
    step_ends = [int((i + 1) % len(order) == 0) for i in range(total)]
    assert [last for _, last in out["h"]] == step_ends

    dy = random_bits(rng, (steps, batch, hidden))
    bw = golden.backward(config, weights, fw, dy)
    bw_beats = [expected_saved[t * len(order) + i] + [int(dy[t, b, row])]
                for t in reversed(range(steps)) for i, (b, row) in enumerate(order)]
    out, bw_counters, status = run_pass(config, "bw", weights, bw_beats, {"deltas": total},
                                        batch=batch, steps=steps)
    assert status & 0b111000 == 0, f"error flags {status:#x}"
    expected = [[int(v) for v in bw.d_input[t, b, :, row]]
                + ([] if lstm else [int(bw.d_recurrent[t, b, 2, row])])
                for t in reversed(range(steps)) for b, row in order]
    assert [words for words, _ in out["deltas"]] == expected
    return fw_counters, bw_counters


CONFIGS = {
    # S = 1: one round (5 rows on 8 PEs), batch 2.
    "lstm-s1-b2": FarnnConfig(cell="lstm", input_size=3, hidden_size=5, seq_len=3,
                              batch=2, chains=2, chain_length=4, split=1, layers=1),
    # S = 2 on 4 PEs (7 rows), unsplit, batch 1.
    "lstm-s2-b1": FarnnConfig(cell="lstm", input_size=3, hidden_size=7, seq_len=3,
                              batch=1, chains=2, chain_length=2, split=1, layers=1),
    # S = 2 with the last round split by 2 (5 rows: 4 + 1), batch 2.
    "lstm-s2-split-b2": FarnnConfig(cell="lstm", input_size=3, hidden_size=5, seq_len=3,
                                    batch=2, chains=2, chain_length=2, split=2, layers=1),
    "gru-s2-split-b2": FarnnConfig(cell="gru", input_size=3, hidden_size=5, seq_len=3,
                                   batch=2, chains=2, chain_length=2, split=2, layers=1),
    "gru-s1-b1": FarnnConfig(cell="gru", input_size=3, hidden_size=7, seq_len=3,
                             batch=1, chains=2, chain_length=4, split=1, layers=1),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_engine_pass_is_bit_exact(name):
    config = CONFIGS[name]
    fw, bw = check(config, seed=len(name))
    print(name, "fw", fw, "bw", bw)

# amaranth: UnusedElaboratable=no
"""The whole FARNN engine (:class:`nnrtl.hw.farnn.engine.FarnnEngine`) in the Amaranth
simulator on tiny configurations: weights through ``s_weights`` in the host's packing
(:func:`nnrtl.gen.farnn.host.pack_weights`), registers through AXI4-Lite, every output of a
FW and a BW pass bit-exact against :mod:`nnrtl.sim.golden.farnn.layer`, and the ``cycles``
counter of a gapless run equal to :func:`~nnrtl.hw.farnn.schedule.run_cycles`."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.gen.farnn.host import pack_weights
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.hw.farnn.engine import FarnnEngine
from nnrtl.hw.farnn.schedule import bias_beats, cell_order, run_cycles, weight_loads
from nnrtl.hw.farnn.registers import COUNTERS, PHASES, stream_words
from nnrtl.sim.golden.farnn import layer as golden
from nnrtl.sim.golden.farnn import mvm as mvm_golden
from nnrtl.sim.tb.bus_amaranth import (BusTimeout, axil_read, axil_write, axis_receive,
                                       axis_send)

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
    """The load of pass ``phase``: each load's beats (:func:`weight_loads`) with ``tlast`` on
    its last, then (GRU FW) the ``bR_n`` beats."""
    fw = phase == "fw"
    stream = pack_weights(config, phase, weights.recurrent if fw else weights.recurrent_t,
                          weights.projection if fw else weights.projection_t)
    ends = set(np.cumsum(weight_loads(config, phase)) - 1)
    beats = [(_pack(row), int(i in ends)) for i, row in enumerate(stream)]
    if config.cell == "gru" and phase == "fw":
        extra = bias_beats(config, weights.bias_n)
        beats += [(_pack(row), int(i == len(extra) - 1)) for i, row in enumerate(extra)]
    return beats


def run_layer(config, weights, inputs, *, batch, steps, rng=None, gap=0.0, stall=0.0):
    """Load and run the FW pass, then load and run the BW pass, in one simulation (two
    runs back to back); ``inputs`` are the beats (lists of words) of ``imvm``, ``bw`` and
    with a projection ``dy``. Returns ``({port: [(words, last)]}, {phase: counters},
    {phase: status})``; ``proj`` holds the FW beats then the BW beats. With ``rng`` the
    input streams have random gaps (probability ``gap`` per beat) and the outputs random
    backpressure (``stall``)."""
    dut = FarnnEngine(config)
    regs = dut.registers
    result = {"counters": {}, "status": {}}
    widths = stream_words(config)
    cells = len(inputs["imvm"])
    outputs = {"h": cells, "saved": cells, "deltas": len(inputs["bw"])}
    if config.proj_size:
        outputs["proj"] = 2 * steps * batch * config.proj_size
    options = dict(rng=rng, timeout=TIMEOUT)

    async def run(ctx, phase):
        await axil_write(ctx, dut.s_axil, regs.offset_of("phase"), PHASES[phase])
        await axil_write(ctx, dut.s_axil, regs.offset_of("steps"), steps)
        await axil_write(ctx, dut.s_axil, regs.offset_of("batch"), batch)
        await axil_write(ctx, dut.s_axil, regs.offset_of("control"),
                         1 << regs["control"].field("load").offset)
        for bit in ("loading", "busy"):
            mask = 1 << regs["status"].field(bit).offset
            for _ in range(TIMEOUT):
                status, _ = await axil_read(ctx, dut.s_axil, regs.offset_of("status"))
                if not status & mask:
                    break
            else:
                raise AssertionError(f"the engine stayed {bit}")
            if bit == "loading":
                await axil_write(ctx, dut.s_axil, regs.offset_of("control"),
                                 1 << regs["control"].field("start").offset)
        result["status"][phase] = status
        counters = result["counters"][phase] = {}
        for name in COUNTERS:
            low, _ = await axil_read(ctx, dut.s_axil, regs.offset_of(name))
            high, _ = await axil_read(ctx, dut.s_axil, regs.offset_of(name) + 4)
            counters[name] = low | high << 32

    async def host(ctx):
        await run(ctx, "fw")
        await run(ctx, "bw")

    async def weights_source(ctx):
        beats = _weight_beats(config, "fw", weights) + _weight_beats(config, "bw", weights)
        await axis_send(ctx, dut.s_weights, beats, gap_probability=gap, **options)

    def source(name, beats):
        async def send(ctx):
            try:
                await axis_send(ctx, getattr(dut, f"s_{name}"),
                                [(_pack(words), 0) for words in beats],
                                gap_probability=gap, **options)
            except BusTimeout as error:
                raise AssertionError(f"s_{name}: {error}") from error
        return send

    def sink(name, count):
        async def receive(ctx):
            beats = await axis_receive(ctx, getattr(dut, f"m_{name}"), count,
                                       stall_probability=stall, **options)
            result[name] = [(_unpack(data, widths[name]), last) for data, last in beats]
        return receive

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host)
    sim.add_testbench(weights_source)
    for name, beats in inputs.items():
        sim.add_testbench(source(name, beats))
    for name, count in outputs.items():
        sim.add_testbench(sink(name, count))
    sim.run()
    return ({name: result[name] for name in outputs}, result["counters"], result["status"])


def random_bits(rng, shape, scale=1.0):
    return golden.to_bits(rng.standard_normal(shape) * scale)


def random_weights(config, rng):
    hidden, units, proj = config.hidden_size, config.units, config.proj_size
    weight_hh = rng.standard_normal((units * hidden, config.recurrent_size)) * 0.4
    bias_hh = rng.standard_normal(units * hidden) * 0.3
    weight_hr = rng.standard_normal((proj, hidden)) * 0.5 if proj else None
    return golden.LayerWeights.from_arrays(config, weight_hh, bias_hh, weight_hr)


def _cells(config, batch, matrix, steps, backward):
    order = cell_order(config, batch, matrix)
    times = reversed(range(steps)) if backward else range(steps)
    return [(t, b, row) for t in times for b, row in order], len(order)


def check(config, seed, *, gap=0.0, stall=0.0):
    """FW then BW of one layer, every output bit-exact; returns the runs' counters."""
    rng = np.random.default_rng(seed)
    steps, batch, hidden, units = config.seq_len, config.batch, config.hidden_size, config.units
    proj = config.proj_size
    weights = random_weights(config, rng)
    imvm = random_bits(rng, (steps, batch, units, hidden))
    fw = golden.forward(config, weights, imvm)
    dy = random_bits(rng, (steps, batch, config.recurrent_size))
    bw = golden.backward(config, weights, fw, dy)
    lstm = config.cell == "lstm"

    def prev_state(t, b, row):
        return 0 if t == 0 else int((fw.c if lstm else fw.h)[t - 1, b, row])

    fw_cells, fw_step = _cells(config, batch, "recurrent", steps, False)
    bw_cells, bw_step = _cells(config, batch, "projection_t" if proj else "recurrent", steps,
                               True)
    imvm_beats = [imvm[t, b, :, row] for t, b, row in fw_cells]
    saved = {(t, b, row): [int(fw.saved[name][t, b, row]) for name in fw.saved]
             + [prev_state(t, b, row)] for t, b, row in fw_cells}
    inputs = {"imvm": imvm_beats,
              "bw": [saved[cell] + ([] if proj else [int(dy[cell])]) for cell in bw_cells]}
    expected = {"h": [[int(fw.h[cell])] for cell in fw_cells],
                "saved": [saved[cell] for cell in fw_cells],
                "deltas": [[int(v) for v in bw.d_input[t, b, :, row]]
                           + ([] if lstm else [int(bw.d_recurrent[t, b, 2, row])])
                           for t, b, row in bw_cells]}
    step_ends = {name: [int((i + 1) % per_step == 0) for i in range(len(cells))]
                 for name, cells, per_step in (("h", fw_cells, fw_step),
                                               ("saved", fw_cells, fw_step),
                                               ("deltas", bw_cells, bw_step))}
    if proj:
        y_cells, y_step = _cells(config, batch, "projection", steps, False)
        dr_cells, dr_step = _cells(config, batch, "recurrent_t", steps, True)
        inputs["dy"] = [[int(dy[cell])] for cell in dr_cells]
        expected["proj"] = ([[int(fw.y[cell])] for cell in y_cells]
                            + [[int(bw.dr_hat[cell])] for cell in dr_cells])
        step_ends["proj"] = ([int((i + 1) % y_step == 0) for i in range(len(y_cells))]
                             + [int((i + 1) % dr_step == 0) for i in range(len(dr_cells))])
    out, counters, status = run_layer(config, weights, inputs, batch=batch, steps=steps,
                                      rng=rng if gap or stall else None, gap=gap,
                                      stall=stall)
    for phase in ("fw", "bw"):
        assert status[phase] & 0b111000 == 0, f"{phase} error flags {status[phase]:#x}"
    for name, words in expected.items():
        assert [got for got, _ in out[name]] == words, name
        assert [last for _, last in out[name]] == step_ends[name], name
    return counters


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
    # Four chains: a beat's rows take the serializer longer than a chain head's two
    # cycles, so it holds the units' result streams (outside run_cycles' scope).
    "lstm-c4-split-b2": FarnnConfig(cell="lstm", input_size=3, hidden_size=9, seq_len=3,
                                    batch=2, chains=4, chain_length=2, split=2, layers=1),
    # Four chains of one PE, the shallowest pipelines (A = 2, M = 1).
    "gru-c4-shallow": FarnnConfig(cell="gru", input_size=3, hidden_size=7, seq_len=2,
                                  batch=1, chains=4, chain_length=1, split=1, layers=1,
                                  adder_stages=2, multiplier_stages=1),
    # LSTM with a projection (FW R_k then W_hr a step, BW R_k^T then W_hr^T; the
    # projection's rows cut over the four units in blocks):
    # H = 7, P = 3: R_k S = 2 on 4 PEs, W_hr one row per unit (unit 3 none), batch 1.
    "proj-h7p3-s2-b1": FarnnConfig(cell="lstm", input_size=3, hidden_size=7, proj_size=3,
                                   seq_len=2, batch=1, chains=2, chain_length=2, split=1,
                                   layers=1),
    # H = 7, P = 3 on 8 PEs: every matrix S = 1, batch 2 (padding beats end each job).
    "proj-h7p3-s1-b2": FarnnConfig(cell="lstm", input_size=3, hidden_size=7, proj_size=3,
                                   seq_len=2, batch=2, chains=2, chain_length=4, split=1,
                                   layers=1),
    # H = 9, P = 5, split 2: R_k S = 3 and R_k^T S = 2 with split last rounds, batch 2.
    "proj-h9p5-split-b2": FarnnConfig(cell="lstm", input_size=3, hidden_size=9,
                                      proj_size=5, seq_len=3, batch=2, chains=2,
                                      chain_length=2, split=2, layers=1),
    # Four chains, split 2: R_k S = 2 split, projection beats of up to 4 x 4 cells (the
    # serializer holds the units; run_cycles models it with a projection).
    "proj-c4-split-b2": FarnnConfig(cell="lstm", input_size=3, hidden_size=9, proj_size=5,
                                    seq_len=2, batch=2, chains=4, chain_length=1, split=2,
                                    layers=1),
    # One chain of one PE: every job S >= 3, unsplit.
    "proj-h9p5-c1": FarnnConfig(cell="lstm", input_size=3, hidden_size=9, proj_size=5,
                                seq_len=2, batch=1, chains=1, chain_length=1, split=1,
                                layers=1, adder_stages=2, multiplier_stages=1),
}


#: The ``cycles`` of the gapless FW and BW runs (the record the cycle model of
#: ``gen/farnn/perf.py`` is matched to; :func:`run_cycles` gives them too).
MEASURED = {"lstm-s1-b2": [209, 214], "lstm-s2-b1": [241, 231],
            "lstm-s2-split-b2": [296, 275], "gru-s2-split-b2": [308, 221],
            "gru-s1-b1": [213, 150], "lstm-c4-split-b2": [320, 297],
            "gru-c4-shallow": [91, 57], "proj-h7p3-s2-b1": [204, 193],
            "proj-h7p3-s1-b2": [230, 215], "proj-h9p5-split-b2": [540, 434],
            "proj-h9p5-c1": [244, 180], "proj-c4-split-b2": [354, 270]}

#: Configurations run by ``make test``; the others under ``make test-slow`` (a simulation
#: of the whole engine takes some 20 s).
FAST = ("lstm-s2-split-b2", "gru-s2-split-b2", "lstm-s1-b2", "gru-c4-shallow",
        "proj-h7p3-s2-b1")


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name in FAST
                                               else pytest.mark.slow)
                                  for name in sorted(CONFIGS)])
def test_engine_pass_is_bit_exact(name):
    config = CONFIGS[name]
    counters = check(config, seed=len(name))
    print(name, counters)
    check_counters(config, counters)
    for phase in ("fw", "bw"):       # gapless: the schedule's model, exactly
        assert counters[phase]["cycles"] == run_cycles(config, phase, config.seq_len)
    assert [counters[phase]["cycles"] for phase in ("fw", "bw")] == MEASURED[name]


def check_counters(config, counters, *, gapless=True):
    """The work counters against the MVM golden's plan and the configuration: FW runs the
    units every step, BW every step but the first (``T - 1``: ``dh = +0`` at ``T - 1``);
    with a projection BW runs its ``W_hr^T`` job at ``T - 1`` too. Unit 0 loads its gate
    matrix, then its projection block."""
    steps = config.seq_len
    options = dict(batch=config.batch, chains=config.chains,
                   chain_length=config.chain_length, split=config.split_factor)
    load = {}
    for phase in ("fw", "bw"):
        runs = (steps, steps) if phase == "fw" else (steps - 1, steps)
        mac_cycles = useful = load[phase] = 0
        for job, shape in enumerate(config.pass_matrices(phase)):
            geometry = dict(rounds=shape.slices, split_last=shape.split_last)
            run = mvm_golden.cycles(shape.inputs, **geometry, **options,
                                    adder_stages=config.adder_stages,
                                    multiplier_stages=config.multiplier_stages)
            mac_cycles += runs[job] * run["mac_cycles"]
            copies = config.units if shape.units == 1 else 1
            useful += runs[job] * config.batch * copies * shape.macs_per_vector
            load[phase] += mvm_golden.load_cycles(
                shape.inputs, chain_length=config.chain_length, split=config.split_factor,
                **geometry)
        assert counters[phase]["mac_cycles"] == mac_cycles, phase
        assert counters[phase]["useful_macs"] == useful, phase
        assert counters[phase]["cycles"] > mac_cycles
    # load_cycles is not cleared by a start: FW's load, then FW's and BW's (gaps in the
    # weight stream count as load cycles)
    if gapless:
        assert counters["fw"]["load_cycles"] == load["fw"]
        assert counters["bw"]["load_cycles"] == load["fw"] + load["bw"]
    else:
        assert counters["fw"]["load_cycles"] >= load["fw"]


@pytest.mark.parametrize("name", ["lstm-s2-split-b2", "proj-h7p3-s2-b1",
                                  pytest.param("gru-s2-split-b2", marks=pytest.mark.slow),
                                  pytest.param("proj-h9p5-split-b2", marks=pytest.mark.slow)])
def test_engine_pass_is_bit_exact_under_gaps_and_backpressure(name):
    config = CONFIGS[name]
    counters = check(config, seed=7 * len(name), gap=0.3, stall=0.3)
    check_counters(config, counters, gapless=False)


def test_cell_order_follows_the_result_beats():
    """The cell streams' order is the units' result beats' (round, vector, PE, lane),
    rows from :func:`nnrtl.sim.golden.farnn.mvm.row_index`, padding rows dropped."""
    config = CONFIGS["lstm-s2-split-b2"]
    shape = config.matrix("recurrent")
    expected = []
    for r in range(shape.slices):
        split_round = shape.split_last and r == shape.slices - 1
        lanes = shape.lanes if split_round else config.chains
        for b in range(config.batch):
            for pe in range(config.chain_length):
                for lane in range(lanes):
                    row = mvm_golden.row_index(r, pe, lane, chains=config.chains,
                                               chain_length=config.chain_length,
                                               split=config.split_factor,
                                               split_round=split_round)
                    if row < config.hidden_size:
                        expected.append((b, row))
    assert cell_order(config) == expected
    assert sorted(expected) == [(b, row) for b in range(config.batch)
                                for row in range(config.hidden_size)]


def test_cell_order_of_the_projection_goes_unit_by_unit():
    """The projection's rows are cut over the units in blocks of ``ceil(P / units)``; a
    beat's cells are unit 0's rows, then unit 1's, ...: H = 9 on 4 units is blocks of 3
    (unit 3 holds none), so with 2 chains a beat holds rows 0, 1, 3, 4, 6, 7, then the
    next 2, 5, 8."""
    config = CONFIGS["proj-h9p5-split-b2"]
    assert cell_order(config, 1, "projection_t") == [(0, row) for row in
                                                     (0, 1, 3, 4, 6, 7, 2, 5, 8)]
    # W_hr: P = 5 in blocks of 2: rows 0, 1 | 2, 3 | 4
    assert cell_order(config, 2, "projection") == [(b, row) for b in range(2)
                                                   for row in (0, 1, 2, 3, 4)]
    assert weight_loads(config, "fw") == [2 * 13, 2 * 9] * 4


def test_engine_refuses_weights_that_do_not_fit_and_a_non_config():
    with pytest.raises(ValueError, match=r"weights per PE \(4900\) must fit weight_depth "
                                         r"\(4096\)"):
        FarnnEngine(FarnnConfig(cell="lstm", input_size=3, hidden_size=70, chains=1,
                                chain_length=1, split=1))
    with pytest.raises(TypeError, match="config must be a FarnnConfig"):
        FarnnEngine({"cell": "lstm"})


def test_registers_and_stream_widths():
    config = CONFIGS["gru-s2-split-b2"]
    dut = FarnnEngine(config)
    assert stream_words(config) == {"weights": 2, "imvm": 3, "h": 1, "saved": 5,
                                    "bw_in": 6, "deltas": 4}
    assert len(dut.s_bw.tdata) == 6 * 32 and len(dut.m_deltas.tdata) == 4 * 32
    assert dut.registers["batch"].reset == config.batch
    assert [dut.registers[name].width for name in COUNTERS] == [64] * len(COUNTERS)


def draw_config(rng):
    """A random small engine: cell, odd or even sizes, 1/2/4 chains, chain length 1-3,
    any split factor of the chains, batch 1-2, 2-3 steps, a projection one time in three
    (LSTM), stage counts from 1 to the defaults."""
    cell = str(rng.choice(["lstm", "gru"]))
    chains = int(rng.choice([1, 2, 4]))
    hidden = int(rng.integers(3, 12))
    proj = int(rng.integers(2, hidden)) if cell == "lstm" and rng.random() < 1 / 3 else 0
    return FarnnConfig(cell=cell, input_size=int(rng.integers(1, 6)), hidden_size=hidden,
                       proj_size=proj, seq_len=int(rng.integers(2, 4)),
                       batch=int(rng.integers(1, 3)), chains=chains,
                       chain_length=int(rng.integers(1, 4)),
                       split=int(rng.choice([s for s in (1, 2, 4) if chains % s == 0])),
                       layers=1, adder_stages=int(rng.integers(1, 5)),
                       multiplier_stages=int(rng.integers(1, 4)))


@pytest.mark.parametrize("seed", [pytest.param(seed, marks=() if seed < 2 else pytest.mark.slow)
                                  for seed in range(10)])
def test_randomized_configurations(seed):
    """Drawn engines (:func:`draw_config`): every output bit-exact against the golden model,
    gapless (even seeds: ``cycles`` equal to :func:`run_cycles`) or under random gaps and
    backpressure (odd seeds)."""
    config = draw_config(np.random.default_rng(1000 + seed))
    gapless = seed % 2 == 0
    counters = check(config, seed, gap=0.0 if gapless else 0.3,
                     stall=0.0 if gapless else 0.3)
    check_counters(config, counters, gapless=gapless)
    if gapless:
        for phase in ("fw", "bw"):
            assert counters[phase]["cycles"] == run_cycles(config, phase, config.seq_len), (
                config, phase)

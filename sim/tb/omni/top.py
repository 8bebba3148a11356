"""Bench of the η-LSTM top (:class:`nnrtl.hw.omni.top.OmniTop`): one training iteration's
cell tasks (:func:`nnrtl.hw.omni.top_program.top_tasks`) dispatched by the top's R2A
scheduler to its channels, every result beat bit-exact against the golden channel model.

The bench is the host and the scratchpad. As host it loads the task table through the
AXI4-Lite registers (``task_kind``, ``task_length``, ``task_deps``, ``control.push``),
starts the run and reads the counters at the end. As scratchpad it takes each task the
top offers on ``m_task[c]``, checks that every task it depends on has delivered its last
result (the R2A's dispatch rule) and that no task comes twice, and streams the task's
steps into channel ``c`` (:class:`TaskPad`: the channel bench's
:class:`~nnrtl.sim.tb.omni.channel.Scratchpad` with the Input1 / Input2 beats merged into
the top's one operand port, element by element), checking each result beat as it arrives.

Data: a ``layers`` x ``seq_len`` LSTM with random weights, inputs and loss gradient
(:func:`cell_pads`), chained as the LSTM chains them: the golden FW cells of
:mod:`nnrtl.sim.golden.omni.channel` give ``x_t`` (the layer below's ``h_t``),
``h_{t-1}``, ``s_{t-1}``; the golden BP cells give ``δY_t`` (the layer above's ``δX_t``),
``δH_t``, ``δS_t`` and the accumulated ``δW``, ``δb``. Each task's expected results are
the golden program run on the golden scratchpad before it (:class:`TaskPad`), so a
wrong beat is reported where it happens, not where it propagates to.

After the tasks, MS1's record of one cell (its P1 vectors) goes through the top's DMA
into an HBM model (cocotbext-axi's ``AxiRam``) and back (:func:`_dma_round_trip`),
checked against :mod:`nnrtl.sim.golden.omni.dma`: the memory image, the re-densified
beats and the byte and pruning counters.

Every wait is bounded by :func:`nnrtl.sim.patterns.cycle_budget` of the run's model
cycles; a mismatch is reported as ``bit_exact: false`` with the first mismatches.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from nnrtl.hw.omni.channel_program import bp_program, fw_program
from nnrtl.sim.golden.float import from_bits
from nnrtl.sim.golden.omni.channel import bp_inputs, fw_inputs, run_program
from nnrtl.sim.patterns import cycle_budget, pause_pattern
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.omni.channel import Scratchpad

__all__ = ["TaskPad", "cell_pads", "task_pads", "config_from_params", "PORTS",
           "omni_top_runs_iteration"]

#: The top's per-channel input streams a bench drives.
PORTS = ("s_command", "s_operand", "s_broadcast")


def config_from_params(fields):
    """The :class:`~nnrtl.hw.omni.top_config.OmniConfig` of ``dataclasses.asdict``."""
    from nnrtl.hw.omni.top_config import OmniConfig
    return OmniConfig(**fields)


def _floats(config, bits):
    return np.asarray(from_bits(config.fmt, np.asarray(bits, dtype=np.uint64)),
                      dtype=np.float64)


def cell_pads(config, rng):
    """The golden iteration: ``{(layer, step): scratchpad}``, each the cell's FW inputs
    and BP inputs (bit patterns) as the chained golden FW and BP cells give them (module
    docstring). Weights ``U(-3/sqrt(H), 3/sqrt(H))``, inputs and the loss gradient of
    unit scale."""
    h, layers, length = config.hidden_size, config.layers, config.seq_len
    scale = 3 / np.sqrt(h)
    channels = [config.layer_channel(l) for l in range(layers)]
    weights = [(rng.uniform(-scale, scale, (4 * h, config.layer_input(l))),
                rng.uniform(-scale, scale, (4 * h, h)), rng.uniform(-scale, scale, 4 * h))
               for l in range(layers)]
    fw, after_fw = {}, {}
    for t in range(length):
        for l in range(layers):
            channel = channels[l]
            x = (rng.normal(size=config.input_size) if l == 0
                 else _floats(channel, after_fw[l - 1, t]["h"]))
            h_prev, s_prev = ((np.zeros(h), np.zeros(h)) if t == 0 else
                              (_floats(channel, after_fw[l, t - 1]["h"]),
                               _floats(channel, after_fw[l, t - 1]["s"])))
            fw[l, t] = fw_inputs(channel, *weights[l], x, h_prev, s_prev)
            pad = {name: v.copy() for name, v in fw[l, t].items()}
            run_program(channel, fw_program(channel), pad)
            after_fw[l, t] = pad
    pads, after_bp = {}, {}
    for t in reversed(range(length)):
        for l in reversed(range(layers)):
            channel = channels[l]
            inputs = config.layer_input(l)
            dy = (rng.normal(size=h) if l == layers - 1
                  else _floats(channel, after_bp[l + 1, t]["dz"][:h]))
            if t == length - 1:
                dh_next, ds_next, dw_acc, db_acc = np.zeros(h), np.zeros(h), None, None
            else:
                later = after_bp[l, t + 1]
                dh_next = _floats(channel, later["dz"][inputs:])
                ds_next = _floats(channel, later["ds_prev"])
                dw_acc = _floats(channel, later["dw"]).reshape(4 * h, inputs + h)
                db_acc = _floats(channel, later["db"])
            pad = bp_inputs(channel, after_fw[l, t], dy, dh_next, ds_next, dw_acc, db_acc)
            pad.update(fw[l, t])
            pads[l, t] = {name: v.copy() for name, v in pad.items()}
            run_program(channel, bp_program(channel), pad)
            after_bp[l, t] = pad
    return pads


def task_pads(tasks, pads):
    """Per task, the golden scratchpad before its first step: its cell's pad after the
    golden run of the steps before it (FW program then BP program)."""
    before = []
    for task in tasks:
        channel = task.channel
        pad = {name: v.copy() for name, v in pads[task.layer, task.step].items()}
        program = fw_program(channel) + bp_program(channel)
        run_program(channel, program[:task.first], pad)
        before.append(pad)
    return before


class TaskPad(Scratchpad):
    """The scratchpad of one task on one channel: the channel bench's
    :class:`~nnrtl.sim.tb.omni.channel.Scratchpad` (commands, broadcast words, in-order
    checker) with its Input1 and Input2 beats merged, in step order and element by
    element, into the top's operand port (:func:`~nnrtl.hw.omni.top.operand_layout`:
    ``which`` 0 for Input1, 1 for Input2)."""

    def __init__(self, config, program, pad):
        super().__init__(config, program, pad)
        merged = self.items["i_input1"] + self.items["i_input2"]
        self.operands = sorted(merged, key=lambda item: (item[0], item[2], item[1]))
        self.sent_operands = 0
        self.beat_bits = config.pes_per_channel * self.width

    def next_port_word(self, port):
        """The next word on top port ``port`` (:data:`PORTS`), or ``None``."""
        if port == "s_command":
            return self.next_word("i_command")
        if port == "s_broadcast":
            return self.next_word("i_broadcast")
        if self.sent_operands >= len(self.operands):
            return None
        which = self.operands[self.sent_operands][1]
        word = self.next_word(f"i_input{which}")
        return None if word is None else word | ((which - 1) << self.beat_bits)

    def port_taken(self, port):
        if port == "s_command":
            self.taken("i_command")
        elif port == "s_broadcast":
            self.taken("i_broadcast")
        else:
            which = self.operands[self.sent_operands][1]
            self.taken(f"i_input{which}")
            self.sent_operands += 1


def _signal(dut, port, channel, signal):
    return getattr(dut, f"{port}__{channel}__{signal}")


async def _run(dut, config, tasks, befores, regs, pattern, seed):
    """Load, start and serve one run; returns ``(cycles, failures, mismatches, beats)``."""
    from nnrtl.gen.omni.perf import top_schedule

    n = config.channels
    rng = random.Random(seed)
    pauses = {(port, c): pause_pattern(pattern, random.Random(rng.random()))
              for c in range(n) for port in (*PORTS, "m_task", "m_result")}
    model = top_schedule(config, tasks)
    budget = cycle_budget(model.cycles, output_beats=sum(t.out_beats for t in tasks),
                          patterns=(pattern,))
    for task in tasks:
        await regs.write("task_kind", task.kind_code)
        await regs.write("task_length", task.out_beats)
        await regs.write("task_deps", sum(1 << d for d in task.deps))
        await regs.write_fields("control", push=1)
    count = await regs.read("task_count")
    failures = [] if count == len(tasks) else [f"task_count reads {count}, "
                                                f"{len(tasks)} pushed"]
    await regs.write_fields("control", start=1)
    edge = RisingEdge(dut.clk)
    boards = [None] * n
    running = [None] * n
    offering = {(port, c): False for c in range(n) for port in PORTS}
    finished, seen, held, dispatch = set(), set(), {}, {}
    mismatches, beats, cycles = [], 0, 0
    while len(finished) < len(tasks):
        for c in range(n):
            take = boards[c] is None and not next(pauses["m_task", c])
            _signal(dut, "m_task", c, "ready").value = int(take)
            for port in PORTS:
                pause = next(pauses[port, c])
                if boards[c] is not None and not offering[port, c] and not pause:
                    word = boards[c].next_port_word(port)
                    if word is not None:
                        _signal(dut, port, c, "payload").value = word
                        offering[port, c] = True
                _signal(dut, port, c, "valid").value = int(offering[port, c])
            _signal(dut, "m_result", c, "ready").value = int(not next(pauses["m_result", c]))
        await edge
        cycles += 1
        for c in range(n):
            board = boards[c]
            if board is not None:
                for port in PORTS:
                    if offering[port, c] and _signal(dut, port, c, "ready").value:
                        board.port_taken(port)
                        offering[port, c] = False
                if _signal(dut, "m_result", c, "valid").value:
                    word = int(_signal(dut, "m_result", c, "payload").value)
                    if held.get(c) not in (None, word):
                        failures.append(f"channel {c}: m_result changed before it was taken")
                    if _signal(dut, "m_result", c, "ready").value:
                        board.receive(word)
                        beats += 1
                        held[c] = None
                    else:
                        held[c] = word
                if board.finished:
                    task = running[c]
                    mismatches += [(task.id, c, m) for m in board.mismatches]
                    finished.add(task.id)
                    dispatch[task.id].append(cycles)
                    boards[c] = running[c] = None
            elif (_signal(dut, "m_task", c, "valid").value
                  and _signal(dut, "m_task", c, "ready").value):
                payload = int(_signal(dut, "m_task", c, "payload").value)
                task_id = payload & ((1 << config.r2a.task_bits) - 1)
                task = tasks[task_id]
                waiting = [d for d in task.deps if d not in finished]
                if task_id in seen or waiting:
                    failures.append(f"channel {c} got task {task_id} "
                                    + ("twice" if task_id in seen else
                                       f"before tasks {waiting} were done"))
                seen.add(task_id)
                dispatch[task_id] = [c, cycles]
                running[c] = task
                boards[c] = TaskPad(task.channel, list(task.steps), befores[task_id])
        if cycles >= budget or len(failures) > 4:
            failures.append(f"waiting for tasks {sorted(set(range(len(tasks))) - finished)} "
                            f"after {cycles} cycles (budget {budget}); channels running "
                            f"{[t and t.id for t in running]}")
            break
    for c in range(n):
        for port in PORTS:
            _signal(dut, port, c, "valid").value = 0
        _signal(dut, "m_task", c, "ready").value = 0
        _signal(dut, "m_result", c, "ready").value = 0
    return cycles, model, failures, mismatches, beats, dispatch


#: The P1 vectors MS1 compresses (spec §2.1): a cell's record, one block each.
P1_VECTORS = ("p_o", "p_s", "p_i", "p_f", "p_c", "f")


def _pack(layout, **fields):
    return sum((int(fields[name]) & ((1 << field.width) - 1)) << field.offset
               for name, field in layout)


async def _dma_round_trip(dut, regs, ram, config, pad, pattern, rng):
    """MS1's record of one cell through the top's DMA: its P1 vectors (``pad``, the
    golden scratchpad after BP-EW) written sparse at the ``threshold`` register's θ into
    the HBM model, then read back re-densified (``expand``). The memory image, the beats
    and the counter registers must be the golden DMA model's
    (:mod:`nnrtl.sim.golden.omni.dma`); ``ram``: the ``AxiRam`` on ``m_axi``. Returns
    ``(failures, counters)``."""
    from nnrtl.hw.omni.decode import MODE, output_layout
    from nnrtl.hw.omni.dma import read_command_layout, write_command_layout
    from nnrtl.sim.golden.omni import dma as golden

    dma = config.dma
    bits = np.stack([np.asarray(pad[name], dtype=np.uint32)
                     for name in P1_VECTORS])[:, :config.hidden_size]
    blocks, length = bits.shape
    model = golden.write_record(bits, sparse=True, threshold=config.prune_threshold)
    size = ram.size
    ram.write(0, bytes(size))
    for channel in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
                    ram.read_if.ar_channel, ram.read_if.r_channel):
        channel.set_pause_generator(pause_pattern(pattern, random.Random(rng.random())))
    source = pause_pattern(pattern, random.Random(rng.random()))
    sink = pause_pattern(pattern, random.Random(rng.random()))
    await regs.write_fields("control", clear=1)
    budget = cycle_budget(4 * bits.size + 64, output_beats=bits.size, patterns=(pattern,))
    edge = RisingEdge(dut.clk)
    failures = []

    async def transfer(command, layout, fields, words=(), beats=0):
        getattr(dut, f"{command}__payload").value = _pack(layout, **fields)
        getattr(dut, f"{command}__valid").value = 1
        words, got, offering = list(words), [], False
        for _ in range(budget):
            if not offering and words and not next(source):
                dut.s_dma_wr_data__payload.value = words[0]
                offering = True
            dut.s_dma_wr_data__valid.value = int(offering)
            take = not next(sink)
            dut.m_dma_rd_data__ready.value = int(take)
            await edge
            if getattr(dut, f"{command}__ready").value:
                getattr(dut, f"{command}__valid").value = 0
            if offering and dut.s_dma_wr_data__ready.value:
                words.pop(0)
                offering = False
            if take and dut.m_dma_rd_data__valid.value:
                got.append(int(dut.m_dma_rd_data__payload.value))
            if not words and len(got) >= beats and not getattr(
                    dut, f"{command}__valid").value:
                break
        else:
            failures.append(f"DMA {command}: not done within {budget} cycles")
        dut.s_dma_wr_data__valid.value = 0
        dut.m_dma_rd_data__ready.value = 0
        return got

    await transfer("s_dma_wr_cmd", write_command_layout(dma),
                   dict(sparse=1, base=0, blocks=blocks, length=length),
                   words=[int(v) for v in bits.flat])
    for _ in range(budget):
        if not (await regs.read_field("status", "dma_write_busy")):
            break
    image = ram.read(0, len(model.image))
    if image != model.image:
        failures.append("DMA: the record in memory differs from the golden record")
    want = golden.read_record(ram.read(0, size), mode="expand", base=0, blocks=blocks,
                              length=length)
    got = await transfer("s_dma_rd_cmd", read_command_layout(dma),
                         dict(mode=MODE["expand"], base=0, blocks=blocks, length=length,
                              dense_base=0, row_stride=0, block_stride=0, row_words=0),
                         beats=len(want.beats))
    layout = output_layout(dma)
    beats = [golden.Beat(**{name: (word >> field.offset) & ((1 << field.width) - 1)
                            for name, field in layout}) for word in got]
    if beats != want.beats:
        failures.append(f"DMA: {sum(a != b for a, b in zip(beats, want.beats))} of "
                        f"{len(want.beats)} expanded beats differ from the golden model")
    counters = await regs.read_many(("bytes_written", "bytes_read", "values_pruned",
                                     "values_kept"))
    expected = {"bytes_written": model.bytes_written, "bytes_read": want.bytes_read,
                "values_pruned": model.pruned, "values_kept": model.kept}
    if counters != expected:
        failures.append(f"DMA counters {counters}, golden {expected}")
    return failures, counters


async def _wait_finished(dut, regs, budget):
    for _ in range(budget):
        if await regs.read_field("status", "finished"):
            return True
    return False


@cocotb.test()
async def omni_top_runs_iteration(dut):
    """Parameters (``tb_params()``): ``config`` (``dataclasses.asdict`` of an
    OmniConfig), ``patterns``, ``seed``. Reported: ``bit_exact``, ``mismatches``,
    ``first_mismatch``, ``beats``, ``tasks``, and per pattern in ``runs``: ``cycles``
    (the top's counter), ``model_cycles``, the counters, ``model_busy_mvm`` ... (the
    per-mode counters by :func:`nnrtl.gen.omni.perf.top_mode_busy`), ``failures``,
    ``dispatch``
    (per task: id, channel, the bench's cycle it was taken and its last beat's)."""
    from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

    from nnrtl.gen.omni.perf import top_mode_busy
    from nnrtl.hw.omni.top import COUNTERS, register_map
    from nnrtl.hw.omni.top_program import top_tasks
    from nnrtl.sim.tb.registers import RegisterBus

    params = tb_params()
    config = config_from_params(params["config"])
    tasks = top_tasks(config)
    rng = np.random.default_rng(params["seed"])
    for c in range(config.channels):
        for port in PORTS:
            _signal(dut, port, c, "valid").value = 0
    await start_clock_and_reset(dut)
    await ClockCycles(dut.clk, config.adder_stages + 2)
    regs = RegisterBus(AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk,
                                     dut.rst), register_map(config))
    record_bytes = 2 * 4 * len(P1_VECTORS) * config.hidden_size
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst,
                 size=1 << max(12, record_bytes.bit_length()))
    for port in ("s_dma_wr_cmd", "s_dma_wr_data", "s_dma_rd_cmd"):
        getattr(dut, f"{port}__valid").value = 0
    runs, all_mismatches, beats = [], [], 0
    for index, pattern in enumerate(params["patterns"]):
        befores = task_pads(tasks, cell_pads(config, rng))
        await regs.write_fields("control", clear_tasks=1)
        cycles, model, failures, mismatches, run_beats, dispatch = await _run(
            dut, config, tasks, befores, regs, pattern, params["seed"] + index)
        if not failures and not await _wait_finished(dut, regs, 100):
            failures.append("status.finished stayed 0 after the last task's result")
        counters = await regs.read_many(COUNTERS)
        bp_mm = next(t for t in tasks if t.part == "bp_mm")
        dma_failures, dma_counters = await _dma_round_trip(
            dut, regs, ram, config, befores[bp_mm.id], pattern, random.Random(params["seed"]))
        failures += dma_failures
        counters.update(dma_counters)
        if counters["busy_matmul"] + counters["busy_ew"] > cycles * config.channels:
            failures.append(f"busy counters {counters['busy_matmul']} + "
                            f"{counters['busy_ew']} exceed {config.channels} channels x "
                            f"{cycles} cycles")
        all_mismatches += mismatches
        beats += run_beats
        runs.append({"pattern": pattern, "bench_cycles": cycles, **counters,
                     "model_cycles": model.cycles, "model_swings": model.swings,
                     **{f"model_{name}": value
                        for name, value in top_mode_busy(config, tasks).items()},
                     "failures": failures, "mismatches": len(mismatches),
                     "dispatch": [[task, *dispatch[task]] for task in sorted(dispatch)]})
        for failure in failures:
            dut._log.error("pattern %s: %s", pattern, failure)
    first = all_mismatches[0] if all_mismatches else None
    report({"bit_exact": not all_mismatches and not any(r["failures"] for r in runs),
            "mismatches": len(all_mismatches), "beats": beats, "tasks": len(tasks),
            "first_mismatch": None if first is None else
            {"task": first[0], "channel": first[1], "step": first[2][0],
             "beat": first[2][1], "vector": first[2][2],
             "got": [hex(v) for v in first[2][3]], "model": [hex(v) for v in first[2][4]]},
            "runs": runs})


# -- Amaranth-simulator driver (the unit tests) ---------------------------------------------


def check_in_amaranth(config, *, seed=0, gap=0.0, stall=0.0, masks=None, timeout=20000):
    """Run the top's task graph of ``config`` on :class:`~nnrtl.hw.omni.top.OmniTop` in
    the Amaranth simulator (host on AXI4-Lite, the scratchpad on the channel ports, input
    gaps and output stalls of the given probabilities; ``masks``: ``(ew_mask,
    swing_mask)`` written before the start, else their reset values). Returns ``{"counters",
    "failures", "mismatches", "dispatch"}``: the counter registers at the end, protocol
    failures, result beats that differ from the golden model, and ``(cycle, channel,
    task)`` of every task taken."""
    from amaranth.hdl import Value
    from amaranth.sim import Simulator

    from nnrtl.hw.omni.top import COUNTERS, OmniTop
    from nnrtl.hw.omni.top_program import top_tasks
    from nnrtl.sim.tb.bus_amaranth import axil_read, axil_write

    top = OmniTop(config)
    regmap = top.registers
    tasks = top_tasks(config)
    befores = task_pads(tasks, cell_pads(config, np.random.default_rng(seed)))
    rng = random.Random(seed)
    n = config.channels
    state = {"finished": set(), "failures": [], "mismatches": [], "dispatch": [],
             "served": False, "counters": {}}

    async def write(ctx, name, value):
        for word in range(regmap.words_of(name)):
            resp = await axil_write(ctx, top.s_axil, regmap.offset_of(name) + 4 * word,
                                    (value >> (32 * word)) & 0xFFFFFFFF)
            assert resp == 0, f"write of {name} answered {resp}"

    async def read(ctx, name):
        value = 0
        for word in range(regmap.words_of(name)):
            data, resp = await axil_read(ctx, top.s_axil, regmap.offset_of(name) + 4 * word)
            assert resp == 0, f"read of {name} answered {resp}"
            value |= data << (32 * word)
        return value

    def field(name, field_name, value):
        return (value >> regmap[name].field(field_name).offset) & 1

    async def host(ctx):
        for task in tasks:
            await write(ctx, "task_kind", task.kind_code)
            await write(ctx, "task_length", task.out_beats)
            await write(ctx, "task_deps", sum(1 << d for d in task.deps))
            await write(ctx, "control", 1 << regmap["control"].field("push").offset)
        state["task_count"] = await read(ctx, "task_count")
        if masks is not None:
            await write(ctx, "ew_mask", masks[0])
            await write(ctx, "swing_mask", masks[1])
        await write(ctx, "control", 1 << regmap["control"].field("start").offset)
        for _ in range(timeout):
            if state["served"] or state["failures"]:
                break
            await ctx.tick()
        for _ in range(20):
            if field("status", "finished", await read(ctx, "status")):
                break
        else:
            state["failures"].append("status.finished stayed 0")
        state["counters"] = {name: await read(ctx, name) for name in COUNTERS}

    async def scratchpad(ctx):
        boards, running = [None] * n, [None] * n
        offering = {(port, c): False for c in range(n) for port in PORTS}
        cycle = 0
        while len(state["finished"]) < len(tasks):
            sampled = []
            for c in range(n):
                ctx.set(top.m_task[c].ready, int(boards[c] is None))
                for port in PORTS:
                    stream_port = getattr(top, port)[c]
                    if boards[c] is not None and not offering[port, c] and \
                            not rng.random() < gap:
                        word = boards[c].next_port_word(port)
                        if word is not None:
                            ctx.set(Value.cast(stream_port.payload), word)
                            offering[port, c] = True
                    ctx.set(stream_port.valid, int(offering[port, c]))
                    sampled.append(stream_port.ready)
                ctx.set(top.m_result[c].ready, int(not rng.random() < stall))
                sampled += [top.m_result[c].valid, top.m_result[c].ready,
                            Value.cast(top.m_result[c].payload), top.m_task[c].valid,
                            top.m_task[c].ready, Value.cast(top.m_task[c].payload)]
            _clk, _rst, *values = await ctx.tick().sample(*sampled)
            cycle += 1
            per = len(PORTS) + 6
            for c in range(n):
                readies = values[c * per:c * per + len(PORTS)]
                valid, ready, word, task_valid, task_ready, task_word = \
                    values[c * per + len(PORTS):(c + 1) * per]
                board = boards[c]
                if board is not None:
                    for port, port_ready in zip(PORTS, readies):
                        if offering[port, c] and port_ready:
                            board.port_taken(port)
                            offering[port, c] = False
                            ctx.set(getattr(top, port)[c].valid, 0)
                    if valid and ready:
                        board.receive(word)
                    if board.finished:
                        state["mismatches"] += [(running[c].id, c, m)
                                                for m in board.mismatches]
                        state["finished"].add(running[c].id)
                        boards[c] = running[c] = None
                elif task_valid and task_ready:
                    task = tasks[task_word & ((1 << config.r2a.task_bits) - 1)]
                    waiting = [d for d in task.deps if d not in state["finished"]]
                    if waiting or any(t == task.id for _, _, t in state["dispatch"]):
                        state["failures"].append(f"task {task.id} on channel {c}: "
                                                 f"waiting for {waiting} or twice")
                    state["dispatch"].append((cycle, c, task.id))
                    running[c] = task
                    boards[c] = TaskPad(task.channel, list(task.steps), befores[task.id])
            if cycle >= timeout:
                state["failures"].append(f"tasks {sorted(set(range(len(tasks))) - state['finished'])}"
                                         f" not done after {timeout} cycles")
                break
        state["served"] = True
        state["cycles"] = cycle

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(host)
    sim.add_testbench(scratchpad, background=True)
    sim.run()
    return state

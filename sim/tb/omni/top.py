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
Under Verilator the streams are the shared drivers (:class:`TopStreams`); a task and each
result beat reach the scratchpad in the cycle they are taken
(:class:`~nnrtl.sim.tb.streams.Forward`), so the task's first command, and the
operands a result releases, are offered in the cycle after, as the cycle model counts.

Data: a ``layers`` x ``seq_len`` LSTM with random weights, inputs and loss gradient
(:func:`cell_pads`), chained as the LSTM chains them: the golden FW cells of
:mod:`nnrtl.sim.golden.omni.channel` give ``x_t`` (the layer below's ``h_t``),
``h_{t-1}``, ``s_{t-1}``; the golden BP cells give ``δY_t`` (the layer above's ``δX_t``),
``δH_t``, ``δS_t`` and the accumulated ``δW``, ``δb``. Each task's expected results are
the golden program run on the golden scratchpad before it (:class:`TaskPad`), so a
wrong beat is reported where it happens, not where it propagates to.

After the tasks, MS1's record of one cell (its P1 vectors) goes through the top's DMA
into an HBM model (cocotbext-axi's ``AxiRam``, one per HBM port) through every DMA and back
(:func:`~nnrtl.sim.tb.omni.top_dma.dma_round_trip`),
checked against :mod:`nnrtl.sim.golden.omni.dma`: the memory image, the re-densified
beats and the byte and pruning counters.

Every wait is bounded by :func:`nnrtl.sim.patterns.cycle_budget` of the run's model
cycles; a mismatch is reported as ``bit_exact: false`` with the first mismatches.
"""

import dataclasses
import random
from functools import partial

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, Event, RisingEdge, SimTimeoutError, with_timeout

from nnrtl.hw.omni.channel_program import bp_program, fw_program
from nnrtl.hw.omni.top import dma_port_names
from nnrtl.sim.golden.float import from_bits
from nnrtl.sim.golden.omni.channel import bp_inputs, fw_inputs, run_program
from nnrtl.sim.patterns import cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.omni.channel import Scratchpad
from nnrtl.sim.tb.omni.top_dma import P1_VECTORS, dma_round_trip
from nnrtl.sim.tb.streams import Forward, StreamProtocolError, Streams, cycle_now

__all__ = ["TaskPad", "TopStreams", "Scratchpads", "cell_pads", "task_pads",
           "config_from_params", "PORTS", "omni_top_runs_iteration"]

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


def _offer(board, sources):
    """Queue on ``sources`` (by top port name) every word ``board`` can offer now."""
    for port, source in sources.items():
        words = []
        while (word := board.next_port_word(port)) is not None:
            words.append(word)
            board.port_taken(port)
        source.send_words(words)


class TopStreams:
    """The stream drivers of the top bench, made once per test
    (:mod:`nnrtl.sim.tb.streams`): per channel ``c`` a source on each of :data:`PORTS`, a
    sink and a :class:`~nnrtl.sim.tb.streams.Forward` on ``m_task[c]`` and
    ``m_result[c]``; per DMA port (:attr:`dmas`) sources on its command and value ports
    and a sink on its output (:attr:`dma`, :attr:`dma_out`: port 0's).

    The forwards hand their words to the run in progress (:attr:`run`, a
    :class:`Scratchpads`); a word outside a run is a failure in :attr:`strays`.

    Parameters
    ----------
    dut : cocotb handle
        The top level.
    channels : int
        Its channel count.
    ports : int
        The DMA ports to drive (the first ``ports`` of ``hbm_ports``; the others idle).

    Attributes
    ----------
    dmas : list of tuple
        Per port ``(sources, sink)``: ``sources`` by the first port's names
        (``s_dma_wr_cmd``, ``s_dma_wr_data``, ``s_dma_rd_cmd``).
    """

    def __init__(self, dut, channels, ports=1):
        self.dut, self.run, self.strays = dut, None, []
        self.streams = streams = Streams(dut)
        self.sources = [{port: streams.source(f"{port}__{c}") for port in PORTS}
                        for c in range(channels)]
        self.sinks = {port: [streams.sink(f"{port}__{c}") for c in range(channels)]
                      for port in ("m_task", "m_result")}
        self.forwarded = {port: [[] for _ in range(channels)] for port in self.sinks}
        for port in self.sinks:
            for c in range(channels):
                Forward(dut, f"{port}__{c}").callback = partial(self._forward, port, c)
        self.channel_ports = [f"{port}__{c}" for c in range(channels)
                              for port in (*PORTS, *self.sinks)]
        self.dmas = []
        for port in range(ports):
            names = dma_port_names(port)
            self.dmas.append(({f"s_dma_{unit}": streams.source(names[unit])
                               for unit in ("wr_cmd", "wr_data", "rd_cmd")},
                              streams.sink(names["rd_data"])))
        self.dma, self.dma_out = self.dmas[0]

    def _forward(self, port, channel, word):
        self.forwarded[port][channel].append(word)
        if self.run is None:
            self.strays.append(f"channel {channel}: {port} handed over {word:#x} outside a "
                               "run")
        elif port == "m_task":
            self.run.take_task(channel, word)
        else:
            self.run.take_beat(channel, word)

    def check(self):
        """Failures: words outside a run, sinks that took other words than the forwards
        saw, broken handshake rules."""
        failures, self.strays = self.strays, []
        for port, sinks in self.sinks.items():
            for c, sink in enumerate(sinks):
                sink.received()
                if sink.words != self.forwarded[port][c]:
                    failures.append(f"channel {c}: {port} took {len(sink.words)} words, "
                                    f"{len(self.forwarded[port][c])} forwarded")
        try:
            self.streams.check()
        except StreamProtocolError as error:
            failures.append(str(error))
        return failures


class Scratchpads:
    """The scratchpad side of one run: per channel the task it holds (a :class:`TaskPad`),
    fed by the forwards of :class:`TopStreams`, every check of the dispatch on the way.

    Attributes
    ----------
    finished : set of int
        The tasks whose last result beat has been taken.
    failures, mismatches : list
        Dispatch failures (messages); result beats that differ from the golden model.
    dispatch : dict
        Per task: channel, the run's cycle it was taken in and that of its last beat.
    done : cocotb.triggers.Event
        Set when every task is finished or more than four failures are found.
    """

    def __init__(self, bench, config, tasks, befores, failures):
        self.bench, self.config, self.tasks, self.befores = bench, config, tasks, befores
        n = config.channels
        self.boards, self.running = [None] * n, [None] * n
        self.finished, self.seen, self.dispatch = set(), set(), {}
        self.failures, self.mismatches, self.beats = list(failures), [], 0
        self.start = cycle_now()
        self.done = Event()

    def cycle(self):
        """The run's cycle of the coming clock edge (forwards are a cycle early)."""
        return cycle_now() + 1 - self.start

    def _check_done(self):
        if len(self.finished) == len(self.tasks) or len(self.failures) > 4:
            self.done.set()

    def take_task(self, c, word):
        task_id = word & ((1 << self.config.r2a.task_bits) - 1)
        if self.boards[c] is not None or task_id >= len(self.tasks):
            self.failures.append(f"channel {c} got task {task_id} " + (
                f"while running task {self.running[c].id}" if self.boards[c] is not None
                else "not in the table"))
            self._check_done()
            return
        task = self.tasks[task_id]
        waiting = [d for d in task.deps if d not in self.finished]
        if task_id in self.seen or waiting:
            self.failures.append(f"channel {c} got task {task_id} "
                                 + ("twice" if task_id in self.seen else
                                    f"before tasks {waiting} were done"))
        self.seen.add(task_id)
        self.dispatch[task_id] = [c, self.cycle()]
        self.running[c] = task
        self.boards[c] = TaskPad(task.channel, list(task.steps), self.befores[task_id])
        _offer(self.boards[c], self.bench.sources[c])
        self._check_done()

    def take_beat(self, c, word):
        board = self.boards[c]
        if board is None:
            self.failures.append(f"channel {c}: a result beat {word:#x} with no task held")
            self._check_done()
            return
        board.receive(word)
        self.beats += 1
        if board.finished:
            task = self.running[c]
            self.mismatches += [(task.id, c, m) for m in board.mismatches]
            self.finished.add(task.id)
            self.dispatch[task.id].append(self.cycle())
            self.boards[c] = self.running[c] = None
        else:
            _offer(board, self.bench.sources[c])
        self._check_done()


async def _run(bench, config, tasks, befores, regs, pattern, seed, pads=Scratchpads,
               model=None):
    """Load, start and serve one run (``pads``: the :class:`Scratchpads` class that
    serves it, called as it is; ``model``: ``tasks -> Schedule``, default
    :func:`~nnrtl.gen.omni.perf.top_schedule`); returns ``(cycles, model, failures,
    mismatches, beats, dispatch)``."""
    from nnrtl.gen.omni.perf import top_schedule

    bench.streams.pause(pattern, random.Random(seed), ports=bench.channel_ports)
    model = (model or partial(top_schedule, config))(tasks)
    budget = cycle_budget(model.cycles, output_beats=sum(t.out_beats for t in tasks),
                          patterns=(pattern,))
    for task in tasks:
        await regs.write("task_kind", task.kind_code)
        await regs.write("task_length", task.out_beats)
        await regs.write("task_deps", sum(1 << d for d in task.deps))
        await regs.write_fields("control", push=1)
    count = await regs.read("task_count")
    run = pads(bench, config, tasks, befores, [] if count == len(tasks) else
               [f"task_count reads {count}, {len(tasks)} pushed"])
    bench.run = run
    await regs.write_fields("control", start=1)
    run.start = cycle_now()
    try:
        await with_timeout(run.done.wait(), budget * CLOCK_PERIOD_NS, "ns")
    except SimTimeoutError:
        pass
    bench.run = None
    await RisingEdge(bench.dut.clk)
    failures = run.failures
    if len(run.finished) < len(tasks):
        failures.append(f"waiting for tasks {sorted(set(range(len(tasks))) - run.finished)} "
                        f"after {cycle_now() - run.start} cycles (budget {budget}); channels "
                        f"running {[t and t.id for t in run.running]}")
        for sources in bench.sources:
            for source in sources.values():
                source.clear()
    failures += bench.check()
    return (cycle_now() - run.start, model, failures, run.mismatches, run.beats,
            run.dispatch)


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
    bench = TopStreams(dut, config.channels, ports=config.hbm_ports)
    await start_clock_and_reset(dut)
    await ClockCycles(dut.clk, config.adder_stages + 2)
    regs = RegisterBus(AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk,
                                     dut.rst), register_map(config))
    record_bytes = 2 * 4 * len(P1_VECTORS) * config.hidden_size
    rams = [AxiRam(AxiBus.from_prefix(dut, dma_port_names(port)["m_axi"] + "_"), dut.clk,
                   dut.rst, size=1 << max(12, record_bytes.bit_length()))
            for port in range(config.hbm_ports)]
    runs, all_mismatches, beats = [], [], 0
    for index, pattern in enumerate(params["patterns"]):
        befores = task_pads(tasks, cell_pads(config, rng))
        await regs.write_fields("control", clear_tasks=1)
        cycles, model, failures, mismatches, run_beats, dispatch = await _run(
            bench, config, tasks, befores, regs, pattern, params["seed"] + index)
        if not failures and not await _wait_finished(dut, regs, 100):
            failures.append("status.finished stayed 0 after the last task's result")
        counters = await regs.read_many(COUNTERS)
        bp_mm = next(t for t in tasks if t.part == "bp_mm")
        for port, ram in enumerate(rams):
            dma_failures, dma_counters = await dma_round_trip(
                bench, regs, ram, config, befores[bp_mm.id], pattern,
                random.Random(params["seed"] + port), port=port)
            failures += [f"port {port}: {failure}" if port else failure
                         for failure in dma_failures]
            for name, value in dma_counters.items():
                counters[name] = value + (counters[name] if port else 0)
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
    task)`` of every task taken. The Amaranth simulator runs no ``Instance``: the lanes'
    DSP48E2 slices (``dsp_primitives=True``) run as their behaviour, the same bits."""
    from amaranth.hdl import Value
    from amaranth.sim import Simulator

    from nnrtl.hw.omni.top import COUNTERS, OmniTop
    from nnrtl.hw.omni.top_program import top_tasks
    from nnrtl.sim.tb.bus_amaranth import axil_read, axil_write

    if config.dsp_primitives is True:
        config = dataclasses.replace(config, dsp_primitives="behaviour")
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

"""Bench of the R2A scheduler (:mod:`nnrtl.hw.omni.r2a`): random task graphs, a test-side
channel model, the Amaranth-simulator run and the cocotb (Verilator) test.

The channel model: a channel that takes a descriptor in cycle ``h`` raises its ``done``
bit in cycle ``h + D`` with ``D = config.duration(length, switch)`` (``length / pes``
cycles rounded up, plus the mode switch). :class:`ChannelBench` plays every channel and
checks the scheduler on the way: each task issued once, only after every dependency's
done, to a channel of its kind's group or to a swing channel, with the descriptor's
kind, length and switch bit right. The cycles of the run are counted from its first
cycle (the one after ``start``); a handshake in cycle ``h`` is the decision of cycle
``h - 1`` in the model's terms (:func:`nnrtl.gen.omni.r2a.schedule`). Under Verilator
the task table is loaded through a :class:`~nnrtl.sim.tb.streams.StreamSource` on
``load`` and each issue port's descriptors are taken by a
:class:`~nnrtl.sim.tb.streams.StreamSink` (ready by the run's pattern); the ``done`` bits
are driven at the signal level, as the channels' own outputs, not a stream.

cocotb parameters (``tb_params()``): ``config`` (R2AConfig fields), ``graphs`` (a list
of ``{"tasks": [[kind, ops, activations, [deps]], ...], "ew_channels": int, "dynamic":
bool}``, :func:`graph_spec`), ``patterns`` (pause pattern names for the issue ports'
ready, one run of every graph per pattern), ``seed``. Reported per pattern: ``runs``
(each with ``cycles``, ``model_cycles``, ``issues_match`` -- the order equals the
model's --, ``counters``, ``model_counters``, ``budget``), and ``failures`` (messages;
empty when all is well).
"""

import random

import cocotb
from amaranth.hdl import Shape
from cocotb.triggers import ReadOnly, RisingEdge, SimTimeoutError, with_timeout

from nnrtl.gen.omni.r2a import allocation, schedule
from nnrtl.gen.omni.workload import KINDS, Task
from nnrtl.hw.omni.r2a import R2AConfig
from nnrtl.sim.patterns import cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import StreamProtocolError, Streams

__all__ = ["random_graph", "graph_spec", "tasks_from_spec", "masks", "ChannelBench",
           "amaranth_run", "COUNTERS"]

#: The counters of the scheduler, as the model's :class:`Schedule` gives them.
COUNTERS = ("cycles", "swings", "returns", "busy_matmul", "busy_ew")

#: Shapes of :func:`random_graph`.
SHAPES = ("chain", "fan", "random", "layers")


def random_graph(rng, count, *, pes, shape=None, max_length=None):
    """A random acyclic task graph of ``count`` tasks (:class:`Task`), ids permuted so
    that dependencies point both to lower and higher ids.

    ``shape``: ``chain`` (each task needs the previous), ``fan`` (a root, a wide fan, a
    join, repeated), ``random`` (each task needs a random few of the earlier ones),
    ``layers`` (waves of tasks each needing a random part of the previous wave); a
    random one of :data:`SHAPES` by default. Lengths run from 1 to ``max_length``
    (default ``4 * pes + 3``: smaller and larger than a channel, odd sizes included);
    kinds are drawn with a random share of EW tasks.
    """
    shape = shape or rng.choice(SHAPES)
    max_length = max_length or 4 * pes + 3
    deps = [[] for _ in range(count)]
    if shape == "chain":
        for k in range(1, count):
            deps[k] = [k - 1]
    elif shape == "fan":
        root = 0
        k = 1
        while k < count:
            width = rng.randint(1, max(1, count - k - 1))
            fan = list(range(k, min(count, k + width)))
            for f in fan:
                deps[f] = [root]
            k += len(fan)
            if k < count:
                deps[k] = fan
                root, k = k, k + 1
    elif shape == "random":
        for k in range(1, count):
            deps[k] = rng.sample(range(k), rng.randint(0, min(k, 3)))
    elif shape == "layers":
        wave, k = [], 0
        while k < count:
            width = rng.randint(1, 6)
            current = list(range(k, min(count, k + width)))
            for c in current:
                deps[c] = rng.sample(wave, rng.randint(0, len(wave))) if wave else []
            wave, k = current, k + len(current)
    else:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    order = list(range(count))
    rng.shuffle(order)
    ew_share = rng.choice((0.1, 0.3, 0.5, 0.8))
    kinds = ["ew" if rng.random() < ew_share else "matmul" for _ in range(count)]
    lengths = [rng.randint(1, max_length) for _ in range(count)]
    tasks = [None] * count
    for k in range(count):
        tasks[order[k]] = Task(id=order[k], kind=kinds[k], ops=lengths[k],
                               deps=tuple(sorted(order[d] for d in deps[k])))
    return tasks


def graph_spec(tasks, ew_channels, dynamic):
    """A JSON-able description of a run (the cocotb parameters' ``graphs`` entries)."""
    return {"tasks": [[KINDS.index(t.kind), t.ops, t.activations, list(t.deps)]
                      for t in tasks],
            "ew_channels": ew_channels, "dynamic": dynamic}


def tasks_from_spec(spec):
    return [Task(id=k, kind=KINDS[kind], ops=ops, activations=activations, deps=tuple(deps))
            for k, (kind, ops, activations, deps) in enumerate(spec["tasks"])]


def masks(config, ew_channels, dynamic):
    """``(ew_mask, swing_mask)`` integers of :func:`nnrtl.gen.omni.r2a.allocation`."""
    groups, swing = allocation(config, ew_channels, dynamic=dynamic)
    return (sum(g << c for c, g in enumerate(groups)),
            sum(int(s) << c for c, s in enumerate(swing)))


def model_counters(result):
    return {"cycles": result.cycles, "swings": result.swings, "returns": result.returns,
            "busy_matmul": result.busy_group["matmul"], "busy_ew": result.busy_group["ew"]}


class ChannelBench:
    """The channels of one run: descriptors in, done pulses out, the checks on the way.

    Call :meth:`done_bits` at the start of every cycle (the bits to drive), then
    :meth:`handshake` for each channel whose descriptor is taken in that cycle."""

    def __init__(self, config, tasks, ew_channels, dynamic):
        self.config, self.tasks = config, tasks
        self.groups, self.swing = allocation(config, ew_channels, dynamic=dynamic)
        self.mode = list(self.groups)
        self.due = {}            # channel -> (cycle of its done, task)
        self.done_at = {}        # task -> cycle of its done pulse
        self.issues = []         # (decision cycle, channel, task)
        self.failures = []

    def done_bits(self, cycle):
        bits = 0
        for channel, (due, task) in list(self.due.items()):
            if due == cycle:
                bits |= 1 << channel
                self.done_at[task] = cycle
                del self.due[channel]
        return bits

    def handshake(self, cycle, channel, task, kind, length, switch):
        fail = self.failures.append
        if not 0 <= task < len(self.tasks):
            fail(f"cycle {cycle}: channel {channel} got task {task}, not in the table")
            return
        want = self.tasks[task]
        if any(t == task for _, _, t in self.issues):
            fail(f"cycle {cycle}: task {task} issued a second time (channel {channel})")
        if channel in self.due:
            fail(f"cycle {cycle}: channel {channel} got task {task} while running another")
        late = [d for d in want.deps if self.done_at.get(d, cycle) >= cycle]
        if late:
            fail(f"cycle {cycle}: task {task} issued before its dependencies {late} were done")
        if KINDS[kind] != want.kind or length != want.length(self.config.pes_per_channel):
            fail(f"cycle {cycle}: task {task} descriptor kind {kind} length {length}, table "
                 f"has {want.kind} {want.length(self.config.pes_per_channel)}")
        if kind != self.groups[channel] and not self.swing[channel]:
            fail(f"cycle {cycle}: {KINDS[kind]} task {task} on channel {channel}, which is "
                 f"in the {KINDS[self.groups[channel]]} group and does not swing")
        if bool(switch) != (kind != self.mode[channel]):
            fail(f"cycle {cycle}: task {task} switch bit {switch} on channel {channel} in "
                 f"{KINDS[self.mode[channel]]} mode")
        self.mode[channel] = kind
        self.issues.append((cycle - 1, channel, task))
        self.due[channel] = (cycle + self.config.duration(length, switch), task)

    def check_complete(self):
        missing = sorted(set(range(len(self.tasks))) - set(self.done_at))
        if missing:
            self.failures.append(f"tasks never done: {missing[:20]}")


def _load_fields(task, pes):
    return KINDS.index(task.kind), task.length(pes), sum(1 << d for d in task.deps)


def amaranth_run(config, tasks, ew_channels, dynamic, *, budget=None):
    """Run ``tasks`` on :class:`~nnrtl.hw.omni.r2a.R2AScheduler` in the Amaranth simulator
    with channels that are always ready. Returns ``(bench, counters)``: the
    :class:`ChannelBench` (issues, failures) and the scheduler's counters."""
    from amaranth.sim import Simulator

    from nnrtl.hw.omni.r2a import R2AScheduler

    dut = R2AScheduler(config)
    bench = ChannelBench(config, tasks, ew_channels, dynamic)
    ew_mask, swing_mask = masks(config, ew_channels, dynamic)
    model = schedule(tasks, config, ew_channels=ew_channels, dynamic=dynamic)
    budget = budget or cycle_budget(model.cycles)
    outcome = {}

    async def testbench(ctx):
        for task in tasks:
            kind, length, deps = _load_fields(task, config.pes_per_channel)
            ctx.set(dut.load.payload.kind, kind)
            ctx.set(dut.load.payload.length, length)
            ctx.set(dut.load.payload.deps, deps)
            ctx.set(dut.load.valid, 1)
            await ctx.tick()
        ctx.set(dut.load.valid, 0)
        ctx.set(dut.ew_mask, ew_mask)
        ctx.set(dut.swing_mask, swing_mask)
        for port in dut.issue:
            ctx.set(port.ready, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for cycle in range(budget):
            ctx.set(dut.done, bench.done_bits(cycle))
            if ctx.get(dut.finished):
                break
            for channel, port in enumerate(dut.issue):
                if ctx.get(port.valid):
                    bench.handshake(cycle, channel, ctx.get(port.payload.task),
                                    ctx.get(port.payload.kind), ctx.get(port.payload.length),
                                    ctx.get(port.payload.switch))
            await ctx.tick()
        else:
            bench.failures.append(f"not finished within the budget of {budget} cycles")
        outcome.update({name: ctx.get(getattr(dut, name)) for name in COUNTERS})

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    bench.check_complete()
    return bench, outcome


class _Ports:
    """The Verilator top's ports by name, and the stream drivers of its ``load`` and issue
    ports (:mod:`nnrtl.sim.tb.streams`), made once per test."""

    def __init__(self, dut, config):
        self.dut, self.config = dut, config
        get = lambda name: getattr(dut, name)  # noqa: E731
        self.names = [f"issue__{c}" for c in range(config.channels)]
        self.issue = [{field: get(f"{name}__{field}") for field in ("valid", "ready",
                                                                    "payload")}
                      for name in self.names]
        layout = config.issue_layout()
        self.fields = {name: (layout[name].offset, Shape.cast(layout[name].shape).width)
                       for name in ("task", "kind", "length", "switch")}
        load = config.task_layout()
        self.load_offsets = {name: load[name].offset for name in ("kind", "length", "deps")}
        self.streams = Streams(dut)
        self.load = self.streams.source("load")
        self.sinks = [self.streams.sink(name) for name in self.names]

    def unpack(self, word):
        return {name: (word >> offset) & ((1 << width) - 1)
                for name, (offset, width) in self.fields.items()}

    def load_word(self, task):
        kind, length, deps = _load_fields(task, self.config.pes_per_channel)
        o = self.load_offsets
        return (kind << o["kind"]) | (length << o["length"]) | (deps << o["deps"])


async def _load(dut, ports, tasks):
    """Clear the task table and load ``tasks`` through the ``load`` source."""
    edge = RisingEdge(dut.clk)
    dut.clear.value = 1
    await edge
    dut.clear.value = 0
    ports.load.send_words([ports.load_word(task) for task in tasks])
    budget = cycle_budget(len(tasks))
    try:
        await with_timeout(ports.load.wait(), budget * CLOCK_PERIOD_NS, "ns")
    except SimTimeoutError:
        raise AssertionError(f"the task table did not take {len(tasks)} tasks within "
                             f"{budget} cycles") from None


async def _serve(dut, ports, bench, seen):
    """Play the channels from the cycle after ``start`` until ``finished``: each cycle
    drive the ``done`` bits due, then (read-only phase) give every descriptor the issue
    ports hand over at the coming clock edge to ``bench`` and ``seen`` (per channel)."""
    edge, settled = RisingEdge(dut.clk), ReadOnly()
    cycle = 0
    while True:
        dut.done.value = bench.done_bits(cycle)
        await settled
        if dut.finished.value:
            return
        for channel, port in enumerate(ports.issue):
            if port["valid"].value and port["ready"].value:
                word = int(port["payload"].value)
                seen[channel].append(word)
                fields = ports.unpack(word)
                bench.handshake(cycle, channel, fields["task"], fields["kind"],
                                fields["length"], fields["switch"])
        await edge
        cycle += 1


async def _run_graph(dut, ports, config, spec, pattern, rng):
    tasks = tasks_from_spec(spec)
    ew_channels, dynamic = spec["ew_channels"], spec["dynamic"]
    model = schedule(tasks, config, ew_channels=ew_channels, dynamic=dynamic, log=True)
    bench = ChannelBench(config, tasks, ew_channels, dynamic)
    edge = RisingEdge(dut.clk)
    await _load(dut, ports, tasks)
    ew_mask, swing_mask = masks(config, ew_channels, dynamic)
    dut.ew_mask.value, dut.swing_mask.value = ew_mask, swing_mask
    ports.streams.pause(pattern, rng, ports=ports.names)
    firsts = [len(sink.words) for sink in ports.sinks]
    dut.start.value = 1
    await edge
    dut.start.value = 0
    budget = cycle_budget(model.cycles, output_beats=len(tasks), patterns=(pattern,))
    seen = [[] for _ in ports.issue]
    try:
        await with_timeout(_serve(dut, ports, bench, seen), budget * CLOCK_PERIOD_NS, "ns")
    except SimTimeoutError:
        bench.failures.append(f"{pattern}: not finished within the budget of {budget} cycles")
    await edge
    for channel, (sink, first) in enumerate(zip(ports.sinks, firsts)):
        sink.received()
        if sink.words[first:] != seen[channel]:
            bench.failures.append(f"issue port {channel}: the sink took "
                                  f"{len(sink.words) - first} descriptors, "
                                  f"{len(seen[channel])} handed over in the run")
    try:
        ports.streams.check()
    except StreamProtocolError as error:
        bench.failures.append(str(error))
    bench.check_complete()
    counters = {name: int(getattr(dut, name).value) for name in COUNTERS}
    return dict(cycles=counters["cycles"], model_cycles=model.cycles, budget=budget,
                issues_match=bench.issues == list(model.issues), counters=counters,
                model_counters=model_counters(model),
                failures=[f"{pattern}: {f}" for f in bench.failures])


@cocotb.test()
async def scheduler_runs_graphs(dut):
    params = tb_params()
    config = R2AConfig(**params["config"])
    ports = _Ports(dut, config)
    rng = random.Random(params["seed"])
    dut.done.value = 0
    dut.start.value = dut.clear.value = 0
    await start_clock_and_reset(dut)
    result, failures = {}, []
    for pattern in params["patterns"]:
        runs = []
        for spec in params["graphs"]:
            outcome = await _run_graph(dut, ports, config, spec, pattern, rng)
            failures += outcome.pop("failures")
            runs.append(outcome)
        result[pattern] = runs
    report({"runs": result, "failures": failures[:50]})
    assert not failures, failures[0]

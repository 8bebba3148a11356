"""Benches of the η-LSTM channel (:class:`nnrtl.hw.omni.channel.Channel`) running one FW and
one BP cell: the scratchpad model (:class:`Scratchpad`) both drivers share, the
Amaranth-simulator driver (:func:`check_in_amaranth`) and the cocotb bench under
Verilator (:func:`omni_channel_matches_model`, run by
``tests/omni/sim/test_omni_channel_verilator.py``).

The bench is the channel's scratchpad: it sends the program's commands on ``i_command``
and streams each step's operands (``i_input1``, ``i_input2``, ``i_broadcast``) from its
vectors, and writes every result beat from ``o`` back into them. A step's operands are
offered only once every earlier step that writes a vector the step reads has delivered
all its results (the read-after-write order of a real scratchpad): so the FW cell's
``s_t = a + b`` reads the ``a`` and ``b`` the RTL wrote. Every result beat is checked
against :func:`nnrtl.sim.golden.omni.channel.run_program` on the same inputs, bit for bit,
in order; lanes beyond a step's ``lanes`` must be 0.

Driver -> monitor -> model -> in-order checker: under Verilator the drivers are the
shared stream family (:mod:`nnrtl.sim.tb.streams`: a source per input port, a sink on
``o``, each paused by the run's pattern), :class:`~nnrtl.sim.tb.streams.Forward` hands each result beat to the
scratchpad in the cycle it is taken, the model is the golden run, the checker compares
each beat as it arrives; every wait is bounded by
:func:`nnrtl.sim.patterns.cycle_budget` of the program's cycle model.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout

from nnrtl.hw.omni.channel_config import ChannelConfig, Source
from nnrtl.hw.omni.channel_program import bp_program, fw_program, vector_sizes
from nnrtl.sim.golden.omni.channel import bp_inputs, fw_cell, fw_inputs, run_program
from nnrtl.sim.patterns import cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import Forward, Streams, cycle_now

__all__ = ["Scratchpad", "random_cell", "channel_spec", "build_channel", "cell_programs",
           "check_in_amaranth", "ChannelStreams", "offer", "reset_channel",
           "check_drained", "PORTS", "omni_channel_matches_model"]

#: The channel's input streams, in the order the drivers visit them.
PORTS = ("i_command", "i_input1", "i_input2", "i_broadcast")


def channel_spec(config):
    """A JSON-able description of ``config`` (a :class:`ChannelConfig`)."""
    spec = {name: getattr(config, name) for name in (
        "pes_per_channel", "input_size", "hidden_size", "adder_stages", "multiplier_stages",
        "input_depth", "output_depth", "broadcast_depth", "result_depth",
        "activation_adder_stages", "activation_multiplier_stages", "segment_bits",
        "max_length", "flush_subnormals")}
    spec["fmt"] = [config.fmt.exponent_bits, config.fmt.mantissa_bits]
    return spec


def config_from_spec(spec, **sizes):
    """The :class:`ChannelConfig` of a :func:`channel_spec`, with ``sizes`` replaced."""
    from nnrtl.hw.arith.float_format import FloatFormat

    return ChannelConfig(**dict(spec, fmt=FloatFormat(*spec["fmt"]), **sizes))


def build_channel(spec):
    """The :class:`Channel` a :func:`channel_spec` describes."""
    from nnrtl.hw.omni.channel import Channel

    return Channel(config_from_spec(spec))


def random_cell(config, rng):
    """Random FW-cell inputs (a :func:`fw_inputs` scratchpad) and BP-cell gradients:
    ``(fw_pad, gradients)`` with ``gradients`` the ``dy, dh_next, ds_next, dw_acc,
    db_acc`` of :func:`bp_inputs`. Weights of PyTorch's initial scale
    ``U(-1/sqrt(H), 1/sqrt(H))`` times 3, inputs and states of unit scale."""
    h, i_size = config.hidden_size, config.input_size
    scale = 3 / np.sqrt(h)
    fw_pad = fw_inputs(config, rng.uniform(-scale, scale, (4 * h, i_size)),
                       rng.uniform(-scale, scale, (4 * h, h)), rng.uniform(-scale, scale, 4 * h),
                       rng.normal(size=i_size), rng.normal(size=h) * 0.7,
                       rng.normal(size=h))
    gradients = (rng.normal(size=h), rng.normal(size=h), rng.normal(size=h),
                 rng.normal(size=(4 * h, i_size + h)) * 0.1, rng.normal(size=4 * h) * 0.1)
    return fw_pad, gradients


def cell_programs(config, rng):
    """One FW and one BP cell on random inputs, as one program: ``(program, pad)``. The
    BP cell's saved gates and states are the golden FW cell's (the bench's scratchpad
    also receives the RTL's, equal when the FW part is bit-exact)."""
    fw_pad, gradients = random_cell(config, rng)
    pad = bp_inputs(config, fw_cell(config, fw_pad), *gradients)
    pad.update(fw_pad)
    return fw_program(config) + bp_program(config), pad


class Scratchpad:
    """The bench's scratchpad and in-order checker for one program.

    Parameters
    ----------
    config : ChannelConfig
    program : list of Step
    pad : dict
        The initial vectors (bit patterns).
    """

    def __init__(self, config, program, pad):
        self.config, self.program = config, program
        self.width = config.fmt.width
        self.pad = {name: np.asarray(v, dtype=np.uint64).copy() for name, v in pad.items()}
        sizes = vector_sizes(config)
        for step in program:
            if step.result.name not in self.pad:
                self.pad[step.result.name] = np.zeros(sizes[step.result.name],
                                                      dtype=np.uint64)
        self.expected = run_program(config, program, {n: v.copy() for n, v in pad.items()})
        writers, self.after = {}, []
        self.items = {name: [] for name in PORTS}
        for index, step in enumerate(program):
            reads = (step.operand1.name, step.operand2.name)
            self.after.append(max((writers[r] for r in reads if r in writers), default=-1))
            writers[step.result.name] = index
            instruction = step.instruction
            self.items["i_command"].append((index, 0, 0))
            for which, source, count in ((1, instruction.source1, instruction.job.inputs1),
                                         (2, instruction.source2, instruction.job.inputs2)):
                port = "i_broadcast" if source is Source.BROADCAST else f"i_input{which}"
                self.items[port] += [(index, which, k) for k in range(count)]
        self.sent = {name: 0 for name in PORTS}
        self.completed = 0          # steps whose every result beat has arrived
        self.beat = 0               # result beats of step ``completed`` so far
        self.mismatches = []
        self.beats = 0

    @property
    def out_beats(self):
        return sum(step.instruction.out_beats for step in self.program)

    def next_word(self, port):
        """The next word to offer on ``port``, or ``None`` (none left, or its step waits
        on results not yet written)."""
        if self.sent[port] >= len(self.items[port]):
            return None
        index, which, k = self.items[port][self.sent[port]]
        step = self.program[index]
        if port == "i_command":
            return self.config.command_word(step.instruction)
        if self.after[index] >= self.completed:
            return None
        access = step.operand1 if which == 1 else step.operand2
        vector = self.pad[access.name]
        if port == "i_broadcast":
            return int(vector[access.index[k]])
        return sum(int(vector[i]) << (lane * self.width)
                   for lane, i in enumerate(access.index[k]))

    def taken(self, port):
        self.sent[port] += 1

    def receive(self, word):
        """Check one beat from ``o`` against the model and write it to the vectors."""
        assert self.completed < len(self.program), "a result beat beyond the program"
        step = self.program[self.completed]
        lanes = step.instruction.lanes
        mask = (1 << self.width) - 1
        got = [(word >> (lane * self.width)) & mask
               for lane in range(self.config.pes_per_channel)]
        want = [int(v) for v in self.expected[self.completed][self.beat]]
        if got[:lanes] != want or any(got[lanes:]):
            self.mismatches.append((self.completed, self.beat, step.result.name, got, want))
        self.pad[step.result.name][step.result.index[self.beat]] = got[:lanes]
        self.beats += 1
        self.beat += 1
        if self.beat == step.instruction.out_beats:
            self.completed += 1
            self.beat = 0

    @property
    def finished(self):
        return self.completed == len(self.program)

    def describe_mismatches(self, count=4):
        return "; ".join(f"step {s} ({name}) beat {b}: got "
                         f"{[hex(g) for g in got[:len(want)]]} model {[hex(w) for w in want]}"
                         for s, b, name, got, want in self.mismatches[:count])


def check_in_amaranth(channel, program, pad, *, seed=0, gap=0.0, stall=0.0, timeout=3000):
    """Run ``program`` through ``channel`` in the Amaranth simulator with input gaps and
    output stalls of the given probabilities; assert every beat bit-exact and nothing
    more on ``o``. Returns ``(cycles, scratchpad)``."""
    from amaranth.hdl import Value
    from amaranth.sim import Simulator

    config = channel.config
    board = Scratchpad(config, program, pad)
    rng = random.Random(seed)
    ports = {name: getattr(channel, name) for name in PORTS}
    outcome = {}

    async def bench(ctx):
        for _ in range(config.adder_stages + 2):
            await ctx.tick()
        offering = {name: False for name in PORTS}
        cycle = idle = 0
        while not board.finished:
            for name, port in ports.items():
                if not offering[name] and not rng.random() < gap:
                    word = board.next_word(name)
                    if word is not None:
                        ctx.set(Value.cast(port.payload), word)
                        ctx.set(port.valid, 1)
                        offering[name] = True
            ctx.set(channel.o.ready, int(not rng.random() < stall))
            _clk, _rst, *sampled = await ctx.tick().sample(
                *(port.ready for port in ports.values()), channel.o.valid, channel.o.ready,
                Value.cast(channel.o.payload))
            cycle += 1
            idle += 1
            *readies, o_valid, o_ready, o_bits = sampled
            for (name, port), ready in zip(ports.items(), readies):
                if offering[name] and ready:
                    board.taken(name)
                    offering[name] = False
                    ctx.set(port.valid, 0)
            if o_valid and o_ready:
                board.receive(o_bits)
                idle = 0
            assert idle < timeout, (f"no result for {timeout} cycles: step "
                                    f"{board.completed} of {len(program)}, "
                                    f"sent {board.sent}")
        outcome["cycles"] = cycle
        ctx.set(channel.o.ready, 1)
        for _ in range(config.adder_stages + config.multiplier_stages + 12):
            await ctx.tick()
            assert not ctx.get(channel.o.valid), "a result beat beyond the program"

    sim = Simulator(channel)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not board.mismatches, board.describe_mismatches()
    return outcome["cycles"], board


# -- cocotb bench (Verilator) ---------------------------------------------------------------
#
# Parameters (``tb_params()``): ``channel`` (a :func:`channel_spec`; its ``max_length``
# bounds the sizes), ``sizes`` (a list of ``[input_size, hidden_size]``, one FW + BP cell
# each, per pattern), ``patterns`` (names of :data:`nnrtl.sim.patterns.PATTERNS`),
# ``seed``. Reported: ``bit_exact``, ``mismatches``, ``beats``, ``runs`` (per pattern
# and size: ``cycles``, ``model_cycles``).


class ChannelStreams:
    """The stream drivers of a channel bench, made once per test: a
    :class:`~nnrtl.sim.tb.streams.StreamSource` per input port (:data:`PORTS`), a
    :class:`~nnrtl.sim.tb.streams.StreamSink` and a :class:`~nnrtl.sim.tb.streams.Forward` on ``o``.

    Parameters
    ----------
    dut : cocotb handle
        The channel's top level.
    """

    def __init__(self, dut):
        self.dut = dut
        self.streams = Streams(dut)
        self.sources = {name: self.streams.source(name) for name in PORTS}
        self.sink = self.streams.sink("o")
        self.forward = Forward(dut, "o")


def offer(board, sources):
    """Queue on ``sources`` (by port name) every word ``board`` can offer now, in order;
    the board counts them as sent."""
    for port, source in sources.items():
        words = []
        while (word := board.next_word(port)) is not None:
            words.append(word)
            board.taken(port)
        source.send_words(words)


async def _run(bench, config, program, pad, pattern, rng):
    """Run ``program`` on the channel of ``bench`` (:class:`ChannelStreams`) under pause
    pattern ``pattern``; returns ``(cycles, model_cycles, board)``.

    The commands are queued at once, each step's operands when the results it reads
    have arrived (:class:`~nnrtl.sim.tb.streams.Forward`: the cycle after the last one is taken). ``cycles`` is
    the window the cycle model counts: from the first cycle the words are offered (the
    one after the cycle they are queued in) to the cycle the last result beat is taken,
    inclusive.

    Raises
    ------
    AssertionError
        A budget overrun (naming the step awaited and the words sent).
    """
    board = Scratchpad(config, program, pad)
    bench.streams.pause(pattern, rng)
    model_cycles = config.program_cycles(program)
    budget = cycle_budget(model_cycles, output_beats=board.out_beats, patterns=(pattern,))
    sink, seen = bench.sink, []
    first = len(sink.words)

    def take(word):
        seen.append(word)
        board.receive(word)
        offer(board, bench.sources)

    start = cycle_now()
    offer(board, bench.sources)
    bench.forward.callback = take
    try:
        await with_timeout(sink.receive(board.out_beats), budget * CLOCK_PERIOD_NS, "ns")
    except SimTimeoutError:
        raise AssertionError(f"pattern {pattern}: waiting for step {board.completed} of "
                             f"{len(program)} (beat {board.beat}) after "
                             f"{cycle_now() - start} cycles (budget {budget}); words sent "
                             f"{board.sent}") from None
    finally:
        bench.forward.callback = None
    assert sink.words[first:] == seen, "o: the words taken differ from those forwarded"
    bench.streams.check()
    return sink.cycles[-1] - start - 1, model_cycles, board


async def reset_channel(dut, spec):
    """Make the channel's stream drivers, reset it and wait out the PEs' start
    (``adder_stages + 2`` cycles, where the cycle model starts counting); returns the
    drivers (:class:`ChannelStreams`)."""
    bench = ChannelStreams(dut)
    await start_clock_and_reset(dut)
    await ClockCycles(dut.clk, spec["adder_stages"] + 2)
    return bench


async def check_drained(bench, spec, what):
    """Wait out the pipelines of the channel of ``bench`` (:class:`ChannelStreams`) and
    check that no beat follows ``what`` on ``o``, every queued word was taken and every
    handshake rule held."""
    await ClockCycles(bench.dut.clk, spec["adder_stages"] + spec["multiplier_stages"] + 12)
    assert not bench.sink.extra() and not bench.dut.o__valid.value, \
        f"a result beat beyond {what}"
    assert bench.streams.idle(), f"words left in the sources after {what}"
    bench.streams.check()


@cocotb.test()
async def omni_channel_matches_model(dut):
    params = tb_params()
    spec = params["channel"]
    rng = np.random.default_rng(params["seed"])
    bench = await reset_channel(dut, spec)
    mismatches, beats, runs = 0, 0, []
    for pattern in params["patterns"]:
        for input_size, hidden_size in params["sizes"]:
            config = config_from_spec(spec, input_size=input_size, hidden_size=hidden_size)
            program, pad = cell_programs(config, rng)
            cycles, model_cycles, board = await _run(
                bench, config, program, pad, pattern,
                random.Random(int(rng.integers(1 << 31))))
            await check_drained(bench, spec, f"the program (pattern {pattern})")
            if board.mismatches:
                dut._log.error("pattern %s, I=%d H=%d: %s", pattern, input_size, hidden_size,
                               board.describe_mismatches())
            mismatches += len(board.mismatches)
            beats += board.beats
            runs.append({"pattern": pattern, "input_size": input_size,
                         "hidden_size": hidden_size, "steps": len(program),
                         "cycles": cycles, "model_cycles": model_cycles,
                         "mismatches": len(board.mismatches)})
    report({"bit_exact": mismatches == 0, "mismatches": mismatches, "beats": beats,
            "runs": runs})
    assert mismatches == 0, f"{mismatches} result beats differ from the model"

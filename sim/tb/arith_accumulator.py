"""cocotb bench: streaming accumulators (:mod:`nnrtl.hw.arith.accumulator`) under
Verilator, bit-exact against :mod:`nnrtl.sim.golden.accumulator`, under the project's
pause patterns, and the latency overhead measured against the stream length.

An accumulator is described by a JSON-able *spec* (:func:`accumulator_spec`);
:class:`AccumulatorBundle` puts several side by side so that one build and one
simulation serve them all. The bench rebuilds each unit from its spec and takes the
payload layout, the expected sums (:func:`expected`) and the latency formula
(``unit.latency(n)``) from it -- nothing is restated. :func:`random_streams`,
:func:`amaranth_run` and :func:`check_in_amaranth` (whose :data:`PATTERNS` are gap /
stall probabilities) also serve the Amaranth-simulator tests.

Parameters (``tb_params()``): ``units``, ``{name: spec}`` (the names those of the
bundle); ``streams`` per unit and ``max_length``; ``patterns``, entries of
:func:`~nnrtl.sim.tb.bundle.pattern_kinds` (``"random"``, ``"random/none"``) over which
each unit's streams are split; ``overhead_lengths``, stream lengths run back to back
under pattern ``none`` to measure the latency; ``seed``.

Per unit a :class:`~nnrtl.sim.tb.bundle.StreamLane` (the shared stream drivers) feeds
the accumulator and takes its sums, which are checked in order. Checked besides the
sums, from the recorded handshake cycles: a sum offered and not taken stays put; under
pattern ``none`` every sum leaves ``latency(n)`` cycles after its stream's first input,
and the next stream's first input is taken in the cycle the sum leaves; no sum beyond
the expected ones; every run within its cycle budget. Reported: ``bit_exact``,
``cycles``, ``streams``, ``values``, ``patterns`` (per entry ``cycles`` and ``budget``)
and per unit (``units``) ``streams``, ``values``, ``mismatches``, ``reduction_cycles``,
``latency_checked`` / ``latency_matches`` (every stream under ``none``), ``latency`` /
``measured_latency`` / ``overhead`` keyed by the ``overhead_lengths``.
"""

import random

import cocotb
import numpy as np

from nnrtl.hw.arith.accumulator import StreamingAccumulator
from nnrtl.hw.arith.float_format import FloatFormat
from nnrtl.sim.golden.accumulator import streaming_sums
from nnrtl.sim.golden.float import special_values, to_bits
from nnrtl.sim.tb.bundle import StreamLane, StreamUnitBundle, pattern_kinds, run_lanes
from nnrtl.sim.tb.bus_amaranth import stream_through
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import Streams, cycle_now

__all__ = ["accumulator_spec", "build_accumulator", "random_streams", "expected", "beats",
           "amaranth_run", "check_in_amaranth", "PATTERNS", "AccumulatorBundle"]


def accumulator_spec(fmt, *, adder_stages=3, flush_subnormals=False):
    """A JSON-able description of ``StreamingAccumulator(fmt, ...)``."""
    return {"fmt": [fmt.exponent_bits, fmt.mantissa_bits], "adder_stages": adder_stages,
            "flush_subnormals": flush_subnormals}


def build_accumulator(spec):
    """The accumulator a spec describes."""
    return StreamingAccumulator(FloatFormat(*spec["fmt"]), adder_stages=spec["adder_stages"],
                                flush_subnormals=spec["flush_subnormals"])


#: Kinds of streams :func:`random_streams` draws, with their shares.
KINDS = {
    "normal": 0.30,      # normal values around one random scale
    "magnitudes": 0.20,  # magnitudes spread over the whole exponent range: absorption
    "cancelling": 0.15,  # values and their negations interleaved, plus small ones
    "special": 0.15,     # a normal stream with one or two special values inserted
    "zeros": 0.05,       # signed zeros (and, with flushing, subnormals)
    "overflow": 0.05,    # values near the largest finite, one sign: an infinity
    "uniform": 0.10,     # uniformly random bit patterns (NaNs and infinities included)
}


def _length(rng, max_length, slots):
    pick = rng.random()
    if pick < 0.3:
        return int(rng.integers(1, min(2 * slots + 3, max_length) + 1))
    if pick < 0.7:
        return int(rng.integers(1, min(200, max_length) + 1))
    return int(rng.integers(1, max_length + 1))


def _stream(fmt, rng, kind, n):
    specials = special_values(fmt)
    top = fmt.emax
    if kind == "normal":
        scale = 2.0 ** rng.integers(fmt.emin // 2, top // 2 + 1)
        return to_bits(fmt, rng.normal(size=n) * scale)
    if kind == "magnitudes":
        signs = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(fmt.width - 1)
        return signs | rng.integers(0, fmt.max_finite + 1, n, dtype=np.uint64)
    if kind == "cancelling":
        x = rng.normal(size=n) * 2.0 ** rng.integers(-4, 5)
        x[1::2] = -x[0::2][:len(x[1::2])] + rng.normal(size=len(x[1::2])) * 2.0 ** -10
        return to_bits(fmt, x)
    if kind == "special":
        values = to_bits(fmt, rng.normal(size=n)).astype(np.uint64)
        names = sorted(specials)
        for _ in range(int(rng.integers(1, 3))):
            values[rng.integers(0, n)] = specials[names[rng.integers(0, len(names))]]
        return values
    if kind == "zeros":
        zeros = [specials["+0"], specials["-0"], specials["+min_subnormal"],
                 specials["-max_subnormal"]]
        weights = np.array([0.3, 0.6, 0.05, 0.05])
        return np.asarray(zeros, dtype=np.uint64)[rng.choice(4, n, p=weights)]
    if kind == "overflow":
        sign = np.uint64(int(rng.integers(0, 2)) << (fmt.width - 1))
        low = fmt.max_finite - (3 << fmt.mantissa_bits)
        return sign | rng.integers(low, fmt.max_finite + 1, n, dtype=np.uint64)
    if kind == "uniform":
        return rng.integers(0, 1 << fmt.width, n, dtype=np.uint64)
    raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")


def random_streams(fmt, rng, count, *, max_length=2000, slots=3):
    """``count`` streams (arrays of bit patterns) of random kinds (:data:`KINDS`) and
    lengths from 1 to ``max_length`` (a third no longer than ``2 * slots + 3``, most under
    200). ``rng`` is a ``numpy.random.Generator``."""
    kinds = rng.choice(list(KINDS), count, p=list(KINDS.values()))
    streams = []
    for kind in kinds:
        n = _length(rng, max_length, slots)
        if kind == "uniform":
            n = min(n, 16)  # NaNs would swamp long ones
        streams.append(np.asarray(_stream(fmt, rng, kind, n), dtype=np.uint64))
    return streams


def expected(unit, streams):
    """The sums (ints) the golden model gives for ``streams`` on ``unit``."""
    return [int(s) for s in streaming_sums(unit.fmt, streams, adder_stages=unit.adder_stages,
                                           flush_subnormals=unit.flush_subnormals)]


def beats(unit, streams):
    """The input payload words (ints) of ``streams``: ``value`` and ``last``, packed with
    the offsets of ``unit.i.payload``'s layout."""
    layout = unit.i.payload.shape()
    value, last = layout["value"].offset, layout["last"].offset
    return [(int(v) << value) | (int(k == len(s) - 1) << last)
            for s in streams for k, v in enumerate(s)]


def _stream_starts(streams):
    return list(np.cumsum([0] + [len(s) for s in streams])[:-1])


async def amaranth_run(ctx, unit, streams, *, rng, gap=0.0, stall=0.0, timeout=20000):
    """Send ``streams`` on ``unit.i`` with random gaps while taking their sums from
    ``unit.o`` with random stalls (Amaranth simulator). Returns ``(accepted, taken,
    sums)``: the cycles of the input and output handshakes, and the sums."""
    return await stream_through(ctx, unit, beats(unit, streams), len(streams), rng=rng,
                                gap=gap, stall=stall, timeout=timeout)


#: Gap / stall probabilities of :func:`check_in_amaranth`: full throughput (the latency
#: is measured), gaps only, backpressure only, both.
PATTERNS = [(0.0, 0.0), (0.5, 0.0), (0.0, 0.6), (0.3, 0.5)]


def check_in_amaranth(unit, streams, *, seed=0, patterns=PATTERNS):
    """Run ``streams`` through ``unit`` in the Amaranth simulator under each gap/stall
    pattern; check the sums against :func:`expected` (bit for bit), and with neither gaps
    nor stalls the latency of every stream (``unit.latency(n)``) and that each stream's
    first input is taken in the cycle the previous sum leaves. Returns the sums."""
    from amaranth.sim import Simulator

    rng = random.Random(seed)
    want = expected(unit, streams)
    starts = _stream_starts(streams)
    for gap, stall in patterns:
        outcome = {}

        async def bench(ctx):
            outcome["run"] = await amaranth_run(ctx, unit, streams, rng=rng, gap=gap,
                                                stall=stall)
            for _ in range(unit.reduction_cycles + 4):
                await ctx.tick()
                assert not ctx.get(unit.o.valid), "a sum beyond the expected ones"

        sim = Simulator(unit)
        sim.add_clock(1e-8)
        sim.add_testbench(bench)
        sim.run()
        accepted, taken, got = outcome["run"]
        assert got == want, f"sums differ from the model (gap {gap}, stall {stall})"
        if gap == 0 and stall == 0:
            measured = [t - accepted[s] for t, s in zip(taken, starts)]
            assert measured == [unit.latency(len(s)) for s in streams]
            assert [accepted[s] for s in starts[1:]] == taken[:-1]
    return want


class AccumulatorBundle(StreamUnitBundle):
    """Several units of ``accumulator_spec(...)`` specs side by side (see :class:`StreamUnitBundle`)."""

    def __init__(self, specs):
        super().__init__(specs, build_accumulator)


class _Lane(StreamLane):
    """Driver, monitor and checker of one accumulator of an :class:`AccumulatorBundle`."""

    def __init__(self, streams, name, unit):
        super().__init__(streams, name)
        self.unit = unit
        self.mismatches = self.streams = self.values = 0
        self.measured = {}

    def begin(self, streams):
        """Send ``streams`` (arrays of bit patterns), back to back."""
        self.chunk = streams
        self.want = expected(self.unit, streams) if streams else []
        self.send(beats(self.unit, streams), len(self.want))

    def check(self, entry, log):
        """After a run under ``entry``: compare with the model; under ``none``, the
        latency and the restart of the next stream."""
        accepted, taken = self.accepted, self.taken
        assert len(accepted) == len(self.words), \
            f"{self.name}: {len(accepted)} input handshakes recorded, {len(self.words)} sent"
        for index, (value, model) in enumerate(zip(self.got, self.want)):
            if value != model:
                self.mismatches += 1
                if self.mismatches <= 10:
                    log.error("%s pattern %s stream %d (%d values): got %#x, model %#x",
                              self.name, entry, index, len(self.chunk[index]), value, model)
        if pattern_kinds(entry) == ("none", "none"):
            starts = _stream_starts(self.chunk)
            for stream, start, end in zip(self.chunk, starts, taken):
                self.measured.setdefault(len(stream), set()).add(end - accepted[start])
            restarts = [accepted[s] for s in starts[1:]]
            assert restarts == taken[:-1], \
                f"{self.name}: a stream did not start in the cycle the previous sum left"
        self.streams += len(self.chunk)
        self.values += sum(len(s) for s in self.chunk)

    def summary(self, lengths):
        unit = self.unit
        measured = {n: sorted(self.measured.get(n, ())) for n in lengths}
        return {
            "streams": self.streams, "values": self.values, "mismatches": self.mismatches,
            "adder_stages": unit.adder_stages, "reduction_cycles": unit.reduction_cycles,
            "latency": {str(n): unit.latency(n) for n in lengths},
            "measured_latency": {str(n): cycles for n, cycles in measured.items()},
            "overhead": {str(n): (max(cycles) - n) / n for n, cycles in measured.items()
                         if cycles},
            "latency_checked": sum(len(cycles) for cycles in self.measured.values()),
            "latency_matches": all(c == unit.latency(n) for n, cycles in self.measured.items()
                                   for c in cycles),
        }


async def _run(dut, streams, lanes, plans, entry, rng):
    """Run one chunk of streams per lane (``plans``: ``{name: streams}``) under the
    ``patterns`` entry ``entry``; returns :func:`~nnrtl.sim.tb.bundle.run_lanes`' dict."""
    for lane in lanes:
        lane.begin(plans[lane.name])
    # without pauses the streams of a lane follow one another, each ``latency(n)`` cycles
    model = max(sum(lane.unit.latency(len(s)) for s in plans[lane.name]) for lane in lanes)
    run = await run_lanes(streams, lanes, entry, rng, model_cycles=model,
                          output_beats=max(len(plans[lane.name]) for lane in lanes),
                          settle=max(lane.unit.reduction_cycles for lane in lanes) + 4)
    for lane in lanes:
        lane.check(entry, dut._log)
    dut._log.info("pattern %s: %d cycles", entry, run["cycles"])
    return run


@cocotb.test()
async def accumulators_match_model(dut):
    params = tb_params()
    rng = np.random.default_rng(params["seed"])
    pauses = random.Random(params["seed"])
    await start_clock_and_reset(dut)
    streams = Streams(dut)
    lanes = {name: _Lane(streams, name, build_accumulator(spec))
             for name, spec in params["units"].items()}
    patterns = list(params["patterns"])
    lengths = list(params.get("overhead_lengths", []))
    inputs = {name: random_streams(lane.unit.fmt, rng, params["streams"],
                                   max_length=params["max_length"], slots=lane.unit.slots)
              for name, lane in lanes.items()}
    start, runs = cycle_now(), {}
    for number, entry in enumerate(patterns):
        plans = {name: all_streams[number * len(all_streams) // len(patterns):
                                   (number + 1) * len(all_streams) // len(patterns)]
                 for name, all_streams in inputs.items()}
        runs[entry] = await _run(dut, streams, list(lanes.values()), plans, entry, pauses)
    if lengths:
        plans = {name: [np.asarray(to_bits(lane.unit.fmt, rng.normal(size=n)), dtype=np.uint64)
                        for n in lengths] for name, lane in lanes.items()}
        await _run(dut, streams, list(lanes.values()), plans, "none", pauses)
    summaries = {name: lane.summary(lengths) for name, lane in lanes.items()}
    mismatches = sum(summary["mismatches"] for summary in summaries.values())
    report({"bit_exact": mismatches == 0, "cycles": cycle_now() - start, "units": summaries,
            "patterns": runs,
            "streams": sum(s["streams"] for s in summaries.values()),
            "values": sum(s["values"] for s in summaries.values())})
    assert mismatches == 0, f"{mismatches} sums differ from the model"
    for name, summary in summaries.items():
        assert summary["latency_matches"], f"{name}: measured latency is not latency(n)"

"""cocotb bench: fixed-point units (:mod:`nnrtl.hw.arith.fixed`, ``.pwl``) under
Verilator, bit-exact against the golden models, under the project's pause patterns.

A unit is described by a JSON-able *spec* (:func:`unit_spec`); :class:`UnitBundle` puts
several side by side so that one build and one simulation serve them all (a cocotb
process takes seconds to start). The bench rebuilds every unit from its spec and takes
the payload layouts, the formats, the latency and the expected results from it and from
:func:`expected` -- nothing is restated. The helpers (:func:`random_inputs`,
:func:`expected`, :func:`pack`, :func:`unpack`, :func:`amaranth_run`,
:func:`check_in_amaranth`, whose :data:`PATTERNS` are gap / stall probabilities) also
serve the Amaranth-simulator tests.

Parameters (``tb_params()``): ``units``, ``{name: {"spec": ..., "vectors": n}}`` or
``{name: {"spec": ..., "exhaustive": true}}`` (every code of the unit's one input field,
in a random order), the names those of the :class:`UnitBundle`; ``patterns``, entries of
:func:`~nnrtl.sim.tb.bundle.pattern_kinds` (``"random"``, ``"random/none"``) over which
each unit's beats are split; ``seed``.

Per unit a :class:`~nnrtl.sim.tb.bundle.StreamLane` (the shared stream drivers) feeds
the unit and takes its results, which are checked in order. Checked besides the values,
from the recorded handshake cycles: a result offered and not taken stays put; with the
sink pattern ``none``, every result leaves exactly ``latency`` cycles after its (last)
input beat; with pattern ``none``, one beat is taken per cycle; no result beyond the
expected ones; every run within its cycle budget. Reported: ``bit_exact``, ``cycles``,
``vectors``, ``patterns`` (per entry ``cycles`` and ``budget``) and per unit (``units``)
``vectors``, ``results``, ``mismatches``, ``latency``, ``measured_latency``.
"""

import random

import cocotb
from amaranth.hdl import Shape

from nnrtl.hw.arith import fixed, pwl
from nnrtl.hw.arith.fixed import Overflow, QFormat, Rounding
from nnrtl.sim.golden import fixed as golden_fixed
from nnrtl.sim.golden import pwl as golden_pwl
from nnrtl.sim.tb.bundle import StreamLane, StreamUnitBundle, pattern_kinds, run_lanes
from nnrtl.sim.tb.bus_amaranth import stream_through
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.streams import Streams, cycle_now

__all__ = ["UNITS", "unit_spec", "build_unit", "random_inputs", "expected", "pack",
           "unpack", "format_fields", "completing_inputs", "amaranth_run",
           "check_in_amaranth", "PATTERNS", "UnitBundle"]

#: Units the bench can build, by class name.
UNITS = {cls.__name__: cls for cls in (
    fixed.Rescale, fixed.FixedMul, fixed.FixedAdd, fixed.FixedMac, pwl.PWLSigmoid,
    pwl.PWLTanh, pwl.SigmoidDerivative, pwl.TanhDerivative)}


def _encode(value):
    if isinstance(value, QFormat):
        return {"qformat": [value.width, value.fraction_bits, value.signed]}
    if isinstance(value, Rounding):
        return {"rounding": value.name}
    if isinstance(value, Overflow):
        return {"overflow": value.name}
    return value


def _decode(value):
    if isinstance(value, dict) and "qformat" in value:
        return QFormat(*value["qformat"])
    if isinstance(value, dict) and "rounding" in value:
        return Rounding[value["rounding"]]
    if isinstance(value, dict) and "overflow" in value:
        return Overflow[value["overflow"]]
    return value


def unit_spec(name, *args, **kwargs):
    """A JSON-able description of ``UNITS[name](*args, **kwargs)``."""
    if name not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {name!r}")
    return {"unit": name, "args": [_encode(a) for a in args],
            "kwargs": {k: _encode(v) for k, v in kwargs.items()}}


def build_unit(spec):
    """The component a spec describes."""
    return UNITS[spec["unit"]](*(_decode(a) for a in spec["args"]),
                               **{k: _decode(v) for k, v in spec["kwargs"].items()})


def format_fields(unit):
    """``{field: QFormat}`` of the unit's input payload fields that carry codes."""
    if isinstance(unit, fixed.Rescale):
        return {"value": unit.in_fmt}
    if isinstance(unit, (fixed.FixedMul, fixed.FixedAdd)):
        return {"a": unit.a_fmt, "b": unit.b_fmt}
    if isinstance(unit, fixed.FixedMac):
        fields = {"a": unit.a_fmt, "b": unit.b_fmt}
        if unit.init:
            fields["init"] = unit.acc_fmt
        return fields
    return {"x": unit.in_fmt}


def _random_code(rng, fmt):
    pick = rng.random()
    if pick < 0.1:
        return fmt.min_code
    if pick < 0.2:
        return fmt.max_code
    if pick < 0.3:  # around zero, where rounding ties are frequent
        return max(fmt.min_code, min(fmt.max_code, rng.randint(-4, 4)))
    return rng.randint(fmt.min_code, fmt.max_code)


def random_inputs(unit, rng, count, *, exhaustive=False):
    """Input payloads (dicts of codes) for ``unit``: ``count`` random beats (extremes
    and near-zero codes favoured; for a MAC, groups of random length, the last beat
    closing one), or every code of the single input field in a random order."""
    fields = format_fields(unit)
    if exhaustive:
        (name, fmt), = fields.items()
        codes = list(range(fmt.min_code, fmt.max_code + 1))
        rng.shuffle(codes)
        return [{name: code} for code in codes]
    beats = []
    for index in range(count):
        beat = {name: _random_code(rng, fmt) for name, fmt in fields.items()}
        if isinstance(unit, fixed.FixedMac):
            closes = rng.random() < (0.5 if rng.random() < 0.3 else 0.1)
            beat["last"] = int(closes or index == count - 1)
        beats.append(beat)
    return beats


def expected(unit, inputs):
    """The results (dicts of codes, one per output beat) the golden models give."""
    column = {name: [beat[name] for beat in inputs] for name in inputs[0]} if inputs else {}
    if isinstance(unit, fixed.Rescale):
        name, values = "value", golden_fixed.rescale(
            column["value"], unit.in_fmt, unit.out_fmt, rounding=unit.rounding,
            overflow=unit.overflow)
    elif isinstance(unit, fixed.FixedMul):
        name, values = "product", golden_fixed.mul(
            column["a"], column["b"], unit.a_fmt, unit.b_fmt, unit.out_fmt,
            rounding=unit.rounding, overflow=unit.overflow)
    elif isinstance(unit, fixed.FixedAdd):
        name, values = "sum", golden_fixed.add(
            column["a"], column["b"], unit.a_fmt, unit.b_fmt, unit.out_fmt,
            subtract=unit.subtract, rounding=unit.rounding, overflow=unit.overflow)
    elif isinstance(unit, fixed.FixedMac):
        name, values = "sum", golden_fixed.mac(
            column["a"], column["b"], column["last"], unit.a_fmt, unit.b_fmt, unit.out_fmt,
            acc_fmt=unit.acc_fmt, init=column.get("init"), rounding=unit.rounding,
            overflow=unit.overflow, acc_overflow=unit.acc_overflow)
    elif isinstance(unit, pwl.PiecewiseLinear):
        name, values = "y", golden_pwl.evaluate(unit.table, column["x"])
    elif isinstance(unit, pwl.SigmoidDerivative):
        name, values = "y", golden_pwl.sigmoid_derivative(
            column["x"], unit.in_fmt, unit.out_fmt, rounding=unit.rounding)
    elif isinstance(unit, pwl.TanhDerivative):
        name, values = "y", golden_pwl.tanh_derivative(
            column["x"], unit.in_fmt, unit.out_fmt, rounding=unit.rounding)
    else:
        raise TypeError(f"no model for {unit!r}")
    return [{name: int(value)} for value in values]


def pack(layout, payload):
    """The bits (an int) of a struct payload from a dict of field values."""
    word = 0
    for name, field in layout:
        word |= (int(payload.get(name, 0)) & ((1 << field.width) - 1)) << field.offset
    return word


def unpack(layout, word):
    """A dict of field values (signed fields sign-extended) from payload bits."""
    payload = {}
    for name, field in layout:
        value = (word >> field.offset) & ((1 << field.width) - 1)
        if Shape.cast(field.shape).signed and value >> (field.width - 1):
            value -= 1 << field.width
        payload[name] = value
    return payload


def completing_inputs(unit, inputs):
    """For each result, the index of the input beat that completes it (a MAC's sum is
    completed by its group's last beat)."""
    if isinstance(unit, fixed.FixedMac):
        return [k for k, beat in enumerate(inputs) if beat["last"]]
    return list(range(len(inputs)))


async def amaranth_run(ctx, unit, inputs, count, *, rng, gap=0.0, stall=0.0,
                       timeout=10000):
    """Amaranth-simulator counterpart of the cocotb driver and monitor: send ``inputs``
    on ``unit.i`` with random gaps while taking ``count`` results from ``unit.o`` with
    random stalls. Returns ``(accepted, taken, results)``: the cycles at which inputs
    were accepted and results taken, and the results (dicts)."""
    in_layout, out_layout = unit.i.payload.shape(), unit.o.payload.shape()
    accepted, taken, outputs = await stream_through(
        ctx, unit, [pack(in_layout, beat) for beat in inputs], count, rng=rng, gap=gap,
        stall=stall, timeout=timeout)
    return accepted, taken, [unpack(out_layout, bits) for bits in outputs]


#: Gap / stall probabilities of :func:`check_in_amaranth`: full throughput, gaps only
#: (the latency is measured), gaps and backpressure.
PATTERNS = [(0.0, 0.0), (0.4, 0.0), (0.3, 0.5)]


def check_in_amaranth(unit, *, count=240, seed=0, patterns=PATTERNS, inputs=None):
    """Run ``inputs`` (``count`` random ones per pattern by default) through ``unit`` in
    the Amaranth simulator under each gap/stall pattern; check the results against
    :func:`expected`, the latency (when nothing stalls) and the throughput (one beat per
    cycle when there are neither gaps nor stalls); return all results."""
    from amaranth.sim import Simulator

    rng = random.Random(seed)
    all_results = []
    for gap, stall in patterns:
        beats = inputs if inputs is not None else random_inputs(unit, rng, count)
        want = expected(unit, beats)
        outcome = {}

        async def bench(ctx):
            outcome["run"] = await amaranth_run(ctx, unit, beats, len(want), rng=rng,
                                                gap=gap, stall=stall)
            for _ in range(unit.latency + 2):
                await ctx.tick()
                assert not ctx.get(unit.o.valid), "a result beyond the expected ones"

        sim = Simulator(unit)
        sim.add_clock(1e-8)
        sim.add_testbench(bench)
        sim.run()
        accepted, taken, got = outcome["run"]
        assert got == want, f"results differ from the model (gap {gap}, stall {stall})"
        if stall == 0:
            ends = completing_inputs(unit, beats)
            assert {t - accepted[e] for t, e in zip(taken, ends)} == {unit.latency}
        if gap == 0 and stall == 0:
            assert accepted == list(range(accepted[0], accepted[0] + len(beats)))
        all_results += got
    return all_results


class UnitBundle(StreamUnitBundle):
    """Several units of ``unit_spec(...)`` specs side by side (see :class:`StreamUnitBundle`)."""

    def __init__(self, specs):
        super().__init__(specs, build_unit)


class _Lane(StreamLane):
    """Driver, monitor and checker of one unit of a :class:`UnitBundle`."""

    def __init__(self, streams, name, unit, inputs):
        super().__init__(streams, name)
        self.unit, self.inputs = unit, inputs
        self.mismatches = self.results = 0
        self.measured = set()

    def begin(self, number, patterns):
        """Send this lane's share of the inputs for entry ``number`` of ``patterns``."""
        inputs = self.inputs
        self.chunk = inputs[number * len(inputs) // len(patterns):
                            (number + 1) * len(inputs) // len(patterns)]
        if isinstance(self.unit, fixed.FixedMac) and self.chunk:
            self.chunk[-1] = dict(self.chunk[-1], last=1)  # every pattern ends its group
        self.want = expected(self.unit, self.chunk) if self.chunk else []
        layout = self.unit.i.payload.shape()
        self.send([pack(layout, beat) for beat in self.chunk], len(self.want))

    def check(self, entry, log):
        """After a run under ``entry``: compare with the model, measure latency and
        throughput."""
        source_kind, sink_kind = pattern_kinds(entry)
        layout = self.unit.o.payload.shape()
        got = [unpack(layout, word) for word in self.got]
        accepted, taken = self.accepted, self.taken
        assert len(accepted) == len(self.words), \
            f"{self.name}: {len(accepted)} input handshakes recorded, {len(self.words)} sent"
        for index, (value, model) in enumerate(zip(got, self.want)):
            if value != model:
                self.mismatches += 1
                if self.mismatches <= 10:
                    log.error("%s pattern %s result %d: got %s, model %s (inputs %s)",
                              self.name, entry, index, value, model,
                              self.chunk[max(0, index - 3):index + 1])
        if sink_kind == "none":
            ends = completing_inputs(self.unit, self.chunk)
            self.measured |= {t - accepted[e] for t, e in zip(taken, ends)}
        if source_kind == sink_kind == "none" and accepted:
            first = accepted[0]
            assert accepted == list(range(first, first + len(accepted))), \
                f"{self.name}: not one beat per cycle"
        self.results += len(got)

    def summary(self):
        return {"vectors": len(self.inputs), "results": self.results,
                "mismatches": self.mismatches, "latency": self.unit.latency,
                "measured_latency": sorted(self.measured)}


@cocotb.test()
async def units_match_models(dut):
    params = tb_params()
    rng = random.Random(params["seed"])
    await start_clock_and_reset(dut)
    streams = Streams(dut)
    lanes = []
    for name, entry in params["units"].items():
        unit = build_unit(entry["spec"])
        inputs = random_inputs(unit, rng, entry.get("vectors", 0),
                               exhaustive=entry.get("exhaustive", False))
        lanes.append(_Lane(streams, name, unit, inputs))
    patterns = list(params["patterns"])
    start, runs = cycle_now(), {}
    for number, entry in enumerate(patterns):
        for lane in lanes:
            lane.begin(number, patterns)
        runs[entry] = await run_lanes(
            streams, lanes, entry, rng,
            model_cycles=max(len(lane.chunk) + lane.unit.latency for lane in lanes),
            output_beats=max(len(lane.want) for lane in lanes),
            settle=max(lane.unit.latency for lane in lanes) + 2)
        for lane in lanes:
            lane.check(entry, dut._log)
        dut._log.info("pattern %s: %d cycles", entry, runs[entry]["cycles"])
    summaries = {lane.name: lane.summary() for lane in lanes}
    mismatches = sum(summary["mismatches"] for summary in summaries.values())
    report({"bit_exact": mismatches == 0, "cycles": cycle_now() - start, "units": summaries,
            "patterns": runs,
            "vectors": sum(summary["vectors"] for summary in summaries.values())})
    assert mismatches == 0, f"{mismatches} results differ from the models"
    for lane in lanes:
        assert not lane.measured or lane.measured == {lane.unit.latency}, \
            f"{lane.name}: latency {sorted(lane.measured)}, not {lane.unit.latency}"

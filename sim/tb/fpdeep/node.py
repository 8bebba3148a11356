"""One FPDeep node (:class:`nnrtl.hw.fpdeep.node.FpdeepNode`, every layer segment at once)
training over several mini-batches: FP → (downstream) → EB and PG → weight update, every
output checked bit-exactly against the golden models composed under the node's staleness
rule, with every backpressure pattern on its streams. The segments of a node are
independent units: each gets its own case and phases, driven concurrently.

The golden model (:func:`expected`) replays the rule of :mod:`nnrtl.hw.fpdeep.node` from the
order of the streams alone: the bench sends the images' activations and errors in phases,
``act 0 … act lag−1``, then for each image ``n`` its errors and then ``act n+lag``, each
phase complete (every beat taken) before the next starts. So FP of image ``k`` uses the
weights after the updates of the mini-batches whose last error image is at most ``k −
lag`` (``k ≥ lag``; the first ``lag`` images the initial ones), and EB of image ``k`` the
weights after ``⌊k / B⌋`` updates; each update is the golden PG sum of its mini-batch
(:func:`~nnrtl.sim.golden.fpdeep.pg.pg_batch`) through
:func:`~nnrtl.sim.golden.fpdeep.update.update_segment`. With ``lag`` > 0 and ``B`` > 1 some
samples run FP on old and EB on new weights (spec §3.8's "slightly unaligned" samples).

Errors coming back (``err_in``) are random (the node's downstream is not simulated): on the
completing node the error of the SFU's output (lanes past ``n_out`` zero), else δ; so are
the downstream segment's partial errors (``err_part_in``, where
:attr:`~nnrtl.hw.fpdeep.node.FpdeepConfig.eb_partial` takes them). ``delta_out`` and
``err_part_out`` are checked like the other outputs.

Parameters of the cocotb bench (``tb_params()``): ``config`` (:func:`node_fields`: the
FpdeepConfig's ``segments`` as FpConfig fields, ``eb``, ``batch``, ``act_images``, ``lr``,
``eb_partial``, ``delta_out``), ``batches``, ``lag``,
``patterns``, ``seed``. Reported: ``bit_exact``; per pattern ``beats`` and ``mismatches``
per output stream, ``cycles``, ``budget`` and the node's counters read over AXI4-Lite
(``images``, ``updates``, ``cycles``, busy cycles of FP/EB/PG); ``steady_cycles``: the
node's steady-state cycles (:attr:`FpdeepConfig.cycles`) times the images. The bench's
``cycles`` (from the cycle before the first load beat is taken to the last beat it waits
for, by the handshake cycles the drivers record) under backpressure ``none``, exactly:
:func:`nnrtl.gen.fpdeep.node_cycles.bench_cycles`.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge, SimTimeoutError, with_timeout
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from nnrtl.hw.fpdeep.eb import error_layout, partial_error_layout
from nnrtl.hw.fpdeep.line_buffer import pixel_layout
from nnrtl.hw.fpdeep.node import COUNTERS, FpdeepConfig, act_layout, register_map
from nnrtl.hw.fpdeep.fp import partial_layout
from nnrtl.sim.golden.fpdeep.eb import eb_module, sfu_backward
from nnrtl.sim.golden.fpdeep.fp import fp_module
from nnrtl.sim.golden.fpdeep.pg import pg_batch
from nnrtl.sim.golden.fpdeep.update import update_segment
from nnrtl.sim.patterns import cycle_budget
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.fpdeep.eb import delta_beats
from nnrtl.sim.tb.fpdeep.eb import random_case as eb_case
from nnrtl.sim.tb.fpdeep.fp import config_of, describe_beats, pack
from nnrtl.sim.tb.fpdeep.fp import random_case as fp_case
from nnrtl.sim.tb.fpdeep.fp import stimulus as fp_stimulus
from nnrtl.sim.tb.registers import RegisterBus
from nnrtl.sim.tb.streams import Streams

__all__ = ["node_config", "node_fields", "segment_config", "random_case", "phases",
           "expected", "partial_error_beats", "fp_versions",
           "model_cycles"]


def node_config(fields):
    """The :class:`FpdeepConfig` of :func:`node_fields`' dict."""
    fields = dict(fields)
    segments = tuple(config_of(segment) for segment in fields.pop("segments"))
    partial = fields.pop("eb_partial", None)
    delta = fields.pop("delta_out", None)
    return FpdeepConfig(segments, tuple(fields.pop("eb")),
                        eb_partial=None if partial is None else tuple(map(tuple, partial)),
                        delta_out=None if delta is None else tuple(delta), **fields)


def node_fields(config):
    """The JSON-able fields of ``config`` (for ``tb_params``)."""
    import dataclasses
    return {"segments": [dataclasses.asdict(s) for s in config.segments],
            "eb": list(config.eb), "batch": config.batch, "act_images": config.act_images,
            "lr": config.lr,
            "eb_partial": None if config.eb_partial is None else
            [list(p) for p in config.eb_partial],
            "delta_out": None if config.delta_out is None else list(config.delta_out)}


def segment_config(config, n):
    """The one-segment :class:`FpdeepConfig` of ``config``'s segment ``n`` (its EB, partial
    errors and ``delta_out``; the node's training setup): what :func:`expected` checks."""
    return FpdeepConfig((config.segments[n],), (config.eb[n],), batch=config.batch,
                        act_images=config.act_images, lr=config.lr, node=config.node,
                        eb_partial=(config.partials[n],), delta_out=(config.deltas[n],))


def random_case(cfg, images, seed, *, partial_errors=False):
    """The FP bench's case (:func:`nnrtl.sim.tb.fpdeep.fp.random_case`: images, weights,
    bias, upstream partials) and ``err``: per image the error of the SFU's output
    ``(pool_out, pool_out, groups, P)`` (completing node, lanes past ``n_out`` zero) or δ
    ``(w_out, w_out, n_out)``, in the word format; with ``partial_errors`` the downstream
    segment's partial errors ``err_partial`` (images, w_in, w_in, n_in), as the EB bench
    makes them (:func:`nnrtl.sim.tb.fpdeep.eb.random_case`)."""
    case = fp_case(cfg, images, seed)
    rng = np.random.default_rng(seed + 1000)
    side = cfg.pool_out if cfg.completes else cfg.w_out
    if cfg.precision == "fp32":
        from nnrtl.hw.arith.float_format import FP32
        from nnrtl.sim.golden.float import to_bits
        err = to_bits(FP32, rng.standard_normal((images, side, side, cfg.n_out))
                      .astype(np.float32)).astype(np.int64)
    else:
        one = 1 << cfg.frac_bits
        err = rng.integers(-one, one + 1, (images, side, side, cfg.n_out))
    case["err"] = err
    if partial_errors:
        case["err_partial"] = eb_case(cfg, images, seed + 2000, partial_in=True)["partial"]
    return case


def _padded(cfg, err):
    full = np.zeros(err.shape[:2] + (cfg.groups * cfg.p,), np.int64)
    full[..., :cfg.n_out] = err
    return full.reshape(err.shape[:2] + (cfg.groups, cfg.p))


def fp_versions(images, batch, lag):
    """Per image, the updates done before its FP (module docstring)."""
    return [0 if k < lag else (k - lag + 1) // batch for k in range(images)]


def phases(cfg, case, lag):
    """``[(port, payloads)]`` in the order the bench sends them (module docstring)."""
    if lag < 1:
        raise ValueError(f"lag must be at least 1 (an image's errors follow its "
                         f"activations), not {lag}")
    pixel = pixel_layout(cfg.word_bits, cfg.n_in)
    acts = [[pack(pixel, list(a[y, x])) for y in range(cfg.w_in) for x in range(cfg.w_in)]
            for a in case["act"]]
    beat = pixel_layout(cfg.word_bits, cfg.p)
    if cfg.completes:
        errs = [[pack(beat, list(b)) for b in _padded(cfg, e).reshape(-1, cfg.p)]
                for e in case["err"]]
    else:
        errs = [delta_beats(cfg, e) for e in case["err"]]
    images = len(acts)
    order = [("act_in", acts[k]) for k in range(min(lag, images))]
    for n in range(images):
        order.append(("err_in", errs[n]))
        if n + lag < images:
            order.append(("act_in", acts[n + lag]))
    return order


def expected(config, case, lag):
    """``{port: payloads}`` the node must send: ``act_out`` or ``part_out``, ``err_out``
    (with EB; ``err_part_out`` where :attr:`FpdeepConfig.eb_partial` sends partial errors,
    EB adding ``case["err_partial"]``, per image ``(w_in, w_in, n_in)``, where it takes
    them), ``delta_out`` where :attr:`FpdeepConfig.deltas` sends δ; and the weights after
    every update (``(weights, bias)`` list)."""
    cfg, batch = config.segments[0], config.batch
    takes, sends = config.partials[0]
    images = len(case["act"])
    versions = [(case["weights"], case["bias"])]
    deltas, out, errors = [], [], []
    fp_v = fp_versions(images, batch, lag)
    results = []
    for k in range(images):
        # the weights FP uses exist: every update it needs came from earlier images' δ
        while len(versions) <= fp_v[k]:
            _update(config, case, deltas, versions)
        w, b = versions[fp_v[k]]
        partial = case["partial_in"][k] if cfg.partial_in else None
        results.append(fp_module(cfg, case["act"][k], w, b, partial))
        if cfg.completes:
            side = (cfg.pool_out, cfg.pool_out, cfg.groups, cfg.p)
            r = results[k]
            delta = sfu_backward(cfg, _padded(cfg, case["err"][k]), r.relu.reshape(side),
                                 r.argmax.reshape(side))
            delta = delta.reshape(cfg.w_out, cfg.w_out, -1)[..., :cfg.n_out]
        else:
            delta = case["err"][k]
        deltas.append(delta)
    while len(versions) <= images // batch:
        _update(config, case, deltas, versions)
    for k, r in enumerate(results):
        if cfg.completes:
            flat = r.data.reshape(-1, cfg.p)
            out += [pack(act_layout(cfg), {"data": list(d), "last": int(n == len(flat) - 1)})
                    for n, d in enumerate(flat)]
        else:
            flat = r.partials.reshape(-1, cfg.p)
            out += [pack(partial_layout(cfg), {"data": list(d), "last": int(n == len(flat) - 1)})
                    for n, d in enumerate(flat)]
        if config.eb[0]:
            partial = case["err_partial"][k] if takes else None
            err = eb_module(cfg, deltas[k], versions[k // batch][0], partial,
                            rounded=not sends).reshape(-1, cfg.n_in)
            layout = partial_error_layout(cfg) if sends else error_layout(cfg)
            errors += [pack(layout, {"data": list(e), "last": int(n == len(err) - 1)})
                       for n, e in enumerate(err)]
    found = {("act_out" if cfg.completes else "part_out"): out}
    if config.deltas[0]:
        found["delta_out"] = sum((delta_beats(cfg, d) for d in deltas), [])
    if config.eb[0]:
        found["err_part_out" if sends else "err_out"] = errors
    return found, versions


def _update(config, case, deltas, versions):
    cfg, batch = config.segments[0], config.batch
    start = (len(versions) - 1) * batch
    dw, db = pg_batch(cfg, case["act"][start:start + batch], deltas[start:start + batch])
    w, b = versions[-1]
    versions.append(update_segment(cfg, w, b, dw, db, config.lr))


def model_cycles(config, images):
    """Cycles without pauses, at most: per image the slower of the input pixels and the
    steady-state cycles (:attr:`FpdeepConfig.cycles`) twice (the phases do not overlap), the
    fill and, per mini-batch, the drain and update (``6`` cycles a row, twice
    :func:`~nnrtl.hw.fpdeep.update.row_cycles`)."""
    cfg = config.segments[0]
    rows = (cfg.banks + 1) * cfg.rows
    return (images * (max(cfg.w_in ** 2, config.cycles) * 2 + 4 * cfg.k * cfg.w_in)
            + images // config.batch * 6 * rows + 400)


def partial_error_beats(cfg, maps):
    """The ``err_part_in`` payloads of per-image partial errors ``(w_in, w_in, n_in)``."""
    layout = partial_error_layout(cfg)
    beats = []
    for image in maps:
        pixels = np.asarray(image).reshape(-1, cfg.n_in)
        beats += [pack(layout, {"data": list(e), "last": int(n == len(pixels) - 1)})
                  for n, e in enumerate(pixels)]
    return beats


class _Segment:
    """One segment's streams in the bench (its drivers from ``streams``): the load first,
    then its upstream partials and partial errors (free-running) and its input phases in
    order, each queued once the previous one's last word was taken; a sink per output."""

    def __init__(self, streams, config, n, images, seed, lag):
        self.config = single = segment_config(config, n)
        cfg = self.cfg = config.segments[n]
        self.n = n
        takes = single.eb[0] and single.partials[0][0]
        case = random_case(cfg, images, seed, partial_errors=takes)
        self.want, _ = expected(single, case, lag)
        load = fp_stimulus(cfg, case)
        port = lambda name: f"s{n}_{name}"
        self.load = streams.source(port("load"), record=True)
        self.load_words = load["load"]
        self.loads = len(self.load_words)
        free = []
        if cfg.partial_in:
            free.append(("part_in", load["part_in"]))
        if takes:
            free.append(("err_part_in", partial_error_beats(cfg, case["err_partial"])))
        self.free = [(streams.source(port(name), record=True), words) for name, words in free]
        order = phases(cfg, case, lag)
        self.ordered = [(streams.source(port(name), record=True), words)
                        for name, words in order]
        self.sinks = {name: streams.sink(port(name)) for name in self.want}
        self.paced = [port(name) for name in dict.fromkeys(
            [name for name, _ in free + order] + list(self.want))]
        self.phases_done = 0
        self.first = {unit: len(unit.cycles) for unit in self.inputs}
        self.first.update({sink: len(sink.words) for sink in self.sinks.values()})
        self.got = {}

    @property
    def inputs(self):
        return [self.load] + [source for source, _ in self.free + self.ordered]

    async def drive(self):
        """Send every input stream in the bench's order; return once all were taken."""
        self.load.send_words(self.load_words)
        await self.load.wait()
        for source, words in self.free:
            source.send_words(words)
        for source, words in self.ordered:
            source.send_words(words)
            await source.wait()
            self.phases_done += 1
        for source, _ in self.free:
            await source.wait()

    async def collect(self):
        """Receive every expected output word into :attr:`got`."""
        for name, sink in self.sinks.items():
            self.got[name] = await sink.receive(len(self.want[name]))

    def start(self):
        """The cycle before the segment's first load word was taken."""
        return self.load.cycles[self.first[self.load]] - 1

    def end(self):
        """The cycle the last word the bench waits for was taken (input or output)."""
        last = [unit.cycles[-1] for unit in self.inputs + list(self.sinks.values())
                if len(unit.cycles) > self.first[unit]]
        return max(last)

    def received(self, name):
        sink = self.sinks[name]
        return sink.words[self.first[sink]:]

    def progress(self):
        n = self.n
        return (", ".join(f"s{n} {p} {len(self.received(p))} of {len(self.want[p])} beats"
                          for p in self.sinks)
                + f", s{n} {self.phases_done} of {len(self.ordered)} input phases")

    def mismatches(self):
        return {f"s{self.n}_{p}": describe_beats(layout, p, self.received(p), self.want[p])
                for p, layout in _layouts(self.cfg).items() if p in self.want}


@cocotb.test()
async def node_trains_bit_exact(dut):
    """Per pattern of ``params["patterns"]``: reset the node, run every segment's streams
    (:class:`_Segment`) at once, then check the outputs and the counters (module
    docstring).

    Raises
    ------
    AssertionError
        A budget overrun (naming the progress of every segment), a beat beyond the
        expected ones, a broken handshake rule or (after the report) a mismatch.
    """
    params = tb_params()
    config = node_config(params["config"])
    regmap = register_map(config)
    images = config.batch * params["batches"]
    rng = random.Random(params["seed"])
    await start_clock_and_reset(dut)
    bus = RegisterBus(AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk,
                                    dut.rst), regmap)
    streams = Streams(dut)
    results, exact = {}, True
    for number, kind in enumerate(params["patterns"]):
        dut.rst.value = 1                       # a fresh node per pattern
        await ClockCycles(dut.clk, 2)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        assert await bus.read("lr") == config.lr, "lr register: not its reset value"
        segments = [_Segment(streams, config, n, images, params["seed"] + number + 97 * n,
                             params["lag"]) for n in range(len(config.segments))]
        streams.pause("none", rng, ports=[s.load.name for s in segments])
        streams.pause(kind, rng, ports=[port for s in segments for port in s.paced])
        budget = cycle_budget(
            max(model_cycles(s.config, images) for s in segments)
            + sum(s.loads for s in segments),
            output_beats=max(sum(map(len, s.want.values())) for s in segments),
            patterns=[kind])

        async def traffic():
            drives = [cocotb.start_soon(s.drive()) for s in segments]
            for segment in segments:
                await segment.collect()
            for task in drives:
                await task

        try:
            await with_timeout(traffic(), budget * CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            raise AssertionError(f"pattern {kind}: in the budget of {budget} cycles: "
                                 + "; ".join(s.progress() for s in segments)) from None
        cycles = max(s.end() for s in segments) - min(s.start() for s in segments)
        counters = {}
        for _ in range(200):                    # the last update follows the last outputs
            counters = await bus.read_many(list(COUNTERS))
            if counters["updates"] == params["batches"]:
                break
        for segment in segments:
            for name, sink in segment.sinks.items():
                extra = sink.extra()
                assert not extra, (f"pattern {kind}: {len(extra)} s{segment.n}_{name} beats "
                                   "beyond the expected")
        streams.check()
        wrong = {}
        for segment in segments:
            wrong.update(segment.mismatches())
        if counters["updates"] != params["batches"] or counters["images"] != images:
            wrong["counters"] = [f"updates {counters['updates']} (want {params['batches']}), "
                                 f"images {counters['images']} (want {images})"]
        exact = exact and not any(wrong.values())
        beats = {f"s{n}_{p}" if n else p: len(s.received(p))
                 for n, s in enumerate(segments) for p in s.sinks}
        results[kind] = {"beats": beats, "cycles": cycles, "budget": budget,
                         "mismatches": wrong, "counters": counters}
        dut._log.info("pattern %s: %d cycles, counters %s", kind, cycles, counters)
    report({"bit_exact": exact, "patterns": results, "images": images,
            "steady_cycles": config.cycles * images})
    assert exact, results


def _layouts(cfg):
    return {"act_out": act_layout(cfg), "part_out": partial_layout(cfg),
            "err_out": error_layout(cfg), "err_part_out": partial_error_layout(cfg),
            "delta_out": pixel_layout(cfg.word_bits, cfg.p)}

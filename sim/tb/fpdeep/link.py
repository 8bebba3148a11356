"""Bench of the FPDeep neighbour link (:mod:`nnrtl.hw.fpdeep.link`) in the Amaranth simulator:
two link modules back to back (node ``m``'s ``"down"`` side and node ``m + 1``'s ``"up"``
side, :class:`LinkPair`), each physical direction through a channel that a backpressure
pattern pauses (``tvalid`` and ``tready`` both held low, as a SerDes that does not take a
word), random typed traffic on all six paths, every typed producer (gaps) and consumer
(stalls) paused by the same pattern (each its own generator). Checked: every path delivers exactly the beats its partner
was given, in order (the traffic itself is the expectation), and neither module raises
``fault``.

:func:`run` returns a report (``bit_exact``, ``mismatches``: the first few, naming the path
and beat; ``cycles``; ``words``: link words per direction; ``timed_out``: what was still
awaited when the cycle budget ran out), never raises on a mismatch.
:func:`preloaded_flits` runs the golden model's case (all traffic waiting before
``link_up``, one direction, credits to spare) and returns the words on the wire with their
cycles, for the word-for-word check against :func:`nnrtl.sim.golden.fpdeep.link.flits` and
the efficiency / cycle measurement.
"""

import random

import cocotb
from amaranth.hdl import Elaboratable, Module, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator
from cocotb.triggers import ClockCycles, RisingEdge, SimTimeoutError, with_timeout

from nnrtl.hw.fpdeep.link import LinkModule, beat_layout
from nnrtl.hw.fpdeep.link_config import LinkConfig
from nnrtl.sim.patterns import PATTERNS, cycle_budget, pause_pattern
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, start_clock_and_reset, tb_params
from nnrtl.sim.tb.common import report as hand_back
from nnrtl.sim.tb.streams import Streams, cycle_now

__all__ = ["LinkPair", "LinkPairTop", "random_traffic", "run", "preloaded_flits",
           "efficiency", "PATTERNS"]


class LinkPair(Elaboratable):
    """Link modules ``a`` (side ``"down"``) and ``b`` (its partner) joined by two pausable
    channels: ``pause_ab`` on ``a → b``, ``pause_ba`` on ``b → a``."""

    def __init__(self, cfg):
        down = cfg if cfg.side == "down" else cfg.partner()
        self.a = LinkModule(down)
        self.b = LinkModule(down.partner())
        self.pause_ab = Signal()
        self.pause_ba = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.a, m.submodules.b = self.a, self.b
        for src, dst, pause in ((self.a.link_out, self.b.link_in, self.pause_ab),
                                (self.b.link_out, self.a.link_in, self.pause_ba)):
            m.d.comb += [dst.tdata.eq(src.tdata), dst.tlast.eq(src.tlast),
                         dst.tkeep.eq(src.tkeep), dst.tvalid.eq(src.tvalid & ~pause),
                         src.tready.eq(dst.tready & ~pause)]
        return m


def random_traffic(cfg, beats, rng):
    """``{path: [beat, ...]}`` for every path of ``cfg`` (both directions): ``beats`` random
    beats each (an int, or ``{path: count}``)."""
    paths = cfg.tx_paths + cfg.rx_paths
    counts = beats if isinstance(beats, dict) else dict.fromkeys(paths, beats)
    return {p: [rng.getrandbits(cfg.beat_bits(p)) for _ in range(counts.get(p, 0))]
            for p in paths}


def _model_cycles(cfg, traffic):
    """Wire cycles of the heaviest direction and slot with full packets (no pauses)."""
    down = cfg if cfg.side == "down" else cfg.partner()
    return max(sum(c.transfer_words(p, len(traffic[p])) for p in c.tx_paths
                   if c.slot(p) == slot) for c in (down, down.partner())
               for slot in range(c.slots))


def run(cfg, traffic, pattern, *, seed=0, limit=4, stuck=()):
    """Carry ``traffic`` (:func:`random_traffic`) through a :class:`LinkPair` with
    ``pattern`` on both channels and on every consumer; the consumers of the paths in
    ``stuck`` never take a beat. Returns the report (see the module docstring); with
    ``stuck`` the run ends when every other path is delivered (``timed_out`` then names
    the stuck paths' counts)."""
    pair = LinkPair(cfg)
    ends = [(pair.a, path) for path in pair.a.config.tx_paths] + \
           [(pair.b, path) for path in pair.b.config.tx_paths]
    budget = cycle_budget(_model_cycles(cfg, traffic),
                          output_beats=sum(len(v) for v in traffic.values()),
                          patterns=(pattern,))
    rng = random.Random(seed)
    channels = [pause_pattern(pattern, random.Random(rng.random())) for _ in range(2)]
    consumers = {path: pause_pattern(pattern, random.Random(rng.random()))
                 for _, path in ends}
    producers = {path: pause_pattern(pattern, random.Random(rng.random()))
                 for _, path in ends}
    got = {path: [] for _, path in ends}
    report = {"pattern": pattern, "bit_exact": False, "mismatches": [], "cycles": 0,
              "words": {"down": 0, "up": 0}, "timed_out": None, "fault": False}
    sent = dict.fromkeys(got, 0)

    async def bench(ctx):
        tx = {path: getattr(mod, f"tx_{path}") for mod, path in ends}
        rx = {path: getattr(pair.b if mod is pair.a else pair.a, f"rx_{path}")
              for mod, path in ends}
        for mod in (pair.a, pair.b):
            ctx.set(mod.link_up, 1)
        watched = []
        for path in got:
            watched += [tx[path].valid, tx[path].ready, rx[path].valid, rx[path].ready,
                        Value.cast(rx[path].payload)]
        watched += [pair.a.link_out.tvalid, pair.a.link_out.tready,
                    pair.b.link_out.tvalid, pair.b.link_out.tready,
                    pair.a.fault, pair.b.fault]
        for cycle in range(budget):
            ctx.set(pair.pause_ab, next(channels[0]))
            ctx.set(pair.pause_ba, next(channels[1]))
            for path in got:
                more = sent[path] < len(traffic[path]) and not next(producers[path])
                ctx.set(tx[path].valid, int(more))
                if more:
                    ctx.set(Value.cast(tx[path].payload), traffic[path][sent[path]])
                ctx.set(rx[path].ready, int(not next(consumers[path]) and path not in stuck))
            _clk, _rst, *values = await ctx.tick().sample(*watched)
            for n, path in enumerate(got):
                tv, tr, rv, rr, payload = values[5 * n:5 * n + 5]
                sent[path] += bool(tv and tr)
                if rv and rr:
                    got[path].append(payload)
            av, ar, bv, br, af, bf = values[5 * len(got):]
            report["words"]["down"] += bool(av and ar)
            report["words"]["up"] += bool(bv and br)
            report["fault"] = report["fault"] or bool(af or bf)
            if all(len(got[p]) >= len(traffic[p]) for p in got if p not in stuck):
                report["cycles"] = cycle + 1
                break
        else:
            report["cycles"] = budget
        if any(len(got[p]) < len(traffic[p]) for p in got):
            report["timed_out"] = {p: f"{len(got[p])} of {len(traffic[p])} beats received, "
                                      f"{sent[p]} sent"
                                   for p in got if len(got[p]) < len(traffic[p])}

    sim = Simulator(pair)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for path in got:
        want = traffic[path][:len(got[path])] if path in stuck else traffic[path]
        for k, (g, w) in enumerate(zip(got[path], want)):
            if g != w and len(report["mismatches"]) < limit:
                report["mismatches"].append(f"{path}: beat {k} is {g:#x}, expected {w:#x}")
        if len(got[path]) != len(want) and len(report["mismatches"]) < limit:
            report["mismatches"].append(f"{path}: {len(got[path])} beats, expected {len(want)}")
    report["bit_exact"] = not report["mismatches"] and not report["fault"] \
        and report["timed_out"] is None
    return report


def preloaded_flits(cfg, traffic, *, timeout=100000):
    """The words ``cfg``'s module sends for ``traffic`` (``{path: beats}`` of its
    ``tx_paths``) loaded before ``link_up`` rises, no pause, the partner consuming at full
    rate. Returns ``(words, cycles)``: ``[(tdata, tlast), ...]`` and the cycle (counted
    from ``link_up``) of each."""
    pair = LinkPair(cfg)
    mod, other = (pair.a, pair.b) if cfg.side == "down" else (pair.b, pair.a)
    out = mod.link_out
    words, cycles = [], []
    total = max(sum(cfg.transfer_words(p, len(traffic.get(p, ()))) for p in cfg.tx_paths
                    if cfg.slot(p) == slot) for slot in range(cfg.slots))

    async def bench(ctx):
        for path in cfg.rx_paths:
            ctx.set(getattr(mod, f"rx_{path}").ready, 1)
        for path in cfg.tx_paths:
            ctx.set(getattr(other, f"rx_{path}").ready, 1)
        for path, beats in traffic.items():
            port = getattr(mod, f"tx_{path}")
            for beat in beats:
                ctx.set(Value.cast(port.payload), beat)
                ctx.set(port.valid, 1)
                _clk, _rst, ready = await ctx.tick().sample(port.ready)
                assert ready, f"{path}: the transmit FIFO took no beat {len(beats)} deep"
            ctx.set(port.valid, 0)
        await ctx.tick().repeat(3)          # the last beat through the buffered FIFO
        ctx.set(mod.link_up, 1)
        ctx.set(other.link_up, 1)
        done = None
        for cycle in range(timeout):
            _clk, _rst, valid, ready, data, last = await ctx.tick().sample(
                out.tvalid, out.tready, out.tdata, out.tlast)
            if valid and ready:
                words.append((data, last))
                cycles.append(cycle + 1)
            if done is None and len(words) >= total:
                done = cycle
            if done is not None and cycle >= done + 2 * cfg.max_beats:   # any extra word
                return
        raise AssertionError(f"{len(words)} link words in {timeout} cycles, "
                             f"{total} expected")

    sim = Simulator(pair)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return words, cycles


def efficiency(cfg, beats, paths=None, *, seed=0):
    """Measure a saturated transfer: ``beats`` random beats on each of ``paths`` (default
    all of ``cfg.tx_paths``) preloaded (:func:`preloaded_flits`). Returns ``{"beats",
    "payload_words", "link_cycles", "words_per_cycle", "bit_efficiency"}``: link cycles
    from ``link_up`` to the last word, payload words (``beats · P`` per path) per link
    cycle, payload bits per link bit."""
    rng = random.Random(seed)
    paths = cfg.tx_paths if paths is None else tuple(paths)
    _, cycles = preloaded_flits(cfg, {p: [rng.getrandbits(cfg.beat_bits(p))
                                          for _ in range(beats)] for p in paths})
    words = beats * cfg.p * len(paths)
    bits = beats * sum(cfg.beat_bits(p) for p in paths)
    return {"beats": beats * len(paths), "payload_words": words, "link_cycles": cycles[-1],
            "words_per_cycle": words / cycles[-1],
            "bit_efficiency": bits / (cycles[-1] * cfg.link_bits)}


# -- Verilator (cocotb) ------------------------------------------------------------------

class LinkPairTop(wiring.Component):
    """:class:`LinkPair` as a component for Verilator: ``a_tx_<path>``/``b_rx_<path>``
    (forward paths), ``b_tx_<path>``/``a_rx_<path>`` (backward), ``pause_ab``,
    ``pause_ba``, ``link_up`` and ``fault`` (either module's)."""

    def __init__(self, cfg):
        self._pair = LinkPair(cfg)
        self._cfg = self._pair.a.config
        ports = {"pause_ab": In(1), "pause_ba": In(1), "link_up": In(1), "fault": Out(1)}
        for name, c in (("a", self._cfg), ("b", self._cfg.partner())):
            ports.update({f"{name}_tx_{p}": In(stream.Signature(beat_layout(c, p)))
                          for p in c.tx_paths})
            ports.update({f"{name}_rx_{p}": Out(stream.Signature(beat_layout(c, p)))
                          for p in c.rx_paths})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        pair = m.submodules.pair = self._pair
        m.d.comb += [pair.pause_ab.eq(self.pause_ab), pair.pause_ba.eq(self.pause_ba),
                     pair.a.link_up.eq(self.link_up), pair.b.link_up.eq(self.link_up),
                     self.fault.eq(pair.a.fault | pair.b.fault)]
        for name, mod in (("a", pair.a), ("b", pair.b)):
            for p in mod.config.tx_paths:
                wiring.connect(m, wiring.flipped(getattr(self, f"{name}_tx_{p}")),
                               getattr(mod, f"tx_{p}"))
            for p in mod.config.rx_paths:
                wiring.connect(m, getattr(mod, f"rx_{p}"),
                               wiring.flipped(getattr(self, f"{name}_rx_{p}")))
        return m


async def _pause_channels(dut, channels):
    """Drive ``pause_ab`` and ``pause_ba`` every cycle from the generators in
    ``channels`` (a list of two, replaced between runs)."""
    edge = RisingEdge(dut.clk)
    while True:
        dut.pause_ab.value, dut.pause_ba.value = next(channels[0]), next(channels[1])
        await edge


@cocotb.test()
async def link_pair_delivers(dut):
    """Per pattern of ``params["patterns"]``: ``params["beats"]`` random beats on each of the
    six paths of the ``params["cfg"]`` pair, the pattern on both channels, every source and
    every sink (:class:`~nnrtl.sim.tb.streams.Streams`); reported per pattern ``beats``,
    ``cycles`` (from the cycle the traffic is queued to the last beat delivered),
    ``budget``, ``mismatches``, ``fault``.

    Raises
    ------
    AssertionError
        A budget overrun (after the report, naming the beats each short path received),
        a beat beyond the expected ones or a broken handshake rule.
    """
    params = tb_params()
    cfg = LinkConfig(**params["cfg"])
    down = cfg if cfg.side == "down" else cfg.partner()
    rng = random.Random(params["seed"])
    await start_clock_and_reset(dut)
    dut.link_up.value = 1
    ends = [(f"a_tx_{p}", f"b_rx_{p}", p) for p in down.tx_paths] + \
           [(f"b_tx_{p}", f"a_rx_{p}", p) for p in down.rx_paths]
    streams = Streams(dut)
    sources = [streams.source(tx) for tx, _, _ in ends]
    sinks = [streams.sink(rx) for _, rx, _ in ends]
    channels = [pause_pattern("none", rng) for _ in range(2)]
    cocotb.start_soon(_pause_channels(dut, channels))
    results, exact = {}, True
    for kind in params["patterns"]:
        traffic = random_traffic(down, params["beats"], rng)
        streams.pause(kind, rng)
        channels[:] = [pause_pattern(kind, random.Random(rng.random())) for _ in range(2)]
        budget = cycle_budget(_model_cycles(down, traffic), output_beats=sum(
            map(len, traffic.values())), patterns=(kind,))
        first = [len(sink.words) for sink in sinks]
        start = cycle_now()

        async def deliver():
            for source, (_, _, p) in zip(sources, ends):
                source.send_words(traffic[p])
            for sink, (_, _, p) in zip(sinks, ends):
                await sink.receive(len(traffic[p]))
            for source in sources:
                await source.wait()

        try:
            await with_timeout(deliver(), budget * CLOCK_PERIOD_NS, "ns")
            timed_out = False
        except SimTimeoutError:
            timed_out = True
        got = [sink.words[n:] for sink, n in zip(sinks, first)]
        wrong = [f"{p}: beat {n} is {g:#x}, expected {w:#x}"
                 for (_, _, p), words in zip(ends, got)
                 for n, (g, w) in enumerate(zip(words, traffic[p])) if g != w][:4]
        short = [f"{p}: {len(words)} of {len(traffic[p])} beats in the budget of {budget} "
                 "cycles" for (_, _, p), words in zip(ends, got) if len(words) < len(traffic[p])]
        fault = bool(dut.fault.value)
        exact = exact and not wrong and not short and not fault
        last = max((sink.cycles[-1] for sink, n in zip(sinks, first) if len(sink.words) > n),
                   default=start)
        results[kind] = {"beats": sum(map(len, got)),
                         "cycles": (cycle_now() if timed_out else last) - start,
                         "budget": budget, "mismatches": wrong + short, "fault": fault}
        if timed_out:
            hand_back({"bit_exact": False, "patterns": results})
            raise AssertionError(f"pattern {kind}: " + "; ".join(short))
        await ClockCycles(dut.clk, 20)
        for sink, (_, _, p) in zip(sinks, ends):
            extra = sink.extra()
            assert not extra, f"pattern {kind}: {len(extra)} {p} beats beyond the expected"
        streams.check()
    hand_back({"bit_exact": exact, "patterns": results})

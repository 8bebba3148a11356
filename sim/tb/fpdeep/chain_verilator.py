"""The FPDeep training chain under Verilator: the same run as the
Amaranth bench :mod:`nnrtl.sim.tb.fpdeep.chain_train` (its stimulus, golden activations,
cycle budget and host order), on the chain's Verilog built by :func:`nnrtl.sim.runner.simulate`.

The design (:class:`ChainVerilogTop`) is :class:`~nnrtl.sim.tb.fpdeep.chain_train.ChainTrainTop`
with its host side as ports: ``host_act``, ``host_err`` (sinks) and ``host_out`` (source)
of link beats, node ``n``'s LPRAM ``load{n}`` stream, boundary ``b``'s channel pauses
``pause{b}_fwd`` / ``pause{b}_bwd`` (forward: node ``b`` → ``b + 1``), and what the bench
counts: ``fwd{b}`` / ``bwd{b}`` (a link word taken on that channel this cycle),
``fault`` (any link module's), and the streams inside the chain the Amaranth bench checks
too (:func:`~nnrtl.sim.tb.fpdeep.chain_train.monitored_ports`: every stage's ``act_out``
or, an ICP stage that does not complete, ``part_out``; an ICP layer's completing stage's
``delta_out``; and on a stage with EB ``err_out``, EB's error relayed upstream, or
``err_part_out``, its partial errors): ``mon{n}_{port}`` (a beat taken this cycle) and
``mon{n}_{port}_data`` (its payload). A run ends, as the
Amaranth bench's, when the host has every beat and every inner stream every beat.

The host (:class:`ChainHost`) is the Amaranth bench's, cycle for cycle: the same pause
generators drawn in the same order from the same seed, the same order of images and
errors (``lag`` images in flight), the LPRAM loads first; its inputs are set after a clock
edge and its outputs sampled when they have settled before the next (cocotb's
``ReadOnly``), which is what the Amaranth testbench's ``tick().sample()`` sees. So the
report's ``cycles`` equals the Amaranth simulator's for the same case.

Reported, never raised (as the Amaranth bench): ``bit_exact``, ``mismatches`` (the first
few, naming node, image and beat), ``cycles``, ``budget``, ``link_words`` per boundary and
direction, ``fault``, ``timed_out`` (what was awaited when the budget ran out),
``pattern``, ``received`` (per image the beats the host got), and the runner's
``build_seconds``, ``build_cached``, ``run_seconds``.

Cost: the chain's Verilog is built once per configuration and batch size (the batch is
part of the RTL); the shared units (:mod:`nnrtl.hw.hierarchy`: ``hw/arith`` units, MAC
tiles, LGB groups, LPRAM memories) keep its module count and build time small.

Latency and throughput are the chain's (:mod:`nnrtl.hw.fpdeep.chain_link`); the bench adds
none: one beat per stream per cycle when nothing pauses.
"""

import functools
import json
import os
import random
import tempfile

import cocotb
from amaranth.hdl import Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from cocotb.triggers import ReadOnly, RisingEdge

from nnrtl.hw.fpdeep.chain_link import ChainConfig, beat_signature
from nnrtl.sim.patterns import pause_pattern
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.fpdeep.chain_train import (SIMULATORS, ChainTrainTop, _budget, _monitored,
                                             chain_case, compose, expected_out,
                                             host_streams, inner_mismatches,
                                             monitored_ports)
from nnrtl.sim.tb.fpdeep.fp import stimulus as fp_stimulus

__all__ = ["ChainVerilogTop", "ChainHost", "chain_runner", "check", "run",
           "run_cases"]


class ChainVerilogTop(wiring.Component):
    """:class:`~nnrtl.sim.tb.fpdeep.chain_train.ChainTrainTop` of ``config`` as a
    component (ports in the module docstring); ``link_options`` go to the chain's
    :meth:`~nnrtl.hw.fpdeep.link_config.LinkConfig.from_fp`.

    Latency and throughput: the chain's; the wrapper is wires only.

    Notes
    -----
    "Each node its own Verilator model" (decision): the chain is one Verilog design in which
    every node top, every node's adapter and every link module is a module of its own
    (Amaranth writes one Verilog module per elaborated component; node ``n`` is
    ``<top>.chain.node{n}``, a link pair ``<top>.chain.link{b}``), joined only by their
    streams: a node sees its neighbours through its adapter and the link modules' AXI4-Stream
    wires, nothing else. Verilator compiles it into one simulator binary, so the streams
    between the nodes are clocked exactly as on one board's clock: no cross-process
    handshake to model, and the cycle counts of the two simulators can be compared (they
    are, :func:`run_cases` callers assert ``cycles`` equal to the Amaranth bench's). Running
    ``K`` separate Verilator processes joined by their streams would need a cycle-lockstep
    protocol between them (cocotb drives one top per process) and would measure the protocol,
    not the chain.
    """

    def __init__(self, config, **link_options):
        if not isinstance(config, ChainConfig):
            raise TypeError(f"config must be a ChainConfig, not {config!r}")
        self._chain = ChainTrainTop(config, **link_options)
        beat = beat_signature(config)
        ports = {"host_act": In(beat), "host_err": In(beat), "host_out": Out(beat),
                 "fault": Out(1)}
        for n, (node, k) in enumerate(config.stages):
            ports[f"load{n}"] = self._chain.nodes[node].signature.members[f"s{k}_load"]
        for b in range(len(self._chain.links)):
            ports |= {f"pause{b}_fwd": In(1), f"pause{b}_bwd": In(1),
                      f"fwd{b}": Out(1), f"bwd{b}": Out(1)}
        for n, names in enumerate(monitored_ports(config)):
            for name in names:
                width = Value.cast(self._chain.port(n, name).payload).shape().width
                ports |= {f"mon{n}_{name}": Out(1), f"mon{n}_{name}_data": Out(width)}
        super().__init__(ports)

    @property
    def boundaries(self):
        return len(self._chain.links)

    def elaborate(self, platform):
        m = Module()
        chain = m.submodules.chain = self._chain
        wiring.connect(m, wiring.flipped(self.host_act), chain.host_act)
        wiring.connect(m, wiring.flipped(self.host_err), chain.host_err)
        wiring.connect(m, chain.host_out, wiring.flipped(self.host_out))
        for n in range(len(self._chain.config.stages)):
            wiring.connect(m, wiring.flipped(getattr(self, f"load{n}")), chain.port(n, "load"))
        faults = 0
        for b, pair in enumerate(chain.links):
            fwd, bwd = pair.a.link_out, pair.b.link_out
            m.d.comb += [pair.pause_ab.eq(getattr(self, f"pause{b}_fwd")),
                         pair.pause_ba.eq(getattr(self, f"pause{b}_bwd")),
                         getattr(self, f"fwd{b}").eq(fwd.tvalid & fwd.tready),
                         getattr(self, f"bwd{b}").eq(bwd.tvalid & bwd.tready)]
            faults = faults | pair.a.fault | pair.b.fault
        m.d.comb += self.fault.eq(faults)
        for n, names in enumerate(monitored_ports(self._chain.config)):
            for name in names:
                port = chain.port(n, name)
                m.d.comb += [getattr(self, f"mon{n}_{name}").eq(port.valid & port.ready),
                             getattr(self, f"mon{n}_{name}_data").eq(Value.cast(port.payload))]
        return m


class ChainHost:
    """The host of a chain run, one cycle at a time, for any simulator: the Amaranth
    bench's order and pauses (module docstring of :mod:`~nnrtl.sim.tb.fpdeep.chain_train`).

    Parameters
    ----------
    streams : dict
        ``acts`` (per image its beats), ``errs`` (per trained image its error beats),
        ``loads`` (per node its LPRAM words), ``lag``, ``per_image`` (beats the host
        receives per image), ``boundaries``, ``pattern``, ``seed``.

    Each cycle :meth:`drive` gives the inputs ``{port: value}`` (port names of
    :class:`ChainVerilogTop`), then :meth:`sample` takes the values of :attr:`outputs`
    sampled before the clock edge.
    """

    def __init__(self, streams):
        self.acts, self.errs = streams["acts"], streams["errs"]
        self.loads = [list(load) for load in streams["loads"]]
        self.lag, self.per_image = streams["lag"], streams["per_image"]
        self.images, self.trained = len(self.acts), len(self.errs)
        rng = random.Random(streams["seed"])
        gen = lambda: pause_pattern(streams["pattern"], random.Random(rng.random()))  # noqa: E731
        self.channels = [(gen(), gen()) for _ in range(streams["boundaries"])]
        self.act_gaps, self.err_gaps, self.sink = gen(), gen(), gen()
        self.sent_images = self.sent_errors = self.act_beat = self.err_beat = 0
        self.got = []
        self.link_words = [{"forward": 0, "backward": 0} for _ in self.channels]
        self.fault = False
        # inner stream: (its name in messages, beats expected)
        self.inner = streams.get("inner", {})
        self.seen = {name: [] for name in self.inner}
        self._offers = (False, False, False)
        self.outputs = (["host_out__valid", "host_out__payload", "host_act__ready",
                         "host_err__ready", "fault"]
                        + [f"load{n}__ready" for n in range(len(self.loads))]
                        + [f"{d}{b}" for b in range(len(self.channels)) for d in ("fwd", "bwd")]
                        + [f"{name}{part}" for name in self.inner for part in ("", "_data")])

    @property
    def done(self):
        return (len(self.got) >= self.images * self.per_image
                and self.sent_errors == self.trained
                and all(len(self.seen[name]) >= need for name, (_, need) in self.inner.items()))

    def drive(self):
        values = {}
        for b, (fwd, bwd) in enumerate(self.channels):
            values[f"pause{b}_fwd"], values[f"pause{b}_bwd"] = next(fwd), next(bwd)
        loading = any(self.loads)
        for n, left in enumerate(self.loads):
            values[f"load{n}__valid"] = int(bool(left))
            if left:
                values[f"load{n}__payload"] = left[0]
        back = len(self.got) // self.per_image
        act_ok = (not loading and self.sent_images < self.images
                  and self.sent_images < self.lag + self.sent_errors)
        act = act_ok and not next(self.act_gaps)
        values["host_act__valid"] = int(act)
        if act:
            values["host_act__payload"] = self.acts[self.sent_images][self.act_beat]
        due = min(self.images, self.sent_errors + self.lag)
        err_ok = self.sent_errors < self.trained and self.sent_images >= due and back >= due
        err = err_ok and not next(self.err_gaps)
        values["host_err__valid"] = int(err)
        if err:
            values["host_err__payload"] = self.errs[self.sent_errors][self.err_beat]
        take = not next(self.sink)
        values["host_out__ready"] = int(take)
        self._offers = (act, err, take)
        return values

    def sample(self, values):
        out_valid, out_payload, act_ready, err_ready, fault = values[:5]
        act, err, take = self._offers
        if out_valid and take:
            self.got.append(out_payload)
        if act and act_ready:
            self.act_beat += 1
            if self.act_beat == len(self.acts[self.sent_images]):
                self.sent_images, self.act_beat = self.sent_images + 1, 0
        if err and err_ready:
            self.err_beat += 1
            if self.err_beat == len(self.errs[self.sent_errors]):
                self.sent_errors, self.err_beat = self.sent_errors + 1, 0
        readies = values[5:5 + len(self.loads)]
        for left, ready in zip(self.loads, readies):
            if left and ready:
                left.pop(0)
        words = values[5 + len(self.loads):]
        for b, counts in enumerate(self.link_words):
            counts["forward"] += bool(words[2 * b])
            counts["backward"] += bool(words[2 * b + 1])
        watched = words[2 * len(self.link_words):]
        for k, name in enumerate(self.inner):
            if watched[2 * k]:
                self.seen[name].append(watched[2 * k + 1])
        self.fault = self.fault or bool(fault)

    def waiting(self, budget):
        """What was awaited when ``budget`` cycles ran out."""
        inside = "".join(f", {shown} {len(self.seen[name])} of {need} beats"
                         for name, (shown, need) in self.inner.items()
                         if len(self.seen[name]) < need)
        return (f"{len(self.got)} of {self.images * self.per_image} activation beats, "
                f"{self.sent_images} of {self.images} images and {self.sent_errors} of "
                f"{self.trained} error blocks sent{inside} in {budget} cycles")


@cocotb.test()
async def chain_trains(dut):
    """Runs the :class:`ChainHost` of ``params["streams"]`` (a JSON file) for at most
    ``params["budget"]`` cycles; reports ``cycles``, ``link_words``, ``fault``,
    ``timed_out`` and ``got`` (every beat the host received)."""
    params = tb_params()
    with open(params["streams"]) as f:
        host = ChainHost(json.load(f))
    budget = params["budget"]
    await start_clock_and_reset(dut)
    outputs = [getattr(dut, name) for name in host.outputs]
    handles = {}
    edge, settled = RisingEdge(dut.clk), ReadOnly()
    cycles, timed_out = budget, None
    for cycle in range(budget):
        for name, value in host.drive().items():
            if name not in handles:
                handles[name] = getattr(dut, name)
            handles[name].value = value
        await settled
        host.sample([int(h.value) for h in outputs])
        await edge
        if host.done:
            cycles = cycle + 1
            break
    else:
        timed_out = host.waiting(budget)
    report({"cycles": cycles, "timed_out": timed_out, "link_words": host.link_words,
            "fault": host.fault, "got": host.got, "seen": host.seen})


def chain_runner(simulator):
    """The ``run_cases`` of ``simulator`` (one of :data:`SIMULATORS`): the Amaranth bench's
    (:func:`nnrtl.sim.tb.fpdeep.chain_train.run_cases`) or this module's; both take the
    same arguments and give the same report, ``cycles`` included."""
    if simulator == "amaranth":
        from nnrtl.sim.tb.fpdeep.chain_train import run_cases as amaranth_cases
        return amaranth_cases
    if simulator == "verilator":
        return run_cases
    raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")


def check(config, got, want, *, limit=4):
    """The mismatches of the beats the host ``got`` against ``want``
    (:func:`~nnrtl.sim.tb.fpdeep.chain_train.expected_out`), at most ``limit``."""
    per_image, wrong = config.host_beats, []
    owners = [n for n in config.layer_nodes(config.layers[-1])
              for _ in range(config.block_beats(n))]     # the stage of each host beat
    for k, beats in enumerate(want):
        received = got[k * per_image:(k + 1) * per_image]
        for b, (g, w) in enumerate(zip(received, beats)):
            if g != w:
                wrong.append(f"image {k}: beat {b} ({config.name(owners[b])}) is {g:#x}, "
                             f"expected {w:#x}")
        if len(received) < len(beats):
            wrong.append(f"image {k}: {len(received)} of {len(beats)} beats")
    return wrong[:limit]


def run(config, images, pattern, *, seed=0, link_options=None, limit=4, log=None):
    """Train ``images`` random images (:func:`~nnrtl.sim.tb.fpdeep.chain_train.chain_case`)
    through the chain under Verilator with ``pattern``; the report (module docstring)."""
    return run_cases(config, chain_case(config, images, seed), pattern, seed=seed,
                     link_options=link_options, limit=limit, log=log)


#: The Verilog top module's name.
TOP = "fpdeep_chain"


@functools.lru_cache(maxsize=4)
def _verilog(config, link_options):
    """``(boundaries, Verilog text)`` of the chain, converted once per process (the
    conversion, not the cached build, is most of a fixed16 run's time: 20 s of 28 s)."""
    from nnrtl.sim.runner import to_verilog

    top = ChainVerilogTop(config, **dict(link_options))
    return top.boundaries, to_verilog(top, TOP)


def run_cases(config, cases, pattern, *, probes=0, seed=0, link_options=None, limit=4,
              log=None, budget=None):
    """:func:`nnrtl.sim.tb.fpdeep.chain_train.run_cases` under Verilator: the same
    arguments and report (the ``rtl`` backend's ``simulator="verilator"``); ``log`` gets
    the build's and the run's progress (:func:`nnrtl.sim.runner.simulate`); ``budget``
    replaces the Amaranth bench's cycle budget (a test of the overrun report)."""
    from nnrtl.sim.runner import simulate

    boundaries, verilog = _verilog(config, tuple(sorted((link_options or {}).items())))
    images = len(cases[0]["act"])
    cases, found = compose(config, cases)
    acts, errs = host_streams(config, cases)
    want = expected_out(config, cases, found)
    trained = images - probes
    inner = [_monitored(config, n, images, trained, found) for n in range(len(cases))]
    loads = [fp_stimulus(config.segment(n), case)["load"] for n, case in enumerate(cases)]
    if budget is None:
        budget = _budget(config, images, max(map(len, loads)), pattern, link_options)
    streams = {"acts": acts, "errs": errs[:images - probes], "loads": loads,
               "lag": config.lag, "per_image": config.host_beats,
               "boundaries": boundaries, "pattern": pattern, "seed": seed,
               "inner": {f"mon{n}_{port}": (f"{config.name(n)} {port}", len(beats))
                         for n, ports in enumerate(inner) for port, beats in ports.items()}}
    with tempfile.TemporaryDirectory(prefix="fpdeep-chain-") as tmp:
        path = os.path.join(tmp, "streams.json")
        with open(path, "w") as f:
            json.dump(streams, f)
        result = simulate(verilog, test_module=__name__, name=TOP, seed=seed,
                          params={"streams": path, "budget": budget}, log=log)
    got, seen = result.pop("got"), result.pop("seen")
    seen = [{port: seen[f"mon{n}_{port}"] for port in ports} for n, ports in enumerate(inner)]
    per_image = config.host_beats
    wrong = check(config, got, want, limit=limit)
    wrong += inner_mismatches(config, inner, seen, images, trained, limit - len(wrong))
    result.update(pattern=pattern, budget=budget, mismatches=wrong,
                  received=[got[k * per_image:(k + 1) * per_image] for k in range(images)])
    result["bit_exact"] = (not result["mismatches"] and not result["fault"]
                           and result["timed_out"] is None)
    return result

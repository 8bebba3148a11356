"""Chain harness of FPDeep nodes joined by their neighbour links, in the Amaranth simulator. A
node is its FP module (:class:`~nnrtl.hw.fpdeep.fp.FpModule`) of one ICP segment of a layer: node
``m``'s ``part_out`` goes through its ``"down"`` link module, a pausable channel and node
``m + 1``'s ``"up"`` link module (DP2, :class:`~nnrtl.sim.tb.fpdeep.link.LinkPair`) into
node ``m + 1``'s ``part_in``; the last node completes the layer (bias, SFU). Each node's
activations (its channel segment) come from the bench, as DP1's distribution would
deliver them.

Adapters (the node top's job, here in :class:`ChainTop`): the link carries ``P`` partial
words per beat; the ``last`` flag of a partial beat is not sent (the receiver knows a
segment's ``out_beats`` per image and regenerates it with a counter).

:func:`run` drives the chain with a backpressure pattern on every link channel, on every
activation source (gaps) and on the last node's output (stalls), and checks the output
beats against the golden model chained node by node
(:func:`nnrtl.sim.golden.fpdeep.fp.fp_module` with each node's partials as the next
node's ``partial_in``). Reported, never raised: ``bit_exact``, ``mismatches``,
``cycles``, ``link_words`` per boundary, ``fault``, ``timed_out``, and the timing the
cluster simulator is checked against (:mod:`nnrtl.gen.fpdeep.cluster_chain`):
``start_cycle`` (the first cycle activations are offered: every LPRAM is loaded) and
``image_cycles`` (per image, the cycle after its last output beat was taken).

The chain of node tops is :mod:`nnrtl.sim.tb.fpdeep.chain_train`; :func:`nnrtl.gen.fpdeep.cluster_chain.compare`
checks this FP chain's first-image latency and period against the cluster simulator.
"""

import random

import numpy as np
from amaranth.hdl import Elaboratable, Module, Mux, Signal, Value
from amaranth.sim import Simulator

from nnrtl.hw.fpdeep.config import FpConfig
from nnrtl.hw.fpdeep.fp import FpModule
from nnrtl.hw.fpdeep.link_config import LinkConfig
from nnrtl.sim.golden.fpdeep.fp import fp_module
from nnrtl.sim.patterns import cycle_budget, pause_pattern
from nnrtl.sim.tb.fpdeep.fp import describe, expected, model_cycles, stimulus
from nnrtl.sim.tb.fpdeep.link import LinkPair

__all__ = ["icp_chain", "ChainTop", "chained_cases", "run"]


def icp_chain(precision, cuts, **common):
    """The :class:`FpConfig` of each node of a layer split at input-channel ``cuts``
    (``[(lo, hi), ...]``, contiguous from 0); ``common``: the other FpConfig fields; the
    pool (if any) on the last node only."""
    pool = common.pop("pool", None)
    return [FpConfig(precision=precision, n_in=hi - lo, partial_in=lo > 0,
                     completes=n == len(cuts) - 1, pool=pool if n == len(cuts) - 1 else None,
                     **common) for n, (lo, hi) in enumerate(cuts)]


class ChainTop(Elaboratable):
    """The FP modules ``fps`` of ``configs`` joined by link pairs ``links`` (one per
    boundary, ``link_options`` for :meth:`LinkConfig.from_fp`); ``pauses[b]`` holds
    boundary ``b``'s two channels (forward, backward)."""

    def __init__(self, configs, **link_options):
        self.configs = list(configs)
        self.fps = [FpModule(cfg) for cfg in self.configs]
        self.links = [LinkPair(LinkConfig.from_fp(cfg, "down", **link_options))
                      for cfg in self.configs[:-1]]
        self.pauses = [(pair.pause_ab, pair.pause_ba) for pair in self.links]

    def elaborate(self, platform):
        m = Module()
        for n, fp in enumerate(self.fps):
            m.submodules[f"fp{n}"] = fp
        for n, pair in enumerate(self.links):
            m.submodules[f"link{n}"] = pair
            up, down, cfg = self.fps[n], self.fps[n + 1], self.configs[n]
            tx, rx = pair.a.tx_partial, pair.b.rx_partial
            m.d.comb += [pair.a.link_up.eq(1), pair.b.link_up.eq(1),
                         tx.payload.eq(up.part_out.payload.data),
                         tx.valid.eq(up.part_out.valid), up.part_out.ready.eq(tx.ready)]
            count = Signal(range(cfg.out_beats), name=f"partials{n}")
            last = count == cfg.out_beats - 1
            m.d.comb += [down.part_in.payload.data.eq(rx.payload),
                         down.part_in.payload.last.eq(last),
                         down.part_in.valid.eq(rx.valid), rx.ready.eq(down.part_in.ready)]
            with m.If(rx.valid & rx.ready):
                m.d.sync += count.eq(Mux(last, 0, count + 1))
        return m


def chained_cases(configs, cuts, act, weights, bias):
    """Per node the FP case (``act``, ``weights``, ``bias``, ``partial_in``) with the
    upstream node's golden partials as ``partial_in``."""
    cases, partial = [], None
    for cfg, (lo, hi) in zip(configs, cuts):
        case = {"act": act[..., lo:hi], "weights": weights[:, lo:hi], "bias": bias,
                "partial_in": partial}
        cases.append(case)
        if not cfg.completes:
            partial = np.stack([fp_module(cfg, image, case["weights"], bias,
                                          None if partial is None else partial[n]).partials
                                for n, image in enumerate(case["act"])])
    return cases


def run(configs, cases, pattern, *, seed=0, link_options=None):
    """Run ``cases`` (:func:`chained_cases`) through a :class:`ChainTop` under ``pattern``.
    Returns the report (see the module docstring)."""
    top = ChainTop(configs, **(link_options or {}))
    stim = [stimulus(cfg, case) for cfg, case in zip(configs, cases)]
    name, want = expected(configs[-1], cases[-1])
    images = len(cases[0]["act"])
    loads = max(len(s["load"]) for s in stim)
    budget = cycle_budget(sum(model_cycles(cfg, images, loads) for cfg in configs),
                          output_beats=len(want), patterns=(pattern,))
    rng = random.Random(seed)
    gen = lambda: pause_pattern(pattern, random.Random(rng.random()))   # noqa: E731
    channels = [(gen(), gen()) for _ in top.links]
    sources = [gen() for _ in configs]
    sink = gen()
    got = []
    report = {"pattern": pattern, "bit_exact": False, "mismatches": [], "cycles": 0,
              "link_words": [0] * len(top.links), "fault": False, "timed_out": None,
              "start_cycle": None, "image_cycles": []}
    per_image = len(want) // images

    async def bench(ctx):
        loads_left = [list(s["load"]) for s in stim]
        acts = [list(s["act_in"]) for s in stim]
        out = top.fps[-1].out
        watched = [out.valid, Value.cast(out.payload)]
        for fp in top.fps:
            watched += [fp.load.valid, fp.load.ready, fp.act_in.valid, fp.act_in.ready]
        for pair in top.links:
            watched += [pair.a.link_out.tvalid, pair.a.link_out.tready,
                        pair.a.fault | pair.b.fault]
        for cycle in range(budget):
            loading = any(loads_left)
            if not loading and report["start_cycle"] is None:
                report["start_cycle"] = cycle
            for pair, (fwd, bwd) in zip(top.links, channels):
                ctx.set(pair.pause_ab, next(fwd))
                ctx.set(pair.pause_ba, next(bwd))
            for n, fp in enumerate(top.fps):
                ctx.set(fp.load.valid, int(bool(loads_left[n])))
                if loads_left[n]:
                    ctx.set(Value.cast(fp.load.payload), loads_left[n][0])
                gap = next(sources[n])
                offer = not loading and acts[n] and not gap
                ctx.set(fp.act_in.valid, int(bool(offer)))
                if offer:
                    ctx.set(Value.cast(fp.act_in.payload), acts[n][0])
            take = not next(sink)
            ctx.set(out.ready, int(take))
            _clk, _rst, *values = await ctx.tick().sample(*watched)
            if values[0] and take:
                got.append(values[1])
                if len(got) % per_image == 0:
                    report["image_cycles"].append(cycle + 1)
            for n in range(len(top.fps)):
                lv, lr, av, ar = values[2 + 4 * n:6 + 4 * n]
                if lv and lr:
                    loads_left[n].pop(0)
                if av and ar:
                    acts[n].pop(0)
            base = 2 + 4 * len(top.fps)
            for b in range(len(top.links)):
                v, r, fault = values[base + 3 * b:base + 3 * b + 3]
                report["link_words"][b] += bool(v and r)
                report["fault"] = report["fault"] or bool(fault)
            if len(got) >= len(want):
                report["cycles"] = cycle + 1
                return
        report["cycles"] = budget
        report["timed_out"] = f"{name}: {len(got)} of {len(want)} beats in {budget} cycles"

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    report["mismatches"] = describe(configs[-1], name, got, want)
    report["bit_exact"] = not report["mismatches"] and not report["fault"] \
        and report["timed_out"] is None
    return report

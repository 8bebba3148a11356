"""The FPDeep training chain: ``K`` node tops (:class:`~nnrtl.hw.fpdeep.node.FpdeepNode`)
joined by their link modules through pausable channels, each node's streams put on the
links by its :class:`~nnrtl.hw.fpdeep.chain_link.NodeLink` adapter (its Notes have the
chain's streams and decisions), training a CNN's convolution layers (one
layer split by output or input channels, or a layer pipeline whose later layer may be
split by output channels) over several mini-batches in the Amaranth simulator.
Adjacent stages are joined on the link paths ``act`` and ``error``, and where the chain
needs them ``partial`` (an ICP layer's partial sums) and ``delta`` (its δ, or an OCP
layer's partial errors).

:class:`ChainTrainTop` is the chain: the host's images into node 1's adapter (``host_act``),
every node's activations out of node ``K``'s (``host_out``), the host's errors into node
``K``'s (``host_err``), each node's LPRAM ``load`` stream and its ``lr`` register at the
FpdeepConfig's reset value (the node's ``s_axil`` left idle).

The host (:func:`run`) plays the part of the FC layers and the loss: its errors are random
words (the node bench's, :func:`nnrtl.sim.tb.fpdeep.node.random_case`), so the check does
not depend on a loss. Its order, with ``lag`` images in flight
(:class:`~nnrtl.hw.fpdeep.chain_link.ChainConfig`): images ``0 … lag − 1``; then for each
image ``k`` its error once the activations of image ``k + lag − 1`` (or of the last image)
have all come back, then image ``k + lag``. With the adapters' window every node then sees
the node bench's phase order, and the golden model of each node is
:func:`nnrtl.sim.tb.fpdeep.node.expected` (FP of image ``k`` on the weights after
``max(0, ⌊(k + 1 − lag) / B⌋)`` updates, EB-free: the first layer): the activations every
node sends the host are checked bit-exactly against it, image by image, so every weight
version the nodes' updates wrote is checked (except the last mini-batch's, which no later
image reads).

Reported, never raised: ``bit_exact``, ``mismatches`` (the first few, naming node, image
and beat), ``cycles``, ``link_words`` per boundary and direction, ``fault`` (a link
module's), ``timed_out`` (what was awaited when the cycle budget ran out); backpressure
``pattern`` on every link channel (both directions), on the host's sources (gaps) and on
its sink (stalls).
"""

import dataclasses
import random

import numpy as np
from amaranth.hdl import Elaboratable, Module, Value
from amaranth.lib import wiring
from amaranth.sim import Simulator

from nnrtl.hw.fpdeep.chain_link import ChainConfig, NodeLink, beat_signature
from nnrtl.hw.fpdeep.link_config import LinkConfig
from nnrtl.hw.fpdeep.config import FpConfig
from nnrtl.hw.fpdeep.node import FpdeepNode, FpdeepConfig
from nnrtl.sim.patterns import cycle_budget, pause_pattern
from nnrtl.sim.tb.fpdeep.fp import stimulus as fp_stimulus
from nnrtl.sim.tb.fpdeep.link import LinkPair
from nnrtl.sim.tb.fpdeep.node import expected as node_expected
from nnrtl.sim.tb.fpdeep.node import model_cycles as node_cycles
from nnrtl.sim.tb.fpdeep.node import phases, random_case

__all__ = ["SIMULATORS", "ChainTrainTop", "small_chain", "chain_case", "compose", "host_streams",
           "monitored_ports", "inner_mismatches",
           "expected_out", "run", "run_cases"]


#: What can run the chain: this module's Amaranth bench, or
#: :mod:`nnrtl.sim.tb.fpdeep.chain_verilator` (``chain_runner``).
SIMULATORS = ("amaranth", "verilator")


def small_chain(outs=(2, 2, 3), *, precision="fixed16", batch=2, lag=2, w_in=4, next_out=None,
                shared=False, icp=None, next_icp=None):
    """A small test chain: a 3×3 conv (pad 1) of 3 input channels over ``w_in`` maps,
    ReLU, a 2×2 pool, ``P`` = 2, node ``m`` computing ``outs[m]`` output channels (with
    ``icp``, input-channel counts summing to 3: node ``m`` reads ``icp[m]`` channels and
    computes partial sums of the ``outs[0]`` outputs, the last completing), ``lr`` 0.01;
    with ``next_out``, a second 3×3 conv (pad 1, ReLU, no pool) of
    ``next_out`` channels (a tuple: split by output channels over that many nodes, its
    EB's partial errors chained) over the first layer's pooled maps (a layer pipeline),
    its first segment on a node of its own or (``shared``) the last node's second; with
    ``next_icp`` (input-channel counts summing to the first layer's outputs) the second
    layer split by input channels instead, ``next_out`` its outputs."""
    lr = 655 if precision == "fixed16" else 0x3C23D70A
    nodes = [[(FpConfig(precision=precision, k=3, stride=1, pad=1, w_in=w_in, n_in=3, n_out=o, p=2,
                        pool=(2, 2, 0)), False)]
             for o in outs]
    if icp:
        nodes = [[(FpConfig(precision=precision, k=3, stride=1, pad=1, w_in=w_in, n_in=n,
                            n_out=outs[0], p=2, partial_in=m > 0, completes=m == len(icp) - 1,
                            pool=(2, 2, 0) if m == len(icp) - 1 else None), False)]
                 for m, n in enumerate(icp)]
        outs = outs[:1]
    seconds = (next_out,) if isinstance(next_out, int) else tuple(next_out or ())
    first, side = len(nodes), nodes[-1][0][0].pool_out
    splits = [(sum(outs), False, True)] * len(seconds)
    if next_icp:
        seconds = seconds * len(next_icp)
        splits = [(n, k > 0, k == len(next_icp) - 1) for k, n in enumerate(next_icp)]
    for k, out in enumerate(seconds):
        n_in, partial, completes = splits[k]
        second = (FpConfig(precision=precision, k=3, stride=1, pad=1, w_in=side, n_in=n_in,
                           n_out=out, p=2, partial_in=partial, completes=completes), True)
        if shared and k == 0:
            nodes[-1].append(second)
        else:
            nodes.append([second])
    return ChainConfig(tuple(
        FpdeepConfig(tuple(c for c, _ in node), tuple(e for _, e in node), batch=batch,
                     act_images=lag + 1, lr=lr, node=n + 1)
        for n, node in enumerate(nodes)), lag=lag,
        layers=(0,) * first + (1,) * len(seconds))


class ChainTrainTop(Elaboratable):
    """The chain of ``config`` (:class:`ChainConfig`): ``nodes``, ``adapters``, ``links``
    (a :class:`~nnrtl.sim.tb.fpdeep.link.LinkPair` per boundary, ``link_options`` for
    :meth:`LinkConfig.from_fp`), ``pauses[b]`` boundary ``b``'s (forward, backward)
    channel pauses; ``host_act``, ``host_err`` (sinks) and ``host_out`` (source) the host's
    streams of link beats."""

    def __init__(self, config, **link_options):
        if not isinstance(config, ChainConfig):
            raise TypeError(f"config must be a ChainConfig, not {config!r}")
        self.config = config
        self.nodes = [FpdeepNode(node) for node in config.nodes]
        self.adapters = [NodeLink(config, node=n) for n in range(len(config.stages))]
        link = LinkConfig.from_fp(config.segment(0), "down", **link_options)
        self.links = [LinkPair(link) for _ in config.nodes[1:]]
        self.pauses = [(pair.pause_ab, pair.pause_ba) for pair in self.links]
        beat = beat_signature(config)
        self.host_act = beat.flip().create(path=("host_act",))
        self.host_err = beat.flip().create(path=("host_err",))
        self.host_out = beat.create(path=("host_out",))

    def port(self, stage, name):
        """Stage ``stage``'s stream ``name`` on its node top (``s{k}_{name}``)."""
        node, k = self.config.stages[stage]
        return getattr(self.nodes[node], f"s{k}_{name}")

    def elaborate(self, platform):
        m = Module()
        stages = self.config.stages
        for n, node in enumerate(self.nodes):
            m.submodules[f"node{n}"] = node
        for n, adapter in enumerate(self.adapters):
            m.submodules[f"adapter{n}"] = adapter
            for name in ("act_in", "err_in", "err_part_in", "part_in"):
                if name in adapter.signature.members:
                    wiring.connect(m, getattr(adapter, name), self.port(n, name))
            for name in ("act_out", "part_out", "err_out", "err_part_out", "delta_out"):
                if name in adapter.signature.members:
                    wiring.connect(m, self.port(n, name), getattr(adapter, name))
        for n in range(len(stages) - 1):
            up, down = self.adapters[n], self.adapters[n + 1]
            partials = "up_err_part" in down.signature.members
            icp = "down_part" in up.signature.members
            if stages[n][0] == stages[n + 1][0]:        # one node's segments: joined directly
                wiring.connect(m, up.down_act, down.up_act)
                wiring.connect(m, down.up_err, up.down_err)
                if partials:
                    wiring.connect(m, down.up_err_part, up.down_err_part)
                if icp:
                    wiring.connect(m, up.down_part, down.up_part)
                    wiring.connect(m, down.up_delta, up.down_delta)
                continue
            pair = self.links[stages[n][0]]
            m.submodules[f"link{stages[n][0]}"] = pair
            m.d.comb += [pair.a.link_up.eq(1), pair.b.link_up.eq(1)]
            wiring.connect(m, up.down_act, pair.a.tx_act)
            wiring.connect(m, pair.b.rx_act, down.up_act)
            wiring.connect(m, down.up_err, pair.b.tx_error)
            wiring.connect(m, pair.a.rx_error, up.down_err)
            if partials:                # an OCP layer's partial errors: the delta path
                wiring.connect(m, down.up_err_part, pair.b.tx_delta)
                wiring.connect(m, pair.a.rx_delta, up.down_err_part)
            if icp:                     # an ICP layer: partial sums down, δ up
                wiring.connect(m, up.down_part, pair.a.tx_partial)
                wiring.connect(m, pair.b.rx_partial, down.up_part)
                wiring.connect(m, down.up_delta, pair.b.tx_delta)
                wiring.connect(m, pair.a.rx_delta, up.down_delta)
        first, last = self.adapters[0], self.adapters[-1]
        wiring.connect(m, wiring.flipped(self.host_act), first.up_act)
        wiring.connect(m, last.down_act, wiring.flipped(self.host_out))
        wiring.connect(m, wiring.flipped(self.host_err), last.down_err)
        m.d.comb += first.up_err.ready.eq(0)        # node 1 relays no error upstream
        return m


def chain_case(config, images, seed):
    """Per node the node bench's case (:func:`~nnrtl.sim.tb.fpdeep.node.random_case`: its
    weights, bias and the host's errors of its activations), the images node 1's (an ICP
    first layer's: random images of every input channel, each stage its range; the
    other layers' inputs, errors, partial sums and δ are :func:`compose`'s)."""
    cases = [random_case(config.segment(n), images, seed + 7 * n)
             for n in range(len(config.stages))]
    image = cases[0]["act"]
    if config.icp(0):
        cfg = dataclasses.replace(config.segment(0), n_in=config.layer_ic(0))
        image = random_case(cfg, images, seed)["act"]
    for n, case in enumerate(cases):
        if config.layers[n] == 0:
            case["act"] = image[..., config.in_lo(n):config.in_lo(n) + config.segment(n).n_in]
    return cases


def host_image(config, cases):
    """The images the host sends: the first layer's input (its stages' ranges joined)."""
    if not config.icp(0):
        return cases[0]["act"]
    return np.concatenate([cases[n]["act"] for n in config.layer_nodes(0)], axis=-1)


def _words(beats, count, bits, signed):
    """Packed beats → ``(len(beats), count)`` words (fixed16 signed)."""
    mask = (1 << bits) - 1
    words = np.array([[(b >> (k * bits)) & mask for k in range(count)] for b in beats],
                     np.int64).reshape(len(beats), count)
    return np.where(words >= 1 << (bits - 1), words - (1 << bits), words) if signed else words


def compose(config, cases):
    """The chain's cases: a layer's input is the previous layer's activations, a layer's
    errors (but the last's, the host's) the next layer's EB output, each node's as its
    golden model (:func:`~nnrtl.sim.tb.fpdeep.node.expected`, ``lag``) makes them from
    the others'. Solved by iteration: image ``k``'s values depend on earlier images' only
    (through the weight versions), so each round settles at least one more image.
    Returns ``(cases, found)``: the cases completed and per node the golden outputs."""
    cases = [dict(case) for case in cases]
    images, layers = len(cases[0]["act"]), config.layers[-1]
    bits, signed = config.word_bits, config.segment(0).precision == "fixed16"
    for n, case in enumerate(cases):
        cfg = config.segment(n)
        if config.eb(n) and config.partial_errors(n)[0] and "err_partial" not in case:
            case["err_partial"] = np.zeros((images, cfg.w_in, cfg.w_in, cfg.n_in), np.int64)
        if cfg.partial_in and case.get("partial_in") is None:
            case["partial_in"] = np.zeros((images, cfg.pixels, cfg.groups, cfg.p), np.int64)
    for _ in range(images * (len(cases) + 1) + 2):
        found = [node_expected(config.stage_node(n), case, config.lag)[0]
                 for n, case in enumerate(cases)]
        settled = True
        updates = []
        for layer in range(layers + 1):
            nodes = config.layer_nodes(layer)
            if not config.icp(layer):
                continue
            cfg = config.segment(nodes[-1])         # its δ, every stage's err_in
            delta = _words(found[nodes[-1]]["delta_out"], cfg.p, bits, signed).reshape(
                images, cfg.w_out, cfg.w_out, -1)[..., :cfg.n_out]
            for up, down in zip(nodes, nodes[1:]):  # the partial sums, downward
                updates.append((down, "partial_in", _words(
                    found[up]["part_out"], cfg.p, cfg.partial_bits, signed).reshape(
                        images, cfg.pixels, cfg.groups, cfg.p)))
                updates.append((up, "err", delta))
        for layer in range(1, layers + 1):
            nodes = config.layer_nodes(layer)
            cfg = config.segment(nodes[0])
            acts = []
            for j in config.completing(layer - 1):
                seg = config.segment(j)
                side = seg.pool_out
                words = _words(found[j]["act_out"], seg.p, bits, signed)
                acts.append(words.reshape(images, side, side, -1)[..., :seg.n_out])
            errs = np.concatenate([   # ICP: each stage's channels; OCP: the first's, summed
                _words(found[n]["err_out"], config.segment(n).n_in, bits, signed).reshape(
                    images, cfg.w_in, cfg.w_in, -1)
                for n in (nodes if config.icp(layer) else nodes[:1])], axis=-1)
            acts = np.concatenate(acts, axis=-1)
            updates += [(node, "act", acts[..., config.in_lo(node):config.in_lo(node)
                                           + config.segment(node).n_in]) for node in nodes]
            for up, down in zip(nodes, nodes[1:] if not config.icp(layer) else []):
                updates.append((up, "err_partial", _words(
                    found[down]["err_part_out"], cfg.n_in, cfg.partial_bits, signed).reshape(
                        images, cfg.w_in, cfg.w_in, cfg.n_in)))
            for j in config.completing(layer - 1):
                lo = config.lo(j)
                updates.append((j, "err", errs[..., lo:lo + config.segment(j).n_out]))
        for n, key, value in updates:
            if not np.array_equal(cases[n][key], value):
                cases[n][key], settled = value, False
        if settled:
            return cases, found
    raise RuntimeError("the chain's golden cases did not settle")


def host_streams(config, cases):
    """The host's beats: ``(images, errors)``, per image its act-path beats and its error
    beats (the last layer's blocks, the last node's first)."""
    cfg, p = config.segment(0), config.p
    mask = (1 << config.word_bits) - 1
    images = []
    for image in host_image(config, cases):
        words = np.zeros((cfg.w_in, cfg.w_in, config.pixel_beats * p), np.int64)
        words[..., :config.layer_ic(0)] = image
        images.append([sum((int(w) & mask) << (k * config.word_bits)
                           for k, w in enumerate(beat))
                       for beat in words.reshape(-1, p)])
    last = config.completing(config.layers[-1])
    blocks = {n: [words for port, words in phases(config.segment(n), cases[n], 1)
                  if port == "err_in"] for n in last}
    errors = [sum((blocks[n][k] for n in reversed(last)), []) for k in range(len(images))]
    return images, errors


def expected_out(config, cases, found=None):
    """Per image the beats the host must receive: the last layer's activations (its
    nodes' golden models, :func:`compose`), its first node's first."""
    if found is None:
        cases, found = compose(config, cases)
    mask = (1 << (config.p * config.word_bits)) - 1
    per_node = []
    for n in config.completing(config.layers[-1]):
        beats = config.block_beats(n)
        per_node.append([[b & mask for b in found[n]["act_out"][k * beats:(k + 1) * beats]]
                         for k in range(len(cases[0]["act"]))])
    return [sum((node[k] for node in per_node), []) for k in range(len(cases[0]["act"]))]


def _budget(config, images, loads, pattern, link_options):
    link = LinkConfig.from_fp(config.segment(0), "down", **(link_options or {}))
    nodes = range(len(config.stages))
    beats = images * (config.image_beats + config.host_beats + sum(
        config.act_beats(n) + config.error_beats(n) + 2 * config.input_beats(n)
        + config.segment(n).w_in ** 2 * config.partial_error_beats(n) * config.eb(n)
        + 2 * config.delta_beats(n) * config.icp(config.layers[n])
        for n in nodes))
    wire = beats * (1 + link.words_per_beat("act")) * 2
    model = loads + wire + sum(node_cycles(config.stage_node(n), images) for n in nodes)
    return cycle_budget(model, output_beats=images * config.host_beats, patterns=(pattern,))


def _monitored(config, node, images, trained, found):
    """Node ``node``'s output streams the bench watches: ``{port: beats expected}``
    (:func:`monitored_ports`; the backward ones of the trained images only: probes send
    no error)."""
    want = {}
    for port in monitored_ports(config)[node]:
        beats = found[node][port]
        want[port] = beats if port in _FORWARD else beats[:len(beats) // images * trained]
    return want


#: Inner streams that carry every image (the others only the trained ones').
_FORWARD = ("act_out", "part_out")


def monitored_ports(config):
    """Per stage the output streams a bench watches inside the chain (``act_out``, or
    ``part_out`` on an ICP stage that does not complete; ``delta_out`` on an ICP layer's
    completing stage; on a stage with EB ``err_out`` or, sending partial errors,
    ``err_part_out``)."""
    found = []
    for n in range(len(config.stages)):
        ports = ("act_out",) if config.segment(n).completes else ("part_out",)
        if config.nodes[config.stages[n][0]].deltas[config.stages[n][1]]:
            ports += ("delta_out",)
        if config.eb(n):
            ports += ("err_part_out" if config.partial_errors(n)[1] else "err_out",)
        found.append(ports)
    return found


def inner_mismatches(config, inner, seen, images, trained, limit):
    """At most ``limit`` mismatches of the beats ``seen`` on the chain's inner streams
    against ``inner`` (per stage ``{port: beats expected}``, :func:`_monitored`)."""
    wrong = []
    for n, ports in enumerate(inner):
        for port, beats in ports.items():
            per = len(beats) // max(1, images if port in _FORWARD else trained)
            for b, (g, w) in enumerate(zip(seen[n][port], beats)):
                if g != w:
                    wrong.append(f"{config.name(n)} {port}: image {b // per} beat "
                                 f"{b % per} is {g:#x}, expected {w:#x}")
            if len(seen[n][port]) != len(beats):
                wrong.append(f"{config.name(n)} {port}: {len(seen[n][port])} of "
                             f"{len(beats)} beats")
    return wrong[:max(0, limit)]

def run(config, images, pattern, *, seed=0, link_options=None, limit=4):
    """Train ``images`` random images (:func:`chain_case`) through a :class:`ChainTrainTop`
    under ``pattern``; returns the report (module docstring)."""
    return run_cases(config, chain_case(config, images, seed), pattern, seed=seed,
                     link_options=link_options, limit=limit)


def run_cases(config, cases, pattern, *, probes=0, seed=0, link_options=None, limit=4):
    """:func:`run` on the given ``cases`` (per node: ``act``, ``weights``, ``bias``,
    ``err`` as :func:`chain_case`'s); the last ``probes`` images are sent without errors
    (their activations show the weights after the updates; their ``err`` unused). The
    report also has ``received``: per image the beats the host got."""
    top = ChainTrainTop(config, **(link_options or {}))
    images = len(cases[0]["act"])
    trained = images - probes
    cases, found = compose(config, cases)
    acts, errs = host_streams(config, cases)
    want = expected_out(config, cases, found)
    inner = [_monitored(config, n, images, trained, found) for n in range(len(cases))]
    seen = [{port: [] for port in ports} for ports in inner]
    loads = [fp_stimulus(config.segment(n), case)["load"] for n, case in enumerate(cases)]
    budget = _budget(config, images, max(map(len, loads)), pattern, link_options)
    rng = random.Random(seed)
    gen = lambda: pause_pattern(pattern, random.Random(rng.random()))   # noqa: E731
    channels = [(gen(), gen()) for _ in top.links]
    act_gaps, err_gaps, sink = gen(), gen(), gen()
    lag, per_image = config.lag, config.host_beats
    got = []
    report = {"pattern": pattern, "bit_exact": False, "mismatches": [], "cycles": 0,
              "link_words": [{"forward": 0, "backward": 0} for _ in top.links],
              "fault": False, "timed_out": None, "budget": budget}

    async def bench(ctx):
        loads_left = [list(load) for load in loads]
        sent_images, sent_errors = 0, 0            # whole images / error blocks sent
        act_beat = err_beat = 0
        watched = [top.host_out.valid, Value.cast(top.host_out.payload),
                   top.host_act.ready, top.host_err.ready]
        for n in range(len(cases)):
            watched.append(top.port(n, "load").ready)
        streams = [(n, port, top.port(n, port))
                   for n, ports in enumerate(inner) for port in ports]
        for _, _, port in streams:
            watched += [port.valid, port.ready, port.payload]
        for pair in top.links:
            watched += [pair.a.link_out.tvalid, pair.a.link_out.tready,
                        pair.b.link_out.tvalid, pair.b.link_out.tready,
                        pair.a.fault | pair.b.fault]
        for cycle in range(budget):
            for pair, (fwd, bwd) in zip(top.links, channels):
                ctx.set(pair.pause_ab, next(fwd))
                ctx.set(pair.pause_ba, next(bwd))
            loading = any(loads_left)
            for n, left in enumerate(loads_left):
                ctx.set(top.port(n, "load").valid, int(bool(left)))
                if left:
                    ctx.set(top.port(n, "load").payload, left[0])
            # the host's order (module docstring)
            back = len(got) // per_image
            act_ok = (not loading and sent_images < images
                      and sent_images < lag + sent_errors)
            act_offer = act_ok and not next(act_gaps)
            ctx.set(top.host_act.valid, int(act_offer))
            if act_offer:
                ctx.set(Value.cast(top.host_act.payload), acts[sent_images][act_beat])
            err_ok = (sent_errors < trained and sent_images >= min(images, sent_errors + lag)
                      and back >= min(images, sent_errors + lag))
            err_offer = err_ok and not next(err_gaps)
            ctx.set(top.host_err.valid, int(err_offer))
            if err_offer:
                ctx.set(Value.cast(top.host_err.payload), errs[sent_errors][err_beat])
            take = not next(sink)
            ctx.set(top.host_out.ready, int(take))
            _clk, _rst, *values = await ctx.tick().sample(*watched)
            out_valid, out_payload, act_ready, err_ready = values[:4]
            if out_valid and take:
                got.append(out_payload)
            if act_offer and act_ready:
                act_beat += 1
                if act_beat == len(acts[sent_images]):
                    sent_images, act_beat = sent_images + 1, 0
            if err_offer and err_ready:
                err_beat += 1
                if err_beat == len(errs[sent_errors]):
                    sent_errors, err_beat = sent_errors + 1, 0
            for n, ready in enumerate(values[4:4 + len(cases)]):
                if loads_left[n] and ready:
                    loads_left[n].pop(0)
            base = 4 + len(cases)
            for n, port, _ in streams:
                valid, ready, payload = values[base:base + 3]
                if valid and ready:
                    seen[n][port].append(payload)
                base += 3
            for b in range(len(top.links)):
                av, ar, bv, br, fault = values[base + 5 * b:base + 5 * b + 5]
                report["link_words"][b]["forward"] += bool(av and ar)
                report["link_words"][b]["backward"] += bool(bv and br)
                report["fault"] = report["fault"] or bool(fault)
            inside = [(n, port, len(seen[n][port]), len(beats))
                      for n, ports in enumerate(inner) for port, beats in ports.items()]
            if (len(got) >= images * per_image and sent_errors == trained
                    and all(have >= need for *_, have, need in inside)):
                report["cycles"] = cycle + 1
                return
        report["cycles"] = budget
        report["timed_out"] = (f"{len(got)} of {images * per_image} activation beats, "
                               f"{sent_images} of {images} images and {sent_errors} of "
                               f"{trained} error blocks sent" + "".join(
                                   f", {config.name(n)} {port} {have} of {need} beats"
                                   for n, port, have, need in inside if have < need)
                               + f" in {budget} cycles")

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for k, beats in enumerate(want):
        received = got[k * per_image:(k + 1) * per_image]
        for b, (g, w) in enumerate(zip(received, beats)):
            if g != w and len(report["mismatches"]) < limit:
                owner = next(n for n in config.completing(config.layers[-1])
                             if b < config.block_beats(n) + config.upstream_beats(n))
                report["mismatches"].append(
                    f"image {k}: beat {b} ({config.name(owner)}) is {g:#x}, expected {w:#x}")
        if len(received) < len(beats) and len(report["mismatches"]) < limit:
            report["mismatches"].append(f"image {k}: {len(received)} of {len(beats)} beats")
    report["mismatches"] += inner_mismatches(config, inner, seen, images, trained,
                                             limit - len(report["mismatches"]))
    report["received"] = [got[k * per_image:(k + 1) * per_image] for k in range(images)]
    report["bit_exact"] = (not report["mismatches"] and not report["fault"]
                           and report["timed_out"] is None)
    return report

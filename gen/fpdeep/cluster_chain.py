"""The cluster simulator's prediction for the RTL chain bench (spec §5, check 4: the
cluster simulator agrees with the RTL within 2%).

:func:`chain_plan` builds, from the :class:`~nnrtl.hw.fpdeep.config.FpConfig` of each node
of an ICP-split layer (:func:`nnrtl.sim.tb.fpdeep.chain.icp_chain`), the
:class:`~.cluster_node.ClusterPlan` of the same chain: one layer, one segment per node with
the FP module's ``P``, ``Q``, channels and map, the node's inputs from the host
(``host_inputs``: the bench delivers each node's channels, DP1 is not on the links).
:func:`predict` runs its :class:`~.cluster_node.NodeModel` forward passes with the bench's
links (:class:`~.cluster_link.Link` with the :class:`~.cluster_link.LinkFraming` of the
same :class:`~nnrtl.hw.fpdeep.link_config.LinkConfig`, one link word per cycle) and the
node timing of the RTL (:func:`rtl_timing`), and returns the cycle each image's output is
complete, as :func:`nnrtl.sim.tb.fpdeep.chain.run` reports ``image_cycles``.

:func:`predict_train` does the same for the RTL *training* chain
(:mod:`nnrtl.sim.tb.fpdeep.chain_train`: an OCP split over node tops, forward, the
host's errors backward, the weight update per mini-batch, ``lag`` images in flight):
per node a :class:`NodeModel` for FP and its :meth:`~.cluster_node.NodeModel.update`
phase, the adapters' and SFU-backward's documented rules, per link direction the RTL's
packets and credit flits; :func:`compare_train` sets its ``cycles`` and ``link_words``
beside the bench's report.
"""

import dataclasses

import numpy as np

from ...hw.fpdeep.chain_link import ChainConfig
from ...hw.fpdeep.conv import ce_latency
from ...hw.fpdeep.update import row_cycles
from ...hw.fpdeep.link_config import LinkConfig
from .cluster_link import LinkFraming
from .cluster_node import ClusterPlan, NodeModel, NodeTiming, update_rows
from .config import NodePlan, SegmentConfig

__all__ = ["chain_plan", "rtl_timing", "link_latency", "predict", "compare", "train_timing",
           "predict_train", "compare_train"]


def chain_plan(configs):
    """The :class:`ClusterPlan` of the chain of FP modules ``configs`` (one layer split
    over the nodes at contiguous input channels)."""
    first = configs[0]
    n_in = sum(cfg.n_in for cfg in configs)
    layer = {"name": "conv", "kind": "conv", "ic": n_in, "oc": first.n_out, "k": first.k,
             "stride": first.stride, "pad": first.pad, "w_in": first.w_in,
             "w_out": first.w_out, "pool": configs[-1].pool, "relu": configs[-1].relu,
             "first": True}
    nodes, lo = [], 0
    for m, cfg in enumerate(configs, 1):
        units = 2 * cfg.macs
        seg = SegmentConfig(layer="conv", index=0, kind="conv", mode="ICP", lo=lo,
                            hi=lo + cfg.n_in, n_in=cfg.n_in, n_out=cfg.n_out, k=cfg.k,
                            pixels=cfg.pixels, p=cfg.p, q=cfg.q, modules=2, mac_units=units,
                            dsp=units, lut=0, cycles=cfg.cycles,
                            work=2 * cfg.pixels * cfg.n_out * cfg.n_in * cfg.taps,
                            completes=cfg.completes, residency=1.0, stride=cfg.stride, pad=cfg.pad,
                            w_in=cfg.w_in, pool=cfg.pool if cfg.completes else None, relu=cfg.relu)
        lo += cfg.n_in
        nodes.append(NodePlan(node=m, segments=(seg,), mac_units=units, dsp=units, lut=0,
                                      storage=(), bram36=0, hosted=(), offchip_words=0,
                                      word_bits=cfg.word_bits).as_json())
    return ClusterPlan({
        "network": {"name": "rtl-chain", "layers": [layer],
                    "work_macs_per_sample": sum(s["segments"][0]["work"] for s in nodes)},
        "nodes": nodes,
        "cost_model": {"word_bits": first.word_bits, "precision": first.precision,
                       "clock_hz": 200e6},
        "options": {"link_gbps": None, "link_convention": "link", "host_inputs": True},
        "summary": {"period_cycles": max(cfg.cycles for cfg in configs),
                    "ddr_period_cycles": 0},
        "boundaries": []}, where="the RTL chain")


def rtl_timing(cfg):
    """The :class:`NodeTiming` of the FP module ``cfg`` (:mod:`nnrtl.hw.fpdeep.fp`'s
    registers; the simulator's module starts a pixel the cycle its window is valid at the
    line buffer's output):

    * ``fp_latency``: the feed register (1), the CE array
      (:func:`~nnrtl.hw.fpdeep.conv.ce_latency`), the pass accumulator (1 with
      ``passes > 1``); ``part_out`` is combinational from there;
    * ``add_latency``: the chained partial add, one register (fixed16) or the adder's
      stages (fp32);
    * ``sfu_latency``: the bias add (fixed16: the add and the rescale, 2; fp32 the adder's
      stages), ReLU combinational, and with a pool its line buffer (the take, the issue,
      the output register: 2) and the pool's output register (1);
    * ``loss_latency`` 1: the bench counts an image done the cycle after its last output
      beat is taken."""
    add = 1 if cfg.precision == "fixed16" else cfg.adder_stages
    bias = 2 if cfg.precision == "fixed16" else cfg.adder_stages
    fp = 1 + ce_latency(cfg, cfg.q, cfg.taps) + int(cfg.passes > 1)
    return NodeTiming(fp_latency=fp, add_latency=add,
                      sfu_latency=bias + (3 if cfg.pool is not None else 0),
                      relay_latency=0, loss_latency=1)


def link_latency(link):
    """Cycles from a beat's last word on the wire to its ``rx_<path>`` valid, beyond the
    grant (1 cycle when the link is idle) and the packet's words that the
    :class:`~.cluster_link.Link` charges: the receive FIFO's write and buffered read (2).
    Measured on the link pair alone (:class:`~nnrtl.sim.tb.fpdeep.link.LinkPair`, one
    beat offered to an idle link, no pauses): ``rx`` valid 5 cycles after the offer on
    a 192-bit link (a header and one word), 7 on a 64-bit one (a header and three words),
    i.e. ``1 + 1 + words_per_beat + 2``, for every ``link`` (a parameter for the
    interface, one constant)."""
    return 2


def predict(configs, images, link_options=None, start=0.0):
    """Per image the cycle its last output beat leaves the chain's last node, the images
    offered from cycle ``start`` on (the bench's ``start_cycle``)."""
    plan = chain_plan(configs)
    nodes = []
    for m, cfg in enumerate(configs, 1):
        link = LinkConfig.from_fp(cfg, "down", **(link_options or {}))
        framing = LinkFraming.of_link(link, whole_beats=True)
        # one link word (of link_bits) a cycle: the bench's link output is always ready
        nodes.append(NodeModel(plan, m, rtl_timing(cfg), cfg.word_bits / link.link_bits,
                               link_latency(link), 0, framing))
    done = []
    for s in range(images):
        incoming = {}
        for node in nodes:
            incoming = node.forward(s, incoming, start)
        done.append(nodes[-1].losses[-1])
    return np.asarray(done)


def compare(configs, report, link_options=None):
    """The RTL chain bench's ``report`` (:func:`nnrtl.sim.tb.fpdeep.chain.run` under the
    ``none`` pattern) beside the simulator's prediction for the same chain: the first
    image's latency (from ``start_cycle``) and the steady-state period (the mean spacing
    of the done cycles over the second half of the images, as :mod:`.cluster` measures
    it), each with its relative error."""
    measured = np.asarray(report["image_cycles"], dtype=np.float64)
    k = measured.size
    if k < 3:
        raise ValueError(f"report must hold at least 3 images for a period, not {k}")
    start = float(report["start_cycle"])
    model = predict(configs, k, link_options, start)
    a, b = k // 2, k - 1
    figures = {}
    for name, rtl, sim in (("first", measured[0] - start, model[0] - start),
                           ("period", (measured[b] - measured[a]) / (b - a),
                            (model[b] - model[a]) / (b - a))):
        figures[f"{name}_rtl"] = float(rtl)
        figures[f"{name}_model"] = float(sim)
        figures[f"{name}_error"] = float(sim / rtl - 1)
    figures["within_2pct"] = all(abs(figures[f"{n}_error"]) <= 0.02
                                 for n in ("first", "period"))
    return figures


# -- the training chain (nnrtl.sim.tb.fpdeep.chain_train) ------------------------------

#: Cycles from a write into an Amaranth ``SyncFIFOBuffered`` to its ``r_rdy`` (the
#: adapter's own-block FIFO): the FIFO's write, then its output register.
FIFO_LATENCY = 2

#: A beat taken out of a receive FIFO in cycle ``c`` frees a credit as if a beat were
#: handed to the sender's FIFO in ``c + 2``: its pending credit granted in ``c + 1``, the
#: credit flit's word in ``c + 2``, the sender's count seen by its grant in ``c + 3``
#: (:mod:`nnrtl.hw.fpdeep.link`'s credit flits).
CREDIT_RETURN = 2


def train_timing(cfg):
    """The :class:`NodeTiming` of a training node's segment ``cfg``: :func:`rtl_timing`'s
    forward, and the update of :mod:`nnrtl.hw.fpdeep.update` at
    :func:`~nnrtl.hw.fpdeep.update.row_cycles` a row (the PG drain's 2 cycles a row
    overlapped behind it); ``update_latency``: PG's δ-to-LGB-write latency (fixed16 2,
    fp32 the multiplier's stages + 1, :mod:`nnrtl.hw.fpdeep.pg`), the drain's start once
    nothing is in flight (1), the update's last row (its latency, ``row_cycles − 1``),
    the ``done`` register (1) and the window counter ``ahead`` that reopens FP (1)."""
    pg = 2 if cfg.precision == "fixed16" else cfg.multiplier_stages + 1
    rows = row_cycles(cfg)
    return dataclasses.replace(rtl_timing(cfg), update_row_cycles=rows,
                               update_latency=pg + 1 + (rows - 1) + 1 + 1)


class _Wire:
    """One direction of a chain link (:mod:`nnrtl.hw.fpdeep.link`) carrying one data path:
    a beat handed to the transmit FIFO in cycle ``h`` is granted from cycle ``h + 1``
    (the FIFO's level), a grant is made in the cycle the previous packet's last word is
    on the wire (no idle cycle between packets), a packet is a header and the
    ``min(waiting, max_beats)`` beats waiting at its grant, ``words_per_beat`` words each,
    one word a cycle; a beat reaches the receiver :func:`link_latency` cycles after its
    last word. :meth:`words` adds the credits: the credit source (the cycles the
    receiver took the other direction's beats) takes turns with the data in round robin,
    a credit flit (one word) returning every credit pending at its grant, and a beat waits
    for its credit; :meth:`send`, the timing, leaves both out (under the ``none``
    pattern the credit flits delay no beat the chain's cycles depend on: checked by
    :func:`compare_train`)."""

    def __init__(self, link, path):
        self.link, self.wpb = link, link.words_per_beat(path)

    def send(self, ready):
        """Arrival cycles at the receiver of beats handed over at ``ready`` (ascending)."""
        return self._run(np.asarray(ready, np.float64))[0] + link_latency(self.link)

    def words(self, ready, consumed, credits, end):
        """Link words (headers, beats, credit flits) on the wire before cycle ``end``: the
        beats handed over at ``ready`` and taken by the receiver at ``consumed`` (a beat
        is sent on a credit: :attr:`~nnrtl.hw.fpdeep.link_config.LinkConfig.rx_depth`
        beats before it taken, its credit flit back: :data:`CREDIT_RETURN`), the credit
        flits of the other direction's beats taken at ``credits``."""
        times = self._run(np.asarray(ready, np.float64), np.sort(np.asarray(credits)),
                          np.asarray(consumed, np.float64))[1]
        return int(np.count_nonzero(np.asarray(times) < end))

    def _run(self, beats, credits=np.zeros(0), consumed=None):
        done, times = np.empty(beats.size), []
        depth = self.link.rx_depth
        if consumed is not None:            # beat i waits for beat i - depth's credit
            allowed = np.full(beats.size, -np.inf)
            allowed[depth:] = consumed[:beats.size - depth] + CREDIT_RETURN
            beats = np.maximum.accumulate(np.maximum(beats, allowed))
        free, i, c, turn = -1.0, 0, 0, 0     # turn: 0 data next, 1 credits
        while i < beats.size or c < credits.size:
            nxt = min(beats[i] if i < beats.size else np.inf,
                      credits[c] if c < credits.size else np.inf)
            grant = max(free, nxt + 1)
            data = i < beats.size and beats[i] <= grant - 1
            credit = c < credits.size and credits[c] <= grant - 1
            if credit and (not data or turn == 1):
                c = int(np.searchsorted(credits, grant - 1, "right"))
                times.append(grant + 1)
                free, turn = grant + 1, 0
                continue
            j = min(int(np.searchsorted(beats, grant - 1, "right")), i + self.link.max_beats)
            steps = np.arange(1, j - i + 1) * self.wpb
            done[i:j] = grant + 1 + steps
            times.extend(grant + 1 + np.arange((j - i) * self.wpb + 1))
            free, i, turn = float(done[j - 1]), j, 1
        return done, times


def _sfu_backward(cfg, arrivals, after, ready=None):
    """:class:`~nnrtl.hw.fpdeep.eb.SfuBackward`'s schedule: per pooled row it takes the
    row's ``pool_out · G`` error beats (one a cycle, as they arrive, not before
    ``after``), then sends the map rows it completes, ``w_out · G`` δ beats each, one a
    cycle from the cycle after (PG holds a δ beat ``passes`` cycles: one per ``passes``),
    each not before its ``ready`` (PG's window for it); taking and sending alternate.
    Returns (take cycles, δ cycles)."""
    s = cfg.pool[1] if cfg.pool is not None else 1      # no pool: a row per error row
    per_row, out_row = cfg.pool_out * cfg.groups, cfg.w_out * cfg.groups
    takes, deltas, t = [], [], float(after) - 1
    for r in range(cfg.pool_out):
        for b in range(per_row):
            t = max(float(arrivals[r * per_row + b]), t + 1)
            takes.append(t)
        rows = (cfg.w_out if r == cfg.pool_out - 1 else min(s * (r + 1), cfg.w_out)) - s * r
        for _ in range(rows * out_row):
            t = max(t + cfg.passes, ready[len(deltas)] if ready is not None else -np.inf)
            deltas.append(t)
    return np.asarray(takes), np.asarray(deltas)


def _stream(ready, after):
    """Cycles a stream of beats goes one a cycle, each not before its ``ready`` nor before
    ``after`` (the first)."""
    out, t = np.empty(len(ready)), float(after) - 1
    for i, r in enumerate(ready):
        t = out[i] = max(float(r), t + 1)
    return out


def predict_train(config, images, link_options=None):
    """The cluster simulator's run of the training chain ``config`` (a
    :class:`~nnrtl.hw.fpdeep.chain_link.ChainConfig`) over ``images`` images, the host of
    :func:`nnrtl.sim.tb.fpdeep.chain_train.run` under the ``none`` pattern: returns
    ``{"cycles", "link_words": [{"forward", "backward"}, ...], "image_cycles"}`` as that
    report has them (``image_cycles``: the cycle each image's last beat reached the host).

    Per node a :class:`NodeModel` (the FP of one node's :func:`chain_plan`, its
    :meth:`~NodeModel.update`), the adapter's rules
    (:class:`~nnrtl.hw.fpdeep.chain_link.NodeLink`: beats pass a node in the cycle it
    takes them, a pixel reaches FP the cycle after its last beat, image ``k + lag`` not
    before the node took its error block of image ``k``, its own block through a
    :data:`FIFO_LATENCY` FIFO after the image and the relayed blocks), the update window
    (the FP of image ``k`` waits for update ``⌊(k + 1 − lag) / B⌋``; the adapter holds
    one pixel meanwhile), :func:`_sfu_backward` with PG's line buffer (the FP's rule of
    :mod:`.cluster_node`) and a :class:`_Wire` per link direction."""
    if not isinstance(config, ChainConfig):
        raise TypeError(f"config must be a ChainConfig, not {config!r}")
    if not isinstance(images, int) or isinstance(images, bool) or images < 1:
        raise TypeError(f"images must be a positive integer, not {images!r}")
    n, lag, batch = len(config.nodes), config.lag, config.batch
    cfgs = [config.segment(m) for m in range(n)]
    timings = [train_timing(cfg) for cfg in cfgs]
    models = [NodeModel(chain_plan([cfg]), 1, t, 0.0, 0, act_ram_samples=0) for cfg, t in zip(cfgs, timings)]
    link = LinkConfig.from_fp(cfgs[0], "down", **(link_options or {}))
    fwd, bwd = [_Wire(link, "act") for _ in cfgs[1:]], [_Wire(link, "error") for _ in cfgs[1:]]
    per_pixel, image = config.pixel_beats, config.image_beats
    # the host loads every LPRAM (a row a cycle, the update's rows) before the first image
    start = max(update_rows(_segment(cfg)) for cfg in cfgs)
    node_free = [float(start)] * n             # each adapter's act path: next cycle free
    err_free = [0.0] * n
    reopen = [[0.0] for _ in range(n)]         # per node: FP reopening after update u
    own_err = [[] for _ in range(n)]           # per node and image: own error block taken
    sent = [[] for _ in range(n)]              # per node: cycles it sent beats downstream
    taken = [[] for _ in range(n)]             # per node: cycles it took beats from upstream
    err_sent = [[] for _ in range(n)]          # per node: error beats relayed upstream
    err_taken = [[] for _ in range(n)]         # per node: error beats taken from downstream
    back, host_err = [], float(start)

    def forward(k):
        version = max(0, (k + 1 - lag) // batch)
        arrivals = None
        for m in range(n):
            cfg, model = cfgs[m], models[m]
            window = own_err[m][k - lag] + 1 if k >= lag else 0.0
            if arrivals is None:                # the host: a beat a cycle once allowed
                arrivals = np.full(image, host_start(k))
            beats = _stream(arrivals[:image], max(node_free[m], window))
            gate = reopen[m][version]           # computed: its batch's errors came first
            if beats.size > per_pixel and beats[per_pixel] < gate:
                beats[per_pixel:] = _stream(arrivals[per_pixel:image], gate)
            pixels = beats[per_pixel - 1::per_pixel] + 1
            pixels[0] = max(pixels[0], gate)
            model.forward(k, {}, 0.0, pixels)
            pooled = model.outputs[-1]
            own = (pooled[:, None] - np.arange(cfg.groups)[::-1][None, :]).ravel()
            relay = _stream(arrivals[image:], beats[-1] + 1)
            mine = _stream(own + FIFO_LATENCY, relay[-1] + 1 if relay.size else beats[-1] + 1)
            out = np.concatenate([beats, relay, mine])
            taken[m].extend(np.concatenate([beats, relay]))
            sent[m].extend(out)
            node_free[m] = float(out[-1]) + 1
            arrivals = fwd[m].send(out) if m + 1 < n else None
            if m + 1 == n:
                back.append(float(out[-1]))

    def host_start(k):
        return node_free[0] if k < lag else max(node_free[0], host_done[k - lag] + 1)

    host_done = []

    def backward(k):
        nonlocal host_err
        ready = back[min(images - 1, k + lag - 1)] + 1
        arrivals = np.full(config.host_beats, max(host_err, ready))
        for m in reversed(range(n)):
            cfg, own = cfgs[m], config.block_beats(m)
            # PG's line buffer takes the image from the Act-RAM once the previous
            # image's windows have left (its last δ), a pixel a cycle; a δ beat joins
            # its window the cycle after the window's last pixel
            window = models[m].plan.maps(0)[0]
            ready = np.repeat(err_free[m] + window + 1, cfg.groups)
            takes, deltas = _sfu_backward(cfg, arrivals[:own], err_free[m], ready)
            relay = _stream(arrivals[own:], takes[-1] + 1)
            own_err[m].append(float(takes[-1]))
            err_taken[m].extend(np.concatenate([takes, relay]))
            err_free[m] = float(deltas[-1]) + 1
            if (k + 1) % batch == 0:
                reopen[m].append(models[m].update(deltas[-1]))
            if m == n - 1:
                done = relay[-1] if relay.size else takes[-1]
                host_done.append(float(done))
                host_err = float(done) + 1
            if m:
                err_sent[m].extend(relay)
                arrivals = bwd[m - 1].send(relay)

    for k in range(min(lag, images)):
        forward(k)
    for k in range(images):
        backward(k)
        if k + lag < images:
            forward(k + lag)
    end = host_done[-1] + 1
    words = [{"forward": fwd[b].words(sent[b], taken[b + 1], err_taken[b], end),
              "backward": bwd[b].words(err_sent[b + 1], err_taken[b], taken[b + 1], end)}
             for b in range(n - 1)]
    return {"cycles": int(end), "link_words": words, "image_cycles": back}


def _segment(cfg):
    """The simulator's segment of the FP module ``cfg``."""
    return chain_plan([cfg]).nodes[0].segments[0]


def compare_train(config, report, link_options=None):
    """The training chain bench's ``report`` (:func:`nnrtl.sim.tb.fpdeep.chain_train.run`,
    pattern ``none``) beside :func:`predict_train` for the same chain and images: per
    figure (``cycles``, each boundary's ``forward`` and ``backward`` link words) the RTL's,
    the model's and the relative difference; ``within_2pct`` over all of them."""
    images = len(report["received"])
    model = predict_train(config, images, link_options)
    rows = [("cycles", report["cycles"], model["cycles"])]
    for b, (rtl, sim) in enumerate(zip(report["link_words"], model["link_words"])):
        for way in ("forward", "backward"):
            rows.append((f"link{b + 1}_{way}", rtl[way], sim[way]))
    table = [{"figure": name, "rtl": int(rtl), "model": int(sim),
              "error": float(sim / rtl - 1)} for name, rtl, sim in rows]
    return {"table": table, "within_2pct": all(abs(r["error"]) <= 0.02 for r in table)}

"""The cluster simulator's plan (what crosses each boundary) and its node model.

:class:`ClusterPlan` reads ``mapping.json`` and derives, per layer, the nodes that hold it,
the pixel dependency maps (spec §3.7) and, per boundary and direction, the typed streams
of spec §2.10 / §3.1 (datapaths 1-6), with the words each message carries, so that a
boundary's words per sample are the mapper's (:mod:`.links`) except on a boundary inside
the first layer, where no EB exists (spec §2.8) and so no error stream either.

:class:`NodeModel` is one FPGA: per segment its FP, EB and PG modules (:func:`.serve`,
``⌈n_out/P⌉ · ⌈n_in/Q⌉`` cycles per output pixel plus :attr:`NodeTiming.extra_cycles_per_pixel`,
all three over the segment's output pixels: EB as the transposed convolution, scattering
each δ pixel into its window, so an input-error pixel is complete when the last δ pixel
whose window holds it is done), its Act-RAM and PAB occupancy, and the links it sends on.

Pixel rules (spec §3.7): an FP output pixel starts when the last input pixel of its window
has arrived (raster order, so that one is the window's bottom-right pixel) and been taken
by the FP line buffer (:mod:`nnrtl.hw.fpdeep.line_buffer`, its structure, at the segment's
``line_pixels`` = ``m`` pixels a cycle, the RTL's ``m = 1``:
an image's first pixel once the previous image's windows have all left, a window valid
the cycle after its last pixel is taken; so a segment spends ``cycles + (K − 1 − pad) ·
(w_in + 1) / m + 1`` a sample when it is the slowest, the refill: +0.02% on VGG-16's
conv2_1 at 32 x 32, +11% (8 on 72) on the 6 x 6 test chains; checked against the RTL chain by
:mod:`.cluster_chain`), and never fewer cycles a sample than its input pixels over ``m``:
AlexNet's conv1 (224 x 224, stride 4) needs 50,176 at ``m = 1``, the mapper's ``m`` keeps
it within its period (:func:`.cost.line_pixels_for`); a non-first
node of a layer adds (ICP) or appends (OCP) the partial that arrives from upstream in its
PAB of one output row (:func:`_pab`: FP holds a finished pixel while the PAB is full); the
node that completes the layer pools: a pooled pixel is ready when the last pixel of its
pool window is; a fully connected layer steps over its input pixels as they arrive
(``cycles / input pixels`` each) and has its output after the last. BP mirrors FP: the
completing node unpools the error (a δ pixel is ready when the last pooled error pixel
holding it is) and relays δ upstream (DP3); EB errors are gathered (ICP, DP4) or reduced
(OCP) upstream; PG pops an Act-RAM pixel when the last δ pixel whose window holds it is done.
"""

import dataclasses
import math

import numpy as np

from ..errors import UsageError
from .cluster_link import STREAM_PATHS, Link, serve
from .config import NodePlan

__all__ = ["NodeTiming", "ClusterPlan", "NodeModel", "update_rows"]


@dataclasses.dataclass(frozen=True)
class NodeTiming:
    """Cycle parameters of a node, the ones to calibrate from the RTL's cycle counts
    (defaults: one cycle per adder, SFU stage, relay and loss; no pipeline latency in the
    modules).

    Attributes
    ----------
    fp_latency, eb_latency, pg_latency : int
        Cycles from a pixel's last MAC cycle to its result leaving the module.
    add_latency : int
        The chained partial-sum add (ICP, DP2) and the partial-error add (OCP EB).
    sfu_latency : int
        ReLU/pool forward, unpool/ReLU' backward.
    relay_latency : int
        A bypassed or relayed message through a node (DP1, DP3, DP4, DP5, DP6).
    loss_latency : int
        From the last layer's output to its δ.
    source_cycles_per_pixel : int
        The host streams the image at one pixel per this many cycles once admitted (0,
        the default: the image is in node 1's memory when admitted; the paper leaves the
        host out, and at 1 pixel per cycle a 224 x 224 image alone takes 50,176 cycles,
        longer than AlexNet's period on 100 FPGAs).
    extra_cycles_per_pixel : int
        Added to every module's ``⌈n_out/P⌉ · ⌈n_in/Q⌉`` cycles per output pixel.
    update_row_cycles, update_latency : int
        The mini-batch's weight update (:meth:`NodeModel.update`): cycles per LGB row of
        the PG drain through the update, and the cycles from the batch's last δ to the
        drain's first row plus from its last row to FP reopening (0, the default: the
        update is not modelled, as in the mapper's period).
    """

    fp_latency: int = 0
    eb_latency: int = 0
    pg_latency: int = 0
    add_latency: int = 1
    sfu_latency: int = 1
    relay_latency: int = 1
    loss_latency: int = 1
    source_cycles_per_pixel: int = 0
    extra_cycles_per_pixel: int = 0
    update_row_cycles: int = 0
    update_latency: int = 0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UsageError(f"timing {field.name} must be a non-negative integer, "
                                 f"not {value!r}")

    def update_cycles(self, segment):
        """Cycles the weight update of ``segment`` holds its FP: the LGB's ``(Q·K² + 1) ·
        G · passes`` rows (:mod:`nnrtl.hw.fpdeep.update`, the bias bank included) at
        :attr:`update_row_cycles` each, plus :attr:`update_latency`."""
        return update_rows(segment) * self.update_row_cycles + self.update_latency

    def cycles_per_pixel(self, segment):
        """Cycles per output pixel of each module of ``segment``."""
        return (-(-segment.n_out // segment.p) * -(-segment.n_in // segment.q)
                + self.extra_cycles_per_pixel)


def update_rows(segment):
    """LGB rows of ``segment``'s weight update (and LPRAM rows the host loads):
    ``(Q·K² + 1) · G · passes`` (:mod:`nnrtl.hw.fpdeep.update`, the bias bank included)."""
    groups = -(-segment.n_out // segment.p)
    passes = -(-segment.n_in // segment.q)
    return (segment.q * segment.k ** 2 + 1) * groups * passes


def _rows(n):
    return np.arange(n * n) // n, np.arange(n * n) % n


class ClusterPlan:
    """The chain as the simulator runs it, from the parsed ``mapping.json`` ``found``."""

    def __init__(self, found, where="mapping.json"):
        try:
            self.layers = [dict(layer) for layer in found["network"]["layers"]]
            self.nodes = [NodePlan.from_json(node) for node in found["nodes"]]
            self.word_bits = int(found["cost_model"]["word_bits"])
            self.precision = found["cost_model"]["precision"]
            self.clock_hz = float(found["cost_model"]["clock_hz"])
            self.link_gbps = found["options"]["link_gbps"]
            self.convention = found["options"]["link_convention"]
            summary = found["summary"]
            self.period = int(summary["period_cycles"])
            self.ddr_period = int(summary["ddr_period_cycles"])
            self.work = int(found["network"]["work_macs_per_sample"])
            self.boundary_bits = [(b["forward_bits_per_sample"], b["backward_bits_per_sample"])
                                  for b in found["boundaries"]]
        except (KeyError, TypeError, ValueError) as error:
            raise UsageError(f"{where}: not a mapping written by 'nnrtl map' ({error!r} "
                             f"missing or malformed)") from None
        self.name = found["network"].get("name", "network")
        #: Every node of the first layer reads its input channels from the host (DP1 by
        #: the host, as the RTL chain bench delivers them), none bypassed on the links.
        self.host_inputs = bool(found["options"].get("host_inputs", False))
        self.n = len(self.nodes)
        self.span = {}
        self.segment = {}
        for node in self.nodes:
            for seg in node.segments:
                first, last = self.span.get(seg.index, (node.node, node.node))
                self.span[seg.index] = (min(first, node.node), max(last, node.node))
                self.segment[seg.index, node.node] = seg
        if sorted(self.span) != list(range(len(self.layers))):
            raise UsageError(f"{where}: the nodes' segments do not cover layers 0..."
                             f"{len(self.layers) - 1} (found {sorted(self.span)})")
        self.hosted = [h for node in self.nodes for h in node.hosted]
        self._maps = {}

    # -- pixel counts and maps ---------------------------------------------------------
    def is_conv(self, l):
        return self.layers[l]["kind"] == "conv"

    def pooled_side(self, l):
        layer = self.layers[l]
        if layer["pool"] is None:
            return layer["w_out"]
        k, s, p = layer["pool"]
        return (layer["w_out"] + 2 * p - k) // s + 1

    def out_px(self, l):
        return self.layers[l]["w_out"] ** 2 if self.is_conv(l) else 1

    def pooled_px(self, l):
        return self.pooled_side(l) ** 2 if self.is_conv(l) else 1

    def in_px(self, l):
        """Messages of layer ``l``'s input stream: the producer's pixels."""
        if l == 0:
            return self.layers[0]["w_in"] ** 2 if self.is_conv(0) else 1
        return self.pooled_px(l - 1)

    def in_words(self, l):
        layer = self.layers[l]
        return layer["ic"] * layer["w_in"] ** 2

    def maps(self, l):
        """``(window, scatter, pool, unpool)`` index maps of layer ``l``: the last input
        pixel of each output pixel's window; the last output pixel whose window holds
        each input pixel; the last conv pixel of each pooled pixel's window; the pooled
        pixel holding each conv pixel last."""
        if l in self._maps:
            return self._maps[l]
        layer, n_in = self.layers[l], self.in_px(l)
        if not self.is_conv(l):
            # a fully connected layer steps over its input pixels (input-stationary: each
            # input pixel's weight columns as it arrives), its one output after the last
            steps = np.arange(n_in)
            found = (steps, steps, np.array([0]), np.array([0]))
        else:
            w_in, w_out, k, s, p = (layer[key] for key in ("w_in", "w_out", "k", "stride",
                                                           "pad"))
            if n_in != w_in ** 2:
                raise UsageError(f"layer {layer['name']}: its {w_in} x {w_in} input is not "
                                 f"the previous layer's {n_in} pixels")
            y, x = _rows(w_out)
            last = lambda v: np.clip(v * s + k - 1 - p, 0, w_in - 1)      # noqa: E731
            window = last(y) * w_in + last(x)
            y, x = _rows(w_in)
            back = lambda v: np.clip((v + p) // s, 0, w_out - 1)          # noqa: E731
            scatter = back(y) * w_out + back(x)
            if layer["pool"] is None:
                pool = unpool = np.arange(w_out ** 2)
            else:
                pk, ps, pp = layer["pool"]
                side = self.pooled_side(l)
                y, x = _rows(side)
                end = lambda v: np.clip(v * ps - pp + pk - 1, 0, w_out - 1)  # noqa: E731
                pool = end(y) * w_out + end(x)
                y, x = _rows(w_out)
                hold = lambda v: np.clip((v + pp) // ps, 0, side - 1)   # noqa: E731
                unpool = hold(y) * side + hold(x)
            found = (window, scatter, pool, unpool)
        self._maps[l] = found
        return found

    # -- streams per boundary ------------------------------------------------------------
    def _channels(self, l, nodes):
        return sum(self.segment[l, m].hi - self.segment[l, m].lo for m in nodes
                   if (l, m) in self.segment)

    def forward_streams(self, j):
        """``[(key, messages, words per message), ...]`` node ``j`` sends to ``j + 1``."""
        result = []
        for l in range(len(self.layers)):
            first, last = self.span[l]
            layer = self.layers[l]
            per_px = layer["w_in"] ** 2 / self.in_px(l)
            if first <= j < last:
                seg = self.segment[l, first]
                if seg.mode == "ICP":
                    down = self._channels(l, range(j + 1, last + 1))
                    if not (self.host_inputs and l == 0):
                        result.append((("bypass", l), self.in_px(l), down * per_px))
                    result.append((("partial", l), self.out_px(l), float(layer["oc"])))
                else:
                    up = self._channels(l, range(first, j + 1))
                    if not (self.host_inputs and l == 0):
                        result.append((("bypass", l), self.in_px(l), layer["ic"] * per_px))
                    result.append((("partial", l), self.out_px(l), float(up)))
            elif l + 1 < len(self.layers) and last == j and self.span[l + 1][0] == j + 1:
                result.append((("act", l + 1), self.in_px(l + 1),
                               self.in_words(l + 1) / self.in_px(l + 1)))
        for h in self.hosted:
            if h.host <= j < h.consumer:
                result.append((("param", h.host, h.consumer, h.layer), 1, float(h.words)))
        return result

    def backward_streams(self, j):
        """``[(key, messages, words per message), ...]`` node ``j + 1`` sends to ``j``."""
        result = []
        for l in range(len(self.layers)):
            first, last = self.span[l]
            layer = self.layers[l]
            per_px = layer["w_in"] ** 2 / self.in_px(l)
            eb = self.segment[l, last].modules == 3
            if first <= j < last:
                seg = self.segment[l, first]
                if seg.mode == "ICP":
                    down = self._channels(l, range(j + 1, last + 1))
                    result.append((("delta", l), self.out_px(l), float(layer["oc"])))
                    if eb:
                        result.append((("errors", l), self.in_px(l), down * per_px))
                else:
                    up = self._channels(l, range(first, j + 1))
                    if eb:
                        result.append((("errors", l), self.in_px(l), layer["ic"] * per_px))
                    result.append((("delta", l), self.out_px(l), float(up)))
            elif l + 1 < len(self.layers) and last == j and self.span[l + 1][0] == j + 1:
                result.append((("err", l + 1), self.in_px(l + 1),
                               self.in_words(l + 1) / self.in_px(l + 1)))
        for h in self.hosted:
            if h.host <= j < h.consumer:
                result.append((("grad", h.host, h.consumer, h.layer), 1, float(h.words)))
        return result


class _Segment:
    """A segment's state on its node: module free times and measurements."""

    def __init__(self, plan, seg, node, timing, act_ram_samples):
        self.seg = seg
        self.l = seg.index
        self.first, self.last = plan.span[self.l]
        self.node = node
        self.cycles = timing.cycles_per_pixel(seg)
        self.steps = plan.in_px(self.l) if seg.kind == "fc" else plan.out_px(self.l)
        if seg.kind == "fc":                  # per input pixel; the weights from DDR
            self.cycles = max(self.cycles, plan.ddr_period) / self.steps
        if seg.act_ram_in_ddr:                # its Act-RAM's channel: a sample's traffic
            self.cycles = max(self.cycles,
                              plan.nodes[node - 1].act_ddr_cycles / self.steps)
        self.pab_depth = seg.pab_pixels   # output pixels of n_out words
        self.pab_leave = np.full(self.pab_depth, -np.inf)   # the last pixels' leaving
        layer = plan.layers[self.l]
        self.act_words = seg.n_in * layer["w_in"] ** 2 / plan.in_px(self.l)
        self.fp_free = self.eb_free = self.pg_free = 0.0
        self.lb_free = 0.0         # when the FP line buffer takes the next image's pixels
        self.writes = {}           # sample -> Act-RAM write times (until PG frees them)
        self.frees = []            # [(last free, sorted free times)] of live samples
        self.act_peak = 0.0
        self.pab_peak = 0.0
        self.fp_start = []
        self.pg_end = []
        self.in_px = plan.in_px(self.l)
        if act_ram_samples is None:        # the mapping's depth, in input pixels
            self.depth = int(math.ceil(seg.residency * seg.n_in * layer["w_in"] ** 2)
                             // self.act_words)
        elif act_ram_samples == 0:
            self.depth = None
        else:
            self.depth = math.ceil(act_ram_samples * self.in_px)
        if self.depth is not None and self.depth < self.in_px:
            raise UsageError(
                f"node {node}, {seg.layer}: an Act-RAM of {self.depth} input pixels holds less "
                f"than one sample's {self.in_px}: a sample's FP cannot finish before its PG "
                f"frees them (deadlock); give act_ram_samples of at least 1")
        self.freed = {}            # sample -> the cycle PG frees each input pixel

    def needs(self, s):
        """The last sample whose PG must be done before FP of sample ``s`` may start
        (its Act-RAM credits), or -1."""
        if self.depth is None:
            return -1
        return (s * self.in_px + self.in_px - 1 - self.depth) // self.in_px

    def credits(self, s):
        """The cycle each input pixel of sample ``s`` gets an Act-RAM slot: the one
        freed by the pixel ``depth`` writes earlier (FIFO)."""
        if self.depth is None:
            return 0.0
        before = s * self.in_px + np.arange(self.in_px) - self.depth
        result = np.zeros(self.in_px)
        for sample in np.unique(before[before >= 0] // self.in_px):
            mask = (before >= 0) & (before // self.in_px == sample)
            result[mask] = self.freed[int(sample)][before[mask] % self.in_px]
        for old in [k for k in self.freed if k < s - self.depth // self.in_px - 1]:
            del self.freed[old]
        return result


class NodeModel:
    """Node ``node`` (1-based) of ``plan``: :meth:`forward` and :meth:`backward` per sample,
    in sample order, given the arrivals of the streams from its neighbours."""

    def __init__(self, plan, node, timing, cycles_per_word, latency, act_ram_samples=None,
                 framing=None):
        self.plan, self.node, self.timing = plan, node, timing
        config = plan.nodes[node - 1]
        self.config = config
        self.segments = [_Segment(plan, seg, node, timing, act_ram_samples)
                         for seg in config.segments]
        self.down = Link(cycles_per_word, latency, framing) if node < plan.n else None
        self.up = Link(cycles_per_word, latency, framing) if node > 1 else None
        self.loss = {}
        self.losses = []
        self.outputs = []          # per sample: the last layer's pooled pixels' times
        self.done = []
        self.source_free = 0.0

    def needs(self, s):
        """The last sample whose BP must be done here before FP of sample ``s``."""
        return max(state.needs(s) for state in self.segments)

    def _send(self, link, specs, ready):
        streams = [(ready[key], words) for key, count, words in specs]
        for (key, count, _), (r, _) in zip(specs, streams):
            if r.size != count:
                raise AssertionError(f"stream {key}: {r.size} messages, plan says {count}")
        paths = [STREAM_PATHS[key[0]] for key, _, _ in specs]
        cycles = {("partial", state.l): state.cycles for state in self.segments}
        paced = [cycles.get(key, 0.0) for key, _, _ in specs]
        return dict(zip((key for key, _, _ in specs), link.send(streams, paths, paced)))

    def forward(self, s, incoming, inject=0.0, arrivals=None):
        """FP of sample ``s``; ``incoming``: arrivals from node ``node - 1`` (or nothing on
        node 1, whose image starts at ``inject``, or, given ``arrivals``, whose image
        pixels arrive at those cycles); returns the arrivals at ``node + 1``."""
        plan, t = self.plan, self.timing
        out, local = {}, {}
        started = None
        for state in self.segments:
            l, seg = state.l, state.seg
            window, _, pool, _ = plan.maps(l)
            if l == 0 and (self.node == state.first or plan.host_inputs):
                begin = max(inject, self.source_free)
                acts = begin + np.arange(plan.in_px(0), dtype=np.float64) \
                    * t.source_cycles_per_pixel
                if arrivals is not None:
                    acts = np.maximum(acts, np.asarray(arrivals, dtype=np.float64))
                self.source_free = float(acts[-1]) + t.source_cycles_per_pixel
            elif self.node == state.first:
                acts = local[l] if ("act", l) not in incoming else incoming["act", l]
            else:
                acts = incoming["bypass", l]
            arrived = acts
            acts = np.maximum(acts, state.credits(s))      # waits for an Act-RAM slot
            if seg.kind == "conv":
                # the line buffer takes the segment's line_pixels a cycle (pixel i of
                # an image at i / m), an image's first once the previous image's windows
                # have all left; a window leaves the cycle after the pixel completing it
                # is taken
                acts, _ = serve(acts, 1 / seg.line_pixels, state.lb_free)
                acts = acts + 1
            ready = acts[window]
            for key, value in incoming.items():
                if key[0] == "param" and key[2] == self.node and key[3] == seg.layer:
                    ready = np.maximum(ready, value[0])
            free = state.fp_free
            add = t.add_latency if seg.mode == "ICP" else 0
            if self.node > state.first and seg.kind == "conv":
                start, handoff, finish, result = _pab(
                    ready, state.cycles, free, incoming["partial", l], state, t.fp_latency,
                    add)
            else:
                start, finish = serve(ready, state.cycles, free)
                handoff = finish[-1:] if seg.kind == "fc" else finish
                if self.node > state.first:          # the one output of an FC segment
                    _, handoff, finish, result = _pab(
                        handoff, 0.0, -np.inf, incoming["partial", l], state,
                        t.fp_latency, add)
                else:
                    finish = handoff + t.fp_latency
                    result = finish
            state.fp_free = state.lb_free = float(handoff[-1])
            state.fp_start.append(float(start[0]))
            started = float(start[0]) if started is None else started
            state.writes[s] = acts
            if self.node < state.last:
                out["partial", l] = result
                if not plan.host_inputs:
                    out["bypass", l] = arrived + t.relay_latency
                continue
            pooled = result[pool] + t.sfu_latency
            if l + 1 == len(plan.layers):
                self.outputs.append(pooled)
                self.loss[s] = float(pooled[-1]) + t.loss_latency
                self.losses.append(self.loss[s])
            elif plan.span[l + 1][0] == self.node:
                local[l + 1] = pooled
            else:
                out["act", l + 1] = pooled
        for key, value in incoming.items():
            if key[0] == "param" and key[2] != self.node:
                out[key] = value + t.relay_latency
        for h in self.config.hosted:
            out["param", h.host, h.consumer, h.layer] = np.array([started])
        if self.down is None:
            return {}
        return self._send(self.down, plan.forward_streams(self.node), out)

    def update(self, last_delta):
        """The mini-batch's weight update (spec §3.8, :mod:`nnrtl.hw.fpdeep.node`'s update
        window): once the batch's last δ (at ``last_delta``) has gone through PG, the drain
        runs through the update while FP is held; returns the cycle FP reopens, from
        which each segment's FP and its line buffer take the next image."""
        reopen = float(last_delta)
        for state in self.segments:
            reopen = max(reopen, last_delta + self.timing.update_cycles(state.seg))
        for state in self.segments:
            state.fp_free = max(state.fp_free, reopen)
            state.lb_free = max(state.lb_free, reopen)
        return reopen

    def backward(self, s, incoming):
        """BP of sample ``s``; ``incoming``: arrivals from node ``node + 1``; returns the
        arrivals at ``node - 1``."""
        plan, t = self.plan, self.timing
        out, local = {}, {}
        done = 0.0
        for state in reversed(self.segments):
            l, seg = state.l, state.seg
            _, scatter, _, unpool = plan.maps(l)
            if self.node == state.last:
                if l + 1 == len(plan.layers):
                    errors = np.full(plan.pooled_px(l), self.loss.pop(s))
                else:
                    errors = local[l + 1] if ("err", l + 1) not in incoming \
                        else incoming["err", l + 1]
                delta = errors[unpool] + t.sfu_latency
            else:
                delta = incoming["delta", l]
            if self.node > state.first:
                out["delta", l] = delta + t.relay_latency
            if seg.kind == "fc":
                delta = np.full(state.steps, delta[0])
            start, finish = serve(delta, state.cycles, state.pg_free)
            state.pg_free = float(finish[-1])
            finish = finish + t.pg_latency
            state.pg_end.append(float(finish[-1]))
            done = max(done, float(finish[-1]))
            # a FIFO (spec §3.3): PG pops a pixel once its last window is done and every
            # pixel before it has been popped
            frees = np.maximum.accumulate(finish[scatter])
            state.freed[s] = frees
            self._act_ram(state, s, frees)
            for h in plan.hosted:
                if h.consumer == self.node and h.layer == seg.layer:
                    out["grad", h.host, h.consumer, h.layer] = finish[-1:].copy()
            if seg.modules == 3:
                start, finish = serve(delta, state.cycles, state.eb_free)
                state.eb_free = float(finish[-1])
                errors = finish[scatter] + t.eb_latency
                done = max(done, float(errors.max()))
                if self.node < state.last:
                    errors = np.maximum(errors, incoming["errors", l]) + (
                        t.add_latency if seg.mode == "OCP" else 0)
                if self.node > state.first:
                    out["errors", l] = errors
                elif plan.span[l - 1][1] == self.node:
                    local[l] = errors
                else:
                    out["err", l] = errors
        for key, value in incoming.items():
            if key[0] == "grad" and key[1] != self.node:
                out[key] = value + t.relay_latency
        self.done.append(done)
        if self.up is None:
            return {}
        return self._send(self.up, plan.backward_streams(self.node - 1), out)

    def _act_ram(self, state, s, frees):
        """Peak Act-RAM words: at each write of sample ``s``, the pixels of ``s`` written
        and not yet freed plus those of the earlier samples still held (a later sample's
        pixels arrive after ``s``'s on the same stream)."""
        writes = state.writes.pop(s)
        frees = np.sort(frees)
        held = np.arange(1, writes.size + 1) - np.searchsorted(frees, writes, "right")
        state.frees = [f for f in state.frees if f[-1] > writes[0]]
        for earlier in state.frees:
            held = held + earlier.size - np.searchsorted(earlier, writes, "right")
        state.act_peak = max(state.act_peak, float(held.max()) * state.act_words)
        state.frees.append(frees)

    def summary(self):
        """The node's measurements (JSON-able)."""
        storage = dict(self.config.storage)
        return {
            "node": self.node,
            "done": self.done,
            "losses": self.losses,
            "act_ram_peak_words": math.ceil(sum(s.act_peak for s in self.segments)),
            "act_ram_depth_words": storage.get("act_ram", 0) + self.config.act_ram_ddr_words,
            "pab_peak_words": math.ceil(sum(s.pab_peak for s in self.segments)),
            "pab_depth_words": storage.get("pab", 0),
            "segments": [{"layer": s.seg.layer, "fp_start": s.fp_start, "pg_end": s.pg_end}
                         for s in self.segments],
            "links": {name: dataclasses.asdict(link.stats) for name, link in
                      (("down", self.down), ("up", self.up)) if link is not None},
        }


def _pab(ready, cycles, free, partial, state, latency, add):
    """FP of a segment whose outputs meet the partials from upstream in its PAB of
    ``state.pab_depth`` pixels. The pixels take PAB slots in order: pixel ``i``'s
    operands enter once pixel ``i − depth`` has left (``L_i``); the FP holds a finished
    pixel (and so starts no other) until it may enter, the partial waits in its link's
    receive buffer. With ``h_i`` the cycle FP hands pixel ``i`` over, ``h_i = max(h_{i−1}
    + c, ready_i + c, L_i − latency)``, solved a PAB's depth of pixels at a time (within
    it the ``L_i`` are known) as a cumulative maximum. Returns ``(start, handoff, own
    entry, leave)`` per pixel and records the PAB's peak words on ``state``."""
    ready = np.asarray(ready, dtype=np.float64)
    partial = np.asarray(partial, dtype=np.float64)
    n, depth = ready.size, state.pab_depth
    handoff, leave = np.empty(n), np.empty(n)
    before = np.concatenate([state.pab_leave, leave])      # before[i]: pixel i − depth
    prev = float(free)
    for a in range(0, n, depth):
        b = min(n, a + depth)
        limit = before[a:b] if a == 0 else leave[a - depth:b - depth]
        steps = np.arange(b - a) * cycles
        base = np.maximum(ready[a:b] + cycles, limit - latency)
        handoff[a:b] = steps + np.maximum(prev + cycles,
                                          np.maximum.accumulate(base - steps))
        leave[a:b] = np.maximum(handoff[a:b] + latency, partial[a:b]) + add
        prev = float(handoff[b - 1])
    start = np.maximum(ready, np.concatenate([[free], handoff[:-1]]))
    own = handoff + latency
    limit = np.concatenate([state.pab_leave, leave])[:n]
    entry = np.minimum(own, np.maximum(partial, limit))
    held = state.pab_leave[np.isfinite(state.pab_leave)]
    held = held[held > entry[0]] if n else held
    events = np.concatenate([np.full(held.size, -np.inf), entry, held, leave])
    state.pab_peak = max(state.pab_peak,
                         _peak(events, held.size + n) * state.seg.n_out)
    state.pab_leave = np.concatenate([state.pab_leave, leave])[-depth:]
    return start, handoff, own, leave


def _peak(events, n):
    """Peak count of a buffer entered at ``events[:n]`` and left at ``events[n:]`` (a slot
    freed in a cycle is taken in the same cycle)."""
    change = np.concatenate([np.ones(n), -np.ones(events.size - n)])
    order = np.lexsort((change, events))         # at a tie, the leaving first
    return float(np.cumsum(change[order]).max())

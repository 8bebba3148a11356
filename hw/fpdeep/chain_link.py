"""The node-to-link adapter of an FPDeep training chain (spec §3.1, §3.2, §3.8): per node,
:class:`NodeLink` puts the node top's segment streams (:class:`~.node.FpdeepNode`
``s0_*``) onto the typed paths of its ``"up"`` and ``"down"`` link modules
(:class:`~.link.LinkModule`) and takes them back, so ``K`` node tops joined by link modules
train one convolution layer split by output channels (OCP, spec §2.8: every node completes
its channel range).

The chain (:class:`ChainConfig`)
--------------------------------
Node ``m`` (from 0, upstream first) holds output channels ``[lo_m, hi_m)`` of one layer:
each node needs the whole image and sends its own activations to the host; the host's error
of each node's activations comes back through the last node. Streams, all on beats of
``P`` words (the link's beat, :func:`~.link.beat_layout`):

* **DP1 ``act``, forward**, per image in this order: the image (``w_in²`` pixels, each
  ``⌈n_in / P⌉`` beats, the words past ``n_in`` zero), then the activation blocks of
  nodes ``0 … m`` (node ``j``'s ``out_beats`` beats: its SFU output, raster order,
  ``G_j`` beats a pooled pixel). Node ``m`` forwards the image and the blocks of nodes
  ``0 … m − 1`` as they come, and appends its own block; the last node's ``"down"``
  stream is the host's.
* **DP4 ``error``, backward**, per image: the error blocks of nodes ``m, m − 1 … 0``
  (node ``j``'s: ``out_beats`` beats in the order of its activations, the node's
  ``err_in``). Node ``m`` takes the first block and relays the others upstream.

Decisions ([U] in the spec)
---------------------------
* **Sharing a path: blocks in a fixed order, counted.** Several producers share one path
  (the image and each node's activations on DP1, each node's errors on DP4) as whole
  per-image blocks in node order; no tag is sent: the receiver knows every block's beat
  count from the configuration and counts (the ``last`` flags of the node's streams are
  regenerated from these counts, never carried). A node's own block is buffered
  (``out_beats`` deep, one image), so its FP never waits for the image to pass it: the
  order cannot deadlock. Several layer segments on one node would share the paths the
  same way (one block per segment and image, segment order); this adapter is built for
  one segment per node and refuses more (``ValueError``).
* **Images in flight: ``lag``**, the window of the stale-weight rule. A node starts
  taking image ``k + lag`` only after its own error block of image ``k`` has been taken
  by its node, so every node sees the same order of its streams (``act 0 … act lag−1,
  err 0, act lag, err 1, …``) whatever the links' timing, and the node's update window
  (:mod:`.node`) gives every node the same weight versions: the FP of image ``k`` uses
  the weights after ``max(0, ⌊(k + 1 − lag) / B⌋)`` updates (the trainer's rule with
  residency ``lag``, :meth:`nnrtl.gen.fpdeep.trainer.FpdeepTrainer.weight_version`).
  ``lag`` = 1 is plain SGD for batch 1.

Latency and throughput: a beat passes a node from ``up_act`` to ``down_act`` (and
``down_err`` to ``up_err``) combinationally, in the cycle it is taken; the image reaches
the node's FP one cycle after its pixel's last beat. One beat per cycle on each path; per
image the act path carries ``w_in²·⌈n_in/P⌉ + Σ out_beats`` beats, the error path
``Σ out_beats``.
"""

import dataclasses
import math

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .node import NodeConfig, act_layout
from .line_buffer import pixel_layout

__all__ = ["ChainConfig", "NodeLink"]


@dataclasses.dataclass(frozen=True)
class ChainConfig:
    """A chain of node tops training one OCP-split convolution layer.

    Attributes
    ----------
    nodes : tuple of NodeConfig
        Node ``m``'s RTL, upstream first: one completing segment each (the network's first
        layer: no EB), all of one precision, input map, kernel and ``P``, one batch.
    lag : int
        Images in flight per node (module docstring), at least 1.
    """

    nodes: tuple
    lag: int = 1

    def __post_init__(self):
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.nodes or not all(isinstance(n, NodeConfig) for n in self.nodes):
            raise TypeError(f"nodes must be a non-empty tuple of NodeConfig, not "
                            f"{self.nodes!r}")
        if not isinstance(self.lag, int) or isinstance(self.lag, bool) or self.lag < 1:
            raise TypeError(f"lag must be a positive integer, not {self.lag!r}")
        for n, node in enumerate(self.nodes):
            if len(node.segments) != 1:
                raise ValueError(f"node {n + 1} has {len(node.segments)} segments: the chain "
                                 f"adapter carries one layer segment per node")
            seg = node.segments[0]
            if not seg.completes or seg.partial_in or node.eb[0]:
                raise ValueError(f"node {n + 1}: the chain carries an OCP split of the first "
                                 f"layer (every segment completes, no partials, no EB)")
        first = self.segment(0)
        for n in range(1, len(self.nodes)):
            seg = self.segment(n)
            for name in ("precision", "w_in", "n_in", "k", "stride", "pad", "p", "pool"):
                if getattr(seg, name) != getattr(first, name):
                    raise ValueError(f"node {n + 1}: {name} {getattr(seg, name)!r} differs "
                                     f"from node 1's {getattr(first, name)!r}")
            if self.nodes[n].batch != self.nodes[0].batch:
                raise ValueError(f"node {n + 1}: batch {self.nodes[n].batch} differs from "
                                 f"node 1's {self.nodes[0].batch}")

    def segment(self, node):
        """Node ``node``'s (from 0) FpConfig."""
        return self.nodes[node].segments[0]

    @property
    def p(self):
        return self.segment(0).p

    @property
    def word_bits(self):
        return self.segment(0).word_bits

    @property
    def batch(self):
        return self.nodes[0].batch

    @property
    def pixel_beats(self):
        """Beats of one image pixel on the act path."""
        return math.ceil(self.segment(0).n_in / self.p)

    @property
    def image_beats(self):
        return self.segment(0).w_in ** 2 * self.pixel_beats

    def block_beats(self, node):
        """Beats of node ``node``'s activation block of an image (and of its error block)."""
        return self.segment(node).out_beats

    def upstream_beats(self, node):
        """Beats of the blocks of the nodes before ``node``, per image."""
        return sum(self.block_beats(j) for j in range(node))

    @property
    def host_beats(self):
        """Beats per image the host receives (every node's block) and sends back."""
        return self.upstream_beats(len(self.nodes))


def _block(m, moved, count, beats, after):
    """In an FSM state: count ``moved`` beats in ``count``; after ``beats``, to ``after``."""
    with m.If(moved):
        with m.If(count == beats - 1):
            m.d.sync += count.eq(0)
            m.next = after
        with m.Else():
            m.d.sync += count.eq(count + 1)


def beat_signature(config):
    """A stream of ``P``-word link beats."""
    return stream.Signature(data.ArrayLayout(config.word_bits, config.p))


class NodeLink(wiring.Component):
    """Node ``node``'s adapter between its node top and its link modules (module docstring).

    Parameters
    ----------
    config : ChainConfig
    node : int
        The node's index in the chain, from 0.

    Attributes
    ----------
    up_act : In(beat stream)
        DP1 from the ``"up"`` link (node 0: the host's images).
    down_act : Out(beat stream)
        DP1 to the ``"down"`` link (the last node: to the host).
    down_err : In(beat stream)
        DP4 from the ``"down"`` link (the last node: the host's errors).
    up_err : Out(beat stream)
        DP4 to the ``"up"`` link (never valid on node 0).
    act_in, err_in : Out(stream), act_out : In(stream)
        To and from the node top's ``s0_act_in``, ``s0_err_in``, ``s0_act_out`` (their
        plain bit-vector payloads).

    Latency ``0`` cycles through a node, ``1`` into its FP; throughput one beat a cycle on
    each path (module docstring).

    Raises
    ------
    TypeError
        ``config`` not a ChainConfig, ``node`` not an index of its nodes.
    """

    def __init__(self, config, *, node):
        if not isinstance(config, ChainConfig):
            raise TypeError(f"config must be a ChainConfig, not {config!r}")
        if (not isinstance(node, int) or isinstance(node, bool)
                or not 0 <= node < len(config.nodes)):
            raise TypeError(f"node must be an integer from 0 to {len(config.nodes) - 1}, "
                            f"not {node!r}")
        self._config, self._node = config, node
        seg = config.segment(node)
        beat = beat_signature(config)
        super().__init__({
            "up_act": In(beat), "down_act": Out(beat),
            "down_err": In(beat), "up_err": Out(beat),
            "act_in": Out(stream.Signature(
                pixel_layout(seg.word_bits, seg.n_in).size)),
            "err_in": Out(stream.Signature(pixel_layout(seg.word_bits, seg.p).size)),
            "act_out": In(stream.Signature(act_layout(seg).size)),
        })

    config = property(lambda self: self._config)
    node = property(lambda self: self._node)

    def elaborate(self, platform):
        m = Module()
        config, node = self._config, self._node
        last_node = node == len(config.nodes) - 1
        beat_bits = config.p * config.word_bits
        own, upstream = config.block_beats(node), config.upstream_beats(node)
        image, per_pixel = config.image_beats, config.pixel_beats

        # images in flight: started minus own error blocks taken
        inflight = Signal(range(config.lag + 1))
        started, errored = Signal(), Signal()
        m.d.sync += inflight.eq(inflight + started - errored)

        # the own block, one image deep
        m.submodules.own = fifo = SyncFIFOBuffered(width=beat_bits, depth=own)
        m.d.comb += [fifo.w_data.eq(self.act_out.payload[:beat_bits]),
                     fifo.w_en.eq(self.act_out.valid), self.act_out.ready.eq(fifo.w_rdy)]

        # the deserializer: a pixel of per_pixel beats for the node's act_in
        pixel = Signal(per_pixel * beat_bits)
        part = Signal(range(per_pixel))
        full, final = Signal(), Signal()
        with m.If(final):
            m.d.sync += full.eq(1)
        with m.Elif(self.act_in.valid & self.act_in.ready):
            m.d.sync += full.eq(0)
        m.d.comb += [self.act_in.valid.eq(full),
                     self.act_in.payload.eq(pixel[:len(self.act_in.payload)])]

        count = Signal(range(max(image, upstream, own, 1)))
        up, down = self.up_act, self.down_act
        with m.FSM(name="act"):
            with m.State("image"):
                room = ~full | self.act_in.ready
                window = (count != 0) | (inflight < config.lag)
                onward = 1 if last_node else down.ready
                go = up.valid & room & window & onward
                m.d.comb += [up.ready.eq(room & window & onward),
                             started.eq(go & (count == 0))]
                if not last_node:
                    m.d.comb += [down.valid.eq(up.valid & room & window),
                                 down.payload.eq(up.payload)]
                with m.If(go):
                    for k in range(per_pixel):
                        with m.If(part == k):
                            m.d.sync += pixel[k * beat_bits:(k + 1) * beat_bits].eq(
                                up.payload.as_value())
                    m.d.sync += part.eq(Mux(part == per_pixel - 1, 0, part + 1))
                m.d.comb += final.eq(go & (part == per_pixel - 1))
                _block(m, go, count, image, "relay" if upstream else "own")
            with m.State("relay"):
                m.d.comb += [down.valid.eq(up.valid), down.payload.eq(up.payload),
                             up.ready.eq(down.ready)]
                _block(m, up.valid & down.ready, count, upstream, "own")
            with m.State("own"):
                m.d.comb += [down.valid.eq(fifo.r_rdy), down.payload.eq(fifo.r_data),
                             fifo.r_en.eq(down.ready)]
                _block(m, fifo.r_rdy & down.ready, count, own, "image")

        # errors: the own block into the node, then the upstream ones relayed
        errors = Signal(range(own + upstream))
        mine = errors < own
        err = self.down_err
        m.d.comb += [self.err_in.payload.eq(err.payload), self.up_err.payload.eq(err.payload)]
        with m.If(mine):
            m.d.comb += [self.err_in.valid.eq(err.valid), err.ready.eq(self.err_in.ready)]
        with m.Else():
            m.d.comb += [self.up_err.valid.eq(err.valid), err.ready.eq(self.up_err.ready)]
        moved = err.valid & err.ready
        with m.If(moved):
            m.d.sync += errors.eq(Mux(errors == own + upstream - 1, 0, errors + 1))
        m.d.comb += errored.eq(moved & (errors == own - 1))
        return m

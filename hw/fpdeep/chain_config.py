"""The configuration of an FPDeep training chain (:class:`ChainConfig`): its stages (the
nodes' layer segments in chain order), each stage's layer, how a layer is split over its
stages (by output channels, OCP, or by input channels, ICP), and every beat count of the
chain's paths; :mod:`.chain_link` (the node-to-link adapter; the Notes of its
:class:`~.chain_link.NodeLink` have the chain's streams and decisions) and the benches
derive from it."""

import dataclasses
import math

from .node import FpdeepConfig

__all__ = ["ChainConfig"]

#: Fields every stage of an OCP layer shares (its input and the conv's shape).
_LAYER_FIELDS = ("w_in", "n_in", "k", "stride", "pad", "pool")
#: Fields every stage of an ICP layer shares (each has its own input channels).
_ICP_FIELDS = ("w_in", "k", "stride", "pad", "n_out")


@dataclasses.dataclass(frozen=True)
class ChainConfig:
    """A chain of node tops training a CNN's conv layers (:mod:`.chain_link`).

    The chain's **stages** are the nodes' segments in chain order (node 1's first, in its
    segment order): stage ``s`` has an adapter (:class:`~.chain_link.NodeLink`) of its
    own; two stages of one node are joined directly (a layer's end and the next layer's
    start on one board), two of neighbouring nodes through the link modules. Every index
    below (and ``NodeLink``'s ``node``) is a stage's; with one segment a node, a node's.

    A layer's stages are consecutive. Either each completes its output-channel range
    (**OCP**; on a layer after the first their EB's partial errors are chained upstream),
    or (**ICP**, the layer's first stage does not complete) stage ``k`` of the layer reads
    its own input-channel range (``n_in`` each, in order), takes the partial sums of stage
    ``k − 1`` (DP2) but the first, and the last completes the layer (bias, SFU) and sends
    its δ upstream to the others (DP3). After the first layer each ICP stage's EB gives
    the complete errors of its own input channels; the layer's first stage gathers them
    (DP4) and sends the previous layer its error blocks.

    Attributes
    ----------
    nodes : tuple of FpdeepConfig
        Node ``m``'s RTL, upstream first: all of one precision, ``P`` and batch; the first
        layer's segments without EB, the others' with. Stored with
        :attr:`FpdeepConfig.eb_partial` and :attr:`FpdeepConfig.delta_out` set from the chain
        (``None`` on a node without any).
    lag : int
        Images in flight per stage (:mod:`.chain_link`), at least 1.
    layers : tuple of int, optional
        Stage ``s``'s layer, from 0, non-decreasing by steps of 0 or 1; default every stage
        on layer 0 (one layer split over the nodes). Layer ``t > 0`` takes the maps layer
        ``t − 1`` gives (``w_in`` its ``pool_out``, its input channels the channels).
    """

    nodes: tuple
    lag: int = 1
    layers: tuple = None

    def __post_init__(self):
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.nodes or not all(isinstance(n, FpdeepConfig) for n in self.nodes):
            raise TypeError(f"nodes must be a non-empty tuple of FpdeepConfig, not "
                            f"{self.nodes!r}")
        if not isinstance(self.lag, int) or isinstance(self.lag, bool) or self.lag < 1:
            raise TypeError(f"lag must be a positive integer, not {self.lag!r}")
        stages = tuple((n, k) for n, node in enumerate(self.nodes)
                       for k in range(len(node.segments)))
        object.__setattr__(self, "stages", stages)
        layers = (0,) * len(stages) if self.layers is None else self.layers
        if (not isinstance(layers, (tuple, list)) or len(layers) != len(stages)
                or not all(isinstance(t, int) and not isinstance(t, bool) for t in layers)
                or layers[0] != 0 or any(b - a not in (0, 1)
                                         for a, b in zip(layers, layers[1:]))):
            raise TypeError(f"layers must be one layer number per segment, from 0, "
                            f"non-decreasing by steps of 1, not {self.layers!r}")
        object.__setattr__(self, "layers", tuple(layers))
        for n in range(len(stages)):
            seg, layer, name = self.segment(n), self.layers[n], self.name(n)
            if layer == 0 and self.eb(n):
                raise ValueError(f"{name}: layer 0 is the network's first: no EB")
            if layer > 0 and not self.eb(n):
                raise ValueError(f"{name}: layer {layer} needs its EB (the error of "
                                 f"layer {layer - 1}'s activations)")
            for field in ("precision", "p", "batch"):
                source = self.nodes[stages[n][0]] if field == "batch" else seg
                want = self.nodes[0] if field == "batch" else self.segment(0)
                if getattr(source, field) != getattr(want, field):
                    raise ValueError(f"{name}: {field} {getattr(source, field)!r} "
                                     f"differs from node 1's {getattr(want, field)!r}")
        for layer in range(self.layers[-1] + 1):
            self._check_layer(layer)
        object.__setattr__(self, "nodes", self._with_flags())

    def _check_layer(self, layer):
        nodes = self.layer_nodes(layer)
        first = self.segment(nodes[0])
        icp = self.icp(layer)
        for k, n in enumerate(nodes):
            seg, name = self.segment(n), self.name(n)
            if not icp and (not seg.completes or seg.partial_in):
                raise ValueError(f"{name}: layer {layer} is split by output channels "
                                 f"(OCP, its first segment completes): every segment "
                                 f"completes its channels (no DP2 partials)")
            want = (k > 0, k == len(nodes) - 1)
            if icp and (seg.partial_in, seg.completes) != want:
                raise ValueError(f"{name}: segment {k + 1} of {len(nodes)} of layer {layer}'s "
                                 f"input-channel (ICP) split must {'' if want[0] else 'not '}"
                                 f"take partials and {'' if want[1] else 'not '}complete")
            for field in _ICP_FIELDS if icp else _LAYER_FIELDS:
                if getattr(seg, field) != getattr(first, field):
                    raise ValueError(f"{name}: {field} {getattr(seg, field)!r} differs "
                                     f"from {self.name(nodes[0])}'s {getattr(first, field)!r}")
        if layer > 0:
            before = self.completing(layer - 1)
            side = self.segment(before[0]).pool_out
            channels = sum(self.segment(j).n_out for j in before)
            if (first.w_in, self.layer_ic(nodes[0])) != (side, channels):
                raise ValueError(
                    f"{self.name(nodes[0])}: layer {layer} takes {first.w_in}x"
                    f"{first.w_in} maps of {self.layer_ic(nodes[0])} channels, layer "
                    f"{layer - 1} gives {side}x{side} of {channels}")

    def _with_flags(self):
        """The nodes with :attr:`FpdeepConfig.eb_partial` (a stage of an OCP layer ``t > 0``
        takes partial errors when a stage of its layer follows, sends them when one
        precedes it) and :attr:`FpdeepConfig.delta_out` (an ICP layer's completing stage)."""
        nodes = []
        for n, node in enumerate(self.nodes):
            partial, delta = [], []
            for s, (m, _) in enumerate(self.stages):
                if m == n:
                    same, layer = self.layer_nodes(self.layers[s]), self.layers[s]
                    chained = layer > 0 and not self.icp(layer)
                    partial.append((chained and s != same[-1], chained and s != same[0]))
                    delta.append(self.icp(layer) and s == same[-1])
            nodes.append(dataclasses.replace(
                node, eb_partial=tuple(partial) if any(map(any, partial)) else None,
                delta_out=tuple(delta) if any(delta) else None))
        return tuple(nodes)

    # -- stages --------------------------------------------------------------------------
    def name(self, stage):
        """``"node N"`` (``"node N segment K"`` on a node of several segments)."""
        node, k = self.stages[stage]
        if len(self.nodes[node].segments) == 1:
            return f"node {node + 1}"
        return f"node {node + 1} segment {k + 1}"

    def segment(self, stage):
        """Stage ``stage``'s (from 0) FpConfig."""
        node, k = self.stages[stage]
        return self.nodes[node].segments[k]

    def eb(self, stage):
        """Whether stage ``stage``'s segment has an EB module."""
        node, k = self.stages[stage]
        return self.nodes[node].eb[k]

    def partial_errors(self, stage):
        """Stage ``stage``'s EB (takes, sends) partial errors."""
        node, k = self.stages[stage]
        return self.nodes[node].partials[k]

    def stage_node(self, stage):
        """Stage ``stage``'s segment alone on a :class:`FpdeepConfig` (its golden model's)."""
        node, k = self.stages[stage]
        config = self.nodes[node]
        return dataclasses.replace(config, segments=(config.segments[k],),
                                   eb=(config.eb[k],), eb_partial=(config.partials[k],),
                                   delta_out=(config.deltas[k],))

    def layer_nodes(self, layer):
        """The stages of ``layer``, in chain order."""
        return [n for n, t in enumerate(self.layers) if t == layer]

    def icp(self, layer):
        """Whether ``layer`` is split by input channels (its first stage does not
        complete)."""
        return not self.segment(self.layer_nodes(layer)[0]).completes

    def completing(self, layer):
        """The stages of ``layer`` that complete output channels (OCP: all; ICP: the
        last)."""
        return [n for n in self.layer_nodes(layer) if self.segment(n).completes]

    def last_in_layer(self, node):
        return self.layer_nodes(self.layers[node])[-1] == node

    def first_in_layer(self, node):
        return self.layer_nodes(self.layers[node])[0] == node

    def lo(self, node):
        """The first output channel of node ``node`` in its layer."""
        return sum(self.segment(j).n_out for j in self.completing(self.layers[node])
                   if j < node)

    def in_lo(self, node):
        """The first input channel node ``node`` reads (ICP: after the layer's earlier
        stages' ranges; OCP: 0)."""
        if not self.icp(self.layers[node]):
            return 0
        return sum(self.segment(j).n_in for j in self.layer_nodes(self.layers[node])
                   if j < node)

    def layer_ic(self, node):
        """Input channels of node ``node``'s layer."""
        if not self.icp(self.layers[node]):
            return self.segment(node).n_in
        return sum(self.segment(j).n_in for j in self.layer_nodes(self.layers[node]))

    # -- beats ---------------------------------------------------------------------------
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
        return math.ceil(self.layer_ic(0) / self.p)

    @property
    def image_beats(self):
        return self.segment(0).w_in ** 2 * self.pixel_beats

    def block_beats(self, node):
        """Beats of node ``node``'s activation block of an image (and of its error
        block); 0 on an ICP stage that does not complete."""
        seg = self.segment(node)
        return seg.out_beats if seg.completes else 0

    def upstream_beats(self, node):
        """Beats of the blocks of the nodes of ``node``'s layer before it, per image."""
        return sum(self.block_beats(j) for j in self.layer_nodes(self.layers[node])
                   if j < node)

    def input_blocks(self, node):
        """The blocks of ``node``'s input, per image: ``(beats a pixel, channels, first
        channel)`` each, in stream order (the image, or layer ``t − 1``'s nodes)."""
        layer = self.layers[node]
        if layer == 0:
            return ((self.pixel_beats, self.layer_ic(0), 0),)
        return tuple((self.segment(j).groups, self.segment(j).n_out, self.lo(j))
                     for j in self.completing(layer - 1))

    def input_beats(self, node):
        return self.segment(node).w_in ** 2 * sum(b[0] for b in self.input_blocks(node))

    def act_beats(self, node):
        """Beats per image on the act path into node ``node``."""
        return self.input_beats(node) + self.upstream_beats(node)

    def error_beats(self, node):
        """Beats per image on the error path into node ``node`` (its and its layer's
        earlier nodes' error blocks; in an ICP layer after the first, the EB outputs of
        the layer's later stages)."""
        layer = self.layers[node]
        later = 0
        if layer > 0 and self.icp(layer):
            later = sum(self.error_block_beats(j) for j in self.layer_nodes(layer)
                        if j > node)
        return self.block_beats(node) + self.upstream_beats(node) + later

    def error_block_beats(self, stage):
        """Beats of an image's EB output of an ICP stage sent upstream to its layer's
        first stage: ``w_in²`` pixels of ``⌈n_in / P⌉`` beats."""
        seg = self.segment(stage)
        return seg.w_in ** 2 * math.ceil(seg.n_in / self.p)

    def partial_error_beats(self, stage):
        """Beats of one partial-error pixel of stage ``stage`` on the ``delta`` path."""
        seg = self.segment(stage)
        return math.ceil(seg.n_in * seg.partial_bits / (self.p * self.word_bits))

    def delta_beats(self, stage):
        """Beats of an image's δ of stage ``stage``'s layer (``w_out² · G``): what an ICP
        stage takes (its ``err_in``) on the ``delta`` path."""
        seg = self.segment(stage)
        return seg.pixels * seg.groups

    @property
    def host_beats(self):
        """Beats per image the host receives (the last layer's blocks) and sends back."""
        return self.error_beats(len(self.stages) - 1)

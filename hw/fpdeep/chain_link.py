"""The node-to-link adapter of an FPDeep training chain (spec §3.1, §3.2, §3.8): per node
segment, :class:`NodeLink` puts the node top's segment streams (:class:`~.node.FpdeepNode`
``s{k}_*``) onto the typed paths of its ``"up"`` and ``"down"`` link modules
(:class:`~.link.LinkModule`) and takes them back, so ``K`` node tops joined by link modules
train a CNN's convolution layers as a layer pipeline: the first layer split by output
channels (OCP, spec §2.8: every node completes its channel range) or by input channels
(ICP: partial sums down the chain, the last node completes) over one or more nodes, each
later layer likewise (OCP: its EB's partial errors summed along its nodes; ICP: its
nodes' EB errors gathered by its first node), downstream of the layer before (a node
may hold the end of one layer and the next layer: the mapper's usual cut).

Latency and throughput: a beat passes a node from ``up_act`` to ``down_act`` (and
``down_err`` to ``up_err``) combinationally, in the cycle it is taken; a single input
block reaches the node's FP one cycle after its pixel's last beat; several are buffered:
the FP's first pixel ``Σ G_j + 1`` cycles after the last input beat, then a pixel every
``Σ G_j + 1`` cycles. An EB output goes upstream a pixel every ``G_j + 1`` cycles per
block once its last beat is in. One beat per cycle on each path; per image the act path
into node ``m`` carries its input and its layer's earlier blocks, the error path their
error blocks (:meth:`ChainConfig.act_beats`, :meth:`ChainConfig.error_beats`).
"""


from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .chain_config import ChainConfig
from .chain_paths import LinkPaths, _block
from .eb import error_layout, partial_error_layout
from .fp import partial_layout
from .line_buffer import pixel_layout
from .node import act_layout

__all__ = ["ChainConfig", "NodeLink"]

def beat_signature(config):
    """A stream of ``P``-word link beats."""
    return stream.Signature(data.ArrayLayout(config.word_bits, config.p))


class NodeLink(LinkPaths, wiring.Component):
    """Node ``node``'s adapter between its node top and its link modules (the chain's
    streams and the decisions: Notes below).

    Parameters
    ----------
    config : ChainConfig
    node : int
        The stage's index in the chain, from 0 (:class:`ChainConfig`: a node's segment).

    Attributes
    ----------
    up_act : In(beat stream)
        DP1 from the ``"up"`` link (node 0: the host's images).
    down_act : Out(beat stream)
        DP1 to the ``"down"`` link (the last node: to the host).
    down_err : In(beat stream)
        DP3/DP4 from the ``"down"`` link (the last node: the host's errors).
    up_err : Out(beat stream)
        DP3/DP4 to the ``"up"`` link (never valid on node 0).
    act_in, err_in : Out(stream), act_out : In(stream)
        To and from the node top's ``s0_act_in``, ``s0_err_in``, ``s0_act_out`` (their
        plain bit-vector payloads; ``act_out`` on a completing stage).
    part_out : In(stream), down_part : Out(partial beat stream)
        An ICP stage that does not complete: the node top's ``s0_part_out`` onto the
        ``partial`` path (DP2) of the ``"down"`` link (``last`` dropped).
    up_part : In(partial beat stream), part_in : Out(stream)
        An ICP stage after the layer's first: the ``partial`` path from the ``"up"`` link
        into ``s0_part_in`` (``last`` regenerated every ``w_out² · G`` beats).
    delta_out : In(stream)
        An ICP layer's completing stage: the node top's ``s0_delta_out`` (its δ), sent on
        ``up_delta``.
    down_delta : In(beat stream)
        An ICP stage that does not complete: δ from the ``"down"`` link's ``delta`` path
        (DP3) into its ``err_in``, and (not the layer's first) on ``up_delta``.
    up_delta : Out(beat stream)
        δ to the ``"up"`` link's ``delta`` path (the stages above in an ICP layer).
    err_out : In(stream)
        From the node top's ``s0_err_out`` (a stage of a layer after the first: of an OCP
        layer the first, of an ICP layer every one).
    down_err_part : In(beat stream), err_part_in : Out(stream)
        A stage whose EB takes partial errors: the ``delta`` path from the ``"down"``
        link, re-assembled into the node top's ``s0_err_part_in`` (a pixel of
        :meth:`ChainConfig.partial_error_beats` beats; ``last`` regenerated).
    err_part_out : In(stream), up_err_part : Out(beat stream)
        A stage whose EB sends partial errors: the node top's ``s0_err_part_out``,
        buffered (one image) and cut into beats on the ``delta`` path to the ``"up"`` link.

    Latency ``0`` cycles through a node, ``1`` into its FP from a single input block;
    throughput one beat a cycle on each path (module docstring).

    Raises
    ------
    TypeError
        ``config`` not a ChainConfig, ``node`` not an index of its stages.

    Notes
    -----
    **The chain (:class:`~.chain_config.ChainConfig`)**

    Below, "node" is a **stage** (:class:`ChainConfig`): one segment of a node top, so a node
    of two segments is two stages joined directly. Node ``m`` (from 0, upstream first) holds
    output channels ``[lo_m, hi_m)`` of layer
    ``t_m`` (:attr:`ChainConfig.layers`, non-decreasing along the chain). The input of layer 0
    is the host's image; the input of layer ``t > 0`` is the output of layer ``t − 1``: every
    node of that layer's activations. The host gets the last layer's activations and sends
    back the error of them. Streams, all on beats of ``P`` words (the link's beat,
    :func:`~.link.beat_layout`):

    * **DP1 ``act``, forward**, per image in this order: the input blocks of node ``m``'s
      layer (layer 0: the image, ``w_in²`` pixels, each ``⌈n_in / P⌉`` beats, the words past
      ``n_in`` zero; layer ``t > 0``: the activation blocks of layer ``t − 1``'s nodes in node
      order), then the activation blocks of the nodes of layer ``t_m`` before ``m`` (node
      ``j``'s ``out_beats`` beats: its SFU output, raster order, ``G_j`` beats a pooled
      pixel). Node ``m`` takes the input blocks into its FP (one block: beat by beat; several:
      buffered, one image, and re-interleaved into pixels of all channels); it forwards them
      when a node of its layer follows, relays the blocks of its layer's earlier nodes as they
      come, and appends its own block. So the last node of a layer sends exactly the next
      layer's input blocks; the last node's ``"down"`` stream is the host's.
    * **DP4 → DP3 ``error``, backward**, per image: the error blocks of the nodes of a layer,
      the most downstream node's first (DP4's rule, spec §3.1: a node's own errors, then those
      relayed); node ``m`` takes the first block as its ``err_in`` (DP3: the error of its
      activations) and relays the others upstream. The host sends the last layer's blocks. A
      node of layer ``t > 0`` sends its EB output (``err_out``, DP4: the error of its input
      map, every channel of layer ``t − 1``) upstream as layer ``t − 1``'s error blocks, cut
      by channel range and in the lanes of each node's activations (buffered, one image), so
      the upstream node's ``err_in`` is the downstream node's EB output (DP4 at the sender is
      DP3 at the receiver: one typed path, ``error``, carries both).

    **Decisions ([U] in the spec)**

    * **Sharing a path: blocks in a fixed order, counted.** Several producers share one path
      (the image, each node's activations on DP1; the host's and each EB's error blocks on
      DP4) as whole per-image blocks in node order; no tag is sent: the receiver knows every
      block's beat count from the configuration and counts (the ``last`` flags of the node's
      streams are regenerated from these counts, never carried). A node's own block is
      buffered (``out_beats`` deep, one image), so its FP never waits for the image to pass
      it; the input of a layer after the first is buffered whole before the FP takes its
      first pixel (a pixel needs every channel, i.e. every upstream block), and an EB output
      whole before the first error block goes upstream (the most downstream node's block
      first needs the last pixel). Each buffer is freed before the next image's blocks enter
      it; every block moves once its producer made it, so the order cannot deadlock.
      **Several segments on one node** share the paths the same way (one block per segment
      and image, segment order): each segment has its adapter, and a node's adapters are
      joined directly, the downstream segment's ``up_act``/``up_err`` on the upstream one's
      ``down_act``/``down_err`` (the chain's streams inside the board), so the layer's end
      on node ``m`` feeds the next layer's start on node ``m`` as a link would.
    * **A layer after the first split over several stages** (OCP, each completing its
      channel range; spec §2.10: "backward carries the EB partial-error reduction"): every
      stage of the layer takes the whole input (buffered, forwarded downstream as the first
      layer's image is) and its EB computes partial errors of every input channel from its
      output channels; the most downstream stage's EB sends them (``err_part_out``, EB's
      ``o_partial``) to the stage above, whose EB adds its own (``err_part_in``,
      ``i_partial``), and so on up to the layer's first stage, which rounds (fixed16) and
      sends the complete errors upstream as above (:mod:`nnrtl.gen.fpdeep.chain`'s
      ``E_m = E_{m+1} + local``). **Their path: the link's ``delta`` path** (code 2, the
      backward pair; the chain's errors ride ``error``, and ``delta`` carries δ only inside
      an ICP layer), its own typed stream between two neighbouring stages only (never relayed: a
      layer's stages are consecutive), so it shares no count with the error blocks. A
      partial-error pixel (``S_IC`` words of ``partial_bits``, 48 in fixed16) is cut into
      ``⌈S_IC · partial_bits / (P · word_bits)⌉`` beats (bits from the low word up, the last
      beat's spare bits zero; :meth:`ChainConfig.partial_error_beats`). The sender buffers
      one image of them (``w_in²`` pixels) so its EB never waits for the stage above, whose
      δ comes after the sender's own error block on the error path (without it the chain
      could deadlock). The first layer has no EB (spec §2.8).
    * **A layer split by input channels** (ICP, spec §2.5, §3.1): every stage of the
      layer takes its whole input (forwarded as under OCP) and reads its own channel range
      (:meth:`ChainConfig.in_lo`); stage ``k`` sends its partial sums (``part_out``, DP2,
      the FP's 48-bit fixed16 / fp32 partial words) on the link's ``partial`` path to stage
      ``k + 1``, whose FP adds its own (``R_k = R_{k−1} + local``); the last completes (bias,
      SFU) and alone sends activations. Backward, the host's (or next layer's) error block is
      the last stage's; its :class:`~.eb.SfuBackward` makes δ, which its PG (and EB) take and
      which leaves on the node top's ``delta_out`` (DP3, the link's ``delta`` path) to the
      stages above: each takes it as its ``err_in`` (δ) and, but the layer's first, sends it
      on up in the same beat (a fork, no buffer: the stages take δ at PG's rate). A stage
      that does not complete counts its images in flight by its δ images taken. A boundary
      inside an ICP layer carries δ on ``delta``, one inside an OCP layer partial errors:
      never both. **After the first layer** each ICP stage's EB gives the complete errors of
      its own input channels (δ of every output channel meets on it): a stage after the
      layer's first buffers its EB output (one image, a FIFO) and sends it up the ``error``
      path, ``w_in²`` pixels of ``⌈n_in / P⌉`` beats, then relays those of the layer's later
      stages (DP4's rule: own errors first, then the relayed ones;
      :meth:`ChainConfig.error_block_beats`); the layer's first stage buffers its own and
      each later stage's (one memory each, one image) and, once all are in, sends the
      previous layer its error blocks of every channel as a single EB's output is sent
      (``_scatter``). A stage's own EB output never waits for the blocks it relays (its
      buffer holds an image), so the error path cannot deadlock.
    * **Images in flight: ``lag``**, the window of the stale-weight rule. A node starts
      taking image ``k + lag`` only after its own error block of image ``k`` has been taken
      by its node, so every node sees the same order of its streams (``act 0 … act lag−1,
      err 0, act lag, err 1, …``) whatever the links' timing (a node's error block of image
      ``k`` exists only after the host got the output of image ``k + lag − 1``, which every
      node's FP made), and the node's update window (:mod:`.node`) gives every node the same
      weight versions: the FP of image ``k`` uses the weights after
      ``max(0, ⌊(k + 1 − lag) / B⌋)`` updates (the trainer's rule with residency ``lag``,
      :meth:`nnrtl.gen.fpdeep.trainer.FpdeepTrainer.weight_version`), EB of image ``k`` those
      after ``⌊k / B⌋``. ``lag`` = 1 is plain SGD for batch 1.
    """

    def __init__(self, config, *, node):
        if not isinstance(config, ChainConfig):
            raise TypeError(f"config must be a ChainConfig, not {config!r}")
        if (not isinstance(node, int) or isinstance(node, bool)
                or not 0 <= node < len(config.stages)):
            raise TypeError(f"node must be an integer from 0 to {len(config.stages) - 1}, "
                            f"not {node!r}")
        self._config, self._node = config, node
        seg = config.segment(node)
        beat = beat_signature(config)
        ports = {
            "up_act": In(beat), "down_act": Out(beat),
            "down_err": In(beat), "up_err": Out(beat),
            "act_in": Out(stream.Signature(
                pixel_layout(seg.word_bits, seg.n_in).size)),
            "err_in": Out(stream.Signature(pixel_layout(seg.word_bits, seg.p).size)),
        }
        if seg.completes:
            ports["act_out"] = In(stream.Signature(act_layout(seg).size))
        else:
            ports["part_out"] = In(stream.Signature(partial_layout(seg).size))
            ports["down_part"] = Out(stream.Signature(partial_layout(seg)["data"].shape))
            ports["down_delta"] = In(beat)
        if seg.partial_in:
            ports["up_part"] = In(stream.Signature(partial_layout(seg)["data"].shape))
            ports["part_in"] = Out(stream.Signature(partial_layout(seg).size))
        if config.icp(config.layers[node]) and seg.completes:
            ports["delta_out"] = In(stream.Signature(pixel_layout(seg.word_bits, seg.p).size))
        if seg.partial_in:
            ports["up_delta"] = Out(beat)
        takes, sends = config.partial_errors(node) if config.eb(node) else (False, False)
        if config.eb(node) and not sends:
            ports["err_out"] = In(stream.Signature(error_layout(seg).size))
        if takes:
            ports["down_err_part"] = In(beat)
            ports["err_part_in"] = Out(stream.Signature(partial_error_layout(seg).size))
        if sends:
            ports["err_part_out"] = In(stream.Signature(partial_error_layout(seg).size))
            ports["up_err_part"] = Out(beat)
        super().__init__(ports)

    config = property(lambda self: self._config)
    node = property(lambda self: self._node)

    def elaborate(self, platform):
        m = Module()
        config, node = self._config, self._node
        beat_bits = config.p * config.word_bits
        own, upstream = config.block_beats(node), config.upstream_beats(node)
        blocks, inputs = config.input_blocks(node), config.input_beats(node)
        forward = not config.last_in_layer(node)

        # images in flight: started minus own error blocks taken
        inflight = Signal(range(config.lag + 1))
        started, errored = Signal(), Signal()
        m.d.sync += inflight.eq(inflight + started - errored)

        # the own block, one image deep
        if own:
            m.submodules.own = fifo = SyncFIFOBuffered(width=beat_bits, depth=own)
            m.d.comb += [fifo.w_data.eq(self.act_out.payload[:beat_bits]),
                         fifo.w_en.eq(self.act_out.valid), self.act_out.ready.eq(fifo.w_rdy)]

        # the input into the node's act_in: a pixel of its channels
        go = Signal()
        offset = config.in_lo(node) * config.word_bits
        if len(blocks) == 1:
            room = self._deserialize(m, go, self.up_act.payload, self.act_in, blocks[0][0],
                                     offset=offset)
        else:
            room = self._assemble(m, go, blocks)

        count = Signal(range(max(inputs, upstream, own, 1)))
        up, down = self.up_act, self.down_act
        with m.FSM(name="act"):
            with m.State("input"):
                window = (count != 0) | (inflight < config.lag)
                onward = down.ready if forward else 1
                m.d.comb += [go.eq(up.valid & room & window & onward),
                             up.ready.eq(room & window & onward),
                             started.eq(go & (count == 0))]
                if forward:
                    m.d.comb += [down.valid.eq(up.valid & room & window),
                                 down.payload.eq(up.payload)]
                _block(m, go, count, inputs,
                       "relay" if upstream else "own" if own else "input")
            if upstream:
                with m.State("relay"):
                    m.d.comb += [down.valid.eq(up.valid), down.payload.eq(up.payload),
                                 up.ready.eq(down.ready)]
                    _block(m, up.valid & down.ready, count, upstream, "own")
            if own:
                with m.State("own"):
                    m.d.comb += [down.valid.eq(fifo.r_rdy), down.payload.eq(fifo.r_data),
                                 fifo.r_en.eq(down.ready)]
                    _block(m, fifo.r_rdy & down.ready, count, own, "input")
        self._icp(m, errored)
        layer = config.layers[node]
        later = ([j for j in config.layer_nodes(layer) if j > node]
                 if config.icp(layer) and config.eb(node) else [])
        if own:
            self._errors(m, own, upstream, errored)
        elif not later:             # an ICP stage of the first layer: δ comes in, no error
            m.d.comb += [self.down_err.ready.eq(0), self.up_err.valid.eq(0)]
        if "err_out" in self.signature.members:
            if config.icp(layer) and not config.first_in_layer(node):
                self._send_errors(m, later)
            else:
                self._scatter(m, blocks, later)
        if "down_err_part" in self.signature.members:
            self._take_partials(m)
        if "up_err_part" in self.signature.members:
            self._send_partials(m)
        return m

    def _errors(self, m, own, upstream, errored):
        """The error path: the own block into the node, then the layer's upstream ones
        relayed; ``errored`` pulses on the own block's last beat."""
        errors = Signal(range(own + upstream))
        err = self.down_err
        m.d.comb += self.err_in.payload.eq(err.payload)
        if upstream:
            m.d.comb += self.up_err.payload.eq(err.payload)
            with m.If(errors < own):
                m.d.comb += [self.err_in.valid.eq(err.valid), err.ready.eq(self.err_in.ready)]
            with m.Else():
                m.d.comb += [self.up_err.valid.eq(err.valid), err.ready.eq(self.up_err.ready)]
        else:
            m.d.comb += [self.err_in.valid.eq(err.valid), err.ready.eq(self.err_in.ready)]
        moved = err.valid & err.ready
        with m.If(moved):
            m.d.sync += errors.eq(Mux(errors == own + upstream - 1, 0, errors + 1))
        m.d.comb += errored.eq(moved & (errors == own - 1))

    def _deserialize(self, m, go, beat, sink, per_pixel, pixels=None, offset=0):
        """A pixel of ``per_pixel`` link beats (``beat``, taken when ``go``) at a time into
        ``sink`` (its payload the beats' bits from ``offset`` up; with ``pixels``, the
        payload's top bit ``last`` set on the image's last pixel); returns the condition
        of room for a beat."""
        beat_bits = self._config.p * self._config.word_bits
        pixel = Signal(per_pixel * beat_bits)
        part = Signal(range(per_pixel))
        full, final = Signal(), Signal()
        with m.If(final):
            m.d.sync += full.eq(1)
        with m.Elif(sink.valid & sink.ready):
            m.d.sync += full.eq(0)
        width = len(sink.payload) - (pixels is not None)
        m.d.comb += [sink.valid.eq(full),
                     sink.payload[:width].eq(pixel[offset:offset + width])]
        if pixels is not None:
            index = Signal(range(pixels))
            m.d.comb += sink.payload[width].eq(index == pixels - 1)
            with m.If(sink.valid & sink.ready):
                m.d.sync += index.eq(Mux(index == pixels - 1, 0, index + 1))
        with m.If(go):
            for k in range(per_pixel):
                with m.If(part == k):
                    m.d.sync += pixel[k * beat_bits:(k + 1) * beat_bits].eq(beat.as_value())
            m.d.sync += part.eq(Mux(part == per_pixel - 1, 0, part + 1))
        m.d.comb += final.eq(go & (part == per_pixel - 1))
        return ~full | sink.ready

    def _assemble(self, m, go, blocks):
        """Several input blocks buffered (one image), then read back a pixel of every
        channel at a time into ``act_in`` (``Σ G_j`` reads a pixel); returns the condition
        of room for a beat (the buffer free, or being filled)."""
        config, node = self._config, self._node
        p, bits = config.p, config.word_bits
        pixels = config.segment(node).w_in ** 2
        m.submodules.input = mem = Memory(shape=p * bits, depth=config.input_beats(node),
                                          init=[])
        wr, rd = mem.write_port(), mem.read_port(domain="sync")
        filled = Signal()
        address = Signal(range(config.input_beats(node)))
        m.d.comb += [wr.addr.eq(address), wr.data.eq(self.up_act.payload.as_value()),
                     wr.en.eq(go)]
        with m.If(go):
            last = address == config.input_beats(node) - 1
            m.d.sync += address.eq(Mux(last, 0, address + 1))
            with m.If(last):
                m.d.sync += filled.eq(1)

        steps, base = [], 0                 # per read: (block base, beats a pixel, g, lo, n)
        for per_pixel, channels, lo in blocks:
            steps += [(base, per_pixel, g, lo, channels) for g in range(per_pixel)]
            base += pixels * per_pixel
        pixel = Signal(config.layer_ic(node) * bits)
        index = Signal(range(pixels))
        issue, landed = Signal(range(len(steps) + 1)), Signal(range(len(steps)))
        pending, full = Signal(), Signal()
        fetch = filled & ~full & (issue < len(steps))
        m.d.comb += rd.en.eq(fetch)
        with m.Switch(issue):
            for s, (start, per_pixel, g, _, _) in enumerate(steps):
                with m.Case(s):
                    m.d.comb += rd.addr.eq(start + index * per_pixel + g)
        m.d.sync += [pending.eq(fetch), landed.eq(issue)]
        with m.If(fetch):
            m.d.sync += issue.eq(issue + 1)
        with m.If(pending):
            with m.Switch(landed):
                for s, (_, _, g, lo, channels) in enumerate(steps):
                    with m.Case(s):
                        for lane in range(p):
                            c = g * p + lane
                            if c < channels:
                                m.d.sync += pixel[(lo + c) * bits:(lo + c + 1) * bits].eq(
                                    rd.data[lane * bits:(lane + 1) * bits])
            with m.If(landed == len(steps) - 1):
                m.d.sync += full.eq(1)
        lo = config.in_lo(node) * bits
        m.d.comb += [self.act_in.valid.eq(full),
                     self.act_in.payload.eq(pixel[lo:lo + len(self.act_in.payload)])]
        with m.If(self.act_in.valid & self.act_in.ready):
            m.d.sync += [full.eq(0), issue.eq(0)]
            with m.If(index == pixels - 1):
                m.d.sync += [index.eq(0), filled.eq(0)]
            with m.Else():
                m.d.sync += index.eq(index + 1)
        return ~filled

    def _scatter(self, m, blocks, later=()):
        """The EB output buffered (one image), then sent upstream as the error blocks of
        the input's blocks, the last block's first (``G_j + 1`` cycles a pixel). An ICP
        layer's first stage also buffers the ``later`` stages' EB outputs, which come in
        on ``down_err`` in stage order (:meth:`_send_errors`), and sends the errors of
        every input channel (its own range first, then theirs)."""
        config, node = self._config, self._node
        p, bits = config.p, config.word_bits
        pixels = config.segment(node).w_in ** 2
        sources = [(self.err_out, config.segment(node).n_in)]
        if later:
            sources += self._take_errors(m, later)
        out, clear = self.up_err, Signal()
        filled, words, reads = [], [], []
        for k, (src, channels) in enumerate(sources):
            mem = Memory(shape=channels * bits, depth=pixels, init=[])
            m.submodules[f"errors{k}"] = mem
            wr, rd = mem.write_port(), mem.read_port(domain="sync")
            full, address = Signal(name=f"filled{k}"), Signal(range(pixels), name=f"at{k}")
            m.d.comb += [wr.addr.eq(address), wr.data.eq(src.payload[:channels * bits]),
                         wr.en.eq(src.valid & ~full), src.ready.eq(~full)]
            with m.If(src.valid & ~full):
                m.d.sync += address.eq(Mux(address == pixels - 1, 0, address + 1))
                with m.If(address == pixels - 1):
                    m.d.sync += full.eq(1)
            with m.If(clear):
                m.d.sync += full.eq(0)
            filled.append(full)
            reads.append(rd)
            words += [rd.data[c * bits:(c + 1) * bits] for c in range(channels)]
        ready = Signal()
        m.d.comb += ready.eq(Cat(*filled).all())

        order = list(reversed(blocks))
        block = Signal(range(len(order)))
        index = Signal(range(pixels))
        g = Signal(range(max(b[0] for b in order)))
        m.d.comb += [rd.addr.eq(index) for rd in reads]
        with m.FSM(name="scatter"):
            with m.State("fetch"):
                m.d.comb += [rd.en.eq(ready) for rd in reads]
                with m.If(ready):
                    m.next = "send"
            with m.State("send"):
                m.d.comb += out.valid.eq(1)
                with m.Switch(block):
                    for b, (per_pixel, channels, lo) in enumerate(order):
                        with m.Case(b):
                            with m.Switch(g):
                                for k in range(per_pixel):
                                    with m.Case(k):
                                        for lane in range(p):
                                            if k * p + lane < channels:
                                                m.d.comb += out.payload[lane].eq(
                                                    words[lo + k * p + lane])
                            with m.If(out.ready):
                                with m.If(g == per_pixel - 1):
                                    m.d.sync += g.eq(0)
                                    m.next = "fetch"
                                    with m.If(index == pixels - 1):
                                        m.d.sync += [index.eq(0), block.eq(
                                            Mux(block == len(order) - 1, 0, block + 1))]
                                        if b == len(order) - 1:
                                            m.d.comb += clear.eq(1)
                                    with m.Else():
                                        m.d.sync += index.eq(index + 1)
                                with m.Else():
                                    m.d.sync += g.eq(g + 1)

"""The node-to-link adapter's paths beyond one activation and one error block a stage
(:class:`LinkPaths`, a part of :class:`~.chain_link.NodeLink`, whose module docstring has
the decisions): an ICP layer's partial sums down (DP2, the link's ``partial`` path) and
its δ up (DP3, ``delta``), an OCP layer's EB partial errors up (``delta``), and an ICP
layer's EB errors sent up the ``error`` path to its first stage. Latency: a partial-sum
or δ beat passes in the cycle it is taken; a pixel of partial errors or errors leaves its
one-image FIFO a cycle after it went in, one beat a cycle."""

import types

from amaranth.hdl import Mux, Signal
from amaranth.lib.fifo import SyncFIFOBuffered

from .node import _count, _fork

__all__ = ["LinkPaths"]


def _block(m, moved, count, beats, after):
    """In an FSM state: count ``moved`` beats in ``count``; after ``beats``, to ``after``."""
    with m.If(moved):
        with m.If(count == beats - 1):
            m.d.sync += count.eq(0)
            m.next = after
        with m.Else():
            m.d.sync += count.eq(count + 1)


class LinkPaths:
    """The paths of :class:`~.chain_link.NodeLink` (module docstring); it has the ports,
    ``_config``, ``_node`` and ``_deserialize``."""

    def _icp(self, m, errored):
        """An ICP stage's paths: its partial sums down (DP2), the partial sums from above
        into ``part_in``, δ from below into ``err_in`` (and on up) or its own δ up (DP3);
        ``errored`` pulses on the last δ beat of an image into ``err_in``."""
        config, node = self._config, self._node
        seg = config.segment(node)
        if "down_part" in self.signature.members:
            m.d.comb += [self.down_part.valid.eq(self.part_out.valid),
                         self.down_part.payload.eq(self.part_out.payload[:-1]),
                         self.part_out.ready.eq(self.down_part.ready)]
        if "up_part" in self.signature.members:
            beats = Signal(range(seg.pixels * seg.groups))
            moved = self.part_in.valid & self.part_in.ready
            m.d.comb += [self.part_in.valid.eq(self.up_part.valid),
                         self.part_in.payload.eq(self.up_part.payload.as_value()),
                         self.part_in.payload[-1].eq(beats == seg.pixels * seg.groups - 1),
                         self.up_part.ready.eq(self.part_in.ready)]
            with m.If(moved):
                m.d.sync += beats.eq(Mux(beats == seg.pixels * seg.groups - 1, 0,
                                         beats + 1))
        if "delta_out" in self.signature.members:
            m.d.comb += [self.up_delta.valid.eq(self.delta_out.valid),
                         self.up_delta.payload.eq(self.delta_out.payload),
                         self.delta_out.ready.eq(self.up_delta.ready)]
        elif "down_delta" in self.signature.members:
            source, sinks = self.down_delta, [(self.err_in.valid, self.err_in.ready)]
            m.d.comb += self.err_in.payload.eq(source.payload)
            if "up_delta" in self.signature.members:
                sinks.append((self.up_delta.valid, self.up_delta.ready))
                m.d.comb += self.up_delta.payload.eq(source.payload)
            moved = _fork(m, source.valid, source.ready, sinks)
            m.d.comb += errored.eq(_count(m, moved, Signal(range(config.delta_beats(node))),
                                          config.delta_beats(node))[0])

    def _take_errors(self, m, later):
        """The ``later`` stages' EB outputs from ``down_err`` (per image one block each,
        in stage order), each re-assembled into pixels; returns ``[(stream, channels)]``
        (``valid``/``ready``/``payload``) for :meth:`_scatter`."""
        config, src = self._config, self.down_err
        bits, pixels = config.word_bits, config.segment(self._node).w_in ** 2
        beats = [config.error_block_beats(j) for j in later]
        block = Signal(range(len(later)))
        count = Signal(range(max(beats)))
        found, rooms = [], []
        for k, j in enumerate(later):
            channels = config.segment(j).n_in
            sink = types.SimpleNamespace(valid=Signal(name=f"later{k}_valid"),
                                         ready=Signal(name=f"later{k}_ready"),
                                         payload=Signal(channels * bits,
                                                        name=f"later{k}_payload"))
            go = Signal(name=f"later{k}_go")
            room = self._deserialize(m, go, src.payload, sink, beats[k] // pixels)
            m.d.comb += go.eq(src.valid & room & (block == k))
            rooms.append(room)
            found.append((sink, channels))
        with m.Switch(block):
            for k, room in enumerate(rooms):
                with m.Case(k):
                    m.d.comb += src.ready.eq(room)
        with m.If(src.valid & src.ready):
            last = Signal()
            with m.Switch(block):
                for k, n in enumerate(beats):
                    with m.Case(k):
                        m.d.comb += last.eq(count == n - 1)
            m.d.sync += count.eq(Mux(last, 0, count + 1))
            with m.If(last):
                m.d.sync += block.eq(Mux(block == len(later) - 1, 0, block + 1))
        return found

    def _take_partials(self, m):
        """The ``delta`` path's partial-error beats into ``err_part_in``, a pixel at a time."""
        config, node = self._config, self._node
        source, go = self.down_err_part, Signal()
        room = self._deserialize(m, go, source.payload, self.err_part_in,
                                 config.partial_error_beats(node),
                                 pixels=config.segment(node).w_in ** 2)
        m.d.comb += [source.ready.eq(room), go.eq(source.valid & room)]

    def _pixels_out(self, m, name, src, width, per_pixel):
        """``src``'s pixels (the low ``width`` bits of its payload) into a FIFO of one
        image, each cut into ``per_pixel`` link beats (the low beat first); returns
        ``(valid, beat, take)``: drive ``take`` when the beat is taken."""
        config, node = self._config, self._node
        beat_bits = config.p * config.word_bits
        fifo = SyncFIFOBuffered(width=width, depth=config.segment(node).w_in ** 2)
        m.submodules[name] = fifo
        m.d.comb += [fifo.w_data.eq(src.payload[:width]), fifo.w_en.eq(src.valid),
                     src.ready.eq(fifo.w_rdy)]
        padded, beat, take = Signal(per_pixel * beat_bits), Signal(beat_bits), Signal()
        part = Signal(range(per_pixel))
        m.d.comb += padded.eq(fifo.r_data)
        with m.Switch(part):
            for k in range(per_pixel):
                with m.Case(k):
                    m.d.comb += beat.eq(padded[k * beat_bits:(k + 1) * beat_bits])
        with m.If(take):
            m.d.sync += part.eq(Mux(part == per_pixel - 1, 0, part + 1))
            m.d.comb += fifo.r_en.eq(part == per_pixel - 1)
        return fifo.r_rdy, beat, take

    def _send_partials(self, m):
        """``err_part_out``, buffered one image, onto ``up_err_part``."""
        config, node = self._config, self._node
        seg, out = config.segment(node), self.up_err_part
        valid, beat, take = self._pixels_out(m, "partials", self.err_part_out,
                                             seg.n_in * seg.partial_bits,
                                             config.partial_error_beats(node))
        m.d.comb += [out.valid.eq(valid), out.payload.as_value().eq(beat),
                     take.eq(out.valid & out.ready)]

    def _send_errors(self, m, later):
        """An ICP stage after its layer's first (layer ``t > 0``): per image its EB output
        (buffered one image, a pixel in :meth:`ChainConfig.error_block_beats` beats) on
        ``up_err``, then the blocks of the ``later`` stages of its layer relayed from
        ``down_err`` (DP4's rule: own errors first)."""
        config, node = self._config, self._node
        seg, out, src = config.segment(node), self.up_err, self.down_err
        own = config.error_block_beats(node)
        relay = sum(config.error_block_beats(j) for j in later)
        valid, beat, take = self._pixels_out(m, "errors", self.err_out,
                                             seg.n_in * config.word_bits,
                                             own // seg.w_in ** 2)
        count = Signal(range(max(own, relay)))
        with m.FSM(name="errors"):
            with m.State("own"):
                m.d.comb += [out.valid.eq(valid), out.payload.as_value().eq(beat),
                             take.eq(out.valid & out.ready)]
                _block(m, take, count, own, "relay" if relay else "own")
            if relay:
                with m.State("relay"):
                    m.d.comb += [out.valid.eq(src.valid), out.payload.eq(src.payload),
                                 src.ready.eq(out.ready)]
                    _block(m, src.valid & out.ready, count, relay, "own")

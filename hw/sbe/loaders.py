"""The SBE's stream loaders: they fill the weight and vector double buffers from the DMA
streams in the order the controller consumes them (:mod:`.controller`; the stream formats
are in :mod:`nnrtl.sim.golden.sbe.streams`).

* :class:`WeightLoader` -- a run's header (one bias, batch-norm scale or shift per beat)
  into the post-processing units' parameter memories, then weight blocks, ``bus_weights``
  words per beat, alternately into the two halves of the weight buffer (resident weights,
  ``blocks <= 2``: block ``b`` into half ``b``, once per run).
* :class:`InputLoader` -- x vectors, ``k`` elements per beat: per batch, the batch's x
  columns of each x-only block, then those of the first hidden block (the *tail*),
  alternately into the two halves of the vector buffer.

A half is written only while it is free (its ``loaded`` flag clear); a finished block sets
the flag through ``done``; the controller clears it when it has used the block.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import SbeConfig
from .controller import Controller, LayerConstants, next_batch_size

__all__ = ["WeightLoader", "InputLoader"]


def _check(config, half_depth, minimum):
    if not isinstance(config, SbeConfig):
        raise TypeError(f"config must be an SbeConfig, not {config!r}")
    if not isinstance(half_depth, int) or isinstance(half_depth, bool) or half_depth <= 0:
        raise TypeError(f"half_depth must be a positive integer, not {half_depth!r}")
    if half_depth < minimum(config):
        raise ValueError(f"half_depth ({half_depth}) must be at least {minimum(config)}, "
                         f"the entries of the largest block")


class WeightLoader(wiring.Component):
    """Header and weight blocks from the weight stream.

    Parameters
    ----------
    config : SbeConfig
    half_depth : int
        Entries of one half of the weight buffer (:meth:`.Controller.weight_half_depth`),
        at least a block's.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`SbeConfig` or ``half_depth`` not a positive integer.
    ValueError
        If ``half_depth`` is smaller than a block.

    Attributes
    ----------
    start, steps, later_layer : In
        As :class:`~.controller.Controller`.
    i : In(stream.Signature(bus_weights * operand_width))
    loaded : In(2)
        Halves of the weight buffer holding a block not yet used.
    done : Out(2)
        A block finished in that half this cycle.
    busy : Out(1)
    hdr_en, hdr_lane, hdr_addr, hdr_field, hdr_data : Out
        Header value for post-processing unit ``hdr_lane``.
    w_en, w_group, w_addr, w_data : Out
        Beat for PE group ``w_group`` at weight buffer entry ``w_addr``.
    words : Out(1)
        A beat of weights (not header) is taken this cycle.
    """

    def __init__(self, config, *, half_depth):
        _check(config, half_depth, Controller.weight_half_depth)
        self._config = config
        self._half = half_depth
        groups = config.pes // config.bus_weights
        units = config.hidden_size // config.post_units
        super().__init__({
            "start": In(1), "steps": In(config.step_bits), "later_layer": In(1),
            "i": In(stream.Signature(config.bus_weights * config.operand_width)),
            "loaded": In(2), "done": Out(2), "busy": Out(1),
            "hdr_en": Out(1), "hdr_lane": Out(range(config.post_units)),
            "hdr_addr": Out(range(units)), "hdr_field": Out(range(config.header_fields)),
            "hdr_data": Out(config.acc_width),
            "w_en": Out(1), "w_group": Out(range(groups)), "w_addr": Out(range(2 * half_depth)),
            "w_data": Out(config.bus_weights * config.operand_width),
            "words": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        config = self._config
        c = LayerConstants(config, self.later_layer)
        groups = config.pes // config.bus_weights

        header = Signal()
        field = Signal.like(self.hdr_field)
        lane = Signal.like(self.hdr_lane)
        addr = Signal.like(self.hdr_addr)
        group = Signal.like(self.w_group)
        entry = Signal(range(self._half))
        fill = Signal()
        t0 = Signal(config.step_bits)
        n = Signal(range(config.batch + 1))
        block = Signal(range(config.blocks * config.batch + 1))   # blocks of this batch

        resident = config.weights_resident
        half = block[0] if resident else fill
        free = ~Mux(half, self.loaded[1], self.loaded[0])
        take = Signal()
        m.d.comb += [
            self.i.ready.eq(self.busy & (header | free)),
            take.eq(self.i.valid & self.i.ready),
            self.hdr_en.eq(take & header), self.hdr_lane.eq(lane), self.hdr_addr.eq(addr),
            self.hdr_field.eq(field), self.hdr_data.eq(self.i.payload[:config.acc_width]),
            self.w_en.eq(take & ~header), self.w_group.eq(group),
            self.w_addr.eq(Mux(half, self._half, 0) + entry), self.w_data.eq(self.i.payload),
            self.words.eq(take & ~header),
        ]

        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(self.steps != 0), header.eq(1), field.eq(0),
                         lane.eq(0), addr.eq(0), group.eq(0), entry.eq(0), fill.eq(0),
                         t0.eq(0), n.eq(next_batch_size(config, self.steps, 0)), block.eq(0),
                         ]

        with m.If(take & header):
            with m.If(field != config.header_fields - 1):
                m.d.sync += field.eq(field + 1)
            with m.Else():
                m.d.sync += field.eq(0)
                with m.If(lane != config.post_units - 1):
                    m.d.sync += lane.eq(lane + 1)
                with m.Else():
                    m.d.sync += lane.eq(0)
                    with m.If(addr != config.hidden_size // config.post_units - 1):
                        m.d.sync += addr.eq(addr + 1)
                    with m.Else():
                        m.d.sync += [addr.eq(0), header.eq(0)]

        with m.If(take & ~header):
            with m.If(group != groups - 1):
                m.d.sync += group.eq(group + 1)
            with m.Else():
                m.d.sync += group.eq(0)
                with m.If(entry != c.entries - 1):
                    m.d.sync += entry.eq(entry + 1)
                with m.Else():
                    # A block is complete.
                    m.d.sync += [entry.eq(0), fill.eq(~fill), block.eq(block + 1)]
                    m.d.comb += self.done.eq(Mux(half, 0b10, 0b01))
                    if resident:
                        with m.If(block == config.blocks - 1):
                            m.d.sync += self.busy.eq(0)
                    else:
                        # Blocks of a batch: F, then HB once (merged) or n times (case 3).
                        per_batch = c.first_hidden_block + Mux(
                            c.merged, c.hidden_blocks, n * c.hidden_blocks)
                        with m.If(block == per_batch - 1):
                            m.d.sync += block.eq(0)
                            with m.If(t0 + n == self.steps):
                                m.d.sync += self.busy.eq(0)
                            with m.Else():
                                m.d.sync += [t0.eq(t0 + n),
                                             n.eq(next_batch_size(config, self.steps, t0 + n))]
        return m


class InputLoader(wiring.Component):
    """x vectors from the input stream into the vector double buffer.

    Parameters
    ----------
    config : SbeConfig
    half_depth : int
        Entries of one half of the vector buffer (:meth:`.Controller.vector_half_depth`),
        at least a block's x for a whole batch.

    Raises
    ------
    TypeError, ValueError
        As :class:`WeightLoader`.

    Attributes
    ----------
    start, steps, later_layer : In
    i : In(stream.Signature(k * operand_width))
    loaded : In(2)
    done : Out(2)
    busy : Out(1)
    x_en, x_addr, x_data : Out
        Vector buffer write.
    """

    def __init__(self, config, *, half_depth):
        _check(config, half_depth, Controller.vector_half_depth)
        self._config = config
        self._half = half_depth
        width = config.columns_per_cycle * config.operand_width
        super().__init__({
            "start": In(1), "steps": In(config.step_bits), "later_layer": In(1),
            "i": In(stream.Signature(width)),
            "loaded": In(2), "done": Out(2), "busy": Out(1),
            "x_en": Out(1), "x_addr": Out(range(2 * half_depth)), "x_data": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        config = self._config
        c = LayerConstants(config, self.later_layer)

        fill = Signal()
        t0 = Signal(config.step_bits)
        n = Signal(range(config.batch + 1))
        block = Signal(range(config.blocks + 1))      # x block of the batch; F = the tail
        s = Signal(range(config.batch))
        q = Signal(range(config.max_block_columns + 1))
        index = Signal(range(self._half))
        tail = block == c.first_hidden_block
        length = Mux(tail, c.tail_steps, c.block_steps)   # beats per step of this block

        free = ~Mux(fill, self.loaded[1], self.loaded[0])
        take = Signal()
        m.d.comb += [
            self.i.ready.eq(self.busy & free),
            take.eq(self.i.valid & self.i.ready),
            self.x_en.eq(take), self.x_addr.eq(Mux(fill, self._half, 0) + index),
            self.x_data.eq(self.i.payload),
        ]

        def next_batch():
            with m.If(t0 + n == self.steps):
                m.d.sync += self.busy.eq(0)
            with m.Else():
                m.d.sync += [t0.eq(t0 + n), n.eq(next_batch_size(config, self.steps, t0 + n)),
                             block.eq(0)]

        with m.If(self.start & ~self.busy):
            has_x = (c.first_hidden_block != 0) | (c.tail_steps != 0)
            m.d.sync += [self.busy.eq((self.steps != 0) & has_x), fill.eq(0), t0.eq(0),
                         n.eq(next_batch_size(config, self.steps, 0)), s.eq(0), q.eq(0),
                         index.eq(0), block.eq(0)]

        with m.If(take):
            m.d.sync += index.eq(index + 1)
            with m.If(q != length - 1):
                m.d.sync += q.eq(q + 1)
            with m.Else():
                m.d.sync += q.eq(0)
                with m.If(s != n - 1):
                    m.d.sync += s.eq(s + 1)
                with m.Else():
                    # The block's x for the whole batch is in.
                    m.d.sync += [s.eq(0), index.eq(0), fill.eq(~fill)]
                    m.d.comb += self.done.eq(Mux(fill, 0b10, 0b01))
                    with m.If(tail):
                        next_batch()
                    with m.Elif((block == c.first_hidden_block - 1) & (c.tail_steps == 0)):
                        next_batch()
                    with m.Else():
                        m.d.sync += block.eq(block + 1)
        return m

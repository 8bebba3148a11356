"""The write path of the compressing DMA (paper §V-D, Fig. 14; spec §3.5): the compression
module, the byte packers in front of the WT queues and the I/O interface that writes the
queues to AXI4 memory in MS1's format (:mod:`nnrtl.gen.omni.compress`).

* :class:`CompressionModule` -- a transfer's values, one per cycle: dense (the
  descriptor's ``sparse`` flag clear) straight to the value output; sparse: a value
  survives unless ``|v| < θ`` (comparison of the magnitude bits with the threshold
  register, both fp32: NaN survives, θ = 0 prunes nothing), survivors to the value
  output, one bitmap byte per 8 positions (LSB first, the last byte of a block padded
  with 0 bits) to the index output.
* :class:`Packer` -- elements of 1 (bitmap) or 4 (value) bytes packed into AXI beats
  from any byte offset, with byte strobes; ``flush`` writes the partial last beat.
* :class:`WriteInterface` -- the WT Index Queue and WT Data Queue (FIFOs of beats) and
  the AXI4 write channels: INCR bursts of up to ``burst_len`` beats aligned to
  ``burst_len`` beats, from whichever queue holds a whole burst (or its last beats),
  alternating between the two.

Internal handshakes: a producer's ``valid`` may depend on its consumer's ``ready``
(never the other way round), so no combinational loop forms.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .dma_config import DmaConfig, axi4_signature

__all__ = ["CompressionModule", "Packer", "WriteInterface", "beat_layout"]


def beat_layout(config):
    """Payload of a packed AXI beat: ``data`` and ``strb``."""
    return data.StructLayout({"data": config.data_width, "strb": config.bus_bytes})


class CompressionModule(wiring.Component):
    """Pruning and bitmap encoding of one transfer at a time.

    Parameters
    ----------
    config : DmaConfig

    Attributes
    ----------
    start : In(1)
        Begin a transfer of ``blocks`` x ``length`` values (sampled with ``start``).
    sparse, blocks, length : In
    threshold : In(32)
        θ as fp32 bits (:func:`~.dma_config.threshold_bits`); the sign bit is ignored.
    i : In(stream.Signature(32))
        The values, fp32 bits.
    value : Out(stream.Signature(32))
        Dense values or survivors.
    bitmap : Out(stream.Signature(8))
        Bitmap bytes (sparse transfers only).
    flush : Out(1)
        Every value of the transfer is taken (held until the next ``start``).
    busy : Out(1)
    kept, pruned : Out(1)
        A value of a sparse transfer survived / was pruned this cycle.
    """

    def __init__(self, config):
        if not isinstance(config, DmaConfig):
            raise TypeError(f"config must be a DmaConfig, not {config!r}")
        self._config = config
        super().__init__({
            "start": In(1), "sparse": In(1), "blocks": In(range(config.max_blocks + 1)),
            "length": In(range(config.max_length + 1)), "threshold": In(32),
            "i": In(stream.Signature(32)),
            "value": Out(stream.Signature(32)), "bitmap": Out(stream.Signature(8)),
            "flush": Out(1), "busy": Out(1), "kept": Out(1), "pruned": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        config = self._config
        sparse = Signal()
        blocks = Signal.like(self.blocks)
        length = Signal.like(self.length)
        pos = Signal(range(config.max_length))
        block = Signal(range(config.max_blocks))
        bits = Signal(8)

        v = self.i.payload
        keep = ~sparse | ~(v[:31] < self.threshold[:31])
        end_of_byte = (pos[:3] == 7) | (pos == length - 1)
        room = self.value.ready & (self.bitmap.ready | ~sparse)
        take = Signal()
        m.d.comb += [
            self.i.ready.eq(self.busy & ~self.flush & room),
            take.eq(self.i.valid & self.i.ready),
            self.value.valid.eq(take & keep), self.value.payload.eq(v),
            self.bitmap.valid.eq(take & sparse & end_of_byte),
            self.bitmap.payload.eq(bits | (keep.as_unsigned() << pos[:3])),
            self.kept.eq(take & sparse & keep), self.pruned.eq(take & sparse & ~keep),
        ]
        with m.If(take):
            m.d.sync += bits.eq(Mux(end_of_byte, 0, self.bitmap.payload))
            with m.If(pos == length - 1):
                m.d.sync += [pos.eq(0), block.eq(block + 1)]
                with m.If(block == blocks - 1):
                    m.d.sync += self.flush.eq(1)
            with m.Else():
                m.d.sync += pos.eq(pos + 1)
        with m.If(self.start):
            m.d.sync += [sparse.eq(self.sparse), blocks.eq(self.blocks), length.eq(self.length),
                         pos.eq(0), block.eq(0), bits.eq(0), self.busy.eq(1),
                         self.flush.eq(0)]
        with m.Elif(self.flush):
            m.d.sync += self.busy.eq(0)
        return m


class Packer(wiring.Component):
    """Elements of ``element_bytes`` bytes into AXI beats of ``config.bus_bytes`` bytes,
    the first at byte lane ``offset``; strobes mark the bytes written.

    Attributes
    ----------
    start : In(1)
        Begin a region whose first byte is at lane ``offset``.
    offset : In(range(bus_bytes))
    i : In(stream.Signature(8 * element_bytes))
    flush : In(1)
        No element follows (level): write the partial beat, then ``done``.
    o : Out(stream.Signature(beat_layout(config)))
    done : Out(1)
        The region's last beat is out (until the next ``start``).
    """

    def __init__(self, config, element_bytes):
        if element_bytes not in (1, 4):
            raise TypeError(f"element_bytes must be 1 or 4, not {element_bytes!r}")
        self._config = config
        self._e = element_bytes
        super().__init__({
            "start": In(1), "offset": In(range(config.bus_bytes)),
            "i": In(stream.Signature(8 * element_bytes)), "flush": In(1),
            "o": Out(stream.Signature(beat_layout(config))), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w, e = self._config.bus_bytes, self._e
        pos = Signal(range(w))
        buf = Signal(8 * w)
        mask = Signal(w)
        wide = Signal(8 * (w + e))
        wmask = Signal(w + e)
        full = pos + e >= w
        m.d.comb += [
            wide.eq(buf | (self.i.payload << Cat(Const(0, 3), pos))),
            wmask.eq(mask | (Const((1 << e) - 1, e) << pos)),
        ]
        with m.If(self.flush):
            m.d.comb += [self.o.valid.eq(~self.done & (mask != 0)),
                         self.o.payload.data.eq(buf), self.o.payload.strb.eq(mask)]
            with m.If(~self.done & ((mask == 0) | self.o.ready)):
                m.d.sync += [self.done.eq(1), buf.eq(0), mask.eq(0)]
        with m.Else():
            m.d.comb += [
                self.i.ready.eq(~full | self.o.ready),
                self.o.valid.eq(self.i.valid & full),
                self.o.payload.data.eq(wide[:8 * w]), self.o.payload.strb.eq(wmask[:w]),
            ]
            with m.If(self.i.valid & self.i.ready):
                with m.If(full):
                    m.d.sync += [buf.eq(wide[8 * w:]), mask.eq(wmask[w:]),
                                 pos.eq(pos + e - w)]
                with m.Else():
                    m.d.sync += [buf.eq(wide[:8 * w]), mask.eq(wmask[:w]), pos.eq(pos + e)]
        with m.If(self.start):
            m.d.sync += [pos.eq(self.offset), buf.eq(0), mask.eq(0), self.done.eq(0)]
        return m


class WriteInterface(wiring.Component):
    """The WT Index Queue, the WT Data Queue and the AXI4 write channels.

    Attributes
    ----------
    start : In(1)
        Begin a transfer: the index region at byte ``index_addr``, the value region at
        ``data_addr`` (only their beat addresses matter here; the packers handle lanes).
    index_addr, data_addr : In(addr_width)
    index_beat, data_beat : In(stream.Signature(beat_layout(config)))
        Into the WT Index Queue / WT Data Queue.
    index_done, data_done : In(1)
        The packer in front of the queue has sent its last beat.
    axi : Out(axi4_signature(config))
        The write channels (the read channels are left idle).
    busy : Out(1)
        From ``start`` until every beat is written and every response received.
    beat_bytes : Out(range(bus_bytes + 1))
        Bytes (strobes) of the beat written this cycle.
    error : Out(1)
        A write response was not OKAY (sticky until ``start``).
    """

    def __init__(self, config):
        self._config = config
        super().__init__({
            "start": In(1), "index_addr": In(config.addr_width),
            "data_addr": In(config.addr_width),
            "index_beat": In(stream.Signature(beat_layout(config))),
            "data_beat": In(stream.Signature(beat_layout(config))),
            "index_done": In(1), "data_done": In(1),
            "axi": Out(axi4_signature(config)), "busy": Out(1),
            "beat_bytes": Out(range(config.bus_bytes + 1)), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c = self._config
        width = c.data_width + c.bus_bytes
        fifos = [SyncFIFO(width=width, depth=c.wt_index_depth),
                 SyncFIFO(width=width, depth=c.wt_data_depth)]
        m.submodules.wt_index_queue, m.submodules.wt_data_queue = fifos
        inputs = [self.index_beat, self.data_beat]
        dones = [self.index_done, self.data_done]
        beat_bits = c.addr_width - c.size_code
        addrs = [Signal(beat_bits, name="index_beat_addr"),
                 Signal(beat_bits, name="data_beat_addr")]
        for fifo, i in zip(fifos, inputs):
            m.d.comb += [fifo.w_data.eq(i.payload.as_value()), fifo.w_en.eq(i.valid),
                         i.ready.eq(fifo.w_rdy)]

        low = max(1, (c.burst_len - 1).bit_length())
        ready, lens = [], []
        for s, (fifo, addr, done) in enumerate(zip(fifos, addrs, dones)):
            room = Signal(range(c.burst_len + 1), name=f"room{s}")
            if c.burst_len == 1:
                m.d.comb += room.eq(1)
            else:
                m.d.comb += room.eq(c.burst_len - addr[:low])
            r = Signal(name=f"ready{s}")
            n = Signal(range(c.burst_len + 1), name=f"len{s}")
            m.d.comb += [r.eq((fifo.level >= room) | (done & (fifo.level != 0))),
                         n.eq(Mux(fifo.level >= room, room, fifo.level))]
            ready.append(r)
            lens.append(n)

        axi = self.axi
        sel = Signal()
        last_sel = Signal()
        length = Signal(range(c.burst_len + 1))
        beat = Signal(range(c.burst_len))
        outstanding = Signal(16)
        aw_fire = axi.awvalid & axi.awready
        b_fire = axi.bvalid & axi.bready
        m.d.sync += outstanding.eq(outstanding + aw_fire - b_fire)
        m.d.comb += [axi.awsize.eq(c.size_code), axi.awburst.eq(0b01), axi.bready.eq(1),
                     axi.awlen.eq(length - 1),
                     axi.awaddr.eq(Cat(Const(0, c.size_code), Mux(sel, addrs[1], addrs[0])))]
        head = Mux(sel, fifos[1].r_data, fifos[0].r_data)
        m.d.comb += [axi.wdata.eq(head[:c.data_width]), axi.wstrb.eq(head[c.data_width:])]
        with m.If(b_fire & (axi.bresp != 0)):
            m.d.sync += self.error.eq(1)

        with m.FSM():
            with m.State("IDLE"):
                # Alternate: the queue not served last goes first when both are ready.
                with m.If(self.busy & (ready[0] | ready[1])):
                    pick = Mux(ready[0] & ready[1], ~last_sel, ready[1])
                    m.d.sync += [sel.eq(pick), length.eq(Mux(pick, lens[1], lens[0]))]
                    m.next = "ADDR"
                with m.Elif(self.busy & dones[0] & dones[1] & (fifos[0].level == 0)
                            & (fifos[1].level == 0) & (outstanding == 0)):
                    m.d.sync += self.busy.eq(0)
            with m.State("ADDR"):
                m.d.comb += axi.awvalid.eq(1)
                with m.If(axi.awready):
                    m.d.sync += beat.eq(0)
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [axi.wvalid.eq(1), axi.wlast.eq(beat == length - 1)]
                with m.If(axi.wready):
                    m.d.comb += [fifos[0].r_en.eq(~sel), fifos[1].r_en.eq(sel),
                                 self.beat_bytes.eq(sum(axi.wstrb[k]
                                                        for k in range(c.bus_bytes)))]
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(beat == length - 1):
                        with m.If(sel):
                            m.d.sync += addrs[1].eq(addrs[1] + length)
                        with m.Else():
                            m.d.sync += addrs[0].eq(addrs[0] + length)
                        m.d.sync += last_sel.eq(sel)
                        m.next = "IDLE"
        with m.If(self.start):
            m.d.sync += [addrs[0].eq(self.index_addr[c.size_code:]),
                         addrs[1].eq(self.data_addr[c.size_code:]),
                         self.busy.eq(1), self.error.eq(0)]
        return m

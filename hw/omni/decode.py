"""The read path of the compressing DMA (paper §V-D, Fig. 14; spec §3.5): readers with
their RD queues, the AXI4 read channels shared between them, and the decoder.

* :class:`Reader` -- read jobs (a byte address and a count of 1- or 4-byte elements)
  split into INCR bursts aligned to ``burst_len`` beats; a burst is asked for only when
  its queue has room for all its beats (so the shared read data channel never blocks:
  no deadlock whatever the order of requests); the unpacker turns the beats back into
  elements from any byte offset.
* :class:`ReadInterface` -- the AR channel arbitrated between the readers (fixed
  priority: the dense operand, then the values, then the bitmap), a queue of the bursts
  in flight routing each R beat to its reader (one ID: responses in order).
* :class:`Decoder` -- the three read modes of :data:`~.dma_config.READ_MODES`:

  ``dense``
      The record's ``blocks * length`` values, one beat each (``index`` = position).
  ``expand``
      A sparse record re-densified: one beat per position, pruned positions +0.0.
  ``gather``
      Per surviving value ``v`` at position ``j`` of block ``b``, the dense operand's row
      at ``dense_base + b * block_stride + j * row_stride`` (``row_words`` words; rows
      of W/U with ``block_stride = 0``, the matching element with ``row_words = 1``,
      ``row_stride = 4``): ``row_words`` beats ``(v, row[k])``; nothing is read for a
      pruned position (spec §3.5 [D]: zero δgate entries skip the matching rows). With
      ``row_words = 0`` one beat ``(v, 0)`` per survivor.

  The bitmap is read once; a counting stage sums each block's survivors and asks for the
  block's values (one read job per block with survivors), the walker goes through the
  positions one per cycle and asks for each survivor's row (one read job per row).

Throughput (Amaranth simulator, 64-bit bus, bursts of 8, memory answering at once, 16
blocks of 64 values, about 60 % surviving θ = 0.1): ``dense`` and ``expand`` one beat per
cycle (1,032 and 1,068 cycles for 1,024 beats); ``gather`` about 3 cycles per survivor
with 1-word rows (an AXI burst each) and 1.26 cycles per beat with 8-word rows.
[U] decided here: the walker takes one position per cycle (a priority encoder skipping runs
of pruned positions would help very sparse blocks; at the paper's ≈35 % density a gather of
rows of 3 words or more is limited by the rows, not the walk).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .dma_config import READ_MODES, DmaConfig, axi4_signature

__all__ = ["Reader", "ReadInterface", "Decoder", "output_layout", "job_layout", "MODE"]

#: Mode codes of the decoder's ``mode`` input.
MODE = {name: code for code, name in enumerate(READ_MODES)}


def output_layout(config):
    """Payload of the decoder's output (the RD Data Queue toward the channels)."""
    return data.StructLayout({"value": 32, "dense": 32, "index": config.index_width,
                              "row_last": 1, "last": 1})


def job_layout(config):
    """A read job: byte address and element count."""
    return data.StructLayout({"addr": config.addr_width,
                              "count": max(config.max_record_words,
                                           config.max_blocks * config.bitmap_bytes,
                                           config.max_row_words).bit_length()})


class Reader(wiring.Component):
    """One stream of elements of ``element_bytes`` bytes read from AXI4 memory.

    Attributes
    ----------
    job : In(stream.Signature(job_layout(config)))
        ``count >= 1`` elements from byte ``addr``.
    ar_valid, ar_addr, ar_len : Out
        The next burst (beat address, beats); stable until ``ar_grant``.
    ar_grant : In(1)
    r_valid, r_data : In
        A beat of this reader's bursts (always taken: room is reserved).
    o : Out(stream.Signature(8 * element_bytes))
    idle : Out(1)
        No job in progress or queued.
    """

    def __init__(self, config, element_bytes, depth):
        self._config, self._e, self._depth = config, element_bytes, depth
        beat_bits = config.addr_width - config.size_code
        super().__init__({
            "job": In(stream.Signature(job_layout(config))),
            "ar_valid": Out(1), "ar_addr": Out(beat_bits),
            "ar_len": Out(range(config.burst_len + 1)), "ar_grant": In(1),
            "r_valid": In(1), "r_data": In(config.data_width),
            "o": Out(stream.Signature(8 * element_bytes)), "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c, e = self._config, self._e
        w = c.bus_bytes
        beat_bits = c.addr_width - c.size_code
        count_bits = len(self.job.payload.count)
        m.submodules.queue = queue = SyncFIFO(width=c.data_width, depth=self._depth)
        unpack_layout = data.StructLayout({"offset": range(w), "count": count_bits,
                                           "beats": beat_bits + 1})
        m.submodules.jobs = jobs = SyncFIFO(width=unpack_layout.size, depth=4)

        # Issue: one job at a time split into bursts.
        nxt = Signal(beat_bits)
        left = Signal(beat_bits + 1)
        inflight = Signal(range(self._depth + 1))
        job = self.job.payload
        end = Signal(c.addr_width + count_bits + 2)
        m.d.comb += end.eq(job.addr + job.count * e - 1)
        first, last = job.addr[c.size_code:], end[c.size_code:]
        beats = Signal(beat_bits + 1)
        m.d.comb += beats.eq(last - first + 1)
        entry = Signal(unpack_layout)
        m.d.comb += [entry.offset.eq(job.addr[:c.size_code] if c.size_code else 0),
                     entry.count.eq(job.count), entry.beats.eq(beats),
                     jobs.w_data.eq(entry.as_value()),
                     jobs.w_en.eq(self.job.valid & self.job.ready)]

        low = max(1, (c.burst_len - 1).bit_length())
        room = Signal(range(c.burst_len + 1))
        m.d.comb += room.eq(1 if c.burst_len == 1 else c.burst_len - nxt[:low])
        n = Signal(range(c.burst_len + 1))
        m.d.comb += [n.eq(Mux(left < room, left, room)),
                     self.ar_addr.eq(nxt), self.ar_len.eq(n),
                     self.ar_valid.eq((left != 0) & (queue.level + inflight + n <= self._depth))]
        with m.If(self.ar_grant):
            m.d.sync += [nxt.eq(nxt + n), left.eq(left - n)]
        # The next job is taken in the cycle the last burst of the previous one is granted.
        m.d.comb += self.job.ready.eq(((left == 0) | (self.ar_grant & (left == n)))
                                      & jobs.w_rdy)
        with m.If(self.job.valid & self.job.ready):
            m.d.sync += [nxt.eq(first), left.eq(beats)]
        m.d.sync += inflight.eq(inflight + Mux(self.ar_grant, n, 0) - self.r_valid)
        m.d.comb += [queue.w_en.eq(self.r_valid), queue.w_data.eq(self.r_data)]

        # Unpack: beats to elements from the job's byte offset.
        active = Signal()
        drop = Signal(range(w))
        count = Signal(count_bits)
        beats_left = Signal(beat_bits + 1)
        buf = Signal(16 * w)
        have = Signal(range(2 * w + 1))
        out = self.o.valid & self.o.ready
        take = Signal()
        m.d.comb += [self.o.valid.eq(active & (count != 0) & (have >= e)),
                     self.o.payload.eq(buf[:8 * e]),
                     take.eq(active & (beats_left != 0) & (have <= w) & queue.r_rdy),
                     queue.r_en.eq(take)]
        mid_buf = Mux(out, buf >> (8 * e), buf)
        mid_have = Mux(out, have - e, have)
        shifted = Signal(8 * w)
        m.d.comb += shifted.eq(queue.r_data >> Cat(Const(0, 3), drop))
        with m.If(take):
            m.d.sync += [buf.eq(mid_buf | (shifted << Cat(Const(0, 3), mid_have))),
                         have.eq(mid_have + w - drop), drop.eq(0),
                         beats_left.eq(beats_left - 1)]
        with m.Else():
            m.d.sync += [buf.eq(mid_buf), have.eq(mid_have)]
        with m.If(out):
            m.d.sync += count.eq(count - 1)
        head = Signal(unpack_layout)
        m.d.comb += head.eq(jobs.r_data)
        with m.If(~active | ((count == 0) & (beats_left == 0))):
            m.d.comb += jobs.r_en.eq(jobs.r_rdy)
            m.d.sync += [active.eq(jobs.r_rdy), drop.eq(head.offset), count.eq(head.count),
                         beats_left.eq(head.beats), buf.eq(0), have.eq(0)]
        m.d.comb += self.idle.eq(~active & ~jobs.r_rdy & (left == 0))
        return m


class ReadInterface(wiring.Component):
    """The AXI4 read channels shared by ``readers`` (a list, highest priority first).

    Attributes
    ----------
    axi : Out(axi4_signature(config))
        The read channels (the write channels are left idle).
    error : Out(1)
        A read response was not OKAY (sticky until ``clear``).
    clear : In(1)
    """

    def __init__(self, config, readers):
        self._config, self._readers = config, readers
        super().__init__({"axi": Out(axi4_signature(config)), "error": Out(1),
                          "clear": In(1)})

    def elaborate(self, platform):
        m = Module()
        c, readers = self._config, self._readers
        ids = range(len(readers))
        axi = self.axi
        m.submodules.tags = tags = SyncFIFO(width=max(1, (len(readers) - 1).bit_length()),
                                            depth=16)
        sel = Signal(range(len(readers)))
        addr = Signal(c.addr_width - c.size_code)
        length = Signal(range(c.burst_len + 1))
        m.d.comb += [axi.arsize.eq(c.size_code), axi.arburst.eq(0b01),
                     axi.araddr.eq(Cat(Const(0, c.size_code), addr)), axi.arlen.eq(length - 1),
                     axi.rready.eq(1)]
        # A request is presented as soon as a reader has one; once presented and not yet
        # taken, the choice is held (AXI4: the address may not change while arvalid waits).
        locked = Signal()
        choice = Signal(range(len(readers)))
        any_valid = Signal()
        for k in reversed(ids):
            with m.If(readers[k].ar_valid):
                m.d.comb += [choice.eq(k), any_valid.eq(1)]
        pick = Mux(locked, sel, choice)
        for k in ids:
            with m.If(pick == k):
                m.d.comb += [addr.eq(readers[k].ar_addr), length.eq(readers[k].ar_len)]
        m.d.comb += [axi.arvalid.eq(tags.w_rdy & (locked | any_valid)), tags.w_data.eq(pick)]
        with m.If(axi.arvalid & axi.arready):
            m.d.comb += tags.w_en.eq(1)
            for k in ids:
                m.d.comb += readers[k].ar_grant.eq(pick == k)
            m.d.sync += locked.eq(0)
        with m.Elif(axi.arvalid):
            m.d.sync += [locked.eq(1), sel.eq(pick)]
        for k in ids:
            m.d.comb += [readers[k].r_valid.eq(axi.rvalid & (tags.r_data == k)),
                         readers[k].r_data.eq(axi.rdata)]
        m.d.comb += tags.r_en.eq(axi.rvalid & axi.rlast)
        with m.If(self.clear):
            m.d.sync += self.error.eq(0)
        with m.Elif(axi.rvalid & (axi.rresp != 0)):
            m.d.sync += self.error.eq(1)
        return m


class Decoder(wiring.Component):
    """The read path: readers, RD queues, read channels, counting stage, walker and the
    output toward the channels.

    Attributes
    ----------
    start : In(1)
        Begin a read (the descriptor fields below are sampled with ``start``).
    mode : In(2)
        :data:`MODE` code.
    base : In(addr_width)
        The record's first byte (index part of a sparse record).
    blocks, length : In
    dense_base, row_stride, block_stride : In(addr_width)
    row_words : In(range(max_row_words + 1))
    o : Out(stream.Signature(output_layout(config)))
    busy : Out(1)
    axi : Out(axi4_signature(config))
        Read channels.
    bytes_read : Out(range(9))
        Bytes of the record and the dense operand delivered this cycle (alignment bytes
        of partly used beats excluded).
    error : Out(1)
    """

    def __init__(self, config):
        if not isinstance(config, DmaConfig):
            raise TypeError(f"config must be a DmaConfig, not {config!r}")
        self._config = config
        a = config.addr_width
        super().__init__({
            "start": In(1), "mode": In(2), "base": In(a),
            "blocks": In(range(config.max_blocks + 1)),
            "length": In(range(config.max_length + 1)),
            "dense_base": In(a), "row_stride": In(a), "block_stride": In(a),
            "row_words": In(range(config.max_row_words + 1)),
            "o": Out(stream.Signature(output_layout(config))), "busy": Out(1),
            "axi": Out(axi4_signature(config)), "bytes_read": Out(range(9)), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c = self._config
        m.submodules.dense = dense = Reader(c, 4, c.rd_dense_depth)
        m.submodules.values = values = Reader(c, 4, c.rd_data_depth)
        m.submodules.index = index = Reader(c, 1, c.rd_index_depth)
        m.submodules.port = port = ReadInterface(c, [dense, values, index])
        wiring.connect(m, wiring.flipped(self.axi), port.axi)
        m.d.comb += [port.clear.eq(self.start), self.error.eq(port.error)]

        mode = Signal(2)
        blocks = Signal.like(self.blocks)
        length = Signal.like(self.length)
        row_words = Signal.like(self.row_words)
        row_stride = Signal.like(self.row_stride)
        block_stride = Signal.like(self.block_stride)
        bpb = Signal(range(c.bitmap_bytes + 1))     # bitmap bytes per block
        sparse = mode != MODE["dense"]
        gather = (mode == MODE["gather"])
        rows = gather & (row_words != 0)

        # Jobs of the start of a read: the bitmap (sparse) or the whole record (dense).
        index_job = Signal()
        dense_job = Signal()
        base = Signal.like(self.base)
        total = Signal(len(index.job.payload.count))
        m.d.comb += [index.job.valid.eq(index_job), index.job.payload.addr.eq(base),
                     index.job.payload.count.eq(total)]
        with m.If(index.job.ready):
            m.d.sync += index_job.eq(0)

        # Counting stage: a block's bitmap into the block queue, its survivors' values asked for.
        m.submodules.block_queue = bq = SyncFIFO(width=8, depth=2 * c.bitmap_bytes)
        vaddr = Signal(c.addr_width)
        byte_i = Signal(range(c.bitmap_bytes))
        acc = Signal(range(8 * c.bitmap_bytes + 1))
        byte = index.o.payload
        ones = sum(byte[k] for k in range(8))
        block_end = byte_i == bpb - 1
        found = Signal.like(acc)
        m.d.comb += found.eq(acc + ones)
        value_job = Signal()
        m.d.comb += value_job.eq(index.o.valid & block_end & (found != 0))
        m.d.comb += [index.o.ready.eq(bq.w_rdy & (~value_job | values.job.ready)),
                     bq.w_en.eq(index.o.valid & index.o.ready), bq.w_data.eq(byte)]
        with m.If(dense_job):
            m.d.comb += [values.job.valid.eq(1), values.job.payload.addr.eq(base),
                         values.job.payload.count.eq(total)]
            with m.If(values.job.ready):
                m.d.sync += dense_job.eq(0)
        with m.Else():
            m.d.comb += [values.job.valid.eq(value_job & bq.w_rdy),
                         values.job.payload.addr.eq(vaddr), values.job.payload.count.eq(found)]
        with m.If(index.o.valid & index.o.ready):
            with m.If(block_end):
                m.d.sync += [byte_i.eq(0), acc.eq(0), vaddr.eq(vaddr + (found << 2))]
            with m.Else():
                m.d.sync += [byte_i.eq(byte_i + 1), acc.eq(found)]

        # Walker: positions in order; entries (value, index) held one cycle so the last
        # one of the read carries ``last``.
        entry_layout = data.StructLayout({"value": 32, "index": c.index_width, "last": 1})
        m.submodules.pending = pending = SyncFIFO(width=entry_layout.size,
                                                  depth=c.pending_depth)
        m.submodules.row_jobs = row_jobs = SyncFIFO(width=len(dense.job.payload.as_value()),
                                                    depth=c.pending_depth)
        walking = Signal()
        pos = Signal(range(c.max_length))
        block = Signal(range(c.max_blocks))
        block_addr = Signal(c.addr_width)
        row_addr = Signal(c.addr_width)
        held = Signal()
        held_value = Signal(32)
        held_index = Signal(c.index_width)
        final = (pos == length - 1) & (block == blocks - 1)
        bit = Signal()
        m.d.comb += bit.eq(Mux(sparse, (bq.r_data >> pos[:3])[0], 1))
        need_value = bit
        need_row = bit & rows
        emits = Mux(gather, bit, 1)
        ok = Signal()
        m.d.comb += ok.eq(walking & (bq.r_rdy | ~sparse) & (values.o.valid | ~need_value)
                          & (pending.w_rdy | ~held) & (row_jobs.w_rdy | ~need_row))
        entry = Signal(entry_layout)
        m.d.comb += [entry.value.eq(held_value), entry.index.eq(held_index), entry.last.eq(0),
                     pending.w_data.eq(entry.as_value())]
        row_job = Signal.like(dense.job.payload)
        m.d.comb += [row_job.addr.eq(row_addr), row_job.count.eq(row_words),
                     row_jobs.w_data.eq(row_job.as_value())]
        with m.If(ok):
            m.d.comb += [values.o.ready.eq(need_value), row_jobs.w_en.eq(need_row),
                         bq.r_en.eq(sparse & ((pos[:3] == 7) | (pos == length - 1))),
                         pending.w_en.eq(held & emits)]
            with m.If(emits):
                m.d.sync += [held.eq(1), held_index.eq(pos),
                             held_value.eq(Mux(bit, values.o.payload, 0))]
            with m.If(pos == length - 1):
                m.d.sync += [pos.eq(0), block.eq(block + 1), block_addr.eq(block_addr
                                                                            + block_stride),
                             row_addr.eq(block_addr + block_stride)]
                with m.If(final):
                    m.d.sync += walking.eq(0)
            with m.Else():
                m.d.sync += [pos.eq(pos + 1), row_addr.eq(row_addr + row_stride)]
        with m.Elif(~walking & held):
            m.d.comb += [entry.last.eq(1), pending.w_en.eq(1)]
            with m.If(pending.w_rdy):
                m.d.sync += held.eq(0)
        m.d.comb += [dense.job.valid.eq(row_jobs.r_rdy), dense.job.payload.eq(row_jobs.r_data),
                     row_jobs.r_en.eq(dense.job.ready)]

        # Output: one beat per entry, or row_words beats with the dense row.
        head = Signal(entry_layout)
        word = Signal(range(c.max_row_words))
        m.d.comb += head.eq(pending.r_data)
        row_last = ~rows | (word == row_words - 1)
        m.d.comb += [self.o.valid.eq(pending.r_rdy & (dense.o.valid | ~rows)),
                     self.o.payload.value.eq(head.value),
                     self.o.payload.dense.eq(Mux(rows, dense.o.payload, 0)),
                     self.o.payload.index.eq(head.index), self.o.payload.row_last.eq(row_last),
                     self.o.payload.last.eq(head.last & row_last)]
        fire = self.o.valid & self.o.ready
        m.d.comb += [dense.o.ready.eq(fire & rows), pending.r_en.eq(fire & row_last)]
        with m.If(fire):
            m.d.sync += word.eq(Mux(row_last, 0, word + 1))
        m.d.comb += self.bytes_read.eq(
            Mux(index.o.valid & index.o.ready, 1, 0)
            + Mux(values.o.valid & values.o.ready, 4, 0)
            + Mux(dense.o.valid & dense.o.ready, 4, 0))

        with m.If(self.busy & ~walking & ~held & ~index_job & ~dense_job & ~pending.r_rdy
                  & dense.idle & values.idle & index.idle):
            m.d.sync += self.busy.eq(0)
        with m.If(self.start):
            bytes_per_block = (self.length + 7) >> 3
            index_bytes = self.blocks * bytes_per_block
            is_sparse = self.mode != MODE["dense"]
            m.d.sync += [
                self.busy.eq(1), walking.eq(1), mode.eq(self.mode), blocks.eq(self.blocks),
                length.eq(self.length), row_words.eq(self.row_words),
                row_stride.eq(self.row_stride), block_stride.eq(self.block_stride),
                bpb.eq(bytes_per_block), base.eq(self.base),
                total.eq(Mux(is_sparse, index_bytes, self.blocks * self.length)),
                index_job.eq(is_sparse), dense_job.eq(~is_sparse),
                vaddr.eq(self.base + index_bytes), byte_i.eq(0), acc.eq(0),
                pos.eq(0), block.eq(0), block_addr.eq(self.dense_base),
                row_addr.eq(self.dense_base), held.eq(0), word.eq(0),
            ]
        return m

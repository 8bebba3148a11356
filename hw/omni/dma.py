"""The η-LSTM customized DMA (paper §V-D, Fig. 14; spec §3.5): compression module and
decoder toward one AXI4 memory port (the HBM side; a memory model in simulation).

:class:`OmniDMA` puts together the write path (:mod:`.compress`: compression module,
packers, WT Index / WT Data Queues, AXI4 write channels) and the read path
(:mod:`.decode`: readers with the RD queues, AXI4 read channels, decoder), with the
counters (bytes written, bytes read, values pruned, values kept). The memory
format is MS1's (:mod:`nnrtl.gen.omni.compress`), the [U] decisions are listed in
:mod:`.dma_config`.

A write transfer (``wr_cmd``)
    ``sparse`` clear: the ``blocks * length`` values of ``wr_data`` stored from ``base``.
    ``sparse`` set: the values pruned against the ``threshold`` register, the record
    (bitmap part from ``base``, values right after it) written in MS1's layout.
A read transfer (``rd_cmd``)
    One of the decoder's modes (:data:`~.decode.MODE`), its beats on ``rd_data``.
Write and read transfers run concurrently (the AXI4 write and read channels are
independent; reading a record being written is the caller's hazard); a command is taken
when its side is idle. ``blocks`` and ``length`` must be at least 1 and at most the
configuration's maxima (:meth:`~.dma_config.DmaConfig.check_transfer`, for the host).

Throughput: a write takes one value per cycle (sparse or dense: 1,043 cycles for 1,024
values on a 64-bit bus, Amaranth simulator, memory without pauses); for the reads see
:mod:`.decode`.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .compress import CompressionModule, Packer, WriteInterface
from .decode import MODE, Decoder, output_layout
from .dma_config import DmaConfig, axi4_signature

__all__ = ["OmniDMA", "write_command_layout", "read_command_layout", "MODE"]


def write_command_layout(config):
    """A write descriptor: ``sparse``, ``base`` (byte address), ``blocks``, ``length``."""
    return data.StructLayout({"sparse": 1, "base": config.addr_width,
                              "blocks": range(config.max_blocks + 1),
                              "length": range(config.max_length + 1)})


def read_command_layout(config):
    """A read descriptor (fields as the :class:`~.decode.Decoder`'s inputs)."""
    a = config.addr_width
    return data.StructLayout({"mode": 2, "base": a, "blocks": range(config.max_blocks + 1),
                              "length": range(config.max_length + 1), "dense_base": a,
                              "row_stride": a, "block_stride": a,
                              "row_words": range(config.max_row_words + 1)})


class OmniDMA(wiring.Component):
    """The compressing DMA.

    Parameters
    ----------
    config : DmaConfig

    Attributes
    ----------
    threshold : In(32)
        The prune threshold register, fp32 bits (:func:`~.dma_config.threshold_bits`).
    wr_cmd : In(stream.Signature(write_command_layout(config)))
    wr_data : In(stream.Signature(32))
        The values of the write transfer, fp32 bits, in record order.
    wr_busy : Out(1)
        A write transfer is in progress (until its last write response).
    rd_cmd : In(stream.Signature(read_command_layout(config)))
    rd_data : Out(stream.Signature(output_layout(config)))
        The RD Data Queue toward the channels.
    rd_busy : Out(1)
    m_axi : Out(axi4_signature(config))
    clear : In(1)
        Zero the counters.
    bytes_written, bytes_read, values_pruned, values_kept : Out(counter_width)
        Bytes whose strobes were set in written beats; bytes of the records and dense
        operands delivered from read beats; values of sparse transfers pruned / kept.
    error : Out(1)
        A write or read response was not OKAY during the last transfer.
    """

    def __init__(self, config):
        if not isinstance(config, DmaConfig):
            raise TypeError(f"config must be a DmaConfig, not {config!r}")
        self._config = config
        n = config.counter_width
        super().__init__({
            "threshold": In(32),
            "wr_cmd": In(stream.Signature(write_command_layout(config))),
            "wr_data": In(stream.Signature(32)), "wr_busy": Out(1),
            "rd_cmd": In(stream.Signature(read_command_layout(config))),
            "rd_data": Out(stream.Signature(output_layout(config))), "rd_busy": Out(1),
            "m_axi": Out(axi4_signature(config)), "clear": In(1),
            "bytes_written": Out(n), "bytes_read": Out(n), "values_pruned": Out(n),
            "values_kept": Out(n), "error": Out(1),
        })

    @property
    def config(self):
        return self._config

    def elaborate(self, platform):
        m = Module()
        c = self._config
        m.submodules.compression = comp = CompressionModule(c)
        m.submodules.index_packer = ipack = Packer(c, 1)
        m.submodules.data_packer = dpack = Packer(c, 4)
        m.submodules.io = io = WriteInterface(c)
        m.submodules.decoder = dec = Decoder(c)

        # Write path.
        cmd = self.wr_cmd.payload
        start = Signal()
        m.d.comb += [self.wr_busy.eq(comp.busy | io.busy),
                     self.wr_cmd.ready.eq(~self.wr_busy),
                     start.eq(self.wr_cmd.valid & self.wr_cmd.ready)]
        index_bytes = Signal(c.addr_width)
        data_addr = Signal(c.addr_width)
        m.d.comb += [index_bytes.eq(cmd.blocks * ((cmd.length + 7) >> 3)),
                     data_addr.eq(cmd.base + Mux(cmd.sparse, index_bytes, 0))]
        m.d.comb += [
            comp.start.eq(start), comp.sparse.eq(cmd.sparse), comp.blocks.eq(cmd.blocks),
            comp.length.eq(cmd.length), comp.threshold.eq(self.threshold),
            ipack.start.eq(start), ipack.offset.eq(cmd.base[:c.size_code]),
            dpack.start.eq(start), dpack.offset.eq(data_addr[:c.size_code]),
            io.start.eq(start), io.index_addr.eq(cmd.base), io.data_addr.eq(data_addr),
            ipack.flush.eq(comp.flush), dpack.flush.eq(comp.flush),
            io.index_done.eq(ipack.done), io.data_done.eq(dpack.done),
        ]
        wiring.connect(m, wiring.flipped(self.wr_data), comp.i)
        wiring.connect(m, comp.bitmap, ipack.i)
        wiring.connect(m, comp.value, dpack.i)
        wiring.connect(m, ipack.o, io.index_beat)
        wiring.connect(m, dpack.o, io.data_beat)

        # Read path.
        rcmd = self.rd_cmd.payload
        m.d.comb += [self.rd_busy.eq(dec.busy), self.rd_cmd.ready.eq(~dec.busy),
                     dec.start.eq(self.rd_cmd.valid & self.rd_cmd.ready)]
        for name in ("mode", "base", "blocks", "length", "dense_base", "row_stride",
                     "block_stride", "row_words"):
            m.d.comb += getattr(dec, name).eq(getattr(rcmd, name))
        wiring.connect(m, dec.o, wiring.flipped(self.rd_data))

        # The AXI4 port: write channels from the I/O interface, read channels from the decoder.
        for name, _ in self.m_axi.signature.members.items():
            side = io.axi if name.startswith(("aw", "w", "b")) else dec.axi
            port, own = getattr(side, name), getattr(self.m_axi, name)
            if self.m_axi.signature.members[name].flow == Out:
                m.d.comb += own.eq(port)
            else:
                m.d.comb += port.eq(own)

        # Counters.
        counters = [(self.bytes_written, io.beat_bytes), (self.bytes_read, dec.bytes_read),
                    (self.values_pruned, comp.pruned), (self.values_kept, comp.kept)]
        for counter, increment in counters:
            with m.If(self.clear):
                m.d.sync += counter.eq(0)
            with m.Else():
                m.d.sync += counter.eq(counter + increment)
        m.d.comb += self.error.eq(io.error | dec.error)
        return m

"""Configuration of the η-LSTM compressing DMA (spec §3.5, paper §V-D, Fig. 14): the one
object its RTL (:mod:`.dma`, :mod:`.compress`, :mod:`.decode`), golden model
(:mod:`nnrtl.sim.golden.omni.dma`) and tests derive from.

The memory format is MS1's (:mod:`nnrtl.gen.omni.compress`,
:mod:`nnrtl.sim.golden.omni.compress`): a sparse record of ``blocks``
blocks of ``length`` fp32 values is an index part of ``blocks * ceil(length / 8)`` bitmap
bytes followed by the surviving values, binary32 little endian. A dense record is the
``blocks * length`` values, binary32 little endian.

Decisions on the spec's [U] points (§3.5), taken here:

* dense/sparse tag: a flag of the per-transfer descriptor (one transfer is one record), not
  a per-value tag: the channels know per tensor whether it is a P1 record;
* threshold: a run-time fp32 register (:func:`threshold_bits`), not an elaboration
  parameter, so one bitstream serves any θ; comparison ``|v| < θ`` on the bit patterns
  (exact for every finite θ >= 0, NaN never pruned, θ = 0 prunes nothing), as
  :func:`nnrtl.gen.omni.compress.compress` does on fp32 tensors;
* index format: MS1's bitmap; :attr:`DmaConfig.index_width` is the width of a position
  inside a vector (the decoder's index), ``ceil(log2(max_length))`` bits;
* queue depths: in AXI data beats, each at least one burst (the read queues reserve room
  for a whole burst before asking for it, so the read side never deadlocks);
* bursts: INCR, ``burst_len`` beats, aligned to ``burst_len`` beats (so never across a
  4 KiB boundary), shorter at the ends of a region;
* channels receive either re-densified vectors or (value, dense operand) pairs: both are
  read modes (:data:`READ_MODES`);
* HBM pseudo-channel mapping and scratchpad-vs-DRAM placement are the caller's (one AXI4
  port, the addresses come with each descriptor).
"""

import dataclasses
import math
import struct

from ..checks import check_positive, check_range, is_int

__all__ = ["DmaConfig", "READ_MODES", "WORD_BYTES", "threshold_bits", "check_threshold",
           "axi4_signature"]

#: Bytes of one word (fp32).
WORD_BYTES = 4
#: Read modes of the decoder: ``dense`` (pass a dense record through), ``expand`` (a sparse
#: record re-densified, pruned positions +0.0), ``gather`` (per surviving value, the
#: matching row of the dense operand).
READ_MODES = ("dense", "expand", "gather")


def check_threshold(threshold, name="prune_threshold"):
    """``threshold`` as a float.

    Raises
    ------
    TypeError
        Unless ``threshold`` is a finite number >= 0 (``"<name> must be a finite number
        >= 0, not ..."``).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (
            math.isfinite(threshold) and threshold >= 0):
        raise TypeError(f"{name} must be a finite number >= 0, not {threshold!r}")
    return float(threshold)


def threshold_bits(threshold):
    """The threshold register's value: θ as an fp32 bit pattern, rounded to nearest as
    PyTorch rounds a Python float compared with an fp32 tensor.

    Raises
    ------
    TypeError
        Unless ``threshold`` is a finite number >= 0 (:func:`check_threshold`).
    """
    value = check_threshold(threshold)
    return struct.unpack("<I", struct.pack("<f", value))[0] & 0x7FFFFFFF


@dataclasses.dataclass(frozen=True)
class DmaConfig:
    """Parameters of the compressing DMA.

    Attributes
    ----------
    data_width : int
        AXI4 data bus width in bits: 32, 64, 128, 256 or 512.
    addr_width : int
        AXI4 byte address width, 12 to 64.
    max_length : int
        Largest vector length (values per block) a descriptor may give.
    max_blocks : int
        Largest number of blocks per descriptor.
    max_row_words : int
        Largest dense row (words) the decoder gathers per surviving index.
    burst_len : int
        Beats of a full burst, a power of two from 1 to 256 with
        ``burst_len * data_width / 8 <= 4096``.
    wt_data_depth, wt_index_depth : int
        WT Data Queue and WT Index Queue depths in beats (at least ``burst_len``).
    rd_data_depth, rd_index_depth, rd_dense_depth : int
        RD Data Queue (sparse values or dense record), RD Index Queue (bitmap) and the
        dense-operand queue, in beats (at least ``burst_len``).
    pending_depth : int
        Decoded (value, index) entries waiting for their dense rows.
    counter_width : int
        Width of the byte and value counters.
    """

    data_width: int = 64
    addr_width: int = 32
    max_length: int = 4096
    max_blocks: int = 4096
    max_row_words: int = 4096
    burst_len: int = 16
    wt_data_depth: int = 32
    wt_index_depth: int = 32
    rd_data_depth: int = 32
    rd_index_depth: int = 32
    rd_dense_depth: int = 32
    pending_depth: int = 16
    counter_width: int = 48

    def __post_init__(self):
        if self.data_width not in (32, 64, 128, 256, 512) or not is_int(self.data_width):
            raise TypeError(f"data_width must be 32, 64, 128, 256 or 512, not "
                            f"{self.data_width!r}")
        check_range("addr_width", self.addr_width, 12, 64)
        check_range("max_length", self.max_length, 1, 1 << 20)
        check_range("max_blocks", self.max_blocks, 1, 1 << 24)
        check_range("max_row_words", self.max_row_words, 1, 1 << 20)
        check_range("burst_len", self.burst_len, 1, 256)
        if self.burst_len & (self.burst_len - 1):
            raise TypeError(f"burst_len must be a power of two, not {self.burst_len!r}")
        if self.burst_len * self.bus_bytes > 4096:
            raise TypeError(f"burst_len x data_width / 8 must be at most 4096 (a burst may "
                            f"not cross a 4 KiB boundary), not {self.burst_len} x "
                            f"{self.bus_bytes}")
        for name in ("wt_data_depth", "wt_index_depth", "rd_data_depth", "rd_index_depth",
                     "rd_dense_depth"):
            value = getattr(self, name)
            check_positive(name, value)
            if value < self.burst_len:
                raise TypeError(f"{name} must be at least burst_len ({self.burst_len}), not "
                                f"{value!r}")
        check_positive("pending_depth", self.pending_depth)
        check_range("counter_width", self.counter_width, 16, 64)

    @property
    def word_width(self):
        """Bits of a value: fp32."""
        return 8 * WORD_BYTES

    @property
    def bus_bytes(self):
        """Bytes of one AXI4 data beat."""
        return self.data_width // 8

    @property
    def size_code(self):
        """``awsize`` / ``arsize``: log2 of the bytes of a beat."""
        return int(math.log2(self.bus_bytes))

    @property
    def index_width(self):
        """Bits of a position inside a vector: ``ceil(log2(max_length))`` (at least 1)."""
        return max(1, (self.max_length - 1).bit_length())

    @property
    def bitmap_bytes(self):
        """Bitmap bytes of the longest vector: ``ceil(max_length / 8)``."""
        return -(-self.max_length // 8)

    @property
    def max_record_words(self):
        """Values of the largest record: ``max_blocks * max_length``."""
        return self.max_blocks * self.max_length

    def check_transfer(self, blocks, length, name="transfer"):
        """Check that a record of ``blocks`` x ``length`` fits the descriptor fields.

        Raises
        ------
        TypeError
            Unless ``blocks`` is an integer from 1 to ``max_blocks`` and ``length`` one
            from 1 to ``max_length``.
        """
        if not is_int(blocks) or not 1 <= blocks <= self.max_blocks:
            raise TypeError(f"{name}: blocks must be an integer from 1 to max_blocks "
                            f"({self.max_blocks}), not {blocks!r}")
        if not is_int(length) or not 1 <= length <= self.max_length:
            raise TypeError(f"{name}: length must be an integer from 1 to max_length "
                            f"({self.max_length}), not {length!r}")


def axi4_signature(config):
    """The DMA's AXI4 memory port, seen from the master: one ID (``awid`` and ``arid``
    are 0, responses in order; the 1-bit ID ports exist so standard models attach).
    Amaranth names a member ``m_axi`` of a top ``m_axi__awaddr``, ...; cocotbext-axi
    finds them with ``AxiBus.from_prefix(dut, "m_axi_")``."""
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    a, d = config.addr_width, config.data_width
    return wiring.Signature({
        "awid": Out(1), "awaddr": Out(a), "awlen": Out(8), "awsize": Out(3),
        "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(d), "wstrb": Out(d // 8), "wlast": Out(1), "wvalid": Out(1),
        "wready": In(1),
        "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "arid": Out(1), "araddr": Out(a), "arlen": Out(8), "arsize": Out(3),
        "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
        "rid": In(1), "rdata": In(d), "rresp": In(2), "rlast": In(1), "rvalid": In(1),
        "rready": Out(1),
    })

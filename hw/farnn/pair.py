"""Two FARNN PEs sharing one weight memory (Cho et al., TPDS 2022, Sec. 6.1: "two PEs
share one URAM").

A :class:`PEPair` is two :class:`~nnrtl.hw.farnn.pe.FarnnPE` in a row, wired as in a chain,
whose weights live in one memory of ``weight_depth`` words of two lanes: the first PE's
word in the low lane, the second's in the high one. Each PE has a port of its own (address,
write of its lane, synchronous read), so the memory is a true dual-port RAM: one URAM288
(4K x 72 bits, two ports) holds two 4K PEs, whose normal-form words (33 bits for fp32) each
take a 36-bit lane (four of the URAM's 9-bit byte lanes; the write enables are per lane;
the pad bits repeat the word's top bit: with constant pad bits Yosys folds the bypass of
the transparent read below for those bits and no longer maps that read to the URAM).

Read-during-write. A PE reads only for an element and writes only for a weight it keeps,
never both in one cycle (its read is disabled while it writes: the URAM's ``no_change``
mode). The two PEs may touch one address in one cycle only while weights load, when no
read result is used; the second PE's read is declared transparent for the first PE's write
(new data), the first's not for the second's (old data), which is how the URAM288's two
ports behave and what Yosys maps to one URAM288 without added logic.

Timing and results are those of two PEs in a row: the pair is invisible to the chain.
"""

from amaranth.hdl import Cat, Module
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out, connect, flipped

from ..arith.float_normal import normal_width
from .pe import FarnnPE, Latencies, chain_word_layout, check_pe_parameters, result_layout


__all__ = ["PEPair", "lane_bits", "memory_word"]

#: Bits of one byte lane of an UltraRAM or block RAM write enable.
BYTE_LANE = 9


def lane_bits(fmt):
    """Bits of one PE's lane in a pair's memory: the normal form rounded up to whole
    9-bit byte lanes (36 for fp32)."""
    return -(-normal_width(fmt) // BYTE_LANE) * BYTE_LANE


def memory_word(fmt, first, second):
    """The word a pair's memory holds for the normal-form words ``first`` (the first
    PE's) and ``second`` (ints): each in its lane, the pad bits repeating its top bit."""
    width, lane = normal_width(fmt), lane_bits(fmt)
    pad = (1 << (lane - width)) - 1

    def padded(word):
        return word | ((pad if word >> (width - 1) & 1 else 0) << width)
    return padded(first) | padded(second) << lane


class PEPair(Latencies, wiring.Component):
    """Two PEs in a row and their shared weight memory.

    Parameters
    ----------
    fmt : FloatFormat
    weight_depth, adder_stages, multiplier_stages : int (keyword-only)
        Of both PEs (:class:`~nnrtl.hw.farnn.pe.FarnnPE`); the memory has ``weight_depth``
        words of ``2 * lane_bits(fmt)`` bits.
    dsp_usage : str (keyword-only)
        Of both PEs.
    tail : bool (keyword-only)
        The second PE is its chain's tail.

    Attributes
    ----------
    i, o, o_next, i_next
        The links of two PEs in a row: ``i`` and ``o`` are the first PE's, ``o_next`` and
        ``i_next`` the second's.
    reduction_cycles, sum_delay : int
        The PEs' (:class:`~nnrtl.hw.farnn.pe.Latencies`).

    Raises
    ------
    TypeError
        If a parameter is of the wrong type or out of range.
    ValueError
        If ``dsp_usage`` is not a DSP-usage level.
    """

    def __init__(self, fmt, *, weight_depth, adder_stages=4, multiplier_stages=3,
                 dsp_usage="some", tail=False):
        check_pe_parameters(fmt, weight_depth=weight_depth, adder_stages=adder_stages,
                            multiplier_stages=multiplier_stages, dsp_usage=dsp_usage)
        if not isinstance(tail, bool):
            raise TypeError(f"tail must be a bool, not {tail!r}")
        self._fmt = fmt
        self._weight_depth = weight_depth
        self._adder_stages = adder_stages
        self._multiplier_stages = multiplier_stages
        self._pe_parameters = dict(weight_depth=weight_depth, adder_stages=adder_stages,
                                   multiplier_stages=multiplier_stages, dsp_usage=dsp_usage)
        self._tail = tail
        feed = stream.Signature(chain_word_layout(fmt, weight_depth))
        results = stream.Signature(result_layout(fmt))
        super().__init__({
            "i": In(feed),
            "o_next": Out(feed),
            "o": Out(results),
            "i_next": In(results),
        })

    @property
    def tail(self):
        return self._tail

    def elaborate(self, platform):
        m = Module()
        first, second = pes = [
            FarnnPE(self._fmt, **self._pe_parameters, tail=self._tail and k == 1,
                    shared_memory=True)
            for k in range(2)]
        m.submodules.pe0 = first
        m.submodules.pe1 = second
        lane = lane_bits(self._fmt)
        width = normal_width(self._fmt)
        m.submodules.memory = memory = Memory(shape=2 * lane, depth=self._weight_depth,
                                              init=[], attrs={"ram_style": "ultra"})
        writes = [memory.write_port(granularity=lane) for _ in range(2)]
        reads = [memory.read_port(), memory.read_port(transparent_for=(writes[0],))]
        for n, (pe, write, read) in enumerate(zip(pes, writes, reads)):
            port = pe.weights
            m.d.comb += [
                write.addr.eq(port.addr),
                write.en.eq(port.w_en << n),
                write.data.eq(Cat(port.w_data, port.w_data[-1].replicate(lane - width))
                              .as_unsigned() << (lane * n)),
                read.addr.eq(port.addr),
                read.en.eq(~port.w_en),
                port.r_data.eq(read.data[lane * n:lane * n + width]),
            ]
        connect(m, flipped(self.i), first.i)
        connect(m, first.o_next, second.i)
        connect(m, second.o, first.i_next)
        connect(m, first.o, flipped(self.o))
        connect(m, second.o_next, flipped(self.o_next))
        connect(m, flipped(self.i_next), second.i_next)
        return m

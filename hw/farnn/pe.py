"""FARNN processing element (Cho et al., TPDS 2022, Sec. 5.1.1-5.1.2, Fig. 4).

A weight-stationary fp32 PE: one :class:`~nnrtl.hw.arith.FloatMul`, one
:class:`~nnrtl.hw.arith.StreamingAccumulator` and its own weight memory, wired only to its
two neighbours in a :class:`~nnrtl.hw.farnn.chain.PEChain`. Its operands, weights and
elements alike, arrive in the normal form (:mod:`~nnrtl.hw.arith.float_normal`: subnormals
normalised once, at the chain head), so the multiplier needs no leading-zero count; the
weight memory holds ``fmt.width + 1``-bit words.

Links (nearest neighbour only)
------------------------------
``i`` / ``o_next`` -- the *feed*, from the predecessor and to the successor: one
:data:`chain_word_layout` word per cycle, no backpressure (``ready`` is a constant 1,
which the sender ignores; not ``always_ready``, so a chain converts as a top level). Every word
the PE does not keep is relayed to ``o_next`` one cycle later, so a PE sees a word one cycle
after its predecessor (the paper's Fig. 4c). A word is one of :class:`ChainWordKind`:

- ``RESTART``: starts a weight load (the PE will keep weight words again); relayed.
- ``WEIGHT``: a weight word with its address. A PE that is not yet full keeps it (writes
  ``data`` at ``addr``) and does not relay it; a kept word with ``last`` set fills the PE.
  A full PE relays weight words. So a chain's weight stream is PE 0's words, then PE 1's,
  and so on, each block closed by ``last``: a PE needs neither its index nor a word count.
- ``ELEMENT``: a vector element with the weight address of the current stream
  (``round * chunk + t``, computed at the chain head, so the PE keeps no address state).
  The PE multiplies ``mem[addr] * data`` and feeds the product to its accumulator;
  ``last`` closes the stream (the accumulator reduces its partial sums and emits the sum).
  Relayed.

``o`` / ``i_next`` -- the *results*, to the predecessor and from the successor:
:data:`result_layout` words ``{data, last}`` with valid/ready. The PE's own sums go into a
two-deep FIFO; one output register drives ``o``. Result-collection protocol: the PE sends
its own sum of a stream, then relays words from ``i_next`` up to and including the one
with ``last`` set (the tail PE sets ``last`` on its own sums), then its next own sum. So
the chain head hands out a stream's sums in PE order 0, 1, ..., L - 1, the last one marked.
The output register takes a new word only when it is empty (``i_next.ready`` and the FIFO
pop depend on this PE's registers alone: no ready path runs along the chain), so a link
carries one word every two cycles, the rate at which the sums of one stream reach the head
anyway (PE ``k`` finishes one cycle after PE ``k - 1`` and is one hop further).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arith.accumulator import StreamingAccumulator, reduction_schedule
from ..arith.dsp_usage import adder_options, check_dsp_usage, multiplier_options
from ..arith.float_add import FloatAdd
from ..arith.float_format import FloatFormat
from ..arith.float_mul import FloatMul
from ..arith.float_normal import normal_width
from ..arith.float_pipeline import sideband


__all__ = ["ChainWordKind", "chain_word_layout", "weight_port_signature", "result_layout", "sideband", "reduction_cycles",
           "sum_delay", "Latencies", "FarnnPE"]


class ChainWordKind(enum.Enum, shape=2):
    """What a feed word carries (see the module docstring)."""

    #: A vector element (``data``) and the weight address it is multiplied with.
    ELEMENT = 0
    #: A weight word (``data``) for the address ``addr`` of the first PE not yet full.
    WEIGHT = 1
    #: Start of a weight load: every PE takes weight words again.
    RESTART = 2


def chain_word_layout(fmt, weight_depth, *, normal=True):
    """The feed word: ``kind``, ``last``, ``addr`` (``range(weight_depth)``), ``data``:
    in ``fmt``'s normal form (:mod:`~nnrtl.hw.arith.float_normal`, ``fmt.width + 1``
    bits) between PEs, an encoding of ``fmt`` (``normal=False``) where a chain takes it."""
    return data.StructLayout({
        "kind": ChainWordKind,
        "last": 1,
        "addr": range(weight_depth),
        "data": normal_width(fmt) if normal else fmt.width,
    })


def weight_port_signature(fmt, weight_depth):
    """A PE's side of a weight memory it shares (``shared_memory``): one address for
    its write and its read, ``w_data`` and ``r_data`` in the normal form. The read is
    synchronous and enabled whenever ``w_en`` is low (the memory's ``no_change`` mode: a
    word is kept or read, never both)."""
    width = normal_width(fmt)
    return wiring.Signature({
        "addr": Out(range(weight_depth)),
        "w_en": Out(1),
        "w_data": Out(width),
        "r_data": In(width),
    })


def result_layout(fmt):
    """A result word: ``data`` (a sum) and ``last`` (the tail PE's sum of a stream)."""
    return data.StructLayout({"data": fmt.width, "last": 1})


def _check_int(name, value, lowest, highest=None):
    if (not isinstance(value, int) or isinstance(value, bool) or value < lowest
            or (highest is not None and value > highest)):
        rule = (f"an integer from {lowest} to {highest}" if highest is not None
                else "a positive integer" if lowest == 1 else f"an integer of at least {lowest}")
        raise TypeError(f"{name} must be {rule}, not {value!r}")


def reduction_cycles(adder_stages):
    """``E`` of a :class:`~nnrtl.hw.arith.StreamingAccumulator` with ``adder_stages``."""
    return len(reduction_schedule(adder_stages)) - 1


def sum_delay(adder_stages, multiplier_stages):
    """Cycles from a stream's last element at a PE's input to its sum on the PE's ``o``,
    without stalls: the weight read (1), the multiplier, the reduction and emission
    (``E + 1``), the result FIFO and output register (2)."""
    return multiplier_stages + reduction_cycles(adder_stages) + 4


class Latencies:
    """The latency properties of a unit built of FARNN PEs (:class:`FarnnPE`,
    :class:`~nnrtl.hw.farnn.chain.PEChain`, :class:`~nnrtl.hw.farnn.mvm.MVMUnit`), derived
    once from its ``_adder_stages`` and ``_multiplier_stages``:
    :func:`reduction_cycles` and :func:`sum_delay`."""

    @property
    def reduction_cycles(self):
        return reduction_cycles(self._adder_stages)

    @property
    def sum_delay(self):
        return sum_delay(self._adder_stages, self._multiplier_stages)


def _check_stages(adder_stages, multiplier_stages):
    _check_int("adder_stages", adder_stages, 1, len(FloatAdd.CUT_PRIORITY))
    _check_int("multiplier_stages", multiplier_stages, 0, len(FloatMul.CUT_PRIORITY))


def check_pe_parameters(fmt, *, weight_depth, adder_stages, multiplier_stages, dsp_usage):
    """Check what every PE of a chain shares (:class:`FarnnPE`'s parameters of the same
    names).

    Raises
    ------
    TypeError
        If ``fmt`` is not a :class:`FloatFormat` or a number is of the wrong type or out
        of range.
    ValueError
        If ``dsp_usage`` is not one of :data:`~nnrtl.hw.arith.dsp_usage.DSP_USAGE`.
    """
    if not isinstance(fmt, FloatFormat):
        raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
    _check_int("weight_depth", weight_depth, 1)
    _check_stages(adder_stages, multiplier_stages)
    check_dsp_usage(dsp_usage)


class FarnnPE(Latencies, wiring.Component):
    """One FARNN PE: weight memory, fp32 multiplier, streaming accumulator, two links.

    See the module docstring for the link protocol and the result collection, and Notes
    below for the rules the feeder keeps. Arithmetic: the sum of a stream of elements ``x[t]`` read against
    weights ``w[t]`` is ``streaming_sum(fmt, [float_mul(w[t], x[t])], adder_stages)``
    (:mod:`nnrtl.sim.golden.accumulator`), with no flushing of subnormals.

    Parameters
    ----------
    fmt : FloatFormat
    weight_depth : int (keyword-only)
        Words of the weight memory (one write port, one synchronous read port: one
        URAM288 holds two PEs of 4096 words).
    adder_stages : int (keyword-only)
        The accumulator's adder stages, 1 to 6 (default 4).
    multiplier_stages : int (keyword-only)
        The multiplier's stages, 0 to 6 (default 3).
    tail : bool (keyword-only)
        The last PE of its chain: marks its own sums ``last`` and relays nothing.
    dsp_usage : str (keyword-only)
        The multiplier's and the accumulator adder's DSP usage
        (:mod:`~nnrtl.hw.arith.dsp_usage`): ``"some"`` (default: two DSP slices a PE, the
        multiplier's product), ``"max"`` (six: one more for the multiplier's right shift,
        three for the adder's shifts; fewer LUTs) or ``"none"`` (no DSP slice; the
        product in LUTs). The same bits at every level.
    shared_memory : bool (keyword-only)
        False (default): the PE has its own weight memory. True: it has none and drives
        ``weights`` instead (:class:`~nnrtl.hw.farnn.pair.PEPair`: two PEs, one memory).

    Attributes
    ----------
    i : In(stream.Signature(chain_word_layout))
        Feed from the predecessor.
    o_next : Out(stream.Signature(chain_word_layout))
        Feed to the successor, one cycle later.
    o : Out(stream.Signature(result_layout))
        Results to the predecessor.
    i_next : In(stream.Signature(result_layout))
        Results from the successor.
    weights : Out(weight_port_signature)
        With ``shared_memory`` only: the PE's port of the shared weight memory.
    reduction_cycles : int
        ``E``: cycles between a stream's last element and the next stream's first.
    sum_delay : int
        Cycles from the arrival of a stream's last element to its sum on ``o`` without
        stalls: ``multiplier_stages + reduction_cycles + 4``.

    Raises
    ------
    TypeError
        If a parameter is of the wrong type or out of range.

    Notes
    -----
    Backpressure rule. The feed cannot stall: a PE must take every element when it arrives.
    Two things make that safe, both the duty of whoever feeds the chain head
    (:class:`~nnrtl.hw.farnn.mvm.MVMUnit`):

    1. after a stream's last element, ``reduction_cycles`` (``E``) cycles pass before the next
       stream's first element (the accumulator takes no input while it reduces);
    2. at most two streams are *outstanding* (fed, and not all of their sums taken at the
       chain head's consumer) when a stream's first element is fed. When PE ``k`` emits the
       sum of stream ``v + 1``, every sum of stream ``v - 1`` has left the chain, so its FIFO
       holds at most the sum of stream ``v``: the second slot is free, the accumulator emits
       at once and takes the next element in the same cycle, whatever the consumer did.

    Under these rules a product never meets a stalled accumulator, so the multiplier's
    pipeline never holds; a sideband shift register moves ``last`` along with it on the
    multiplier's own enable, so it stays aligned in any case.

    Timing (no stalls). An element at the PE's input in cycle ``u`` reads its weight in ``u``
    (synchronous read), enters the multiplier in ``u + 1`` and the accumulator in
    ``u + 1 + multiplier_stages``. The sum of a stream whose last element arrives in ``u`` is
    emitted in ``u + multiplier_stages + E + 2`` and is on ``o`` two cycles later.
    """

    def __init__(self, fmt, *, weight_depth, adder_stages=4, multiplier_stages=3,
                 tail=False, dsp_usage="some", shared_memory=False):
        check_pe_parameters(fmt, weight_depth=weight_depth, adder_stages=adder_stages,
                            multiplier_stages=multiplier_stages, dsp_usage=dsp_usage)
        if not isinstance(tail, bool):
            raise TypeError(f"tail must be a bool, not {tail!r}")
        if not isinstance(shared_memory, bool):
            raise TypeError(f"shared_memory must be a bool, not {shared_memory!r}")
        self._shared_memory = shared_memory
        self._dsp_usage = dsp_usage
        self._fmt = fmt
        self._weight_depth = weight_depth
        self._adder_stages = adder_stages
        self._multiplier_stages = multiplier_stages
        self._tail = tail
        feed = stream.Signature(chain_word_layout(fmt, weight_depth))
        results = stream.Signature(result_layout(fmt))
        members = {
            "i": In(feed),
            "o_next": Out(feed),
            "o": Out(results),
            "i_next": In(results),
        }
        if shared_memory:
            members["weights"] = Out(weight_port_signature(fmt, weight_depth))
        super().__init__(members)

    @property
    def fmt(self):
        return self._fmt

    @property
    def weight_depth(self):
        return self._weight_depth

    @property
    def adder_stages(self):
        return self._adder_stages

    @property
    def multiplier_stages(self):
        return self._multiplier_stages

    @property
    def dsp_usage(self):
        return self._dsp_usage

    @property
    def tail(self):
        return self._tail

    @property
    def shared_memory(self):
        return self._shared_memory

    def elaborate(self, platform):
        m = Module()
        fmt = self._fmt
        if self._shared_memory:
            port = self.weights
        else:
            # ram_style "ultra": UltraRAM, as the paper builds the PE (Vivado and Yosys'
            # synth_xilinx -uram honour it; left to itself Yosys put 8,192 words in
            # LUT-RAM).
            m.submodules.memory = memory = Memory(shape=normal_width(fmt),
                                                  depth=self._weight_depth, init=[],
                                                  attrs={"ram_style": "ultra"})
            write = memory.write_port()
            read = memory.read_port()
            port = weight_port_signature(fmt, self._weight_depth).create()
            m.d.comb += [
                write.addr.eq(port.addr), write.en.eq(port.w_en), write.data.eq(port.w_data),
                read.addr.eq(port.addr), read.en.eq(~port.w_en), port.r_data.eq(read.data),
            ]
        m.submodules.multiplier = multiplier = FloatMul(
            fmt, stages=self._multiplier_stages, operands="normal",
            **multiplier_options(self._dsp_usage))
        m.submodules.accumulator = accumulator = StreamingAccumulator(
            fmt, adder_stages=self._adder_stages,
            adder_shifts=adder_options(self._dsp_usage)["shifts"])
        m.submodules.sums = sums = SyncFIFO(width=fmt.width, depth=2)

        # The feed: keep weight words until full, relay everything else.
        word = self.i.payload
        full = Signal()
        keep = Signal()
        m.d.comb += [
            self.i.ready.eq(1),
            keep.eq(self.i.valid & (word.kind == ChainWordKind.WEIGHT) & ~full),
        ]
        m.d.sync += [
            self.o_next.valid.eq(self.i.valid & ~keep),
            self.o_next.payload.eq(word),
        ]
        m.d.comb += [
            port.w_en.eq(keep),
            port.addr.eq(word.addr),
            port.w_data.eq(word.data),
        ]
        with m.If(keep & word.last):
            m.d.sync += full.eq(1)
        with m.If(self.i.valid & (word.kind == ChainWordKind.RESTART)):
            m.d.sync += full.eq(0)

        # MAC: the weight read in the element's cycle meets the element one cycle later.
        element = Signal()
        element_data = Signal(normal_width(fmt))
        element_last = Signal()
        m.d.sync += [
            element.eq(self.i.valid & (word.kind == ChainWordKind.ELEMENT)),
            element_data.eq(word.data),
            element_last.eq(word.last),
        ]
        product_last = sideband(m, multiplier, element_last, "product_last")
        m.d.comb += [
            multiplier.i.valid.eq(element),
            multiplier.i.payload.a.eq(port.r_data),
            multiplier.i.payload.b.eq(element_data),
            accumulator.i.valid.eq(multiplier.o.valid),
            accumulator.i.payload.value.eq(multiplier.o.payload),
            accumulator.i.payload.last.eq(product_last),
            multiplier.o.ready.eq(accumulator.i.ready),
            sums.w_en.eq(accumulator.o.valid),
            sums.w_data.eq(accumulator.o.payload),
            accumulator.o.ready.eq(sums.w_rdy),
        ]

        # Results: own sum, then the successors' sums of that stream up to the tail's.
        out_valid = Signal()
        out = Signal(result_layout(fmt))
        own = Signal(init=1)
        m.d.comb += [
            self.o.valid.eq(out_valid),
            self.o.payload.eq(out),
        ]
        with m.If(out_valid & self.o.ready):
            m.d.sync += out_valid.eq(0)
        with m.If(~out_valid):
            with m.If(own):
                m.d.comb += sums.r_en.eq(1)
                with m.If(sums.r_rdy):
                    m.d.sync += [
                        out_valid.eq(1),
                        out.data.eq(sums.r_data),
                        out.last.eq(self._tail),
                    ]
                    if not self._tail:
                        m.d.sync += own.eq(0)
            with m.Else():
                m.d.comb += self.i_next.ready.eq(1)
                with m.If(self.i_next.valid):
                    m.d.sync += [
                        out_valid.eq(1),
                        out.eq(self.i_next.payload),
                    ]
                    with m.If(self.i_next.payload.last):
                        m.d.sync += own.eq(1)
        return m

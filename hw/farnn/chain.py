"""A chain of FARNN PEs (Cho et al., TPDS 2022, Sec. 5.1.2, Fig. 4a-c).

``chain_length`` :class:`~nnrtl.hw.farnn.pe.FarnnPE` in a row; each is wired to its two
neighbours only (feed down, results up), so nothing in the chain fans out with its length.
The chain head's links are the chain's: ``i`` takes the feed (weight load and vector
elements, one word per cycle, no backpressure; its data, encodings of the format, enter
the normal form in which the PEs keep and multiply them: one leading-zero count and
shift a chain, combinational) and ``o`` gives the sums of each stream in
PE order 0 to ``chain_length - 1``, the last one marked, with valid/ready. Whoever drives
``i`` keeps the two rules of :mod:`nnrtl.hw.farnn.pe` (``E`` idle cycles after a stream,
at most two streams outstanding); then no backpressure on ``o`` loses data.

The PEs come two by two (:class:`~nnrtl.hw.farnn.pair.PEPair`: two PEs sharing one
weight memory, the paper's two PEs per URAM288), an odd chain's tail alone with its own
memory. In Verilog (:mod:`nnrtl.hw.hierarchy`) they are instances of at most three modules
(the inner pair, the tail pair or the lone tail), each written once whatever
``chain_length`` is.

Weight load: a ``RESTART`` word, then PE 0's words (addresses in any order, the last one
marked ``last``), then PE 1's, and so on: one word per cycle, ``chain_length`` blocks.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ..arith.float_normal import ToNormalForm
from ..hierarchy import shared
from .pair import PEPair
from .pe import (FarnnPE, Latencies, _check_int, chain_word_layout, check_pe_parameters,
                 result_layout)


__all__ = ["PEChain"]


def _feed_in_normal_form(m, fmt, feed, head):
    """Drive the head PE's feed ``head`` from the chain's ``feed``: every field as it is
    but ``data``, which enters the normal form (one :class:`ToNormalForm` a chain)."""
    m.submodules.normal = normal = ToNormalForm(fmt)
    m.d.comb += [head.valid.eq(feed.valid), feed.ready.eq(head.ready),
                 normal.i.eq(feed.payload.data), head.payload.data.eq(normal.o)]
    for name, _ in feed.payload.shape():
        if name != "data":
            m.d.comb += head.payload[name].eq(feed.payload[name])


class PEChain(Latencies, wiring.Component):
    """``chain_length`` PEs wired nearest neighbour.

    Parameters
    ----------
    fmt : FloatFormat
    chain_length : int (keyword-only)
        PEs in the chain (``L``), at least 1.
    weight_depth, adder_stages, multiplier_stages : int (keyword-only)
        Of every PE (:class:`~nnrtl.hw.farnn.pe.FarnnPE`).
    dsp_usage : str (keyword-only)
        Of every PE's accumulator adder, ``"lut"`` (default) or ``"dsp"``.

    Attributes
    ----------
    i : In(stream.Signature(chain_word_layout))
        Feed into PE 0.
    o : Out(stream.Signature(result_layout))
        Sums out of PE 0.
    reduction_cycles : int
        ``E`` of the PEs' accumulators.
    sum_delay : int
        Cycles from a stream's last element on ``i`` to PE 0's sum on ``o`` without
        stalls (:func:`~nnrtl.hw.farnn.pe.sum_delay`).
    collection_cycles : int
        ``2 * (chain_length - 1)``: cycles from PE 0's sum of a stream on ``o`` to the
        tail's, without stalls (one word every two cycles per link).

    Raises
    ------
    TypeError
        If a parameter is of the wrong type or out of range.
    ValueError
        If ``dsp_usage`` is not a DSP-usage level.
    """

    def __init__(self, fmt, *, chain_length, weight_depth, adder_stages=4,
                 multiplier_stages=3, dsp_usage="some"):
        check_pe_parameters(fmt, weight_depth=weight_depth, adder_stages=adder_stages,
                            multiplier_stages=multiplier_stages, dsp_usage=dsp_usage)
        _check_int("chain_length", chain_length, 1)
        self._fmt = fmt
        self._chain_length = chain_length
        self._weight_depth = weight_depth
        self._adder_stages = adder_stages
        self._multiplier_stages = multiplier_stages
        self._dsp_usage = dsp_usage
        self._pe_parameters = dict(weight_depth=weight_depth, adder_stages=adder_stages,
                                   multiplier_stages=multiplier_stages, dsp_usage=dsp_usage)
        super().__init__({
            "i": In(stream.Signature(chain_word_layout(fmt, weight_depth, normal=False))),
            "o": Out(stream.Signature(result_layout(fmt))),
        })

    @property
    def chain_length(self):
        return self._chain_length

    @property
    def collection_cycles(self):
        return 2 * (self._chain_length - 1)

    def elaborate(self, platform):
        m = Module()
        # PEs two by two sharing a weight memory (PEPair), an odd tail alone
        pes = []
        for k in range(0, self._chain_length, 2):
            tail = k + 2 >= self._chain_length
            if k + 1 < self._chain_length:
                unit = PEPair(self._fmt, **self._pe_parameters, tail=tail)
                name, kind = f"pair{k // 2}", "pair"
            else:
                unit = FarnnPE(self._fmt, **self._pe_parameters, tail=True)
                name, kind = f"pe{k}", "pe"
            # one module per kind: nnrtl.hw.hierarchy
            m.submodules[name] = shared(unit, key=(self._fmt, self._weight_depth,
                                                   self._adder_stages,
                                                   self._multiplier_stages, self._dsp_usage,
                                                   kind, tail))
            pes.append(unit)
        head = pes[0]
        _feed_in_normal_form(m, self._fmt, self.i, head.i)
        connect(m, head.o, flipped(self.o))
        for before, after in zip(pes, pes[1:]):
            connect(m, before.o_next, after.i)
            connect(m, after.o, before.i_next)
        # The tail has no successor: nothing comes up its i_next (the port idles at 0).
        return m

"""LPRAM, the local parameter RAM (spec §3.3): ``Q × K × K`` banks, bank ``(i, ky, kx)``
(index ``i·K² + ky·K + kx``, tile ``i`` of a CE) holding at row ``g·passes + r`` the weights
``w[o][r·Q + i][ky][kx]`` of the ``P`` output channels ``o = g·P … g·P + P − 1`` of group
``g`` in pass ``r`` (lanes past ``n_out`` and input channels past ``S_IC`` in the ragged last
pass zero), so one row read feeds the ``P`` CEs of the FP module for one pass; the rows
follow the FP module's loop order (groups, passes inner: a row counter per window). With
``Q = S_IC`` (one pass) row ``g`` is group ``g``. Plus a bias bank (index ``Q·K²``): the
completing node's ``bias[o]`` of group ``g`` at row ``g·passes + passes − 1``, the row read
with the last pass, whose sum the bias joins (decision: one address for every bank; the
other ``passes − 1`` rows of the bias bank are unused, ``(passes − 1)·G·P`` words).

Ports
-----
``load``: ``{bank, row, data}`` (``P`` words): writes one row, always ready (the weight update
of the next task writes through it once per mini-batch, spec §3.8).
``fp_addr`` / ``fp_en`` → ``fp_data[bank][lane]`` one cycle later (synchronous read, holds while
``fp_en`` is low).
``eb_addr`` / ``eb_en`` → ``eb_data[bank][lane]`` (only with ``eb_port=True``): the EB
module's second read port on the same weight banks (not the bias bank, EB needs no bias),
same timing; FP and EB read different rows concurrently (spec §3.3). EB rotates the kernel
by wiring (bank ``(i, ky, kx)`` → tile position ``(K−1−ky, K−1−kx)``, :mod:`.eb`).

Bank packing
------------
Every bank is read at the same row (``fp_addr``, ``eb_addr``), so banks side by side share a
memory: :func:`pack` groups them (decision, measured with Yosys ``synth_xilinx`` on 7
series): a block RAM port is 72 bits wide at most (the 512 × 72 simple-dual-port RAMB36E1),
and a ``load`` writes one bank of a row, so a memory packs ``⌊72 / (P·word)⌋`` banks (at
least one) with one write enable per bank (``granularity``): each bank's bits then lie in
whole byte lanes of one primitive. Wider packings whose banks straddle primitives cost more
(144 bits of 16-bit banks: 5 RAMB18E1, against 2.25 RAMB36E1 at 4 a memory), so none is
wider than a port. A memory with the EB port has two read ports and one write port at three
addresses: Yosys builds it twice (one write and one read port each), so the weight banks'
memories count twice in :mod:`nnrtl.gen.fpdeep.resources`. Each memory is a
:class:`BankMemory` emitted once per shape (:func:`nnrtl.hw.hierarchy.shared`; the
``vc709-alexnet`` node: 190 instances of two modules), the bank decode in the :class:`Lpram` around it. The PG module's LGB uses the
same rule without write enables (``enables=False``, :func:`pack`).
"""

import math

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..checks import check_positive
from ..hierarchy import shared

__all__ = ["Lpram", "BankMemory", "load_layout", "row_layout", "pack", "PORT_BITS",
           "PACK_BITS"]

#: Widest port of a block RAM primitive (the RAMB36E1's 512 × 72 simple-dual-port shape).
PORT_BITS = 72
#: Widest memory packed without write enables (8 primitives side by side).
PACK_BITS = 8 * PORT_BITS


def pack(banks, bank_bits, *, enables):
    """The packed memories of ``banks`` banks of ``bank_bits`` bits read at one address:
    ``[range(first, end), ...]``, bank ``b`` element ``b − first`` of its memory.

    With ``enables`` (a bank written alone) a memory is at most one port wide:
    ``⌊PORT_BITS / bank_bits⌋`` banks, at least one. Without (whole rows written) banks
    straddle primitives: ``lcm(bank_bits, 72) / bank_bits`` banks (the primitives exactly
    filled) when that is at most :data:`PACK_BITS` wide, else ``⌊PACK_BITS / bank_bits⌋``.
    """
    if enables:
        per = PORT_BITS // bank_bits
    else:
        whole = math.lcm(bank_bits, PORT_BITS)
        per = whole // bank_bits if whole <= PACK_BITS else PACK_BITS // bank_bits
    per = max(1, per)
    return [range(first, min(first + per, banks)) for first in range(0, banks, per)]


def row_layout(cfg):
    """A row: ``P`` words."""
    return data.ArrayLayout(cfg.word_bits, cfg.p)


def load_layout(cfg):
    """A load beat: ``bank`` (``0 … Q·K²``, the last the bias), ``row``, ``data``."""
    return data.StructLayout({
        "bank": range(cfg.banks + 1),
        "row": range(cfg.rows),
        "data": row_layout(cfg),
    })


class BankMemory(wiring.Component):
    """One packed LPRAM memory: ``banks`` banks of ``bank_bits`` side by side, written one
    bank at a time (a write enable per bank), read whole at one address per read port.

    Parameters
    ----------
    banks : int
    bank_bits : int
    rows : int
        Depth.
    eb_port : bool
        A second read port (EB's).

    Attributes
    ----------
    write_addr, write_en, write_data : In(range(max(rows, 2))), In(banks), In(bank_bits)
        ``write_data`` goes to every bank whose ``write_en`` bit is set.
    fp_addr, fp_en, fp_data : the first read port (``fp_data`` the banks of the row one
        cycle after ``fp_en``, held while it is low).
    eb_addr, eb_en, eb_data : the second (``eb_port`` only), same timing.

    The addresses are at least one bit wide (a one-row memory too): a zero-width port
    would be no pin of the shared module's instances (:mod:`nnrtl.hw.hierarchy`).

    Latency and throughput: a synchronous read (one cycle), one write and one read per
    port a cycle. A unit of its own (:func:`nnrtl.hw.hierarchy.shared`) because which bank
    a load addresses is decided by the :class:`Lpram` around it: AlexNet's VC709 node
    builds 190 memories of two kinds.

    Raises
    ------
    TypeError
        A size not a positive integer.
    """

    def __init__(self, banks, *, bank_bits, rows, eb_port=False):
        for name, value in (("banks", banks), ("bank_bits", bank_bits), ("rows", rows)):
            check_positive(name, value)
        self.key = (banks, bank_bits, rows, bool(eb_port))
        ports = {
            "write_addr": In(range(max(rows, 2))),
            "write_en": In(banks),
            "write_data": In(bank_bits),
            "fp_addr": In(range(max(rows, 2))),
            "fp_en": In(1),
            "fp_data": Out(data.ArrayLayout(bank_bits, banks)),
        }
        if eb_port:
            ports.update({"eb_addr": In(range(max(rows, 2))), "eb_en": In(1),
                          "eb_data": Out(data.ArrayLayout(bank_bits, banks))})
        super().__init__(ports)

    @property
    def eb_port(self):
        return self.key[3]

    def elaborate(self, platform):
        m = Module()
        banks, bank_bits, rows, eb_port = self.key
        memory = Memory(shape=data.ArrayLayout(bank_bits, banks), depth=rows, init=[])
        m.submodules.memory = memory
        write = memory.write_port(granularity=1)
        m.d.comb += [write.addr.eq(self.write_addr), write.en.eq(self.write_en)]
        m.d.comb += [write.data[e].eq(self.write_data) for e in range(banks)]
        reads = [("fp", memory.read_port())]
        if eb_port:
            reads.append(("eb", memory.read_port()))
        for name, read in reads:
            m.d.comb += [read.en.eq(getattr(self, f"{name}_en")),
                         read.addr.eq(getattr(self, f"{name}_addr")),
                         getattr(self, f"{name}_data").eq(read.data)]
        return m


class Lpram(wiring.Component):
    """The LPRAM of one FP segment (:class:`~nnrtl.hw.fpdeep.config.FpConfig`).

    Attributes
    ----------
    load : In(stream.Signature(load_layout(cfg)))
    fp_addr : In(range(rows))
    fp_en : In(1)
    fp_data : Out(ArrayLayout(row_layout, banks + 1))
    eb_addr, eb_en, eb_data : the second read port (``eb_port=True`` only), ``eb_data``
        ``ArrayLayout(row_layout, banks)``.
    words : int
        Words stored: ``(Q·K² + 1)·rows·P``.
    """

    def __init__(self, cfg, *, eb_port=False):
        self._cfg = cfg
        self._eb_port = bool(eb_port)
        ports = {
            "load": In(stream.Signature(load_layout(cfg))),
            "fp_addr": In(range(cfg.rows)),
            "fp_en": In(1),
            "fp_data": Out(data.ArrayLayout(row_layout(cfg), cfg.banks + 1)),
        }
        if self._eb_port:
            ports.update({
                "eb_addr": In(range(cfg.rows)),
                "eb_en": In(1),
                "eb_data": Out(data.ArrayLayout(row_layout(cfg), cfg.banks)),
            })
        super().__init__(ports)

    @property
    def words(self):
        cfg = self._cfg
        return (cfg.banks + 1) * cfg.rows * cfg.p

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        m.d.comb += self.load.ready.eq(1)
        row = row_layout(cfg)
        for n, group in enumerate(pack(cfg.banks + 1, row.size, enables=True)):
            weights = [e for e, bank in enumerate(group) if bank < cfg.banks]
            unit = BankMemory(len(group), bank_bits=row.size, rows=cfg.rows,
                              eb_port=self._eb_port and bool(weights))
            m.submodules[f"banks_{n}"] = shared(unit, key=unit.key)
            m.d.comb += [
                unit.write_addr.eq(self.load.payload.row),
                unit.write_data.eq(self.load.payload.data),
                unit.fp_en.eq(self.fp_en),
                unit.fp_addr.eq(self.fp_addr),
            ]
            for e, bank in enumerate(group):
                m.d.comb += [
                    unit.write_en[e].eq(self.load.valid & (self.load.payload.bank == bank)),
                    self.fp_data[bank].eq(unit.fp_data[e]),
                ]
            if unit.eb_port:
                m.d.comb += [unit.eb_en.eq(self.eb_en), unit.eb_addr.eq(self.eb_addr)]
                m.d.comb += [self.eb_data[group[e]].eq(unit.eb_data[e]) for e in weights]
        return m

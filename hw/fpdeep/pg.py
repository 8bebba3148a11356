"""The PG module (parameter-gradient calculation, spec §3.6, paper Sec. 5.5), fixed16 and
fp32.

The paper cuts the ``K × K`` large ``W × W`` convolutions (δ as the filter over the cached
activations) into ``W × W`` small ``K × K`` ones: for each output pixel ``(y, x)`` and group
``g`` of ``P`` output channels, the activation window of the pixel (the FP module's window:
``S_IC`` channels × ``K²`` taps, stride and padding applied) is multiplied by the ``P`` δ
words broadcast as the "weights"::

    dW[g·P + j][i][ky][kx] += δ[y][x][g·P + j] · A[y·s + ky − pad][x·s + kx − pad][i]

``P · Q · K²`` MACs per cycle (the FP module's count), each accumulating into its own word
of the LGB, the local gradient buffer, over every pixel and every image of a mini-batch.
The LGB has the LPRAM's bank/row layout (spec §3.3, :mod:`.lpram`): bank ``(i, ky, kx)``
(index ``i·K² + ky·K + kx``), row ``g·passes + r``, lane ``j`` holds
``dW[g·P + j][r·Q + i][ky][kx]``, so the weight update is row to row (:mod:`.update`).
The completing node also sums ``db[o] = Σ δ[o]`` into a bias bank (index ``Q·K²``, row
``g·passes + passes − 1``, the LPRAM's bias row; its other rows stay 0). The products come
from :func:`.conv.ce_array` with one tap per tile (no reduction: the sums are in the LGB).

Streams
-------
``i_act``: the segment's input activations as the Act-RAM returns them to PG (same raster
order as FP, one pixel of ``S_IC`` words per beat, :func:`~.line_buffer.pixel_layout`); a
line buffer of PG's own makes the windows.
``i_delta``: δ of the segment's output channels, one beat per output pixel and group (``P``
words, lanes past ``n_out`` zero), raster order: :class:`~.eb.SfuBackward`'s ``o``.
``o``: after the last image of a mini-batch (``batch`` images), the LGB rows
(:func:`gradient_layout`): bank-major (bank ``0 … Q·K² − 1``, then the bias bank on the
completing node), rows ``0 … G·passes − 1`` in each, ``last`` on the final row; each
row is cleared as it is sent, and the next mini-batch's beats wait until the drain ends.
The weight update (spec §3.8, :mod:`.update`) writes the new LPRAM rows through the
LPRAM's ``load`` port from these.

Throughput: one (pixel, group, pass) per cycle, an output pixel per ``G · passes`` cycles
(a window held ``G · passes`` cycles, as FP); the drain takes 2 cycles per row beat.
Latency from a δ beat to its LGB write: 2 cycles (fixed16), ``multiplier_stages + 1`` (fp32).
"""

import math

from amaranth.hdl import Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from ..checks import check_positive
from .config import SHIFTS
from .conv import ce_array
from .line_buffer import LineBuffer, pixel_layout
from .lpram import pack
from ..hierarchy import shared
from .pipe import Flow, float_unit, register_stage
from .segment import SegmentModule

__all__ = ["PgModule", "LgbGroup", "gradient_layout", "lgb_bits"]


def lgb_bits(cfg, batch):
    """Bits of an LGB word: fp32 32; fixed16 what holds ``batch`` images' sums exactly."""
    if cfg.precision == "fp32":
        return 32
    return 32 + max(1, math.ceil(math.log2(cfg.pixels * batch)))


def gradient_layout(cfg, batch):
    """A gradient row beat: ``bank``, ``row``, ``data`` (``P`` LGB words), ``last``."""
    return data.StructLayout({
        "bank": range(cfg.banks + 1),
        "row": range(cfg.rows),
        "data": data.ArrayLayout(lgb_bits(cfg, batch), cfg.p),
        "last": 1,
    })


class LgbGroup(wiring.Component):
    """One packed LGB memory (:func:`.lpram.pack`) and its read-add-write: ``banks`` banks
    of ``lanes`` words side by side, one address for all.

    Parameters
    ----------
    banks : int
        Banks in the memory.
    lanes : int
        Words of a bank (``P``).
    rows : int
        Memory depth.
    width : int
        LGB word bits (:func:`lgb_bits`).
    term_bits : int
        Bits of a term added to a word (fixed16: signed products or sign-extended δ).
    fp32 : bool
        fp32 words and a combinational ``hw/arith`` FloatAdd per word; else exact signed
        adds.
    shifts : str
        The fp32 adders' ``shifts`` (:data:`~.config.SHIFTS`, default ``"lut"``).

    Attributes
    ----------
    read_addr : In(range(max(rows, 2)))
        The row read (every cycle; the data the next cycle, transparent to the write).
    write_en, write_addr : In(1), In(range(max(rows, 2)))
    accumulate : In(1)
        Write ``data + terms`` (the read-add-write); else write ``data`` with the banks of
        ``clear`` set to zero (the drain).
    terms : In(ArrayLayout(ArrayLayout(term_bits, lanes), banks))
    clear : In(banks)
    data : Out(ArrayLayout(ArrayLayout(width, lanes), banks))
        The row read.

    Latency and throughput: read one cycle, add and write the next; one row a cycle. The
    group is a unit of its own (:func:`nnrtl.hw.hierarchy.shared`: AlexNet's VC709 node
    builds 63 alike) because everything that differs between groups (which rows, which
    bank drains) comes in on ports.

    Raises
    ------
    TypeError
        A size not a positive integer.
    ValueError
        ``shifts`` not one of :data:`~.config.SHIFTS`.
    """

    def __init__(self, banks, *, lanes, rows, width, term_bits, fp32, shifts="lut"):
        for name, value in (("banks", banks), ("lanes", lanes), ("rows", rows),
                            ("width", width), ("term_bits", term_bits)):
            check_positive(name, value)
        if shifts not in SHIFTS:
            raise ValueError(f"shifts must be one of {', '.join(map(repr, SHIFTS))}, not "
                             f"{shifts!r}")
        self._shifts = shifts
        self.key = (banks, lanes, rows, width, term_bits, bool(fp32), shifts)
        word = data.ArrayLayout(width, lanes)
        super().__init__({
            "read_addr": In(range(max(rows, 2))),
            "write_en": In(1),
            "write_addr": In(range(max(rows, 2))),
            "accumulate": In(1),
            "terms": In(data.ArrayLayout(data.ArrayLayout(term_bits, lanes), banks)),
            "clear": In(banks),
            "data": Out(data.ArrayLayout(word, banks)),
        })

    def elaborate(self, platform):
        m = Module()
        banks, lanes, rows, width, _, fp32, _ = self.key
        memory = Memory(shape=data.ArrayLayout(data.ArrayLayout(width, lanes), banks),
                        depth=rows, init=[])
        m.submodules.memory = memory
        write = memory.write_port()
        read = memory.read_port(transparent_for=(write,))
        m.d.comb += [read.en.eq(1), read.addr.eq(self.read_addr), self.data.eq(read.data),
                     write.en.eq(self.write_en), write.addr.eq(self.write_addr)]
        for e in range(banks):
            stored, terms = read.data[e], self.terms[e]
            for j in range(lanes):
                if fp32:
                    adder = float_unit(m, f"add_{e}_{j}",
                                       FloatAdd(FP32, stages=0, shifts=self._shifts))
                    m.d.comb += [adder.i.valid.eq(1), adder.o.ready.eq(1),
                                 adder.i.payload.a.eq(stored[j]),
                                 adder.i.payload.b.eq(terms[j]),
                                 adder.i.payload.subtract.eq(0)]
                    total = adder.o.payload
                else:
                    total = (Value.cast(stored[j]).as_signed()
                             + Value.cast(terms[j]).as_signed())
                with m.If(self.accumulate):
                    m.d.comb += write.data[e][j].eq(total)
            with m.If(~self.accumulate):
                m.d.comb += write.data[e].eq(Mux(self.clear[e], 0, Value.cast(stored)))
        return m


class PgModule(SegmentModule):
    """The PG module of the segment :class:`~nnrtl.hw.fpdeep.config.FpConfig` ``cfg``.

    Parameters
    ----------
    cfg : FpConfig
    batch : int
        Images per mini-batch (the LGB is drained after each).

    Attributes
    ----------
    i_act, i_delta, o : streams (module docstring)
    lgb_bits : int
    lgb_banks : int
        ``Q·K²`` (+ 1 bias bank on the completing node), each ``G · passes`` rows of ``P``
        words (the LPRAM's layout).
    macs : int
        ``P · Q · K²``.

    Raises
    ------
    TypeError
        ``batch`` not a positive integer.

    Notes
    -----
    **Decisions ([U] in the spec)**

    * **LGB word**: fp32 32 bits (each add rounded once, :mod:`nnrtl.sim.golden.fpdeep.pg`'s
      order); fixed16 the exact sum, ``lgb_bits = 32 + ⌈log2(pixels · batch)⌉`` bits (products
      of two 16-bit words are at most 2³⁰ in magnitude); 48 bits (a DSP48's accumulator) hold
      up to 2¹⁶ accumulations, a larger mini-batch widens the word (a cascaded DSP pair).
      ``dW`` words have ``2·frac_bits`` fraction bits, the bias bank's ``frac_bits``.
    * **Read-add-write**: after the multipliers (fixed16 one register, fp32 the FloatMul
      units' ``multiplier_stages``) one align register: an item's LGB row is read the cycle it
      enters it and written the next; the read port is transparent to the write port, so a
      row recurring every cycle (``G · passes = 1``) is forwarded. The pipeline never stalls
      (the LGB always takes a write), so backpressure stops at the inputs; the drain starts once no
      item is in flight.
    * **LGB memories**: the banks share every address (the read of an item's row, the
      drain's row), so they are packed side by side into wide memories
      (:func:`.lpram.pack` without write enables: ``lcm(P·lgb_bits, 72)`` bits when at most
      576, the block RAMs' 72-bit ports filled); every bank of a row is written at once (the
      sums), and the drain writes back the row it read with the sent bank's words cleared,
      so no byte enable is needed (AlexNet's conv4 node: 1,134 banks of 40 bits in 126
      memories of 360 bits, 630 RAMB36E1 against 1,134 a bank each). Each memory with its
      adders is an :class:`LgbGroup`, emitted once per shape (:func:`nnrtl.hw.hierarchy.shared`;
      the ``vc709-alexnet`` node: 63 instances of one module): the rows, the accumulate/drain choice and the
      bank the drain clears come in on its ports.
    * **fp32 add**: a *combinational* ``hw/arith`` FloatAdd (shifts ``adder_shifts``) per LGB
      word in the read-add-write (one add per cycle, the same bits as any pipelining; the cost is an fp32 add in one
      cycle's path). Spec §3.3's alternative, a pipelined adder with forwarding or a stall when
      a row recurs within its latency (``G · passes`` < latency), is not built.
    * **Bias bank with passes**: the bias is added in the last pass only, at the LPRAM's bias
      row; the ``(passes − 1)·G`` other rows are drained as zeros (the update leaves the
      LPRAM's unused bias rows at 0), so the drain is ``(Q·K² + 1) · G · passes`` rows, one
      layout for every bank.

    **Passes** (``Q < S_IC``, :attr:`~.config.FpConfig.passes`): the FP module's loop order,
    pixel, group, pass innermost: a window is held ``G · passes`` cycles, a δ beat ``passes``
    cycles, and in pass ``r`` bank ``i·K² + t`` multiplies the window's channel ``r·Q + i``
    (0 past ``S_IC`` in the ragged last pass: those LGB words stay 0, as the LPRAM's weights
    there). Each LGB word still takes one product per output pixel, in the same order, so the
    passes change the cycles, not the bits.
    """

    def __init__(self, cfg, *, batch=1):
        check_positive("batch", batch)
        self._batch = batch
        super().__init__(cfg, {
            "i_act": In(stream.Signature(pixel_layout(cfg.word_bits, cfg.n_in))),
            "i_delta": In(stream.Signature(pixel_layout(cfg.word_bits, cfg.p))),
            "o": Out(stream.Signature(gradient_layout(cfg, batch))),
        })

    @property
    def batch(self):
        return self._batch

    @property
    def lgb_bits(self):
        return lgb_bits(self._cfg, self._batch)

    @property
    def lgb_banks(self):
        return self._cfg.banks + int(self._cfg.completes)

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        K2, P, B = cfg.taps, cfg.p, self.lgb_banks
        Q, passes, rows = cfg.q, cfg.passes, cfg.rows
        width = self.lgb_bits
        m.submodules.lb = lb = LineBuffer(cfg.w_in, cfg.k, stride=cfg.stride, pad=cfg.pad,
                                          channels=cfg.n_in, word_bits=cfg.word_bits)
        wiring.connect(m, wiring.flipped(self.i_act), lb.i)

        # join: the window (held G·passes cycles) with a δ beat (held passes cycles);
        # blocked while draining. row = g·passes + r, the LPRAM's row.
        r = Signal(range(passes))
        row = Signal(range(rows))
        images = Signal(range(self._batch))
        draining = Signal()
        open_ = Signal()
        take = Signal()
        m.d.comb += [
            open_.eq(~draining),
            take.eq(open_ & lb.o.valid & self.i_delta.valid),
            self.i_delta.ready.eq(open_ & lb.o.valid & (r == passes - 1)),
            lb.o.ready.eq(open_ & self.i_delta.valid & (row == rows - 1)),
        ]
        image_end = lb.o.payload.last & (row == rows - 1)
        batch_end = image_end & (images == self._batch - 1)
        with m.If(take):
            m.d.sync += [r.eq(Mux(r == passes - 1, 0, r + 1)),
                         row.eq(Mux(row == rows - 1, 0, row + 1))]
            with m.If(image_end):
                m.d.sync += images.eq(Mux(batch_end, 0, images + 1))
            with m.If(batch_end):
                m.d.sync += draining.eq(1)

        # products: lane (bank i·K² + t, j) = A[t][r·Q + i] · δ[j] (fixed16 one register, fp32
        # the FloatMul units); then one align register, during which the LGB row read at
        # the multiplier output arrives. The pipeline never stalls.
        feed = Flow(take, "feed")
        taps, delta = lb.o.payload.taps, self.i_delta.payload
        channel = [[Signal(cfg.word_bits, name=f"pg_act_{i}_{t}") for t in range(K2)]
                   for i in range(Q)]
        for i in range(Q):
            with m.Switch(r):
                for n in range(passes):
                    if n * Q + i < cfg.n_in:
                        with m.Case(n):
                            m.d.comb += [channel[i][t].eq(taps[t][n * Q + i])
                                         for t in range(K2)]
        last_pass = r == passes - 1
        operands = [[[(channel[i][t], delta[j])]] for i in range(Q) for t in range(K2)
                    for j in range(P)]
        flow, products, sides = ce_array(
            m, cfg, feed, operands,
            [row] + [Mux(last_pass, delta[j], 0) for j in range(P)], "pg")
        read_row = sides[0]
        flow, regs = register_stage(m, flow, list(products) + sides, "pg_align")
        m.d.comb += flow.ready.eq(1)
        products, p_row, p_delta = regs[:len(products)], regs[len(products)], \
            regs[len(products) + 1:]
        inflight = Signal(range(cfg.multiplier_stages + 4))
        m.d.sync += inflight.eq(inflight + take - flow.valid)

        # LGB: read the row of the item entering the align register, add and write the
        # next cycle (the read is transparent to the write: a row recurring every cycle)
        word = data.ArrayLayout(width, P)
        state_read, state_send, state_settle = 1, 2, 0
        d_state = Signal(range(3))
        d_bank = Signal(range(B))
        d_row = Signal(range(rows))
        send = Signal()
        # the LGB's banks packed into wide memories (:func:`.lpram.pack`, no write enables:
        # every bank of a row is written at once, the drain writing back the row it read
        # with the sent bank's words cleared)
        packed = pack(B, word.size, enables=False)
        term_bits = 32 if cfg.precision == "fp32" else 2 * cfg.word_bits
        reads = []
        for n, group in enumerate(packed):
            unit = LgbGroup(len(group), lanes=P, rows=rows, width=width, term_bits=term_bits,
                            fp32=cfg.precision == "fp32", shifts=cfg.adder_shifts)
            m.submodules[f"lgb_{n}"] = shared(unit, key=unit.key)
            reads += [unit.data[e] for e in range(len(group))]
            m.d.comb += [unit.read_addr.eq(Mux(draining & (d_state != state_settle), d_row,
                                               read_row)),
                         unit.accumulate.eq(flow.valid)]
            with m.If(flow.valid):                  # the batch's last item too
                m.d.comb += [unit.write_en.eq(1), unit.write_addr.eq(p_row)]
            with m.Elif(draining):
                mine = Const(1)             # d_bank in the group (no constant compares)
                if group.start > 0:
                    mine = mine & (d_bank >= group.start)
                if group.stop < B:
                    mine = mine & (d_bank < group.stop)
                m.d.comb += [unit.write_en.eq(send & mine), unit.write_addr.eq(d_row)]
            for e, bank in enumerate(group):
                terms = products[bank * P:(bank + 1) * P] if bank < cfg.banks else p_delta
                m.d.comb += [unit.clear[e].eq(d_bank == bank),
                             *(unit.terms[e][j].eq(Value.cast(terms[j]).as_signed())
                               for j in range(P))]

        # drain: settle (the last item's write), then read / send each row, bank-major
        o_valid = Signal()
        final = (d_bank == B - 1) & (d_row == rows - 1)
        m.d.comb += [self.o.valid.eq(o_valid), send.eq(o_valid & self.o.ready),
                     self.o.payload.bank.eq(d_bank), self.o.payload.row.eq(d_row),
                     self.o.payload.last.eq(final)]
        with m.Switch(d_bank):
            for bank in range(B):
                with m.Case(bank):
                    m.d.comb += self.o.payload.data.eq(reads[bank])
        with m.If(draining):
            with m.Switch(d_state):
                with m.Case(state_settle):
                    with m.If(inflight == 0):
                        m.d.sync += d_state.eq(state_read)
                with m.Case(state_read):
                    m.d.sync += [d_state.eq(state_send), o_valid.eq(1)]
                with m.Case(state_send):
                    with m.If(send):
                        m.d.sync += [o_valid.eq(0), d_state.eq(state_read)]
                        with m.If(d_row == rows - 1):
                            m.d.sync += [d_row.eq(0), d_bank.eq(d_bank + 1)]
                        with m.Else():
                            m.d.sync += d_row.eq(d_row + 1)
                        with m.If(final):
                            m.d.sync += [draining.eq(0), d_state.eq(state_settle),
                                         d_bank.eq(0)]
        return m

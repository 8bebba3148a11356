"""The weight update (spec §3.8): once per mini-batch, the LGB rows that the PG module drains
(:func:`~.pg.gradient_layout`, bank-major) applied to the LPRAM as plain SGD::

    w ← w − rate · g        (rate = η / B, g = Σ_batch gradient, the LGB word)

and the new rows written back through the LPRAM's ``load`` port (the same bank/row layout,
with or without passes: LGB bank ``i·K² + t`` row ``g·passes + r`` is LPRAM bank ``i·K² +
t`` row ``g·passes + r``, ``dW[g·P + j][r·Q + i][t]``, the bias bank ``Q·K²`` the LPRAM's
bias bank, :mod:`.pg`), while the node holds FP and EB (:mod:`.node`). The LPRAM's unused
words (lanes past ``n_out``, channels past ``S_IC`` in a ragged last pass, the bias bank's
rows of the other passes) hold 0 and get a 0 gradient: they stay 0.

Decisions ([U] in the spec)
---------------------------
* **rate = η/B in one register** (``lr``, the node's AXI4-Lite register of that name): the
  host writes the step per *summed* gradient, so the mini-batch average costs no divider
  and ``B`` need not be a power of two (1/B folded into η by software, exactly as
  PyTorch's ``lr`` of a loss summed over the batch divided by ``B``).
* **fixed16**: ``lr`` is an unsigned Q0.16 fraction (``rate = lr / 2¹⁶``, 0 … 1 − 2⁻¹⁶;
  η/B below 2⁻¹⁶ rounds to 0: choose ``frac_bits`` and η so that it does not). The LGB
  word ``g`` has ``2·frac_bits`` fraction bits (weights) or ``frac_bits`` (bias), so
  ``Δ = round_half_up(lr · g / 2^(16 + F_g − frac_bits))`` in weight codes (exact product,
  one rounding), ``w' = saturate16(w − Δ)``.
* **fp32**: ``lr`` holds the fp32 bits of η/B; ``Δ = fl(rate · g)`` then ``w' = fl(w − Δ)``,
  two ``hw/arith`` units (:class:`~nnrtl.hw.arith.float_mul.FloatMul`,
  :class:`~nnrtl.hw.arith.float_add.FloatAdd` subtracting), IEEE RNE, each rounding once
  (:mod:`nnrtl.sim.golden.fpdeep.update`). The units are combinational (0 stages), each
  result registered in its own cycle: one fp32 unit per clock path.
* **One row at a time**: read the old row through ``rd_*`` (the LPRAM's FP read port, which
  the node lends to the update while FP is held), compute the ``P`` words, send the
  ``load`` beat. The update of a segment is ``(Q·K² + 1) · G · passes`` rows (the bias
  bank on the completing node) once per mini-batch; it
  follows the PG drain (2 cycles a row), so a pipelined update would wait on the drain.

Latency and throughput: fixed16 2 cycles from a gradient beat's handshake to its ``load``
beat's valid (read, compute), fp32 3 (read, multiply, subtract); one row per
:func:`row_cycles` = 3 (4) cycles when the ``load`` port takes each at once (the LPRAM's
always does), which is also the PG drain's pace behind it (2 cycles a row, overlapped).
"""

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from ..arith.float_mul import FloatMul
from ..checks import check_positive
from .lpram import load_layout, row_layout
from .pipe import float_unit
from .pg import gradient_layout, lgb_bits

__all__ = ["WeightUpdate", "RATE_BITS", "row_cycles"]

#: Fraction bits of the fixed16 ``lr`` register (Q0.16).
RATE_BITS = 16


def row_cycles(cfg):
    """Cycles per LGB row of an update: latency + the cycle back to idle."""
    return 4 if cfg.precision == "fp32" else 3


def _round(value, shift):
    """``value / 2^shift`` rounded half up (an arithmetic shift floors)."""
    return (value + (1 << (shift - 1))) >> shift


class WeightUpdate(wiring.Component):
    """The SGD update of the segment :class:`~nnrtl.hw.fpdeep.config.FpConfig` ``cfg``.

    Parameters
    ----------
    cfg : FpConfig
    batch : int
        The PG module's mini-batch (sets the LGB word width, :func:`~.pg.lgb_bits`).

    Attributes
    ----------
    i : In(stream.Signature(gradient_layout(cfg, batch)))
        The PG module's ``o``.
    lr : In(word_bits)
        ``rate = η/B``: fixed16 Q0.16, fp32 bits (module docstring).
    rd_addr, rd_en : Out
        The LPRAM read port's address and enable (synchronous read, data next cycle).
    rd_data : In(ArrayLayout(row_layout(cfg), banks + 1))
        Every bank's row, the bias bank last.
    load : Out(stream.Signature(load_layout(cfg)))
        The new rows, one per gradient beat, in its order.
    busy : Out(1)
        A row is in the update (taken, not yet sent).

    Raises
    ------
    TypeError
        ``batch`` not a positive integer.
    """

    def __init__(self, cfg, *, batch=1):
        check_positive("batch", batch)
        self._cfg, self._batch = cfg, batch
        super().__init__({
            "i": In(stream.Signature(gradient_layout(cfg, batch))),
            "lr": In(cfg.word_bits),
            "rd_addr": Out(range(cfg.rows)),
            "rd_en": Out(1),
            "rd_data": In(data.ArrayLayout(row_layout(cfg), cfg.banks + 1)),
            "load": Out(stream.Signature(load_layout(cfg))),
            "busy": Out(1),
        })

    @property
    def cfg(self):
        return self._cfg

    @property
    def latency(self):
        """Cycles from a gradient beat's handshake to its ``load`` beat's valid."""
        return row_cycles(self._cfg) - 1

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        P, f = cfg.p, cfg.frac_bits
        fp32 = cfg.precision == "fp32"
        g_bits = lgb_bits(cfg, self._batch)
        bank = Signal(range(cfg.banks + 1))
        row = Signal(range(cfg.rows))
        grad = Signal(data.ArrayLayout(g_bits, P))
        old = Signal(row_layout(cfg))
        new = Signal(row_layout(cfg))
        product = Signal(data.ArrayLayout(32, P)) if fp32 else None
        idle, read, multiply, send = range(4)
        state = Signal(range(4))
        m.d.comb += [self.busy.eq(state != idle), self.rd_addr.eq(self.i.payload.row),
                     self.load.payload.bank.eq(bank), self.load.payload.row.eq(row),
                     self.load.payload.data.eq(new), self.load.valid.eq(state == send)]

        # the old row of the bank, the cycle after the read
        with m.Switch(bank):
            for n in range(cfg.banks + 1):
                with m.Case(n):
                    m.d.comb += old.eq(self.rd_data[n])

        results = []
        for j in range(P):
            if fp32:
                mul = float_unit(m, f"mul_{j}", FloatMul(FP32, stages=0))
                sub = float_unit(m, f"sub_{j}", FloatAdd(FP32, stages=0))
                m.d.comb += [mul.i.valid.eq(1), mul.o.ready.eq(1), sub.i.valid.eq(1),
                             sub.o.ready.eq(1),
                             mul.i.payload.a.eq(self.lr), mul.i.payload.b.eq(grad[j]),
                             sub.i.payload.a.eq(old[j]), sub.i.payload.b.eq(product[j]),
                             sub.i.payload.subtract.eq(1)]
                results.append((mul.o.payload, sub.o.payload))
            else:
                g = Value.cast(grad[j]).as_signed()
                scaled = self.lr.as_unsigned() * g           # 16 + F_g fraction bits
                delta = Mux(bank == cfg.banks, _round(scaled, RATE_BITS),
                            _round(scaled, RATE_BITS + f))
                wide = Value.cast(old[j]).as_signed() - delta
                top, bottom = (1 << 15) - 1, -(1 << 15)
                results.append(Mux(wide > top, top, Mux(wide < bottom, bottom, wide))[:16])

        with m.Switch(state):
            with m.Case(idle):
                m.d.comb += [self.i.ready.eq(1), self.rd_en.eq(self.i.valid)]
                with m.If(self.i.valid):
                    m.d.sync += [bank.eq(self.i.payload.bank), row.eq(self.i.payload.row),
                                 grad.eq(self.i.payload.data), state.eq(read)]
            with m.Case(read):
                if fp32:
                    m.d.sync += [product[j].eq(results[j][0]) for j in range(P)]
                    m.d.sync += state.eq(multiply)
                else:
                    m.d.sync += [new[j].eq(results[j]) for j in range(P)]
                    m.d.sync += state.eq(send)
            with m.Case(multiply):
                if fp32:
                    m.d.sync += [new[j].eq(results[j][1]) for j in range(P)]
                m.d.sync += state.eq(send)
            with m.Case(send):
                with m.If(self.load.ready):
                    m.d.sync += state.eq(idle)
        return m

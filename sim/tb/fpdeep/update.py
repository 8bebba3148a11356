"""The FPDeep weight update (:mod:`nnrtl.hw.fpdeep.update`) on its LPRAM: stimulus and
expected rows from the golden model (:mod:`nnrtl.sim.golden.fpdeep.update`), the harness
both simulators run, and a cocotb bench under Verilator with every backpressure pattern on
the gradient-in and row-out streams.

:class:`UpdateHarness` is the update wired to an :class:`~nnrtl.hw.fpdeep.lpram.Lpram` as the
node wires them: ``load`` (the host's initial rows) and the update's rows both write the
LPRAM, the update reads the old rows through the FP read port; the update's rows also leave
on ``o`` (the write happens with ``o``'s handshake), so a bench sees every new row. A case is
``batches`` mini-batches of random gradients (the LGB rows the PG module drains): the second
update starts from the first one's rows, read back from the LPRAM.

Parameters of the cocotb bench (``tb_params()``): ``cfg`` (FpConfig fields), ``batch``,
``batches``, ``lr`` (the register's word), ``patterns``, ``seed``; reported as the FP bench
(:func:`nnrtl.sim.tb.fpdeep.fp.run_patterns`).
"""

import cocotb
import numpy as np
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.lpram import Lpram, load_layout
from nnrtl.hw.fpdeep.pg import gradient_layout, lgb_bits
from nnrtl.hw.fpdeep.update import WeightUpdate
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.fpdeep.pg import lgb_rows
from nnrtl.sim.golden.fpdeep.update import update_segment
from nnrtl.sim.tb.common import tb_params
from nnrtl.sim.tb.fpdeep.fp import config_of, pack, run_patterns

__all__ = ["UpdateHarness", "random_case", "load_beats", "stimulus", "expected",
           "model_cycles"]


class UpdateHarness(wiring.Component):
    """:class:`WeightUpdate` and its :class:`Lpram` (module docstring); ``lr`` a constant."""

    def __init__(self, cfg, *, batch, lr):
        self._cfg, self._batch, self._lr = cfg, batch, lr
        super().__init__({
            "load": In(stream.Signature(load_layout(cfg))),
            "i": In(stream.Signature(gradient_layout(cfg, batch))),
            "o": Out(stream.Signature(load_layout(cfg))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.lpram = lpram = Lpram(self._cfg)
        m.submodules.update = update = WeightUpdate(self._cfg, batch=self._batch)
        wiring.connect(m, wiring.flipped(self.i), update.i)
        m.d.comb += [update.lr.eq(self._lr), lpram.fp_addr.eq(update.rd_addr),
                     lpram.fp_en.eq(update.rd_en), update.rd_data.eq(lpram.fp_data),
                     self.o.payload.eq(update.load.payload), self.o.valid.eq(update.load.valid),
                     update.load.ready.eq(self.o.ready)]
        with m.If(update.load.valid):
            m.d.comb += [lpram.load.payload.eq(update.load.payload),
                         lpram.load.valid.eq(self.o.ready)]
        with m.Else():
            m.d.comb += [lpram.load.payload.eq(self.load.payload),
                         lpram.load.valid.eq(self.load.valid),
                         self.load.ready.eq(lpram.load.ready)]
        return m


def random_case(cfg, batch, batches, seed):
    """Random ``weights``, ``bias`` and per mini-batch ``dw``/``db`` (fixed16: gradients up
    to 2⁴ in value, so that ``lr · g`` moves the weights and some saturate; fp32 normal)."""
    rng = np.random.default_rng(seed)
    shape_w = (cfg.n_out, cfg.n_in, cfg.k, cfg.k)
    if cfg.precision == "fp32":
        bits = lambda x: to_bits(FP32, x.astype(np.float32)).astype(np.int64)
        return {"weights": bits(rng.standard_normal(shape_w)),
                "bias": bits(rng.standard_normal(cfg.n_out)),
                "dw": [bits(rng.standard_normal(shape_w) * 4) for _ in range(batches)],
                "db": [bits(rng.standard_normal(cfg.n_out) * 4) for _ in range(batches)]}
    f = cfg.frac_bits
    limit = min(1 << (2 * f + 4), 1 << (lgb_bits(cfg, batch) - 2))
    return {"weights": rng.integers(-(1 << 15), 1 << 15, shape_w),
            "bias": rng.integers(-(1 << 15), 1 << 15, cfg.n_out),
            "dw": [rng.integers(-limit, limit, shape_w) for _ in range(batches)],
            "db": [rng.integers(-(1 << (f + 4)), 1 << (f + 4), cfg.n_out)
                   for _ in range(batches)]}


def load_beats(cfg, weights, bias):
    """The LPRAM rows of ``weights`` and (completing node) ``bias`` as ``load`` payloads, in
    the PG drain's order (bank-major)."""
    rows = lgb_rows(cfg, weights, bias)
    return [pack(load_layout(cfg), {"bank": bank, "row": row, "data": words})
            for bank, banks in enumerate(rows) for row, words in enumerate(banks)]


def stimulus(cfg, case, batch):
    """``load`` (the initial rows) and ``i`` (each mini-batch's LGB rows)."""
    layout = gradient_layout(cfg, batch)
    beats = []
    for dw, db in zip(case["dw"], case["db"]):
        flat = [(bank, row, words) for bank, banks in enumerate(lgb_rows(cfg, dw, db))
                for row, words in enumerate(banks)]
        beats += [pack(layout, {"bank": b, "row": r, "data": w, "last": int(n == len(flat) - 1)})
                  for n, (b, r, w) in enumerate(flat)]
    return {"load": load_beats(cfg, case["weights"], case["bias"]), "i": beats}


def expected(cfg, case, lr):
    """The ``o`` payloads: each update's new rows."""
    weights, bias, beats = case["weights"], case["bias"], []
    for dw, db in zip(case["dw"], case["db"]):
        weights, bias = update_segment(cfg, weights, bias, dw, db, lr)
        beats += load_beats(cfg, weights, bias)
    return beats


def model_cycles(cfg, rows, loads):
    """Cycles without pauses, at most: the load, then ``latency + 1`` a row."""
    return loads + rows * 5 + 100


@cocotb.test()
async def update_matches_golden(dut):
    params = tb_params()
    cfg = config_of(params["cfg"])

    def make(number):
        case = random_case(cfg, params["batch"], params["batches"], params["seed"] + number)
        stim = stimulus(cfg, case, params["batch"])
        want = expected(cfg, case, params["lr"])
        return ([("load", stim["load"], False), ("i", stim["i"], True)], want,
                model_cycles(cfg, len(want), len(stim["load"])))

    await run_patterns(dut, params, make, load_layout(cfg), "o")

"""The FPDeep PG module (:mod:`nnrtl.hw.fpdeep.pg`): stimulus and expected LGB rows from the
golden model (:mod:`nnrtl.sim.golden.fpdeep.pg`), and a cocotb bench under Verilator with
every backpressure pattern on the activation-in, δ-in and gradient-out streams.

A case is ``batches`` mini-batches of ``batch`` random images (activations and δ maps); the
module must send the LGB rows of each mini-batch after its last image (the second
mini-batch's rows check that the drain cleared the LGB).

Parameters of the cocotb bench (``tb_params()``): ``cfg`` (the FpConfig's fields),
``batch``, ``batches``, ``patterns``, ``seed``; reported as the EB bench
(:func:`nnrtl.sim.tb.fpdeep.eb.run_patterns`).
"""

import cocotb
import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.line_buffer import pixel_layout
from nnrtl.hw.fpdeep.pg import gradient_layout
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.fpdeep.pg import lgb_rows, pg_batch
from nnrtl.sim.tb.common import tb_params
from nnrtl.sim.tb.fpdeep.eb import delta_beats
from nnrtl.sim.tb.fpdeep.fp import config_of, pack, run_patterns

__all__ = ["random_case", "stimulus", "expected", "model_cycles"]


def random_case(cfg, batch, batches, seed):
    """Random ``act`` (images, w_in, w_in, n_in) and ``delta`` (images, w_out, w_out,
    n_out), ``batch · batches`` images: fixed16 codes in ±1.0, fp32 bit patterns of
    standard normal values."""
    rng = np.random.default_rng(seed)
    one, images = 1 << cfg.frac_bits, batch * batches
    if cfg.precision == "fp32":
        bits = lambda x: to_bits(FP32, x.astype(np.float32)).astype(np.int64)
        return {"act": bits(rng.standard_normal((images, cfg.w_in, cfg.w_in, cfg.n_in))),
                "delta": bits(rng.standard_normal((images, cfg.w_out, cfg.w_out, cfg.n_out))),
                "batch": batch}
    return {"act": rng.integers(-one, one + 1, (images, cfg.w_in, cfg.w_in, cfg.n_in)),
            "delta": rng.integers(-one, one + 1, (images, cfg.w_out, cfg.w_out, cfg.n_out)),
            "batch": batch}


def stimulus(cfg, case):
    """Payload integers per input stream: ``i_act`` and ``i_delta``."""
    pixel = pixel_layout(cfg.word_bits, cfg.n_in)
    return {"i_act": [pack(pixel, list(a[y, x])) for a in case["act"]
                      for y in range(cfg.w_in) for x in range(cfg.w_in)],
            "i_delta": [b for d in case["delta"] for b in delta_beats(cfg, d)]}


def expected(cfg, case):
    """The ``o`` payloads: each mini-batch's LGB rows, bank-major."""
    batch, layout = case["batch"], gradient_layout(cfg, case["batch"])
    beats = []
    for start in range(0, len(case["act"]), batch):
        dw, db = pg_batch(cfg, case["act"][start:start + batch],
                          case["delta"][start:start + batch])
        rows = lgb_rows(cfg, dw, db)
        flat = [(bank, row, words) for bank, banks in enumerate(rows)
                for row, words in enumerate(banks)]
        beats += [pack(layout, {"bank": bank, "row": row, "data": words,
                                "last": int(n == len(flat) - 1)})
                  for n, (bank, row, words) in enumerate(flat)]
    return beats


def model_cycles(cfg, images, batches, banks):
    """Cycles without pauses, at most: per image the slower of the activations (``w_in²``)
    and the windows (``pixels · G · passes``) plus the fill (``K`` rows); per mini-batch
    the drain (2 cycles a row, ``G · passes`` rows a bank)."""
    return (images * (max(cfg.w_in ** 2, cfg.cycles) + cfg.k * cfg.w_in)
            + batches * (2 * banks * cfg.rows + 4) + 200)


@cocotb.test()
async def pg_module_matches_golden(dut):
    params = tb_params()
    cfg = config_of(params["cfg"])
    batch, batches = params["batch"], params["batches"]
    banks = cfg.banks + int(cfg.completes)

    def make(number):
        case = random_case(cfg, batch, batches, params["seed"] + number)
        stim = stimulus(cfg, case)
        return ([("i_act", stim["i_act"], True), ("i_delta", stim["i_delta"], True)],
                expected(cfg, case), model_cycles(cfg, batch * batches, batches, banks))

    await run_patterns(dut, params, make, gradient_layout(cfg, batch), "o")

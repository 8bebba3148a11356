"""The FPDeep SFU backward step (:class:`nnrtl.hw.fpdeep.eb.SfuBackward`): stimulus and
expected δ beats from the golden model (:func:`nnrtl.sim.golden.fpdeep.eb.sfu_backward`), and
a cocotb bench under Verilator with every backpressure pattern on the error-in, mask-in and
δ-out streams.

A case is ``images`` pooled error maps with random masks: ``relu`` bits (about 3 in 4 set)
and ``argmax`` indices anywhere in the ``k × k`` window, so that with an overlapping pool
(kernel > stride) many pixels take two or more errors (fixed16 errors of magnitude 64.0 …
128.0, either sign, so that two of the same sign saturate; fp32 normal values of σ 1).

Parameters of the cocotb bench (``tb_params()``): ``cfg`` (FpConfig fields), ``images``,
``patterns``, ``seed``; reported as the FP bench (:func:`nnrtl.sim.tb.fpdeep.fp.run_patterns`).
"""

import cocotb
import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.fp import out_layout
from nnrtl.hw.fpdeep.line_buffer import pixel_layout
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.fpdeep.eb import sfu_backward
from nnrtl.sim.tb.common import tb_params
from nnrtl.sim.tb.fpdeep.fp import config_of, pack, run_patterns

__all__ = ["random_case", "stimulus", "expected", "model_cycles"]


def random_case(cfg, images, seed):
    """``error``, ``relu``, ``argmax``: each ``(images, pool_out, pool_out, groups, P)``."""
    rng = np.random.default_rng(seed)
    shape = (images, cfg.pool_out, cfg.pool_out, cfg.groups, cfg.p)
    if cfg.precision == "fp32":
        error = to_bits(FP32, rng.standard_normal(shape).astype(np.float32)).astype(np.int64)
    else:
        error = rng.choice((-1, 1), shape) * rng.integers(1 << 14, 1 << 15, shape)
    taps = cfg.pool[0] ** 2 if cfg.pool is not None else 1
    return {"error": error, "relu": (rng.random(shape) < 0.75).astype(np.int64),
            "argmax": rng.integers(0, taps, shape)}


def stimulus(cfg, case):
    """Payload integers of ``i_error`` and ``i_mask`` (the SFU's ``out`` beats, ``data``
    unused)."""
    errors, masks = [], []
    layout = pixel_layout(cfg.word_bits, cfg.p)
    for error, relu, argmax in zip(case["error"], case["relu"], case["argmax"]):
        for e, r, a in zip(*(v.reshape(-1, cfg.p) for v in (error, relu, argmax))):
            errors.append(pack(layout, list(e)))
            masks.append(pack(out_layout(cfg), {
                "data": [0] * cfg.p, "relu": sum(int(b) << j for j, b in enumerate(r)),
                "argmax": [int(v) for v in a], "last": 0}))
    return {"i_error": errors, "i_mask": masks}


def expected(cfg, case):
    """The ``o`` payloads: each image's δ map, raster order, a beat per pixel and group."""
    layout = pixel_layout(cfg.word_bits, cfg.p)
    beats = []
    for error, relu, argmax in zip(case["error"], case["relu"], case["argmax"]):
        delta = sfu_backward(cfg, error, relu, argmax)
        beats += [pack(layout, list(d))
                  for d in delta.reshape(-1, cfg.p)]
    return beats


def model_cycles(cfg, images):
    """Cycles without pauses, at most: per image the pooled beats taken and the δ beats
    sent, one a cycle each, alternating."""
    return images * (cfg.pool_out ** 2 + cfg.w_out ** 2) * cfg.groups + 100


@cocotb.test()
async def sfu_backward_matches_golden(dut):
    params = tb_params()
    cfg = config_of(params["cfg"])

    def make(number):
        case = random_case(cfg, params["images"], params["seed"] + number)
        stim = stimulus(cfg, case)
        return ([("i_error", stim["i_error"], True), ("i_mask", stim["i_mask"], True)],
                expected(cfg, case), model_cycles(cfg, params["images"]))

    await run_patterns(dut, params, make, pixel_layout(cfg.word_bits, cfg.p), "o")

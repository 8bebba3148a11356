# amaranth: UnusedElaboratable=no
"""The FC engine (nnrtl.hw.fpdeep.fc) in the Amaranth simulator: bit-exact against the golden
model (nnrtl.sim.golden.fpdeep.fc) on a seeded draw of shapes, both input orders, with and
without gaps and backpressure; without pauses its cycles equal the cycle model
(nnrtl.gen.fpdeep.fc_cycles). The configuration's refusals, each message pinned."""

import pytest

from nnrtl.gen.fpdeep.fc_cycles import fc_cycles, fc_ddr_bytes
from nnrtl.hw.fpdeep.fc import FcEngine
from nnrtl.hw.fpdeep.fc_config import FcConfig
from nnrtl.sim.tb.fpdeep.fc import amaranth_run, random_case, random_config


@pytest.mark.parametrize("seed", range(4))
def test_fc_engine_random_shapes_paused(seed):
    cfg, order = random_config(seed)
    case = random_case(cfg, 2, seed)
    got, want, _ = amaranth_run(cfg, case, order=order, gap=0.3, stall=0.4, seed=seed)
    for name in want:
        assert got[name] == want[name], (name, cfg, order)


@pytest.mark.parametrize("cfg", [
    FcConfig(precision="fixed16", n_in=5, n_out=3, p=2, batch=2, input_relu=True),
    FcConfig(precision="fp32", n_in=6, n_out=2, p=7, batch=1),
    FcConfig(precision="fp32", n_in=7, n_out=1, p=8, batch=1, multiplier_stages=6,
             adder_stages=6),          # the forward tree outlasts the backward pass
], ids=["fixed16", "fp32-one-beat", "fp32-deep-tree"])
def test_fc_engine_cycles_equal_model(cfg):
    case = random_case(cfg, 2, 7)
    got, want, cycles = amaranth_run(cfg, case)
    assert got == want
    assert cycles == fc_cycles(cfg, 2)


def test_fc_cycle_model_by_hand():
    # n_in 5, n_out 3, P 2, B 2: K = 3 beats, 18 items a pass; fixed16 products 1 cycle.
    # period = 2·10 + 2·18 + 1 + 2 = 59; the last batch + the drain's register: 2·59 + 1.
    cfg = FcConfig(precision="fixed16", n_in=5, n_out=3, p=2, batch=2)
    assert fc_cycles(cfg, 2) == 119
    assert fc_ddr_bytes(cfg) == 3 * 3 * 3 * 2 * 2


@pytest.mark.parametrize("kwargs, error, message", [
    ({"precision": "fp16"}, TypeError, r"^precision must be one of fp32, fixed16, not 'fp16'$"),
    ({"n_in": 0}, TypeError, r"^n_in must be a positive integer, not 0$"),
    ({"p": 7}, ValueError, r"^p \(7\) must be at most n_in \+ 1 \(6\)$"),
    ({"frac_bits": 15}, TypeError, r"^frac_bits must be an integer from 1 to 14, not 15$"),
    ({"adder_stages": 7}, TypeError, r"^adder_stages must be an integer from 0 to 6, not 7$"),
    ({"n_in": 70000, "p": 4}, ValueError,
     r"^fixed16: n_in \+ 1 = 70001 products exceed the 2\^16 a 48-bit sum holds exactly$"),
])
def test_fc_config_refusals(kwargs, error, message):
    fields = {"precision": "fixed16", "n_in": 5, "n_out": 3, "p": 2} | kwargs
    with pytest.raises(error, match=message):
        FcConfig(**fields)


def test_fc_engine_refusals():
    with pytest.raises(TypeError, match=r"^cfg must be an FcConfig, not 3$"):
        FcEngine(3)
    cfg = FcConfig(precision="fixed16", n_in=5, n_out=3, p=2)
    with pytest.raises(ValueError, match=r"^input_order must be one of sample, feature, "
                                         r"not 'rows'$"):
        FcEngine(cfg, input_order="rows")


def test_segment_engine_alexnet_fc6():
    # fc6 of AlexNet (9216 -> 4096) with 147 MAC units (the 15-VC709 mapping at fc_batch 4):
    # P = 49 lanes, K = ceil(9217 / 49) = 189 beats; a mini-batch of 4 takes
    # 2·4·9216 + 2·4096·189·4 + 1 + 2 = 6,266,883 cycles, 1,566,720.75 a sample; DDR
    # 3 · 4096·189·49 words of 2 bytes, over 4 samples
    from types import SimpleNamespace

    from nnrtl.gen.fpdeep.fc_cycles import (ddr_bytes_per_sample, per_sample_cycles,
                                            segment_engine)
    cfg = segment_engine(SimpleNamespace(n_in=9216, n_out=4096, mac_units=147), "fixed16", 4)
    assert (cfg.p, cfg.beats) == (49, 189)
    assert per_sample_cycles(cfg) == 1566720.75
    assert ddr_bytes_per_sample(cfg) == 3 * 4096 * 189 * 49 * 2 / 4

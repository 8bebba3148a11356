"""One FPDeep node under Verilator (bench: nnrtl.sim.tb.fpdeep.node): one small build in the
fast suite (fixed16, K = 3, pad 1 over a 4×4 map, S_IC = 1, OC = 2 on P = 1, ReLU and a 2×2
pool on the completing node, EB), the default node, the fp32 twin of the fast one and a
node with issue 14's shapes (two passes, the second ragged, and an overlapping 3×3/2 pool)
and two nodes the draws made (two segments with EB partial errors and a one-image Act-RAM;
a completing segment sending δ) in the slow suite; two mini-batches of two images per backpressure pattern with a lag of two
images between FP and the errors (so the third image runs FP on the old weights and EB on
the new ones): activations out, errors out and, through them, the updated weights
bit-exact against the golden models; the counters read over AXI4-Lite; under backpressure
``none`` the bench's cycles those of the cycle model
(:func:`nnrtl.gen.fpdeep.node_cycles.bench_cycles`)."""

import numpy as np
import pytest

from nnrtl.gen.fpdeep.node_cycles import bench_cycles, bench_lag
from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.node import FpdeepNode, FpdeepConfig
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep.node import fp_versions, node_config, node_fields

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

CFG = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=1, n_out=2, p=1,
               pool=(2, 2, 0))
CONFIG = FpdeepConfig((CFG,), (True,), batch=2, act_images=3, lr=20000)
BATCHES, LAG = 2, 2
#: Issue 14's shapes: S_IC = 3 on Q = 2 (two passes, the second ragged) and AlexNet's
#: overlapping 3×3/2 pool (5×5 → 2×2) on the completing node.
PASSES_CONFIG = FpdeepConfig((FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=3,
                                       n_out=2, p=1, q=2, pool=(3, 2, 0)),),
                             (True,), batch=2, act_images=3, lr=20000)
FP32_CFG = FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=4, n_in=1, n_out=2, p=1,
                    pool=(2, 2, 0))
FP32_CONFIG = FpdeepConfig((FP32_CFG,), (True,), batch=2, act_images=3,
                           lr=int(to_bits(FP32, np.float32([0.03125]))[0]))


#: Draw 1 of seed 1 (``nnrtl draws fpdeep --seed 1 --only 1``): two segments of one node,
#: the first without EB (K = 3, pad 2 over a 2×2 map, partials in and out), the second
#: taking and sending EB partial errors (K = 1, stride 2 over a 5×5 map, two passes), an
#: Act-RAM of one image. The bench once ran one-segment nodes only, dropped
#: ``eb_partial``/``delta_out`` and sent no image ahead of its errors with one Act-RAM
#: image.
TWO_SEGMENTS = FpdeepConfig(
    (FpConfig(precision="fixed16", k=3, stride=1, pad=2, w_in=2, n_in=1, n_out=4, p=1,
              partial_in=True, completes=False, q=1),
     FpConfig(precision="fixed16", k=1, stride=2, pad=0, w_in=5, n_in=2, n_out=2, p=1,
              partial_in=True, completes=False, q=1)),
    (False, True), batch=2, act_images=1, lr=12013,
    eb_partial=((False, False), (True, True)))
#: A completing ICP segment sending δ (``delta_out``), strided 4×4 kernel with padding.
DELTA_OUT = FpdeepConfig(
    (FpConfig(precision="fixed16", k=4, stride=3, pad=2, w_in=6, n_in=4, n_out=5, p=1,
              partial_in=True, relu=False, q=1),),
    (False,), batch=2, act_images=2, lr=36115, delta_out=(True,))


def test_node_fields_round_trip():
    for config in (CONFIG, TWO_SEGMENTS, DELTA_OUT):
        assert node_config(node_fields(config)) == config


def run_node(config, name):
    cfg = config.segments[0]
    result = simulate(FpdeepNode(config), test_module="nnrtl.sim.tb.fpdeep.node", name=name,
                      seed=14, params={"config": node_fields(config), "batches": BATCHES,
                                       "lag": LAG, "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    assert result["patterns"]["none"]["cycles"] == bench_cycles(config, BATCHES, LAG)
    for kind in PATTERNS:
        run = result["patterns"][kind]
        assert run["counters"]["updates"] == BATCHES and run["counters"]["images"] == 4
        assert run["beats"]["err_out"] == 4 * cfg.w_in ** 2, (kind, run)
        assert run["beats"]["act_out"] == 4 * cfg.out_beats, (kind, run)
        assert run["counters"]["fp_busy"] > 0 and run["counters"]["pg_busy"] > 0
    return result


def test_node_trains_every_pattern():
    assert fp_versions(4, 2, LAG) == [0, 0, 0, 1]      # image 2: FP old, EB new weights
    run_node(CONFIG, "fpdeep_node")


@pytest.mark.slow
@pytest.mark.timeout(3600)          # the fp32 build: 15+ min on the loaded 2-core machine
@pytest.mark.parametrize("config, name", [
    (FpdeepConfig(), "default"), (FP32_CONFIG, "fp32"), (PASSES_CONFIG, "passes_overlap")],
    ids=["default", "fp32", "passes-overlap"])
def test_node_trains_slow(config, name):
    run_node(config, f"fpdeep_node_{name}")


@pytest.mark.slow
@pytest.mark.parametrize("config, name", [(TWO_SEGMENTS, "two_segments"),
                                          (DELTA_OUT, "delta_out")],
                         ids=["two-segments", "delta-out"])
def test_node_segments_and_partial_errors(config, name):
    lag = bench_lag(config)
    result = simulate(FpdeepNode(config), test_module="nnrtl.sim.tb.fpdeep.node",
                      name=f"fpdeep_node_{name}", seed=2,
                      params={"config": node_fields(config), "batches": BATCHES,
                              "lag": lag, "patterns": ["none", "bursty"]})
    assert result["bit_exact"], result["patterns"]
    assert result["patterns"]["none"]["cycles"] == bench_cycles(config, BATCHES, lag)
    beats = result["patterns"]["bursty"]["beats"]
    if config is TWO_SEGMENTS:
        assert beats["s1_err_part_out"] == 4 * 5 ** 2 and beats["part_out"] > 0
    else:
        assert beats["delta_out"] == 4 * DELTA_OUT.segments[0].pixels * 5


def test_golden_outputs_depend_on_the_update():
    """The check is not vacuous: another ``lr`` changes the outputs of the images after
    the first update (FP of image 3, EB of images 2 and 3), not those before."""
    import dataclasses

    from nnrtl.sim.tb.fpdeep.node import expected, random_case
    case = random_case(CFG, 4, 3)
    want, versions = expected(CONFIG, case, LAG)
    assert (versions[2][0] != versions[1][0]).any()
    other, _ = expected(dataclasses.replace(CONFIG, lr=5000), case, LAG)
    beats, errs = CFG.out_beats, CFG.w_in ** 2
    assert len(versions) == 3 and (versions[1][0] != case["weights"]).any()
    assert want["act_out"][:3 * beats] == other["act_out"][:3 * beats]
    assert want["act_out"][3 * beats:] != other["act_out"][3 * beats:]
    assert want["err_out"][:2 * errs] == other["err_out"][:2 * errs]
    assert want["err_out"][2 * errs:3 * errs] != other["err_out"][2 * errs:3 * errs]

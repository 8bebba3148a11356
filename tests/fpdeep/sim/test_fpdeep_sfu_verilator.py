"""The FPDeep SFU backward step under Verilator (bench: nnrtl.sim.tb.fpdeep.sfu), every
backpressure pattern on the error-in, mask-in and δ-out streams, bit-exact against the
golden model within the patterns' cycle budgets: AlexNet's overlapping 3×3/2 pool (a ring
of two pooled rows, up to four errors summed a pixel, fixed16 saturating; an uncovered last
row and column), fixed16 and fp32 (the FloatAdd chain). Slow: the node bench's fast build
covers the non-overlapping pool."""

import pytest

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.eb import SfuBackward
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep.fp import fields_of

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(1800)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [
    FpConfig(precision="fixed16", k=1, stride=1, pad=0, w_in=8, n_in=1, n_out=3, p=2,
             pool=(3, 2, 0)),
    FpConfig(precision="fp32", k=1, stride=1, pad=0, w_in=7, n_in=1, n_out=3, p=2,
             pool=(3, 2, 0))], ids=["fixed16", "fp32"])
def test_sfu_backward_overlap_every_pattern_slow(cfg):
    images = 2
    result = simulate(SfuBackward(cfg), test_module="nnrtl.sim.tb.fpdeep.sfu",
                      name=f"fpdeep_sfu_{cfg.precision}", seed=14,
                      params={"cfg": fields_of(cfg), "images": images,
                              "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    for kind in PATTERNS:
        stats = result["patterns"][kind]
        assert stats["beats"] == images * cfg.w_out ** 2 * cfg.groups, (kind, stats)
        assert not stats["mismatches"], (kind, stats)
        assert stats["cycles"] < stats["budget"] / 2, (kind, stats)

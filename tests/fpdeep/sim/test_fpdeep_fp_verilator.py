"""The FPDeep FP module under Verilator (bench: nnrtl.sim.tb.fpdeep.fp): one small build of a
completing ICP node with time-multiplexed input channels (fixed16, S_IC = 5 on Q = 2 tiles:
passes of 2 + 2 + 1 channels, the last ragged; OC = 3 on P = 2; an odd 5 × 5 map, padding 1,
partials in, bias, ReLU and a 2×2/2 pool that drops the odd edge), two images per
backpressure pattern on the activation-in, partial-in and out streams, bit-exact against the
golden model within the patterns' cycle budgets."""

import pytest

from nnrtl.hw.fpdeep import FpConfig, FpModule
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep.fp import fields_of

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

CFG = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=5, n_out=3, p=2, q=2,
               partial_in=True, pool=(2, 2, 0))


def test_fp_module_every_pattern():
    assert (CFG.passes, CFG.groups, CFG.pool_out) == (3, 2, 2)
    result = simulate(FpModule(CFG), test_module="nnrtl.sim.tb.fpdeep.fp", name="fpdeep_fp",
                      seed=14, params={"cfg": fields_of(CFG), "images": 2,
                                       "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    beats = 2 * 2 * 2 * 2                       # images · pooled pixels (2 × 2) · groups
    for kind in PATTERNS:
        run = result["patterns"][kind]
        assert run["beats"] == beats and not run["mismatches"], (kind, run)
        assert run["cycles"] < run["budget"] / 2, (kind, run)

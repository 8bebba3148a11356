"""The FPDeep FP module under Verilator (bench: nnrtl.sim.tb.fpdeep_fp): one small build of a
middle ICP node (partials in and out, fixed16, S_IC = 1, OC = 3 on P = 2), two images per
backpressure pattern on the activation-in, partial-in and partial-out streams, bit-exact
against the golden model within the patterns' cycle budgets."""

import pytest

from nnrtl.hw.fpdeep import FpConfig, FpModule
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep_fp import fields_of

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

CFG = FpConfig("fixed16", 3, 1, 1, 6, 1, 3, 2, partial_in=True, completes=False)


def test_fp_module_every_pattern():
    result = simulate(FpModule(CFG), test_module="nnrtl.sim.tb.fpdeep_fp", name="fpdeep_fp",
                      seed=14, params={"cfg": fields_of(CFG), "images": 2,
                                       "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    beats = 2 * CFG.pixels * CFG.groups
    for kind in PATTERNS:
        run = result["patterns"][kind]
        assert run["beats"] == beats and not run["mismatches"], (kind, run)
        assert run["cycles"] < run["budget"] / 2, (kind, run)

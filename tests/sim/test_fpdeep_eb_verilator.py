"""The FPDeep EB module under Verilator (bench: nnrtl.sim.tb.fpdeep_eb): one small build
(fixed16, K = 3, pad 1, a 5×5 δ map, S_IC = 2 CEs, OC = 3 on P = 2 tiles: two groups, the
second with a zero lane), two images per backpressure pattern on the δ-in and error-out
streams, bit-exact against the golden model within the patterns' cycle budgets."""

import pytest

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.eb import EbModule
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep_fp import fields_of

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

CFG = FpConfig("fixed16", 3, 1, 1, 5, 2, 3, 2)


def test_eb_module_every_pattern():
    result = simulate(EbModule(CFG), test_module="nnrtl.sim.tb.fpdeep_eb", name="fpdeep_eb",
                      seed=14, params={"cfg": fields_of(CFG), "images": 2,
                                       "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    for kind in PATTERNS:
        run = result["patterns"][kind]
        assert run["beats"] == 2 * CFG.w_in ** 2 and not run["mismatches"], (kind, run)
        assert run["cycles"] < run["budget"] / 2, (kind, run)

"""The FPDeep PG module under Verilator (bench: nnrtl.sim.tb.fpdeep.pg): one small build
(fixed16, K = 3, stride 2, pad 1 over a 7×7 map, S_IC = 3 on Q = 2: two passes, the second
ragged, OC = 3 on P = 2, the completing node's bias bank in the last pass's rows), two
mini-batches of two images per backpressure pattern on the activation-in, δ-in and
gradient-out streams, bit-exact LGB rows against the golden model within the patterns'
cycle budgets (the second mini-batch checks the drain cleared the LGB)."""

import pytest

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.pg import PgModule
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep.fp import fields_of

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

CFG = FpConfig(precision="fixed16", k=3, stride=2, pad=1, w_in=7, n_in=3, n_out=3, p=2, q=2)
BATCH, BATCHES = 2, 2


def test_pg_module_every_pattern():
    dut = PgModule(CFG, batch=BATCH)
    result = simulate(dut, test_module="nnrtl.sim.tb.fpdeep.pg", name="fpdeep_pg", seed=14,
                      params={"cfg": fields_of(CFG), "batch": BATCH, "batches": BATCHES,
                              "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    for kind in PATTERNS:
        run = result["patterns"][kind]
        assert run["beats"] == BATCHES * dut.lgb_banks * CFG.rows, (kind, run)
        assert not run["mismatches"], (kind, run)
        assert run["cycles"] < run["budget"] / 2, (kind, run)

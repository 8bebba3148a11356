"""The FPDeep weight update on its LPRAM under Verilator (bench: nnrtl.sim.tb.fpdeep.update),
fixed16 and fp32: two mini-batches' LGB rows per backpressure pattern on the gradient-in and
row-out streams, every new LPRAM row bit-exact against the golden SGD step. Slow: the node's
Verilator test (tests/fpdeep/sim/test_fpdeep_node_verilator.py) covers the update inside the node
in the fast suite."""

import numpy as np
import pytest

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep.fp import fields_of
from nnrtl.sim.tb.fpdeep.update import UpdateHarness

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

FP32_RATE = int(to_bits(FP32, np.float32([0.03125]))[0])


@pytest.mark.parametrize("cfg, lr", [
    (FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=2, n_out=3, p=2), 3000),
    (FpConfig(precision="fp32", k=2, stride=1, pad=1, w_in=4, n_in=2, n_out=3, p=2), FP32_RATE),
    (FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=5, n_out=3, p=2,
              q=2), 3000),  # 3 passes, the last ragged
], ids=["fixed16", "fp32", "fixed16-passes"])
def test_update_every_pattern(cfg, lr):
    batch, batches = 2, 2
    result = simulate(UpdateHarness(cfg, batch=batch, lr=lr),
                      test_module="nnrtl.sim.tb.fpdeep.update",
                      name=f"fpdeep_update_{cfg.precision}_q{cfg.q}", seed=5,
                      params={"cfg": fields_of(cfg), "batch": batch, "batches": batches,
                              "lr": lr, "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    for kind in PATTERNS:
        run = result["patterns"][kind]
        assert run["beats"] == batches * (cfg.banks + 1) * cfg.rows, (kind, run)
        assert not run["mismatches"], (kind, run)

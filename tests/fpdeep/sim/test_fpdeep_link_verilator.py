"""The FPDeep neighbour link pair under Verilator (bench: nnrtl.sim.tb.fpdeep.link): the paper's
link in three 256-bit slots (fp32, P = 8, 768 bits) with small FIFOs so that credits bind,
random traffic on the six paths under every backpressure pattern, every beat delivered in
order within the cycle budgets."""

import dataclasses

import pytest

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.link_config import LinkConfig, lanes_for
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep.link import LinkPairTop

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = [pytest.mark.timeout(1200), pytest.mark.slow]

CFG = LinkConfig.from_fp(FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=14, n_in=64,
                                  n_out=64, p=8), "down",
                         link_bits=64 * lanes_for(150), slots=3, tx_depth=4, rx_depth=6,
                         max_beats=8)


def test_link_pair_every_pattern():
    result = simulate(LinkPairTop(CFG), test_module="nnrtl.sim.tb.fpdeep.link",
                      name="fpdeep_link_pair", seed=15,
                      params={"cfg": dataclasses.asdict(CFG), "beats": 60,
                              "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    for kind in PATTERNS:
        run = result["patterns"][kind]
        assert run["beats"] == 6 * 60 and not run["mismatches"], (kind, run)
        assert run["cycles"] < run["budget"] / 2, (kind, run)

"""The FPDeep EB module under Verilator (bench: nnrtl.sim.tb.fpdeep.eb), every backpressure
pattern on the δ-in, partial-in and error-out streams, bit-exact against the golden model
within the patterns' cycle budgets.

Fast: one small build (fixed16, K = 3, pad 1, a 5×5 δ map, S_IC = 3 on Q = 2: two passes,
the second ragged; OC = 3 on P = 2 tiles: two groups, the second with a zero lane; the
downstream partial errors added, the errors rounded: an OCP layer's most upstream segment).
Slow: stride 2 (dilated δ map, a row and column no forward window reached) sending
un-rounded partial errors upstream (``partial_out``), and fp32."""

import pytest

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.eb import EbModule
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep.fp import fields_of

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

CFG = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=3, n_out=3, p=2, q=2)


def run(cfg, name, images, **options):
    result = simulate(EbModule(cfg, **options), test_module="nnrtl.sim.tb.fpdeep.eb",
                      name=name, seed=14, params={"cfg": fields_of(cfg), "images": images,
                                                  "patterns": list(PATTERNS), **options})
    assert result["bit_exact"], result["patterns"]
    for kind in PATTERNS:
        stats = result["patterns"][kind]
        assert stats["beats"] == images * cfg.w_in ** 2, (kind, stats)
        assert not stats["mismatches"], (kind, stats)
        assert stats["cycles"] < stats["budget"] / 2, (kind, stats)
    return result


def test_eb_module_every_pattern():
    run(CFG, "fpdeep_eb", 2, partial_in=True)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [
    FpConfig(precision="fixed16", k=3, stride=2, pad=1, w_in=8, n_in=3, n_out=3, p=2, q=2),
    FpConfig(precision="fp32", k=2, stride=2, pad=0, w_in=7, n_in=3, n_out=3, p=2, q=2,
             multiplier_stages=1, adder_stages=2)],
    ids=["fixed16", "fp32"])
def test_eb_module_stride_partial_out_slow(cfg):
    run(cfg, f"fpdeep_eb_{cfg.precision}_s2", 2, partial_in=True, partial_out=True)

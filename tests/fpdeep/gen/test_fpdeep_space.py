"""The FPDeep node's random configurations (:mod:`nnrtl.gen.fpdeep.space`): every draw
completes into a node that fits its board, and the draws reach every segment kind and
option of the node (the draws' lint and simulation run in ``tests/test_draws.py``)."""

import pytest

from nnrtl.gen import draws
from nnrtl.gen.fpdeep.engine import ENGINE
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.node import FpdeepConfig

COUNT = 150


def test_draws_complete_and_cover_the_node():
    configs = [draws.configure(ENGINE, d) for d in draws.draws(ENGINE, COUNT, 0)]
    assert all(isinstance(c, FpdeepConfig) for c in configs)
    segments = [s for c in configs for s in c.segments]
    assert {c.precision for c in configs} == {"fixed16", "fp32"}
    assert {(s.partial_in, s.completes) for s in segments} == {
        (False, True), (True, True), (False, False), (True, False)}
    assert {len(c.segments) for c in configs} == {1, 2, 3}
    assert {e for c in configs for e in c.eb} == {False, True}
    assert {p for c in configs for p in c.partials} == {
        (False, False), (False, True), (True, False), (True, True)}
    assert any(any(c.deltas) for c in configs)
    assert {s.relu for s in segments} == {False, True}
    assert any(s.pool is None for s in segments if s.completes)
    assert any(s.pool and s.pool[1] < s.pool[0] for s in segments)     # overlapping
    assert any(s.passes > 1 and s.n_in % s.q for s in segments)       # ragged passes
    assert any(s.passes == 1 and s.n_in > 1 for s in segments)
    assert any(s.p > 1 for s in segments) and any(s.n_out % s.p for s in segments)
    assert {s.k for s in segments} >= {1, 2, 3, 4, 5}
    assert {s.stride for s in segments} >= {1, 2, 3} and any(s.pad for s in segments)
    assert any(s.w_in % 2 for s in segments) and any(s.n_in % 2 for s in segments)
    assert {c.batch for c in configs} == {1, 2, 3}
    assert {c.act_images for c in configs} == {1, 2, 3, 4}
    assert {s.frac_bits for s in segments if s.precision == "fixed16"} - {8}
    assert {(s.multiplier_stages, s.adder_stages) for s in segments} - {(3, 3)}
    assert {(s.multiplier_shifts, s.adder_shifts) for s in segments
            if s.precision == "fp32"} == {("lut", "lut"), ("lut", "dsp"), ("dsp", "lut"),
                                          ("dsp", "dsp")}


def test_draws_are_reproducible():
    first, again = draws.draws(ENGINE, 5, 3), draws.draws(ENGINE, 5, 3)
    assert first == again
    assert first[0].reproduce == "nnrtl draws fpdeep --seed 3 --only 0"


#: Nodes draws found broken, with what was wrong.
FOUND = [
    ({"segments": (FpConfig(precision="fixed16", k=1, stride=3, pad=0, w_in=4, n_in=2, n_out=5,
                            p=2, partial_in=True, q=1),),
      "eb": (True,), "batch": 1, "act_images": 4, "lr": 15321},
     "draw 20 of seed 7: EB's dilation compared its row and column counters with the last "
     "δ pixel's coordinate, which is the counters' largest value when the stride divides "
     "w_in + 2·pad − K (Verilator CMPCONST)"),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("params, found", FOUND, ids=[f"found-{n}" for n in range(len(FOUND))])
def test_nodes_draws_found_broken_now_lint(params, found):
    draw = draws.Draw(engine="fpdeep", seed=0, index=0, board="vc709", params=params,
                      backpressure="none")
    outcome = draws.run(ENGINE, draw)
    assert outcome["passed"], f"{found}: {outcome['error']}"

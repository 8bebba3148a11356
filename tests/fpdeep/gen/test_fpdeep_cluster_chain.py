# amaranth: UnusedElaboratable=no
"""The cluster simulator against the RTL chain (issue 14: "agrees with the RTL chain within
2%"): the FP chain bench (nnrtl.sim.tb.fpdeep.chain, K nodes of one ICP-split layer joined
by RTL link pairs, pattern ``none``) measured, the simulator's node and link models
(nnrtl.gen.fpdeep.cluster_chain) predicting the same chain; first-image latency and
steady-state period within 2%."""

import numpy as np
import pytest

from nnrtl.gen.fpdeep.cluster_chain import chain_plan, compare, predict
from nnrtl.sim.tb.fpdeep.chain import chained_cases, icp_chain, run


def _fixed16(cuts, images, **shape):
    cfgs = icp_chain("fixed16", cuts, **shape)
    n_in, n_out, w, k = cuts[-1][1], shape["n_out"], shape["w_in"], shape["k"]
    rng = np.random.default_rng(11)
    return cfgs, chained_cases(cfgs, cuts, rng.integers(-256, 257, (images, w, w, n_in)),
                               rng.integers(-128, 129, (n_out, n_in, k, k)),
                               rng.integers(-256, 257, n_out))


def _fp32(cuts, images, **shape):
    cfgs = icp_chain("fp32", cuts, **shape)
    n_in, n_out, w, k = cuts[-1][1], shape["n_out"], shape["w_in"], shape["k"]
    rng = np.random.default_rng(12)
    f32 = lambda x: x.astype(np.float32).view(np.uint32).astype(np.int64)  # noqa: E731
    return cfgs, chained_cases(cfgs, cuts, f32(rng.standard_normal((images, w, w, n_in))),
                               f32(rng.standard_normal((n_out, n_in, k, k)) * 0.5),
                               f32(rng.standard_normal(n_out) * 0.5))


def _check(cfgs, cases, link_options):
    report = run(cfgs, cases, "none", link_options=link_options)
    assert report["bit_exact"], report
    figures = compare(cfgs, report, link_options)
    assert figures["within_2pct"], figures
    return figures


def test_two_node_chain_within_two_percent():
    """fixed16, 5 x 5 map (odd), 3 input channels cut 1 | 2, P = 3 of 4 outputs (two
    groups, the second ragged), a 192-bit link (a partial beat one link word): the
    node-bound case."""
    cfgs, cases = _fixed16([(0, 1), (1, 3)], 3, k=3, stride=1, pad=1, w_in=5, n_out=4, p=3)
    figures = _check(cfgs, cases, {"link_bits": 192})
    # the line buffer's refill: the period is more than the module's 50 cycles a sample
    assert figures["period_rtl"] > cfgs[0].cycles


def test_plan_of_the_chain():
    cfgs = icp_chain("fixed16", [(0, 2), (2, 3), (3, 5)], k=3, stride=1, pad=1, w_in=6,
                     n_out=4, p=3, pool=(2, 2, 0))
    plan = chain_plan(cfgs)
    assert plan.n == 3 and plan.span[0] == (1, 3) and plan.host_inputs
    assert [(s.lo, s.hi, s.completes) for n in plan.nodes for s in n.segments] == [
        (0, 2, False), (2, 3, False), (3, 5, True)]
    # no bypass on the links (the bench delivers each node's channels): partials only
    assert [key for key, _, _ in plan.forward_streams(1)] == [("partial", 0)]


def test_prediction_is_link_bound_on_a_narrow_link():
    """A 64-bit link carries a 3-word fixed16 partial beat in 3 words: 72 beats a sample
    need 216 cycles and headers, more than the module's 72 + refill."""
    cfgs = icp_chain("fixed16", [(0, 2), (2, 5)], k=3, stride=1, pad=1, w_in=6, n_out=4,
                     p=3)
    done = predict(cfgs, 4, None)
    period = done[-1] - done[-2]
    assert 72 * 3 < period < 72 * (3 + 1 / 16) + 10


#: Link FIFOs of 128 beats: the simulator's receive buffers are unbounded (its PAB holds
#: one output row, then stalls FP); with the default 16 beats the nodes' line-buffer refills
#: couple through full FIFOs (the 4-node case: 163 cycles a sample, the model 159).
DEEP = {"tx_depth": 128, "rx_depth": 128}


@pytest.mark.slow
@pytest.mark.parametrize("make, cuts, shape, link", [
    (_fixed16, [(0, 2), (2, 3), (3, 5)],
     dict(k=3, stride=1, pad=1, w_in=6, n_out=4, p=3, pool=(2, 2, 0)), DEEP),
    (_fixed16, [(0, 2), (2, 3), (3, 5)],
     dict(k=3, stride=1, pad=1, w_in=6, n_out=4, p=3, pool=(2, 2, 0)), {"link_bits": 192, **DEEP}),
    (_fixed16, [(0, 1), (1, 3), (3, 4), (4, 7)],
     dict(k=3, stride=1, pad=1, w_in=7, n_out=5, p=2), {"link_bits": 128, **DEEP}),
    (_fixed16, [(0, 3), (3, 5), (5, 7), (7, 9)],
     dict(k=3, stride=2, pad=1, w_in=9, n_out=3, p=3, q=2), {"link_bits": 192, **DEEP}),
    (_fp32, [(0, 2), (2, 5)], dict(k=3, stride=1, pad=0, w_in=7, n_out=4, p=2),
     {"link_bits": 128, **DEEP}),
])
def test_bigger_chains_within_two_percent(make, cuts, shape, link):
    cfgs, cases = make(cuts, 4, **shape)
    _check(cfgs, cases, link)

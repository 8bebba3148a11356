# amaranth: UnusedElaboratable=no
"""The chain harness (nnrtl.sim.tb.fpdeep.chain): three FP modules of one ICP-split layer joined
by their neighbour links (partials DP2 through link module pairs), bit-exact against the
golden model chained node by node, under the backpressure patterns on every link channel,
every activation source and the output."""

import numpy as np
import pytest

from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.tb.fpdeep.chain import chained_cases, icp_chain, run

CUTS = [(0, 2), (2, 3), (3, 5)]


def _fixed16(images):
    cfgs = icp_chain("fixed16", CUTS, k=3, stride=1, pad=1, w_in=6, n_out=4, p=3,
                     pool=(2, 2, 0))
    rng = np.random.default_rng(7)
    weights = rng.integers(-128, 129, (4, 5, 3, 3))
    bias = rng.integers(-256, 257, 4)
    act = rng.integers(-256, 257, (images, 6, 6, 5))
    return cfgs, chained_cases(cfgs, CUTS, act, weights, bias)


def test_three_node_chain_random():
    cfgs, cases = _fixed16(1)
    report = run(cfgs, cases, "random", seed=1)
    assert report["bit_exact"], report
    # 36 partial beats of 3 48-bit words (3 link words each) plus headers per boundary.
    assert all(words >= 36 * 3 + 3 for words in report["link_words"])


def test_icp_chain_configs():
    cfgs, _ = _fixed16(1)
    assert [(c.n_in, c.partial_in, c.completes, c.pool) for c in cfgs] == [
        (2, False, False, None), (1, True, False, None), (2, True, True, (2, 2, 0))]


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERNS)
def test_three_node_chain_every_pattern(pattern):
    cfgs, cases = _fixed16(2)
    report = run(cfgs, cases, pattern, seed=2)
    assert report["bit_exact"], report


@pytest.mark.slow
def test_fp32_chain_wide_link():
    """fp32, P = 2 on a 128-bit link with short packets and tight credits."""
    cfgs = icp_chain("fp32", CUTS, k=3, stride=1, pad=1, w_in=5, n_out=4, p=2)
    rng = np.random.default_rng(3)
    f32 = lambda x: x.astype(np.float32).view(np.uint32).astype(np.int64)  # noqa: E731
    cases = chained_cases(cfgs, CUTS, f32(rng.standard_normal((1, 5, 5, 5))),
                          f32(rng.standard_normal((4, 5, 3, 3)) * 0.5),
                          f32(rng.standard_normal(4) * 0.5))
    report = run(cfgs, cases, "random", seed=3,
                 link_options={"link_bits": 128, "rx_depth": 2, "tx_depth": 2,
                               "max_beats": 3})
    assert report["bit_exact"], report

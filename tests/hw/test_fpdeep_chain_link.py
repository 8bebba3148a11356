# amaranth: UnusedElaboratable=no
"""The node-to-link adapter of the FPDeep training chain (nnrtl.hw.fpdeep.chain_link): its
configuration's refusals and derived beat counts (anchored messages), and one tiny
3-node chain training two mini-batches with stale weights in the Amaranth simulator,
bit-exact against each node's golden model (every pattern, both precisions, full
sizes: tests/sim/test_fpdeep_chain_train.py, slow)."""

import dataclasses

import pytest

from nnrtl.hw.fpdeep.chain_link import ChainConfig, NodeLink
from nnrtl.sim.tb.fpdeep_chain_train import chain_case, expected_out, run
from nnrtl.sim.tb.fpdeep_chain_train import small_chain as chain


def test_beat_counts_follow_the_segments():
    config = chain((2, 2, 3))
    assert config.pixel_beats == 2                      # 3 words on 2-word beats
    assert config.image_beats == 16 * 2
    assert [config.block_beats(n) for n in range(3)] == [4, 4, 8]   # 2×2 pooled, G = 1, 1, 2
    assert [config.upstream_beats(n) for n in range(3)] == [0, 4, 8]
    assert config.host_beats == 16 and config.batch == 2


def test_refusals():
    good = chain()
    node = good.nodes[0]
    with pytest.raises(TypeError, match=r"^nodes must be a non-empty tuple of NodeConfig, "
                                        r"not \(\)$"):
        ChainConfig(())
    with pytest.raises(TypeError, match=r"^lag must be a positive integer, not 0$"):
        ChainConfig(good.nodes, lag=0)
    two = dataclasses.replace(node, segments=node.segments * 2, eb=(False, False))
    with pytest.raises(ValueError, match=r"^node 1 has 2 segments: the chain adapter carries "
                                         r"one layer segment per node$"):
        ChainConfig((two,))
    with pytest.raises(ValueError, match=r"^node 2: the chain carries an OCP split of the "
                                         r"first layer \(every segment completes"):
        ChainConfig((node, dataclasses.replace(node, eb=(True,))))
    other = chain((2,), w_in=6).nodes[0]
    with pytest.raises(ValueError, match=r"^node 2: w_in 6 differs from node 1's 4$"):
        ChainConfig((node, other))
    with pytest.raises(ValueError, match=r"^node 2: batch 1 differs from node 1's 2$"):
        ChainConfig((node, dataclasses.replace(node, batch=1)))
    with pytest.raises(TypeError, match=r"^config must be a ChainConfig, not 3$"):
        NodeLink(3, node=0)
    with pytest.raises(TypeError, match=r"^node must be an integer from 0 to 2, not 3$"):
        NodeLink(good, node=3)


def test_the_stale_rule_is_visible_at_the_host():
    """The expectation under lag 2 differs from lag 1 (image 2 runs FP on the weights
    before the first update), so the chain run below tells the two rules apart."""
    stale, fresh = chain(lag=2), chain(lag=1)
    cases = chain_case(stale, 4, 3)
    want_stale, want_fresh = expected_out(stale, cases), expected_out(fresh, cases)
    assert want_stale[:2] == want_fresh[:2]
    assert want_stale[2] != want_fresh[2]


def test_three_nodes_train_two_mini_batches_bit_exact():
    report = run(chain(), 4, "random", seed=3)
    assert report["bit_exact"], report
    assert report["link_words"][1]["backward"] > 0 and report["cycles"] < report["budget"]

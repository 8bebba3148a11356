# amaranth: UnusedElaboratable=no
"""The node-to-link adapter of the FPDeep training chain (nnrtl.hw.fpdeep.chain_link): its
refusals (anchored messages), and tiny chains training two mini-batches with stale
weights in the Amaranth simulator, bit-exact against each node's golden model: one
OCP-split layer on 3 nodes, a layer pipeline (conv – pool – conv on 3 nodes) and the same
with one node holding two segments (every pattern, both precisions, larger maps:
tests/fpdeep/sim/test_fpdeep_chain_train.py, slow). The configuration:
tests/fpdeep/hw/test_fpdeep_chain_config.py; the ICP and split-layer paths:
tests/fpdeep/hw/test_fpdeep_chain_paths.py."""

import pytest

from nnrtl.hw.fpdeep.chain_link import NodeLink
from nnrtl.sim.tb.fpdeep.chain_train import chain_case, expected_out, run
from nnrtl.sim.tb.fpdeep.chain_train import small_chain as chain


def test_refusals():
    good = chain()
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


def test_a_layer_pipeline_trains_bit_exact():
    """conv (2 + 2 channels on nodes 1, 2) – ReLU – pool – conv (node 3, with EB): node
    3's EB output is the error nodes 1 and 2 train on; every node's activations and node
    3's EB output checked against the composed golden models, two mini-batches of 2 with
    2 images in flight."""
    report = run(chain((2, 2), next_out=3), 4, "random", seed=3)
    assert report["bit_exact"], report
    # node 1's errors exist only as node 3's EB output relayed by node 2
    assert report["link_words"][0]["backward"] > 0 and report["cycles"] < report["budget"]


def test_a_node_holding_two_layers_trains_bit_exact():
    """Node 2 holds conv1's last channels and conv2 (its two adapters joined inside the
    node): bit-exact as the three-node pipeline, over one link."""
    report = run(chain((2, 2), next_out=3, shared=True), 4, "bursty", seed=4)
    assert report["bit_exact"], report
    assert len(report["link_words"]) == 1 and report["link_words"][0]["backward"] > 0

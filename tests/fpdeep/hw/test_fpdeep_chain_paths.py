# amaranth: UnusedElaboratable=no
"""The chain's paths beyond one activation and one error block a stage
(nnrtl.hw.fpdeep.chain_paths): the adapters' ports for them, and tiny chains training in
the Amaranth simulator, bit-exact against the golden models composed along the chain
(every stage's outputs, partial sums, δ, partial errors and EB errors): a first layer
split by input channels (DP2 partial sums down, δ up; every pattern), a later layer
split by output channels (EB partial errors up the ``delta`` path; every pattern), a
later layer split by input channels (its EB errors gathered by its first stage). Both
precisions, batch 2, larger chains: tests/fpdeep/sim/test_fpdeep_chain_train.py (slow)."""

import pytest

from nnrtl.hw.fpdeep.chain_link import NodeLink
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.tb.fpdeep.chain_train import run
from nnrtl.sim.tb.fpdeep.chain_train import small_chain as chain


def test_an_icp_layer_chains_partials_down_and_delta_up():
    """Node 1 of an ICP split (1 + 2 channels) sends partial sums down and takes δ; node
    2 takes them, completes and sends δ up; a middle node does both."""
    config = chain((3,), icp=(1, 2))
    first = NodeLink(config, node=0).signature.members
    assert {"part_out", "down_part", "down_delta"} <= set(first)
    assert not {"act_out", "up_delta", "up_part"} & set(first)
    last = NodeLink(config, node=1).signature.members
    assert {"act_out", "up_part", "part_in", "delta_out", "up_delta"} <= set(last)
    middle = NodeLink(chain((3,), icp=(1, 1, 1)), node=1).signature.members
    assert {"down_part", "up_part", "down_delta", "up_delta"} <= set(middle)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_an_icp_layer_trains_bit_exact(pattern):
    """Conv 3 → 3 split by input channels (1 + 2) over two nodes, 4×4 maps, pool 2: node
    1's partial sums, node 2's activations and δ, and node 1's weight update (visible in
    image 1's partial sums) bit-exact, one image a mini-batch (slow: batch 2, fp32, three
    nodes, a second layer)."""
    report = run(chain((3,), icp=(1, 2), batch=1, lag=1), 2, pattern, seed=6)
    assert report["bit_exact"], report
    assert report["link_words"][0]["backward"] > 0 and report["cycles"] < report["budget"]


def test_a_later_layer_split_over_nodes_chains_partial_errors():
    """Node 3's adapter sends its EB's partial errors (no ``err_out``), node 2's takes
    them and sends the errors."""
    config = chain((2,), next_out=(2, 3))
    ports = NodeLink(config, node=2).signature.members
    assert "up_err_part" in ports and "err_part_out" in ports and "err_out" not in ports
    ports = NodeLink(config, node=1).signature.members
    assert "down_err_part" in ports and "err_out" in ports and "up_err_part" not in ports


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_later_layer_split_over_nodes_trains_bit_exact(pattern):
    """Conv 3 → 2 (node 1, 4×4 maps, pool 2) – conv 2 → 2 + 2 (nodes 2, 3, with EB):
    node 3's partial errors reach node 2's EB over the link, the sum trains node 1; every
    stage's activations, node 2's errors and node 3's partial errors bit-exact, one image
    a mini-batch (the slow tests run mini-batches of 2 and fp32)."""
    config = chain((2,), next_out=(2, 2), batch=1, lag=1)
    report = run(config, 2, pattern, seed=5)
    assert report["bit_exact"], report
    assert report["link_words"][1]["backward"] > 0 and report["cycles"] < report["budget"]


def test_a_later_icp_layer_trains_bit_exact():
    """Conv 3 → 4 (node 1) – conv 4 → 2 split by input channels 2 + 2 (nodes 2, 3): node
    3's EB errors gathered by node 2 train node 1; every stage's outputs, partial sums,
    δ and EB errors bit-exact (slow: every pattern, fp32, batch 2)."""
    report = run(chain((4,), next_out=2, next_icp=(2, 2), batch=1, lag=1), 2, "random",
                 seed=7)
    assert report["bit_exact"], report
    assert report["link_words"][0]["backward"] > 0 and report["cycles"] < report["budget"]

# amaranth: UnusedElaboratable=no
"""The FPDeep training chain in the Amaranth simulator (nnrtl.sim.tb.fpdeep.chain_train):
three node tops joined by link modules train an OCP-split 3×3 conv layer (3 → 7 channels,
4×4 maps, 2×2 pool; the fast test's chain, the Amaranth simulator's speed sets the size) in fp32 and fixed16, batch 1 (plain SGD, ``lag`` 1) and batch 2 with
two images in flight (the stale-weight rule), under every backpressure pattern on the
links and the host's streams; every activation beat the host receives is checked
bit-exactly against the nodes' golden models (so is every weight version the nodes'
updates wrote, except the last). And a layer pipeline (conv – ReLU – pool – conv – ReLU on
three nodes, or two with one node holding two segments): every segment's activations and
EB output checked against the golden models composed along the chain; and the second
layer split by output channels over two or three stages (its EB's partial errors
chained upstream on the links' ``delta`` path, or inside a node); and the first layer
split by input channels (DP2 partial sums down the ``partial`` path, the completing
node's δ back up the ``delta`` path), alone or before a second layer; and a second layer
split by input channels (its stages' EB errors gathered by its first stage)."""

import pytest

from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.tb.fpdeep.chain_train import run
from nnrtl.sim.tb.fpdeep.chain_train import small_chain as chain


def matrix(test):
    """Slow, over both precisions, batch 1 and 2 (``lag`` = batch) and every pattern."""
    for mark in (pytest.mark.parametrize("pattern", PATTERNS),
                 pytest.mark.parametrize("batch", [1, 2]),
                 pytest.mark.parametrize("precision", ["fixed16", "fp32"]), pytest.mark.slow):
        test = mark(test)
    return test


def check(outs, precision, batch, pattern, **options):
    """Train ``2·batch`` images through ``small_chain(outs, **options)``: bit-exact."""
    config = chain(outs, precision=precision, batch=batch, lag=batch, **options)
    report = run(config, 2 * batch, pattern, seed=batch)
    print(precision, batch, pattern, options, {k: report[k] for k in ("cycles", "budget",
                                                                      "link_words")})
    assert report["bit_exact"], report


@matrix
def test_chain_trains_bit_exact(precision, batch, pattern):
    check((2, 2, 3), precision, batch, pattern)


@matrix
@pytest.mark.parametrize("shared", [False, True])
def test_layer_pipeline_trains_bit_exact(precision, batch, pattern, shared):
    """conv 3 → 2 + 2 (nodes 1, 2; 6×6 maps, 2×2 pool) – conv 4 → 3 (node 3, or
    ``shared``: node 2's second segment; 3×3 maps, EB): conv2's EB output trains conv1;
    every segment's outputs bit-exact."""
    check((2, 2), precision, batch, pattern, w_in=6, next_out=3, shared=shared)


@matrix
@pytest.mark.parametrize("shared", [False, True])
def test_a_later_layer_split_over_nodes_trains_bit_exact(precision, batch, pattern, shared):
    """conv 3 → 2 + 2 (nodes 1, 2; 4×4 maps, 2×2 pool) – conv 4 → 2 + 2 + 2 (nodes 3, 4,
    5, or ``shared``: node 2's second segment, nodes 3, 4): the layer's EB partial errors
    summed from the most downstream stage up; every segment's outputs bit-exact."""
    check((2, 2), precision, batch, pattern, next_out=(2, 2, 2), shared=shared)


@matrix
@pytest.mark.parametrize("split, next_out, shared", [
    ((1, 1, 1), None, False), ((1, 2), (2, 2), True)])
def test_an_icp_layer_trains_bit_exact(precision, batch, pattern, split, next_out, shared):
    """conv 3 → 3 split by input channels over the nodes (``split`` channels each, 4×4
    maps, 2×2 pool; the last completes), with ``next_out``: conv 3 → ``next_out`` after
    it, split by output channels over the last node's second segment (``shared``) and a
    node of its own; every segment's outputs, partial sums and δ bit-exact."""
    check((3,), precision, batch, pattern, icp=split, next_out=next_out, shared=shared)


@matrix
def test_a_later_icp_layer_trains_bit_exact(precision, batch, pattern):
    """conv 3 → 2 + 2 (nodes 1, 2; 4×4 maps, 2×2 pool) – conv 4 → 2 split by input
    channels 1 + 1 + 2 (node 2's second segment, nodes 3, 4): the stages' EB errors
    gathered by the layer's first stage train layer 0; every segment's outputs, partial
    sums, δ and EB errors bit-exact."""
    check((2, 2), precision, batch, pattern, next_out=2, next_icp=(1, 1, 2), shared=True)

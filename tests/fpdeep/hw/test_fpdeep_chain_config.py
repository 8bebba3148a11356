"""The FPDeep training chain's configuration (nnrtl.hw.fpdeep.chain_config): its refusals
(anchored messages), its stages, layers and the beat counts of its paths, derived from
the segments: OCP and ICP layers, a layer pipeline, a node of two segments, a later layer
split by output or by input channels."""

import dataclasses

import pytest

from nnrtl.hw.fpdeep.chain_config import ChainConfig
from nnrtl.sim.tb.fpdeep.chain_train import small_chain as chain


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
    with pytest.raises(TypeError, match=r"^nodes must be a non-empty tuple of FpdeepConfig, "
                                        r"not \(\)$"):
        ChainConfig(())
    with pytest.raises(TypeError, match=r"^lag must be a positive integer, not 0$"):
        ChainConfig(good.nodes, lag=0)
    two = dataclasses.replace(node, segments=node.segments * 2, eb=(False, True))
    with pytest.raises(ValueError, match=r"^node 1 segment 2: layer 0 is the network's first: "
                                         r"no EB$"):
        ChainConfig((two,))
    with pytest.raises(ValueError, match=r"^node 2: layer 0 is the network's first: no EB$"):
        ChainConfig((node, dataclasses.replace(node, eb=(True,))))
    partial = dataclasses.replace(node, segments=(dataclasses.replace(
        node.segments[0], completes=False, pool=None),))
    with pytest.raises(ValueError, match=r"^node 2: layer 0 is split by output channels "
                                         r"\(OCP, its first segment completes\): every "
                                         r"segment completes its channels \(no DP2 "
                                         r"partials\)$"):
        ChainConfig((node, partial))
    icp = chain((3,), icp=(1, 2)).nodes
    with pytest.raises(ValueError, match=r"^node 2: segment 2 of 2 of layer 0's input-channel "
                                         r"\(ICP\) split must take partials and complete$"):
        ChainConfig((icp[0], partial))
    with pytest.raises(ValueError, match=r"^node 1: segment 1 of 2 of layer 0's input-channel "
                                         r"\(ICP\) split must not take partials and not "
                                         r"complete$"):
        ChainConfig((chain((3,), icp=(1, 1, 1)).nodes[1], icp[1]))
    with pytest.raises(ValueError, match=r"^node 2: n_out 3 differs from node 1's 2$"):
        ChainConfig((chain((2,), icp=(1, 2)).nodes[0], icp[1]))
    other = chain((2,), w_in=6).nodes[0]
    with pytest.raises(ValueError, match=r"^node 2: w_in 6 differs from node 1's 4$"):
        ChainConfig((node, other))
    with pytest.raises(ValueError, match=r"^node 2: batch 1 differs from node 1's 2$"):
        ChainConfig((node, dataclasses.replace(node, batch=1)))
    wide = chain((3,)).nodes[0]
    with pytest.raises(ValueError, match=r"^node 2: p 3 differs from node 1's 2$"):
        ChainConfig((node, dataclasses.replace(wide, segments=(dataclasses.replace(
            wide.segments[0], p=3),))))
    with pytest.raises(TypeError, match=r"^layers must be one layer number per segment, from 0, "
                                        r"non-decreasing by steps of 1, not \(0, 2\)$"):
        ChainConfig((node, node), layers=(0, 2))
    pipe = chain((2, 2), next_out=3)
    second = pipe.nodes[2]
    with pytest.raises(ValueError, match=r"^node 3: layer 1 needs its EB \(the error of "
                                         r"layer 0's activations\)$"):
        ChainConfig(pipe.nodes[:2] + (dataclasses.replace(second, eb=(False,)),),
                    layers=(0, 0, 1))
    with pytest.raises(ValueError, match=r"^node 2: layer 1 takes 2x2 maps of 4 channels, "
                                         r"layer 0 gives 2x2 of 2$"):
        ChainConfig((pipe.nodes[0], second), layers=(0, 1))


def test_layer_pipeline_beats():
    """Two nodes of layer 0 (2 + 2 channels, 2×2 pooled maps) feed node 3's layer 1:
    its input is their two blocks, the host gets its block only."""
    config = chain((2, 2), next_out=3)
    assert config.layers == (0, 0, 1) and [config.lo(n) for n in range(3)] == [0, 2, 0]
    assert config.input_blocks(2) == ((1, 2, 0), (1, 2, 2))
    assert [config.input_beats(n) for n in range(3)] == [32, 32, 8]
    assert [config.act_beats(n) for n in range(3)] == [32, 36, 8]
    assert [config.error_beats(n) for n in range(3)] == [4, 8, 8]
    assert config.host_beats == 8 and [config.last_in_layer(n) for n in range(3)] == [
        False, True, True]


def test_a_node_of_two_segments_is_two_stages():
    """Node 2 holds conv1's channels 2, 3 and conv2: three stages on two nodes, one link."""
    config = chain((2, 2), next_out=3, shared=True)
    assert config.stages == ((0, 0), (1, 0), (1, 1)) and config.layers == (0, 0, 1)
    assert [config.name(n) for n in range(3)] == ["node 1", "node 2 segment 1",
                                                  "node 2 segment 2"]
    assert config.stage_node(2).segments == (config.segment(2),)
    assert config.stage_node(2).eb == (True,) and config.host_beats == 8


def test_an_icp_layer_counts():
    """Layer 0 split by input channels, 1 + 2 of 3, 3 outputs: node 1 sends partial sums
    (DP2, ``partial`` path) and takes δ (DP3, ``delta`` path) from node 2, which
    completes the layer; only node 2's activations reach the host."""
    config = chain((3,), icp=(1, 2))
    assert config.icp(0) and config.completing(0) == [1]
    assert [config.in_lo(n) for n in (0, 1)] == [0, 1] and config.layer_ic(0) == 3
    assert config.pixel_beats == 2 and config.input_blocks(1) == ((2, 3, 0),)
    assert [config.block_beats(n) for n in (0, 1)] == [0, 8]
    assert [config.error_beats(n) for n in (0, 1)] == [0, 8] and config.host_beats == 8
    assert config.delta_beats(0) == 16 * 2
    assert [node.delta_out for node in config.nodes] == [None, (True,)]


def test_a_later_layer_split_over_nodes_counts():
    """Layer 1 (2 → 2 + 3 channels) on nodes 2 and 3: node 3's EB sends partial errors
    (``err_part_out``) to node 2's (``err_part_in``), node 2 sends the errors of layer 0;
    a pixel of 2 partial words of 48 bits is 3 beats of 2 16-bit words (fp32: 1)."""
    config = chain((2,), next_out=(2, 3))
    assert config.layers == (0, 1, 1)
    assert [config.partial_errors(n) for n in (1, 2)] == [(True, False), (False, True)]
    assert [node.eb_partial for node in config.nodes] == [
        None, ((True, False),), ((False, True),)]
    assert config.partial_error_beats(2) == 3
    assert chain((2,), next_out=(2, 3), precision="fp32").partial_error_beats(2) == 1
    assert config.input_blocks(2) == ((1, 2, 0),) and config.upstream_beats(2) == 4
    assert config.stage_node(2).eb_partial == ((False, True),)


def test_a_later_icp_layer_gathers_its_errors():
    """Layer 1 (4 → 2) split by input channels 1 + 1 + 2 over nodes 2-4: nodes 3 and 4
    send their EB outputs up the error path (node 3 its own, then node 4's), node 2
    gathers them with its own into layer 0's error block."""
    config = chain((4,), next_out=2, next_icp=(1, 1, 2))
    assert config.layers == (0, 1, 1, 1) and config.icp(1)
    assert [config.in_lo(n) for n in (1, 2, 3)] == [0, 1, 2]
    assert [config.error_block_beats(n) for n in (1, 2, 3)] == [4, 4, 4]   # 2×2, G 1
    assert [config.error_beats(n) for n in (1, 2, 3)] == [8, 4, 4]   # later EB blocks; own
    assert config.input_blocks(2) == ((2, 4, 0),) and config.host_beats == 4

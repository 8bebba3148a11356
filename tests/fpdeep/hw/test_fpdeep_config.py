"""The FP module's configuration (nnrtl.hw.fpdeep.config): derived from the mapper's segments,
``Q < S_IC`` (passes of ``Q`` tiles) included, its sizes by hand, its refusals, and its cycle
count against the mapper's per-segment model on the segments the mapper makes."""

import numpy as np
import pytest

from nnrtl.boards import get_board
from nnrtl.gen.fpdeep import SegmentConfig, builtin, map_network
from nnrtl.gen.fpdeep.cost import segment_cycles
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.sim.tb.fpdeep.fp import small_cnn


def segment(**fields):
    base = dict(layer="conv2", index=1, kind="conv", mode="ICP", lo=0, hi=3, n_in=3, n_out=5,
                k=3, pixels=36, p=2, q=3, modules=3, mac_units=3 * 2 * 3 * 9, dsp=162, lut=0,
                cycles=36 * 3, work=3 * 36 * 5 * 3 * 9, completes=True, residency=3.0,
                stride=1, pad=1, w_in=6, pool=(2, 2, 0), relu=True)
    base.update(fields)
    return SegmentConfig(**base)


def test_config_from_segment():
    cfg = FpConfig.from_segment(segment(), "fp32")
    assert (cfg.k, cfg.stride, cfg.pad, cfg.w_in, cfg.w_out) == (3, 1, 1, 6, 6)
    assert (cfg.n_in, cfg.n_out, cfg.p, cfg.q, cfg.groups) == (3, 5, 2, 3, 3)
    assert cfg.passes == 1 and cfg.rows == 3
    assert cfg.cycles_per_pixel == 3 and cfg.banks == 27 and cfg.macs == 54
    assert not cfg.partial_in and cfg.completes and cfg.pool == (2, 2, 0)
    assert cfg.pool_out == 3 and cfg.argmax_bits == 2
    middle = FpConfig.from_segment(
        segment(lo=3, hi=6, completes=False, pool=None), "fixed16")
    assert middle.partial_in and not middle.completes and middle.partial_bits == 48
    ocp = FpConfig.from_segment(segment(mode="OCP", lo=5, hi=10, n_in=3, n_out=5), "fp32")
    assert not ocp.partial_in


def test_config_q_below_n_in():
    """S_IC = 7 on Q = 3: passes 3 (3 + 3 + 1, the last ragged), OC = 5 on P = 2: 3 groups;
    9 LPRAM rows of 3·9 banks, 9 cycles a pixel, 36·9 an image (the mapper's own count)."""
    seg = segment(hi=7, n_in=7, q=3, mac_units=3 * 2 * 3 * 9, cycles=36 * 3 * 3)
    cfg = FpConfig.from_segment(seg, "fixed16")
    assert (cfg.n_in, cfg.q, cfg.passes, cfg.groups, cfg.rows) == (7, 3, 3, 3, 9)
    assert (cfg.banks, cfg.macs, cfg.ce_levels) == (27, 54, 2)
    assert cfg.cycles_per_pixel == 9 and cfg.cycles == 36 * 9 == seg.cycles
    assert FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=6, n_in=4, n_out=5,
                    p=2).q == 4  # default: one pass
    one = FpConfig(precision="fp32", k=1, stride=1, pad=0, w_in=6, n_in=4, n_out=5, p=5, q=1)
    assert (one.passes, one.rows, one.banks, one.ce_levels) == (4, 4, 1, 0)


def test_config_refusals():
    with pytest.raises(ValueError, match=r"^q \(4\) must be at most n_in \(3\)$"):
        FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=6, n_in=3, n_out=5, p=2, q=4)
    with pytest.raises(TypeError, match=r"^q must be an integer of at least 1, not 0$"):
        FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=6, n_in=3, n_out=5, p=2, q=0)
    with pytest.raises(TypeError, match=r"^q must be an integer of at least 1, not 1\.5$"):
        FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=6, n_in=3, n_out=5, p=2, q=1.5)
    with pytest.raises(ValueError, match="no w_in"):
        FpConfig.from_segment(segment(w_in=0), "fp32")
    with pytest.raises(TypeError, match="^precision must be one of fp32, fixed16, not 'fp16'$"):
        FpConfig.from_segment(segment(), "fp16")
    with pytest.raises(ValueError, match="pool .* must be"):
        FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=6, n_in=3, n_out=5, p=2,
                 pool=(3, 2, 1))
    with pytest.raises(ValueError, match="only the node completing"):
        FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=6, n_in=3, n_out=5, p=2,
                 completes=False, pool=(2, 2, 0))
    with pytest.raises(ValueError, match="pixels .* must be W_out"):
        segment(pixels=25, cycles=25 * 3)
    with pytest.raises(ValueError, match=r"^adder_shifts must be one of 'lut', 'dsp', not "
                                         r"'uram'$"):
        FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=6, n_in=3, n_out=5, p=2,
                 adder_shifts="uram")
    with pytest.raises(ValueError, match=r"^multiplier_shifts must be one of 'lut', 'dsp', "
                                         r"not None$"):
        FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=6, n_in=3, n_out=5, p=2,
                 multiplier_shifts=None)


@pytest.mark.parametrize("fpgas", [2, 3])
def test_config_cycles_match_mapper_small_cnn(fpgas):
    """Every conv segment the mapper makes for a small CNN gives an FP module whose cycles
    per image are the mapper's (``pixels · ⌈n_out/P⌉ · ⌈n_in/Q⌉``), whose MAC units times
    the segment's modules are the mapper's, and whose node period bounds it."""
    chain = small_cnn()
    mapping = map_network(chain, fpgas, get_board("vc709"))
    below = 0
    for node in mapping.nodes:
        for seg in node.segments:
            if seg.kind != "conv":
                continue
            cfg = FpConfig.from_segment(seg, "fixed16")
            assert cfg.cycles == seg.cycles <= mapping.period
            assert cfg.cycles == segment_cycles(seg.pixels, seg.n_out, seg.n_in, seg.p, seg.q)
            assert cfg.macs * seg.modules == seg.mac_units
            assert (cfg.pixels, cfg.q, cfg.p) == (seg.pixels, seg.q, seg.p)
            below += cfg.q < cfg.n_in
    assert below >= 2


def test_config_from_mapper_alexnet():
    """Every conv segment of AlexNet on 15 VC709s carries its layer's geometry and gives an
    FP module (``Q < S_IC`` ones included) with the segment's pixels and cycles."""
    chain = builtin("alexnet")
    mapping = map_network(chain, 15, get_board("vc709"), check_storage=False)
    layers = {layer.name: layer for layer in chain.layers}
    built = below = 0
    for node in mapping.nodes:
        for seg in node.segments:
            layer = layers[seg.layer]
            assert (seg.stride, seg.pad, seg.w_in, seg.pool, seg.relu) == \
                (layer.stride, layer.pad, layer.w_in, layer.pool, layer.relu)
            if seg.kind != "conv":
                continue
            cfg = FpConfig.from_segment(seg, "fixed16")
            assert cfg.pixels == seg.pixels and cfg.cycles == seg.cycles
            built += 1
            below += seg.q < seg.n_in
    assert built >= 5 and below >= 1

# amaranth: UnusedElaboratable=no
"""The FPDeep node's configuration and top (nnrtl.hw.fpdeep.node): the node configuration
derived from the mapper's per-node configuration, its refusals (anchored messages), the
top's ports and register map, and the staleness rule of the bench's golden model on its
own (which images run FP on old weights) — the node's behaviour is checked bit-exactly
under Verilator (tests/fpdeep/sim/test_fpdeep_node_verilator.py)."""

import dataclasses

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.fpdeep import map_network
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.node import COUNTERS, FpdeepNode, FpdeepConfig, SegmentUnit, register_map
from nnrtl.sim.tb.fpdeep.fp import small_cnn
from nnrtl.sim.tb.fpdeep.node import fp_versions, phases, random_case


@pytest.fixture(scope="module")
def mapping():
    return map_network(small_cnn(), 3, get_board("vc709"), check_storage=False)


def test_from_node_restates_nothing(mapping):
    """Node 1 of the small CNN on 3 VC709s: its conv segment (OCP, no EB on the first
    layer) becomes the FpConfig of :meth:`FpConfig.from_segment`, the Act-RAM depth the
    residency rounded up plus one."""
    node = mapping.nodes[0]
    config = FpdeepConfig.from_node(node, "fixed16", batch=4)
    (segment,) = node.segments
    assert config.segments == (FpConfig.from_segment(segment, "fixed16"),)
    assert config.eb == (False,) and segment.modules == 2
    assert config.act_images == 8 and segment.residency == pytest.approx(6.5)
    assert config.macs == segment.mac_units and config.cycles == segment.cycles
    assert config.node == 1 and config.batch == 4


def test_from_node_refuses_what_the_modules_do_not_build(mapping):
    node = mapping.nodes[2]         # layers[3] (OCP) has Q = 2 < S_IC = 8: built (passes)
    config = FpdeepConfig.from_node(node, "fixed16")
    assert any(s.passes > 1 for s in config.segments)
    fc = node.segments[-1]
    fc_only = dataclasses.replace(node, segments=(fc,), mac_units=fc.mac_units)
    with pytest.raises(ValueError, match=r"^node 3 has no conv segment "):
        FpdeepConfig.from_node(fc_only, "fixed16")


def test_node_config_checks():
    small = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=2, n_out=3, p=2,
                     pool=(2, 2, 0))
    with pytest.raises(TypeError, match=r"^batch must be a positive integer, not 0$"):
        FpdeepConfig((small,), (True,), batch=0)
    with pytest.raises(TypeError, match=r"^act_images must be a positive integer, not -3$"):
        FpdeepConfig((small,), (True,), act_images=-3)
    with pytest.raises(ValueError, match=r"^eb must have one entry per segment \(1\), not 2$"):
        FpdeepConfig((small,), (True, True))
    with pytest.raises(ValueError, match=r"^lr must be a 16-bit word, not 65536$"):
        FpdeepConfig((small,), (True,), lr=65536)
    with pytest.raises(TypeError, match=r"^segments must be a non-empty tuple of FpConfig"):
        FpdeepConfig((), ())
    with pytest.raises(ValueError, match=r"^eb_partial must have one \(takes, sends\) pair "
                                         r"per segment \(1\), not \(True,\)$"):
        FpdeepConfig((small,), (True,), eb_partial=(True,))
    with pytest.raises(ValueError, match=r"^eb_partial: segment 1 has no EB to chain partial "
                                         r"errors$"):
        FpdeepConfig((small,), (False,), eb_partial=((True, False),))
    ports = FpdeepNode(FpdeepConfig((small,), (True,), eb_partial=((True, True),))).signature
    assert {"s0_err_part_in", "s0_err_part_out"} <= set(ports.members)
    assert "s0_err_out" not in ports.members
    with pytest.raises(ValueError, match=r"^delta_out must have one entry per segment \(1\), "
                                         r"not 2$"):
        FpdeepConfig((small,), (True,), delta_out=(True, True))
    partial = dataclasses.replace(small, completes=False, pool=None)
    with pytest.raises(ValueError, match=r"^delta_out: segment 1 does not complete its layer "
                                         r"\(no SFU to make δ\)$"):
        FpdeepConfig((partial,), (False,), delta_out=(True,))
    ports = FpdeepNode(FpdeepConfig((small,), (False,), delta_out=(True,))).signature
    assert "s0_delta_out" in ports.members
    # passes (Q < S_IC, ragged) and an overlapping pool are built (issue 14)
    overlapping = dataclasses.replace(small, w_in=5, n_in=3, q=2, pool=(3, 2, 0))
    assert FpdeepConfig((overlapping,), (False,)).segments == (overlapping,)
    with pytest.raises(TypeError, match=r"^config must be a FpdeepConfig, not 3$"):
        FpdeepNode(3)


def test_top_ports_and_registers():
    partial = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=2, n_out=3, p=2,
                       partial_in=True, completes=False)
    config = FpdeepConfig((FpdeepConfig().segments[0], partial), (True, False), lr=100)
    top = FpdeepNode(config)
    assert set(top.signature.members) == {
        "s_axil", "s0_act_in", "s0_err_in", "s0_load", "s0_act_out", "s0_err_out",
        "s1_act_in", "s1_err_in", "s1_load", "s1_part_in", "s1_part_out"}
    regs = register_map(config)
    assert [r.name for r in regs] == ["control", "lr", "batch", "segments", *COUNTERS]
    assert regs["lr"].reset == 100 and all(regs[n].width == 64 for n in COUNTERS)
    unit = SegmentUnit(partial, batch=2, eb=False)
    assert "err_out" not in unit.signature.members


def test_staleness_schedule():
    """Lag 2, batch 2: images 0-2 run FP on the initial weights (image 2's activations
    came in before the first mini-batch's last error), image 3 on the first update's;
    the phases alternate errors and activations after the first two images."""
    assert fp_versions(6, 2, 2) == [0, 0, 0, 1, 1, 2]
    assert fp_versions(4, 2, 1) == [0, 0, 1, 1]
    cfg = FpdeepConfig().segments[0]
    order = [port for port, _ in phases(cfg, random_case(cfg, 4, 1), 2)]
    assert order == ["act_in", "act_in", "err_in", "act_in", "err_in", "act_in", "err_in",
                     "err_in"]
    with pytest.raises(ValueError, match=r"^lag must be at least 1 \(an image's errors "
                                         r"follow its activations\), not 0$"):
        phases(cfg, random_case(cfg, 4, 1), 0)

"""Link traffic per boundary (gen/fpdeep/links.py, spec §2.10) by hand: the first layer has
no EB (spec §2.8), so a boundary inside it carries no input errors backward (issue 14's
link-traffic bug: DP4 / the EB reduction were counted for the image)."""

import math

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.fpdeep import Chain, ChainLayer, builtin, map_network
from nnrtl.gen.fpdeep.links import boundary_words, link_loads, link_period
from nnrtl.gen.fpdeep.partition import UnitLine

VC709 = get_board("vc709")


def _chain():
    """conv 16 -> 8 on 8 x 8 (k3 p1, the first layer: ICP, 16 input channels), then the
    same shape again (8 -> 8, not first: ICP with ``ocp_min_ic`` 4), then an FC 512 -> 10."""
    return Chain("hand", (
        ChainLayer(name="c1", kind="conv", ic=16, oc=8, k=3, stride=1, pad=1, w_in=8, w_out=8,
                   relu=True, first=True),
        ChainLayer(name="c2", kind="conv", ic=8, oc=8, k=3, stride=1, pad=1, w_in=8, w_out=8,
                   relu=True),
        ChainLayer(name="fc", kind="fc", ic=512, oc=10)))


def test_icp_first_layer_has_no_input_errors():
    """Inside c1, 4 of 16 input channels upstream: forward 12 · 64 = 768 bypassed inputs +
    8 · 64 = 512 partial sums; backward the 512 δ only (DP3), no DP4: the image has no
    error. Inside c2, 2 of 8 upstream: backward 512 δ + 6 · 64 = 384 input errors."""
    chain = _chain()
    line = UnitLine.of(chain, ocp_min_ic=4)
    assert line.modes == ("ICP", "ICP", "ICP")
    (fwd, bwd, where), = boundary_words(chain, line, [4])
    assert (fwd, bwd) == (768 + 512, 512)
    assert where == "inside c1 (ICP, 4 of 16 channels upstream)"
    (fwd, bwd, _), = boundary_words(chain, line, [line.first[1] + 2])
    assert (fwd, bwd) == (384 + 512, 512 + 384)
    # between the layers: c2's 8 · 64 inputs each way (errors of c1's outputs: PG needs them)
    (fwd, bwd, _), = boundary_words(chain, line, [line.first[1]])
    assert (fwd, bwd) == (512, 512)


def test_ocp_first_layer_has_no_error_reduction():
    """With ``ocp_min_ic`` 17, c1 is OCP; 3 of its 8 output channels upstream: forward the
    16 · 64 = 1024 inputs + 3 · 64 = 192 outputs; backward the 192 δ only (no EB partial
    errors of the image). c2 (OCP too), 3 of 8 upstream: backward 8 · 64
    = 512 partial errors + 192 δ."""
    chain = _chain()
    line = UnitLine.of(chain, ocp_min_ic=17)
    assert line.modes[:2] == ("OCP", "OCP")
    (fwd, bwd, _), = boundary_words(chain, line, [3])
    assert (fwd, bwd) == (1024 + 192, 192)
    (fwd, bwd, _), = boundary_words(chain, line, [line.first[1] + 3])
    assert (fwd, bwd) == (512 + 192, 512 + 192)


def test_link_period_of_a_first_layer_cut():
    """The busiest channel sets the period: a boundary inside c1 needs max(1280, 512) words,
    not the 1280 + ... of both directions; 1280 words · 16 bits at 1 Gb/s and 200 MHz =
    4096 cycles. Convention "fpga" with one boundary: node 1 sends 1280, receives 512."""
    chain = _chain()
    line = UnitLine.of(chain, ocp_min_ic=4)
    words = boundary_words(chain, line, [4])
    assert link_loads(words, "link") == [1280]
    assert link_loads(words, "fpga") == [1280, 1280]
    # On the wire (the RTL link's framing, 1 Gb/s = one 64-bit lane, P = 4 16-bit words a
    # beat, 32-beat packets): an activation word 16 · (1 + 1/32) = 16.5 bits; a 48-bit
    # partial word 3 link words a beat: 64 / 4 · (3 + 1/32) = 48.5 bits. Forward: 768
    # bypassed activations + 512 partials.
    assert words[0].paths["act"] == 768 and words[0].paths["partial"] == 512
    assert link_period(words, 16, 200e6, 1.0, "link") == math.ceil(
        (768 * 16.5 + 512 * 48.5) / 1e9 * 200e6)


def test_alexnet_mapping_inside_conv1():
    """AlexNet on 30 VC709s (paper cost model, 32-bit link words): conv1 (3 input channels,
    OCP) spans the first nodes; the backward words of every boundary inside it are the δ of
    the upstream output channels alone: f · 96 · 55²."""
    mapping = map_network(builtin("alexnet"), 30, VC709, check_storage=False, word_bits=32)
    conv1 = mapping.chain.layers[0]
    inside = [(fwd, bwd, where) for fwd, bwd, where in mapping.boundaries
              if where.startswith(f"inside {conv1.name} ")]
    assert inside, [w for _, _, w in mapping.boundaries]
    for fwd, bwd, where in inside:
        upstream = int(where.split("(OCP, ")[1].split(" of ")[0])
        assert bwd == pytest.approx(upstream * 55 * 55)
        assert fwd == pytest.approx(3 * 224 * 224 + upstream * 55 * 55)

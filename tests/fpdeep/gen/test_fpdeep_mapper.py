"""The FPDeep mapper's invariants on randomized CNNs (every channel mapped once, work
conserved, DSPs a multiple of K², chain order kept, each segment within the period,
storage within the board or refused), link traffic and parameter balancing by hand."""

import dataclasses

import numpy as np
import pytest

from nnrtl.boards import get_board
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep import from_network, map_network
from nnrtl.gen.fpdeep.cost import fp32_model_for, unit_budget
from nnrtl.gen.fpdeep.links import boundary_words
from nnrtl.gen.fpdeep.partition import UnitLine
from nnrtl.gen.models import Conv2d, Flatten, Linear, MaxPool2d, Network, ReLU

VC709 = get_board("vc709")


def small_board(bram36, name="tiny"):
    """The VC709 with ``bram36`` block RAMs (to make storage bind)."""
    capacity = dataclasses.replace(VC709.capacity, bram36=bram36,
                                   onchip_mb=bram36 * 36 / 1024)
    return type("Tiny", (), {"name": name, "capacity": capacity})


def random_cnn(rng):
    """2-6 convolutions (1-64 channels, kernels 1/3/5, some pooled), then 1-2 Linear."""
    side = int(rng.choice([16, 24, 32]))
    size, channels, layers = side, int(rng.integers(1, 8)), []
    for _ in range(int(rng.integers(2, 7))):
        out, k = int(rng.integers(1, 65)), int(rng.choice([1, 3, 5]))
        layers += [Conv2d(np.zeros((out, channels, k, k)), padding=k // 2), ReLU()]
        channels = out
        if size >= 8 and rng.random() < 0.4:
            layers.append(MaxPool2d(2))
            size //= 2
    features = channels * size * size
    layers.append(Flatten())
    for _ in range(int(rng.integers(1, 3))):
        out = int(rng.integers(2, 200))
        layers.append(Linear(np.zeros((out, features))))
        features = out
    return from_network(Network(layers), side, "random")


def check_invariants(chain, mapping, units_budget):
    covered = {}
    order = []
    for node in mapping.nodes:
        for s in node.segments:
            layer = chain.layers[s.index]
            order.append((s.index, s.lo))
            # ICP: input channels; OCP: output channels; each exactly once over the nodes
            covered.setdefault((s.index, s.mode), []).append((s.lo, s.hi))
            # (P, Q) and MAC units, DSPs a multiple of K²
            assert s.mac_units == s.modules * s.p * s.q * s.k ** 2
            assert s.dsp % s.k ** 2 == 0 and s.dsp == s.mac_units * mapping.model.dsp_per_mac
            assert 1 <= s.p <= s.n_out and 1 <= s.q <= s.n_in
            assert s.cycles == s.pixels * -(-s.n_out // s.p) * -(-s.n_in // s.q)
            assert s.cycles <= mapping.period
            width = s.hi - s.lo
            macs = (layer.oc * width if s.mode == "ICP" else width * layer.ic) \
                * layer.w_out ** 2 * layer.k ** 2
            assert s.work == s.modules * macs
        assert node.mac_units <= units_budget
    for (index, mode), ranges in covered.items():
        layer = chain.layers[index]
        total = layer.ic if mode == "ICP" else layer.oc
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert len({index for index, _ in covered}) == len(chain.layers)     # every layer
    assert order == sorted(order)                                        # chain order
    assert sum(s.work for n in mapping.nodes for s in n.segments) == chain.work


@pytest.mark.parametrize("seed", range(12))
def test_invariants_on_random_networks(seed):
    rng = np.random.default_rng(seed)
    chain = random_cnn(rng)
    fpgas = int(rng.integers(1, 6))
    board = small_board(int(rng.choice([4, 40, 1470])))
    precision = str(rng.choice(["fixed16", "fp32"]))
    # fp32: the VC709's variant, LUT multipliers and DSP adders, 6 DSP + 696 LUT a MAC
    budget = int(0.85 * 3600) // 1 if precision == "fixed16" else int(0.7 * 433_200) // 696
    try:
        mapping = map_network(chain, fpgas, board, precision=precision, link_gbps=150)
    except UsageError as error:
        # refused: names the node and the resource, the need and the budget
        assert any(s in str(error) for s in ("BRAM36", "MAC units", "channel units")), error
        assert "node" in str(error) or "--fpgas" in str(error)
        mapping = map_network(chain, fpgas, board, precision=precision, link_gbps=150,
                              check_storage=False) if "BRAM36" in str(error) else None
        if mapping is None:
            return
        assert mapping.infeasible
    else:
        assert all(node.bram36 <= board.capacity.bram36 for node in mapping.nodes)
    check_invariants(chain, mapping, budget)
    assert len(mapping.boundaries) == fpgas - 1
    # the period is the slowest of compute, links (150 Gb/s) and DDR
    assert mapping.period == max(mapping.compute_period, mapping.link_period,
                                 mapping.ddr_period)


def _two_layers():
    """conv 3 -> 16 (16 x 16, k3 p1), pool 2, conv 16 -> 32 (8 x 8, k3 p1), Linear."""
    z = np.zeros
    network = Network([Conv2d(z((16, 3, 3, 3)), padding=1), ReLU(), MaxPool2d(2),
                       Conv2d(z((32, 16, 3, 3)), padding=1), ReLU(), Flatten(),
                       Linear(z((10, 32 * 8 * 8)))])
    return from_network(network, 16, "two")


def test_boundary_traffic_by_hand():
    """Spec §2.10. Between the convolutions: the pooled 16 x 8 x 8 = 1024 words each way.
    Inside the second (ICP, 4 of 16 input channels upstream): forward (1 - 4/16) · 1024
    (inputs bypassed) + 32 · 64 (partial sums) = 2816; backward 2048 (δ) + 768 (errors)."""
    chain = _two_layers()
    line = UnitLine.of(chain)
    first = line.first[1]
    (fwd, bwd, where), = boundary_words(chain, line, [first])
    assert (fwd, bwd) == (1024, 1024) and where == "between layers[0] and layers[3]"
    (fwd, bwd, where), = boundary_words(chain, line, [first + 4])
    assert (fwd, bwd) == (2816, 2816) and "4 of 16 channels upstream" in where
    # inside the first layer (OCP, 3 input channels; 4 of 16 outputs upstream): forward the
    # image 3 · 256 = 768 plus 4 · 256 output words; backward only the 4 · 256 δ (no EB on
    # the first layer: the image needs no error)
    (fwd, bwd, _), = boundary_words(chain, line, [4])
    assert (fwd, bwd) == (768 + 1024, 1024)


def test_gbps_at_the_period():
    chain = _two_layers()
    m = map_network(chain, 2, VC709)
    (fwd, bwd), = m.boundary_gbps()
    words, _, _ = m.boundaries[0]
    assert fwd == pytest.approx(words * 16 * 200e6 / m.period / 1e9)
    assert m.as_json()["boundaries"][0]["forward_bits_per_sample"] == words * 16
    # the paper's setting: 1 DSP per MAC with fp32 words: the same period, twice the bits
    wide = map_network(chain, 2, VC709, word_bits=32)
    assert wide.compute_period == m.compute_period
    assert wide.as_json()["boundaries"][0]["forward_bits_per_sample"] == \
        wide.boundaries[0][0] * 32
    with pytest.raises(UsageError, match="word_bits must be 16 or 32, not 8"):
        map_network(chain, 2, VC709, word_bits=8)


def test_parameter_balancing_moves_banks_upstream():
    """A late node that cannot hold its weights hosts banks on upstream nodes (spec §2.6):
    storage then fits, hosts are upstream, and DP5/DP6 add the hosted words to every
    boundary between host and consumer."""
    z = np.zeros
    network = Network([Conv2d(z((16, 3, 3, 3)), padding=1), ReLU(), MaxPool2d(2),
                       Conv2d(z((64, 16, 3, 3)), padding=1), ReLU(), MaxPool2d(2),
                       Conv2d(z((256, 64, 3, 3)), padding=1), ReLU(), MaxPool2d(2),
                       Conv2d(z((256, 256, 3, 3)), padding=1), ReLU(), Flatten(),
                       Linear(z((10, 256 * 4 * 4)))])
    chain = from_network(network, 32, "deep")
    board = small_board(220)       # 220 x 2048 = 450,560 words of 16 bits per node
    plain = map_network(chain, 4, board, balance=False, check_storage=False, fc_batch=1)
    assert plain.infeasible
    balanced = map_network(chain, 4, board, fc_batch=1)
    assert not balanced.infeasible
    hosted = [h for node in balanced.nodes for h in node.hosted]
    assert hosted and all(h.host < h.consumer for h in hosted)
    for b, ((fwd, bwd, _), (fwd0, bwd0, _)) in enumerate(zip(balanced.boundaries,
                                                           plain.boundaries)):
        extra = sum(h.words for h in hosted if h.host <= b + 1 < h.consumer)
        assert (fwd - fwd0, bwd - bwd0) == (extra, extra)
    # the node configurations come back from mapping.json
    import json
    from nnrtl.gen.fpdeep import NodePlan
    found = json.loads(json.dumps(balanced.as_json()))
    assert tuple(NodePlan.from_json(n) for n in found["nodes"]) == balanced.nodes
    # eq. 12's S (largest node storage) came down below the budget
    assert max(n.storage_words for n in balanced.nodes) <= 220 * 2048 \
        < max(n.storage_words for n in plain.nodes)
    check_invariants(chain, balanced, 3060)


def test_refusals_name_node_and_resource():
    chain = _two_layers()
    with pytest.raises(UsageError, match=r"^node 1: storage needs [\d,]+ words of 16 bits = "
                                         r"\d+ BRAM36, but tiny has 1 BRAM36"):
        map_network(chain, 1, small_board(1), fc_batch=1)
    # fp32 pinned to LUT shifts: 2 DSP + 890 LUT per MAC; 0.7 of 433,200 LUT allow 340 MAC
    # units; AlexNet on one node needs one tile per module: conv1 2 x 11², conv2 3 x 5²,
    # conv3-5 3 x 3 x 3², fc6-8 3 x 3 x 1 = 407 MAC units, 814 DSP, 362,230 LUT
    from nnrtl.gen.fpdeep import alexnet
    with pytest.raises(UsageError, match=r"node 1 \(conv1, conv2, conv3, conv4, conv5, fc6, fc7, "
                                         r"fc8\): one K x K tile per module needs 407 MAC units "
                                         r"= 814 DSP and 362,230 LUT, but vc709 allows 340 MAC "
                                         r"units \(lut-limited"):
        map_network(alexnet(), 1, VC709, precision="fp32", check_storage=False,
                    multiplier_shifts="lut", adder_shifts="lut")
    for kwargs, message in (({"adder_shifts": "dsp48"}, "^adder_shifts must be lut or dsp, "
                                                        "not 'dsp48'$"),
                            ({"multiplier_shifts": "dsp"}, "^multiplier_shifts and "
                                                           "adder_shifts are fp32's, not "
                                                           "fixed16's$")):
        with pytest.raises(UsageError, match=message):
            map_network(chain, 2, VC709, **kwargs)
    for kwargs, message in (({"precision": "fp64"}, "--precision must be one of fixed16, fp32"),
                            ({"link_gbps": 0}, "--link-gbps must be a positive number"),
                            ({"convention": "ring"}, "link convention must be one of link, "
                                                     "fpga")):
        with pytest.raises(UsageError, match=message):
            map_network(chain, 2, VC709, **kwargs)
    with pytest.raises(UsageError, match="--fpgas must be an integer of at least 1, not 0"):
        map_network(chain, 0, VC709)


def test_link_conventions():
    """Convention "fpga" budgets what one FPGA sends over both links: a middle node sends
    forward and backward, so it needs at least the busiest single link."""
    from nnrtl.gen.fpdeep import vgg16
    a = map_network(vgg16(), 60, VC709, link_gbps=150, check_storage=False)
    b = map_network(vgg16(), 60, VC709, link_gbps=150, convention="fpga",
                    check_storage=False)
    assert b.link_period >= a.link_period > 0


def test_fp32_variant_is_the_boards_fastest():
    """Unpinned, fp32 takes the variant with the most MAC units: the VC709 LUT multipliers
    and DSP adders (0.7 · 433,200 / 696 = 435 by its LUTs, 2,610 of 3,600 DSP), the ZC706
    DSP multipliers and LUT adders (0.7 · 218,600 / 820 = 186); a pinned shift keeps the
    best variant with it."""
    from nnrtl.gen.fpdeep import alexnet
    mapping = map_network(alexnet(), 15, VC709, precision="fp32", check_storage=False)
    assert (mapping.model.multiplier_shifts, mapping.model.adder_shifts) == ("lut", "dsp")
    assert (mapping.unit_budget, mapping.budget_resource) == (435, "lut")
    assert mapping.model.dsp_per_mac == 6 and mapping.model.lut_per_mac == 696
    zc706 = get_board("zc706").capacity
    model = fp32_model_for(zc706)
    assert (model.multiplier_shifts, model.adder_shifts) == ("dsp", "lut")
    assert unit_budget(model, zc706) == (186, "lut")
    pinned = map_network(alexnet(), 15, VC709, precision="fp32", check_storage=False,
                         multiplier_shifts="dsp")
    assert (pinned.model.multiplier_shifts, pinned.model.adder_shifts) == ("dsp", "dsp")
    assert (pinned.unit_budget, pinned.budget_resource) == (382, "dsp")


def test_cuts_move_when_tiles_do_not_fit():
    """fp32 with LUT shifts on the VC709 allows 340 MAC units a node: AlexNet's conv1 and
    conv2 take 2 x 11² + 3 x 5² = 317 of them, so conv3 (3 x 3 x 3² = 81 more) cannot share
    their node, whatever the work balance says: node 1 holds conv1 and conv2."""
    from nnrtl.gen.fpdeep import alexnet
    mapping = map_network(alexnet(), 2, VC709, precision="fp32", check_storage=False,
                          multiplier_shifts="lut", adder_shifts="lut")
    assert [s.layer for s in mapping.nodes[0].segments] == ["conv1", "conv2"]
    assert mapping.nodes[0].mac_units == 317 <= mapping.unit_budget == 340
    check_invariants(alexnet(), mapping, 340)


def test_node_configuration_checks():
    from nnrtl.gen.fpdeep import SegmentConfig
    good = dict(layer="conv", index=0, kind="conv", mode="ICP", lo=0, hi=4, n_in=4, n_out=8,
                k=3, pixels=16, p=2, q=2, modules=3, mac_units=108, dsp=108, lut=0,
                cycles=16 * 4 * 2, work=3 * 16 * 8 * 4 * 9, completes=True, residency=2.0)
    SegmentConfig(**good)
    with pytest.raises(ValueError, match=r"^mac_units \(100\) must be modules x P x Q x K\^2 "
                                         r"= 108$"):
        SegmentConfig(**dict(good, mac_units=100))
    with pytest.raises(ValueError, match=r"^cycles \(1\) must be pixels x ceil\(n_out / P\) x "
                                         r"ceil\(n_in / Q\) = 128$"):
        SegmentConfig(**dict(good, cycles=1))
    with pytest.raises(ValueError, match=r"^channel range \[0, 3\) must be non-empty and hold "
                                         r"the segment's 4 ICP channels$"):
        SegmentConfig(**dict(good, hi=3))

"""The FPDeep cluster simulator (gen/fpdeep/cluster*.py): its steady-state period against
the mapping's segments and links, latency independence with Act-RAMs sized per spec §2.9,
no deadlock on random chains, the mapper's link traffic, rank-count independence (in
process and under mpiexec with 2 ranks), the PAB held to the mapping's depth, the
Act-RAMs holding the FC passes, the checks that fail a run, bad input."""

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from nnrtl.boards import get_board
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep import Chain, ChainLayer, builtin, map_network
from nnrtl.gen.fpdeep.cluster import (ClusterConfig, config_from_params, failures,
                                      load_plan, run_cluster, simulate)
from nnrtl.gen.fpdeep.cluster_node import ClusterPlan, NodeTiming
from nnrtl.hw.fpdeep.link_config import BACKWARD, FORWARD

VC709 = get_board("vc709")


def plan_of(mapping):
    return ClusterPlan(json.loads(json.dumps(mapping.as_json(), default=str)))


@pytest.fixture(scope="module")
def vgg():
    """VGG-16 on 32 x 32 images over 4 VC709s, links unlimited (compute-bound)."""
    return map_network(builtin("vgg16", 32), 4, VC709, link_gbps=None, check_storage=False)


def slowest_module(mapping):
    """The most cycles any module spends on a sample: a convolution's ``pixels ·
    ⌈n_out/P⌉ · ⌈n_in/Q⌉``; an FC layer's at least the DDR period of its weights."""
    worst = 0
    for node in mapping.nodes:
        for s in node.segments:
            cycles = s.pixels * math.ceil(s.n_out / s.p) * math.ceil(s.n_in / s.q)
            worst = max(worst, max(cycles, mapping.ddr_period) if s.kind == "fc" else cycles)
    return worst


def refilled(mapping):
    """The slowest segment with its FP line buffer's refill (hw/fpdeep/line_buffer.py): an
    image's first pixel is taken once the previous image's windows have all left, one
    pixel a cycle, the first window the cycle after its last pixel, ``(K − 1 − pad)``
    rows and pixels in: ``cycles + (K − 1 − pad) · (w_in + 1) + 1``."""
    worst = slowest_module(mapping)
    for node in mapping.nodes:
        for s in node.segments:
            if s.kind == "conv":
                worst = max(worst, s.cycles + (s.k - 1 - s.pad) * (s.w_in + 1) + 1)
    return worst


def test_compute_bound_period_is_the_mappers_plus_refill(vgg):
    result = simulate(plan_of(vgg), ClusterConfig(images=6))
    assert vgg.bound == "compute"
    assert slowest_module(vgg) == vgg.period
    period = refilled(vgg)
    # VGG-16 conv2_1 on 16 x 16 (86,528 cycles): 18 cycles of refill, 0.02%
    assert period - vgg.period == 18
    assert result["period_cycles"] == period
    assert result["images_per_second"] == pytest.approx(vgg.model.clock_hz / period)
    assert result["idle_share"] == pytest.approx(1 - (1 - vgg.idle) * vgg.period / period)
    assert result["act_ram_within_depth"]
    # the done times: one sample per period from the third on
    assert np.diff(result["done_cycles"])[2:] == pytest.approx(period)


def test_link_bound_period_is_the_links():
    mapping = map_network(builtin("vgg16", 32), 4, VC709, link_gbps=1.0, check_storage=False)
    assert mapping.bound == "link"
    # fixed16 on one 64-bit lane (1 Gb/s), the RTL link's framing: an activation, δ or
    # error word 16.5 bits, a 48-bit partial or gradient word 48.5 (1/32 headers)
    width = {"partial": 48.5, "grad": 48.5}
    bits = max(sum(w * width.get(p, 16.5) for p, w in b.paths.items() if p in side)
               for b in mapping.boundaries for side in (FORWARD, BACKWARD))
    link_cycles = bits / 1e9 * mapping.model.clock_hz
    result = simulate(plan_of(mapping), ClusterConfig(images=6, act_ram_samples=0))
    assert result["period_cycles"] == pytest.approx(link_cycles, rel=1e-9)
    assert math.ceil(result["period_cycles"]) == mapping.link_period == mapping.period
    # the payload: below the link's 1 Gb/s by the framing's share
    assert 0.3 < result["max_link_gbps"] < 1.0


@pytest.mark.parametrize("network, size, fpgas, most", [
    ("vgg16", 32, 4, 2), ("vgg16", 32, 14, 3), ("alexnet", 67, 16, 7)])
def test_link_traffic_is_the_mappers(network, size, fpgas, most):
    """Per boundary and direction the words the mapper counts (spec §2.10), layers cut over
    up to 4 nodes, ICP and OCP (AlexNet's conv1), a boundary inside the first layer
    included (no errors of the image: it has no EB)."""
    mapping = map_network(builtin(network, size), fpgas, VC709, check_storage=False)
    result = simulate(plan_of(mapping), ClusterConfig(images=2))
    bits = mapping.model.word_bits
    spans = {}
    for node in mapping.nodes:
        for s in node.segments:
            spans[s.layer] = spans.get(s.layer, 0) + 1
    assert max(spans.values()) == most          # a layer on `most` nodes
    for (fwd, bwd, where), link in zip(mapping.boundaries, result["links"]):
        assert link["forward_bits_per_sample"] == pytest.approx(fwd * bits), where
        assert link["backward_bits_per_sample"] == pytest.approx(bwd * bits), where


def test_throughput_unchanged_across_link_latency(vgg):
    """Act-RAMs sized per spec §2.9 (``R = D/T``, ``D`` the unloaded round trip at that
    latency, plus one sample): the period stays the mapper's (with the line buffer's
    refill) at every latency."""
    plan = plan_of(vgg)
    fills = []
    for latency in (0, 2_000, 50_000):
        alone = simulate(plan, ClusterConfig(images=1, link_latency=latency))
        fills.append(alone["fill_latency_cycles"])
        samples = math.ceil(fills[-1] / vgg.period) + 1
        result = simulate(plan, ClusterConfig(images=6, link_latency=latency,
                                              act_ram_samples=samples))
        assert result["period_cycles"] == refilled(vgg), latency
        assert result["act_ram_within_depth"]
    # the latency shows in the fill: 2 (nodes - 1) crossings each way... at least the hops
    assert fills[2] - fills[0] >= 2 * (len(vgg.nodes) - 1) * 50_000


def test_too_small_act_ram_slows_the_chain_not_deadlocks(vgg):
    plan = plan_of(vgg)
    result = simulate(plan, ClusterConfig(images=6, act_ram_samples=1))
    assert result["period_cycles"] > vgg.period
    assert result["act_ram_within_depth"]


def random_chain(rng):
    layers, side, channels = [], int(rng.integers(8, 20)), int(rng.integers(1, 5))
    for index in range(int(rng.integers(1, 4))):
        k = int(rng.choice([1, 3, 5]))
        k = min(k, side)
        oc = int(rng.integers(2, 24))
        pad = k // 2
        out = side + 2 * pad - k + 1
        pool = (2, 2, 0) if out >= 4 and rng.random() < 0.5 else None
        layers.append(ChainLayer(name=f"conv{index}", kind="conv", ic=channels, oc=oc, k=k,
                                 stride=1, pad=pad, w_in=side, w_out=out, pool=pool, relu=True,
                                 first=index == 0))
        side = out if pool is None else (out - 2) // 2 + 1
        channels = oc
    if rng.random() < 0.7:
        layers.append(ChainLayer(name="fc", kind="fc", ic=channels * side * side,
                                 oc=int(rng.integers(2, 12))))
    return Chain("random", tuple(layers))


def test_no_deadlock_on_random_chains():
    rng = np.random.default_rng(14)
    checked = 0
    for _ in range(20):
        chain = random_chain(rng)
        fpgas = int(rng.integers(1, 8))
        try:
            mapping = map_network(chain, fpgas, VC709, link_gbps=float(rng.choice([1, 50])),
                                  check_storage=False)
        except UsageError:
            continue              # more nodes than channel units, etc.
        latency = int(rng.integers(0, 500))
        result = simulate(plan_of(mapping), ClusterConfig(images=5, link_latency=latency),
                          ranks=int(rng.integers(1, fpgas + 1)))
        done = np.array(result["done_cycles"])
        assert np.all(np.isfinite(done)) and np.all(np.diff(done) > 0)
        assert result["period_cycles"] >= slowest_module(mapping) - 1e-6
        assert result["act_ram_within_depth"]
        checked += 1
    assert checked >= 12


def test_rank_count_does_not_change_the_result(vgg):
    plan = plan_of(vgg)
    config = ClusterConfig(images=5, link_gbps=20.0, minibatch=2)
    texts = {json.dumps(simulate(plan, config, ranks=r)) for r in (1, 2, 3, 4)}
    assert len(texts) == 1


def test_mpiexec_two_ranks_match_one(vgg, tmp_path):
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(vgg.as_json(), default=str))
    config = ClusterConfig(images=4, link_gbps=20.0)
    alone, _ = run_cluster(path, config, ranks=1)
    out = tmp_path / "cluster.json"
    done = subprocess.run(
        [sys.executable, "-m", "nnrtl.gen.fpdeep.cluster", "--mapping", str(path), "--ranks",
         "2", "--images", "4", "--param", "link_gbps=20", "-o", str(out)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == json.loads(json.dumps(alone))


def test_stale_weights_follow_the_admission(vgg):
    plan = plan_of(vgg)
    lockstep = simulate(plan, ClusterConfig(images=6, minibatch=2, inflight=1))
    assert lockstep["max_stale_samples"] == 0
    free = simulate(plan, ClusterConfig(images=6, minibatch=2))
    assert 0 < free["max_stale_samples"] <= 2


def test_bad_input(vgg, tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        load_plan(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"engine": "sbe"}')
    with pytest.raises(UsageError, match="not a mapping written by 'nnrtl map'"):
        load_plan(tmp_path / "other.json")
    with pytest.raises(UsageError, match="--ranks 9: more ranks than the mapping's 4"):
        simulate(plan_of(vgg), ClusterConfig(images=2), ranks=9)
    with pytest.raises(UsageError, match="--images must be an integer of at least 1, not 0"):
        ClusterConfig(images=0)
    with pytest.raises(UsageError, match="--param link_latency must be a non-negative "
                                         "integer, not 'x'"):
        config_from_params(2, ["link_latency=x"])
    with pytest.raises(UsageError, match="options are link_gbps="):
        config_from_params(2, ["speed=3"])
    with pytest.raises(UsageError, match="timing add_latency must be a non-negative"):
        NodeTiming(add_latency=-1)
    with pytest.raises(UsageError, match=r"node 1, conv1_1: an Act-RAM of .* \(deadlock\)"):
        simulate(plan_of(vgg), ClusterConfig(images=2, act_ram_samples=0.5))


def test_module_command_line_exit_codes(vgg, tmp_path, capsys):
    from nnrtl.gen.fpdeep.cluster import main
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(vgg.as_json(), default=str))
    assert main(["--mapping", str(path), "--images", "3", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["fpgas"] == 4 and found["images"] == 3
    assert main(["--mapping", str(path), "--param", "inflight=0"]) == 2
    assert "--inflight must be an integer of at least 1, not 0" in capsys.readouterr().err


@pytest.fixture(scope="module")
def alexnet15():
    """AlexNet on 15 VC709s, 4 samples per FC weight pass: downstream nodes of conv2 and
    conv3 whose FP is faster than the partials that reach them."""
    return map_network(builtin("alexnet", 224), 15, VC709, fc_batch=4, link_gbps=150.0)


def test_pab_stalls_fp_at_the_mappings_depth(alexnet15):
    result = simulate(plan_of(alexnet15), ClusterConfig(images=6))
    rows = result["nodes"]
    assert all(r["pab_peak_words"] <= r["pab_depth_words"] for r in rows)
    # a node running ahead of its upstream fills its PAB (one output row) and waits there
    assert any(r["pab_peak_words"] == r["pab_depth_words"] for r in rows)
    assert result["pab_within_depth"] and result["act_ram_within_depth"]
    assert result["period_cycles"] == pytest.approx(alexnet15.period)
    assert result["period_tolerance"] == 0.10 and failures(result) == []


def test_act_ram_holds_the_fc_passes():
    """VGG-16 on 100 VC709s, one sample per FC weight pass: DDR-bound, each FC module a
    period a sample; the Act-RAM residencies hold the three FC layers' forward and
    backward passes, so the chain runs at the mapping's period (storage unchecked: it does
    not fit the boards)."""
    mapping = map_network(builtin("vgg16", 224), 100, VC709, fc_batch=1, link_gbps=150.0,
                          check_storage=False)
    assert mapping.bound == "ddr" and mapping.infeasible
    result = simulate(plan_of(mapping), ClusterConfig(images=6))
    assert result["act_ram_within_depth"] and result["pab_within_depth"]
    assert result["period_cycles"] == pytest.approx(mapping.period, rel=1e-3)


def test_failures_name_the_node_buffer_and_period(vgg):
    result = simulate(plan_of(vgg), ClusterConfig(images=4))
    assert failures(result) == []
    broken = json.loads(json.dumps(result))
    broken["nodes"][1]["act_ram_peak_words"] = broken["nodes"][1]["act_ram_depth_words"] + 1
    broken["mapper_period_cycles"] = round(result["period_cycles"] / 1.2)
    found = failures(broken)
    assert len(found) == 2
    assert re.match(r"^node 2: Act-RAM peak [\d,]+ words exceeds its depth [\d,]+$", found[0])
    assert re.match(r"^simulated period [\d,.]+ cycles differs from the mapping's [\d,]+ by "
                    r"\+20\.0%, beyond the 10% tolerance$", found[1])
    # a run that overrides the mapping's links is not held to its period
    other = simulate(plan_of(vgg), ClusterConfig(images=4, link_gbps=1.0))
    assert other["period_tolerance"] is None
    assert other["period_cycles"] > 1.1 * vgg.period and failures(other) == []

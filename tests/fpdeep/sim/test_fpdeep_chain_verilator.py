# amaranth: UnusedElaboratable=no
"""The FPDeep training chain under Verilator (nnrtl.sim.tb.fpdeep.chain_verilator): the
Amaranth bench's chain (three node tops joined by link modules, an OCP-split 3×3 conv
layer, 3 → 7 channels over 4×4 maps, 2×2 pool) built by Verilator and trained with the
Amaranth bench's stimulus; every activation beat the host receives is checked bit-exactly
against the nodes' golden models, and the run must take exactly the Amaranth simulator's
cycles, link words and received beats for the same case.

Fast: fixed16, batch 2 with two images in flight (the stale-weight rule), ``random``
pauses on every link channel and host stream (16 s CPU with a warm build cache; the
build, once, 2.5 to 4 min). Slow: the 16 cases (fixed16/fp32 × batch 1/2 × the four
patterns), each against the Amaranth simulator, with both wall times printed (the fp32
builds take hours, see ``FP32``); a budget too small is reported as ``timed_out``, not
raised."""

import re
import time

import pytest

from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.tb.fpdeep import chain_train as amaranth
from nnrtl.sim.tb.fpdeep.chain_train import small_chain as chain
from nnrtl.sim.tb.fpdeep.chain_verilator import (ChainHost, ChainVerilogTop, chain_runner,
                                                 check, run, run_cases)

#: A Verilator build of the chain takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(1800)


def both(precision, batch, pattern, **shape):
    """The case of the Amaranth bench's test on both simulators: (Verilator's report,
    Amaranth's report, their wall seconds); ``shape`` goes to ``small_chain``."""
    config = chain(shape.pop("outs", (2, 2, 3)), precision=precision, batch=batch,
                   lag=batch, **shape)
    start = time.monotonic()
    verilated = run(config, 2 * batch, pattern, seed=batch)
    middle = time.monotonic()
    reference = amaranth.run(config, 2 * batch, pattern, seed=batch)
    seconds = (middle - start, time.monotonic() - middle)
    assert verilated["bit_exact"], verilated
    assert reference["bit_exact"], reference
    for key in ("cycles", "link_words", "received"):
        assert verilated[key] == reference[key], (key, verilated[key], reference[key])
    assert len(verilated["received"]) == 2 * batch
    assert all(len(r) == config.host_beats for r in verilated["received"])
    assert all(w["forward"] > 0 and w["backward"] > 0 for w in verilated["link_words"])
    return verilated, reference, seconds


def test_chain_trains_under_verilator():
    verilated, _, _ = both("fixed16", 2, "random")
    assert verilated["cycles"] < verilated["budget"] / 2


#: The fp32 chain (2.1 MB of Verilog, 87 modules, its units shared) builds in about 7 min
#: on the loaded 2-core machine (391 s measured); the timeout leaves room for a slower one.
FP32 = pytest.param("fp32", marks=pytest.mark.timeout(4 * 3600))


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fixed16", FP32])
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_chain_trains_every_case(precision, batch, pattern):
    verilated, _, (v_wall, a_wall) = both(precision, batch, pattern)
    print(f"{precision} B={batch} {pattern}: {verilated['cycles']} cycles; wall Verilator "
          f"{v_wall:.1f} s (build {verilated['build_seconds']:.1f} s, cached "
          f"{verilated['build_cached']}, run {verilated['run_seconds']:.1f} s), Amaranth "
          f"{a_wall:.1f} s")


@pytest.mark.slow
def test_budget_overrun_is_reported():
    config = chain((2, 2, 3), precision="fixed16", batch=2, lag=2)
    cases = amaranth.chain_case(config, 4, 2)
    report = run_cases(config, cases, "none", seed=2, budget=100)
    assert not report["bit_exact"] and report["cycles"] == 100
    beats = config.host_beats
    assert re.fullmatch(rf"\d+ of {4 * beats} activation beats, \d of 4 images and \d of 4 "
                        rf"error blocks sent(, node \d act_out \d+ of \d+ beats)* in 100 cycles",
                        report["timed_out"]), report
    assert report["mismatches"][-1] == f"image 3: 0 of {beats} beats", report["mismatches"]


def test_check_names_node_image_and_beat():
    config = chain((2, 2, 3), precision="fixed16", batch=1, lag=1)
    want = amaranth.expected_out(config, amaranth.chain_case(config, 2, 1))
    got = sum(want, [])
    assert check(config, got, want) == []
    beat = config.upstream_beats(2)          # node 3's first beat of image 1
    got[config.host_beats + beat] ^= 1
    assert check(config, got, want) == [
        f"image 1: beat {beat} (node 3) is {got[config.host_beats + beat]:#x}, "
        f"expected {want[1][beat]:#x}"]
    assert check(config, got[:config.host_beats], want) == [
        f"image 1: 0 of {config.host_beats} beats"]


def test_host_follows_the_amaranth_bench_order():
    """Without a simulator: the loads first, then ``lag`` images, an image's errors only
    once its activations are all back, then the next image."""
    host = ChainHost({"acts": [[1, 2], [3, 4]], "errs": [[5], [6]], "loads": [[7], [8, 9]],
                      "lag": 1, "per_image": 2, "boundaries": 1, "pattern": "none",
                      "seed": 0})

    def cycle(out_valid=0):
        values = host.drive()
        host.sample([out_valid, 0xAB, 1, 1, 0, 1, 1, 1, 0])
        return {k[:-7]: values.get(k[:-7] + "__payload") for k, v in values.items()
                if k.endswith("__valid") and v}

    assert cycle() == {"load0": 7, "load1": 8} and cycle() == {"load1": 9}
    assert cycle() == {"host_act": 1} and cycle() == {"host_act": 2}
    assert cycle(1) == cycle(1) == {}          # image 1 waits for image 0's errors
    assert cycle() == {"host_err": 5}
    assert cycle() == {"host_act": 3} and cycle() == {"host_act": 4}
    assert cycle(1) == cycle(1) == {} and not host.done
    assert cycle() == {"host_err": 6} and host.done and cycle() == {}
    assert host.got == [0xAB] * 4 and host.link_words == [{"forward": 13, "backward": 0}]


def test_bad_parameters():
    with pytest.raises(TypeError, match=r"^config must be a ChainConfig, not 3$"):
        ChainVerilogTop(3)
    with pytest.raises(ValueError, match=r"^simulator must be one of amaranth, verilator, "
                                         r"not 'iverilog'$"):
        chain_runner("iverilog")
    assert chain_runner("amaranth") is amaranth.run_cases
    assert chain_runner("verilator") is run_cases


@pytest.mark.slow
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("pattern", ["cycle", "bursty"])
def test_layer_pipeline_under_verilator(shared, pattern):
    """Two conv layers (conv1 OCP-split over the first nodes, conv2 on a node of its own or
    as the last node's second segment): EB's δ relayed upstream on the links."""
    outs = (2, 2) if shared else (2, 2, 3)
    verilated, _, (v_wall, a_wall) = both("fixed16", 2, pattern, outs=outs, next_out=3,
                                          shared=shared)
    print(f"layer pipeline shared={shared} {pattern}: {verilated['cycles']} cycles; wall "
          f"Verilator {v_wall:.1f} s, Amaranth {a_wall:.1f} s")

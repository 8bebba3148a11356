# amaranth: UnusedElaboratable=no
"""The FPDeep neighbour link (nnrtl.hw.fpdeep.link) in the Amaranth simulator: two modules back
to back carrying random traffic on the six paths under every backpressure pattern on the
physical links and on the consumers, delivery per path exact and in order; credits (a stuck
consumer holds only its own path); the words on the wire equal to the golden flits; slots side
by side; the component's parameter check."""

import dataclasses
import random

import pytest
from amaranth.lib import wiring

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.link import LinkModule
from nnrtl.hw.fpdeep.link_config import LinkConfig, lanes_for
from nnrtl.sim.golden.fpdeep.link import flits
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.tb.fpdeep.link import preloaded_flits, random_traffic, run

#: fixed16, P = 2: 32-bit beats (one link word) and 96-bit partial / gradient beats (two).
MIXED = LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48, tx_depth=8,
                   rx_depth=8, max_beats=4)
#: P = 5: 2- and 4-word beats, receive FIFOs of 2 beats (credits bind), long packets.
TIGHT = LinkConfig(side="up", p=5, word_bits=16, partial_bits=48, grad_bits=40, tx_depth=2,
                   rx_depth=2, max_beats=8)
#: fp32, P = 3 on a 128-bit link: one 96-bit beat per word.
WIDE = LinkConfig(side="down", p=3, word_bits=32, partial_bits=32, grad_bits=32, link_bits=128,
                  tx_depth=3, rx_depth=5, max_beats=3)
#: Three 64-bit slots, a path each: 1- and 2-word beats side by side.
SLOTS3 = LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48, link_bits=192,
                    slots=3, tx_depth=4, rx_depth=4, max_beats=4)
#: Two 128-bit slots (act and param share slot 0 on the up side's partner).
SLOTS2 = LinkConfig(side="up", p=3, word_bits=32, partial_bits=32, grad_bits=32, link_bits=256,
                    slots=2, tx_depth=2, rx_depth=3, max_beats=5)


def _traffic(cfg, seed):
    rng = random.Random(seed)
    counts = {p: rng.randint(0, 24) for p in cfg.tx_paths + cfg.rx_paths}
    return random_traffic(cfg, counts, rng)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_pattern_delivers_every_path_in_order(pattern):
    report = run(MIXED, random_traffic(MIXED, 24, random.Random(1)), pattern, seed=2)
    assert report["bit_exact"], report
    assert report["words"]["down"] >= sum(24 * MIXED.words_per_beat(p) for p in
                                          MIXED.tx_paths)


@pytest.mark.parametrize("cfg,pattern,seed", [
    (TIGHT, "random", 3), (TIGHT, "bursty", 4), (WIDE, "cycle", 5), (WIDE, "random", 6),
    (SLOTS3, "random", 7), (SLOTS3, "bursty", 8), (SLOTS2, "cycle", 9), (SLOTS2, "random", 10)])
def test_other_shapes_and_tight_credits(cfg, pattern, seed):
    report = run(cfg, _traffic(cfg, seed), pattern, seed=seed)
    assert report["bit_exact"], report


def test_a_stuck_consumer_holds_only_its_own_path():
    traffic = random_traffic(MIXED, 20, random.Random(7))
    report = run(MIXED, traffic, "random", seed=8, stuck=("partial",))
    assert report["mismatches"] == [] and not report["fault"]
    assert list(report["timed_out"]) == ["partial"]
    # The receive FIFO (credits) and the transmit FIFO fill, the producer is held.
    want = f"0 of 20 beats received, {MIXED.rx_depth + MIXED.tx_depth} sent"
    assert report["timed_out"]["partial"] == want


@pytest.mark.parametrize("cfg", [
    MIXED, dataclasses.replace(TIGHT.partner(), tx_depth=8, rx_depth=8, max_beats=3),
    dataclasses.replace(SLOTS3, tx_depth=8, rx_depth=8),
    dataclasses.replace(SLOTS2.partner(), tx_depth=8, rx_depth=8)])
def test_wire_words_are_the_golden_flits(cfg):
    # Credits to spare (rx_depth >= beats): the golden case.
    rng = random.Random(11)
    traffic = {p: [rng.getrandbits(cfg.beat_bits(p)) for _ in range(n)]
               for p, n in zip(cfg.tx_paths, (7, 2, 5))}
    words, cycles = preloaded_flits(cfg, traffic)
    assert words == flits(cfg, traffic)
    # One word per cycle from the grant on: no idle cycle between packets.
    assert cycles == list(range(cycles[0], cycles[0] + len(words)))


def test_ports_follow_the_side():
    down = LinkModule(MIXED)
    members = dict(down.signature.members)
    assert {n for n in members if n.startswith(("tx_", "rx_"))} == {
        "tx_act", "tx_partial", "tx_param", "rx_delta", "rx_error", "rx_grad"}
    assert members["link_out"].signature.data_width == 64
    assert down.tx_partial.payload.shape().size == 96
    up = LinkModule(MIXED.partner())
    assert {n for n in dict(up.signature.members) if n.startswith("tx_")} == {
        "tx_delta", "tx_error", "tx_grad"}


def test_config_must_be_a_link_config():
    with pytest.raises(TypeError, match=r"^config must be a LinkConfig, not 3$"):
        LinkModule(3)


def test_module_is_a_component():
    assert isinstance(LinkModule(WIDE), wiring.Component)


def test_slots_run_side_by_side():
    """Three paths in three slots: the preloaded transfer takes the longest slot's words,
    not the sum (the paths no longer share one word per cycle)."""
    cfg = dataclasses.replace(SLOTS3, tx_depth=16, rx_depth=16)
    rng = random.Random(12)
    traffic = {p: [rng.getrandbits(cfg.beat_bits(p)) for _ in range(12)] for p in cfg.tx_paths}
    words, cycles = preloaded_flits(cfg, traffic)
    longest = max(cfg.transfer_words(p, 12) for p in cfg.tx_paths)
    assert len(words) == longest == cfg.transfer_words("partial", 12) == 3 + 24
    assert cycles[-1] - cycles[0] + 1 == longest


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERNS)
def test_paper_size_link(pattern):
    """The paper's node: fp32, P = 8, a 150 Gb/s link (12 lanes, 768 bits) in three
    256-bit slots (a beat per slot word, the three forward paths side by side), FIFOs of
    64 beats, packets of 32, 200 beats per path."""
    fp = FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=14, n_in=64, n_out=64, p=8)
    cfg = LinkConfig.from_fp(fp, "down", link_bits=64 * lanes_for(150), slots=3,
                             tx_depth=64, rx_depth=64, max_beats=32)
    report = run(cfg, random_traffic(cfg, 200, random.Random(21)), pattern, seed=22)
    assert report["bit_exact"], report


def test_a_mismatch_is_reported_not_raised():
    # A beat one bit wider than the path: the link carries its low bits, the bench reports.
    traffic = {p: [] for p in MIXED.tx_paths + MIXED.rx_paths}
    traffic["act"] = [1 << MIXED.beat_bits("act") | 5]
    report = run(MIXED, traffic, "none")
    assert not report["bit_exact"]
    assert report["mismatches"] == [f"act: beat 0 is 0x5, expected {traffic['act'][0]:#x}"]

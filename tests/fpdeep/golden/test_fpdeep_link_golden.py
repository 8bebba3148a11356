"""The golden flit model of the FPDeep neighbour link (nnrtl.sim.golden.fpdeep.link): the
header and credit flit fields, the round-robin packet order, beats split into link words, and
decoding as the inverse of the flits, with malformed flits refused."""

import random
import re

import pytest

from nnrtl.hw.fpdeep.link_config import LinkConfig
from nnrtl.sim.golden.fpdeep.link import (beat_words, credit_flit, decode, flits, header,
                                          packets)

CFG = LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48, max_beats=2)


def test_flit_fields():
    # kind in bits 0-2 (datapath number - 1), length above; credit: 7, path, count.
    assert header(CFG, "partial", 3) == 0b011_001
    assert header(CFG, "grad", 1) == 0b1_101
    assert credit_flit(CFG, "delta", 5) == 0b101_010_111


def test_round_robin_packets():
    traffic = {"act": [1, 2, 3, 4, 5], "partial": [6], "param": [7, 8, 9]}
    assert packets(CFG, traffic) == [("act", [1, 2]), ("partial", [6]), ("param", [7, 8]),
                                     ("act", [3, 4]), ("param", [9]), ("act", [5])]


def test_beat_words_low_word_first():
    beat = (0xAAAA_BBBB << 64) | 0x1111_2222_3333_4444
    assert beat_words(CFG, "partial", beat) == [0x1111_2222_3333_4444, 0xAAAA_BBBB]
    assert beat_words(CFG, "act", 0x1234_5678) == [0x1234_5678]


def test_flits_of_one_packet():
    assert flits(CFG, {"partial": [(5 << 64) | 7]}) == [(header(CFG, "partial", 1), 0),
                                                        (7, 0), (5, 1)]


def test_slots_side_by_side_with_idle_words():
    cfg = LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48, link_bits=192,
                     slots=3, max_beats=4)
    idle = 6
    words = flits(cfg, {"act": [1], "param": [2, 3]})
    assert words == [
        (header(cfg, "act", 1) | idle << 64 | header(cfg, "param", 2) << 128, 1),
        (1 | idle << 64 | 2 << 128, 1),
        (idle | idle << 64 | 3 << 128, 1)]


@pytest.mark.parametrize("seed", range(6))
def test_decode_inverts_flits(seed):
    rng = random.Random(seed)
    slots = rng.randint(1, 3)
    cfg = LinkConfig(side=rng.choice(("down", "up")), p=rng.randint(1, 6), word_bits=16,
                     partial_bits=48, grad_bits=rng.randint(20, 60),
                     link_bits=64 * slots * rng.randint(1, 2), max_beats=rng.randint(1, 9),
                     slots=slots)
    traffic = {p: [rng.getrandbits(cfg.beat_bits(p)) for _ in range(rng.randint(0, 30))]
               for p in cfg.tx_paths}
    beats, credits = decode(cfg.partner(), flits(cfg, traffic))
    assert beats == traffic and set(credits.values()) == {0}


def test_decode_counts_credits():
    # The up side returns credits of its receive paths, the down side's transmit paths.
    words = [(credit_flit(CFG, "act", 3), 1), (credit_flit(CFG, "param", 2), 1),
             (credit_flit(CFG, "act", 2), 1)]
    assert decode(CFG, words) == ({"delta": [], "error": [], "grad": []},
                                  {"act": 5, "partial": 0, "param": 2})


@pytest.mark.parametrize("words,message", [
    ([(6, 0)], "word 0: header kind 6 is not a path received here"),
    ([(header(CFG, "delta", 1), 0)], "word 0: header kind 2 is not a path received here"),
    ([(header(CFG, "partial", 2), 0), (1, 0), (2, 1)],
     "word 0: a 'partial' packet of 2 beats is malformed"),
    ([(header(CFG, "act", 1), 0), (1, 0)], "word 0: a 'act' packet of 1 beats is malformed"),
    ([(credit_flit(CFG, "delta", 1), 0)], "word 0: a credit flit for 'delta' (last=0)"),
    ([(credit_flit(CFG, "act", 1), 1)], "word 0: a credit flit for 'act' (last=1)"),
])
def test_decode_refuses_malformed_flits(words, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        decode(CFG.partner(), words)


def test_traffic_of_the_other_direction_is_refused():
    with pytest.raises(ValueError, match=r"^traffic paths \['delta'\] are not sent by a "
                                         r"'down' side \(act, partial, param\)$"):
        packets(CFG, {"delta": [1]})

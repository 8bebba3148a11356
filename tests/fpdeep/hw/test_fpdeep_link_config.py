"""The FPDeep link configuration (nnrtl.hw.fpdeep.link_config): derived from an FpConfig (P,
word, partial and gradient widths), Aurora lanes for the paper's link rates, slots, flit
sizes, and every refused parameter's message."""

import re

import pytest

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.link_config import LinkConfig, lanes_for


def test_slots_and_words():
    cfg = LinkConfig(side="down", p=8, word_bits=32, partial_bits=32, grad_bits=32, link_bits=768,
                     slots=3, max_beats=32)
    assert cfg.slot_bits == 256 and [cfg.slot(p) for p in cfg.tx_paths] == [0, 1, 2]
    assert cfg.words_per_beat("act") == 1 and cfg.transfer_words("act", 64) == 2 + 64
    assert cfg.efficiency("act") == pytest.approx(32 / 33)
    up = LinkConfig(side="up", p=3, word_bits=32, partial_bits=32, grad_bits=32, link_bits=256,
                    slots=2)
    assert [up.slot(p) for p in up.tx_paths] == [0, 1, 0]
    assert [up.slot(p) for p in up.rx_paths] == [0, 1, 0]
    assert up.partner().tx_paths == up.rx_paths


def test_config_from_fp_and_lanes():
    fp = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=8, n_in=4, n_out=6, p=3)
    cfg = LinkConfig.from_fp(fp, "down")
    # Gradients: PG's LGB words, 32 + ⌈log2(64 pixels)⌉ bits for one sample.
    assert (cfg.p, cfg.word_bits, cfg.partial_bits, cfg.grad_bits) == (3, 16, 48, 38)
    assert cfg.words_per_beat("act") == 1 and cfg.words_per_beat("partial") == 3
    assert cfg.transfer_words("partial", 33) == 3 + 99
    # The paper's links at 200 MHz: 150 Gb/s is 12 Aurora lanes, 250 Gb/s 20.
    assert (lanes_for(150), lanes_for(250)) == (12, 20)


@pytest.mark.parametrize("call,error,message", [
    (lambda: LinkConfig(side="left", p=2, word_bits=16, partial_bits=48, grad_bits=48), ValueError,
     "side must be one of 'down', 'up', not 'left'"),
    (lambda: LinkConfig(side="down", p=0, word_bits=16, partial_bits=48, grad_bits=48), ValueError,
     "p must be an integer of at least 1, not 0"),
    (lambda: LinkConfig(side="down", p="2", word_bits=16, partial_bits=48,
                        grad_bits=48), TypeError, "p must be an integer, not '2'"),
    (lambda: LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48,
                        rx_depth=-3), ValueError,
     "rx_depth must be an integer of at least 1, not -3"),
    (lambda: LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48,
                        link_bits=96), ValueError,
     "link_bits must be a positive multiple of 64 (Aurora lanes), not 96"),
    (lambda: LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48,
                        max_beats=1 << 62), ValueError,
     "a slot of 64 bits must hold a header of 66 bits"),
    (lambda: LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48,
                        link_bits=128, slots=3), ValueError,
     "slots must be 1, 2 or 3 and divide the link's 2 lanes, not 3"),
    (lambda: LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48,
                        link_bits=256, slots=4), ValueError,
     "slots must be 1, 2 or 3 and divide the link's 4 lanes, not 4"),
    (lambda: LinkConfig.from_fp(None, "down"), TypeError, "fp must be an FpConfig, not None"),
    (lambda: lanes_for(0), ValueError, "gbps must be a positive number, not 0"),
])
def test_errors(call, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call()



"""The cluster simulator's link (nnrtl.gen.fpdeep.cluster_link) with the RTL link's flit
accounting (LinkFraming): a saturated transfer of N beats takes the RTL link module's cycles
within 2%; without framing the link charges raw words as before."""

import numpy as np
import pytest

from nnrtl.gen.fpdeep.cluster_link import Link, LinkFraming
from nnrtl.hw.fpdeep.link_config import LinkConfig
from nnrtl.sim.tb.fpdeep.link import efficiency

#: fixed16, P = 2: 1-word activation beats, 2-word partial beats on a 64-bit link.
CFG = LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48, tx_depth=128,
                 rx_depth=128, max_beats=16)
#: The same paths in three 64-bit slots of a 192-bit link: a slot word per cycle.
SLOTS = LinkConfig(side="down", p=2, word_bits=16, partial_bits=48, grad_bits=48, link_bits=192,
                   slots=3, tx_depth=128, rx_depth=128, max_beats=16)


def _model_cycles(cfg, path, beats):
    # One link word per cycle, as the RTL link with its output always ready.
    link = Link(cfg.bits(path) / cfg.link_bits, 0, LinkFraming.from_config(cfg, path))
    (arrival,) = link.send([(np.zeros(1), beats * cfg.p)])
    return float(arrival[0]), link


@pytest.mark.parametrize("cfg,path,beats", [(CFG, "act", 96), (CFG, "partial", 70),
                                             (SLOTS, "partial", 80)])
def test_model_matches_rtl_cycles(cfg, path, beats):
    rtl = efficiency(cfg, beats, (path,))
    model, link = _model_cycles(cfg, path, beats)
    assert abs(model - rtl["link_cycles"]) <= 0.02 * rtl["link_cycles"], (model, rtl)
    assert link.stats.busy == pytest.approx(model)
    assert link.stats.words == beats * cfg.p


def test_framing_counts_headers_and_words_per_beat():
    framing = LinkFraming.from_config(CFG, "partial")
    assert (framing.link_bits, framing.p, framing.word_bits, framing.max_beats,
            framing.words_per_beat) == (64, 2, 48, 16, 2)
    # 32 beats: 64 payload words, 2 headers.
    assert framing.link_words(64) == pytest.approx(66)


def test_without_framing_raw_words():
    link = Link(0.5, 10)
    (arrival,) = link.send([(np.zeros(1), 40.0)])
    assert arrival[0] == 30.0

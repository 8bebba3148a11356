"""The cluster simulator's link (nnrtl.gen.fpdeep.cluster_link) with the RTL link's flit
accounting (LinkFraming): a saturated transfer of N beats takes the RTL link module's cycles
within 2%; without framing the link charges raw words as before."""

import numpy as np
import pytest

from nnrtl.gen.fpdeep.cluster_link import Link, LinkFraming
from nnrtl.hw.fpdeep.link_config import LinkConfig
from nnrtl.sim.tb.fpdeep_link import efficiency

#: fixed16, P = 2: 1-word activation beats, 2-word partial beats on a 64-bit link.
CFG = LinkConfig("down", 2, 16, 48, 48, tx_depth=128, rx_depth=128, max_beats=16)


def _model_cycles(cfg, path, beats):
    # One link word per cycle, as the RTL link with its output always ready.
    link = Link(cfg.bits(path) / cfg.link_bits, 0, LinkFraming.from_config(cfg, path))
    (arrival,) = link.send([(np.zeros(1), beats * cfg.p)])
    return float(arrival[0]), link


@pytest.mark.parametrize("path,beats", [("act", 96), ("partial", 70)])
def test_model_matches_rtl_cycles(path, beats):
    rtl = efficiency(CFG, path, beats)
    model, link = _model_cycles(CFG, path, beats)
    assert abs(model - rtl["link_cycles"]) <= 0.02 * rtl["link_cycles"], (model, rtl)
    assert link.stats.busy == pytest.approx(model)
    assert link.stats.words == beats * CFG.p


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

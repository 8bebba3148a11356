# amaranth: UnusedElaboratable=no
"""The cluster simulator against the RTL training chain (issue 14: "agrees with the RTL
chain within 2%"): nnrtl.sim.tb.fpdeep.chain_train's chain (3 node tops, an OCP split
2 | 2 | 3 of a 3×3 conv over 3 channels of 4×4 maps, 2×2 pool, P = 2) measured under the
``none`` pattern, nnrtl.gen.fpdeep.cluster_chain.predict_train predicting its ``cycles`` and
every boundary's ``link_words`` per direction within 2%."""

import numpy as np
import pytest

from nnrtl.gen.fpdeep.cluster_chain import (_sfu_backward, _segment, compare_train,
                                            predict_train, train_timing)
from nnrtl.gen.fpdeep.cluster_node import update_rows
from nnrtl.sim.tb.fpdeep.chain_train import chain_case, run, small_chain
from nnrtl.sim.tb.fpdeep.fp import stimulus


def _check(precision, batch):
    config = small_chain((2, 2, 3), precision=precision, batch=batch, lag=batch)
    report = run(config, 2 * batch, "none", seed=batch)
    assert report["bit_exact"], report
    figures = compare_train(config, report)
    for row in figures["table"]:
        print(precision, f"B={batch}", row)
    assert figures["within_2pct"], figures["table"]
    return report, figures


@pytest.mark.parametrize("batch", [1, 2])
def test_fixed16_chain_within_two_percent(batch):
    """B = 1 (lag 1, 2 images) and B = 2 (lag 2, 4 images, one image's FP on stale
    weights)."""
    report, figures = _check("fixed16", batch)
    # the figures the table checks are the bench's own
    assert figures["table"][0]["rtl"] == report["cycles"]
    assert [r["figure"] for r in figures["table"]] == [
        "cycles", "link1_forward", "link1_backward", "link2_forward", "link2_backward"]


@pytest.mark.slow
def test_fp32_chain_within_two_percent():
    _check("fp32", 1)


def test_update_rows_are_the_lpram_rows():
    """The update drains as many rows as the host loads into the LPRAM (the bench's load
    stream, a beat a row): 28 on a 2-channel node, 56 on the 3-channel one (G = 2)."""
    config = small_chain((2, 2, 3), batch=1, lag=1)
    cases = chain_case(config, 1, 0)
    for m in range(3):
        cfg = config.segment(m)
        rows = update_rows(_segment(cfg))
        assert rows == len(stimulus(cfg, cases[m])["load"]) == (28, 28, 56)[m]
        timing = train_timing(cfg)
        # fixed16: 3 cycles a row (update.row_cycles), 2 + 1 + 2 + 1 + 1 around them
        assert timing.update_cycles(_segment(cfg)) == 3 * rows + 7


def test_sfu_backward_schedule():
    """SfuBackward's documented pace: ``pool_out²·G + w_out²·G`` cycles an image (2×2
    pooled of a 4×4 map, G = 2: 8 + 32), errors taken a row at a time."""
    cfg = small_chain((2, 2, 3)).segment(2)
    takes, deltas = _sfu_backward(cfg, np.zeros(cfg.out_beats), 10)
    assert takes.tolist() == [10, 11, 12, 13, 30, 31, 32, 33]
    assert deltas.size == 32 and deltas[-1] == 10 + 8 + 32 - 1
    # PG's first window 2 cycles late (its line buffer refilling): every later beat slips
    ready = np.full(32, -1.0)
    ready[0] = 16
    takes, late = _sfu_backward(cfg, np.zeros(cfg.out_beats), 10, ready)
    assert takes.tolist() == [10, 11, 12, 13, 32, 33, 34, 35]
    assert (late - deltas).tolist() == [2] * 32


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"^config must be a ChainConfig, not 3$"):
        predict_train(3, 2)
    with pytest.raises(TypeError, match=r"^images must be a positive integer, not 0$"):
        predict_train(small_chain(), 0)

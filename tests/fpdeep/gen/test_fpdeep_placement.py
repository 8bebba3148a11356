"""Where Act-RAMs wait (gen/fpdeep/placement.py): the spill choice and the DDR cycles of a
node's traffic, by hand."""

import pytest

from nnrtl.gen.fpdeep.placement import (choose_spills, ddr_channels, ddr_cycles,
                                        staging_words, traffic_words)


def test_staging_and_traffic():
    assert staging_words(64, 224) == 2 * 64 * 224
    assert traffic_words(3, 224) == 2 * 3 * 224 * 224


@pytest.mark.parametrize("candidates, over, everything, expected", [
    ([(100, 10), (50, 1), (60, 2)], 0, False, []),               # nothing over
    ([(100, 10), (50, 1), (60, 2)], 55, False, [2]),             # least traffic covering 55
    ([(100, 10), (50, 1), (60, 2)], 200, False, [0, 1, 2]),      # all, still short
    ([(100, 10), (50, 1), (60, 2)], 105, False, [1, 2]),         # 50/1 first, then 60 covers
    ([(100, 10), (0, 1), (60, 2)], 0, True, [0, 2]),             # everything that saves
])
def test_choose_spills(candidates, over, everything, expected):
    assert choose_spills(candidates, over, everything) == expected


def test_ddr_cycles_by_hand():
    # VC709: 29.856 GB/s on two channels at 200 MHz: 149.28 bytes a cycle, 74.64 each
    assert ddr_channels("vc709") == (2, 4 << 30)
    assert ddr_cycles(149_000, 0, 29.856, 2, 200e6) == (999, 0)         # 998.1 up
    assert ddr_cycles(74_000, 74_000, 29.856, 2, 200e6) == (992, 992)   # 991.4 up, each
    # one channel: both share it
    assert ddr_cycles(74_000, 74_000, 29.856, 1, 200e6) == (992, 992)
    assert ddr_cycles(0, 148_000, 29.856, 1, 200e6) == (992, 992)

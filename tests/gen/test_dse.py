"""The exploration budget and objective every engine shares (:mod:`nnrtl.gen.dse`)."""

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.dse import Budget, check_objective, choose, tightest
from nnrtl.gen.engines import LUT_SHARE, ExploreRequest
from nnrtl.gen.errors import UsageError


def test_the_default_budget_is_generates_rule():
    capacity = get_board("vu9p").capacity
    assert Budget().limits(capacity) == {"dsp": capacity.dsp, "bram36": capacity.bram36,
                                         "uram": capacity.uram,
                                         "lut": int(LUT_SHARE * capacity.lut)}
    assert Budget.of(ExploreRequest(board=get_board("vu9p"))) == Budget()


def test_shares_and_the_pe_cap_set_the_limits():
    capacity = get_board("vu9p").capacity
    budget = Budget(dsp_share=0.5, bram_share=0.25, lut_share=1.0, max_pes=100)
    assert budget.limits(capacity) == {"dsp": capacity.dsp // 2,
                                       "bram36": int(0.25 * capacity.bram36),
                                       "uram": capacity.uram // 4, "lut": capacity.lut}
    assert budget.describe(capacity) == (
        "budget: 3,420 DSP (50%), 540 BRAM36, 240 URAM (25%), 1,182,240 LUT (100%), at "
        "most 100 PEs")


@pytest.mark.parametrize("fields, message", [
    ({"dsp_share": 0}, r"--dsp-share must be a share of the board's resource in \(0, 1\], "
                       r"not 0"),
    ({"bram_share": 1.01}, r"--bram-share must be a share of the board's resource in "
                           r"\(0, 1\], not 1\.01"),
    ({"lut_share": "0.5"}, r"--lut-share must be a share of the board's resource in "
                           r"\(0, 1\], not '0\.5'"),
    ({"max_pes": 0}, r"--max-pes must be a positive integer, not 0"),
    ({"max_pes": 2.5}, r"--max-pes must be a positive integer, not 2\.5"),
])
def test_bad_budgets_name_the_option(fields, message):
    with pytest.raises(UsageError, match=rf"^{message}$"):
        Budget(**fields)


@pytest.mark.parametrize("objective, tolerance, expected", [
    ("fastest", None, ("fastest", 0.0)), ("fastest", 0, ("fastest", 0.0)),
    ("per-dsp", None, ("per-dsp", 0.05)), ("per-dsp", 0.2, ("per-dsp", 0.2)),
])
def test_objectives(objective, tolerance, expected):
    assert check_objective(objective, tolerance) == expected


@pytest.mark.parametrize("objective, tolerance, message", [
    ("cheapest", None, r"--objective must be one of fastest, per-dsp, not 'cheapest'"),
    ("per-dsp", -1, r"--tolerance must be a finite number of at least 0, not -1"),
    ("per-dsp", float("nan"), r"--tolerance must be a finite number of at least 0, not nan"),
    ("fastest", 0.1, r"--tolerance goes with --objective per-dsp \(the fastest design has "
                     r"no tolerance\)"),
])
def test_bad_objectives(objective, tolerance, message):
    with pytest.raises(UsageError, match=rf"^{message}$"):
        check_objective(objective, tolerance)


def test_per_dsp_takes_the_best_cycles_per_dsp_within_the_tolerance():
    ranked = [(100, 900), (101, 900), (103, 500), (104, 300), (120, 10)]   # (cycles, dsp)
    pick = dict(cycles=lambda item: item[0], dsp=lambda item: item[1])
    assert choose(ranked, "fastest", 0.0, **pick) == (100, 900)
    assert choose(ranked, "per-dsp", 0.05, **pick) == (104, 300)
    assert choose(ranked, "per-dsp", 0.03, **pick) == (103, 500)
    assert choose(ranked, "per-dsp", 0.0, **pick) == (100, 900)
    assert choose(ranked, "per-dsp", 0.5, **pick) == (120, 10)


def test_the_tightest_bound():
    limits = {"dsp": 100, "bram36": 10, "lut": 1000}
    assert tightest({"dsp": 50, "bram36": 9, "lut": 10}, limits) == ("bram36", 0.9)
    assert tightest({"dsp": 50, "bram36": 1, "lut": 10}, limits, pes=95, max_pes=100) == \
        ("pes", 0.95)

"""The backpressure patterns and the cycle budget (no simulator)."""

import itertools
import random
import subprocess
import sys

import pytest

from nnrtl.sim.patterns import (BUDGET_CONSTANT, BURSTY_PAUSE, BURSTY_READY, PATTERNS, SLACK,
                                STALL, cycle_budget, pause_pattern)


def runs(bits):
    """``[(bit, length), ...]`` of consecutive equal bits."""
    return [(bit, len(list(group))) for bit, group in itertools.groupby(bits)]


def take(kind, count, seed=0):
    return list(itertools.islice(pause_pattern(kind, random.Random(seed)), count))


def test_importable_without_cocotb():
    code = ("import sys; import nnrtl.sim.patterns as p; "
            "assert 'cocotb' not in sys.modules; print(p.PATTERNS)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "('none', 'cycle', 'random', 'bursty')"


def test_none_cycle_random():
    assert take("none", 1000) == [0] * 1000
    assert take("cycle", 12) == [0, 0, 0, 1] * 3
    bits = take("random", 20000, seed=3)
    assert set(bits) == {0, 1} and abs(sum(bits) / len(bits) - 0.5) < 0.02
    assert take("random", 100, seed=3) == bits[:100]       # seeded


def test_bursty_runs_as_documented():
    bits = take("bursty", 200_000, seed=1)
    found = runs(bits)[:-1]                                  # the last run is cut short
    assert found[0][0] == 0                                  # starts ready
    ready = [length for bit, length in found if bit == 0]
    paused = [length for bit, length in found if bit == 1]
    assert BURSTY_READY[0] <= min(ready) and max(ready) <= BURSTY_READY[1]
    assert BURSTY_PAUSE[0] <= min(paused) and max(paused) <= BURSTY_PAUSE[1]
    # both ends of each range are reached, and the stream is ready ~40/184 of the time
    assert min(ready) < BURSTY_READY[0] + 3 and max(ready) > BURSTY_READY[1] - 3
    assert min(paused) < BURSTY_PAUSE[0] + 10 and max(paused) > BURSTY_PAUSE[1] - 10
    assert abs(bits.count(0) / len(bits) - 40 / 184) < 0.02


def test_stall_allowance_covers_the_pause_runs():
    """``STALL[p]`` is at least the longest pause run of ``p``; for ``random``, whose runs
    are unbounded, longer runs are rarer than 1 in 10**4 (a run is longer than 16 with
    probability 2**-16)."""
    for kind in PATTERNS:
        paused = [length for bit, length in runs(take(kind, 100_000, seed=2)) if bit == 1]
        if kind == "random":
            assert sum(length > STALL[kind] for length in paused) < len(paused) / 10**4
        else:
            assert max(paused, default=0) <= STALL[kind], kind


def test_cycle_budget_formula():
    assert cycle_budget(1000) == 2 * 1000 + BUDGET_CONSTANT
    assert cycle_budget(1000, output_beats=10, patterns=["none", "bursty"]) == \
        SLACK["bursty"] * 1000 + STALL["bursty"] * 10 + BUDGET_CONSTANT
    assert cycle_budget(7, output_beats=3, patterns=["cycle", "random"]) == \
        6 * 7 + 16 * 3 + BUDGET_CONSTANT
    assert [SLACK[kind] for kind in PATTERNS] == sorted(SLACK[kind] for kind in PATTERNS)


@pytest.mark.parametrize("call", [lambda: pause_pattern("burst", random.Random(0)),
                                  lambda: cycle_budget(10, patterns=["none", "always"])])
def test_unknown_pattern(call):
    with pytest.raises(ValueError, match=r"^pause pattern must be one of none, cycle, "
                                         r"random, bursty, not '(burst|always)'$"):
        call()

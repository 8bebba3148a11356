"""The shared stream drivers (nnrtl.sim.tb.streams) under Verilator: words in order under
every pattern, the timing the benches' cycle models assume, and a broken handshake
reported."""

import pytest

from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.bus_tops import StreamRegisterTop

pytestmark = pytest.mark.timeout(900)


def test_words_in_order_and_timing():
    top = StreamRegisterTop(12)
    result = simulate(top, test_module="nnrtl.sim.tb.stream_drivers", seed=3,
                      name="stream_register",
                      params={"width": 12, "words": 200, "patterns": list(PATTERNS)})
    assert result["violation"] is None
    runs = result["runs"]
    assert set(runs) == set(PATTERNS)
    # queued at edge e: offered from e + 1, taken at e + 2, out of the register at e + 3
    assert runs["none"] == {"taken": 2, "first": 3, "cycles": 3 + 199}
    assert runs["bursty"]["cycles"] > runs["random"]["cycles"] > runs["cycle"]["cycles"] > 202


def test_broken_handshake_is_reported():
    top = StreamRegisterTop(12, broken=True)
    result = simulate(top, test_module="nnrtl.sim.tb.stream_drivers", seed=3,
                      name="stream_register_broken",
                      params={"width": 12, "words": 50, "patterns": ["cycle", "random"]})
    assert result["violation"] is not None and "o: valid fell before the word" in \
        result["violation"]

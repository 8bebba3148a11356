"""The demo engine end to end under Verilator: bit-exact against the golden model through
AXI4-Stream under every backpressure pattern, counters read over AXI4-Lite, busy cycles
equal to the performance model when nothing stalls; and the bench's own failures (a
wrong value reported, a stalled sink failing by its budget) shown by fault injection.

The bench (:mod:`nnrtl.sim.tb.demo.engine`) itself fails the simulation, so that ``simulate``
raises, if the source does not drain, a counter differs from what was sent or the
engine sends more than expected; the tests check what it reports."""

import json
import random
import re

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import SimRequest, get_engine
from nnrtl.hw.demo import DemoConfig
from nnrtl.sim.patterns import PATTERNS, cycle_budget
from nnrtl.sim.runner import SimulationError

from cli_result import sim_json_line

ENGINE = get_engine("demo")

pytestmark = pytest.mark.timeout(900)    # a Verilator build (minutes on a busy machine)


def random_configs(count, seed):
    rng = random.Random(seed)
    configs = []
    for _ in range(count):
        operand_width = rng.randint(2, 27)
        acc_width = rng.choice([w for w in range(8, 65, 8) if w >= 2 * operand_width])
        configs.append(DemoConfig(lanes=rng.randint(1, 6), operand_width=operand_width,
                                  acc_width=acc_width))
    return configs


@pytest.mark.parametrize("config", random_configs(2, seed=2026) + [DemoConfig()], ids=str)
@pytest.mark.parametrize("backpressure", PATTERNS)
def test_demo_engine_bit_exact(config, backpressure):
    result = ENGINE.simulate(SimRequest(config, get_board("zc706"), seed=len(backpressure),
                                        backpressure=backpressure))
    assert result["bit_exact"] is True
    assert result["mismatches"] == 0 and result["first_mismatch"] is None
    if backpressure == "none":
        assert result["cycles"] == result["model_cycles"]
        assert result["stall_cycles"] == 0
    else:
        assert result["cycles"] >= result["model_cycles"]
    if backpressure == "bursty":
        # long sink stalls hold results back, so the array must have stalled
        assert result["stall_cycles"] > 0
    # the budgets leave room: the work took at most half of its budget
    assert result["budget_use"] < 0.5


def test_sim_command_prints_one_json_line(capsys):
    code = main(["sim", "demo", "--board", "vu9p", "--param", "lanes=3", "--seed", "5",
                 "--backpressure", "none"])
    result = sim_json_line(capsys, code)
    assert result["cycles"] == result["model_cycles"]
    assert result["board"] == "vu9p" and result["seed"] == 5


def test_sim_command_reports_a_mismatch(capsys, monkeypatch):
    """A wrong value: ``nnrtl sim`` prints its JSON line with ``bit_exact: false`` and the
    first mismatch, and exits 1 (the bench flips one expected word)."""
    monkeypatch.setenv("NNRTL_TB_FAULT", "corrupt-golden")
    code = main(["sim", "demo", "--board", "zc706", "--seed", "3", "--backpressure", "none"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 1 and len(lines) == 1
    result = json.loads(lines[0])
    assert result["bit_exact"] is False and result["fault"] == "corrupt-golden"
    assert result["mismatches"] == 1
    mismatch = result["first_mismatch"]
    assert (mismatch["stream"], mismatch["index"], mismatch["frame"]) == ("m_axis", 0, 0)
    assert mismatch["expected"] ^ mismatch["got"] == 1


@pytest.mark.timeout(600)
def test_stalled_sink_fails_by_budget(monkeypatch):
    """A sink that never accepts: the wait for the first result fails when its budget
    runs out, naming the stream and the cycle, with the counters."""
    monkeypatch.setenv("NNRTL_TB_FAULT", "stall-sink")
    with pytest.raises(SimulationError) as failure:
        ENGINE.simulate(SimRequest(DemoConfig(), get_board("zc706"), seed=3,
                                   backpressure="none", steps=6), max_beats=8)
    headline = str(failure.value).splitlines()[0]
    match = re.match(r"^budget overrun: waiting for m_axis frame 0 at cycle (\d+), (\d+) "
                     r"cycles into 6 frames \(budget (\d+) cycles: (\d+) model cycles, 6 "
                     r"output beats, patterns none/none\); registers: status=1 lanes=8 ",
                     headline)
    assert match, headline
    cycle, elapsed, budget, model = map(int, match.groups())
    assert budget == cycle_budget(model, output_beats=6, patterns=["none"])
    assert budget <= elapsed <= budget + 2 and cycle >= elapsed
    assert "stall_cycles=" in headline and "frames=0" in headline

"""The demo engine end to end under Verilator: bit-exact against the golden model through
AXI4-Stream with gaps and backpressure, counters read over AXI4-Lite, and busy cycles
equal to the performance model when nothing stalls."""

import random

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import get_engine
from nnrtl.hw.demo import DemoConfig

from cli_result import sim_json_line

ENGINE = get_engine("demo")


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
@pytest.mark.parametrize("backpressure", ["none", "cycle", "random"])
def test_demo_engine_bit_exact(config, backpressure):
    result = ENGINE.simulate(config, board=get_board("zc706"), seed=len(backpressure),
                             backpressure=backpressure)
    assert result["bit_exact"] is True
    assert result["useful_macs"] == config.lanes * result["beats"]
    if backpressure == "none":
        assert result["cycles"] == result["model_cycles"]
        assert result["stall_cycles"] == 0
    else:
        assert result["cycles"] >= result["model_cycles"]
    assert 0 < result["utilization"] <= 1


def test_sim_command_prints_one_json_line(capsys):
    code = main(["sim", "demo", "--board", "vu9p", "--param", "lanes=3", "--seed", "5",
                 "--backpressure", "none"])
    result = sim_json_line(capsys, code)
    assert result["cycles"] == result["model_cycles"]
    assert result["board"] == "vu9p" and result["seed"] == 5

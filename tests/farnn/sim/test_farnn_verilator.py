"""The FARNN engine end to end under Verilator (:mod:`nnrtl.sim.tb.farnn.engine`): one layer's FW
pass then its BW pass, every output bit-exact against :mod:`nnrtl.sim.golden.farnn.layer`
under every stream pattern; without gaps each pass's ``cycles`` counter equal to
:func:`nnrtl.hw.farnn.schedule.run_cycles` (``chains <= 2``, its scope), and the cycles
of the records measured in the Amaranth simulator (``tests/farnn/hw/test_farnn_engine.py``).

Four small engines, one Verilator build each (about three minutes, cached afterwards):
LSTM with two rounds (S = 2), GRU with one (S = 1), GRU with two rounds, the last split,
batch 2, and LSTM with a projection.
"""

import dataclasses
import re

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import SimRequest, get_engine
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.sim.patterns import PATTERNS

from cli_result import sim_json_line

ENGINE = get_engine("farnn")

pytestmark = pytest.mark.timeout(900)    # a Verilator build (minutes on a busy machine)

SMALL = dict(input_size=3, seq_len=3, chains=2, layers=1)
CONFIGS = {
    # S = 2 on 4 PEs (7 rows), unsplit, batch 1.
    "lstm-s2-b1": dict(SMALL, cell="lstm", hidden_size=7, batch=1, chain_length=2, split=1),
    # S = 1: 7 rows on 8 PEs, batch 1.
    "gru-s1-b1": dict(SMALL, cell="gru", hidden_size=7, batch=1, chain_length=4, split=1),
    # S = 2, the last round split by 2 (5 rows: 4 + 1), batch 2.
    "gru-s2-split-b2": dict(SMALL, cell="gru", hidden_size=5, batch=2, chain_length=2,
                            split=2),
    # LSTM with a projection (P = 3): R on the projected state, then the projection; two
    # steps (the Verilog is that of test_farnn_train_rtl.py's projection test).
    "lstm-proj-s2-b1": dict(SMALL, cell="lstm", hidden_size=7, proj_size=3, batch=1,
                            chain_length=2, split=1, seq_len=2),
}
#: ``cycles`` of the gapless FW and BW runs, as the Amaranth simulator measured them
#: (``MEASURED`` of tests/farnn/hw/test_farnn_engine.py): the same RTL under Verilator.
MEASURED = {"lstm-s2-b1": [241, 231], "gru-s1-b1": [213, 150],
            "gru-s2-split-b2": [308, 221], "lstm-proj-s2-b1": [204, 193]}


def check(name, backpressure, seed):
    config = FarnnConfig(**CONFIGS[name])
    result = ENGINE.simulate(SimRequest(config, get_board("vu9p"), seed=seed,
                                        backpressure=backpressure))
    assert result["bit_exact"] is True
    assert result["mismatches"] == 0 and result["first_mismatch"] is None
    phases = result["phases"]
    assert [p["phase"] for p in phases] == ["fw", "bw"]
    assert result["cycles"] == sum(p["cycles"] for p in phases)
    if backpressure == "none":
        assert [p["cycles"] for p in phases] == MEASURED[name]
        assert [p["cycles"] for p in phases] == [p["model_cycles"] for p in phases]
        assert result["model_error"] == 0
    else:
        assert "model_error" not in result
        for p in phases:
            assert p["cycles"] >= p["model_cycles"]
    assert result["budget_use"] < 0.5
    return result


#: Built by ``make test-slow`` only (two Verilator builds less in ``make test``, about five
#: minutes): S = 1 and the projection run in the fast suite in the Amaranth simulator,
#: tests/farnn/hw/test_farnn_engine.py, gapless and under random pauses.
SLOW = ("gru-s1-b1", "lstm-proj-s2-b1")


@pytest.mark.parametrize("backpressure", PATTERNS)
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW
                                  else name for name in CONFIGS])
def test_farnn_engine_bit_exact(name, backpressure):
    check(name, backpressure, seed=len(backpressure))


def test_useful_macs_counted():
    """The ``useful_macs`` counters: FW ``steps x batch x units x hidden x hidden``, BW
    the same without the first BW step (``T - 1``: it runs no MVM)."""
    config = FarnnConfig(**CONFIGS["lstm-s2-b1"])
    result = check("lstm-s2-b1", "none", seed=3)
    per_step = config.batch * config.units * config.hidden_size ** 2
    assert [p["useful_macs"] for p in result["phases"]] == [3 * per_step, 2 * per_step]


def test_nnrtl_sim_farnn_prints_one_json_line(capsys):
    args = [f"--param={key}={value}" for key, value in CONFIGS["gru-s2-split-b2"].items()]
    code = main(["sim", "farnn", "--board", "vu9p", "--backpressure", "none", *args])
    result = sim_json_line(capsys, code)
    assert result["engine"] == "farnn"
    assert [p["cycles"] for p in result["phases"]] == MEASURED["gru-s2-split-b2"]


def test_backdoor_weight_load_leaves_what_the_stream_load_leaves():
    """``weight_load="stream+check"``: after each pass's stream load every PE memory
    holds exactly the words :func:`nnrtl.sim.tb.farnn.engine.backdoor_writes` names (the bench
    fails otherwise); then ``"backdoor"`` on the same data gives the same bit-exact
    outputs and the same run cycles, with no load cycles."""
    from nnrtl.sim.runner import simulate
    from nnrtl.gen.farnn.engine import ENGINE

    config = FarnnConfig(**CONFIGS["lstm-s2-b1"])
    results = {}
    for mode in ("stream+check", "backdoor"):
        params = {"config": dataclasses.asdict(config), "steps": config.seq_len,
                  "source_pauses": "none", "sink_pauses": "none", "weight_load": mode}
        results[mode] = simulate(ENGINE.verilog(config), test_module="nnrtl.sim.tb.farnn.engine",
                                 params=params, seed=5, name="nnrtl_farnn")
    stream, backdoor = results["stream+check"], results["backdoor"]
    assert stream["bit_exact"] is True and backdoor["bit_exact"] is True
    assert stream["weight_load"] == "stream+check" and backdoor["weight_load"] == "backdoor"
    assert [p["cycles"] for p in backdoor["phases"]] == MEASURED["lstm-s2-b1"]
    assert [p["cycles"] for p in stream["phases"]] == MEASURED["lstm-s2-b1"]
    assert stream["load_cycles"] > 0 and backdoor["load_cycles"] == 0


def test_weight_load_is_an_option_of_farnn_sim_alone(capsys):
    """--weight-load is FARNN's own sim option: listed by its help, unknown to the SBE's."""
    code = main(["sim", "sbe", "--board", "zc706", "--weight-load", "backdoor"])
    assert code == 2
    assert "unrecognized arguments: --weight-load backdoor (nnrtl sim sbe --help" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(["sim", "farnn", "--help"])
    assert done.value.code == 0
    assert re.search(r"farnn options:\n  --weight-load \{stream,backdoor\}",
                     capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("preset", ["vu9p-lstm1024", "vu9p-gru1280"])
def test_full_size_preset_step_bit_exact(preset):
    """A VU9P preset's whole engine (1,024 / 960 PEs): two time steps of FW and BW (BW's
    first step runs no MVM), weights through the back door (the stream load adds some
    530,000 cycles a pass: hours at full size). A Verilator build of tens of minutes, then
    minutes of simulation; the cycles equal ``run_cycles``."""
    from nnrtl.hw.farnn.presets import PRESETS

    config = dataclasses.replace(PRESETS[preset].config, seq_len=2)
    result = ENGINE.simulate(SimRequest(config, get_board("vu9p"), seed=1,
                                        backpressure="none",
                                        options={"weight_load": "backdoor"}))
    assert result["bit_exact"] is True and result["mismatches"] == 0
    assert result["weight_load"] == "backdoor" and result["load_cycles"] == 0
    assert result["model_error"] == 0
    per_step = config.batch * config.units * config.hidden_size * config.recurrent_size
    assert [p["useful_macs"] for p in result["phases"]] == [2 * per_step, per_step]

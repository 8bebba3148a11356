"""FARNN design-space exploration (:mod:`nnrtl.gen.farnn.explore`): the presets are its
choices, the paper's stated constraints, its report."""

import dataclasses
import json

import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.farnn.explore import explore, explore_request, fits
from nnrtl.gen.farnn.perf import training_step
from nnrtl.hw.farnn.config import FarnnConfig
from nnrtl.hw.farnn.presets import PAPER_8K, PRESETS, VU9P_GRU1280, VU9P_LSTM1024


def test_the_lstm_preset_is_the_papers_4k_design_and_the_per_dsp_choice():
    """The paper's 1,024 PEs at 4K words (two per URAM288): what ``--objective per-dsp``
    picks, within 0.2% of the fastest design's cycles (L = 17, 1,088 PEs), with the
    cycles written in hw/farnn/presets.py."""
    config = VU9P_LSTM1024
    assert (config.pes, config.weight_depth, config.dsp_usage) == (1024, 4096, "max")
    workload = dataclasses.replace(config, chain_length=1, split=1, weight_depth=4096)
    per_dsp = explore(workload, "vu9p", objective="per-dsp")
    assert per_dsp.best.config == config
    assert per_dsp.best.cycles == 75_603_555 == training_step(config).cycles
    fastest = explore(workload, "vu9p").best
    assert (fastest.config.pes, fastest.cycles) == (1088, 75_523_015)
    assert fastest.cycles < per_dsp.best.cycles < fastest.cycles * 1.002


def test_the_gru_preset_is_the_explorations_choice():
    """The preset's configuration and the cycles written in hw/farnn/presets.py."""
    preset = PRESETS["vu9p-gru1280"]
    workload = dataclasses.replace(preset.config, chain_length=1, split=1,
                                   weight_depth=4096)
    found = explore(workload, preset.board)
    assert found.best.config == preset.config
    assert found.best.cycles == 93_928_705 == training_step(preset.config).cycles


def test_lstm_chains_are_shorter_than_gru_chains_on_the_vu9p():
    """The paper's L_LSTM < L_GRU (4 MVM units against 3)."""
    assert VU9P_LSTM1024.chain_length < VU9P_GRU1280.chain_length
    lstm = explore(FarnnConfig(), "vu9p").points
    gru = explore(FarnnConfig(cell="gru", hidden_size=1280, input_size=1280), "vu9p").points
    assert max(p.config.chain_length for p in lstm) < max(p.config.chain_length for p in gru)


def test_the_papers_768_pe_8k_design_fits_at_dsp_usage_max_or_some():
    """The paper's 8K configuration is 768 PEs (L = 12): it fits at DSP usage max (the
    shifts on DSP slices) or some (in LUTs); at 8K the exploration goes to 960 PEs
    (every URAM288: one a PE) at max, 832 at some (then the LUTs bind)."""
    assert fits(PAPER_8K, "vu9p")[0] and PAPER_8K.dsp_usage == "max" and PAPER_8K.pes == 768
    assert fits(dataclasses.replace(PAPER_8K, dsp_usage="some"), "vu9p")[0]
    found = explore(FarnnConfig(), "vu9p", depths=(8192,))
    assert (found.best.config.pes, found.best.config.dsp_usage) == (960, "max")
    assert found.best.needs["uram"] == 960
    lut = explore(FarnnConfig(), "vu9p", depths=(8192,), dsp_usages=("some",))
    assert max(p.config.pes for p in lut.points) == 832


def test_the_papers_4k_design_needs_dsp_usage_max():
    """1,024 PEs at 4K words fit at DSP usage max (the default ``generate``); at some
    (the shifts in LUTs) the exploration says the LUTs bind."""
    assert fits(FarnnConfig(dsp_usage="max"), "vu9p")[0]
    with pytest.raises(UsageError, match=r"its weights need at least chain_length 16 "
                                         r"\(weight_depth 4096, split 1, dsp_usage some, "
                                         r"1024 PEs\), which needs lut 965510 > 827568$"):
        explore(FarnnConfig(), "vu9p", depths=(4096,), dsp_usages=("some",))


def test_report_table_and_json():
    found = explore(FarnnConfig(hidden_size=256, input_size=256, layers=2, seq_len=100),
                    "vu9p", top=3)
    text = found.table()
    assert "* chosen: chain_length=" in text and len(found.candidates) == 3
    data = json.loads(json.dumps(found.as_json()))
    assert data["chosen"] == dataclasses.asdict(found.best.config)
    assert len(data["feasible_points"]) == data["feasible"] == len(found.points)
    ranks = [c["cycles"] for c in data["candidates"]]
    assert ranks == sorted(ranks)


def test_bad_board_is_a_usage_error():
    with pytest.raises(UsageError, match="board"):
        explore(FarnnConfig(), "nope")


def test_explore_request_from_params():
    from nnrtl.boards import get_board
    from nnrtl.gen.engines import ExploreRequest

    request = ExploreRequest(board=get_board("vu9p"), seq_len=200, top=2,
                             params=("cell=gru", "input_size=128", "hidden_size=256",
                                     "layers=2", "weight_depth=4096"))
    found = explore_request(request)
    assert found.workload.seq_len == 200 and found.workload.cell == "gru"
    assert {p.config.weight_depth for p in found.points} == {4096}
    with pytest.raises(UsageError, match="explore farnn needs --model FILE"):
        explore_request(ExploreRequest(board=get_board("vu9p"), params=("cell=gru",)))
    with pytest.raises(UsageError, match="hidden_size"):
        explore_request(ExploreRequest(board=get_board("vu9p"),
                                       params=("input_size=8", "hidden_size=-3")))


def test_explore_request_from_a_model_file(tmp_path):
    import torch

    from nnrtl.boards import get_board
    from nnrtl.gen.engines import ExploreRequest

    torch.save(torch.nn.GRU(24, 96, num_layers=3).state_dict(), tmp_path / "gru.pt")
    found = explore_request(ExploreRequest(board=get_board("vcu128"), model=tmp_path / "gru.pt",
                                           seq_len=50, top=1))
    w = found.workload
    assert (w.cell, w.input_size, w.hidden_size, w.layers, w.seq_len) == ("gru", 24, 96, 3, 50)
    with pytest.raises(UsageError, match="parameter hidden_size comes from the model"):
        explore_request(ExploreRequest(board=get_board("vcu128"), model=tmp_path / "gru.pt",
                                       params=("hidden_size=8",)))


def test_table2_analogue():
    """The VCU128 (VU37P: more LUTs) holds more PEs than the VU9P for either cell; LSTM
    chains are shorter than GRU chains on both."""
    from nnrtl.gen.farnn.explore import table2

    rows, markdown = table2()
    design = {(r["board"], r["cell"]): r for r in rows}
    for cell in ("lstm", "gru"):
        assert design["vcu128", cell]["pes"] > design["vu9p", cell]["pes"]
    for board in ("vu9p", "vcu128"):
        assert design[board, "lstm"]["chain_length"] < design[board, "gru"]["chain_length"]
    assert markdown.count("\n") == 1 + len(rows)


def test_hardware_pins_with_a_model_file(tmp_path):
    """``--model`` with hardware ``--param``: the pinned chain length and depth kept, the
    split explored; the model's sizes still refused."""
    import torch

    from nnrtl.boards import get_board
    from nnrtl.gen.engines import ExploreRequest

    torch.save(torch.nn.LSTM(16, 32).state_dict(), tmp_path / "lstm.pt")
    found = explore_request(ExploreRequest(
        board=get_board("vu9p"), model=tmp_path / "lstm.pt", seq_len=20,
        params=("chain_length=2", "weight_depth=4096")))
    assert {(p.config.chain_length, p.config.weight_depth) for p in found.points} == \
        {(2, 4096)}
    assert len({p.config.split for p in found.points}) > 1
    assert found.as_json()["pinned"] == {"chain_length": 2, "weight_depth": 4096}
    assert "; pinned: chain_length=2, weight_depth=4096" in found.table().splitlines()[2]


WORKLOAD_256 = FarnnConfig(hidden_size=256, input_size=256, layers=2, seq_len=100)


def test_a_budget_that_excludes_the_fastest():
    """A PE cap and half the LUTs' share: the fastest design is out, every point keeps
    within both, the bound a candidate is nearest to is named."""
    from nnrtl.gen.dse import Budget

    fastest = explore(WORKLOAD_256, "vu9p").best
    budget = Budget(lut_share=0.35, max_pes=200)
    found = explore(WORKLOAD_256, "vu9p", budget=budget)
    assert fastest.config.pes > 200 and found.best.cycles > fastest.cycles
    assert all(p.config.pes <= 200 and p.needs["lut"] <= found.limits["lut"]
               for p in found.points)
    assert found.limits["lut"] == int(0.35 * 1_182_240)
    data = found.as_json()
    assert data["budget"]["max_pes"] == 200
    assert data["candidates"][0]["limit"]["budget"] in ("pes", "lut")
    assert found.table().splitlines()[2].endswith("413,784 LUT (35%), at most 200 PEs")
    with pytest.raises(UsageError, match=r", at most 2 PEs\): its weights need at least "
                                         r"chain_length 1 \(weight_depth 8192, split 1, "
                                         r"dsp_usage max, 64 PEs\), which needs 64 PEs > 2$"):
        explore(WORKLOAD_256, "vu9p", budget=Budget(max_pes=2), depths=(8192,))


def test_per_dsp_picks_a_smaller_design_within_the_tolerance():
    """Per DSP within 15%: fewer PEs than the fastest, at most 15% slower, marked in the
    table and the JSON."""
    fastest = explore(WORKLOAD_256, "vu9p").best
    found = explore(WORKLOAD_256, "vu9p", objective="per-dsp", tolerance=0.15, top=3)
    chosen = found.best
    assert chosen.needs["dsp"] < fastest.needs["dsp"]
    assert chosen.cycles <= 1.15 * fastest.cycles
    assert chosen.cycles * chosen.needs["dsp"] < fastest.cycles * fastest.needs["dsp"]
    data = found.as_json()
    assert data["objective"]["name"] == "per-dsp"
    marked = [c for c in data["candidates"] if c["chosen"]]
    assert len(marked) == 1 and marked[0]["rank"] == found.chosen_rank > 1
    assert data["chosen"] == dataclasses.asdict(chosen.config)
    rows = [line for line in found.table().splitlines() if line[3:4] == "*"]
    assert len(rows) == 1 and rows[0].startswith(f"{found.chosen_rank:>3}*")


def test_the_command_line_budget_and_objective_reach_farnn(capsys):
    from nnrtl.gen.cli import main

    code = main(["explore", "farnn", "--board", "vu9p", "--param", "input_size=256",
                 "--param", "hidden_size=256", "--param", "layers=2", "--param",
                 "seq_len=100", "--max-pes", "200", "--bram-share", "0.5", "--objective",
                 "per-dsp", "--tolerance", "0.1", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    result = json.loads(out)
    assert result["objective"]["name"] == "per-dsp" and result["objective"]["tolerance"] == 0.1
    assert (result["budget"]["max_pes"], result["budget"]["limits"]["uram"]) == (200, 480)
    assert all(p["pes"] <= 200 and p["uram"] <= 480 for p in result["feasible_points"])

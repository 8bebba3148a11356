"""The FARNN bench (:mod:`nnrtl.gen.farnn.studies.bench`, ``bench_model``, ``bench_gpu``,
``bench_markdown``) on its cheap parts: the model's figures against the paper's and
against sums taken here, the GPU baseline on a tiny layer, the markdown and plots."""

import json

import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.farnn.studies import bench, bench_model
from nnrtl.gen.farnn.studies.bench_gpu import gpu_baseline
from nnrtl.gen.farnn.studies.bench_markdown import markdown_farnn
from nnrtl.gen.farnn.perf import CLOCK_HZ
from nnrtl.gen.farnn.resources import UNIT_LOGIC, chain_memory
from nnrtl.hw.farnn import FarnnConfig


def test_slice_rows_are_the_papers():
    """Sec. 5.1.3: 256 PEs per unit: 4 rounds, 4,096 words, 4 x 1,024 MAC cycles; 768:
    2 rounds, 2,048 unsplit, 1,536 split by 2."""
    rows = {r["shape"]: r for r in bench_model.slice_rows()}
    expected = {"256 PEs per unit": (4, 4096, 4096), "768 PEs per unit": (2, 2048, 2048),
                "768 PEs per unit, split 2": (2, 1536, 1536)}
    for name, (rounds, words, macs) in expected.items():
        row = rows[name]
        assert (row["rounds"], row["words_per_pe"], row["mac_cycles"]) == (rounds, words, macs)
        assert (row["paper_rounds"], row["paper_words_per_pe"],
                row["paper_mac_cycles"]) == (rounds, words, macs)


def test_f9_rows_on_a_tiny_design():
    """Utilization = useful MACs / (PEs x cycles), the MACs counted here: FW T steps, BW
    T - 1 (step T - 1 has dh = 0), each 4 units x H x H x batch per layer."""
    tiny = FarnnConfig(hidden_size=8, input_size=8, layers=2, seq_len=5, chains=2,
                       chain_length=2, split=1)
    rows = bench_model.f9_rows({"tiny": tiny}, batches=(1, 2))
    assert [r["batch"] for r in rows] == [1, 2]
    for row in rows:
        macs = 2 * 4 * 8 * 8 * row["batch"] * (5 + 4)
        assert row["utilization"] == pytest.approx(macs / (16 * row["cycles"]))  # 4 x 2 x 2 PEs
        assert row["ms"] == pytest.approx(row["cycles"] / CLOCK_HZ * 1e3)
        assert 0 < row["utilization"] < row["double_buffered"] <= 1
        assert row["utilization"] <= row["overlap"] <= 1
        assert row["paper"] == {1: 0.828, 2: 0.880}[row["batch"]]
    assert rows[0]["utilization"] < rows[1]["utilization"]


def test_f9_rows_of_the_papers_design_reach_the_papers_figures():
    rows = [r for r in bench_model.f9_rows() if r["design"].startswith("paper 1,024")]
    assert [r["batch"] for r in rows] == [1, 2, 4]
    assert all(r["utilization"] >= r["paper"] for r in rows)
    assert rows[0]["overlap_double_buffered"] >= 0.95


def test_time_rows_sum_and_grow():
    times = bench_model.time_rows(cells={"lstm": (256, 512, 4096), "gru": (640,)},
                                  lengths=(100, 400))
    assert [(s["cell"], s["hidden_size"]) for s in times["skipped"]] == [("lstm", 4096)]
    for row in times["cells"] + times["seq_len"]:
        assert row["fw_ms"] + row["bw_ms"] == pytest.approx(row["ms"])
        assert row["load_ms"] < row["ms"] and row["double_buffered_ms"] <= row["ms"]
    lstm = [r["ms"] for r in times["cells"] if r["cell"] == "lstm"]
    assert lstm[0] < lstm[1]
    by_length = [r for r in times["seq_len"] if r["cell"] == "lstm"]
    assert by_length[0]["ms"] < by_length[1]["ms"]
    # loads amortize: utilization rises with the sequence length
    assert by_length[0]["utilization"] < by_length[1]["utilization"]


def test_table2_rows_per_pe_and_per_chain():
    rows = bench_model.table2_rows(boards=("vu9p",))
    assert [(r["cell"], r["pes"]) for r in rows] == [("lstm", 4 * 16 * 17), ("gru", 3 * 16 * 20)]
    for row in rows:
        assert row["pes"] == row["chains"] * row["chain_length"] * row["units"]
        pairs, lone = divmod(row["chain_length"], 2)
        suffix = f"{row['weight_depth']}_max"
        for key in ("ff", "dsp"):
            want = (pairs * UNIT_LOGIC[f"pair{suffix}"][key]
                    + lone * UNIT_LOGIC[f"pe{suffix}"][key] + UNIT_LOGIC["normal"][key])
            assert row["per_chain"][key] == want
        assert row["per_chain"]["uram"] == chain_memory(row["chain_length"],
                                                        row["weight_depth"], "xcup")[0]
        assert all(row["needs"][k] <= row["limits"][k] for k in row["needs"])
    lstm, gru = rows
    assert lstm["chain_length"] < gru["chain_length"]       # the paper's L_LSTM < L_GRU


def test_gpu_baseline_on_a_tiny_layer():
    result = gpu_baseline(hidden=8, layers=1, seq_len=16, batches=(1, 2), repeats=2,
                          measured_seq_len=4, device="cpu")
    assert result["device"] == "cpu" and result["device_name"]
    assert result["scaled"] and result["measured_seq_len"] == 4
    for row, batch in zip(result["rows"], (1, 2)):
        assert row["batch"] == batch and len(row["seconds_all"]) == 2
        assert row["seconds"] == min(row["seconds_all"]) > 0
        assert row["at_seq_len"] == pytest.approx(4 * row["seconds"])


def test_bench_farnn_without_rtl(tmp_path):
    result = bench.bench_farnn(tmp_path, engines=(), slow=(), yosys=False,
                               gpu_options=dict(hidden=8, layers=1, seq_len=8,
                                                measured_seq_len=2, repeats=1,
                                                device="cpu"))
    assert set(result) == {"slices", "f9", "time", "table2", "plots", "slices_rtl", "yosys",
                           "engine", "gpu", "hybrid"}
    assert "farnn_hybrid.png" in result["plots"]
    assert result["engine"] == [] and result["slices_rtl"] == []
    for name in result["plots"]:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    json.dumps(result)
    text = markdown_farnn(result)
    for needle in ("| 1 | 82.8% |", "| 2 | 88.0% |", "| 4 | 92.5% |", "4,096 (4,096)",
                   "1,536 (1,536)", "| vu9p | lstm 1,024 | 1,088 |", "an extrapolation",
                   "Paper, Fig. 10:"):
        assert needle in text, needle
    assert [r["fpga_ms"] is not None for r in result["gpu"]["rows"]] == [True] * 3


def test_slow_parts_are_named_by_the_environment(monkeypatch):
    monkeypatch.setenv("NNRTL_BENCH_FARNN", "slices768")
    assert bench._slow_words() == ["768 PEs", "768 PEs, split 2"]
    monkeypatch.setenv("NNRTL_BENCH_FARNN", "slices256,bogus")
    with pytest.raises(UsageError, match=r"NNRTL_BENCH_FARNN \(bogus\) must name parts of "
                                         r"slices256, slices768"):
        bench._slow_words()


def test_engine_configs_fit_and_are_small():
    for fields in bench.ENGINE_CONFIGS.values():
        config = FarnnConfig(**fields)
        assert config.fits and config.pes <= 32 and config.seq_len == 3


@pytest.mark.slow
def test_engine_rows_under_verilator():
    """The bench's RTL part on the two-chain engine (the Verilator build of
    tests/farnn/sim/test_farnn_verilator.py, usually cached): bit-exact, RTL cycles equal to
    the schedule's, the model within 3 %."""
    rows = bench.engine_rows(["gru-s2-split-b2"])
    assert [r["phase"] for r in rows] == ["fw", "bw"]
    assert [r["cycles"] for r in rows] == [308, 221]      # measured (test_farnn_engine)
    for row in rows:
        assert row["bit_exact"] and row["schedule_cycles"] == row["cycles"]
        assert abs(row["model_cycles"] / row["cycles"] - 1) <= 0.03

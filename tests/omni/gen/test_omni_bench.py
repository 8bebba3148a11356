"""The η-LSTM bench part (gen/omni/studies/bench.py, bench_markdown.py): registered in the
``nnrtl.benches`` group; its model-only parts on the quick set, with the utilization part
cut to two shapes' rows (the six are checked by tests/omni/gen/test_omni_r2a_model.py); the
accumulator's figures by hand."""

import json

import pytest

from nnrtl.gen import bench as driver
from nnrtl.gen.omni.studies import bench as omni_bench
from nnrtl.gen.omni.r2a import schedule, channel_durations, scaled, SCALED_CONFIG
from nnrtl.gen.omni.accounting import TABLE_I
from nnrtl.gen.omni.workload import training_graph


def small_rows(quick):
    """Two utilization rows of the shape :func:`~nnrtl.gen.omni.r2a.utilization_rows`
    gives, from a tiny TREC-10 (fast)."""
    shape = scaled(scaled(TABLE_I["TREC-10"]))
    tasks = training_graph(shape, tiles=SCALED_CONFIG.channels)
    durations = channel_durations(tasks, shape, SCALED_CONFIG)
    static = schedule(tasks, SCALED_CONFIG, dynamic=False, durations=durations)
    dynamic = schedule(tasks, SCALED_CONFIG, dynamic=True, durations=durations)
    row = dict(shape="TREC-10", scale="scaled", options="baseline",
               ew_channels=static.ew_channels, static=static.utilization,
               static_trec10=static.utilization, dynamic=dynamic.utilization,
               gain=dynamic.utilization / static.utilization, swings=dynamic.swings,
               dynamic_cycles=dynamic.cycles)
    return [row, dict(row, options="ms1")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NNRTL_BENCH_OMNI", "quick")
        patch.setattr(omni_bench, "utilization_part", small_rows)
        assert "omni" in driver.benchmarks()
        assert driver.main(["--out", str(out), "--only", "omni"]) == 0
    return out, json.loads((out / "omni.json").read_text())


def test_structure(run):
    out, result = run
    assert result["quick"] and "resources" not in result
    assert {"utilization", "memory", "accumulator", "plots"} <= set(result)
    for name in result["plots"]:
        assert (out / name).stat().st_size > 1000
    markdown = (out / "omni.md").read_text()
    assert "57.5%" in markdown and "80.0%" in markdown and "Not run in the quick set" in markdown
    assert result["utilization"][0]["dynamic"] >= result["utilization"][0]["static"]


def test_accumulator_by_hand(run):
    acc = run[1]["accumulator"]
    # 8-stage adder: reduction schedule of 31 cycles; the IP takes 1024 + 20
    assert acc["reduction_cycles"] == 31 and acc["latency"] == 1024 + 31
    assert acc["overhead_vs_ip"] == pytest.approx(100 * (1055 - 1044) / 1044)
    assert acc["overhead_vs_ip"] < acc["paper_overhead_below"] == 2.87
    # back-to-back rows on a PE: one row period is the accumulator's latency
    assert acc["channel_row_period"] == acc["latency"]


def test_memory_beside_the_paper(run):
    memory = run[1]["memory"]
    assert memory["paper_footprint"]["ms1+ms2"] == pytest.approx(57.52)
    assert memory["paper_data_movement"]["ms1+ms2"] == pytest.approx([40.85, 32.89, 80.04])
    average = memory["rows"]["average"]
    assert set(average) >= {"ms1", "ms2", "ms1+ms2"}
    assert 0 < average["ms1+ms2"]["footprint"] < 100


def test_accuracy_part_of_recorded_sweeps(run, tmp_path):
    """The quick set skips the accuracy part; recorded sweeps (two seeds, hand-written
    runs; the numbers by hand: tests/omni/gen/test_omni_accuracy_report.py) are summarised
    into the markdown's accuracy section."""
    from nnrtl.gen.omni.studies.bench_markdown import markdown_omni
    from test_omni_accuracy_report import hand_runs
    assert run[1]["accuracy"] is None
    assert "Not run in the quick set (NNRTL_BENCH_OMNI_ACCURACY" in \
        (run[0] / "omni.md").read_text()
    path = tmp_path / "sweep.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in hand_runs()))
    accuracy = omni_bench.accuracy_part(True, [path])
    assert accuracy["runs"] == 6 and [r["run"] for r in accuracy["rows"]] == [
        "pytorch", "exact", "both"]
    markdown = markdown_omni(dict(run[1], accuracy=accuracy))
    assert f"Recorded sweeps (6 runs): `{path}`." in markdown
    assert "| text | both | 0.05/0.005 | 2 | +1.50 % ± 0.50 % [+1.00 %, +2.00 %] | " \
        "+4.66 % | no / no | " in markdown                      # 1.5 + 6.3138 * 0.5
    assert "| 1 | 4.0000 | 4.4000 (+10.00 %) | 4.0400 (+1.00 %; -8.18 %) |" in markdown

"""gen/omni/studies/accuracy_sweep.py: the multi-seed threshold sweep (tiny tasks) and its CLI."""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

from nnrtl.gen.errors import UsageError
from nnrtl.gen.omni.studies.accuracy import QUICK, main, train_run
from nnrtl.gen.omni.studies.accuracy_report import markdown_tables, summary_table, write_outputs
from nnrtl.gen.omni.studies.accuracy_sweep import (LIMIT, _summarise, check_pairs, check_thresholds,
                                           rows_from_files, rows_from_lines, sweep)
from nnrtl.gen.omni.training import MsConfig

SPEC = dataclasses.replace(QUICK["text"], epochs=4, train_chars=3_200)   # MS2 skips from epoch 4


@pytest.fixture(scope="module")
def text_sweep():
    """The sweep on one thread (as the CLI runs it): 2 seeds, θ 0.1 and 0, MS2 0.02
    and 0, both at 0.1/0.02 and 0/0."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    lines = []
    try:
        rows = sweep(SPEC, (1, 2), (0.1, 0.0), (0.02, 0.0), lines.append,
                     ((0.1, 0.02), (0.0, 0.0)))
    finally:
        torch.set_num_threads(threads)
    return rows, lines


def test_sweep_rows_and_fields(text_sweep):
    rows, lines = text_sweep
    assert [(r["run"], r["threshold"]) for r in rows] == [
        ("pytorch", 0.0), ("exact", 0.0), ("ms1", 0.1), ("ms1", 0.0), ("ms2", 0.02),
        ("ms2", 0.0), ("both", (0.1, 0.02)), ("both", (0.0, 0.0))]
    runs = [line for line in lines if line["kind"] == "run"]
    assert len(runs) == 2 * 8 and [line["seed"] for line in runs[:2]] == [1, 2]
    for row in rows:
        assert row["seeds"] == 2 and row["metric"] == "perplexity"
        for key in ("relative_difference_mean", "relative_difference_min",
                    "relative_difference_max", "relative_difference_std",
                    "degradation_mean", "degradation_worst", "within_1_percent",
                    "all_seeds_within_1_percent", "values", "baseline_values"):
            assert key in row, key
        assert all(v > 1 for v in row["values"])          # perplexities
        assert ("stored_reduction" in row) == (row["run"] != "pytorch")
        assert ("p1_density" in row) == (row["run"] in ("ms1", "both"))
        assert ("skipped" in row) == (row["run"] in ("ms2", "both"))
    ms1, ms2, both = rows[2], rows[4], rows[6]
    assert 0 < ms1["p1_density"] < 1 and ms1["stored_reduction"] > 0
    assert 0 < ms2["skipped"] < 1 and ms2["stored_reduction"] > 0
    # together: MS2 skips the same cells (its plan runs on the losses, which MS1 changes
    # only slightly) and the kept cells store MS1's records: more saved than either
    assert 0 < both["skipped"] < 1 and 0 < both["p1_density"] < 1
    assert both["stored_reduction"] > max(ms1["stored_reduction"], ms2["stored_reduction"])
    assert rows[3]["p1_density"] == 1.0                  # θ = 0 prunes nothing
    runs = {(line["run"], str(line["threshold"]), line["seed"]): line
            for line in lines if line["kind"] == "run"}
    assert ms1["final_loss_vs_exact"] == pytest.approx(
        [runs["ms1", "0.1", s]["losses"][-1] - runs["exact", "0.0", s]["losses"][-1]
         for s in (1, 2)], abs=1e-12)
    assert rows[3]["final_loss_vs_exact"] == [0.0, 0.0]


def test_within_one_percent_derives_from_the_numbers(text_sweep):
    rows, _ = text_sweep
    for row in rows:
        relative = [(v - b) / b for v, b in zip(row["values"], row["baseline_values"])]
        assert row["relative_difference"] == pytest.approx(relative, rel=1e-12, abs=1e-15)
        assert row["relative_difference_mean"] == pytest.approx(np.mean(relative))
        assert row["relative_difference_min"] == min(relative)
        assert row["relative_difference_median"] == pytest.approx(np.median(relative))
        assert row["within_1_percent"] == (np.mean(relative) <= 0.01)   # perplexity: up
        assert row["all_seeds_within_1_percent"] == (max(relative) <= 0.01)


def test_threshold_zero_equals_the_exact_decomposition(text_sweep):
    """MS1 θ = 0 and MS2 threshold 0 train exactly as the decomposition without MS;
    that one is PyTorch up to float32 rounding order."""
    rows, lines = text_sweep
    runs = {(line["run"], json.dumps(line["threshold"]), line["seed"]): line
            for line in lines if line["kind"] == "run"}
    for seed in (1, 2):
        exact = runs["exact", "0.0", seed]
        for key in (("ms1", 0.0, seed), ("ms2", 0.0, seed), ("both", [0.0, 0.0], seed)):
            key = key[0], json.dumps(key[1]), key[2]
            assert runs[key]["value"] == exact["value"]
            assert runs[key]["losses"] == exact["losses"]
        assert exact["value"] == pytest.approx(runs["pytorch", "0.0", seed]["value"],
                                               rel=1e-5)
    assert rows[5]["relative_difference"] == rows[1]["relative_difference"]
    assert rows[5]["stored_reduction"] == 0.0 and rows[5]["skipped"] == 0.0
    assert rows[7]["relative_difference"] == rows[1]["relative_difference"]
    assert rows[7]["skipped"] == 0.0 and rows[7]["p1_density"] == 1.0


def test_sign_of_the_criterion():
    """Accuracy: a drop is a degradation; perplexity: a rise. Numbers by hand."""
    def runs(metric, values):
        return [dict(metric=metric, value=v, seconds=1.0) for v in values]

    base = runs("accuracy", [0.90, 0.80])
    worse = _summarise("digits", "ms1", 0.1, runs("accuracy", [0.882, 0.792]), base)
    assert worse["relative_difference"] == pytest.approx([-0.02, -0.01])
    assert worse["degradation_mean"] == pytest.approx(0.015) and not worse["within_1_percent"]
    better = _summarise("digits", "ms1", 0.1, runs("accuracy", [0.99, 0.80]), base)
    assert better["within_1_percent"] and better["all_seeds_within_1_percent"]
    base = runs("perplexity", [4.0, 5.0])
    edge = _summarise("text", "ms1", 0.02, runs("perplexity", [4.04, 5.1]), base)
    assert edge["degradation_mean"] == pytest.approx(0.015) and not edge["within_1_percent"]
    assert LIMIT == 0.01


def test_outputs_table_and_plot(text_sweep, tmp_path):
    rows, lines = text_sweep
    assert rows_from_lines(lines) == rows
    assert rows_from_lines(lines[:-2]) == rows[:-1]      # cut off: whole settings only
    table = summary_table(rows)
    assert table.count("\n") == len(rows) + 3 and "ms2      0.02" in table
    assert "both     0.1/0.02" in table
    write_outputs(tmp_path / "out", lines, rows)
    written = (tmp_path / "out" / "sweep.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in written] == json.loads(json.dumps(lines))
    assert (tmp_path / "out" / "sweep.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("values, message", [
    ((), r"^prune_thresholds must name at least one threshold$"),
    ((0.1, 1.0), r"^prune_thresholds must be numbers from 0 to below 1, not 1\.0$"),
    ((-0.1,), r"^prune_thresholds must be numbers from 0 to below 1, not -0\.1$"),
    (("0.1",), r"^prune_thresholds must be numbers from 0 to below 1, not '0\.1'$"),
])
def test_bad_thresholds(values, message):
    with pytest.raises(UsageError, match=message):
        check_thresholds(values, "prune_thresholds")


@pytest.mark.parametrize("pairs, message", [
    ((0.1,), r"^both_thresholds must be \(θ, skip threshold\) pairs, not 0\.1$"),
    (((0.1, 0.2, 0.3),), r"^both_thresholds must be \(θ, skip threshold\) pairs, not "
                         r"\(0\.1, 0\.2, 0\.3\)$"),
    (((0.1, 1.0),), r"^both_thresholds must be numbers from 0 to below 1, not 1\.0$"),
])
def test_bad_pairs(pairs, message):
    with pytest.raises(UsageError, match=message):
        check_pairs(pairs)


def test_bad_seeds():
    with pytest.raises(UsageError, match=r"^seeds must be non-negative integers, at least "
                       r"one, not \(\)$"):
        sweep(SPEC, ())


@pytest.mark.parametrize("argv, message", [
    (["--sweep", "--seeds", "0"], r"argument --seeds: must be a positive integer, not '0'$"),
    (["--sweep", "--seeds", "x"], r"argument --seeds: must be a positive integer, not 'x'$"),
    (["--sweep", "--prune-thresholds", "0.1,1.5"],
     r"argument --prune-thresholds: must be numbers from 0 to below 1, not '0\.1,1\.5'$"),
    (["--sweep", "--skip-thresholds", "a,b"],
     r"argument --skip-thresholds: must be comma-separated numbers, not 'a,b'$"),
    (["--sweep", "--both", "0.1"], r"argument --both: must be comma-separated THETA/F "
                                   r"pairs of numbers from 0 to below 1, not '0\.1'$"),
    (["--sweep", "--both", "0.1/0.001,0.1/x"], r"argument --both: must be comma-separated "
     r"THETA/F pairs of numbers from 0 to below 1, not '0\.1/0\.001,0\.1/x'$"),
    (["--epochs", "0"], r"argument --epochs: must be a positive integer, not '0'$"),
    (["--grad-clip", "-1"], r"argument --grad-clip: must be a positive number, not '-1'$"),
    (["-o", "somewhere"], r"-o/--output is for --sweep only$"),
])
def test_bad_cli_values(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv + ["--quick"])
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err, re.MULTILINE)


def test_output_that_is_a_file(tmp_path, capsys):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(SystemExit) as exit_info:
        main(["--sweep", "--quick", "-o", str(path)])
    assert exit_info.value.code == 2
    assert f"-o/--output: {path} exists and is not a directory" in capsys.readouterr().err
    assert path.read_text() == "x"


def test_gradient_clipping_applies_to_both_trainings():
    spec = dataclasses.replace(SPEC, epochs=2)
    clipped = dataclasses.replace(spec, grad_clip=0.05)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        free, torch_run = train_run(spec), train_run(clipped)
        ours = train_run(clipped, MsConfig())
    finally:
        torch.set_num_threads(threads)
    assert ours["losses"] == pytest.approx(torch_run["losses"], rel=1e-5)
    assert torch_run["losses"][1] > free["losses"][1] * 1.05     # small steps: slower
    assert torch_run["clipped_share"] == ours["clipped_share"] == 1.0
    assert "clipped_share" not in free


def test_standard_error_and_upper_bound_by_hand():
    """Three seeds, perplexity up 1, 2, 3 %: SE = 1 % / sqrt 3; the one-sided 95 % bound
    mean + t(0.95, 2) SE with t = 2.919986 (Student's t table); against ``exact`` of the
    same seed the differences are computed from the exact values, not from PyTorch's."""
    def runs(values):
        return [dict(metric="perplexity", value=v, seconds=1.0, seed=s)
                for s, v in zip((4, 5, 6), values)]

    base, exact = runs([4.0, 5.0, 2.0]), runs([4.4, 5.0, 1.9])
    row = _summarise("text", "ms1", 0.05, runs([4.04, 5.1, 2.06]), base, exact)
    assert row["seed_list"] == [4, 5, 6]
    assert row["relative_difference"] == pytest.approx([0.01, 0.02, 0.03])
    assert row["relative_difference_sem"] == pytest.approx(0.01 / 3 ** 0.5)
    assert row["degradation_upper_95"] == pytest.approx(0.02 + 2.919986 * 0.01 / 3 ** 0.5,
                                                        rel=1e-6)
    assert row["within_1_percent_95"] is False and row["within_1_percent"] is False
    assert row["vs_exact"] == pytest.approx([4.04 / 4.4 - 1, 5.1 / 5.0 - 1, 2.06 / 1.9 - 1])
    assert row["vs_exact_mean"] == pytest.approx(np.mean(row["vs_exact"]))
    assert row["vs_exact_sem"] == pytest.approx(np.std(row["vs_exact"], ddof=1) / 3 ** 0.5)
    assert row["vs_exact_degradation_mean"] == pytest.approx(row["vs_exact_mean"])
    # accuracy: a drop is the degradation, so the bound is on the negated differences
    acc = [dict(metric="accuracy", value=v, seconds=1.0) for v in (0.9, 0.8)]
    up = _summarise("digits", "ms1", 0.1, [dict(r, value=r["value"] * 1.01) for r in acc],
                    acc, acc)
    assert up["degradation_upper_95"] == pytest.approx(-0.01)
    assert up["within_1_percent_95"] and up["vs_exact_within_1_percent_95"]
    assert up["vs_exact_sem"] == pytest.approx(0.0)
    one = _summarise("digits", "ms1", 0.1, acc[:1], acc[:1], acc[:1])
    assert one["relative_difference_sem"] is None and one["within_1_percent_95"] is None
    assert "vs_exact" not in _summarise("digits", "exact", 0.0, acc, acc, acc)


def test_rows_from_files_pool_seed_by_seed_sweeps(text_sweep, tmp_path, capsys):
    rows, lines = text_sweep
    for seed in (2, 1):                      # one directory per seed, as --seed K --seeds 1
        mine = [line for line in lines if line.get("seed", seed) == seed]
        (tmp_path / f"seed{seed}").mkdir()
        (tmp_path / f"seed{seed}" / "sweep.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in mine))
    pooled, runs = rows_from_files([tmp_path])
    assert pooled == rows and len(runs) == 16
    markdown = markdown_tables(pooled)
    assert markdown.count("\n| 1 | ") == markdown.count("\n| 2 | ") == 1
    assert "| text | both | 0.1/0.02 | 2 | " in markdown
    assert main(["--summarise", str(tmp_path / "seed1"), str(tmp_path / "seed2")]) == 0
    assert "| text | exact | 0 | 2 | " in capsys.readouterr().out
    with pytest.raises(UsageError, match=r"^.*sweep\.jsonl: run \('text', 'pytorch', "
                       r"'0\.0', 1\) appears twice$"):
        rows_from_files([tmp_path / "seed1", tmp_path / "seed1" / "sweep.jsonl"])
    with pytest.raises(UsageError, match=r"^no sweep\.jsonl under .*empty$"):
        (tmp_path / "empty").mkdir()
        rows_from_files([tmp_path / "empty"])
    assert main(["--summarise", str(tmp_path / "empty")]) == 2
    assert re.search(r"error: --summarise: no sweep\.jsonl under .*empty$",
                     capsys.readouterr().err, re.MULTILINE)


def test_only_the_both_pairs(monkeypatch, capsys):
    """``--prune-thresholds none --skip-thresholds none``: PyTorch, exact and the pairs."""
    calls = []
    monkeypatch.setattr("nnrtl.gen.omni.studies.accuracy_sweep.sweep",
                        lambda spec, seeds, prune, skip, emit, both, scaling:
                        calls.append((spec.name, tuple(seeds), prune, skip, both)) or [])
    assert main(["--sweep", "--quick", "--task", "text", "--seed", "5", "--seeds", "2",
                 "--prune-thresholds", "none", "--skip-thresholds", "none",
                 "--both", "0.05/0.005"]) == 0
    assert calls == [("text", (5, 6), (), (), ((0.05, 0.005),))]

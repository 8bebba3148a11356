"""gen/omni/studies/accuracy.py: the real tasks (tiny versions fast, the full comparison slow)."""

import dataclasses

import pytest
import torch

from nnrtl.gen.omni.studies.accuracy import (QUICK, TASKS, compare, load_task, pruned_share,
                                    train_run)
from nnrtl.gen.omni.training import MsConfig


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_tasks_load_real_data():
    digits = load_task(QUICK["digits"])
    inputs, labels = digits["train"]
    assert inputs.shape == (1437, 8, 8) and set(labels.tolist()) == set(range(10))
    assert 0 <= float(inputs.min()) and float(inputs.max()) == 1.0
    text = load_task(QUICK["text"])
    inputs, targets = text["train"]
    assert inputs.shape == (320, 20) and torch.equal(inputs[0, 1:], targets[0, :-1])
    assert text["classes"] > 60


def test_decomposition_trains_as_pytorch_does():
    spec = dataclasses.replace(QUICK["digits"], epochs=2)
    torch_run = train_run(spec)
    ours = train_run(spec, MsConfig())
    assert ours["losses"] == pytest.approx(torch_run["losses"], rel=1e-5)
    assert ours["value"] == torch_run["value"] > 0.2


def test_quick_ms1_ms2_text_run():
    spec = QUICK["text"]
    run = train_run(spec, MsConfig(ms1=True, ms2=True, loss_type=spec.loss_type))
    assert run["skipped_per_epoch"][:3] == [0.0, 0.0, 0.0]
    assert max(run["skipped_per_epoch"][3:]) > 0
    assert 0 < run["p1_density"] < 1
    assert run["losses"][-1] < run["losses"][0]
    assert 0 <= run["dropped_predicted"] <= 1 and 0 <= run["dropped_measured"] <= 1


@pytest.mark.slow
def test_digits_within_one_percent_of_pytorch():
    results = compare(TASKS["digits"])
    assert [r["run"] for r in results] == ["pytorch", "baseline", "ms1", "ms2", "ms1+ms2"]
    for result in results:
        assert abs(result["relative_difference"]) <= 0.01, result
    assert results[4]["stored_reduction"] > 0.5


@pytest.mark.slow
def test_text_language_model_against_pytorch():
    """The decomposition without MS is within 1 % of PyTorch. MS1 (θ = 0.1) and MS2 are
    NOT within 1 % on this task (measured +8.3 %, +6.3 %, both +17.5 % perplexity; the
    seed-to-seed spread of PyTorch itself is -0.7 .. +1.5 %): pinned at 20 % so that a
    regression shows; why, measured, in gen/omni/studies/accuracy.py. MS2 skips cells that carry
    real gradient here: the measured share exceeds eq. 4's prediction."""
    results = compare(TASKS["text"])
    assert abs(results[1]["relative_difference"]) <= 0.01, results[1]
    for result in results[2:]:
        assert result["relative_difference"] <= 0.20, result
        assert result["stored_reduction"] > 0.1, result
    for result in results[3:]:
        assert result["dropped_measured"] > 2 * result["dropped_predicted"], result


@pytest.mark.slow
def test_text_at_40_epochs_both_within_one_percent_of_exact():
    """Issue 13's text configuration (gen/omni/studies/accuracy.py): 40 epochs, the gradient norm
    clipped to 1.0, seed 1: MS1+MS2 at MsConfig's defaults (θ 0.05, F 0.002) no more than
    1 % worse in perplexity than the decomposition without MS of the same seed (measured
    2.38 % better), storing more than 5 % less (measured 5.8 %). About 130 s."""
    spec = dataclasses.replace(TASKS["text"], epochs=40, grad_clip=1.0)
    task = load_task(spec)
    exact = train_run(spec, MsConfig(loss_type=spec.loss_type), 1, task)
    both = train_run(spec, MsConfig(ms1=True, ms2=True, loss_type=spec.loss_type), 1, task)
    assert both["value"] / exact["value"] - 1 <= 0.01, (both["value"], exact["value"])
    saved = 1 - both["stored_bytes_per_iteration"] / exact["stored_bytes_per_iteration"]
    assert saved > 0.05, saved

def test_pruned_share_of_the_part1_vectors():
    """The smallest values carry at most their count's share of the mass; at
    initialisation (small weights) the forget gate f = p_S sits near 0.5, never below
    θ = 0.1, while o (1 - o) tanh(s) is bounded by 0.25 |tanh(s)|."""
    spec = dataclasses.replace(QUICK["digits"], epochs=0)      # the shares before training
    results = pruned_share(spec)
    assert [r["at"] for r in results] == ["init"]
    for result in results:
        for name in ("p_o", "p_s", "p_i", "p_f", "p_c", "p_S"):
            assert len(result[name]) == spec.layers
            for count, mass in result[name]:
                assert 0 <= mass <= count <= 1
    assert results[0]["p_S"] == [[0.0, 0.0]] * spec.layers
    assert all(count > 0.5 for count, _ in results[0]["p_o"])

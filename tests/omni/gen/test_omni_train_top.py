"""Training through the η-LSTM top (nnrtl.gen.omni.train_top, bench
nnrtl.sim.tb.omni.train_top): ``nnrtl train omni --backend rtl --param channels=...`` runs
each step's FW and BP task graphs through OmniTop under Verilator; the trained model equals
the golden backend's bit for bit, the step is within the bound of PyTorch's, and the top's
``cycles`` counter equals the R2A model's schedule of the graph. With MS1 the P1 records go
through the DMA. The configuration's choice and refusals; a failing run raises."""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

from nnrtl.gen.cli import main
from nnrtl.gen.errors import CheckFailed, UsageError
from nnrtl.gen.farnn.studies.accuracy import random_network
from nnrtl.gen.models import load_network
from nnrtl.gen.omni.perf import step_cycles
from nnrtl.gen.omni.top_passes import StepGraph
from nnrtl.gen.omni.trainer import OmniTrainer, config_for
from nnrtl.hw.omni.top_config import OmniConfig


def _data(tmp_path, layers=2, batch=2, length=2):
    torch.manual_seed(7)
    torch.save(torch.nn.LSTM(3, 5, num_layers=layers).state_dict(), tmp_path / "lstm.pt")
    rng = np.random.default_rng(7)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (batch, length, 3)))
    np.save(tmp_path / "y.npy", rng.uniform(-1, 1, (batch, length, 5)))


def _train(capsys, tmp_path, backend, name, *extra, steps=1):
    code = main(["train", "omni", "--board", "vcu128", "--model", str(tmp_path / "lstm.pt"),
                 "--inputs", str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"),
                 "--backend", backend, "--param", "channels=3", "--param",
                 "pes_per_channel=4", "--lr", "0.5", "--steps", str(steps),
                 "-o", str(tmp_path / name), *extra])
    capsys.readouterr()
    assert code == 0
    record = json.loads((tmp_path / name / "train.json").read_text())
    return record, load_network(tmp_path / name / "model.pt").parameters()


def _check_top_step(step, top, ms1):
    """A step's top counters: each run's ``cycles`` counter the R2A model's schedule of
    the tiled graph (computed here from the graph's shape), the busy channel-cycles
    within the channels' cycles, the step's sums."""
    assert [run["phase"] for run in step["runs"]] == ["fw", "bp"]
    kept = np.ones((top.layers, top.seq_len), bool)
    for run in step["runs"]:
        graph = StepGraph.of_shape(top, run["phase"], kept, ms1)
        assert run["tasks"] == len(graph.tasks)
        assert run["windows"] == -(-len(graph.tasks) // top.max_tasks)
        assert (run["cycles"], run["swings"]) == step_cycles(top, graph.tasks)
        assert run["cycles"] == run["model_cycles"]
        assert 0 < run["busy_matmul"] + run["busy_ew"] <= top.channels * run["cycles"]
    for name in ("cycles", "swings", "busy_matmul", "busy_ew"):
        assert step[name] == sum(run[name] for run in step["runs"])


@pytest.mark.timeout(600)
def test_ms1_ms2_step_through_the_top_equals_golden(capsys, tmp_path):
    """One step with MS1 and MS2 (1 layer x 2 steps x batch 1, 3 channels of 4 PEs: 3
    tiles a cell, 12 FW tasks, 21 BP tasks): every beat bit-exact (else the command
    fails), the model the golden backend's bit for bit, the cycles the model's, and the
    P1 records through the DMA: written and read back, values kept + pruned = every P1
    value of the 2 cells, one record on each of two HBM ports; the memory term's record
    bytes the DMAs' counters."""
    _data(tmp_path, layers=1, batch=1)
    ports = ("--param", "hbm_ports=2")
    record, rtl = _train(capsys, tmp_path, "rtl", "rtl", "--ms1", "--ms2", *ports)
    _, golden = _train(capsys, tmp_path, "golden", "golden", "--ms1", "--ms2", *ports)
    for name, value in golden.items():
        assert np.array_equal(value, rtl[name]), name
    (step,) = record["steps"]
    top = OmniConfig(**record["config"]["top"])
    _check_top_step(step, top, ms1=True)
    assert [run["tasks"] for run in step["runs"]] == [12, 21]
    fw = step["runs"][0]
    assert fw["values_kept"] + fw["values_pruned"] == 2 * 6 * 5
    assert fw["bytes_written"] == fw["bytes_read"] > 0
    assert step["dma_bytes"] == 2 * fw["bytes_written"]
    assert step["p1_density"] == fw["values_kept"] / 60
    # the memory term: MS1's record bytes the model counts are the DMA's byte counters
    assert step["memory_intermediates"] == pytest.approx(step["dma_bytes"], abs=1e-6)
    kept = 2 - step["skipped_cells"]
    params = 4 * 4 * 5 * (3 + 5 + 1)
    moved = ((2 + kept) * params + 2 * kept * params + 2 * kept * 4 * (3 + 5)
             + 2 * (kept * 6 + 4 * fw["values_kept"]) + 2 * 2 * 4 * (3 + 5))
    assert step["memory_bytes"] == pytest.approx(moved)
    # two ports of 32 bytes a cycle
    assert top.hbm_ports == 2
    assert step["memory_cycles"] == -(-moved // 64) and step["hbm_ports"] == 2
    assert step["bound"] == ("memory" if step["memory_cycles"] > step["cycles"]
                             else "compute")
    assert step["bound_cycles"] == max(step["cycles"], step["memory_cycles"])


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_steps_through_the_top_within_the_bound(capsys, tmp_path):
    """The issue's command (2 layers x 2 steps x batch 2, 2 steps), the baseline: within
    the bound of PyTorch's step, the golden backend's model, the model's cycles; the BP
    run in two windows of the task table."""
    _data(tmp_path)
    record, rtl = _train(capsys, tmp_path, "rtl", "rtl", steps=2)
    _, golden = _train(capsys, tmp_path, "golden", "golden", steps=2)
    assert record["within_bound"] is True
    for name, value in golden.items():
        assert np.array_equal(value, rtl[name]), name
    top = OmniConfig(**record["config"]["top"])
    for step in record["steps"]:
        _check_top_step(step, top, ms1=False)
        assert step["swings"] > 0


def test_top_parameters_choose_the_top():
    network = random_network("lstm", 3, 5, 0, 2, seed=1)
    config = config_for(network, 2, 1, ["channels=3", "pes_per_channel=4"])
    assert config.top == OmniConfig(input_size=3, hidden_size=5, layers=2, seq_len=2,
                                    batch=1, channels=3, pes_per_channel=4,
                                    swing_channels=2, max_tasks=24,
                                    prune_threshold=0.05, hbm_ports=1)
    assert config.channels == (config.top.layer_channel(0), config.top.layer_channel(1))
    assert config_for(network, 2, 3, ["pes_per_channel=4"]).top is None
    assert config_for(network, 20, 8, ["channels=4"]).top.max_tasks == 64
    assert config_for(network, 2, 1, ["hbm_ports=3"]).top.hbm_ports == 3


def test_top_parameter_refusals():
    network = random_network("lstm", 3, 5, 0, 2, seed=1)
    with pytest.raises(UsageError, match=r"^parameter seq_len comes from the model and the "
                                         r"data \(2\); do not give it with --model$"):
        config_for(network, 2, 1, ["channels=3", "seq_len=4"])
    with pytest.raises(UsageError, match=r"multiplier_stages"):
        config_for(network, 2, 1, ["channels=3", "multiplier_stages=3"])
    uneven = dataclasses.replace(network, layers=(
        network.layers[0], random_network("lstm", 5, 4, 0, 1, seed=2).layers[0]))
    with pytest.raises(UsageError, match=r"^layer 1 has hidden size 4, layer 0 5: the "
                                         r"top's channels run one hidden size"):
        config_for(uneven, 2, 1, ["channels=3"])


def test_a_failing_top_run_raises(monkeypatch):
    from nnrtl.sim import runner

    network = random_network("lstm", 3, 5, 0, 1, seed=1)
    trainer = OmniTrainer(config_for(network, 2, 1, ["channels=2", "pes_per_channel=2"]),
                          "rtl")
    trainer._top._verilog = "module nnrtl_omni; endmodule"
    monkeypatch.setattr(runner, "simulate", lambda *a, **k: {
        "bit_exact": False, "mismatches": 2, "first_mismatch": {"task": 1},
        "failures": ["window 0 (tasks 0-3): waiting for tasks [3]"]})
    with pytest.raises(CheckFailed, match=re.escape(
            "the step's FW run on the top RTL is not bit-exact against the golden model or "
            "failed its checks: 2 result beats differ (first {'task': 1}); failures "
            "['window 0 (tasks 0-3): waiting for tasks [3]']; its outputs are not used")):
        trainer.forward(network, np.zeros((2, 1, 3)))

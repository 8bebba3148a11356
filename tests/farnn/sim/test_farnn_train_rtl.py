"""``nnrtl train farnn --backend rtl``: every layer pass of every SGD step runs the engine
under Verilator on the trainer's data (:mod:`nnrtl.gen.farnn.rtl`), and the updated
weights equal the golden backend's bit for bit (the FPGA part is bit-exact, the host part
deterministic on the CPU); ``train.json`` carries the RTL's counters; a pass that is not
bit-exact or overruns its budget stops the command with exit code 1 (a failed check) and
the bench's reason, writing nothing.

The engines are those of ``tests/farnn/sim/test_farnn_verilator.py`` (the Verilog does not
depend on the sequence length, the input size or the number of layers): the Verilator
builds are shared with it, and each pass then takes seconds.
"""

import json
import re

import numpy as np
import pytest
import torch

from nnrtl.gen.cli import main
from nnrtl.gen.models import load_network
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.hw.farnn.schedule import run_cycles
from nnrtl.sim.tb.engine_bench import FAULT_ENV

pytestmark = pytest.mark.timeout(900)    # a Verilator build when the cache is cold

#: --param of the engines of test_farnn_verilator.py: lstm-s2-b1 and gru-s2-split-b2.
LSTM_PARAMS = ["chains=2", "chain_length=2", "split=1"]
GRU_PARAMS = ["chains=2", "chain_length=2", "split=2"]


def lstm_files(tmp_path, steps=3):
    """A 1-layer nn.LSTM(3, 7) state_dict, one sequence of ``steps`` steps, mse targets."""
    torch.manual_seed(11)
    torch.save(torch.nn.LSTM(3, 7).state_dict(), tmp_path / "lstm.pt")
    rng = np.random.default_rng(11)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (steps, 3)))
    np.save(tmp_path / "y.npy", rng.uniform(-1, 1, (steps, 7)))
    return tmp_path / "lstm.pt"


def gru_files(tmp_path):
    """A 2-layer nn.GRU(3, 5) state_dict, batch 2 of 3 steps, cross-entropy targets."""
    torch.manual_seed(12)
    torch.save(torch.nn.GRU(3, 5, num_layers=2).state_dict(), tmp_path / "gru.pt")
    rng = np.random.default_rng(12)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (2, 3, 3)))
    np.save(tmp_path / "y.npy", np.array([1, 4]))
    return tmp_path / "gru.pt"


def train(tmp_path, model, backend, params, out, *extra):
    args = ["train", "farnn", "--board", "vu9p", "--model", str(model),
            "--inputs", str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"),
            "--lr", "0.5", "--backend", backend, "-o", str(tmp_path / out), *extra]
    return main(args + [f"--param={p}" for p in params])


def same_weights(a, b):
    pa, pb = load_network(a).parameters(), load_network(b).parameters()
    assert set(pa) == set(pb)
    for name in pa:
        assert pa[name].dtype == pb[name].dtype
        assert np.array_equal(pa[name], pb[name]), name       # bit for bit


def check_record(record, config, layers, steps):
    """train.json of an rtl run: the RTL's counters per pass and summed; gapless, each
    pass's cycles are the cycle model's; useful MACs FW T steps, BW T - 1 (its first step
    runs no MVM)."""
    assert record["backend"] == "rtl"
    per_step = config.batch * config.units * config.hidden_size ** 2
    for step in record["steps"]:
        passes = step["passes"]
        assert [(p["layer"], p["phase"]) for p in passes] == (
            [(i, "fw") for i in range(layers)] + [(i, "bw") for i in reversed(range(layers))])
        for p in passes:
            assert p["cycles"] == run_cycles(config, p["phase"], steps)
            assert p["useful_macs"] == per_step * (steps if p["phase"] == "fw" else steps - 1)
            assert p["seconds"] > 0
        for name in ("cycles", "mac_cycles", "load_cycles", "useful_macs"):
            assert step[name] == sum(p[name] for p in passes) > 0
        assert step["utilization"] == step["useful_macs"] / (config.pes * step["cycles"])
        assert step["within_bound"] is True
    # one Verilator build for every pass and layer: all but the first run hit the cache
    runs = [p for step in record["steps"] for p in step["passes"]]
    assert all(p["build_cached"] for p in runs[1:])


def test_lstm_one_layer_rtl_equals_golden(tmp_path, capsys):
    model = lstm_files(tmp_path)
    assert train(tmp_path, model, "rtl", LSTM_PARAMS, "rtl", "--steps", "2") == 0
    assert train(tmp_path, model, "golden", LSTM_PARAMS, "golden", "--steps", "2") == 0
    same_weights(tmp_path / "rtl" / "model.pt", tmp_path / "golden" / "model.pt")
    record = json.loads((tmp_path / "rtl" / "train.json").read_text())
    config = FarnnConfig(**record["config"])
    # test_farnn_verilator.py's lstm-s2-b1, whose Verilog a run of both files converts once
    assert config == FarnnConfig(cell="lstm", input_size=3, hidden_size=7, layers=1,
                                 seq_len=3, batch=1, chains=2, chain_length=2, split=1)
    check_record(record, config, layers=1, steps=3)
    golden = json.loads((tmp_path / "golden" / "train.json").read_text())
    assert [s["loss"] for s in record["steps"]] == [s["loss"] for s in golden["steps"]]


def test_gru_two_layers_rtl_equals_golden(tmp_path):
    """H = 5 (odd) on 4 PEs: two rounds, the last split by 2; batch 2; two layers, so the
    FW of layer 1 takes layer 0's RTL outputs and the BW of layer 0 the host's BW input
    MVM of layer 1's RTL deltas. One step (the LSTM test runs two)."""
    model = gru_files(tmp_path)
    params = GRU_PARAMS
    extra = ("--loss", "cross-entropy", "--steps", "1")
    assert train(tmp_path, model, "rtl", params, "rtl", *extra) == 0
    assert train(tmp_path, model, "golden", params, "golden", *extra) == 0
    same_weights(tmp_path / "rtl" / "model.pt", tmp_path / "golden" / "model.pt")
    record = json.loads((tmp_path / "rtl" / "train.json").read_text())
    config = FarnnConfig(**record["config"])
    assert (config.cell, config.layers, config.batch, config.split) == ("gru", 2, 2, 2)
    check_record(record, config, layers=2, steps=3)


@pytest.mark.parametrize("fault, reason", [
    ("corrupt-golden", r"layer 0's FW pass on the RTL is not bit-exact against the golden "
                       r"model: 1 words differ, the first \{'stream': 'm_h', 'index': 0, "
                       r".*\}; its outputs are not used"),
    ("stall-sink", r"layer 0's FW pass on the RTL failed: budget overrun: waiting for m_h fw "
                   r"frame 0 at cycle \d+.* \(log .*sim\.log\)"),
])
def test_a_failed_pass_stops_training(tmp_path, capsys, monkeypatch, fault, reason):
    """A wrong word (the checker's expected word flipped) or a stalled output (the
    bench's budget ends the wait): exit 1, the reason on stderr, no output directory."""
    model = lstm_files(tmp_path)
    monkeypatch.setenv(FAULT_ENV, fault)
    assert train(tmp_path, model, "rtl", LSTM_PARAMS, "out") == 1
    err = capsys.readouterr().err
    # a Verilator build this test happens to run first reports its progress on stderr too,
    # and train says first where each layer of the model runs
    lines = [line for line in err.splitlines()
             if not line.startswith(("building nnrtl_", "Verilator build of nnrtl_", "train: "))]
    assert len(lines) == 1 and lines[0].startswith("nnrtl: check failed: "), err
    assert re.search(reason, lines[0]), err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow         # the projection's RTL: four patterns in test_farnn_verilator.py
def test_lstm_projection_two_layers_rtl_equals_golden(tmp_path):
    """nn.LSTM(3, 7, proj_size=3, num_layers=2): the top runs R on the projected state and
    the projection (FW), and their transposes (BW); layer 1 takes layer 0's 3 projected
    outputs. One step; the weights equal the golden backend's bit for bit and each pass's
    cycles the cycle model's."""
    torch.manual_seed(13)
    torch.save(torch.nn.LSTM(3, 7, proj_size=3, num_layers=2).state_dict(),
               tmp_path / "proj.pt")
    rng = np.random.default_rng(13)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (3, 3)))
    np.save(tmp_path / "y.npy", rng.uniform(-1, 1, (3, 3)))
    model = tmp_path / "proj.pt"
    assert train(tmp_path, model, "rtl", LSTM_PARAMS, "rtl", "--steps", "1") == 0
    assert train(tmp_path, model, "golden", LSTM_PARAMS, "golden", "--steps", "1") == 0
    same_weights(tmp_path / "rtl" / "model.pt", tmp_path / "golden" / "model.pt")
    record = json.loads((tmp_path / "rtl" / "train.json").read_text())
    config = FarnnConfig(**record["config"])
    assert (config.proj_size, config.layers) == (3, 2)
    (step,) = record["steps"]
    assert [(p["layer"], p["phase"]) for p in step["passes"]] == [
        (0, "fw"), (1, "fw"), (1, "bw"), (0, "bw")]
    for p in step["passes"]:
        assert p["cycles"] == run_cycles(config, p["phase"], 3)
    assert step["within_bound"] is True

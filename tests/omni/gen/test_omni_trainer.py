"""The omni engine's training step (nnrtl.gen.omni.trainer): LSTM cells through the
channel's golden programs (and one step through the Channel RTL), the rest through
nnrtl.gen.train's functions, against PyTorch float64's own SGD step; MS1 and MS2 at
threshold 0 give the baseline's gradients bit for bit; the options' errors."""

import json
import re
import types

import numpy as np
import pytest
import torch

from nnrtl.gen import train as interface
from nnrtl.gen.errors import UsageError
from nnrtl.gen.farnn.studies.accuracy import random_network, reference_gradients
from nnrtl.gen.models import LSTM, Network
from nnrtl.gen.omni.trainer import (OmniTrainConfig, OmniTrainer, config_for, gradient_bound,
                                    parse_options, train_hook)
from nnrtl.gen.omni.training import MsConfig

from train_step import interface_step


def step(network, x, y, loss, lr, params=(), options=()):
    """One step through the interface's functions: (update difference, bound, trainer)."""
    return interface_step(network, lambda steps, size: OmniTrainer(config_for(
        network, steps, size, params, parse_options(options, loss))), x, y, loss, lr)


@pytest.mark.parametrize("layers, inputs, hidden, loss, params", [
    (1, 3, 5, "mse", ("pes_per_channel=4",)),
    (2, 5, 7, "cross-entropy", ()),
])
def test_step_matches_float64_sgd(layers, inputs, hidden, loss, params):
    """Odd sizes (rounds of 4 lanes with tails; the paper's 32 lanes), both losses: the
    update is within lr * bound of PyTorch float64's, and the bound keeps two orders of
    magnitude over the measured difference (module docstring of the trainer)."""
    network = random_network("lstm", inputs, hidden, 0, layers, seed=layers)
    rng = np.random.default_rng(layers)
    x = rng.uniform(-1, 1, (2, 3, inputs))                     # batch x seq_len x input
    y = (rng.uniform(-1, 1, (2, 3, hidden)) if loss == "mse"
         else rng.integers(0, hidden, 2))
    difference, bound, trainer = step(network, x, y, loss, 0.5, params)
    assert 0 < difference <= bound / 100
    assert trainer.config.channels[0].pes_per_channel == (4 if params else 32)
    counters = trainer.counters()
    fw = 4 * hidden * (inputs + hidden) + (layers - 1) * 4 * hidden * 2 * hidden
    assert counters["useful_macs"] == 3 * 2 * 3 * fw     # T B (FW + 2 x BP)
    assert counters["skipped_cells"] == 0 and counters["p1_density"] is None


def test_gradients_against_float64_autograd():
    """Every tensor's gradient, directly: 2 layers of different input sizes."""
    network = random_network("lstm", 3, 5, 0, 2, seed=4)
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (3, 2, 3))
    trainer = OmniTrainer(config_for(network, 3, 2, ["pes_per_channel=3"]))
    outputs = trainer.forward(network, x)
    grad_outputs = rng.uniform(-1, 1, outputs.shape) / outputs.size
    engine = trainer.backward(grad_outputs)
    reference = reference_gradients(network, x, grad_outputs)
    assert set(engine) == set(reference)
    for key, value in reference.items():
        assert engine[key].shape == value.shape
        assert np.abs(engine[key] - value).max() < trainer.gradient_bound / 100, key


def test_bound_follows_the_derivation():
    """LN * LL * (2 e_sigma + 2 e_tanh + K u) with the fp32 tables' tested bounds."""
    network = random_network("lstm", 8, 8, 0, 2, seed=0)
    config = config_for(network, 10, 1)
    delta = 2 * 5e-6 + 2 * 1e-5 + 32 * 2.0 ** -24
    assert gradient_bound(config) == pytest.approx(2 * 10 * delta, rel=1e-12)
    assert gradient_bound(config) == pytest.approx(6.4e-4, rel=0.01)


@pytest.mark.slow
def test_fp32_table_errors_are_the_measured_ones():
    """The bound's fp32 table errors cover max_abs_error's measurement."""
    from nnrtl.gen.omni.train_bound import FP32_TABLE_ERRORS, _measured_error
    from nnrtl.hw.arith.float_format import FP32
    for function, bound in FP32_TABLE_ERRORS.items():
        assert 0.9 * bound < _measured_error(function, FP32, 6, False) <= bound


def _gradients(network, x, loss_of, steps, options):
    """Gradients of ``steps`` steps on the same weights and data."""
    config = config_for(network, x.shape[0], x.shape[1], ["pes_per_channel=4"],
                        parse_options(options, "mse"))
    trainer = OmniTrainer(config, loss_of=loss_of)
    out = []
    for _ in range(steps):
        outputs = trainer.forward(network, x)
        out.append(trainer.backward(outputs * 0.1))
    return out, trainer


def test_thresholds_zero_give_the_baseline_bit_for_bit():
    """MS1 at θ = 0 and MS2 at threshold 0, alone (one step) and together (four steps:
    MS2's predictor runs from step 4): every gradient equal to the baseline's bit for
    bit."""
    network = random_network("lstm", 3, 5, 0, 1, seed=2)
    x = np.random.default_rng(2).uniform(-1, 1, (3, 1, 3))
    losses = iter(np.linspace(1.0, 0.5, 100))

    def loss_of(outputs):
        return next(losses)
    baseline, _ = _gradients(network, x, loss_of, 4, ())
    for steps, options in ((1, ("--ms1", "--prune-threshold", "0")),
                           (1, ("--ms2", "--skip-threshold=0")),
                           (4, ("--ms1", "--ms2", "--prune-threshold=0", "--skip-threshold",
                                "0"))):
        got, trainer = _gradients(network, x, loss_of, steps, options)
        assert len(got) == steps
        for want, have in zip(baseline, got):
            for key in want:
                assert np.array_equal(want[key], have[key]), (options, key)
        if "--ms1" in options:
            assert trainer.counters()["p1_density"] == 1.0


def test_ms1_prunes_and_ms2_skips():
    """θ = 0.1 prunes P1 values (density below 1, fewer bytes stored, gradients near the
    baseline's but not equal); MS2 at 0.5 skips cells from step 4 on, scaled."""
    network = random_network("lstm", 3, 5, 0, 1, seed=2)
    x = np.random.default_rng(2).uniform(-1, 1, (4, 1, 3))
    losses = iter([1.0, 0.6, 0.45, 0.4, 0.38])
    (base,), plain = _gradients(network, x, None, 1, ())
    (ms1,), pruned = _gradients(network, x, None, 1, ("--ms1", "--prune-threshold", "0.1"))
    density = pruned.counters()["p1_density"]
    assert 0.2 < density < 1
    assert pruned.counters()["stored_bytes"] < plain.counters()["stored_bytes"]
    scale = np.abs(base[(0, "weight_hh")]).max()
    difference = np.abs(ms1[(0, "weight_hh")] - base[(0, "weight_hh")]).max()
    assert 0 < difference < scale
    grads, skipping = _gradients(network, x, lambda outputs: next(losses), 4,
                                 ("--ms2", "--skip-threshold", "0.5"))
    counters = skipping.counters()
    assert counters["skipped_cells"] > 0
    assert counters["useful_macs"] < skipping.config.useful_macs
    assert not np.array_equal(grads[3][(0, "weight_ih")], grads[0][(0, "weight_ih")])


@pytest.mark.parametrize("options, message", [
    (("--ms3",), r"^unknown option '--ms3' for nnrtl train omni; its options: --ms1, "
                 r"--ms2, --prune-threshold, --skip-threshold$"),
    (("--ms1", "--prune-threshold"), r"^argument --prune-threshold: expected one "
                                      r"argument$"),
    (("--ms1", "--prune-threshold", "abc"), r"^argument --prune-threshold: invalid float "
                                             r"value: 'abc'$"),
    (("--ms1", "--prune-threshold=-0.5"), r"^--prune-threshold must be a finite number "
                                           r">= 0, not -0\.5$"),
    (("--prune-threshold", "0.2"), r"^--prune-threshold applies to --ms1: give --ms1 "
                                    r"too$"),
    (("--ms2", "--skip-threshold", "1.5"), r"^--skip-threshold must be a number from 0 "
                                           r"to below 1, not 1\.5$"),
    (("--ms2=1",), r"^argument --ms2: ignored explicit argument '1'$"),
])
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        parse_options(options)


def test_bad_models_and_params():
    gru = random_network("gru", 3, 4, 0, 1)
    with pytest.raises(UsageError, match=r"^layer 0 of the model is GRU; the omni engine "
                                         r"trains LSTM layers$"):
        config_for(gru, 2, 1)
    proj = random_network("lstm", 3, 4, 2, 1)
    with pytest.raises(UsageError, match=r"^layer 0 of the model has proj_size 2; the omni "
                                         r"engine trains LSTM layers without projection$"):
        config_for(proj, 2, 1)
    lstm = random_network("lstm", 3, 4, 0, 1)
    with pytest.raises(UsageError, match=r"^parameter hidden_size comes from the model "
                                         r"\(4\); do not give it with --model$"):
        config_for(lstm, 2, 1, ["hidden_size=8"])
    with pytest.raises(UsageError, match=r"^max_length \(10\) cannot be less than the "
                                         r"longest job of the cell programs \(16\)$"):
        config_for(lstm, 2, 1, ["max_length=10"])
    rng = np.random.default_rng(0)
    widening = Network(layers=(
        LSTM(weight_ih=rng.normal(size=(8, 3)), weight_hh=rng.normal(size=(8, 2))),
        LSTM(weight_ih=rng.normal(size=(20, 2)), weight_hh=rng.normal(size=(20, 5)))))
    with pytest.raises(UsageError, match=r"^parameter max_length \(10\) cannot be less "
                                         r"than the longest job of the layers \(20\)$"):
        config_for(widening, 2, 1, ["max_length=10"])
    config = config_for(widening, 2, 1)
    assert [c.max_length for c in config.channels] == [20, 20]
    with pytest.raises(UsageError, match=r"^--backend must be one of golden, rtl for the "
                                         r"omni engine, not 'fpga'$"):
        OmniTrainer(config_for(lstm, 2, 1), "fpga")
    with pytest.raises(TypeError, match=r"^config must be an OmniTrainConfig, not 3$"):
        OmniTrainer(3)
    trainer = OmniTrainer(config_for(lstm, 2, 1, memory=MsConfig(ms2=True)))
    trainer.forward(lstm, np.zeros((2, 1, 3)))
    with pytest.raises(ValueError, match=r"^MS2 needs each step's loss \(for eq\. 5\): give "
                                         r"loss_of, or observe_loss before backward$"):
        trainer.backward(np.zeros((2, 1, 4)))


def test_train_through_the_interface(tmp_path):
    """gen/train.py's ``train`` with the omni hook (the path of ``nnrtl train omni``): a
    state_dict, cross-entropy, two steps with --ms1 --ms2; train.json records the
    bound, the configuration and the stored bytes."""
    torch.manual_seed(5)
    torch.save(torch.nn.LSTM(3, 5, num_layers=2).state_dict(), tmp_path / "lstm.pt")
    rng = np.random.default_rng(5)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (1, 3, 3)))
    np.save(tmp_path / "y.npy", np.array([4]))
    from nnrtl.boards import get_board
    request = interface.TrainRequest(
        board=get_board("vcu128"), model=tmp_path / "lstm.pt", inputs=tmp_path / "x.npy",
        targets=tmp_path / "y.npy", loss="cross-entropy", lr=0.5, steps=2,
        params=("pes_per_channel=4",), options=("--ms1", "--prune-threshold", "0",
                                                "--ms2"))
    summary = interface.train(types.SimpleNamespace(name="omni"), train_hook, request,
                              tmp_path / "run")
    assert summary["within_bound"] and len(summary["loss"]) == 2
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["config"]["memory"] == {"ms1": True, "prune_threshold": 0.0, "ms2": True,
                                          "skip_threshold": 0.002, "loss_type": "single",
                                          "scaling": "predicted"}
    assert record["config"]["channels"][1]["input_size"] == 5
    assert record["steps"][0]["p1_density"] == 1.0
    assert record["gradient_bound"] > record["steps"][1]["update_max_abs_diff"] / 0.5


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("options", [(), ("--ms1",)])
def test_rtl_step_equals_the_golden_step(tmp_path, options):
    """One step with --backend rtl (a 4-lane channel under Verilator, one build of about
    two minutes for both runs) through gen/train.py's ``train``: within the bound of
    PyTorch float64's step, and the trained model equal bit for bit to the golden
    backend's (the RTL checked beat by beat against the golden model); MS1 at the default θ
    runs the FW-with-P1 and the BP-without-P1 programs on the RTL."""
    from nnrtl.boards import get_board
    from nnrtl.gen.models import load_network

    torch.manual_seed(7)
    torch.save(torch.nn.LSTM(3, 5).state_dict(), tmp_path / "lstm.pt")
    rng = np.random.default_rng(7)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (2, 2, 3)))
    np.save(tmp_path / "y.npy", rng.uniform(-1, 1, (2, 2, 5)))
    runs = {}
    for backend in ("rtl", "golden"):
        request = interface.TrainRequest(
            board=get_board("vcu128"), model=tmp_path / "lstm.pt",
            inputs=tmp_path / "x.npy", targets=tmp_path / "y.npy", loss="mse", lr=0.5,
            backend=backend, params=("pes_per_channel=4",), options=options)
        summary = interface.train(types.SimpleNamespace(name="omni"), train_hook, request,
                                  tmp_path / backend)
        runs[backend] = load_network(tmp_path / backend / "model.pt").parameters()
        if not options:
            assert summary["within_bound"]
    rtl = json.loads((tmp_path / "rtl" / "train.json").read_text())["steps"][0]
    assert [p["phase"] for p in rtl["passes"]] == ["fw", "bp"]
    assert rtl["cycles"] == sum(p["cycles"] for p in rtl["passes"]) > 0
    assert all(p["cells"] == 4 for p in rtl["passes"])
    for name, value in runs["golden"].items():
        assert np.array_equal(value, runs["rtl"][name]), name


def test_config_checks():
    lstm = random_network("lstm", 3, 4, 0, 1)
    good = config_for(lstm, 2, 1)
    with pytest.raises(TypeError, match=r"^channels must be a non-empty tuple of "
                                        r"ChannelConfig, not \(\)$"):
        OmniTrainConfig((), 2, 1)
    with pytest.raises(TypeError, match=r"^seq_len must be a positive integer, not 0$"):
        OmniTrainConfig(good.channels, 0, 1)
    with pytest.raises(TypeError, match=r"^batch must be a positive integer, not True$"):
        OmniTrainConfig(good.channels, 2, True)
    with pytest.raises(TypeError, match=r"^memory must be an MsConfig, not None$"):
        OmniTrainConfig(good.channels, 2, 1, None)


def test_rtl_failures_raise_check_failed(monkeypatch):
    """A pass the bench finds not bit-exact, or a bench failure, stops the step with
    CheckFailed naming the layer and the pass (no Verilator: the runner is replaced)."""
    from nnrtl.gen.errors import CheckFailed
    from nnrtl.sim import runner

    lstm = random_network("lstm", 3, 4, 0, 1)
    x = np.zeros((2, 1, 3))
    trainer = OmniTrainer(config_for(lstm, 2, 1, ["pes_per_channel=2"]), "rtl")
    trainer._rtl._verilog = "module omni_channel; endmodule"
    monkeypatch.setattr(runner, "simulate", lambda *a, **k: {
        "bit_exact": False, "mismatches": 3, "first_mismatch": "cell 1 (fw): beat 0"})
    with pytest.raises(CheckFailed, match=r"^layer 0's FW pass on the channel RTL is not "
                                          r"bit-exact against the golden model: 3 result "
                                          r"beats differ, the first cell 1 \(fw\): beat 0; "
                                          r"its outputs are not used$"):
        trainer.forward(lstm, x)

    def fail(*args, **kwargs):
        raise runner.SimulationError("pattern none: waiting for step 3\nmore")
    monkeypatch.setattr(runner, "simulate", fail)
    with pytest.raises(CheckFailed, match=r"^layer 0's FW pass on the channel RTL failed: "
                                          r"pattern none: waiting for step 3$"):
        trainer.forward(lstm, x)


def test_a_pruning_step_is_reported_not_bounded(tmp_path):
    """MS1 at the default θ (0.05) prunes P1 values: the step's update is not SGD's by
    design, so train.json reports its difference and what was approximated,
    ``within_bound`` is None (not applicable) for it and for the run, and nothing
    fails."""
    torch.manual_seed(6)
    torch.save(torch.nn.LSTM(3, 5).state_dict(), tmp_path / "lstm.pt")
    rng = np.random.default_rng(6)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (2, 3, 3)))
    np.save(tmp_path / "y.npy", rng.uniform(-1, 1, (2, 3, 5)))
    from nnrtl.boards import get_board
    request = interface.TrainRequest(
        board=get_board("vcu128"), model=tmp_path / "lstm.pt", inputs=tmp_path / "x.npy",
        targets=tmp_path / "y.npy", loss="mse", lr=0.5, steps=1,
        params=("pes_per_channel=4",), options=("--ms1",))
    summary = interface.train(types.SimpleNamespace(name="omni"), train_hook, request,
                              tmp_path / "run")
    assert summary["within_bound"] is None
    (step,) = json.loads((tmp_path / "run" / "train.json").read_text())["steps"]
    assert step["within_bound"] is None
    assert re.fullmatch(r"MS1 pruned \d+\.\d% of the BP-EW-P1 values \(θ = 0\.05\)",
                        step["approximation"])
    assert step["p1_density"] < 1 and step["update_max_abs_diff"] > 0


def test_only_checked_steps_decide():
    assert interface._all_checked([None, True, None]) is True
    assert interface._all_checked([True, False]) is False
    assert interface._all_checked([None, None]) is None


def test_linear_head_through_the_interface(tmp_path):
    """An LSTM with an nn.Linear head, --ms2 (whose predictor needs each step's loss: the
    whole model's, through :meth:`OmniTrainer.observe_loss`): the head trains on the host
    in the same step, within the bound of PyTorch float64's step of the whole model."""
    torch.manual_seed(6)
    module = torch.nn.ModuleDict({"rnn": torch.nn.LSTM(3, 5), "out": torch.nn.Linear(5, 2)})
    torch.save(module.state_dict(), tmp_path / "m.pt")
    rng = np.random.default_rng(6)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (1, 3, 3)))
    np.save(tmp_path / "y.npy", np.array([1]))
    from nnrtl.boards import get_board
    request = interface.TrainRequest(
        board=get_board("vcu128"), model=tmp_path / "m.pt", inputs=tmp_path / "x.npy",
        targets=tmp_path / "y.npy", loss="cross-entropy", lr=0.5, steps=2,
        params=("pes_per_channel=4",), options=("--ms2",))
    summary = interface.train(types.SimpleNamespace(name="omni"), train_hook, request,
                              tmp_path / "run")
    assert summary["within_bound"]
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["placement"]["host"] == ["Linear(5 -> 2) (out.weight, out.bias)"]
    assert all(0 < s["head_update_max_abs_diff"] <= s["update_bound"]
               for s in record["steps"])
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert not torch.equal(trained["out.bias"], module["out"].bias.detach())


def test_embedding_through_the_interface(tmp_path):
    """Token ids through an nn.Embedding into a 2-layer LSTM and an nn.Linear head: the
    embedding trains on the host from the channel's ``dx`` of layer 0
    (:meth:`OmniTrainer.input_gradient`), all three as PyTorch float64's SGD step of the
    whole model does, within the bound."""
    torch.manual_seed(7)
    module = torch.nn.ModuleDict({"emb": torch.nn.Embedding(6, 3),
                                  "rnn": torch.nn.LSTM(3, 5, num_layers=2),
                                  "out": torch.nn.Linear(5, 4)})
    torch.save(module.state_dict(), tmp_path / "m.pt")
    tokens = np.array([[1, 5, 0], [2, 2, 4]])
    np.save(tmp_path / "x.npy", tokens)
    np.save(tmp_path / "y.npy", np.array([3, 1]))
    from nnrtl.boards import get_board
    request = interface.TrainRequest(
        board=get_board("vcu128"), model=tmp_path / "m.pt", inputs=tmp_path / "x.npy",
        targets=tmp_path / "y.npy", loss="cross-entropy", lr=0.5, steps=1,
        params=("pes_per_channel=4",))
    summary = interface.train(types.SimpleNamespace(name="omni"), train_hook, request,
                              tmp_path / "run")
    assert summary["within_bound"]
    reference = module.double()
    logits = reference["out"](reference["rnn"](reference["emb"](torch.tensor(tokens.T)))[0])
    torch.nn.CrossEntropyLoss()(logits[-1], torch.tensor([3, 1])).backward()
    torch.optim.SGD(reference.parameters(), lr=0.5).step()
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    bound = record["steps"][0]["update_bound"]
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    for name, value in reference.state_dict().items():
        assert (trained[name].double() - value).abs().max() <= bound + 1e-7, name
    assert 0 < record["steps"][0]["embedding_update_max_abs_diff"] <= bound
    assert record["placement"]["host"][0] == "Embedding(6 -> 3) (emb.weight)"
    before = torch.load(tmp_path / "m.pt", weights_only=True)
    assert (trained["emb.weight"] - before["emb.weight"]).abs().max() > 1e-4


@pytest.mark.parametrize("direction, layers", [("reverse", 2), ("bidirectional", 2),
                                               ("bidirectional", 1)])
def test_directions_against_float64_autograd(direction, layers):
    """A reverse layer runs the channel's programs over the reversed steps, a bidirectional
    one twice (its ``_reverse`` tensors on the second pass, the two passes' input deltas
    summed on the host): every gradient and the input gradient against PyTorch's own
    layers' float64 autograd."""
    import dataclasses

    from nnrtl.gen.models import load_state_dict, to_torch

    torch.manual_seed(layers)
    module = torch.nn.LSTM(3, 4, num_layers=layers,
                           bidirectional=direction == "bidirectional")
    network = load_state_dict(module.state_dict())
    if direction == "reverse":
        network = Network(tuple(dataclasses.replace(layer, direction="reverse")
                                for layer in network.layers))
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (4, 2, 3))
    trainer = OmniTrainer(config_for(network, 4, 2, ["pes_per_channel=3"]))
    assert trainer.config.layers == layers * (2 if direction == "bidirectional" else 1)
    outputs = trainer.forward(network, x)
    torch_module = to_torch(network, torch.float64)
    x_leaf = torch.tensor(x, requires_grad=True)
    expected = torch_module(x_leaf)[0]
    assert np.abs(outputs - expected.detach().numpy()).max() < 1e-5
    grad_outputs = rng.uniform(-1, 1, outputs.shape) / outputs.size
    engine = trainer.backward(grad_outputs)
    reference = reference_gradients(network, x, grad_outputs)
    assert set(engine) == set(reference)
    for key, value in reference.items():
        assert np.abs(engine[key] - value).max() < trainer.gradient_bound / 100, key
    (expected * torch.tensor(grad_outputs)).sum().backward()
    assert np.abs(trainer.input_gradient() - x_leaf.grad.numpy()).max() < \
        trainer.gradient_bound / 100
    with pytest.raises(UsageError, match=rf"^layer 0 runs {direction}: the top's task graph "
                                         rf"chains forward layers"):
        config_for(network, 4, 2, ["channels=2"])


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_rtl_bidirectional_step_equals_the_golden_step(tmp_path):
    """A 2-layer bidirectional LSTM with --backend rtl (each direction's passes on the
    4-lane channel under Verilator): the trained model equals the golden backend's bit for
    bit, within the bound of PyTorch float64's step."""
    from nnrtl.gen.cli import main

    torch.manual_seed(7)
    torch.save(torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True).state_dict(),
               tmp_path / "m.pt")
    rng = np.random.default_rng(7)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (2, 4, 3)))
    np.save(tmp_path / "y.npy", rng.uniform(-1, 1, (2, 4, 10)))
    for backend in ("rtl", "golden"):
        assert main(["train", "omni", "--board", "vcu128", "--model", str(tmp_path / "m.pt"),
                     "--inputs", str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"),
                     "--lr", "0.5", "--param", "pes_per_channel=4", "--backend", backend,
                     "-o", str(tmp_path / backend)]) == 0
    rtl = torch.load(tmp_path / "rtl" / "model.pt", weights_only=True)
    golden = torch.load(tmp_path / "golden" / "model.pt", weights_only=True)
    assert all(torch.equal(rtl[name], golden[name]) for name in rtl)
    record = json.loads((tmp_path / "rtl" / "train.json").read_text())["steps"][0]
    assert len(record["passes"]) == 8                 # 2 layers x 2 directions x FW, BP

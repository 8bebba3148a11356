"""The FARNN host side and trainer: the input MVMs with the contract's biases, the R^T
layout, the weight stream's word order (pinned word by word on a tiny engine) and its
unpacking checks, and training steps through :mod:`nnrtl.gen.train`'s functions for LSTM,
GRU and LSTM with projection, 1 to 3 layers, against PyTorch float64."""

import dataclasses
import json
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from nnrtl.gen import train as interface
from nnrtl.gen.errors import UsageError
from nnrtl.gen.farnn import host
from nnrtl.gen.farnn.studies.accuracy import random_network, reference_gradients
from nnrtl.gen.farnn.trainer import (GRADIENT_BOUND, FarnnTrainer, config_for,
                                     train_hook)
from nnrtl.gen.models import GRU, LSTM, Network, load_network
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.sim.golden.farnn.layer import to_bits

from train_step import interface_step


def test_input_mvm_adds_the_host_biases():
    """LSTM: W x + bW + bR for every gate; GRU: bR_n is left to the FPGA."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (3, 2, 4))
    lstm = random_network("lstm", 4, 5).layers[0]
    expected = x @ lstm.weight_ih.T + lstm.bias_ih + lstm.bias_hh
    out = host.input_mvm(lstm, x).cpu().numpy()
    assert out.shape == (3, 2, 4, 5)
    assert np.abs(out.reshape(3, 2, 20) - expected).max() < 1e-6
    gru = random_network("gru", 4, 5).layers[0]
    bias = gru.bias_ih + np.concatenate([gru.bias_hh[:10], np.zeros(5)])
    out = host.input_mvm(gru, x).cpu().numpy()
    assert np.abs(out.reshape(3, 2, 15) - (x @ gru.weight_ih.T + bias)).max() < 1e-6
    d = rng.uniform(-1, 1, (3, 2, 3, 5))
    dx = host.backward_input_mvm(gru, d).cpu().numpy()
    assert np.abs(dx - d.reshape(3, 2, 15) @ gru.weight_ih).max() < 1e-6


def test_transposed_layout():
    weight_hh = np.arange(4 * 3 * 2, dtype=np.float64).reshape(12, 2)   # 4 gates, H 3, P 2
    out = host.transpose_recurrent(weight_hh, 4)
    assert out.shape == (4, 2, 3)
    assert out[2].tolist() == [[12, 14, 16], [13, 15, 17]]   # R_g^T


def tiny(split=1):
    """2 chains x 2 PEs per unit, GRU H = 5, input 3: R_k is 5 x 5."""
    return FarnnConfig(cell="gru", input_size=3, hidden_size=5, chains=2, chain_length=2,
                       split=split)


def test_weight_stream_word_order_unsplit():
    """Rounds of 4 rows: PE k of chain c holds row r * 4 + k * 2 + c at addresses r * 5 ..
    r * 5 + 4; 2 rounds (rows 5-7 zero), D = 10 words per PE, head PE first."""
    config = tiny()
    d = config.weights_per_pe("fw")
    assert d == 10
    r = np.arange(1, 3 * 5 * 5 + 1, dtype=np.uint32).reshape(3, 5, 5)   # word = its tag
    stream = host.pack_weights(config, "fw", r)
    assert stream.shape == (3 * 2 * d, 2) == (config.weight_stream_beats("fw"), 2)
    for unit in range(3):
        base = unit * 2 * d                   # units one after another
        for a in range(5):
            assert stream[base + 0 * d + a].tolist() == [r[unit, 0, a], r[unit, 1, a]]
            assert stream[base + 1 * d + a].tolist() == [r[unit, 2, a], r[unit, 3, a]]
            assert stream[base + 0 * d + 5 + a].tolist() == [r[unit, 4, a], 0]
            assert stream[base + 1 * d + 5 + a].tolist() == [0, 0]
    recurrent, projection = host.unpack_weights(config, "fw", stream)
    assert np.array_equal(recurrent, r) and projection is None


def test_weight_stream_word_order_split():
    """Split by 2: round 0 as unsplit; in the last round (row 4 alone, lanes of 1 chain)
    chain 0's PE 0 holds row 4's chunk 0 (columns 0-2), chain 1's PE 0 its chunk 1
    (columns 3-4 and a zero), at addresses 5-7; the PEs 1 (row 5) hold zeros. D = 8."""
    config = tiny(split=2)
    d = config.weights_per_pe("bw")
    assert d == 5 + 3
    r = np.arange(1, 3 * 5 * 5 + 1, dtype=np.uint32).reshape(3, 5, 5)
    stream = host.pack_weights(config, "bw", r)
    assert stream.shape == (3 * 2 * d, 2)
    for unit in range(3):
        base = unit * 2 * d
        for a in range(5):
            assert stream[base + 0 * d + a].tolist() == [r[unit, 0, a], r[unit, 1, a]]
            assert stream[base + 1 * d + a].tolist() == [r[unit, 2, a], r[unit, 3, a]]
        assert stream[base + 5:base + 8, 0].tolist() == r[unit, 4, 0:3].tolist()
        assert stream[base + 5:base + 8, 1].tolist() == r[unit, 4, 3:5].tolist() + [0]
        assert stream[base + d + 5:base + d + 8].tolist() == [[0, 0]] * 3
    assert np.array_equal(host.unpack_weights(config, "bw", stream)[0], r)


def test_weight_stream_loads_with_a_projection():
    """LSTM H = 3, P = 2 on 2 chains x 1 PE: per unit, the R_k load (3 rows x 2 inputs: 2
    rounds, D = 4) then the unit's block of W_hr (1 row x 3 inputs, D = 3), each a load of
    its own (the projection's words at PE addresses 4-6)."""
    config = FarnnConfig(input_size=1, hidden_size=3, proj_size=2, chains=2, chain_length=1,
                         split=1)
    r = np.arange(1, 4 * 3 * 2 + 1, dtype=np.uint32).reshape(4, 3, 2)
    w_hr = np.arange(100, 106, dtype=np.uint32).reshape(2, 3)
    stream = host.pack_weights(config, "fw", r, w_hr)
    assert stream.shape == (4 * (4 + 3), 2)
    unit = 1
    load = stream[unit * 7:unit * 7 + 4]
    assert load.tolist() == [[r[1, 0, 0], r[1, 1, 0]], [r[1, 0, 1], r[1, 1, 1]],
                             [r[1, 2, 0], 0], [r[1, 2, 1], 0]]
    # unit 1's block of W_hr is row 1 (blocks of ceil(2 / 4) = 1 row); units 2, 3: none
    assert stream[unit * 7 + 4:unit * 7 + 7].tolist() == [[103, 0], [104, 0], [105, 0]]
    assert not stream[2 * 7 + 4:2 * 7 + 7].any() and not stream[3 * 7 + 4:].any()
    back = host.unpack_weights(config, "fw", stream)
    assert np.array_equal(back[0], r) and np.array_equal(back[1], w_hr)


@pytest.mark.parametrize("kwargs", [
    dict(cell="lstm", hidden_size=7, proj_size=3, chains=4, chain_length=1),
    dict(cell="lstm", hidden_size=9, chains=2, chain_length=3, split=1),
    dict(cell="lstm", hidden_size=9, proj_size=5, chains=4, chain_length=2, split=2),
    dict(cell="gru", hidden_size=13, chains=4, chain_length=2),
    dict(cell="lstm", hidden_size=20, proj_size=6, chains=4, chain_length=2),
])
def test_pack_unpack_round_trip(kwargs):
    config = FarnnConfig(input_size=3, **kwargs)
    rng = np.random.default_rng(2)
    h, p, units = config.hidden_size, config.recurrent_size, config.units
    for phase, shapes in (("fw", ((units, h, p), (config.proj_size, h))),
                          ("bw", ((units, p, h), (h, config.proj_size)))):
        recurrent = rng.integers(1, 2 ** 32, shapes[0], dtype=np.uint32)
        projection = (rng.integers(1, 2 ** 32, shapes[1], dtype=np.uint32)
                      if config.proj_size else None)
        stream = host.pack_weights(config, phase, recurrent, projection)
        assert stream.shape == (config.weight_stream_beats(phase), config.chains)
        back = host.unpack_weights(config, phase, stream)
        assert np.array_equal(back[0], recurrent)
        assert (back[1] is None) == (projection is None)
        if projection is not None:
            assert np.array_equal(back[1], projection)
        # every weight is sent once; the rest is zero padding
        assert np.count_nonzero(stream) == recurrent.size + (
            0 if projection is None else projection.size)


def test_unpack_rejects_a_wrong_stream():
    config = tiny(split=2)
    stream = host.pack_weights(config, "fw", np.ones((3, 5, 5), np.uint32))
    with pytest.raises(UsageError, match=r"^the fw weight stream must be 48 beats of 2 words "
                                         r"for FarnnConfig\(.*\), not \(47, 2\)$"):
        host.unpack_weights(config, "fw", stream[:47])
    stream[7, 1] = 5                          # chunk 1's third word: column 5 of row 4
    with pytest.raises(UsageError, match=r"^the fw weight stream has a nonzero padding word "
                                         r"in unit 0's recurrent load \(beats 0 to 15\): not in "
                                         r"the order of nnrtl\.gen\.farnn\.host$"):
        host.unpack_weights(config, "fw", stream)
    with pytest.raises(ValueError, match=r"^the recurrent_t matrices must have shape "
                                         r"\(3, 5, 5\), not \(3, 5, 4\)$"):
        host.pack_weights(config, "bw", np.ones((3, 5, 4), np.uint32))


def test_config_for_a_model():
    network = random_network("lstm", 3, 20, proj_size=6, layers=2)
    config = config_for(network, 7, 2)
    assert (config.cell, config.input_size, config.hidden_size, config.proj_size,
            config.layers, config.seq_len, config.batch) == ("lstm", 3, 20, 6, 2, 7, 2)
    assert config.chain_length == 1 and config.fits        # a small model, a small engine
    big = random_network("lstm", 8, 1024)
    assert config_for(big, 2, 1).chain_length == 16         # 4 slices x 1,024 = 4K words
    assert config_for(big, 2, 1, ["weight_depth=8192"]).chain_length == 8
    with pytest.raises(UsageError, match=r"^parameter hidden_size comes from the model and "
                                         r"the inputs \(20\); do not give it with --model$"):
        config_for(network, 7, 2, ["hidden_size=4"])
    # a split given with chains not given: the chains are completed so that it divides them
    assert config_for(network, 7, 2, ["split=3"]).chains % 3 == 0
    with pytest.raises(UsageError, match=r"^split \(3\) must divide chains \(16\)"):
        config_for(network, 7, 2, ["split=3", "chains=16"])


def test_unsupported_networks():
    lstm = random_network("lstm", 3, 4).layers[0]
    gru = random_network("gru", 4, 4).layers[0]
    with pytest.raises(UsageError, match=r"^layer 1 of the model is GRU, but layer 0 is LSTM: "
                                         r"the farnn engine runs one cell type$"):
        config_for(Network(layers=(lstm, gru)), 2, 1)
    projected = random_network("lstm", 3, 5, proj_size=2)
    assert FarnnTrainer(config_for(projected, 2, 1), "rtl").backend == "rtl"   # supported
    with pytest.raises(UsageError, match=r"^--backend must be one of golden, rtl for the farnn "
                                         r"engine, not 'fpga'$"):
        FarnnTrainer(config_for(Network(layers=(lstm,)), 2, 1), "fpga")


def step(network, x, y, loss, lr, params=()):
    """One training step through the interface's functions: returns (update difference,
    bound, trainer)."""
    return interface_step(network, lambda steps, size: FarnnTrainer(
        config_for(network, steps, size, params)), x, y, loss, lr)


@pytest.mark.parametrize("cell, proj, layers, params", [
    ("lstm", 0, 1, ()),
    ("gru", 0, 2, ("chains=4", "chain_length=2")),
    ("lstm", 5, 3, ("chains=4", "chain_length=1", "split=2")),
    ("gru", 0, 3, ("chains=2", "chain_length=3", "split=2")),
])
def test_training_step_matches_float64_sgd(cell, proj, layers, params):
    """An SGD step whose gradients come from the golden model updates the weights as
    PyTorch float64's own step does, within lr * gradient_bound; the measured gradient
    error is far below the bound (documented in nnrtl.gen.farnn.trainer)."""
    network = random_network(cell, 3, 13, proj, layers, seed=layers)
    rng = np.random.default_rng(layers)
    x = rng.uniform(-1, 1, (2, 6, 3))                         # batch x seq_len x input
    y = rng.uniform(-1, 1, (2, 6, network.layers[-1].output_size))
    difference, bound, trainer = step(network, x, y, "mse", 0.5, params)
    assert difference <= bound
    assert difference <= bound / 20                           # the margin the bound keeps
    steps, batch = 6, 2
    assert trainer.counters()["useful_macs"] == trainer.config.useful_macs
    assert trainer.config.seq_len == steps and trainer.config.batch == batch


def directional_network(cell, directions, layers, seed):
    """``layers`` layers of PyTorch's ``nn.LSTM``/``nn.GRU`` (3 inputs, 6 units) in the
    model layer: ``directions`` ``"bidirectional"`` (PyTorch's own), or ``"reverse"`` (each
    layer's forward tensors read backwards in time)."""
    torch.manual_seed(seed)
    kind = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
    module = kind(3, 6, num_layers=layers, bidirectional=directions == "bidirectional")
    state = {k: v.detach().double().numpy() for k, v in module.state_dict().items()}
    built = []
    for index in range(layers):
        fields = {k.replace(f"_l{index}", ""): v for k, v in state.items()
                  if f"_l{index}" in k and (directions == "bidirectional"
                                            or not k.endswith("_reverse"))}
        built.append((LSTM if cell == "lstm" else GRU)(direction=directions, **fields))
    return Network(layers=tuple(built))


@pytest.mark.parametrize("cell, directions, layers, batch", [
    ("lstm", "bidirectional", 2, 2), ("gru", "bidirectional", 1, 1), ("gru", "reverse", 2, 2),
    ("lstm", "reverse", 1, 1)])
def test_reverse_and_bidirectional_layers_train_as_pytorch(cell, directions, layers, batch):
    """A reverse layer is a forward pass over the reversed sequence, a bidirectional one
    two passes; every gradient (the ``_reverse`` tensors included) against float64
    autograd of PyTorch's own bidirectional layer, and the SGD step through the
    interface within its bound."""
    network = directional_network(cell, directions, layers, seed=layers)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (5, batch, 3))
    trainer = FarnnTrainer(config_for(network, 5, batch, ["chains=2", "chain_length=2"]))
    outputs = trainer.forward(network, x)
    assert outputs.shape == (5, batch, network.layers[-1].output_size)
    grad_outputs = rng.uniform(-1, 1, outputs.shape)
    engine = trainer.backward(grad_outputs)
    reference = reference_gradients(network, x, grad_outputs)
    assert set(engine) == set(reference)
    assert (directions == "bidirectional") == ((0, "weight_hh_reverse") in engine)
    for key, value in reference.items():
        assert np.abs(engine[key] - value).max() < GRADIENT_BOUND / 10, key
    with torch.no_grad():
        x_leaf = torch.tensor(x, requires_grad=True)
    from nnrtl.gen.models import to_torch
    module = to_torch(network, torch.float64)
    (module(x_leaf)[0] * torch.tensor(grad_outputs)).sum().backward()
    assert np.abs(trainer.input_gradient() - x_leaf.grad.numpy()).max() < GRADIENT_BOUND / 10
    assert trainer.counters()["useful_macs"] == dataclasses.replace(
        trainer.config, layers=layers * network.layers[0].num_directions).useful_macs
    y = rng.uniform(-1, 1, (batch, 5, network.layers[-1].output_size))
    difference, bound, _ = step(network, np.swapaxes(x, 0, 1), y, "mse", 0.5,
                                ("chains=2", "chain_length=2"))
    assert difference <= bound / 20


def test_gradients_against_float64_autograd_directly():
    """Every tensor's gradient, not just the update: LSTM with projection, 2 layers."""
    network = random_network("lstm", 3, 10, 4, 2, seed=4)
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (8, 2, 3))
    trainer = FarnnTrainer(config_for(network, 8, 2, ["chains=4", "chain_length=1"]))
    outputs = trainer.forward(network, x)
    grad_outputs = rng.uniform(-1, 1, outputs.shape)
    engine = trainer.backward(grad_outputs)
    reference = reference_gradients(network, x, grad_outputs)
    assert set(engine) == set(reference) and (1, "weight_hr") in engine
    for key, value in reference.items():
        assert engine[key].shape == value.shape
        assert np.abs(engine[key] - value).max() < GRADIENT_BOUND / 10, key


def test_train_through_the_interface(tmp_path):
    """gen/train.py's ``train`` with the farnn hook (the engine is not registered yet):
    a GRU state_dict, cross-entropy, two steps; the trained model comes back as a
    state_dict and train.json records the useful MACs and the bound."""
    torch.manual_seed(5)
    gru = torch.nn.GRU(3, 6, num_layers=2)
    torch.save(gru.state_dict(), tmp_path / "gru.pt")
    rng = np.random.default_rng(5)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (2, 5, 3)))
    np.save(tmp_path / "y.npy", np.array([1, 4]))
    from nnrtl.boards import get_board
    request = interface.TrainRequest(
        board=get_board("vu9p"), model=tmp_path / "gru.pt", inputs=tmp_path / "x.npy",
        targets=tmp_path / "y.npy", loss="cross-entropy", lr=0.5, steps=2,
        params=("chains=2", "chain_length=2"))
    summary = interface.train(types.SimpleNamespace(name="farnn"), train_hook, request,
                              tmp_path / "run")
    assert summary["within_bound"] and len(summary["loss"]) == 2
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["gradient_bound"] == GRADIENT_BOUND
    assert record["config"]["chain_length"] == 2 and record["config"]["cell"] == "gru"
    # 2 layers x (FW + BW) x 5 steps x batch 2 x 3 gates x 6 x 6
    assert record["steps"][0]["useful_macs"] == 2 * 2 * 5 * 2 * 3 * 36
    assert record["steps"][0]["host_device"] in ("cpu", f"cuda:{_gpu()}")
    trained = load_network(tmp_path / "run" / "model.pt")
    assert not np.array_equal(trained.layers[0].weight_hh, gru.weight_hh_l0.detach().numpy())


def _gpu():
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def test_layer_weights_reach_the_golden_through_the_streams():
    """The trainer's FPGA weights are what the streams carry: the FW R_k and the BW R_k^T
    (the host's transpose) of the layer, bit for bit."""
    network = random_network("lstm", 3, 5, 2, 1, seed=6)
    layer = network.layers[0]
    trainer = FarnnTrainer(config_for(network, 2, 1, ["chains=2", "chain_length=1"]))
    weights = trainer._weights(layer)
    recurrent = to_bits(layer.weight_hh).reshape(4, 5, 2)
    assert np.array_equal(weights.recurrent, recurrent)
    assert np.array_equal(weights.recurrent_t, recurrent.transpose(0, 2, 1))
    assert np.array_equal(weights.projection_t, to_bits(layer.weight_hr).T)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["lstm", "gru", "lstm-proj"])
def test_gradient_accuracy_at_256_steps(model):
    """The accuracy report's longest sequences (python -m nnrtl.gen.farnn.studies.accuracy): the
    summed loss's gradients (up to ~170) within the bound, relative error below 1e-5."""
    from nnrtl.gen.farnn.studies.accuracy import HARDWARE, MODELS, gradient_errors
    network = random_network(*MODELS[model])
    max_abs, max_rel, largest = gradient_errors(network, 256, 2, params=HARDWARE)
    assert largest > 5
    assert max_abs <= GRADIENT_BOUND and max_rel <= 1e-5


def test_gru_with_a_linear_head_through_nnrtl_train(tmp_path, capsys):
    """``nnrtl train farnn`` on a 2-layer GRU with an nn.Linear head (a state_dict): the
    GRU on the engine's golden model, the head on the host, both updated as PyTorch's SGD
    step of the whole model does, within lr * GRADIENT_BOUND; the head comes back
    updated."""
    from nnrtl.gen.cli import main

    class GruHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(1, 8, 2)
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    torch.manual_seed(11)
    model = GruHead()
    torch.save(model.state_dict(), tmp_path / "gru_head.pt")
    t = np.linspace(0, 4 * np.pi, 4 * 11).reshape(4, 11)
    np.save(tmp_path / "x.npy", np.sin(t)[:, :10, None])
    np.save(tmp_path / "y.npy", np.sin(t)[:, 1:, None])
    code = main(["train", "farnn", "--board", "vu9p", "--model", str(tmp_path / "gru_head.pt"),
                 "--inputs", str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"),
                 "--lr", "0.5", "-o", str(tmp_path / "run")])
    _, err = capsys.readouterr()
    assert code == 0, err
    reference = model.double()
    x = torch.tensor(np.load(tmp_path / "x.npy")).transpose(0, 1)
    y = torch.tensor(np.load(tmp_path / "y.npy")).transpose(0, 1)
    torch.nn.MSELoss()(reference(x), y).backward()
    torch.optim.SGD(reference.parameters(), lr=0.5).step()
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    before = torch.load(tmp_path / "gru_head.pt", weights_only=True)
    assert list(trained) == list(before)
    for name, value in reference.state_dict().items():
        # the bound of the step, and the float32 the file stores
        assert (trained[name].double() - value).abs().max() <= 0.5 * GRADIENT_BOUND + 1e-7
    assert (trained["head.weight"] - before["head.weight"]).abs().max() > 1e-3
    step = json.loads((tmp_path / "run" / "train.json").read_text())["steps"][0]
    assert step["head_update_max_abs_diff"] <= step["update_bound"] == 0.5 * GRADIENT_BOUND
    assert "train: farnn runs GRU(1 -> 8)" in err


def test_gru_with_an_embedding_and_a_head_through_nnrtl_train(tmp_path, capsys):
    """``nnrtl train farnn`` on token ids through an nn.Embedding, a 2-layer GRU and an
    nn.Linear head (a state_dict): the GRU on the engine's golden model, the embedding
    (its gradient the BW input MVM of layer 0, summed over the tokens) and the head on the
    host; all three updated as PyTorch's SGD step of the whole model does, within lr *
    GRADIENT_BOUND; the embedding comes back updated."""
    from nnrtl.gen.cli import main

    class EmbedGruHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(7, 3)
            self.rnn = torch.nn.GRU(3, 8, 2)
            self.head = torch.nn.Linear(8, 2)

        def forward(self, tokens):
            return self.head(self.rnn(self.embed(tokens))[0])

    torch.manual_seed(12)
    model = EmbedGruHead()
    torch.save(model.state_dict(), tmp_path / "m.pt")
    rng = np.random.default_rng(12)
    tokens = rng.integers(0, 7, (3, 6))
    np.save(tmp_path / "x.npy", tokens)
    np.save(tmp_path / "y.npy", rng.uniform(-1, 1, (3, 6, 2)))
    code = main(["train", "farnn", "--board", "vu9p", "--model", str(tmp_path / "m.pt"),
                 "--inputs", str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"),
                 "--lr", "0.5", "-o", str(tmp_path / "run")])
    _, err = capsys.readouterr()
    assert code == 0, err
    reference = model.double()
    y = torch.tensor(np.load(tmp_path / "y.npy")).transpose(0, 1)
    torch.nn.MSELoss()(reference(torch.tensor(tokens.T)), y).backward()
    torch.optim.SGD(reference.parameters(), lr=0.5).step()
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    before = torch.load(tmp_path / "m.pt", weights_only=True)
    assert list(trained) == list(before)
    for name, value in reference.state_dict().items():
        # the bound of the step, and the float32 the file stores
        assert (trained[name].double() - value).abs().max() <= 0.5 * GRADIENT_BOUND + 1e-7
    for name in ("embed.weight", "rnn.weight_ih_l0", "head.weight"):
        assert (trained[name] - before[name]).abs().max() > 1e-4, name
    step = json.loads((tmp_path / "run" / "train.json").read_text())["steps"][0]
    assert 0 < step["embedding_update_max_abs_diff"] <= step["update_bound"] == \
        0.5 * GRADIENT_BOUND
    assert "train: the host runs (PyTorch) Embedding(7 -> 3) (embed.weight); Linear" in err


def test_input_gradient_is_the_bw_input_mvm_of_layer_0():
    """The gradient at the network's inputs against float64 autograd: within 1e-5 of its
    largest value (the weight gradients' measured relative error is 2.8e-6); asked before
    a backward pass, a ValueError."""
    network = random_network("lstm", 4, 6, 0, 2, seed=3)
    config = config_for(network, 5, 2)
    trainer = FarnnTrainer(config)
    x = np.random.default_rng(3).uniform(-1, 1, (5, 2, 4))
    outputs = trainer.forward(network, x)
    with pytest.raises(ValueError, match=r"^input_gradient comes from backward"):
        trainer.input_gradient()
    trainer.backward(np.ones_like(outputs))             # the summed loss: gradients ~1
    inputs = torch.tensor(x, requires_grad=True)
    from nnrtl.gen.models import to_torch
    to_torch(network, torch.float64)(inputs)[0].sum().backward()
    gradient = trainer.input_gradient()
    assert gradient.shape == x.shape and np.abs(gradient).max() > 0.1
    assert np.abs(gradient - inputs.grad.numpy()).max() <= 1e-5 * np.abs(gradient).max()


@pytest.mark.timeout(900)          # a Verilator build when the cache is cold (about 45 s)
def test_embedding_with_the_rtl_backend_equals_golden(tmp_path):
    """``--backend rtl`` with an embedding in front: the gradient at the inputs comes from
    the RTL's deltas, so the embedding updates bit for bit as with the golden backend.
    The engine is test_farnn_verilator.py's gru-s2-split-b2 (the Verilog does not depend on
    the input size or the layers), its build shared."""
    from nnrtl.gen.cli import main

    torch.manual_seed(13)
    module = torch.nn.ModuleDict({"embed": torch.nn.Embedding(6, 3),
                                  "rnn": torch.nn.GRU(3, 5)})
    torch.save(module.state_dict(), tmp_path / "m.pt")
    rng = np.random.default_rng(13)
    np.save(tmp_path / "x.npy", rng.integers(0, 6, (2, 3)))
    np.save(tmp_path / "y.npy", np.array([1, 4]))
    for backend in ("rtl", "golden"):
        assert main(["train", "farnn", "--board", "vu9p", "--model", str(tmp_path / "m.pt"),
                     "--inputs", str(tmp_path / "x.npy"), "--targets",
                     str(tmp_path / "y.npy"), "--loss", "cross-entropy", "--lr", "0.5",
                     "--backend", backend, "--param=chains=2", "--param=chain_length=2",
                     "--param=split=2", "-o", str(tmp_path / backend)]) == 0
    rtl = torch.load(tmp_path / "rtl" / "model.pt", weights_only=True)
    golden = torch.load(tmp_path / "golden" / "model.pt", weights_only=True)
    assert list(rtl) == list(golden)
    assert all(torch.equal(rtl[name], golden[name]) for name in rtl)
    assert not torch.equal(rtl["embed.weight"], module["embed"].weight.detach())
    record = json.loads((tmp_path / "rtl" / "train.json").read_text())
    assert record["steps"][0]["embedding_update_max_abs_diff"] > 0
    assert [(p["layer"], p["phase"]) for p in record["steps"][0]["passes"]] == [
        (0, "fw"), (0, "bw")]


@pytest.mark.parametrize("cell, directions", [("gru", "bidirectional"), ("lstm", "reverse"),
                                              ("lstm", "forward")])
def test_sequences_of_different_lengths_train_as_packed_sequences(cell, directions):
    """``lengths``: the outputs (zero past each end) and every gradient, the inputs'
    included, against PyTorch float64 autograd on packed sequences."""
    from nnrtl.gen.models import to_torch, torch_parameter

    network = directional_network(cell, directions, 2, seed=5)
    rng = np.random.default_rng(5)
    lengths = np.array([5, 2, 4])
    x = rng.uniform(-1, 1, (5, 3, 3))
    trainer = FarnnTrainer(config_for(network, 5, 3, ["chains=2", "chain_length=2"]))
    outputs = trainer.forward(network, x, lengths)
    module = to_torch(network, torch.float64)
    x_leaf = torch.tensor(x, requires_grad=True)
    expected = module(x_leaf, None, lengths)[0]
    assert np.abs(outputs - expected.detach().numpy()).max() < 1e-5
    assert not outputs[4, 1].any() and not outputs[2:, 1].any()
    mask = (np.arange(5)[:, None] < lengths)[..., None]
    grad_outputs = rng.uniform(-1, 1, outputs.shape) * mask
    engine = trainer.backward(grad_outputs)
    (expected * torch.tensor(grad_outputs)).sum().backward()
    for (index, field), value in engine.items():
        reference = torch_parameter(network, module, index, field).grad.numpy()
        assert np.abs(value - reference).max() < GRADIENT_BOUND / 10, (index, field)
    assert np.abs(trainer.input_gradient() - x_leaf.grad.numpy()).max() < GRADIENT_BOUND / 10


@settings(max_examples=10, deadline=None, derandomize=True)
@given(data=st.data())
def test_sequence_lengths_random_draws(data):
    """Random draws of cell, direction, layers, batch, steps and lengths: the golden FARNN's
    outputs and gradients with ``lengths`` against PyTorch autograd on packed
    sequences."""
    from nnrtl.gen.models import to_torch, torch_parameter

    cell = data.draw(st.sampled_from(["lstm", "gru"]), label="cell")
    directions = data.draw(st.sampled_from(["forward", "reverse", "bidirectional"]),
                           label="directions")
    layers = data.draw(st.integers(1, 2), label="layers")
    batch = data.draw(st.integers(1, 3), label="batch")
    steps = data.draw(st.integers(1, 5), label="steps")
    lengths = np.array(data.draw(st.lists(st.integers(1, steps), min_size=batch,
                                          max_size=batch), label="lengths"))
    network = directional_network(cell, directions, layers, seed=data.draw(
        st.integers(0, 100), label="seed"))
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (steps, batch, 3))
    trainer = FarnnTrainer(config_for(network, steps, batch, ["chains=2", "chain_length=2"]))
    outputs = trainer.forward(network, x, lengths)
    module = to_torch(network, torch.float64)
    expected = module(torch.tensor(x), None, lengths)[0]
    assert np.abs(outputs - expected.detach().numpy()).max() < 1e-5
    grad_outputs = rng.uniform(-1, 1, outputs.shape) * (np.arange(steps)[:, None]
                                                         < lengths)[..., None]
    engine = trainer.backward(grad_outputs)
    (expected * torch.tensor(grad_outputs)).sum().backward()
    for (index, field), value in engine.items():
        reference = torch_parameter(network, module, index, field).grad.numpy()
        assert np.abs(value - reference).max() < GRADIENT_BOUND / 10, (index, field)


@pytest.mark.timeout(900)          # a Verilator build when the cache is cold (about 45 s)
def test_lengths_with_the_rtl_backend_equal_golden(tmp_path):
    """``--lengths`` on ``--backend rtl``: a bidirectional GRU whose second sequence is one
    step long updates bit for bit as with the golden backend (the RTL runs both sequences
    to the end; the host reverses and masks). The engine's build is the one above."""
    from nnrtl.gen.cli import main

    torch.manual_seed(14)
    torch.save(torch.nn.GRU(3, 5, bidirectional=True).state_dict(), tmp_path / "m.pt")
    rng = np.random.default_rng(14)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (2, 3, 3)))
    np.save(tmp_path / "y.npy", rng.uniform(-1, 1, (2, 3, 10)))
    np.save(tmp_path / "l.npy", np.array([3, 1]))
    for backend in ("rtl", "golden"):
        assert main(["train", "farnn", "--board", "vu9p", "--model", str(tmp_path / "m.pt"),
                     "--inputs", str(tmp_path / "x.npy"), "--targets",
                     str(tmp_path / "y.npy"), "--lengths", str(tmp_path / "l.npy"), "--lr",
                     "0.5", "--backend", backend, "--param=chains=2", "--param=chain_length=2",
                     "--param=split=2", "-o", str(tmp_path / backend)]) == 0
    rtl = torch.load(tmp_path / "rtl" / "model.pt", weights_only=True)
    golden = torch.load(tmp_path / "golden" / "model.pt", weights_only=True)
    assert all(torch.equal(rtl[name], golden[name]) for name in rtl)
    assert json.loads((tmp_path / "rtl" / "train.json").read_text())["within_bound"] is True

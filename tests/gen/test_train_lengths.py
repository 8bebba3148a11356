"""Sequences of different lengths in one batch (:mod:`nnrtl.gen.models.sequences`,
``nnrtl train --lengths``): the float64 reference against PyTorch's packed sequences, the
training step against a PyTorch SGD step written here on packed sequences, and the
refusals."""

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from nnrtl.gen import engines as registry
from nnrtl.gen.cli import main
from nnrtl.gen.engines import Engine
from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import load_network
from nnrtl.gen.models.sequences import check_lengths, reverse_within, step_mask
from nnrtl.gen.train import HostTrainer
from nnrtl.hw.demo import DemoConfig, DemoEngine


class _FullOnly(HostTrainer):
    takes_lengths = False


def _engine(name, trainer):
    return Engine(name=name, summary="the whole training step on the host (tests)",
                  config_class=DemoConfig, top=DemoEngine,
                  resources=lambda config, family: {"dsp": config.dsp},
                  predict=lambda config, workload: {"cycles": 0},
                  simulate=lambda request: {},
                  train=lambda request, network: trainer(DemoConfig()))


@pytest.fixture(autouse=True)
def engines():
    registry.register(_engine("host", HostTrainer))
    registry.register(_engine("fullonly", _FullOnly))
    yield
    registry.unregister("host")
    registry.unregister("fullonly")


def packed(module, x, lengths):
    """``module`` over ``x`` (T x N x I) as PyTorch packs it: outputs (zero past each end)
    and final states."""
    sequence = torch.nn.utils.rnn.pack_padded_sequence(torch.as_tensor(x),
                                                       torch.as_tensor(lengths),
                                                       enforce_sorted=False)
    out, state = module(sequence)
    return torch.nn.utils.rnn.pad_packed_sequence(out, total_length=len(x))[0], state


def test_reverse_within_and_mask():
    values = np.arange(4)[:, None].repeat(3, 1)          # T = 4, N = 3: value = step
    np.testing.assert_array_equal(reverse_within(values, [4, 2, 1]),
                                  [[3, 1, 0], [2, 0, 1], [1, 2, 2], [0, 3, 3]])
    np.testing.assert_array_equal(step_mask([4, 2, 1], 4),
                                  [[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 0, 0]])


@pytest.mark.parametrize("lengths, message", [
    ([1, 2], r"--lengths must hold one length per sequence \(shape \(3,\)\), not shape \(2,\)"),
    ([1, 0, 2], r"--lengths must be from 1 to the sequence length 5, not 0"),
    ([1, 6, 2], r"--lengths must be from 1 to the sequence length 5, not 6"),
    ([1, 2.5, 2], r"--lengths must be integers, not \[1\.0, 2\.5, 2\.0\]"),
])
def test_check_lengths_refuses(lengths, message):
    with pytest.raises(UsageError, match=rf"^{message}$"):
        check_lengths(lengths, 5, 3)


@pytest.mark.parametrize("kind, extra", [(torch.nn.LSTM, {"proj_size": 3}),
                                         (torch.nn.LSTM, {"bidirectional": True}),
                                         (torch.nn.GRU, {"bidirectional": True})])
def test_reference_equals_packed_sequences(tmp_path, kind, extra):
    """The float64 reference's outputs and final states with ``lengths`` are PyTorch's on
    packed sequences, layer by layer through a 2-layer stack."""
    torch.manual_seed(0)
    module = kind(4, 5, num_layers=2, dtype=torch.float64, **extra)
    torch.save(module.state_dict(), tmp_path / "m.pt")
    network = load_network(tmp_path / "m.pt")
    lengths = np.array([7, 3, 1, 5])
    x = np.random.default_rng(0).normal(size=(7, 4, 4))
    expected, state = packed(module, x, lengths)
    ours, finals = network.forward(x, lengths=lengths)
    np.testing.assert_allclose(ours, expected.detach().numpy(), rtol=0, atol=1e-12)
    h_n = (state[0] if kind is torch.nn.LSTM else state).detach().numpy()
    ours_h = np.concatenate([f[0] if kind is torch.nn.LSTM else f for f in finals])
    np.testing.assert_allclose(ours_h, h_n, rtol=0, atol=1e-12)
    full, _ = network.forward(x)
    assert np.abs(ours - full).max() > 1e-3                 # the lengths change the values


def _files(tmp_path, x, y, lengths):
    for name, value in (("x", x), ("y", y), ("l", lengths)):
        np.save(tmp_path / f"{name}.npy", value)
    return ["--inputs", str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"),
            "--lengths", str(tmp_path / "l.npy")]


@pytest.mark.parametrize("loss", ["mse", "cross-entropy"])
def test_train_step_equals_sgd_on_packed_sequences(capsys, tmp_path, loss):
    """One ``nnrtl train --lengths`` step of a bidirectional GRU stack is a PyTorch SGD step
    on packed sequences with the loss over each sequence's own steps (mse) or at its last
    step (cross-entropy)."""
    torch.manual_seed(2)
    module = torch.nn.GRU(3, 4, num_layers=2, bidirectional=True, dtype=torch.float64)
    torch.save(module.state_dict(), tmp_path / "m.pt")
    rng = np.random.default_rng(2)
    lengths = np.array([6, 2, 4])
    x = rng.normal(size=(3, 6, 3))                        # batch x seq_len x input_size
    y = rng.normal(size=(3, 6, 8)) if loss == "mse" else np.array([1, 7, 4])
    code = main(["train", "host", "--board", "vu9p", "--model", str(tmp_path / "m.pt"),
                 *_files(tmp_path, x, y, lengths), "--loss", loss, "--lr", "0.5",
                 "-o", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["within_bound"] is True
    assert json.loads((tmp_path / "run" / "train.json").read_text())["lengths"] == [6, 2, 4]
    out, _ = packed(module, x.transpose(1, 0, 2), lengths)
    if loss == "mse":
        mask = torch.as_tensor(np.arange(6)[:, None] < lengths)[..., None]
        target = torch.as_tensor(y.transpose(1, 0, 2))
        value = ((out - target)[mask.expand_as(out)] ** 2).mean()
    else:
        value = torch.nn.functional.cross_entropy(out[lengths - 1, np.arange(3)],
                                                  torch.as_tensor(y))
    value.backward()
    torch.optim.SGD(module.parameters(), lr=0.5).step()
    trained = load_network(tmp_path / "run" / "model.pt")
    for name, tensor in module.state_dict().items():
        np.testing.assert_allclose(trained.parameters()[name], tensor.numpy(), rtol=0,
                                   atol=0.5 * 1e-4)


@pytest.mark.parametrize("engine, inputs, message", [
    ("fullonly", (3, 6, 3), r"the fullonly engine's trainer runs every sequence of a batch "
                            r"to its end: it does not take --lengths"),
    ("host", (6, 3), r"--lengths gives each sequence of a batch its length: the inputs must "
                     r"be batch x seq_len \(x features\) for an RNN"),
])
def test_train_lengths_refusals(capsys, tmp_path, engine, inputs, message):
    torch.save(torch.nn.GRU(3, 4).state_dict(), tmp_path / "m.pt")
    x = np.zeros(inputs)
    code = main(["train", engine, "--board", "vu9p", "--model", str(tmp_path / "m.pt"),
                 *_files(tmp_path, x, np.zeros(inputs[:-1] + (4,)), np.array([6, 2, 4])),
                 "-o", str(tmp_path / "run")])
    _, err = capsys.readouterr()
    assert code == 2
    assert re.search(rf"nnrtl: error: {message}$", err.strip()), err
    assert not (tmp_path / "run").exists()


@settings(max_examples=30, deadline=None, derandomize=True)
@given(data=st.data())
def test_reference_lengths_random_draws(tmp_path_factory, data):
    """Random draws of cell, layers, direction, projection, batch, steps and lengths: the
    float64 reference with ``lengths`` equals PyTorch's module on packed sequences, the
    outputs and the final states (batch 1 and length-1 sequences included)."""
    kind = data.draw(st.sampled_from([torch.nn.LSTM, torch.nn.GRU]), label="cell")
    layers = data.draw(st.integers(1, 2), label="layers")
    bidirectional = data.draw(st.booleans(), label="bidirectional")
    proj = data.draw(st.integers(0, 2), label="proj") if kind is torch.nn.LSTM else 0
    batch = data.draw(st.integers(1, 4), label="batch")
    steps = data.draw(st.integers(1, 6), label="steps")
    lengths = np.array(data.draw(st.lists(st.integers(1, steps), min_size=batch,
                                          max_size=batch), label="lengths"))
    torch.manual_seed(data.draw(st.integers(0, 1000), label="seed"))
    extra = {"proj_size": proj} if proj else {}
    module = kind(3, 4, num_layers=layers, bidirectional=bidirectional, dtype=torch.float64,
                  **extra)
    path = tmp_path_factory.mktemp("draw") / "m.pt"
    torch.save(module.state_dict(), path)
    x = np.random.default_rng(0).normal(size=(steps, batch, 3))
    expected, state = packed(module, x, lengths)
    ours, finals = load_network(path).forward(x, lengths=lengths)
    np.testing.assert_allclose(ours, expected.detach().numpy(), rtol=0, atol=1e-12)
    h_n = (state[0] if kind is torch.nn.LSTM else state).detach().numpy()
    ours_h = np.concatenate([f[0] if kind is torch.nn.LSTM else f for f in finals])
    np.testing.assert_allclose(ours_h, h_n, rtol=0, atol=1e-12)

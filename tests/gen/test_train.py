"""The training interface (:mod:`nnrtl.gen.train`) on every model format it writes back,
RNNs and a CNN, both losses, a Linear head and an Embedding on the host: the update is
PyTorch's own SGD step, checked against plain PyTorch float64; a model comes back in the
format it came in; bad input exits 2 with nothing written."""

import dataclasses
import json
import re
import warnings

import numpy as np
import pytest
import torch

from nnrtl.gen import engines as registry
from nnrtl.gen.cli import main
from nnrtl.gen.engines import Engine
from nnrtl.gen.models import load_network
from nnrtl.gen.train import HostTrainer
from nnrtl.hw.demo import DemoConfig, DemoEngine

HOST = Engine(
    name="host", summary="the whole training step on the host (tests)",
    config_class=DemoConfig, top=DemoEngine,
    resources=lambda config, family: {"dsp": config.dsp},
    predict=lambda config, workload: {"cycles": 0},
    simulate=lambda request: {},
    train=lambda request, network: HostTrainer(DemoConfig()),
)


@pytest.fixture(autouse=True)
def host():
    registry.register(HOST)
    yield
    registry.unregister("host")


def train(capsys, tmp_path, model, x, y, *extra, output="run"):
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    code = main(["train", "host", "--board", "vu9p", "--model", str(model), "--inputs",
                 str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"),
                 "-o", str(tmp_path / output), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def sgd_reference(module, x, y, loss, lr, steps=1, *, rnn=True):
    """``steps`` steps of torch.optim.SGD on a float64 copy of ``module``."""
    import copy
    module = copy.deepcopy(module).double()
    optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        out = module(torch.tensor(x))
        out = out[0] if rnn else out
        if loss == "mse":
            value = torch.nn.MSELoss()(out, torch.tensor(y))
        else:
            value = torch.nn.CrossEntropyLoss()(out[-1] if rnn else out, torch.tensor(y))
        value.backward()
        optimizer.step()
    return module


def cnn():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(3 * 3 * 3, 4))


def test_gru_state_dict_cross_entropy_batch_first(capsys, tmp_path):
    torch.manual_seed(1)
    gru = torch.nn.GRU(3, 5, num_layers=2)
    torch.save(gru.state_dict(), tmp_path / "gru.pt")
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (4, 6, 3))                 # batch x seq_len x input_size
    y = np.array([0, 4, 2, 1])
    code, out, _ = train(capsys, tmp_path, tmp_path / "gru.pt", x, y, "--loss",
                         "cross-entropy", "--lr", "0.5", "--steps", "3")
    assert code == 0, out
    reference = sgd_reference(gru, x.transpose(1, 0, 2), y, "cross-entropy", 0.5, 3)
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert list(trained) == list(gru.state_dict())
    for name, value in reference.state_dict().items():
        assert torch.allclose(trained[name].double(), value, atol=1e-5), name
    summary = json.loads(out)
    assert summary["within_bound"] and len(summary["loss"]) == 3


@pytest.mark.parametrize("kind", ["torchscript", "export", "onnx"])
def test_cnn_comes_back_in_its_format(capsys, tmp_path, kind):
    model = cnn()
    example = torch.zeros(2, 2, 6, 6)
    path = {"torchscript": tmp_path / "cnn.pt", "export": tmp_path / "cnn.pt2",
            "onnx": tmp_path / "cnn.onnx"}[kind]
    with warnings.catch_warnings():     # the exporters' own warnings are theirs
        warnings.simplefilter("ignore")
        if kind == "torchscript":
            torch.jit.save(torch.jit.script(model), path)
        elif kind == "export":
            torch.export.save(torch.export.export(model, (example,)), path)
        else:
            torch.onnx.export(model, (example,), path, dynamo=True, verbose=False)
    rng = np.random.default_rng(2)
    x, y = rng.uniform(-1, 1, (2, 2, 6, 6)), np.array([3, 1])
    code, out, _ = train(capsys, tmp_path, path, x, y, "--loss", "cross-entropy",
                         "--lr", "0.2")
    assert code == 0, out
    written = tmp_path / "run" / f"model{path.suffix}"
    before, after = load_network(path), load_network(written)
    assert after.format == before.format == {"torchscript": "torchscript",
                                             "export": "export", "onnx": "onnx"}[kind]
    reference = sgd_reference(model, x, y, "cross-entropy", 0.2, rnn=False)
    trained = after.parameters()
    assert set(trained) == set(before.parameters())
    # The exporters rename the tensors; the four of this CNN have distinct shapes.
    by_shape = {tuple(v.shape): v.detach().numpy() for v in reference.state_dict().values()}
    assert len(by_shape) == len(trained) == 4
    for name, value in trained.items():
        assert np.allclose(value, by_shape[value.shape], atol=1e-5), name
        assert not np.array_equal(value, before.parameters()[name]), name


def test_lstm_with_projection_mse(capsys, tmp_path):
    torch.manual_seed(4)
    lstm = torch.nn.LSTM(3, 6, proj_size=2)
    torch.save(lstm.state_dict(), tmp_path / "proj.pt")
    rng = np.random.default_rng(4)
    x, y = rng.uniform(-1, 1, (7, 3)), rng.uniform(-0.5, 0.5, (7, 2))
    code, out, _ = train(capsys, tmp_path, tmp_path / "proj.pt", x, y, "--lr", "0.3")
    assert code == 0, out
    reference = sgd_reference(lstm, x[:, None, :], y[:, None, :], "mse", 0.3)
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    for name, value in reference.state_dict().items():
        assert torch.allclose(trained[name].double(), value, atol=1e-5), name
    log = json.loads((tmp_path / "run" / "train.json").read_text())
    step = log["steps"][0]
    assert step["update_max_abs_diff"] <= step["update_bound"] == pytest.approx(0.3 * 1e-4)
    assert step["loss"] == pytest.approx(step["reference_loss"], rel=1e-5)


class Sloppy(HostTrainer):
    """Gradients off by more than the bound: the result is wrong, exit 1."""

    def backward(self, grad_outputs):
        return {key: grad + 1e-2 for key, grad in super().backward(grad_outputs).items()}


def test_update_outside_its_bound_exits_1(capsys, tmp_path):
    registry.unregister("host")
    registry.register(dataclasses.replace(HOST, train=lambda request, network: Sloppy()))
    torch.save(torch.nn.LSTM(2, 2).state_dict(), tmp_path / "m.pt")
    code, out, _ = train(capsys, tmp_path, tmp_path / "m.pt", np.ones((3, 2)),
                         np.zeros((3, 2)))
    assert code == 1 and json.loads(out)["within_bound"] is False
    assert (tmp_path / "run" / "train.json").exists()


@pytest.mark.parametrize("case, message", [
    ("inputs-shape", r"--inputs must be seq_len x 3 or batch x seq_len x 3 for .*m\.pt, not "
                     r"\(5, 4\)"),
    ("targets-shape", r"--targets must have the outputs' shape \(5, 2\) for mse, not "
                      r"\(5, 3\)"),
    ("classes", r"--targets must be class indices \(integers from 0 to 1\) of shape \(\) "
                r"for cross-entropy, not shape \(5, 2\), values from 0 to 0"),
    ("class-range", r"--targets must be class indices \(integers from 0 to 1\) of shape "
                    r"\(3,\) for cross-entropy, not \[0\.0, 2\.0, 1\.0\] \(shape \(3,\)\)"),
    ("text-npy", r".*x\.npy.*"),
    ("lr", r"--lr must be a positive number, not -1\.0"),
])
def test_bad_input_exits_2_and_writes_nothing(capsys, tmp_path, case, message):
    torch.save(torch.nn.LSTM(3, 2).state_dict(), tmp_path / "m.pt")
    x, y, extra = np.zeros((5, 3)), np.zeros((5, 2)), []
    if case == "inputs-shape":
        x = np.zeros((5, 4))
    elif case == "targets-shape":
        y = np.zeros((5, 3))
    elif case == "classes":
        extra = ["--loss", "cross-entropy"]
    elif case == "class-range":
        x, y, extra = np.zeros((3, 5, 3)), np.array([0, 2, 1]), ["--loss", "cross-entropy"]
    elif case == "lr":
        extra = ["--lr", "-1"]
    np.save(tmp_path / "y.npy", y)
    if case == "text-npy":
        (tmp_path / "x.npy").write_text("1 2 3\n4 5 6\n")
        code = main(["train", "host", "--board", "vu9p", "--model", str(tmp_path / "m.pt"),
                     "--inputs", str(tmp_path / "x.npy"), "--targets",
                     str(tmp_path / "y.npy"), "-o", str(tmp_path / "run")])
        out, err = capsys.readouterr()
    else:
        code, out, err = train(capsys, tmp_path, tmp_path / "m.pt", x, y, *extra)
    assert code == 2 and out == ""
    assert re.fullmatch(rf"nnrtl: error: {message}\n", err), err
    assert not (tmp_path / "run").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run")]


class GruHead(torch.nn.Module):
    """A regression model: a 2-layer GRU and a Linear head on every step's outputs."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(1, 8, 2)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.head(self.rnn(x)[0]), None


def test_linear_head_is_trained_on_the_host(capsys, tmp_path):
    """The head after the RNN trains in the same step as PyTorch's SGD of the whole model
    does, its targets the head's outputs; train.json and the log say what ran where."""
    torch.manual_seed(6)
    model = GruHead()
    torch.save(model.state_dict(), tmp_path / "gru_head.pt")
    rng = np.random.default_rng(6)
    x, y = rng.uniform(-1, 1, (3, 5, 1)), rng.uniform(-1, 1, (3, 5, 1))
    code, out, err = train(capsys, tmp_path, tmp_path / "gru_head.pt", x, y, "--lr", "0.5",
                           "--steps", "2")
    assert code == 0, err
    reference = sgd_reference(model, x.transpose(1, 0, 2), y.transpose(1, 0, 2), "mse", 0.5,
                              2)
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert list(trained) == list(model.state_dict())
    for name, value in reference.state_dict().items():
        assert torch.allclose(trained[name].double(), value, atol=1e-5), name
    assert not torch.equal(trained["head.weight"], model.head.weight.detach())
    log = json.loads((tmp_path / "run" / "train.json").read_text())
    assert log["placement"] == {
        "engine": ["GRU(1 -> 8) (rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, "
                   "rnn.bias_hh_l0)",
                   "GRU(8 -> 8) (rnn.weight_ih_l1, rnn.weight_hh_l1, rnn.bias_ih_l1, "
                   "rnn.bias_hh_l1)"],
        "host": ["Linear(8 -> 1) (head.weight, head.bias)"], "unchanged": []}
    for step in log["steps"]:
        assert 0 < step["head_update_max_abs_diff"] <= step["update_max_abs_diff"] \
            <= step["update_bound"]
    assert "train: the host runs (PyTorch) Linear(8 -> 1) (head.weight, head.bias)" in err


def test_head_with_cross_entropy(capsys, tmp_path):
    torch.manual_seed(7)
    module = torch.nn.ModuleDict({"rnn": torch.nn.LSTM(2, 4),
                                  "classify": torch.nn.Linear(4, 3)})
    torch.save(module.state_dict(), tmp_path / "m.pt")
    rng = np.random.default_rng(7)
    x, y = rng.uniform(-1, 1, (2, 4, 2)), np.array([2, 0])
    code, out, err = train(capsys, tmp_path, tmp_path / "m.pt", x, y, "--loss",
                           "cross-entropy", "--lr", "0.5")
    assert code == 0, err
    rnn, head = module["rnn"].double(), module["classify"].double()
    logits = head(rnn(torch.tensor(x.transpose(1, 0, 2)))[0])[-1]
    torch.nn.CrossEntropyLoss()(logits, torch.tensor(y)).backward()
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    for name, parameter in module.named_parameters():
        expected = parameter.detach() - 0.5 * parameter.grad
        assert torch.allclose(trained[name].double(), expected, atol=1e-5), name


def test_prefix_trains_one_stack(capsys, tmp_path):
    torch.manual_seed(8)
    stacks = torch.nn.ModuleList([torch.nn.GRU(1, 8), torch.nn.GRU(3, 2)])
    torch.save(stacks.state_dict(), tmp_path / "two.pt")
    x, y = np.ones((4, 3)), np.zeros((4, 2))
    code, out, err = train(capsys, tmp_path, tmp_path / "two.pt", x, y)
    assert code == 2 and re.fullmatch(
        r"nnrtl: error: .*two\.pt: several RNNs \('0\.', '1\.'\) that do not chain: '1\.' "
        r"takes 3 features, '0\.' gives 8; pick one with --prefix \(e\.g\. --prefix 0\.\)\n",
        err), err
    code, out, err = train(capsys, tmp_path, tmp_path / "two.pt", x, y, "--prefix", "1.")
    assert code == 0, err
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    before = stacks.state_dict()
    assert all(torch.equal(trained[k], before[k]) for k in before if k.startswith("0."))
    assert not torch.equal(trained["1.weight_hh_l0"], before["1.weight_hh_l0"])
    log = json.loads((tmp_path / "run" / "train.json").read_text())
    assert log["prefix"] == "1." and log["placement"]["unchanged"] == [
        "0.bias_hh_l0", "0.bias_ih_l0", "0.weight_hh_l0", "0.weight_ih_l0"]
    assert "train: written back unchanged (not picked by --prefix): 0.bias_hh_l0," in err


def test_prefix_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["train", "farnn", "--help"])
    assert re.search(r"--prefix P\s+a PyTorch state_dict with several RNN stacks",
                     capsys.readouterr().out)


def test_keys_left_untrained_exit_2_and_write_nothing(capsys, tmp_path):
    torch.manual_seed(9)
    module = torch.nn.ModuleDict({"emb": torch.nn.Embedding(10, 4),
                                  "rnn": torch.nn.LSTM(3, 2)})
    torch.save(module.state_dict(), tmp_path / "m.pt")
    code, out, err = train(capsys, tmp_path, tmp_path / "m.pt", np.zeros((5, 3)),
                           np.zeros((5, 2)))
    assert code == 2 and out == ""
    assert re.fullmatch(r"nnrtl: error: .*m\.pt: emb\.weight is neither an RNN stack "
                        r"\('rnn\.'\), one nn\.Linear reading its 2 outputs nor one "
                        r"nn\.Embedding giving its 3 inputs: nnrtl train would leave it "
                        r"untrained\n", err), err
    assert not (tmp_path / "run").exists()


def test_chained_stacks_train_as_one_model(capsys, tmp_path):
    """A tapered stack saved as two modules runs them in order; the update is PyTorch's
    SGD step of the two stacks one after another."""
    torch.manual_seed(10)
    stacks = torch.nn.ModuleList([torch.nn.GRU(2, 6), torch.nn.LSTM(6, 3)])
    torch.save(stacks.state_dict(), tmp_path / "taper.pt")
    rng = np.random.default_rng(10)
    x, y = rng.uniform(-1, 1, (5, 2)), rng.uniform(-1, 1, (5, 3))
    code, out, err = train(capsys, tmp_path, tmp_path / "taper.pt", x, y, "--lr", "0.5")
    assert code == 0, err
    model = stacks.double()
    value = torch.nn.MSELoss()(model[1](model[0](torch.tensor(x[:, None]))[0])[0],
                               torch.tensor(y[:, None]))
    value.backward()
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert list(trained) == list(stacks.state_dict())
    for name, parameter in model.named_parameters():
        expected = parameter.detach() - 0.5 * parameter.grad
        assert torch.allclose(trained[name].double(), expected, atol=1e-5), name
    assert json.loads((tmp_path / "run" / "train.json").read_text())["placement"][
        "engine"][1].startswith("LSTM(6 -> 3) (1.weight_ih_l0")


class EmbedLstm(torch.nn.Module):
    """Token ids through an nn.Embedding into an LSTM (time first)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(6, 3)
        self.rnn = torch.nn.LSTM(3, 4)

    def forward(self, tokens):
        return self.rnn(self.embed(tokens))


@pytest.mark.parametrize("shape", [(2, 5), (5,)])
def test_embedding_is_trained_on_the_host(capsys, tmp_path, shape):
    """Token ids (batch x seq_len, or seq_len for one sequence) through the embedding on
    the host: the embedding trains in the same step as PyTorch's SGD of the whole model;
    the rows no token reads stay as they were."""
    torch.manual_seed(13)
    model = EmbedLstm()
    torch.save(model.state_dict(), tmp_path / "m.pt")
    rng = np.random.default_rng(13)
    tokens = rng.integers(0, 5, shape)                      # token 5 is never read
    y = rng.uniform(-1, 1, (*shape, 4))
    code, out, err = train(capsys, tmp_path, tmp_path / "m.pt", tokens, y, "--lr", "0.5",
                           "--steps", "2")
    assert code == 0, err
    time_first = tokens.T if tokens.ndim == 2 else tokens[:, None]
    targets = y.transpose(1, 0, 2) if y.ndim == 3 else y[:, None]
    reference = sgd_reference(model, time_first, targets, "mse", 0.5, 2)
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert list(trained) == list(model.state_dict())
    for name, value in reference.state_dict().items():
        assert torch.allclose(trained[name].double(), value, atol=1e-5), name
    assert not torch.equal(trained["embed.weight"][:5], model.embed.weight.detach()[:5])
    assert torch.equal(trained["embed.weight"][5], model.embed.weight.detach()[5])
    log = json.loads((tmp_path / "run" / "train.json").read_text())
    assert log["placement"]["host"] == ["Embedding(6 -> 3) (embed.weight)"]
    for step in log["steps"]:
        assert 0 < step["embedding_update_max_abs_diff"] <= step["update_max_abs_diff"] \
            <= step["update_bound"]
    assert re.search(r"train: step 2/2: .* update within \S+ \(embedding \S+\) of the "
                     r"reference \(bound 5e-05\)", err), err


@pytest.mark.parametrize("tokens, message", [
    (np.array([[0.0, 1.0]]), r"--inputs must be integer token ids for the embedding "
                             r"embed\.weight \(6 rows\), not float64 values"),
    (np.array([[0, 6], [1, 2]]), r"--inputs holds token id 6 at \(0, 1\): token ids must "
                                 r"be from 0 to 5 for the embedding embed\.weight \(6 "
                                 r"rows\)"),
    (np.array([3, -1, 2]), r"--inputs holds token id -1 at \(1,\): token ids must be from 0 "
                           r"to 5 for the embedding embed\.weight \(6 rows\)"),
    (np.zeros((2, 3, 3), int), r"--inputs must be seq_len or batch x seq_len token ids for "
                               r"the embedding embed\.weight \(6 rows\), not \(2, 3, 3\)"),
])
def test_token_ids_are_checked(capsys, tmp_path, tokens, message):
    torch.save(EmbedLstm().state_dict(), tmp_path / "m.pt")
    code, out, err = train(capsys, tmp_path, tmp_path / "m.pt", tokens,
                           np.zeros((*tokens.shape[:2], 4)))
    assert code == 2 and out == ""
    assert re.fullmatch(rf"nnrtl: error: {message}\n", err), err
    assert not (tmp_path / "run").exists()


class NoInputGradient(HostTrainer):
    input_gradient = None


def test_a_trainer_without_an_input_gradient_refuses_an_embedding(capsys, tmp_path):
    registry.unregister("host")
    registry.register(dataclasses.replace(
        HOST, train=lambda request, network: NoInputGradient(DemoConfig())))
    torch.save(EmbedLstm().state_dict(), tmp_path / "m.pt")
    code, out, err = train(capsys, tmp_path, tmp_path / "m.pt", np.array([1, 2]),
                           np.zeros((2, 4)))
    assert code == 2 and out == ""
    assert re.fullmatch(r"nnrtl: error: the host engine's trainer gives no gradient at the "
                        r"network's inputs: it cannot train the embedding embed\.weight in "
                        r"front of the RNN\n", err), err

"""The whole model ``nnrtl train`` trains (:mod:`nnrtl.gen.models.train_model`): RNN stacks,
a Linear head and an Embedding in front from a state_dict, chained stacks, ``prefix``,
every other key refused by name, and the model written back with the head's and the
embedding's tensors."""

import json
import re

import numpy as np
import pytest
import torch

from nnrtl.gen.cli import main
from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import GRU, LSTM, Linear
from nnrtl.gen.models import reference
from nnrtl.gen.models.train_model import Embedding, load_train_model, save_train_model


class GruHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(1, 8, 2)
        self.head = torch.nn.Linear(8, 1)


def saved(tmp_path, state, name="m.pt"):
    torch.save(state, tmp_path / name)
    return tmp_path / name


def test_rnn_and_linear_head(tmp_path):
    torch.manual_seed(0)
    module = GruHead()
    model = load_train_model(saved(tmp_path, module.state_dict()))
    assert [type(layer) for layer in model.network.layers] == [GRU, GRU]
    assert model.stacks == ("rnn.",) and model.unchanged == ()
    assert [type(layer) for layer in model.head.layers] == [Linear]
    assert set(model.head.parameters()) == {"head.weight", "head.bias"}
    assert np.array_equal(model.head.parameters()["head.weight"],
                          module.head.weight.detach().double().numpy())
    assert model.placement() == {
        "engine": ["GRU(1 -> 8) (rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, "
                   "rnn.bias_hh_l0)",
                   "GRU(8 -> 8) (rnn.weight_ih_l1, rnn.weight_hh_l1, rnn.bias_ih_l1, "
                   "rnn.bias_hh_l1)"],
        "host": ["Linear(8 -> 1) (head.weight, head.bias)"], "unchanged": []}


def test_save_writes_the_head_back(tmp_path):
    torch.manual_seed(1)
    module = GruHead()
    model = load_train_model(saved(tmp_path, module.state_dict()))
    head = model.head.with_parameters({"head.weight": np.full((1, 8), 0.25)})
    save_train_model(model.__class__(model.network, head, model.stacks), tmp_path / "o.pt")
    written = torch.load(tmp_path / "o.pt", weights_only=True)
    assert list(written) == list(module.state_dict())
    assert torch.equal(written["head.weight"], torch.full((1, 8), 0.25))
    assert written["head.weight"].dtype == torch.float32
    for name, value in module.state_dict().items():
        if name != "head.weight":
            assert torch.equal(written[name], value), name


def test_chained_stacks_run_in_order(tmp_path):
    torch.manual_seed(2)
    stacks = torch.nn.ModuleList([torch.nn.LSTM(1, 8), torch.nn.LSTM(8, 3, 2)])
    model = load_train_model(saved(tmp_path, stacks.state_dict()))
    assert model.stacks == ("0.", "1.") and model.head is None
    assert [(layer.input_size, layer.hidden_size) for layer in model.network.layers] == [
        (1, 8), (8, 3), (3, 3)]
    assert list(model.network.parameters()) == list(stacks.state_dict())
    assert np.array_equal(model.network.layers[2].weight_hh,
                          stacks[1].weight_hh_l1.detach().double().numpy())
    changed = model.network.with_parameters({"1.bias_hh_l1": np.ones(12)})
    assert np.array_equal(changed.layers[2].bias_hh, np.ones(12))
    save_train_model(model.__class__(changed), tmp_path / "o.pt")
    assert torch.equal(torch.load(tmp_path / "o.pt", weights_only=True)["1.bias_hh_l1"],
                       torch.ones(12))


def test_prefix_picks_one_stack(tmp_path):
    torch.manual_seed(3)
    path = saved(tmp_path, torch.nn.ModuleList([torch.nn.GRU(1, 8),
                                                torch.nn.GRU(3, 1)]).state_dict())
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: several RNNs \('0\.', "
                                         r"'1\.'\) that do not chain: '1\.' takes 3 "
                                         r"features, '0\.' gives 8; pick one with --prefix "
                                         r"\(e\.g\. --prefix 0\.\)$"):
        load_train_model(path)
    model = load_train_model(path, prefix="1.")
    assert model.stacks == ("1.",) and model.network.layers[0].input_size == 3
    assert model.unchanged == ("0.bias_hh_l0", "0.bias_ih_l0", "0.weight_hh_l0",
                               "0.weight_ih_l0")
    assert model.placement()["unchanged"] == list(model.unchanged)
    with pytest.raises(UsageError, match=rf"^--prefix '2\.': {re.escape(str(path))} has no "
                                         r"key 2\.weight_ih_l0; its RNNs are at the "
                                         r"prefixes: '0\.', '1\.'$"):
        load_train_model(path, prefix="2.")


@pytest.mark.parametrize("case, keys", [
    ("embedding", r"emb\.weight is"),          # 5 wide: the GRU takes 4
    ("two linears", r"out\.weight, out\.bias are"),
    ("batch norm", r"norm\.weight, norm\.bias, norm\.running_mean, norm\.running_var, "
                   r"norm\.num_batches_tracked are"),
])
def test_other_keys_are_refused_by_name(tmp_path, case, keys):
    torch.manual_seed(4)
    layers = {"embedding": {"emb": torch.nn.Embedding(10, 5)},
              "two linears": {"head": torch.nn.Linear(8, 6), "out": torch.nn.Linear(6, 2)},
              "batch norm": {"norm": torch.nn.BatchNorm1d(8)}}[case]
    module = torch.nn.ModuleDict({**layers, "rnn": torch.nn.GRU(4, 8)})
    path = saved(tmp_path, module.state_dict())
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: {keys} neither an RNN "
                                         r"stack \('rnn\.'\), one nn\.Linear reading its "
                                         r"8 outputs nor one nn\.Embedding giving its 4 "
                                         r"inputs: nnrtl train would leave (it|them) "
                                         r"untrained$"):
        load_train_model(path)


def test_a_bias_free_weight_of_the_input_width_may_be_either(tmp_path):
    """``weight`` alone, ``(n, 4)`` with the RNN's input and output both 4 wide, may be an
    embedding in front or a head after: refused, naming it. Beside a head with a bias it
    is the embedding; with the RNN 3 wide in and 4 out it is the head."""
    module = torch.nn.ModuleDict({"rnn": torch.nn.LSTM(4, 4),
                                  "proj": torch.nn.Linear(4, 9, bias=False)})
    path = saved(tmp_path, module.state_dict())
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: proj\.weight: a "
                                         r"bias-free weight 4 wide may be an nn\.Embedding in "
                                         r"front of the RNN or an nn\.Linear head after it "
                                         r"\(the RNN takes and gives 4 features\): nnrtl train "
                                         r"cannot tell which from a state_dict$"):
        load_train_model(path)
    module = torch.nn.ModuleDict({"emb": torch.nn.Embedding(9, 4),
                                  "rnn": torch.nn.LSTM(4, 4), "out": torch.nn.Linear(4, 2)})
    model = load_train_model(saved(tmp_path, module.state_dict()))
    assert model.embedding.key == "emb.weight" and set(model.head.parameters()) == {
        "out.weight", "out.bias"}
    module = torch.nn.ModuleDict({"rnn": torch.nn.LSTM(3, 4),
                                  "proj": torch.nn.Linear(4, 9, bias=False)})
    model = load_train_model(saved(tmp_path, module.state_dict()))
    assert model.head.layers[0].bias is None and model.embedding is None


class EmbedGru(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 3, dtype=torch.float64)
        self.rnn = torch.nn.GRU(3, 8)
        self.head = torch.nn.Linear(8, 2)


def test_embedding_in_front(tmp_path):
    """An nn.Embedding giving the first stack's inputs runs on the host: its weight
    (float64 here, written back so) and key, listed first among the host's layers."""
    torch.manual_seed(12)
    module = EmbedGru()
    model = load_train_model(saved(tmp_path, module.state_dict()))
    embedding = model.embedding
    assert isinstance(embedding, Embedding) and embedding.key == "embed.weight"
    assert (embedding.num_embeddings, embedding.embedding_dim, embedding.dtype) == (
        10, 3, "float64")
    assert np.array_equal(embedding.weight, module.embed.weight.detach().numpy())
    assert model.placement()["host"] == ["Embedding(10 -> 3) (embed.weight)",
                                         "Linear(8 -> 2) (head.weight, head.bias)"]
    assert np.array_equal(embedding.lookup(np.array([[2], [9]])),
                          embedding.weight[[2, 9]][:, None])
    updated = model.__class__(model.network, model.head, model.stacks,
                              embedding=embedding.with_weight(np.full((10, 3), 0.5)))
    save_train_model(updated, tmp_path / "o.pt")
    written = torch.load(tmp_path / "o.pt", weights_only=True)
    assert list(written) == list(module.state_dict())
    assert torch.equal(written["embed.weight"], torch.full((10, 3), 0.5, dtype=torch.float64))
    for name, value in module.state_dict().items():
        if name != "embed.weight":
            assert torch.equal(written[name], value), name


def test_embedding_sgd_step_sums_the_rows_tokens_read():
    """The gradient at the RNN's inputs summed into the rows the tokens read (token 1 twice,
    3 and 4 never), then PyTorch's SGD step."""
    embedding = Embedding("e.weight", np.arange(10.0).reshape(5, 2))
    tokens = np.array([[1, 0], [2, 1]])
    grad = np.arange(8.0).reshape(2, 2, 2)
    updated = embedding.sgd_step(tokens, grad, 0.5)
    expected = embedding.weight.copy()
    for (t, b), token in np.ndenumerate(tokens):
        expected[token] -= 0.5 * grad[t, b]
    assert np.array_equal(updated.weight, expected)
    with pytest.raises(ValueError, match=r"^the gradient at the RNN's inputs has shape "
                                         r"\(2, 2\), not \(2, 2, 2\)$"):
        embedding.sgd_step(tokens, grad[0], 0.5)


def test_a_keras_embedding_without_its_weights_is_refused(tmp_path):
    from lstm_files import keras_files, keras_weights, lstm_layer

    layers = [{"class_name": "Embedding", "config": {"name": "embedding", "input_dim": 10,
                                                     "output_dim": 5}},
              lstm_layer("lstm_1", False, first=True, last=True)]
    _, weights = keras_files(tmp_path, "keras2.2-model", keras_weights(1),
                             json_layers=layers)
    with pytest.raises(UsageError, match=rf"^{re.escape(str(weights))}: no group "
                                         r"model_weights/embedding for layer 'embedding'$"):
        load_train_model(weights)


def _keras_weights(layer):
    """``layer.get_weights()[0]``; Keras' own NumPy deprecation on the torch backend is
    Keras'."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return layer.get_weights()[0]


def test_a_keras_model_with_an_embedding_and_a_head(tmp_path):
    """Keras (torch backend) writes Embedding -> LSTM -> Dense as .keras and .h5: the
    embedding and the head for the host, the LSTM for the engine, the whole forward equal
    to Keras' predict; new embedding and head weights written back are what Keras reads."""
    import os
    import warnings
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,), dtype="int32"),
                              keras.layers.Embedding(11, 5),
                              keras.layers.LSTM(7, return_sequences=True),
                              keras.layers.Dense(2)])
    tokens = np.array([[3, 0, 10, 7, 7, 1]])
    with warnings.catch_warnings():     # Keras' own NumPy deprecation on the torch backend
        warnings.simplefilter("ignore", DeprecationWarning)
        expected = np.asarray(model.predict(tokens, verbose=0))[0]
    for name in ("m.keras", "m.h5"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.save(tmp_path / name)
        loaded = load_train_model(tmp_path / name)
        np.testing.assert_array_equal(loaded.embedding.weight,
                                      _keras_weights(model.layers[0]))
        hs, _ = loaded.network.forward(loaded.embedding.lookup(tokens[0]))
        (dense,) = loaded.head.layers
        np.testing.assert_allclose(hs @ dense.weight.T + dense.bias, expected, rtol=0,
                                   atol=1e-5)
        assert loaded.placement()["host"][0].startswith("Embedding(11 -> 5) (")
        changed = loaded.__class__(
            loaded.network, loaded.head.with_layers((Linear(np.full((2, 7), 0.25),
                                                            dense.bias),)),
            embedding=loaded.embedding.with_weight(np.full((11, 5), 0.5)))
        save_train_model(changed, tmp_path / f"o.{name.split('.')[1]}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            again = keras.models.load_model(tmp_path / f"o.{name.split('.')[1]}")
        np.testing.assert_array_equal(_keras_weights(again.layers[0]), np.full((11, 5), 0.5))
        np.testing.assert_array_equal(_keras_weights(again.layers[2]), np.full((7, 2), 0.25))
        np.testing.assert_array_equal(_keras_weights(again.layers[1]),
                                      _keras_weights(model.layers[1]))


def test_prefix_needs_a_state_dict(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x08\x07")
    with pytest.raises(UsageError, match=rf"^--prefix picks an RNN of a PyTorch state_dict; "
                                         rf"{re.escape(str(path))} is not one$"):
        load_train_model(path, prefix="rnn.")
    with pytest.raises(TypeError, match=r"^prefix must be a string, not 3$"):
        load_train_model(path, prefix=3)


def test_a_plain_rnn(tmp_path):
    torch.manual_seed(5)
    lstm = torch.nn.LSTM(2, 3)
    path = saved(tmp_path, lstm.state_dict())
    model = load_train_model(path)
    assert model.head is None and model.stacks == ("",)
    assert isinstance(model.network.layers[0], LSTM)


class LstmHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(3, 6, 2)
        self.fc = torch.nn.Linear(6, 2)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


def _exported(tmp_path):
    import warnings
    torch.manual_seed(4)
    module = LstmHead().eval()
    with warnings.catch_warnings():     # the exporter's own warnings are its own
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(5, 1, 3),), tmp_path / "m.onnx", dynamo=True,
                          verbose=False)
    return module, tmp_path / "m.onnx"


def test_an_onnx_graph_with_a_linear_head(tmp_path):
    """torch.onnx.export of LSTM -> Linear (the head as MatMul + Add): the stack for the
    engine, the head for the host, their outputs PyTorch's; the plain reader refuses the
    head, naming the node and where a whole model runs."""
    from nnrtl.gen.models import load_network
    module, path = _exported(tmp_path)
    model = load_train_model(path)
    assert [type(layer) for layer in model.network.layers] == [LSTM, LSTM]
    assert [type(layer) for layer in model.head.layers] == [Linear]
    x = np.random.default_rng(1).uniform(-1, 1, (5, 1, 3))
    hs, _ = model.network.forward(x)
    (linear,) = model.head.layers
    with torch.no_grad():
        want = module.double()(torch.tensor(x)).numpy()
    np.testing.assert_allclose(hs @ linear.weight.T + linear.bias, want, rtol=0, atol=1e-6)
    assert model.placement()["host"][0].startswith("Linear(6 -> 2) (")
    with pytest.raises(UsageError, match=r"MatMul.*: a head \(MatMul\) after the RNN; "
                                         r"the whole model runs where the host runs the head"):
        load_network(path)


def test_an_onnx_head_is_written_back(tmp_path):
    _, path = _exported(tmp_path)
    model = load_train_model(path)
    # MatMul's weight, (in, out) in the file
    name = next(entry.name for entry in model.head.entries
                if np.shape(entry.get(model.head.layers)) == (6, 2))
    head = model.head.with_parameters({name: np.full((6, 2), 0.5)})
    save_train_model(model.__class__(model.network, head), tmp_path / "o.onnx")
    again = load_train_model(tmp_path / "o.onnx")
    np.testing.assert_array_equal(again.head.layers[0].weight, np.full((2, 6), 0.5))
    for key, value in model.network.parameters().items():
        np.testing.assert_array_equal(again.network.parameters()[key], value)
    (linear,) = model.head.layers
    bad = model.head.with_layers((Linear(np.full((2, 6), np.nan), linear.bias),))
    with pytest.raises(UsageError, match=r"has NaN or infinite values; nothing written"):
        save_train_model(model.__class__(model.network, bad), tmp_path / "bad.onnx")
    assert not (tmp_path / "bad.onnx").exists()


def test_an_onnx_head_with_activations(tmp_path):
    """LSTM -> Linear -> Relu -> Linear -> Softmax: the head's layers, their forward ONNX's
    reference evaluator's; trained through nnrtl train (cross-entropy takes the logits
    before the Softmax) within the bound, and written back."""
    from onnx.reference import ReferenceEvaluator
    from onnx_files import lstm_with_head

    from nnrtl.gen.models import ReLU, Softmax

    torch.manual_seed(3)
    lstm = torch.nn.LSTM(3, 6).double()
    head = [torch.nn.Linear(6, 5).double(), "Relu", torch.nn.Linear(5, 4).double(), "Softmax"]
    path = lstm_with_head(lstm, tmp_path / "m.onnx", head)
    model = load_train_model(path)
    assert [type(layer) for layer in model.head.layers] == [Linear, ReLU, Linear, Softmax]
    x = np.random.default_rng(2).uniform(-1, 1, (5, 2, 3))
    out = model.network.forward(x)[0]
    for layer in model.head.layers:
        out = reference.layer_forward(layer, out)
    np.testing.assert_allclose(out, ReferenceEvaluator(str(path)).run(None, {"x": x})[0],
                               rtol=0, atol=1e-12)
    np.save(tmp_path / "x.npy", x.transpose(1, 0, 2))
    np.save(tmp_path / "y.npy", np.array([3, 1]))
    code = main(["train", "farnn", "--board", "vu9p", "--model", str(path), "--inputs",
                 str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"), "--loss",
                 "cross-entropy", "--lr", "0.5", "-o", str(tmp_path / "out")])
    assert code == 0
    trained = load_train_model(tmp_path / "out" / "model.onnx")
    assert not np.allclose(trained.head.layers[2].weight, model.head.layers[2].weight)
    summary = json.loads((tmp_path / "out" / "train.json").read_text())
    assert summary["within_bound"] is True
    # the step, independently: PyTorch float64 on the same modules, the cross-entropy of
    # the Softmax's probabilities at the last step (-log p of the target class)
    params = list(lstm.parameters()) + list(head[0].parameters()) + list(head[2].parameters())
    h = lstm(torch.tensor(x))[0][-1]
    probabilities = torch.softmax(head[2](torch.relu(head[0](h))), dim=-1)
    loss = -torch.log(probabilities[torch.arange(2), torch.tensor([3, 1])]).mean()
    loss.backward()
    torch.optim.SGD(params, lr=0.5).step()
    np.testing.assert_allclose(trained.head.layers[2].weight, head[2].weight.detach().numpy(),
                               rtol=0, atol=0.5 * 1e-4)
    np.testing.assert_allclose(trained.network.layers[0].weight_hh,
                               lstm.weight_hh_l0.detach().numpy(), rtol=0, atol=0.5 * 1e-4)

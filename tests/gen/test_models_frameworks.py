"""Model files the frameworks wrote (torch.save, torch.jit.save, torch.export.save,
torch.onnx.export, Keras 3 on the torch backend): the import's reference forward against
the framework's own, the round trip load -> save -> load, and the errors."""

import os
import pickle
import warnings
import zipfile

import numpy as np
import onnx
import pytest
import torch

from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import (GRU, LSTM, Conv2d, Flatten, Linear, MaxPool2d, ReLU,
                              from_torch, load_array, load_network, save_network, to_torch)
from nnrtl.gen.sbe.frommodel import load_model

INPUTS, HIDDEN, STEPS, BATCH = 5, 7, 6, 3


def _cnn():
    return torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1, stride=1),
                               torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(3 * 4 * 4, 5))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Every framework-written file, written once (the frameworks' own deprecation
    warnings, e.g. of ``torch.jit.script``, are theirs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _write_files(tmp_path_factory)


def _write_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("frameworks")
    torch.manual_seed(0)
    modules = {
        "lstm": torch.nn.LSTM(INPUTS, HIDDEN, num_layers=2),
        "lstm_proj": torch.nn.LSTM(INPUTS, HIDDEN, num_layers=2, proj_size=3),
        "lstm_bi": torch.nn.LSTM(INPUTS, HIDDEN, num_layers=2, bidirectional=True),
        "gru": torch.nn.GRU(INPUTS, HIDDEN, num_layers=2),
        "gru_bi": torch.nn.GRU(INPUTS, HIDDEN, bidirectional=True),
        "cnn": _cnn(),
    }
    paths = {}
    for name, module in modules.items():
        module.eval()
        paths[name] = directory / f"{name}.pt"
        torch.save(module.state_dict(), paths[name])
    x_rnn, x_cnn = torch.randn(STEPS, BATCH, INPUTS), torch.randn(2, 2, 8, 8)
    cnn = modules["cnn"]
    paths["script"] = directory / "script.pt"
    torch.jit.save(torch.jit.script(cnn), paths["script"])
    paths["trace"] = directory / "trace.pt"
    torch.jit.save(torch.jit.trace(cnn, x_cnn), paths["trace"])
    paths["export"] = directory / "cnn.pt2"
    torch.export.save(torch.export.export(cnn, (x_cnn,)), paths["export"])
    for name in ("lstm", "gru_bi", "cnn"):
        paths[f"{name}_onnx"] = directory / f"{name}.onnx"
        torch.onnx.export(modules[name], (x_cnn if name == "cnn" else x_rnn,),
                          paths[f"{name}_onnx"], dynamo=True, verbose=False)
    paths["whole"] = directory / "whole.pt"
    torch.save(modules["lstm"], paths["whole"])
    return modules, paths, directory


class Payload:
    """What a malicious pickle holds: unpickling it would run ``command``."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def torch64(module, x):
    module = module.double()
    with torch.no_grad():
        out = module(torch.from_numpy(x))
    return (out[0] if isinstance(out, tuple) else out).numpy()


def rnn_input(seed=1):
    return np.random.default_rng(seed).normal(size=(STEPS, BATCH, INPUTS))


def cnn_input(seed=1):
    return np.random.default_rng(seed).normal(size=(2, 2, 8, 8))


# Bound: the float64 reference against PyTorch's float64 forward of the same weights.
BOUND = 1e-12


@pytest.mark.parametrize("name, kinds, direction", [
    ("lstm", (LSTM, LSTM), "forward"), ("lstm_proj", (LSTM, LSTM), "forward"),
    ("lstm_bi", (LSTM, LSTM), "bidirectional"), ("gru", (GRU, GRU), "forward"),
    ("gru_bi", (GRU,), "bidirectional"),
])
def test_state_dict_matches_torch(files, name, kinds, direction):
    modules, paths, _ = files
    network = load_network(paths[name])
    assert tuple(type(layer) for layer in network.layers) == kinds
    assert {layer.direction for layer in network.layers} == {direction}
    assert network.format == "state_dict"
    assert set(network.parameters()) == set(modules[name].state_dict())
    x = rnn_input()
    output, states = network.forward(x)
    np.testing.assert_allclose(output, torch64(modules[name], x), rtol=0, atol=BOUND)
    # to_torch builds the same function, from_torch reads it back unchanged.
    module = to_torch(network)
    with torch.no_grad():
        again, _ = module(torch.from_numpy(x))
    np.testing.assert_allclose(again.numpy(), output, rtol=0, atol=BOUND)
    back = from_torch(network, module).parameters()
    for key, value in network.parameters().items():
        np.testing.assert_array_equal(back[key], value)


@pytest.mark.parametrize("name", ["cnn", "script", "trace", "export", "cnn_onnx"])
def test_cnn_files_match_torch(files, name):
    modules, paths, _ = files
    if name == "cnn":           # a state_dict has no structure: only RNNs are read from one
        with pytest.raises(UsageError, match=rf"^{paths['cnn']}: no key ends in weight_ih_l0: "
                                             r"not the state_dict of an nn\.LSTM or nn\.GRU$"):
            load_network(paths[name])
        return
    network = load_network(paths[name])
    assert [type(layer) for layer in network.layers] == [Conv2d, ReLU, MaxPool2d, Flatten,
                                                         Linear]
    x = cnn_input()
    np.testing.assert_allclose(network.forward(x), torch64(modules["cnn"], x), rtol=0,
                               atol=BOUND)
    assert set(network.parameters()) == {"0.weight", "0.bias", "4.weight", "4.bias"}


@pytest.mark.parametrize("name, kind", [("lstm_onnx", LSTM), ("gru_bi_onnx", GRU)])
def test_onnx_rnns_match_torch(files, name, kind):
    modules, paths, _ = files
    network = load_network(paths[name])
    assert network.format == "onnx" and all(isinstance(l, kind) for l in network.layers)
    x = rnn_input()
    np.testing.assert_allclose(network.forward(x)[0],
                               torch64(modules[name.removesuffix("_onnx")], x),
                               rtol=0, atol=BOUND)


@pytest.mark.parametrize("name", ["lstm", "lstm_bi", "gru", "script", "trace", "export",
                                  "lstm_onnx", "gru_bi_onnx", "cnn_onnx"])
def test_round_trip(files, tmp_path, name):
    """load -> save -> load gives identical arrays; changed parameters are written."""
    _, paths, _ = files
    network = load_network(paths[name])
    target = tmp_path / os.path.basename(paths[name])
    save_network(network, target)
    again = load_network(target)
    for key, value in network.parameters().items():
        np.testing.assert_array_equal(again.parameters()[key], value)
    halved = network.with_parameters({k: v / 2 for k, v in network.parameters().items()})
    save_network(halved, target)
    for key, value in load_network(target).parameters().items():
        np.testing.assert_array_equal(value, network.parameters()[key] / 2)


def test_written_files_load_in_their_framework(files, tmp_path):
    """The frameworks read what save_network wrote (trusted files we made)."""
    _, paths, _ = files
    state = load_network(paths["lstm"])
    save_network(state.with_parameters({"bias_hh_l1": np.ones(4 * HIDDEN)}), tmp_path / "s.pt")
    loaded = torch.load(tmp_path / "s.pt", weights_only=True)
    assert type(loaded) is dict and loaded["bias_hh_l1"].dtype == torch.float32
    assert torch.equal(loaded["bias_hh_l1"], torch.ones(4 * HIDDEN))
    export = load_network(paths["export"])
    save_network(export.with_parameters({"4.bias": np.arange(5.0)}), tmp_path / "e.pt2")
    program = torch.export.load(tmp_path / "e.pt2")
    assert torch.equal(program.state_dict["4.bias"], torch.arange(5.0))
    script = load_network(paths["script"])
    save_network(script.with_parameters({"0.bias": np.zeros(3)}), tmp_path / "j.pt")
    with warnings.catch_warnings():          # our own file: torch may load it
        warnings.simplefilter("ignore", DeprecationWarning)
        assert not torch.jit.load(tmp_path / "j.pt").state_dict()["0.bias"].any()


def test_sbe_reads_an_onnx_lstm(files):
    _, paths, _ = files
    network = load_model(paths["lstm_onnx"])
    assert network.spec.hidden_size == HIDDEN and network.spec.layers == 2
    with pytest.raises(UsageError, match=rf"^{paths['gru_bi_onnx']}: layer 0 is a GRU; the "
                                         r"SBE runs LSTM layers only$"):
        load_model(paths["gru_bi_onnx"])
    with pytest.raises(UsageError, match=rf"^{paths['script']}: layer 0 is a Conv2d; the SBE "
                                         r"runs LSTM layers only$"):
        load_model(paths["script"])


def test_pickled_module_is_refused(files):
    _, paths, _ = files
    with pytest.raises(UsageError, match=rf"^{paths['whole']}: holds pickled Python objects "
                                         r"\(a whole module saved with torch\.save\(model\)\?\), "
                                         r"which nnrtl does not unpickle; save "
                                         r"model\.state_dict\(\) instead$"):
        load_network(paths["whole"])


def test_malformed_files(files, tmp_path):
    modules, paths, _ = files
    state = {k: v.clone() for k, v in modules["lstm"].state_dict().items()}
    state["weight_hh_l1"][0, 0] = float("nan")
    torch.save(state, tmp_path / "nan.pt")
    with pytest.raises(UsageError, match=rf"^{tmp_path}/nan\.pt: weight_hh_l1 has NaN or "
                                         r"infinite values$"):
        load_network(tmp_path / "nan.pt")
    model = onnx.load(paths["cnn_onnx"])
    for node in model.graph.node:
        if node.op_type == "Relu":
            node.op_type = "Elu"
    onnx.save(model, tmp_path / "elu.onnx")
    with pytest.raises(UsageError, match=rf"^{tmp_path}/elu\.onnx: node 1 \(Elu "
                                         r"'.*'\): operator Elu is not supported$"):
        load_network(tmp_path / "elu.onnx")
    model = onnx.load(paths["gru_bi_onnx"])
    for attribute in model.graph.node[0].attribute:
        if attribute.name == "linear_before_reset":
            attribute.i = 0
    onnx.save(model, tmp_path / "gru0.onnx")
    # ONNX's other GRU form is read (and computed by the float64 reference; an engine
    # that does not run it refuses it: test_models_onnx.py)
    assert [layer.extensions() for layer in load_network(tmp_path / "gru0.onnx").layers][0] \
        == ("linear_before_reset=0",)
    (tmp_path / "junk.onnx").write_bytes(b"\x08\xff\xff")
    with pytest.raises(UsageError, match=rf"^{tmp_path}/junk\.onnx: not an ONNX model \("):
        load_network(tmp_path / "junk.onnx")
    # A TorchScript archive whose data.pkl would run a command if unpickled: read as data,
    # nothing runs and the file is refused.
    marker = tmp_path / "ran"
    with zipfile.ZipFile(paths["script"]) as source, \
            zipfile.ZipFile(tmp_path / "evil.pt", "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename.endswith("/data.pkl"):
                data = pickle.dumps(Payload(f"touch {marker}"), protocol=2)
            target.writestr(item, data)
    with pytest.raises(UsageError, match=rf"^{tmp_path}/evil\.pt: data\.pkl does not hold one "
                                         r"module$"):
        load_network(tmp_path / "evil.pt")
    assert not marker.exists()
    bad = load_network(paths["lstm"])
    with pytest.raises(UsageError, match=rf"^{paths['lstm']}: parameter bias_ih_l0 has NaN or "
                                         r"infinite values$"):
        bad.with_parameters({"bias_ih_l0": np.full(4 * HIDDEN, np.inf)})
    with pytest.raises(UsageError, match=rf"^{paths['lstm']}: parameter bias_ih_l0 has shape "
                                         r"\(28,\), not \(3,\)$"):
        bad.with_parameters({"bias_ih_l0": np.zeros(3)})


def test_load_array(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((4, 5), np.float32))
    assert load_array(tmp_path / "x.npy", what="inputs", ndim=2, last=5).dtype == np.float64
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UsageError, match=rf"^{tmp_path}/objects\.npy: the inputs are not a "
                                         r"plain \.npy array \("):
        load_array(tmp_path / "objects.npy", what="inputs")
    (tmp_path / "text.npy").write_text("1 2 3\n")
    with pytest.raises(UsageError, match=rf"^{tmp_path}/text\.npy: the inputs are not a "
                                         r"\.npy file \(it does not begin with numpy's magic "
                                         r"string; a text file\? write arrays with "
                                         r"numpy\.save\)$"):
        load_array(tmp_path / "text.npy", what="inputs")
    with pytest.raises(UsageError, match=rf"^{tmp_path}/x\.npy: the targets have 2 dimensions "
                                         r"\(shape \(4, 5\)\); 3 are needed$"):
        load_array(tmp_path / "x.npy", what="targets", ndim=3)
    np.save(tmp_path / "c.npy", np.ones(3, np.complex128))
    with pytest.raises(UsageError, match=rf"^{tmp_path}/c\.npy: the inputs have dtype "
                                         r"complex128; integers or floating point are needed$"):
        load_array(tmp_path / "c.npy", what="inputs")

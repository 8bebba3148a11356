"""ONNX graphs beyond what the dynamo exporter writes: the TorchScript-based exporter
(``dynamo=False``: Shape/Expand for the initial states), hand-built graphs with a reverse
LSTM and a MatMul + Add classifier, and the operator attributes nnrtl refuses."""

import dataclasses
import warnings

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import (GRU, LSTM, Flatten, Linear, Network, ReLU, load_network,
                              save_network, to_torch)

INPUTS, HIDDEN, STEPS, BATCH = 4, 5, 6, 2
BOUND = 1e-12           # float64 reference against PyTorch float64, same weights


def torch64(module, x):
    with torch.no_grad():
        out = module.double()(torch.from_numpy(x))
    return (out[0] if isinstance(out, tuple) else out).numpy()


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "legacy.onnx"
    torch.manual_seed(3)
    lstm = torch.nn.LSTM(INPUTS, HIDDEN, num_layers=2, bidirectional=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(lstm, (torch.randn(STEPS, BATCH, INPUTS),), path, dynamo=False)
    return lstm, path


def test_legacy_exporter(legacy, tmp_path):
    lstm, path = legacy
    network = load_network(path)
    assert [layer.direction for layer in network.layers] == ["bidirectional"] * 2
    x = np.random.default_rng(0).normal(size=(STEPS, BATCH, INPUTS))
    np.testing.assert_allclose(network.forward(x)[0], torch64(lstm, x), rtol=0, atol=BOUND)
    save_network(network, tmp_path / "again.onnx")
    for key, value in load_network(tmp_path / "again.onnx").parameters().items():
        np.testing.assert_array_equal(value, network.parameters()[key])


def onnx_blocks(tensor, order):
    """Gate blocks of a PyTorch tensor in ONNX order (``order``: PyTorch block indices)."""
    blocks = np.split(tensor.detach().numpy().astype(np.float64), len(order))
    return np.concatenate([blocks[i] for i in order])


def write(path, nodes, initializers, inputs, outputs):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


def reverse_lstm_file(path, lstm, **extra):
    """An ONNX LSTM with direction="reverse" holding ``lstm``'s weights; ONNX gate order
    i, o, f, c is PyTorch's blocks 0, 3, 1, 2."""
    order = [0, 3, 1, 2]
    initializers = {
        "W": onnx_blocks(lstm.weight_ih_l0, order)[None],
        "R": onnx_blocks(lstm.weight_hh_l0, order)[None],
        "B": np.concatenate([onnx_blocks(lstm.bias_ih_l0, order),
                             onnx_blocks(lstm.bias_hh_l0, order)])[None],
        **extra.pop("initializers", {}),
    }
    node = helper.make_node("LSTM", ["x", "W", "R", "B", *extra.pop("inputs", [])],
                            ["y"], hidden_size=HIDDEN, direction="reverse", **extra)
    return write(path, [node], initializers,
                 [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None)],
                 [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])


def test_reverse_lstm(tmp_path):
    """ONNX's reverse direction: the sequence read from its end, each output at its step."""
    torch.manual_seed(4)
    lstm = torch.nn.LSTM(INPUTS, HIDDEN)
    network = load_network(reverse_lstm_file(tmp_path / "reverse.onnx", lstm))
    assert isinstance(network.layers[0], LSTM) and network.layers[0].direction == "reverse"
    x = np.random.default_rng(1).normal(size=(STEPS, BATCH, INPUTS))
    expected = torch64(lstm, x[::-1].copy())[::-1]
    np.testing.assert_allclose(network.forward(x)[0], expected, rtol=0, atol=BOUND)
    with torch.no_grad():
        again = to_torch(network)(torch.from_numpy(x))[0].numpy()
    np.testing.assert_allclose(again, expected, rtol=0, atol=BOUND)


def test_rnn_attributes_refused(tmp_path):
    lstm = torch.nn.LSTM(INPUTS, HIDDEN)
    path = reverse_lstm_file(tmp_path / "clip.onnx", lstm, clip=3.0)
    with pytest.raises(UsageError, match=rf"^{path}: node 0 \(LSTM ''\): attribute clip=3\.0 "
                                         r"is not supported \(only None\)$"):
        load_network(path)
    path = reverse_lstm_file(tmp_path / "state.onnx", lstm, inputs=["", "h0"],
                             initializers={"h0": np.ones((1, BATCH, HIDDEN))})
    with pytest.raises(UsageError, match=rf"^{path}: node 0 \(LSTM ''\): a constant nonzero "
                                         r"initial state \(h0\) is not supported$"):
        load_network(path)
    path = reverse_lstm_file(tmp_path / "peep.onnx", lstm, inputs=["", "", "", "P"],
                             initializers={"P": np.zeros((1, 2 * HIDDEN))})
    with pytest.raises(UsageError, match=rf"^{path}: node 0 \(LSTM ''\): P has shape \(1, 10\), "
                                         r"expected \(1, 15\) \(directions, 3 \* "
                                         r"hidden_size\)$"):
        load_network(path)
    weights = {"W": np.full((1, 4 * HIDDEN, INPUTS), np.nan)}
    path = reverse_lstm_file(tmp_path / "nan.onnx", lstm, initializers=weights)
    with pytest.raises(UsageError, match=rf"^{path}: initializer W has NaN or infinite "
                                         r"values$"):
        load_network(path)


def test_matmul_add_classifier(tmp_path):
    """Flatten, MatMul + Add (weights stored in x out, as Keras-style exporters write),
    Relu: the Linear is weight = W.T, and W is written back as stored."""
    rng = np.random.default_rng(2)
    w, b = rng.normal(size=(12, 3)), rng.normal(size=3)
    nodes = [helper.make_node("Flatten", ["x"], ["f"]),
             helper.make_node("MatMul", ["f", "W"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    path = write(tmp_path / "mlp.onnx", nodes, {"W": w, "b": b},
                 [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None)],
                 [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
    network = load_network(path)
    assert [type(layer) for layer in network.layers] == [Flatten, Linear, ReLU]
    x = rng.normal(size=(2, 3, 2, 2))
    np.testing.assert_allclose(network.forward(x), np.maximum(x.reshape(2, 12) @ w + b, 0),
                               rtol=0, atol=BOUND)
    assert set(network.parameters()) == {"W", "b"}
    np.testing.assert_array_equal(network.parameters()["W"], w)
    save_network(network.with_parameters({"W": w * 3}), tmp_path / "mlp3.onnx")
    stored = {t.name: numpy_helper.to_array(t)
              for t in onnx.load(tmp_path / "mlp3.onnx").graph.initializer}
    np.testing.assert_array_equal(stored["W"], w * 3)


def test_onnx_forms_the_engines_do_not_run_are_refused(tmp_path):
    """Peepholes and a GRU with ``linear_before_reset=0`` are read and computed by the
    float64 reference, and refused with the reason where a layer goes to PyTorch or an
    engine that does not run them; a ``sequence_lens`` that is not every sequence's full
    length is refused when read."""
    from nnrtl.gen.farnn.trainer import _workload_sizes
    from nnrtl.gen.omni.trainer import _check_network
    from nnrtl.gen.sbe.frommodel import check_model
    lstm = torch.nn.LSTM(INPUTS, HIDDEN)
    path = reverse_lstm_file(tmp_path / "peep.onnx", lstm, inputs=["", "", "", "P"],
                             initializers={"P": np.ones((1, 3 * HIDDEN))})
    network = load_network(path)
    assert network.layers[0].extensions() == ("peepholes",)
    forward_lstm = type(network)((dataclasses.replace(network.layers[0],
                                                      direction="forward"),),
                                 source=str(path))
    rule = r"uses peepholes \(ONNX forms PyTorch's LSTM and GRU do not have\); "
    with pytest.raises(UsageError, match=rf"^{path}: layer 0 {rule}the SBE does not run them$"):
        check_model(forward_lstm)
    with pytest.raises(UsageError, match=rf"^layer 0 of {path} {rule}the omni engine"):
        _check_network(forward_lstm)
    with pytest.raises(UsageError, match=rf"^{path}: layer 0 {rule}PyTorch does not run"):
        to_torch(network)
    gru = GRU(np.ones((6, 2)), np.ones((6, 2)), linear_before_reset=False)
    with pytest.raises(UsageError, match=r"^layer 0 of m uses linear_before_reset=0 .*the "
                                         r"farnn engine does not run them$"):
        _workload_sizes(Network((gru,), source="m"))
    path = reverse_lstm_file(tmp_path / "lengths.onnx", lstm, inputs=["lengths"],
                             initializers={"lengths": np.array([STEPS, 2], np.int32)})
    with pytest.raises(UsageError, match=r": sequence_lens lengths is not supported \(only a "
                                         r"graph input, given at run time with --lengths, or "
                                         r"a constant equal to every sequence's full length"):
        load_network(path)


def test_sequence_lens_graph_input_is_each_runs_lengths(tmp_path):
    """``sequence_lens`` as a graph input: the layer reads it from ``lengths``; a reverse
    LSTM then starts at each sequence's last step, as the reverse half of PyTorch's
    bidirectional LSTM on packed sequences does."""
    torch.manual_seed(6)
    both = torch.nn.LSTM(INPUTS, HIDDEN, bidirectional=True, dtype=torch.float64)
    reverse = torch.nn.LSTM(INPUTS, HIDDEN, dtype=torch.float64)
    reverse.load_state_dict({name: getattr(both, name + "_reverse")
                             for name in reverse.state_dict()})
    path = reverse_lstm_file(tmp_path / "lengths.onnx", reverse, inputs=["lengths"])
    model = onnx.load(path)
    model.graph.input.append(helper.make_tensor_value_info("lengths", TensorProto.INT32,
                                                           [BATCH]))
    onnx.save(model, path)
    network = load_network(path)
    lengths = np.array([STEPS, 2, 1][:BATCH])
    x = np.random.default_rng(2).normal(size=(STEPS, BATCH, INPUTS))
    sequence = torch.nn.utils.rnn.pack_padded_sequence(torch.from_numpy(x),
                                                       torch.from_numpy(lengths),
                                                       enforce_sorted=False)
    expected = torch.nn.utils.rnn.pad_packed_sequence(both(sequence)[0],
                                                      total_length=STEPS)[0]
    np.testing.assert_allclose(network.forward(x, lengths=lengths)[0],
                               expected[..., HIDDEN:].detach().numpy(), rtol=0, atol=BOUND)

"""ONNX's own LSTM and GRU operator test cases (``onnx.backend.test.case.node``, written by
the ONNX project, with its expected outputs) through the model layer: each case's graph
with its weights made initializers, read by :func:`~nnrtl.gen.models.load_onnx`, its
float64 reference forward (:mod:`nnrtl.gen.models.reference`) against ONNX's ``Y``,
``Y_h`` and ``Y_c`` (batch-first cases' data put time first, as nnrtl takes it), or
refused with the reason."""

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import load_network, save_network

#: ONNX computes its expected outputs in float32.
BOUND = 1e-5

#: Every LSTM and GRU case onnx ships: ``None`` when it runs, else the refusal's text.
CASES = {
    "test_lstm_defaults": None,
    "test_lstm_with_initial_bias": None,
    "test_lstm_with_peepholes": None,
    "test_lstm_reverse": None,
    "test_lstm_bidirectional": None,
    "test_lstm_batchwise": None,
    "test_gru_defaults": None,
    "test_gru_with_initial_bias": None,
    "test_gru_seq_length": None,
    "test_gru_reverse": None,
    "test_gru_bidirectional": None,
    "test_gru_batchwise": None,
}


def _cases():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = collect_testcases()       # by op_type, it returns the first type's again
    return {case.name: case for case in found
            if case.model.graph.node and case.model.graph.node[0].op_type in ("LSTM", "GRU")}


@pytest.fixture(scope="module")
def cases():
    return _cases()


def _with_initializers(case, path):
    """The case's model with every input but ``X`` an initializer of its test data."""
    graph = case.model.graph
    inputs, _outputs = case.data_sets[0]
    values = dict(zip([value.name for value in graph.input], inputs))
    initializers = [numpy_helper.from_array(np.asarray(value), name)
                    for name, value in values.items() if name != "X"]
    new = helper.make_graph(list(graph.node), graph.name,
                            [value for value in graph.input if value.name == "X"],
                            list(graph.output), initializers)
    model = helper.make_model(new, opset_imports=list(case.model.opset_import))
    onnx.save(model, path)
    return path, values["X"]


def test_every_case_onnx_ships_is_listed(cases):
    assert sorted(cases) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name, cases, tmp_path):
    case = cases[name]
    path, x = _with_initializers(case, tmp_path / f"{name}.onnx")
    refusal = CASES[name]
    if refusal is not None:
        with pytest.raises(UsageError, match=refusal):
            load_network(path)
        return
    network = load_network(path)
    (layer,) = network.layers
    expected = dict(zip([value.name for value in case.model.graph.output],
                        case.data_sets[0][1]))
    if any(a.name == "layout" and a.i == 1 for a in case.model.graph.node[0].attribute):
        # batch first in the graph: X [batch, steps, inputs], Y [batch, steps, dirs,
        # hidden], Y_h and Y_c [batch, dirs, hidden]; nnrtl's inputs are time first
        x = np.swapaxes(x, 0, 1)
        expected = {key: np.swapaxes(value, 0, 1) if key != "Y" else
                    value.transpose(1, 2, 0, 3) for key, value in expected.items()}
    output, (final,) = network.forward(np.asarray(x, dtype=np.float64))
    states = final if isinstance(final, tuple) else (final,)
    steps, batch = x.shape[:2]
    directions = layer.num_directions
    checked = 0
    for name_, got in (("Y", output.reshape(steps, batch, directions, -1).transpose(0, 2, 1, 3)),
                       ("Y_h", states[0]), ("Y_c", states[1] if len(states) > 1 else None)):
        if name_ in expected and got is not None:
            np.testing.assert_allclose(got, expected[name_], rtol=0, atol=BOUND,
                                       err_msg=f"{name} {name_}")
            checked += 1
    assert checked >= 1
    # a round trip writes the same initializers back (P and the GRU's form included)
    save_network(network, tmp_path / "again.onnx")
    again = load_network(tmp_path / "again.onnx")
    for key, value in again.parameters().items():
        np.testing.assert_array_equal(value, network.parameters()[key])
    assert again.layers[0].extensions() == layer.extensions()


@pytest.mark.parametrize("op, direction, extra", [
    ("LSTM", "bidirectional", {"P": True}), ("LSTM", "reverse", {"P": True}),
    ("GRU", "forward", {"linear_before_reset": 0}),
    ("GRU", "bidirectional", {"linear_before_reset": 0}),
    ("GRU", "reverse", {"linear_before_reset": 1})])
def test_random_models_equal_onnx_reference_evaluator(op, direction, extra, tmp_path):
    """Random weights (peepholes, both GRU forms, every direction) over 5 steps: the
    model layer's float64 forward against ``onnx.reference.ReferenceEvaluator``."""
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(sum(map(ord, op + direction)))
    steps, batch, inputs, hidden = 5, 2, 3, 4
    gates, directions = (4 if op == "LSTM" else 3), (2 if direction == "bidirectional" else 1)
    weights = {"W": rng.normal(size=(directions, gates * hidden, inputs)),
               "R": rng.normal(size=(directions, gates * hidden, hidden)) * 0.5,
               "B": rng.normal(size=(directions, 2 * gates * hidden)) * 0.5}
    names = ["X", "W", "R", "B"]
    if extra.get("P"):
        weights["P"] = rng.normal(size=(directions, 3 * hidden))
        names += ["", "", "", "P"]
    attrs = {"hidden_size": hidden, "direction": direction}
    if "linear_before_reset" in extra:
        attrs["linear_before_reset"] = extra["linear_before_reset"]
    node = helper.make_node(op, names, ["Y", "Y_h"], **attrs)
    x_info = helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [steps, batch, inputs])
    outputs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
               for n in ("Y", "Y_h")]
    graph = helper.make_graph([node], "g", [x_info], outputs,
                              [numpy_helper.from_array(v.astype(np.float32), k)
                               for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "random.onnx"
    onnx.save(model, path)
    x = rng.normal(size=(steps, batch, inputs)).astype(np.float32)
    y, y_h = ReferenceEvaluator(model).run(None, {"X": x})
    network = load_network(path)
    output, (final,) = network.forward(x.astype(np.float64))
    h_n = final[0] if isinstance(final, tuple) else final
    got = output.reshape(steps, batch, directions, hidden).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(got, y, rtol=0, atol=BOUND)
    np.testing.assert_allclose(h_n, y_h, rtol=0, atol=BOUND)

"""The layers real CNNs have, in the model layer: grouped convolutions, LRN, Dropout, a
max-pool padded more at its end, Softmax, and the weights a ``ConstantOfShape`` fills (the
onnx package's light model zoo files). The float64 reference against PyTorch
(``to_torch``), against ONNX's own ``ReferenceEvaluator`` where it computes the operator
(its ``LRN`` sums the squares for the first channels only, looping over the batch axis
instead of the channels: the LRN is checked against PyTorch and the ONNX formula by hand)."""

import glob
import os

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import (Conv2d, Dropout, LocalResponseNorm, MaxPool2d, Softmax,
                              load_network, save_network, to_torch)

LIGHT = glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data",
                               "light"))[0]


def real_cnn(path, lrn=True):
    """Conv (2 groups) -> Relu -> LRN -> MaxPool (pads 0, 0, 1, 1) -> Reshape -> Gemm ->
    Dropout -> Gemm -> Softmax, random weights, opset 9 (as the light models); without
    ``lrn``, no LRN."""
    rng = np.random.default_rng(0)
    weights = {"w1": rng.normal(size=(4, 1, 3, 3)), "b1": rng.normal(size=4),
               "shape": np.array([0, -1], np.int64), "w2": rng.normal(size=(5, 16)) / 4,
               "b2": rng.normal(size=5), "w3": rng.normal(size=(3, 5)), "b3": rng.normal(size=3)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], group=2, pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("LRN", ["r"], ["n"], size=3, alpha=0.5, beta=0.75, bias=2.0)
        if lrn else helper.make_node("Identity", ["r"], ["n"]),
        helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[0, 0, 1, 1]),
        helper.make_node("Reshape", ["p", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["g"], transB=1),
        helper.make_node("Dropout", ["g"], ["d", "mask"], ratio=0.3),
        helper.make_node("Gemm", ["d", "w3", "b3"], ["h"], transB=1),
        helper.make_node("Softmax", ["h"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "real", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 2, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]), path)
    return path


def test_real_cnn_layers_against_onnx_and_pytorch(tmp_path):
    path = real_cnn(tmp_path / "real.onnx")
    network = load_network(path)
    kinds = [type(layer).__name__ for layer in network.layers]
    assert kinds == ["Conv2d", "ReLU", "LocalResponseNorm", "MaxPool2d", "Flatten", "Linear",
                     "Dropout", "Linear", "Softmax"]
    assert network.layers[0].groups == 2 and network.layers[0].in_channels == 2
    assert (network.layers[3].padding, network.layers[3].padding_end) == ((0, 0), (1, 1))
    x = np.random.default_rng(1).normal(size=(2, 2, 5, 5))
    ours = network.forward(x)
    module = to_torch(network).eval()                   # Dropout: the identity
    with torch.no_grad():
        np.testing.assert_allclose(module(torch.from_numpy(x)).numpy(), ours, rtol=0,
                                   atol=1e-12)
    plain = real_cnn(tmp_path / "plain.onnx", lrn=False)
    expected = ReferenceEvaluator(str(plain)).run(None, {"x": x})[0]
    np.testing.assert_allclose(load_network(plain).forward(x), expected, rtol=0, atol=1e-12)


def test_lrn_is_onnx_formula():
    """One value by the ONNX operator's formula: channel 2 of 5, size 4 (a window from
    c - 1 to c + 2), where PyTorch's even window would start at c - 2."""
    from nnrtl.gen.models.reference import layer_forward

    x = np.arange(1.0, 6.0).reshape(1, 5, 1, 1)
    layer = LocalResponseNorm(4, alpha=0.2, beta=0.5, k=1.5)
    squares = 2.0 ** 2 + 3.0 ** 2 + 4.0 ** 2 + 5.0 ** 2
    expected = 3.0 / (1.5 + 0.2 / 4 * squares) ** 0.5
    assert layer_forward(layer, x)[0, 2, 0, 0] == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("name, lrn", [("bvlc_alexnet", 2), ("zfnet512", 2)])
def test_light_model_zoo_files_read_and_compute(name, lrn):
    """The light files' weights come from ConstantOfShape nodes (0.02 each); the forward's
    logits (the layer before the Softmax) equal PyTorch's."""
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    network = load_network(path)
    assert sum(isinstance(layer, LocalResponseNorm) for layer in network.layers) == lrn
    assert isinstance(network.layers[-1], Softmax)
    assert np.all(network.layers[0].weight == np.float32(0.02))
    logits = type(network)(network.layers[:-1])
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224))
    module = to_torch(logits).eval()
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(logits.forward(x), expected, rtol=1e-9, atol=0)


def test_filled_weights_are_not_written_back(tmp_path):
    network = load_network(os.path.join(LIGHT, "light_bvlc_alexnet.onnx"))
    with pytest.raises(UsageError, match=r"conv1_b_0, .* are computed by the graph \(e\.g\. "
                                         r"ConstantOfShape\), not initializers: nnrtl writes "
                                         r"weights back into initializers only$"):
        save_network(network, tmp_path / "again.onnx")
    assert not (tmp_path / "again.onnx").exists()


@pytest.mark.parametrize("make, message", [
    (lambda: Conv2d(np.zeros((3, 2, 1, 1)), groups=2),
     r"Conv2d\.groups must be a positive integer dividing out_channels 3, not 2"),
    (lambda: MaxPool2d(2, padding=0, padding_end=2),
     r"MaxPool2d\.padding \(0, 0\) and padding_end \(2, 2\) must be at most half the "
     r"kernel_size \(2, 2\)"),
    (lambda: LocalResponseNorm(0), r"LocalResponseNorm\.size must be a positive integer"),
    (lambda: Dropout(1.0), r"Dropout\.p must be from 0 to below 1, not 1\.0"),
])
def test_layer_rules(make, message):
    with pytest.raises(ValueError, match=message):
        make()

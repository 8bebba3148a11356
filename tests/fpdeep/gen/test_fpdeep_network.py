"""FPDeep's layer chain: the built-in networks against the spec's §4.2 figures (standard
shapes, hand arithmetic) and a small CNN of the model layer."""

import numpy as np
import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep import alexnet, builtin, from_network, vgg16, vgg19
from nnrtl.gen.models import Conv2d, Flatten, Linear, MaxPool2d, Network, ReLU


def _m(layers, kind="conv"):
    return [layer.macs / 1e6 for layer in layers if layer.kind == kind]


def test_alexnet_shapes():
    """Spec §4.2: conv 105/448/150/224/150 M MAC (1.077 G), FC 59 M, conv params 3.75 M,
    FC 58.6 M; conv1 3 -> 96 11 x 11 / 4 gives 55 x 55."""
    chain = alexnet()
    conv = chain.layers[:5]
    assert [l.name for l in chain.layers] == ["conv1", "conv2", "conv3", "conv4", "conv5",
                                              "fc6", "fc7", "fc8"]
    assert (conv[0].ic, conv[0].oc, conv[0].k, conv[0].stride, conv[0].w_out) == \
        (3, 96, 11, 4, 55)
    assert np.allclose(_m(chain.layers), [105, 448, 150, 224, 150], atol=0.6)
    assert sum(_m(chain.layers)) == pytest.approx(1077, abs=1)
    assert sum(_m(chain.layers, "fc")) == pytest.approx(58.6, abs=0.1)
    assert sum(l.params for l in conv) / 1e6 == pytest.approx(3.75, abs=0.01)
    assert chain.layers[5].ic == 256 * 6 * 6 == 9216


@pytest.mark.parametrize("make, conv_g, params_m", [(vgg16, 15.35, 14.71),
                                                    (vgg19, 19.51, 20.02)])
def test_vgg_shapes(make, conv_g, params_m):
    chain = make()
    convs = [l for l in chain.layers if l.kind == "conv"]
    assert len(convs) == (13 if make is vgg16 else 16)
    assert sum(l.macs for l in convs) / 1e9 == pytest.approx(conv_g, abs=0.01)
    assert sum(l.params for l in convs) / 1e6 == pytest.approx(params_m, abs=0.01)
    assert sum(_m(chain.layers, "fc")) == pytest.approx(123.6, abs=0.1)
    by_name = {l.name: l.macs / 1e6 for l in chain.layers}
    assert by_name["conv1_1"] == pytest.approx(86.7, abs=0.1)     # 224² · 64 · 3 · 9
    assert by_name["conv1_2"] == pytest.approx(1850, abs=1)
    assert by_name["conv2_1"] == pytest.approx(925, abs=1)
    assert by_name["conv5_1"] == pytest.approx(462, abs=1)
    # input activations per sample (spec §4.2): conv1_2 3.21 M, conv5_x 0.10 M
    assert chain.layers[1].in_words / 1e6 == pytest.approx(3.21, abs=0.01)
    assert by_name["conv1_1"] and chain.layers[-4].in_words == 512 * 14 * 14


def test_training_work_per_sample():
    """FP, EB and PG: 3 · MAC per layer (``Op_l = 6 · MAC_l`` ops), but the first layer has
    no EB: 2 · MAC. VGG-16: 6 · MAC over all layers = 92.8 G ops (spec §4.2), less conv1_1's
    EB (2 · 86.7 M ops)."""
    chain = vgg16()
    first, second = chain.layers[:2]
    assert first.work == 2 * first.macs and second.work == 3 * second.macs
    total = sum(l.macs for l in chain.layers)
    assert 6 * total / 1e9 == pytest.approx(92.8, abs=0.05)
    assert 2 * chain.work == 6 * total - 2 * first.macs


def test_unknown_network_and_bad_size():
    with pytest.raises(UsageError, match="unknown network 'resnet'; built in: alexnet, vgg16, "
                                         "vgg19"):
        builtin("resnet")
    with pytest.raises(UsageError, match="--image-size must be a positive integer, not 0"):
        builtin("vgg16", 0)
    with pytest.raises(UsageError, match="alexnet: the pool after conv1 leaves no output at "
                                         "--image-size 8"):
        builtin("alexnet", 8)
    with pytest.raises(UsageError, match=r"cnn layers\[0\]: a 5 x 5 kernel \(stride 1, "
                                         r"padding 0\) does not fit a 3 x 3 input"):
        from_network(Network([Conv2d(np.zeros((4, 3, 5, 5)))]), 3, "cnn")


def _small(pool=True):
    z = np.zeros
    layers = [Conv2d(z((16, 3, 3, 3)), z(16), padding=1), ReLU()]
    layers += [MaxPool2d(2)] if pool else []
    layers += [Conv2d(z((32, 16, 3, 3)), z(32), padding=1), ReLU(), MaxPool2d(2), Flatten(),
               Linear(z((10, 32 * 8 * 8)), z(10))]
    return Network(layers)


def test_small_cnn_from_the_model_layer():
    """32 x 32 x 3 -> conv 16 (32²) -> pool 16² -> conv 32 (16²) -> pool 8² -> 2048 -> 10."""
    chain = from_network(_small(), 32, "cnn")
    assert [(l.kind, l.ic, l.oc, l.w_in, l.w_out, l.pool) for l in chain.layers] == [
        ("conv", 3, 16, 32, 32, (2, 2, 0)), ("conv", 16, 32, 16, 16, (2, 2, 0)),
        ("fc", 2048, 10, 1, 1, None)]
    assert [l.macs for l in chain.layers] == [32 * 32 * 16 * 3 * 9, 16 * 16 * 32 * 16 * 9,
                                              2048 * 10]
    assert [l.modules for l in chain.layers] == [2, 3, 3]


def test_small_cnn_refusals():
    with pytest.raises(UsageError, match=r"cnn layers\[7\]: Linear takes 2048 features, but "
                                         r"at --image-size 64 the layers before it give 8192"):
        from_network(_small(), 64, "cnn")
    z = np.zeros
    with pytest.raises(UsageError, match=r"layers\[0\]: kernel_size \(3, 5\) is not square"):
        from_network(Network([Conv2d(z((4, 3, 3, 5)))]), 16, "cnn")
    with pytest.raises(UsageError, match=r"layers\[0\]: FPDeep maps a MaxPool2d only right "
                                         r"after a Conv2d"):
        from_network(Network([MaxPool2d(2), Conv2d(z((4, 3, 3, 3)))]), 16, "cnn")


def _real():
    """Conv 4 -> 6 (2 groups) + ReLU + LRN + pool padded at its end, Linear + Dropout."""
    from nnrtl.gen.models import Dropout, LocalResponseNorm
    return Network([Conv2d(np.zeros((6, 2, 3, 3)), groups=2, padding=1), ReLU(),
                    LocalResponseNorm(5), MaxPool2d(3, 2, 0, 1), Flatten(),
                    Linear(np.zeros((5, 6 * 4 * 4))), Dropout(0.5)])


def test_real_layers_map_with_their_work():
    """A grouped convolution's MACs are its fan-in's (8² · 6 · 2 · 9 at 8 x 8); the LRN and
    the dropout ride on the layer before them (no MACs); the pool padded 1 at its end gives
    (8 + 1 - 3) // 2 + 1 = 4."""
    chain = from_network(_real(), 8, "real", mapping=True)
    conv, fc = chain.layers
    assert (conv.groups, conv.fan_in, conv.macs, conv.params) == (2, 2, 8 * 8 * 6 * 2 * 9,
                                                                  6 * 2 * 9)
    assert conv.lrn == (5, 1e-4, 0.75, 1.0) and conv.pool_end == 1 and conv.w_pooled == 4
    assert fc.ic == 96 and fc.dropout == 0.5


@pytest.mark.parametrize("index, what", [
    (0, r"a grouped convolution \(groups 2\)"), (2, "a LocalResponseNorm"),
    (3, "a pool padded 1 at its end and 0 at its start"), (6, "a Dropout")])
def test_real_layers_refused_for_the_chain(index, what):
    """Without ``mapping`` (the trainer's chain), each layer only the mapper costs is
    refused, naming it: the first one met."""
    layers = list(_real().layers)
    plain = [Conv2d(np.zeros((6, 4, 3, 3)), padding=1), ReLU(), None, MaxPool2d(3, 2),
             Flatten(), Linear(np.zeros((5, 6 * 3 * 3))), None]
    kept = [layers[n] if n == index else plain[n] for n in range(len(layers))]
    if index == 3:
        kept[-2] = Linear(np.zeros((5, 6 * 4 * 4)))
    network = Network([layer for layer in kept if layer is not None])
    with pytest.raises(UsageError, match=rf"^real layers\[\d\]: {what}: nnrtl map fpdeep maps "
                                         rf"it, but the fpdeep chain's golden model and RTL "
                                         rf"do not run it$"):
        from_network(network, 8, "real")


@pytest.mark.parametrize("name", ["bvlc_alexnet", pytest.param("zfnet512", marks=pytest.mark.slow),
                                  pytest.param("vgg19", marks=pytest.mark.slow)])
def test_model_zoo_files_map_onto_15_vc709(tmp_path, capsys, name):
    """The onnx package's light model zoo files (grouped convolutions, LRN, Dropout, their
    weights filled by ConstantOfShape) map onto 15 VC709s, storage checked, compute-bound;
    their convolutions' MACs as PyTorch's layers count them; the cluster simulator agrees
    with the mapping."""
    import glob
    import json
    import os

    import onnx
    import torch

    from nnrtl.gen.cli import main
    from nnrtl.gen.models import load_network

    path = glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data",
                                  "light", f"light_{name}.onnx"))[0]
    assert main(["map", "fpdeep", "--model", path, "--fpgas", "15", "--board", "vc709",
                 "-o", str(tmp_path / "m")]) == 0
    out, err = capsys.readouterr()
    assert "compute-bound" in out
    assert "image size 224 x 224, the model's input" in err
    summary = json.loads((tmp_path / "m" / "mapping.json").read_text())["summary"]
    assert summary["gops_per_fpga"] > 1000
    network = load_network(path)
    x, macs = torch.zeros(1, 3, 224, 224), 0
    for layer in network.layers:
        if type(layer).__name__ == "Conv2d":
            conv = torch.nn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size,
                                   layer.stride, layer.padding, groups=layer.groups)
            x = conv(x)
            macs += x[0].numel() * conv.weight[0].numel()
        elif type(layer).__name__ == "MaxPool2d":
            (top, left), (bottom, right) = layer.padding, layer.padding_end
            x = torch.nn.functional.max_pool2d(torch.nn.functional.pad(
                x, (left, right, top, bottom)), layer.kernel_size, layer.stride)
    chain = json.loads((tmp_path / "m" / "mapping.json").read_text())["network"]
    assert sum(layer["macs"] for layer in chain["layers"] if layer["kind"] == "conv") == macs
    # the cluster simulator runs the mapping: its period within 5% of the mapper's, every
    # buffer within its depth
    assert main(["cluster", "fpdeep", "--mapping", str(tmp_path / "m" / "mapping.json"),
                 "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert abs(simulated["period_cycles"] / simulated["mapper_period_cycles"] - 1) < 0.05
    assert simulated["act_ram_within_depth"] and simulated["pab_within_depth"]


def test_train_fpdeep_refuses_a_grouped_convolution(tmp_path, capsys):
    """``nnrtl train fpdeep`` on an ONNX CNN with a grouped convolution: exit 2 naming the
    layer, nothing written."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from nnrtl.gen.cli import main

    weights = {"w": np.ones((4, 1, 3, 3)), "shape": np.array([0, -1], np.int64),
               "f": np.ones((2, 4 * 5 * 5))}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=2, pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("Reshape", ["c", "shape"], ["r"]),
             helper.make_node("Gemm", ["r", "f"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 2, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              tmp_path / "g.onnx")
    np.save(tmp_path / "x.npy", np.zeros((2, 2, 5, 5)))
    np.save(tmp_path / "y.npy", np.array([0, 1]))
    code = main(["train", "fpdeep", "--board", "vc709", "--model", str(tmp_path / "g.onnx"),
                 "--inputs", str(tmp_path / "x.npy"), "--targets", str(tmp_path / "y.npy"),
                 "--loss", "cross-entropy", "--fpgas", "2", "-o", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err.strip().endswith(
        "layers[0]: a grouped convolution (groups 2): nnrtl map fpdeep maps it, but the "
        "fpdeep chain's golden model and RTL do not run it")
    assert not (tmp_path / "out").exists()

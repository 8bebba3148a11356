"""The FC layers of ``nnrtl train fpdeep`` on the FC engine (nnrtl.gen.fpdeep.fc_stage): the
tails it runs and the ones it leaves to the host; a ``Flatten, Linear, ReLU, Linear`` tail
over a random draw of sizes against PyTorch float64 autograd (logits, the weight and bias
gradients, the conv output's error, within a few word roundings), its RTL run bit-exact
under a pause pattern with its cycles equal to the cycle model when not paused (fp32's RTL
runs slow)."""

import random

import numpy as np
import pytest
import torch

from nnrtl.gen.fpdeep.chain import Codec
from nnrtl.gen.fpdeep.fc_cycles import fc_cycles
from nnrtl.gen.fpdeep.fc_stage import FcStage, fc_tail
from nnrtl.gen.models import Conv2d, Flatten, Linear, MaxPool2d, ReLU
from nnrtl.gen.models.network import Network


def conv():
    return Conv2d(weight=np.zeros((2, 1, 1, 1)), bias=np.zeros(2))


def linear(rng, n_out, n_in):
    return Linear(weight=rng.uniform(-0.5, 0.5, (n_out, n_in)),
                  bias=rng.uniform(-0.5, 0.5, n_out))


@pytest.mark.parametrize("tail, found", [
    ([Flatten(), "L"], [(3, False)]),
    ([Flatten(), "L", ReLU(), "L"], [(3, False), (5, True)]),
    ([Flatten(), "L", ReLU()], None),                  # a ReLU on the logits: the host's
    (["L"], None),                                      # no Flatten
    ([Flatten(), "L", MaxPool2d((1, 1)), "L"], None),
    ([Flatten(), "L", ReLU(), ReLU(), "L"], None),
])
def test_fc_tail(tail, found):
    rng = np.random.default_rng(0)
    layers = [conv(), ReLU()] + [linear(rng, 2, 2) if t == "L" else t for t in tail]
    assert fc_tail(Network(layers=layers), 2) == found


def torch_reference(network, tail, shape, conv_out, grad):
    """Logits, gradients and the conv output's error of PyTorch float64 (flatten C, H, W)."""
    height, width, channels = shape
    x = torch.tensor(np.stack(conv_out).transpose(0, 3, 1, 2), dtype=torch.float64,
                     requires_grad=True)
    params, h = [], x.reshape(len(conv_out), -1)
    for index, relu in tail:
        layer = network.layers[index]
        w = torch.tensor(layer.weight, requires_grad=True)
        b = torch.tensor(layer.bias, requires_grad=True)
        h = torch.nn.functional.linear(torch.relu(h) if relu else h, w, b)
        params.append((index, w, b))
    h.backward(torch.tensor(grad))
    grads = {}
    for index, w, b in params:
        grads[(index, "weight")], grads[(index, "bias")] = w.grad.numpy(), b.grad.numpy()
    return h.detach().numpy(), grads, x.grad.numpy().transpose(0, 2, 3, 1)


SLOW = pytest.mark.slow        # fp32 engines simulate at about a second per hundred cycles


@pytest.mark.parametrize("precision, seed, pattern", [
    ("fixed16", 0, "random"), ("fixed16", 2, "none"), ("fp32", 3, None),
    pytest.param("fp32", 1, "bursty", marks=SLOW), pytest.param("fp32", 4, "none", marks=SLOW)])
def test_fc_stage_against_torch(precision, seed, pattern):
    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    shape = (r.randint(1, 2), r.randint(1, 2), r.randint(1, 3))
    batch, hidden, classes = r.randint(1, 3), r.randint(2, 5), r.randint(2, 4)
    n_in = shape[0] * shape[1] * shape[2]
    network = Network(layers=[conv(), ReLU(), Flatten(), linear(rng, hidden, n_in), ReLU(),
                              linear(rng, classes, hidden)])
    tail = fc_tail(network, 2)
    codec = Codec(precision, 13)
    lr = 4096 if precision == "fixed16" else 0x3D800000
    stage = FcStage(tail, shape, codec, lr, rtl=pattern)
    conv_out = [codec.decode(codec.encode(rng.uniform(0, 1, shape))) for _ in range(batch)]
    logits = stage.forward(network, [codec.encode(c) for c in conv_out])
    grad = codec.decode(codec.encode(rng.uniform(-0.5, 0.5, (batch, classes))))
    gradients, errors = stage.backward(grad)
    want_logits, want_grads, want_error = torch_reference(network, tail, shape, conv_out,
                                                          grad)
    # fixed16 q = 2^-13: the hidden layer's word rounding (≤ q/2) through ≤ 5 weights of
    # |w| ≤ 0.5 and the outputs' own; fp32 a few float32 roundings
    tol = 2.0 ** -11 if precision == "fixed16" else 1e-6
    assert np.abs(logits - want_logits).max() <= tol
    assert set(gradients) == set(want_grads)
    for key, value in want_grads.items():
        assert np.abs(gradients[key] - value).max() <= 4 * tol, key
    assert np.abs(np.stack([codec.decode(e) for e in errors]) - want_error).max() <= tol
    if pattern is None:                 # the golden model alone
        assert stage.record == []
        return
    assert [f["layer"] for f in stage.record] == [3, 5]
    assert all(f["bit_exact"] for f in stage.record)
    if pattern == "none":
        assert [f["cycles"] for f in stage.record] == [f["model_cycles"]
                                                       for f in stage.record]
        assert stage.record[0]["model_cycles"] == fc_cycles(stage.configs[0])


def test_fc_stage_golden_ignores_the_rate():
    """Without the RTL the engine's SGD step is not used: a rate of 0 gives the same
    gradients and errors as any other (the trainer passes 0, so a --lr the rate register
    cannot hold still trains on the golden backend)."""
    rng = np.random.default_rng(5)
    network = Network(layers=[conv(), ReLU(), Flatten(), linear(rng, 3, 4)])
    codec = Codec("fixed16", 13)
    outs = [codec.encode(rng.uniform(0, 1, (1, 2, 2)))]
    found = []
    for lr in (0, 30000):
        stage = FcStage(fc_tail(network, 2), (1, 2, 2), codec, lr)
        stage.forward(network, outs)
        found.append(stage.backward(np.full((1, 3), 0.25)))
    assert all(np.array_equal(found[0][0][k], found[1][0][k]) for k in found[0][0])
    assert np.array_equal(found[0][1][0], found[1][1][0])

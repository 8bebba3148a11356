"""The layers and the Network: shape checks, parameters by name, the reference forward
with initial states against PyTorch, and the shared quantizer on a GRU."""

import numpy as np
import pytest
import torch

from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import (GRU, LSTM, Conv2d, Linear, MaxPool2d, Network, ReLU,
                              from_torch, save_network, to_torch)
from nnrtl.gen.models.quantize import quantize

INPUTS, HIDDEN, STEPS, BATCH = 4, 6, 5, 3


def layers_of(module, kind, count, **fields):
    state = {k: v.detach().double().numpy() for k, v in module.state_dict().items()}
    return [kind(**fields, **{f + s: state.get(f"{f}_l{k}{s}") for f in kind.FIELDS
                              for s in ("", "_reverse")}) for k in range(count)]


def test_layer_checks():
    with pytest.raises(ValueError, match=r"^GRU\.weight_ih and weight_hh must be 2-D with 3 \* "
                                         r"hidden_size rows, not \(9, 4\) and \(8, 3\)$"):
        GRU(np.zeros((9, 4)), np.zeros((8, 3)))
    with pytest.raises(ValueError, match=r"^LSTM\.bias_ih and bias_hh must both be given or "
                                         r"both be None$"):
        LSTM(np.zeros((8, 3)), np.zeros((8, 2)), bias_ih=np.zeros(8))
    with pytest.raises(ValueError, match=r"^LSTM\.direction must be one of forward, reverse, "
                                         r"bidirectional, not 'up'$"):
        LSTM(np.zeros((8, 3)), np.zeros((8, 2)), direction="up")
    with pytest.raises(ValueError, match=r"^LSTM\.weight_ih_reverse must be given exactly when "
                                         r"weight_ih is, for a bidirectional layer$"):
        LSTM(np.zeros((8, 3)), np.zeros((8, 2)), direction="bidirectional")
    with pytest.raises(TypeError, match=r"^Conv2d\.stride must be an integer or a pair of "
                                        r"integers of at least 1, not 0$"):
        Conv2d(np.zeros((2, 1, 3, 3)), stride=0)
    with pytest.raises(ValueError, match=r"^MaxPool2d\.padding \(2, 2\) must be at most half "
                                         r"the kernel_size \(2, 2\)$"):
        MaxPool2d(2, padding=2)
    with pytest.raises(ValueError, match=r"^Linear\.bias must have shape \(3,\) "
                                         r"\(out_features\), not \(2,\)$"):
        Linear(np.zeros((3, 4)), np.zeros(2))


def test_network_checks():
    lstm = LSTM(np.zeros((8, 3)), np.zeros((8, 2)))
    with pytest.raises(ValueError, match=r"^a Network is either a stack of LSTM/GRU layers or "
                                         r"a CNN, not a mix$"):
        Network((lstm, ReLU()))
    with pytest.raises(ValueError, match=r"^layers\[1\] has input_size 3, but layers\[0\] "
                                         r"outputs 2 features$"):
        Network((lstm, lstm))
    network = Network((lstm,))
    assert set(network.parameters()) == {"weight_ih_l0", "weight_hh_l0"}
    with pytest.raises(UsageError, match=r"^network: no parameter 'bias'; the parameters are "
                                         r"weight_ih_l0, weight_hh_l0$"):
        network.with_parameters({"bias": np.zeros(8)})
    with pytest.raises(UsageError, match=r"^the network was not read from a file; save_network "
                                         r"writes the format of the file a network was read "
                                         r"from$"):
        save_network(network, "never-written.pt")


@pytest.mark.parametrize("kind, kwargs", [
    (torch.nn.LSTM, {"proj_size": 2}), (torch.nn.LSTM, {"bidirectional": True}),
    (torch.nn.GRU, {"bidirectional": True}), (torch.nn.GRU, {"bias": False}),
])
def test_initial_states_match_torch(kind, kwargs):
    torch.manual_seed(5)
    module = kind(INPUTS, HIDDEN, num_layers=2, **kwargs).double()
    lstm = kind is torch.nn.LSTM
    network = Network(layers_of(module, LSTM if lstm else GRU, 2,
                                direction="bidirectional" if kwargs.get("bidirectional")
                                else "forward"))
    rng = np.random.default_rng(6)
    x = rng.normal(size=(STEPS, BATCH, INPUTS))
    directions = 2 if kwargs.get("bidirectional") else 1
    out = kwargs.get("proj_size") or HIDDEN
    h0 = rng.normal(size=(2 * directions, BATCH, out))
    c0 = rng.normal(size=(2 * directions, BATCH, HIDDEN))
    states = [((h0[d:d + directions], c0[d:d + directions]) if lstm else h0[d:d + directions])
              for d in range(0, 2 * directions, directions)]
    with torch.no_grad():
        state = (torch.from_numpy(h0), torch.from_numpy(c0)) if lstm else torch.from_numpy(h0)
        expected, final = module(torch.from_numpy(x), state)
    output, finals = network.forward(x, states)
    np.testing.assert_allclose(output, expected.numpy(), rtol=0, atol=1e-12)
    h_n = np.concatenate([s[0] if lstm else s for s in finals])
    np.testing.assert_allclose(h_n, (final[0] if lstm else final).numpy(), rtol=0, atol=1e-12)
    # One sequence without the batch axis gives the batch's first row.
    single, _ = network.forward(x[:, 0], [tuple(a[:, 0] for a in s) if lstm else s[:, 0]
                                          for s in states])
    np.testing.assert_allclose(single, output[:, 0], rtol=0, atol=1e-12)


def test_to_torch_trains_and_from_torch_reads_back():
    """One SGD step on to_torch's module, read back by from_torch: the parameters moved by
    the learning rate times PyTorch's own gradient."""
    torch.manual_seed(7)
    network = Network(layers_of(torch.nn.GRU(INPUTS, HIDDEN).double(), GRU, 1))
    module = to_torch(network)
    x = torch.from_numpy(np.random.default_rng(8).normal(size=(STEPS, BATCH, INPUTS)))
    module(x)[0].sum().backward()
    gradient = module.layers[0].weight_hh_l0.grad.numpy().copy()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter -= 0.1 * parameter.grad
    updated = from_torch(network, module).parameters()["weight_hh_l0"]
    np.testing.assert_allclose(updated, network.parameters()["weight_hh_l0"] - 0.1 * gradient,
                               rtol=0, atol=1e-15)


def test_quantize_a_gru():
    torch.manual_seed(9)
    network = Network(layers_of(torch.nn.GRU(INPUTS, HIDDEN, num_layers=2).double(), GRU, 2))
    x = np.random.default_rng(10).uniform(-1, 1, size=(STEPS, BATCH, INPUTS))
    quantized = quantize(network, x)
    layer = quantized.layers[0]
    assert set(layer.codes) == {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}
    assert layer.fracs["bias_hh"] == layer.fracs["weight_ih"] + quantized.act_frac
    assert all(np.abs(c).max() <= 32767 for f, c in layer.codes.items() if "weight" in f)
    error = np.abs(quantized.dequantized().forward(x)[0] - network.forward(x)[0]).max()
    assert error < 1e-3

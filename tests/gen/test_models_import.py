"""Reading LSTM weights (hand-written Keras JSON + HDF5 in every layout, PyTorch
state_dicts), the SBE's checks of them, and the shared quantizer."""

import json
import zipfile

import h5py
import numpy as np
import pytest
import torch
from lstm_files import (HIDDEN, INPUTS, LAYOUTS, STEPS, keras_files, keras_weights,
                        lstm_layer, torch_lstm)

from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import LSTM, ModelSpec, Network, load_keras
from nnrtl.gen.models import load_state_dict as load_torch
from nnrtl.gen.models.quantize import calibrate, fraction_bits, to_fixed
from nnrtl.gen.sbe.frommodel import load_model, quantize_model
from nnrtl.hw.sbe import SbeConfig

# -- PyTorch -----------------------------------------------------------------------------

def sequences(seed=1, batch=3):
    return np.random.default_rng(seed).normal(size=(STEPS, batch, INPUTS)) * 1.5


@pytest.mark.parametrize("kwargs", [{}, {"bias": False}, {"layers": 1}, {"layers": 3}])
def test_torch_round_trip(tmp_path, kwargs):
    lstm = torch_lstm(**kwargs)
    path = tmp_path / "lstm.pt"
    torch.save(lstm.state_dict(), path)
    model = load_torch(path)
    assert model.spec == ModelSpec(INPUTS, HIDDEN, kwargs.get("layers", 2))
    x = sequences()
    output, states = model.forward(x)
    h_n = np.concatenate([h for h, _ in states])
    c_n = np.concatenate([c for _, c in states])
    with torch.no_grad():
        expected, (th, tc) = lstm(torch.from_numpy(x))
    np.testing.assert_allclose(output, expected.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(h_n, th.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(c_n, tc.numpy(), rtol=0, atol=1e-12)
    single, _ = model.forward(x[:, 0])                 # one sequence, no batch axis
    np.testing.assert_allclose(single, expected.numpy()[:, 0], rtol=0, atol=1e-12)


def test_torch_interleaving():
    """The SBE's row 4j + g is row j of gate g (i, u, f, o) of PyTorch's i, f, g, o."""
    lstm = torch_lstm(layers=1)
    quantized = quantize_model(load_torch(lstm.state_dict()), sequences())
    matrix, bias = quantized.interleaved(0)
    frac, acc = quantized.weight_frac, quantized.weight_frac + quantized.act_frac
    w_ih = lstm.weight_ih_l0.detach().numpy()
    w_hh = lstm.weight_hh_l0.detach().numpy()
    b = (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach().numpy()
    torch_row = {"i": 0, "f": 1, "u": 2, "o": 3}       # PyTorch: i, f, g, o
    for j in range(HIDDEN):
        for g, gate in enumerate("iufo"):              # the SBE: i, u, f, o
            row = torch_row[gate] * HIDDEN + j
            np.testing.assert_array_equal(matrix[4 * j + g],
                                          to_fixed(np.r_[w_ih[row], w_hh[row]], frac, 16)[0])
            assert bias[4 * j + g] == to_fixed(b[row], acc, 32)[0]


def test_torch_submodule_prefix(tmp_path):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch_lstm(layers=1)
            self.head = torch.nn.Linear(HIDDEN, 2)
    state = Net().state_dict()
    assert load_torch(state).spec == ModelSpec(INPUTS, HIDDEN, 1)
    assert load_torch(state, prefix="rnn.").layers[0].hidden_size == HIDDEN
    with pytest.raises(UsageError, match=r"^state_dict: no key x\.weight_ih_l0$"):
        load_torch(state, prefix="x.")
    both = {**{f"a.{k}": v for k, v in state.items()}, **{f"b.{k}": v for k, v in state.items()}}
    with pytest.raises(UsageError, match=r"^state_dict: several RNNs \('a\.rnn\.', "
                                         r"'b\.rnn\.'\); choose one with --prefix \(e\.g\. "
                                         r"--prefix a\.rnn\.\)$"):
        load_torch(both)


def saved(tmp_path, obj, name="bad.pt"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


def test_sbe_rejects(tmp_path):
    """What the model layer reads but the SBE does not run."""
    bi = saved(tmp_path, torch_lstm(bidirectional=True).state_dict())
    with pytest.raises(UsageError, match=rf"^{bi}: layer 0 is bidirectional; the SBE runs "
                                         r"stacks whose layers all run forward, or all in "
                                         r"reverse$"):
        load_model(bi)
    projected = saved(tmp_path, torch_lstm(proj_size=3).state_dict())
    with pytest.raises(UsageError, match=rf"^{projected}: layer 0 has a projection "
                                         r"\(proj_size 3\); the SBE runs LSTMs without "
                                         r"projections$"):
        load_model(projected)
    gru = saved(tmp_path, torch.nn.GRU(INPUTS, HIDDEN).state_dict())
    with pytest.raises(UsageError, match=rf"^{gru}: layer 0 is a GRU; the SBE runs LSTM "
                                         r"layers only$"):
        load_model(gru)
    state = {**torch_lstm(layers=1).state_dict(),
             **{f"{k[:-1]}1": v for k, v in torch.nn.LSTM(HIDDEN, 8).state_dict().items()}}
    uneven = saved(tmp_path, state)         # layers of different hidden sizes run padded
    assert load_model(uneven).spec == ModelSpec(INPUTS, 8, 2, hidden_sizes=(HIDDEN, 8))


def test_torch_rejects(tmp_path):
    tensor = saved(tmp_path, torch.zeros(3))
    with pytest.raises(UsageError, match=rf"^{tensor}: holds a Tensor, not a state_dict$"):
        load_torch(tensor)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(UsageError, match=rf"^{garbage}: not a PyTorch state_dict file \("):
        load_torch(garbage)
    linear = saved(tmp_path, torch.nn.Linear(3, 4).state_dict())
    with pytest.raises(UsageError, match=rf"^{linear}: no key ends in weight_ih_l0: not the "
                                         r"state_dict of an nn\.LSTM or nn\.GRU$"):
        load_torch(linear)
    state = torch_lstm().state_dict()
    state["weight_ih_l1"] = torch.zeros(28, 8, dtype=torch.float64)
    with pytest.raises(UsageError, match=r"^state_dict: layers\[1\] has input_size 8, but "
                                         r"layers\[0\] outputs 7 features$"):
        load_torch(state)
    state = torch_lstm().state_dict()
    del state["bias_hh_l1"]
    with pytest.raises(UsageError, match=r"^state_dict: bias_hh_l1 is missing: every layer "
                                         r"and direction has the same tensors as layer 0$"):
        load_torch(state)


# -- Keras -------------------------------------------------------------------------------

def keras_reference(weights, x):
    """The Keras LSTM equations, gate order i, f, c, o, written out."""
    def sigmoid(z):
        return 1 / (1 + np.exp(-z))
    for kernel, recurrent, bias in weights:
        units = recurrent.shape[0]
        h, c, outputs = np.zeros(units), np.zeros(units), []
        for x_t in x:
            z = x_t @ kernel + h @ recurrent + bias
            i, f = sigmoid(z[:units]), sigmoid(z[units:2 * units])
            candidate, o = np.tanh(z[2 * units:3 * units]), sigmoid(z[3 * units:])
            c = f * c + i * candidate
            h = o * np.tanh(c)
            outputs.append(h)
        x = np.array(outputs)
    return x


@pytest.mark.parametrize("layout", [*LAYOUTS, "keras3-native"])
def test_keras_layouts(tmp_path, layout):
    weights = keras_weights()
    json_path, weights_path = keras_files(tmp_path, layout, weights)
    model = load_keras(json_path, weights_path)
    assert model.spec == ModelSpec(INPUTS, HIDDEN, 2)
    assert model.return_sequences is False
    x = sequences()[:, 0]
    stored = [tuple(a.astype(np.float32).astype(np.float64) for a in w) for w in weights]
    np.testing.assert_allclose(model.forward(x)[0], keras_reference(stored, x),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", ["keras2.2-model", "keras3-legacy-h5"])
def test_keras_whole_model_h5_alone(tmp_path, layout):
    """``model.save("m.h5")``: the JSON is the file's model_config attribute."""
    weights = keras_weights()
    json_path, weights_path = keras_files(tmp_path, layout, weights)
    alone = load_model(weights_path)
    assert alone.spec == ModelSpec(INPUTS, HIDDEN, 2)
    x = sequences()[:, 0]
    np.testing.assert_array_equal(alone.forward(x)[0],
                                  load_keras(json_path, weights_path).forward(x)[0])


def test_keras3_archive_and_trailing_layers(tmp_path):
    weights = keras_weights(layers=1)
    json_path, weights_path = keras_files(tmp_path, "keras3-native", weights,
                                          trailing_dense=True)
    with pytest.raises(UsageError, match=r"config\.layers\[2\] is a Dense; nnrtl reads only "
                                         r"LSTM and GRU layers of Keras models \(and "
                                         r"InputLayer, Dropout, Bidirectional\); pass "
                                         r"ignore_trailing to skip layers after the last "
                                         r"LSTM or GRU$"):
        load_keras(json_path, weights_path)
    archive = tmp_path / "model.keras"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("config.json", json_path.read_text())
        z.writestr("metadata.json", "{}")
        z.write(weights_path, "model.weights.h5")
    model = load_keras(archive, ignore_trailing=True)
    assert model.spec == ModelSpec(INPUTS, HIDDEN, 1)
    x = sequences()[:, 1]
    stored = [tuple(a.astype(np.float32).astype(np.float64) for a in w) for w in weights]
    np.testing.assert_allclose(model.forward(x)[0], keras_reference(stored, x),
                               rtol=0, atol=1e-12)


def test_keras_without_bias(tmp_path):
    weights = keras_weights(layers=1)
    layers = [lstm_layer("lstm", True, first=True, last=True, use_bias=False)]
    json_path, weights_path = keras_files(tmp_path, "keras3-native", [w[:2] for w in weights],
                                          json_layers=layers)
    model = load_keras(json_path, weights_path)
    assert model.layers[0].bias_ih is None and model.layers[0].bias_hh is None
    assert set(model.parameters()) == {"layers/lstm/cell/vars/0", "layers/lstm/cell/vars/1"}


def rejects(tmp_path, message, *, layout="keras2.2-model", weights=None, json_layers=None,
            edit=None, **kwargs):
    json_path, weights_path = keras_files(tmp_path, layout, weights or keras_weights(),
                                          json_layers=json_layers)
    if edit:
        edit(json_path, weights_path)
    with pytest.raises(UsageError, match=message.format(json=json_path, h5=weights_path)):
        load_keras(json_path, weights_path, **kwargs)


def test_keras_rejects_models(tmp_path):
    def layers(**overrides):
        return [lstm_layer("lstm_1", False, first=True, **overrides),
                lstm_layer("lstm_2", False, last=True)]
    rejects(tmp_path, r"^{json}: config\.layers\[0\]\.config\.activation is 'relu'; an LSTM "
                      r"computes tanh$", json_layers=layers(activation="relu"))
    rejects(tmp_path, r"^{json}: config\.layers\[0\]\.config\.recurrent_activation is "
                      r"'hard_sigmoid'; an LSTM computes sigmoid$",
            json_layers=layers(recurrent_activation="hard_sigmoid"))
    rejects(tmp_path, r"^{json}: config\.layers\[0\]\.config\.go_backwards is true; nnrtl "
                      r"reads RNNs running forward in time over time-second inputs \(and a "
                      r"Bidirectional's backward layer\)$",
            json_layers=layers(go_backwards=True))
    rejects(tmp_path, r"^{json}: config\.layers\[0\]\.config\.return_sequences must be true: "
                      r"a later layer reads every step$",
            json_layers=layers(return_sequences=False))
    rejects(tmp_path, r"^{json}: config\.layers\[0\] is a Bidirectional None; nnrtl reads "
                      r"Bidirectional LSTM and GRU layers$",
            json_layers=[{"class_name": "Bidirectional", "config": {}}, *layers()])
    rejects(tmp_path, r"^{json}: config\.layers\[1\] is a SimpleRNN; nnrtl reads only LSTM "
                      r"and GRU layers of Keras models$",
            json_layers=[layers()[0], {"class_name": "SimpleRNN", "config": {}}, layers()[1]])
    rejects(tmp_path, r"^{json}: config\.layers\[1\] is a Dense; nnrtl reads only LSTM "
                      r"and GRU layers of Keras models \(and InputLayer, Dropout, "
                      r"Bidirectional\)$", ignore_trailing=True,
            json_layers=[layers()[0], {"class_name": "Dense", "config": {}}, layers()[1]])
    rejects(tmp_path, r"^{json}: config\.layers has no LSTM or GRU layer$",
            json_layers=[{"class_name": "Dense", "config": {}}])


def test_keras_rejects_files(tmp_path):
    def write(text):
        return lambda json_path, _: json_path.write_text(text)
    rejects(tmp_path, r"^{json}: not valid JSON: ", edit=write("{"))
    rejects(tmp_path, r"^{json}: class_name is 'MyModel'; only Sequential models and "
                      r"functional chains are supported$",
            edit=write(json.dumps({"class_name": "MyModel", "config": {"layers": []}})))
    rejects(tmp_path, r"^{json}: the model has 0 inputs and 0 outputs; nnrtl reads "
                      r"functional models with one of each$",
            edit=write(json.dumps({"class_name": "Functional", "config": {"layers": []}})))
    rejects(tmp_path, r"^{json}: not a Keras model JSON \(no top-level 'class_name'\)$",
            edit=write("[1, 2]"))
    rejects(tmp_path, r"^{h5}: not an HDF5 file \(",
            edit=lambda _, h5: h5.write_bytes(b"nothing"))

    def drop(key):
        def edit(_, h5):
            with h5py.File(h5, "a") as f:
                del f[key]
        return edit
    rejects(tmp_path, r"^{h5}: no group model_weights/lstm_2 for layer 'lstm_2'$",
            edit=drop("model_weights/lstm_2"))
    rejects(tmp_path, r"^{h5}: model_weights/lstm_1 lists weight 'lstm_1/bias:0' but has no "
                      r"such dataset$", edit=drop("model_weights/lstm_1/lstm_1/bias:0"))
    rejects(tmp_path, r"^{h5}: no group layers/lstm_1/cell/vars for the LSTM layer number 1$",
            layout="keras3-native", edit=drop("layers/lstm_1"))
    rejects(tmp_path, r"^{h5}: no recurrent_kernel for LSTM layer 'lstm'$",
            layout="keras3-native", edit=drop("layers/lstm/cell/vars/1"))
    bad = keras_weights()
    bad[0] = (bad[0][0][:4], *bad[0][1:])
    rejects(tmp_path, r"^{h5}: model_weights/lstm_1/lstm_1/kernel:0 has shape \(4, 28\), "
                      r"expected \(5, 28\): kernel must be \(input size, 4 \* units\)$",
            weights=bad)
    json_path = keras_files(tmp_path, "keras2.2-model", keras_weights())[0]
    with pytest.raises(UsageError, match=rf"^{json_path}: give the HDF5 weights file too, "
                                         r"or a \.keras archive$"):
        load_keras(json_path)


# -- The float model and quantization ----------------------------------------------------

def test_layer_checks_its_shapes():
    with pytest.raises(ValueError, match=r"^LSTM\.weight_hh must have shape \(8, 1\) \(gates \* "
                                         r"hidden_size, proj_size or hidden_size\), not "
                                         r"\(8, 3\)$"):
        LSTM(np.zeros((8, 3)), np.zeros((8, 3)), weight_hr=np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"^LSTM\.bias_ih must have shape \(8,\) \(gates \* "
                                         r"hidden_size\), not \(7,\)$"):
        LSTM(np.zeros((8, 3)), np.zeros((8, 2)), np.zeros(7), np.zeros(8))


def test_fraction_bits_and_rounding():
    assert fraction_bits(1.0, 16) == 14            # 2**15 would not fit 32767
    assert fraction_bits(0.999, 16) == 15
    assert fraction_bits(3.9, 16) == 13
    assert fraction_bits(0.0, 16) == 15
    assert fraction_bits(40000.0, 16) == 0         # saturates
    codes, saturated = to_fixed([0.5, 1.5, 2.5, -0.5, -1.5, 70000], 0, 16)
    assert codes.tolist() == [0, 2, 2, 0, -2, 32767] and saturated == 1
    codes, _ = to_fixed([0.5, 1.5, 2.5, -0.5, -1.5], 0, 16, rounding="half_away")
    assert codes.tolist() == [1, 2, 3, -1, -2]
    assert to_fixed([0.25, -1.0], 2, 4)[0].tolist() == [1, -4]
    with pytest.raises(ValueError, match=r"^rounding must be one of half_even, half_away, "
                                         r"not 'up'$"):
        to_fixed([1.0], 0, 8, rounding="up")


def test_quantize_model_for_the_sbe():
    model = load_torch(torch_lstm().state_dict())
    x = sequences(batch=4)
    quantized = quantize_model(model, x)
    ranges = calibrate(model, x)
    assert quantized.ranges["x"] == ranges["x"] == np.abs(x).max()
    peak = max(np.abs(a).max() for layer in model.layers
               for a in (layer.weight_ih, layer.weight_hh))
    assert quantized.weight_frac == fraction_bits(peak, 16)
    assert quantized.act_frac == fraction_bits(max(ranges["x"], ranges["h"]), 16)
    assert quantized.saturated == 0
    for layer in quantized.layers:
        assert np.abs(layer.w_x).max() <= 32767 and layer.w_x.dtype == np.int64
    config = quantized.apply(SbeConfig(input_size=INPUTS + 3, hidden_size=HIDDEN, layers=1,
                                       pes=28, bus_weights=4, blocks=1, post_units=1))
    assert (config.weight_frac, config.act_frac) == (quantized.weight_frac, quantized.act_frac)
    matrix, bias = quantized.interleaved(0)
    assert matrix.shape == (4 * HIDDEN, INPUTS + HIDDEN) and bias.shape == (4 * HIDDEN,)
    # The dequantized model stays close to the float one.
    error = np.abs(quantized.dequantized().forward(x)[0] - model.forward(x)[0]).max()
    assert error < 1e-3


def test_quantize_granularity_and_headroom():
    model = load_torch(torch_lstm().state_dict())
    second = model.layers[1]
    scaled = Network((model.layers[0], LSTM(second.weight_ih * 8, second.weight_hh * 8,
                                            second.bias_ih, second.bias_hh)))
    per_layer = quantize_model(scaled, sequences(), granularity="layer")
    assert per_layer.layers[0].w_x_frac == per_layer.layers[1].w_x_frac + 3
    with pytest.raises(ValueError, match=r"^the weights have several formats"):
        per_layer.weight_frac
    first = model.layers[0]
    uneven = Network((LSTM(first.weight_ih, first.weight_hh * 4, first.bias_ih, first.bias_hh),
                      model.layers[1]))
    per_tensor = quantize_model(uneven, sequences(), granularity="tensor", margin_bits=1)
    fracs = (per_tensor.layers[0].w_x_frac, per_tensor.layers[0].w_h_frac)
    assert fracs[0] >= fracs[1] + 1
    assert fracs[0] == fraction_bits(np.abs(first.weight_ih).max(), 16) - 1  # the margin
    with pytest.raises(ValueError, match=r"^layer 0: w_x and w_h have different formats "
                                         rf"\({fracs[0]} and {fracs[1]} fraction bits\)$"):
        per_tensor.interleaved(0)
    # Pre-activations that would overflow the accumulator lower the larger format first:
    # z = 5 * 0.9 * 0.9 = 4.05 needs 3 integer bits of a 16-bit accumulator, so
    # weight_frac + act_frac <= 12, from 7 + 7.
    hidden = 2
    saturating = Network((LSTM(np.full((4 * hidden, 5), 0.9), np.zeros((4 * hidden, hidden)),
                               np.zeros(4 * hidden), np.zeros(4 * hidden)),))
    narrow = quantize_model(saturating, np.full((3, 5), 0.9), width=8, acc_width=16)
    assert narrow.ranges["z"] == pytest.approx(4.05)
    assert (narrow.weight_frac, narrow.act_frac) == (6, 6)


def test_forward_trace():
    model = load_torch(torch_lstm().state_dict())
    trace = {}
    output, _ = model.forward(sequences(), trace=trace)
    assert [a.shape for a in trace["z"]] == [(STEPS, 3, 4 * HIDDEN)] * 2
    np.testing.assert_array_equal(trace["h"][-1], output)
    np.testing.assert_array_equal(trace["x"][1], trace["h"][0])

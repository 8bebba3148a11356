"""Keras 3 files of an LSTM, GRU, LSTM stack written by Keras itself (torch backend): ``model.save("m.keras")``,
``model.save("m.h5")``, ``to_json`` + ``save_weights``; the import's forward against
``predict`` and the write-back read by Keras."""

import dataclasses
import os
import re
import warnings

os.environ["KERAS_BACKEND"] = "torch"      # before keras is imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nnrtl.gen.models import GRU, LSTM, load_network, save_network  # noqa: E402

STEPS, INPUTS, UNITS = 6, 5, 7
# Keras' predict computes in float32: the float64 reference agrees to float32 rounding.
BOUND = 1e-6


@pytest.fixture(scope="module")
def keras_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("keras")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((STEPS, INPUTS)),
                              keras.layers.LSTM(UNITS, return_sequences=True),
                              keras.layers.GRU(UNITS - 2, return_sequences=True),
                              keras.layers.LSTM(UNITS, return_sequences=True)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save(directory / "m.keras")
        model.save(directory / "m.h5")
        model.save_weights(directory / "m.weights.h5")
    (directory / "m.json").write_text(model.to_json())
    x = np.random.default_rng(0).normal(size=(3, STEPS, INPUTS)).astype(np.float32)
    return model, x, directory


SOURCES = {"keras": ("m.keras",), "h5": ("m.h5",), "json": ("m.json", "m.weights.h5")}


def predict(model, x):
    """``model.predict``; Keras' own NumPy deprecation warning on the torch backend is
    Keras'."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return model.predict(x, verbose=0)


def ours(network, x):
    """Our forward on Keras' batch-first input, batch-first output."""
    return network.forward(x.transpose(1, 0, 2).astype(np.float64))[0].transpose(1, 0, 2)


@pytest.mark.parametrize("source", SOURCES)
def test_keras_files_match_predict(keras_files, source):
    model, x, directory = keras_files
    network = load_network(*(directory / name for name in SOURCES[source]))
    assert [type(layer) for layer in network.layers] == [LSTM, GRU, LSTM]
    assert network.format == "keras"
    np.testing.assert_allclose(ours(network, x), predict(model, x), rtol=0,
                               atol=BOUND)


@pytest.mark.parametrize("source", SOURCES)
def test_keras_round_trip(keras_files, tmp_path, source):
    _, _, directory = keras_files
    paths = [directory / name for name in SOURCES[source]]
    network = load_network(*paths)
    target = tmp_path / SOURCES[source][-1]
    save_network(network, target)
    again = load_network(*paths[:-1], target) if source == "json" else load_network(target)
    for key, value in network.parameters().items():
        np.testing.assert_array_equal(again.parameters()[key], value)
    halved = network.with_parameters({k: v / 2 for k, v in network.parameters().items()})
    save_network(halved, target)
    again = load_network(*paths[:-1], target) if source == "json" else load_network(target)
    for key, value in again.parameters().items():
        np.testing.assert_array_equal(value, network.parameters()[key] / 2)


def test_keras_reads_the_written_archive(keras_files, tmp_path):
    _, x, directory = keras_files
    network = load_network(directory / "m.keras")
    halved = network.with_parameters({k: v / 2 for k, v in network.parameters().items()})
    save_network(halved, tmp_path / "halved.keras")
    reloaded = keras.saving.load_model(tmp_path / "halved.keras")
    np.testing.assert_allclose(ours(halved, x), predict(reloaded, x), rtol=0,
                               atol=BOUND)


def weights(layer):
    """``layer.get_weights()``; Keras' own NumPy deprecation warning on the torch backend
    is Keras'."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return layer.get_weights()


def _head_model(*after, return_sequences=True):
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((STEPS, INPUTS)),
                             keras.layers.GRU(UNITS, return_sequences=return_sequences),
                             *after])


@pytest.mark.parametrize("suffix", ["keras", "h5"])
def test_keras_dense_head_for_training(tmp_path, suffix):
    """A Dense after the GRU is the head nnrtl train trains on the host: the GRU and the
    head together compute Keras' predict; the head written back is what Keras reads."""
    from nnrtl.gen.models import Linear
    from nnrtl.gen.models.train_model import load_train_model, save_train_model

    model = _head_model(keras.layers.Dense(3))
    path = tmp_path / f"m.{suffix}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save(path)
    trained = load_train_model(path)
    assert isinstance(trained.head.layers[0], Linear)
    assert trained.head.layers[0].weight.shape == (3, UNITS)
    x = np.random.default_rng(1).normal(size=(2, STEPS, INPUTS)).astype(np.float32)
    linear = trained.head.layers[0]
    ours_out = ours(trained.network, x) @ linear.weight.T + linear.bias
    np.testing.assert_allclose(ours_out, predict(model, x), rtol=0, atol=BOUND)
    head = trained.head.with_parameters({k: v / 2 for k, v in
                                         trained.head.parameters().items()})
    save_train_model(dataclasses.replace(trained, head=head), tmp_path / f"o.{suffix}")
    reloaded = keras.saving.load_model(tmp_path / f"o.{suffix}")
    dense, gru = reloaded.layers[-1], reloaded.layers[0]
    for mine, theirs in zip(weights(dense), weights(model.layers[-1]), strict=True):
        np.testing.assert_array_equal(mine, theirs / 2)
    for mine, theirs in zip(weights(gru), weights(model.layers[0]), strict=True):
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("after, sequences, message", [
    (lambda: (keras.layers.Dense(3, activation="elu"),), True,
     r"config\.layers\[\d\]\.config\.activation is 'elu'; nnrtl runs a Dense head's "
     r"linear, relu, tanh, sigmoid and softmax"),
    (lambda: (keras.layers.Dense(4), keras.layers.Dropout(0.5), keras.layers.Dense(2)), True,
     r"config\.layers\[\d\] \(Dropout\) after the last LSTM or GRU: nnrtl train trains "
     r"Dense layers there, and would leave it untrained"),
    (lambda: (keras.layers.Dense(3),), False,
     r"config\.layers\[\d\]\.config\.return_sequences is false: the Dense reads the last "
     r"step only, and nnrtl train takes the loss at the head's outputs of every step"),
])
def test_keras_heads_nnrtl_train_refuses(tmp_path, after, sequences, message):
    from nnrtl.gen.errors import UsageError
    from nnrtl.gen.models.train_model import load_train_model

    path = tmp_path / "m.keras"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _head_model(*after(), return_sequences=sequences).save(path)
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: {message}$"):
        load_train_model(path)


def test_keras_head_with_activations(tmp_path):
    """GRU -> Dense(relu) -> Dense(softmax): the head is Linear, ReLU, Linear, Softmax and
    the whole model computes Keras' predict."""
    from nnrtl.gen.models import Linear, ReLU, Softmax
    from nnrtl.gen.models.reference import layer_forward
    from nnrtl.gen.models.train_model import load_train_model

    model = _head_model(keras.layers.Dense(4, activation="relu"),
                        keras.layers.Dense(3, activation="softmax"))
    path = tmp_path / "m.keras"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save(path)
    trained = load_train_model(path)
    assert [type(layer) for layer in trained.head.layers] == [Linear, ReLU, Linear, Softmax]
    x = np.random.default_rng(3).normal(size=(2, STEPS, INPUTS)).astype(np.float32)
    out = ours(trained.network, x)
    for layer in trained.head.layers:
        out = layer_forward(layer, out)
    np.testing.assert_allclose(out, predict(model, x), rtol=0, atol=BOUND)

"""Keras 3 functional models and ``Bidirectional`` layers written by Keras itself (torch
backend): the import's forward against ``predict``, the write-back read by Keras, the
refusals, and ``nnrtl train farnn`` on a bidirectional model whose trained file Keras
reads."""

import dataclasses
import json
import os
import re
import subprocess
import sys
import warnings

os.environ["KERAS_BACKEND"] = "torch"      # before keras is imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nnrtl.gen.errors import UsageError  # noqa: E402
from nnrtl.gen.models import GRU, LSTM  # noqa: E402
from nnrtl.gen.models.train_model import load_train_model, save_train_model  # noqa: E402

STEPS, INPUTS = 5, 3
# Keras' predict computes in float32: the float64 reference agrees to float32 rounding.
BOUND = 1e-6


def save(model, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save(path)
    return path


def predict(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return model.predict(x, verbose=0)


def functional():
    """Input -> Bidirectional(LSTM) -> GRU -> Bidirectional(GRU) -> Dense, functional."""
    keras.utils.set_random_seed(2)
    inputs = keras.Input((STEPS, INPUTS))
    x = keras.layers.Bidirectional(keras.layers.LSTM(4, return_sequences=True))(inputs)
    x = keras.layers.GRU(6, return_sequences=True)(x)
    x = keras.layers.Bidirectional(keras.layers.GRU(2, return_sequences=True))(x)
    return keras.Model(inputs, keras.layers.Dense(3)(x))


def outputs(trained, x):
    """The trained model's forward on Keras' batch-first input: the stack, then the head."""
    h = trained.network.forward(x.transpose(1, 0, 2).astype(np.float64))[0]
    linear = trained.head.layers[0]
    return (h @ linear.weight.T + linear.bias).transpose(1, 0, 2)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("functional")
    model = functional()
    paths = {suffix: save(model, directory / f"m.{suffix}") for suffix in ("keras", "h5")}
    x = np.random.default_rng(0).normal(size=(2, STEPS, INPUTS)).astype(np.float32)
    return model, x, paths


@pytest.mark.parametrize("suffix", ["keras", "h5"])
def test_functional_bidirectional_matches_predict(model_files, suffix):
    model, x, paths = model_files
    trained = load_train_model(paths[suffix])
    layers = trained.network.layers
    assert [(type(layer), layer.direction) for layer in layers] == [
        (LSTM, "bidirectional"), (GRU, "forward"), (GRU, "bidirectional")]
    assert [layer.input_size for layer in layers] == [INPUTS, 8, 6]
    np.testing.assert_allclose(outputs(trained, x), predict(model, x), rtol=0, atol=BOUND)


@pytest.mark.parametrize("suffix", ["keras", "h5"])
def test_functional_bidirectional_written_back(model_files, tmp_path, suffix):
    """Every tensor halved, written back, and read by Keras: its predict is ours."""
    _, x, paths = model_files
    trained = load_train_model(paths[suffix])
    network = trained.network.with_parameters(
        {k: v / 2 for k, v in trained.network.parameters().items()})
    halved = dataclasses.replace(trained, network=network)
    target = tmp_path / f"o.{suffix}"
    save_train_model(halved, target)
    reloaded = keras.saving.load_model(target)
    np.testing.assert_allclose(outputs(halved, x), predict(reloaded, x), rtol=0, atol=BOUND)
    assert not np.allclose(outputs(halved, x), outputs(trained, x), atol=1e-3)


def _branching():
    inputs = keras.Input((STEPS, INPUTS))
    a = keras.layers.LSTM(4, return_sequences=True)(inputs)
    b = keras.layers.LSTM(4, return_sequences=True)(inputs)
    return keras.Model(inputs, keras.layers.Concatenate()([a, b]))


def _merge_sum():
    return keras.Sequential([keras.Input((STEPS, INPUTS)), keras.layers.Bidirectional(
        keras.layers.LSTM(4, return_sequences=True), merge_mode="sum")])


def _last_step():
    return keras.Sequential([keras.Input((STEPS, INPUTS)), keras.layers.Bidirectional(
        keras.layers.GRU(4))])


@pytest.mark.parametrize("build, message", [
    (_branching, r"config\.layers\[\d\] \(concatenate\w*\) reads 2 tensors \(lstm\w*, "
                 r"lstm\w*\); nnrtl reads functional models that are a chain of one-input "
                 r"layers"),
    (_merge_sum, r"config\.layers\[\d\]\.config\.merge_mode is 'sum'; nnrtl reads "
                 r"Bidirectional layers that concatenate the two directions"),
    (_last_step, r"config\.layers\[\d\]: a Bidirectional with return_sequences false outputs "
                 r"the forward layer's last step beside the backward layer's first"),
])
def test_keras_functional_refusals(tmp_path, build, message):
    path = save(build(), tmp_path / "m.keras")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: {message}"):
        load_train_model(path)


def test_train_farnn_on_a_keras_bidirectional_model(tmp_path):
    """``nnrtl train farnn`` trains a functional Bidirectional GRU stack with a Dense head
    and writes a ``.keras`` file Keras reads: its predict is the trained model's forward,
    and the update is within the reference's bound."""
    keras.utils.set_random_seed(3)
    inputs = keras.Input((STEPS, INPUTS))
    x = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True))(inputs)
    x = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True))(x)
    path = save(keras.Model(inputs, keras.layers.Dense(2)(x)), tmp_path / "bi.keras")
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.normal(size=(STEPS, 2, INPUTS)))
    np.save(tmp_path / "y.npy", rng.normal(size=(STEPS, 2, 2)))
    run = subprocess.run(
        [sys.executable, "-m", "nnrtl.gen.cli", "train", "farnn", "--board", "vu9p", "--model",
         str(path), "--inputs", str(tmp_path / "x.npy"), "--targets",
         str(tmp_path / "y.npy"), "--lr", "0.5", "--steps", "1", "-o", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1])["within_bound"] is True
    trained = load_train_model(tmp_path / "out" / "model.keras")
    before = load_train_model(path)
    assert not np.allclose(trained.network.layers[1].weight_hh_reverse,
                           before.network.layers[1].weight_hh_reverse)
    reloaded = keras.saving.load_model(tmp_path / "out" / "model.keras")
    probe = rng.normal(size=(2, STEPS, INPUTS)).astype(np.float32)
    np.testing.assert_allclose(outputs(trained, probe), predict(reloaded, probe), rtol=0,
                               atol=BOUND)

"""Small LSTM model files for the tests: PyTorch modules and Keras JSON + HDF5 files in
the layouts of Keras 2, tf.keras and Keras 3 (written with h5py, no TensorFlow needed)."""

import json

import h5py
import numpy as np
import torch

INPUTS, HIDDEN, STEPS = 5, 7, 9


def torch_lstm(layers=2, seed=0, **kwargs):
    torch.manual_seed(seed)
    lstm = torch.nn.LSTM(INPUTS, HIDDEN, num_layers=layers, **kwargs).double()
    with torch.no_grad():
        for parameter in lstm.parameters():
            parameter.copy_(torch.randn_like(parameter) * 0.6)
    return lstm


def keras_weights(layers=2, units=HIDDEN, seed=3):
    rng = np.random.default_rng(seed)
    weights, inputs = [], INPUTS
    for _ in range(layers):
        weights.append((rng.normal(size=(inputs, 4 * units)) * 0.5,
                        rng.normal(size=(units, 4 * units)) * 0.5,
                        rng.normal(size=4 * units) * 0.5))
        inputs = units
    return weights


def lstm_layer(name, keras3, *, first=False, last=False, **overrides):
    config = {"name": name, "trainable": True, "return_sequences": not last,
              "return_state": False, "go_backwards": False, "stateful": False,
              "unroll": False, "units": HIDDEN, "activation": "tanh",
              "recurrent_activation": "sigmoid", "use_bias": True, "dropout": 0.0,
              "recurrent_dropout": 0.0, **overrides}
    layer = {"class_name": "LSTM", "config": config}
    if keras3:
        layer.update(module="keras.layers", registered_name=None,
                     build_config={"input_shape": [None, STEPS, INPUTS if first else HIDDEN]})
    elif first:
        config["batch_input_shape"] = [None, STEPS, INPUTS]
    return layer


def model_json(layers, keras3):
    if keras3:
        input_layer = {"module": "keras.layers", "class_name": "InputLayer",
                       "config": {"batch_shape": [None, STEPS, INPUTS], "dtype": "float32",
                                  "sparse": False, "name": "input_layer"},
                       "registered_name": None}
        return {"module": "keras", "class_name": "Sequential", "registered_name": None,
                "config": {"name": "sequential", "trainable": True,
                           "layers": [input_layer, *layers]}}
    return {"class_name": "Sequential", "config": {"name": "sequential_1", "layers": layers},
            "keras_version": "2.2.4", "backend": "tensorflow"}


LAYOUTS = {
    # layout: (layer names, weight name format, whole-model file)
    "keras2.2-model": (["lstm_1", "lstm_2"], "{0}/{1}:0", True),
    "tf.keras-weights": (["lstm", "lstm_1"], "{0}/lstm_cell/{1}:0", False),
    "keras3-legacy-h5": (["lstm", "lstm_1"], "{0}/lstm_cell/{1}", True),
}


def write_legacy(path, weights, layout, trailing_dense=False):
    names, pattern, whole = LAYOUTS[layout]
    with h5py.File(path, "w") as f:
        group = f.create_group("model_weights") if whole else f
        group.attrs["layer_names"] = [n.encode() for n in names] + \
            ([b"dense_1"] if trailing_dense else [])
        group.attrs["keras_version"] = b"2.2.4"
        for name, arrays in zip(names, weights):
            layer = group.create_group(name)
            weight_names = [pattern.format(name, w) for w in
                            ("kernel", "recurrent_kernel", "bias")]
            layer.attrs["weight_names"] = [n.encode() for n in weight_names]
            for weight_name, array in zip(weight_names, arrays):
                layer.create_dataset(weight_name, data=array.astype(np.float32))
        if trailing_dense:
            dense = group.create_group("dense_1")
            dense.attrs["weight_names"] = [b"dense_1/kernel:0", b"dense_1/bias:0"]
            dense.create_dataset("dense_1/kernel:0", data=np.zeros((HIDDEN, 3), np.float32))
            dense.create_dataset("dense_1/bias:0", data=np.zeros(3, np.float32))


def write_native(target, weights, trailing_dense=False):
    with h5py.File(target, "w") as f:
        f.create_group("vars")
        for number, arrays in enumerate(weights):
            name = "lstm" if number == 0 else f"lstm_{number}"
            f.create_group(f"layers/{name}/vars").attrs["name"] = name
            cell = f.create_group(f"layers/{name}/cell/vars")
            cell.attrs["name"] = "lstm_cell"
            for index, array in enumerate(arrays):
                cell.create_dataset(str(index), data=array.astype(np.float32))
        if trailing_dense:
            f.create_dataset("layers/dense/vars/0", data=np.zeros((HIDDEN, 3), np.float32))


def keras_files(tmp_path, layout, weights, *, trailing_dense=False, json_layers=None):
    keras3 = layout.startswith("keras3")
    names = LAYOUTS[layout][0] if layout in LAYOUTS else ["lstm", "lstm_1"]
    layers = json_layers or [lstm_layer(name, keras3, first=n == 0, last=n == len(weights) - 1)
                             for n, name in enumerate(names[:len(weights)])]
    if trailing_dense:
        layers = layers + [{"class_name": "Dense", "config": {"name": "dense_1", "units": 3}}]
    json_path = tmp_path / "model.json"
    json_path.write_text(json.dumps(model_json(layers, keras3)))
    weights_path = tmp_path / "weights.h5"
    if layout == "keras3-native":
        write_native(weights_path, weights, trailing_dense)
    else:
        write_legacy(weights_path, weights, layout, trailing_dense)
        if LAYOUTS[layout][2]:                 # model.save also stores the model's JSON
            with h5py.File(weights_path, "a") as f:
                f.attrs["model_config"] = json_path.read_text()
    return json_path, weights_path

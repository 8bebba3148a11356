"""Keras LSTM and GRU models: the model JSON of ``model.to_json()`` (a ``Sequential``, or a
functional chain: :mod:`.keras_config`) with the
weights of ``model.save_weights`` / ``model.save`` in HDF5, a whole-model ``.h5`` of
``model.save`` alone (its ``model_config`` attribute is the JSON), or a Keras 3 ``.keras``
archive, in either layout:

* Keras 2 and Keras 3's legacy ``.h5``: a group per layer name (under ``model_weights`` in a
  whole-model file) whose ``weight_names`` attribute lists its datasets, e.g.
  ``lstm_1/kernel:0`` (Keras 2.2), ``lstm/lstm_cell/kernel:0`` (tf.keras 2.x),
  ``.../kernel`` (Keras 3); ``kernel`` is ``I x 4H``, ``recurrent_kernel`` ``H x 4H``,
  ``bias`` ``4H``, gate order i, f, c, o (PyTorch's i, f, g, o); a GRU's are ``I x 3H``,
  ``H x 3H`` and ``2 x 3H`` (input and recurrent biases, ``reset_after=True``, PyTorch's
  form), gate order z, r, h (PyTorch's r, z, n).
* Keras 3's ``.weights.h5`` (also inside a ``.keras`` archive): ``layers/<name>/cell/vars/0``
  (kernel), ``1`` (recurrent kernel), ``2`` (bias), where ``<name>`` is ``lstm``,
  ``lstm_1``, ... (``gru``, ``gru_1``, ...) by position among the model's layers of that
  class (keras ``saving_lib``).

A ``Bidirectional`` layer (``merge_mode="concat"``) is a bidirectional layer: its
``forward_layer`` and ``backward_layer`` (Keras 3 native), or the weights under its
``forward_<name>`` and ``backward_<name>`` sublayers (legacy), are the two directions.

Canonical form: ``weight_ih = kernel.T``, ``weight_hh = recurrent_kernel.T`` (a GRU's gate
blocks reordered); an LSTM's ``bias_ih = bias``, ``bias_hh = 0``, written back as ``bias_ih
+ bias_hh``; a GRU's ``bias_ih, bias_hh = bias``. The parameters are the HDF5 dataset
paths. Writing copies the source file (the archive, or the HDF5 weights of
a JSON + weights pair) with the datasets overwritten through h5py.
"""

import io
import json
import os
import shutil
import zipfile
from collections.abc import Mapping

import numpy as np

from ..errors import UsageError
from .keras_config import (input_size, layer_name, model_layers, returns_sequences,
                           rnn_parts)
from .layers import GRU, LSTM
from .network import Entry, Network

__all__ = ["load_keras", "load_keras_head", "load_keras_embedding", "save_keras",
           "overwrite_datasets"]


_SKIPPED = {"InputLayer", "Dropout"}       # no weights, identity at inference
_RNN_NAMES = {"SimpleRNN", "CuDNNLSTM", "CuDNNGRU", "ConvLSTM1D", "ConvLSTM2D",
              "ConvLSTM3D", "RNN", "LSTMCell", "StackedRNNCells"}


def _activation_name(value):
    if isinstance(value, dict):
        value = value.get("config", value.get("class_name"))
    return value


def _keras_layers(config, path, ignore_trailing, embedding=False):
    """``(layers, [(position, layer dict)])``: the model's layers in data order
    (:func:`~.keras_config.model_layers`) and its RNN layers (LSTM, GRU, Bidirectional);
    with ``embedding``, one ``Embedding`` before the first of them is accepted."""
    layers = model_layers(config, path)
    found = []
    for n, layer in enumerate(layers):
        if rnn_parts(layer, f"{path}: config.layers[{n}]") is not None:
            found.append((n, layer))
    if not found:
        raise UsageError(f"{path}: config.layers has no LSTM or GRU layer")
    first, last = found[0][0], found[-1][0]
    for n, layer in enumerate(layers):
        kind = layer.get("class_name") if isinstance(layer, Mapping) else None
        where = f"{path}: config.layers[{n}]"
        if kind in _CLASSES or kind == "Bidirectional" or kind in _SKIPPED:
            continue
        if kind in _RNN_NAMES:
            raise UsageError(f"{where} is a {kind}; nnrtl reads only LSTM and GRU "
                             f"layers of Keras models")
        if embedding and kind == "Embedding" and n < first and not any(
                isinstance(item, Mapping) and item.get("class_name") == "Embedding"
                for item in layers[:n]):
            continue
        if not (ignore_trailing and n > last):
            after = "" if ignore_trailing else "; pass ignore_trailing to skip layers after " \
                "the last LSTM or GRU"
            raise UsageError(f"{where} is a {kind}; nnrtl reads only LSTM and GRU layers of "
                             f"Keras models (and InputLayer, Dropout, Bidirectional){after}")
    return layers, found


def _check_lstm_config(layer, where, last, backwards=False):
    """An LSTM or GRU layer dict's config, checked; ``backwards``: the backward layer of a
    Bidirectional (``go_backwards`` true)."""
    config = layer.get("config")
    if not isinstance(config, Mapping):
        raise UsageError(f"{where}.config is missing")
    units = config.get("units")
    if not isinstance(units, int) or isinstance(units, bool) or units <= 0:
        raise UsageError(f"{where}.config.units must be a positive integer, not {units!r}")
    for key, wanted in (("activation", "tanh"), ("recurrent_activation", "sigmoid")):
        value = _activation_name(config.get(key, wanted))
        if value != wanted:
            raise UsageError(f"{where}.config.{key} is {value!r}; "
                             f"{'a GRU' if layer['class_name'] == 'GRU' else 'an LSTM'} "
                             f"computes {wanted}")
    if config.get("time_major", False):
        raise UsageError(f"{where}.config.time_major is true; nnrtl reads RNNs over "
                         f"time-second inputs")
    if bool(config.get("go_backwards", False)) != backwards:
        raise UsageError(f"{where}.config.go_backwards is {str(not backwards).lower()}; "
                         f"nnrtl reads RNNs running forward in time over time-second inputs "
                         f"(and a Bidirectional's backward layer)")
    if layer["class_name"] == "GRU" and not config.get("reset_after", True):
        raise UsageError(f"{where}.config.reset_after is false; nnrtl computes GRUs as "
                         f"PyTorch does (reset_after=True)")
    if not last and not config.get("return_sequences", False):
        raise UsageError(f"{where}.config.return_sequences must be true: a later layer "
                         f"reads every step")
    return config


def _legacy_weights(group, layer_name, path, prefix,
                    bases=("kernel", "recurrent_kernel", "bias"), within=None):
    """``{"kernel": dataset, ...}`` (the weights named ``bases``) from a Keras 2 / Keras 3
    legacy layer group; ``within``: only the weights under that sublayer's name (a
    Bidirectional's ``forward_lstm``, ``backward_lstm``)."""
    if layer_name not in group:
        raise UsageError(f"{path}: no group {prefix}{layer_name} for layer "
                         f"{layer_name!r}")
    layer_group = group[layer_name]
    names = [n.decode() if isinstance(n, bytes) else str(n)
             for n in layer_group.attrs.get("weight_names", [])]
    if not names:
        layer_group.visit(lambda name: names.append(name)
                          if hasattr(layer_group[name], "shape") else None)
    found = {}
    for name in names:
        base = name.rsplit("/", 1)[-1].split(":")[0]
        if within is not None and within not in name.split("/")[:-1]:
            continue
        if base in bases:
            if name not in layer_group:
                raise UsageError(f"{path}: {prefix}{layer_name} lists weight {name!r} "
                                 f"but has no such dataset")
            found[base] = (f"{prefix}{layer_name}/{name}", layer_group[name][()])
    return found


def _native_weights(root, kind, index, path, part=""):
    """``{"kernel": ...}`` of the ``index``-th ``kind`` (LSTM, GRU, Bidirectional) of a
    Keras 3 ``.weights.h5``; ``part``: a Bidirectional's ``forward_layer`` or
    ``backward_layer``."""
    name = kind.lower() if index == 0 else f"{kind.lower()}_{index}"
    key = f"layers/{name}/{part + '/' if part else ''}cell/vars"
    if key not in root:
        raise UsageError(f"{path}: no group {key} for the {kind} layer number {index}")
    group = root[key]
    found = {}
    for number, base in enumerate(("kernel", "recurrent_kernel", "bias")):
        if str(number) in group:
            found[base] = (f"{key}/{number}", group[str(number)][()])
    return found


def _open_keras(json_path, weights_path):
    """The model config and an open h5py file (from files or a ``.keras`` archive)."""
    import h5py
    json_path = os.fspath(json_path)
    if weights_path is None and h5py.is_hdf5(json_path):
        h5 = h5py.File(json_path, "r")
        text = h5.attrs.get("model_config")
        if text is None:
            h5.close()
            raise UsageError(f"{json_path}: an HDF5 file without a model_config attribute "
                             f"(weights only) is not read alone; give the model JSON "
                             f"(model.to_json()) with this file as its weights (--weights)")
        try:
            return json.loads(text), h5, json_path
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            h5.close()
            raise UsageError(f"{json_path}: model_config is not valid JSON: {error}") from None
    if weights_path is None:
        if not zipfile.is_zipfile(json_path):
            raise UsageError(f"{json_path}: give the HDF5 weights file too, or a .keras "
                             f"archive")
        with zipfile.ZipFile(json_path) as archive:
            try:
                text = archive.read("config.json")
                weights = io.BytesIO(archive.read("model.weights.h5"))
            except KeyError as error:
                raise UsageError(f"{json_path}: {error.args[0]}") from None
        label = f"{json_path}:model.weights.h5"
    else:
        weights = label = os.fspath(weights_path)
        try:
            with open(json_path, "rb") as file:
                text = file.read()
        except OSError as error:
            raise UsageError(f"{json_path}: cannot read: {error.strerror}") from None
    try:
        config = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{json_path}: not valid JSON: {error}") from None
    try:
        h5 = h5py.File(weights, "r")
    except OSError as error:
        raise UsageError(f"{label}: not an HDF5 file ({error})") from None
    return config, h5, label


_CLASSES = {"LSTM": LSTM, "GRU": GRU}
#: Canonical gate blocks from Keras' (its own inverse): LSTM i, f, c, o is PyTorch's
#: order; GRU z, r, h is r, z, n swapped.
_ORDER = {LSTM: [0, 1, 2, 3], GRU: [1, 0, 2]}


def _blocks(array, kind):
    blocks = np.split(np.asarray(array), kind.GATES, axis=0)
    return np.concatenate([blocks[i] for i in _ORDER[kind]], axis=0)


def _keras_entry(name, index, kind, field, dtype, suffix=""):
    """A Keras dataset: kernel (weight_ih.T), recurrent_kernel (weight_hh.T) or bias, of
    the layer's forward direction, or its reverse one (``suffix`` ``"_reverse"``)."""
    def get(layers):
        layer = layers[index]
        if field == "bias":
            b_ih, b_hh = getattr(layer, "bias_ih" + suffix), getattr(layer, "bias_hh" + suffix)
            if kind is LSTM:
                return b_ih + b_hh
            return np.stack([_blocks(b_ih, kind), _blocks(b_hh, kind)])
        return _blocks(getattr(layer, field + suffix), kind).T

    def set_(fields, array):
        target = fields.setdefault(index, {})
        if field == "bias" and kind is LSTM:
            target["bias_ih" + suffix], target["bias_hh" + suffix] = array, \
                np.zeros_like(array)
        elif field == "bias":
            target["bias_ih" + suffix], target["bias_hh" + suffix] = \
                _blocks(array[0], kind), _blocks(array[1], kind)
        else:
            target[field + suffix] = _blocks(array.T, kind)
    return Entry(name, get, set_, dtype)


_FIELDS = {"kernel": "weight_ih", "recurrent_kernel": "weight_hh", "bias": "bias"}


def load_keras(json_path, weights_path=None, *, ignore_trailing=False, embedding=False):
    """Read a Keras LSTM/GRU model.

    Parameters
    ----------
    json_path : path
        ``model.to_json()`` output; or (then no ``weights_path``) a Keras 3 ``.keras``
        archive or a whole-model HDF5 file of ``model.save``.
    weights_path : path, optional
        HDF5 weights (``save_weights`` or ``save``), either layout (see the module).
    ignore_trailing : bool
        Accept any layers after the last LSTM (e.g. a Dense classifier run elsewhere).
    embedding : bool
        Accept one ``Embedding`` in front (:func:`load_keras_embedding` reads it); the
        first RNN's input size is then its ``output_dim``.

    Returns
    -------
    Network
        Format ``"keras"``, stacked :class:`~.layers.LSTM` and :class:`~.layers.GRU`
        layers.

    Raises
    ------
    UsageError
        Naming the file, the key and the rule: not a Sequential model, no LSTM, a
        Bidirectional or other unsupported layer, an activation other than tanh/sigmoid,
        ``go_backwards``, a missing group or dataset, a shape that does not fit, NaN or
        infinite weights.
    """
    config, h5, label = _open_keras(json_path, weights_path)
    if weights_path is not None:
        writer = ("hdf5", os.fspath(weights_path))
    elif label.endswith(":model.weights.h5"):
        writer = ("archive", os.fspath(json_path))
    else:
        writer = ("hdf5", os.fspath(json_path))
    with h5:
        layers, lstms = _keras_layers(config, json_path, ignore_trailing, embedding)
        root = h5["model_weights"] if "model_weights" in h5 else h5
        prefix = "model_weights/" if "model_weights" in h5 else ""
        native = "layers" in root and "layer_names" not in root.attrs
        built, entries = [], []
        inputs = input_size(layers)
        front = _embedding_layer(layers)
        if front is not None:
            inputs = front[1].get("config", {}).get("output_dim")
        counts = {}
        for number, (n, layer) in enumerate(lstms):
            where = f"{json_path}: config.layers[{n}]"
            outer = layer["class_name"]
            expected = inputs if number == 0 else built[-1].output_size
            fields = {}
            parts = rnn_parts(layer, where)
            for part, sub in parts:
                suffix = "_reverse" if part == "backward_layer" else ""
                found, kind = _direction_weights(
                    sub, f"{where}{'.config.' + part if part else ''}",
                    last=number == len(lstms) - 1, part=part, label=label,
                    weights=lambda within, part=part: (
                        _native_weights(root, outer, counts.get(outer, 0), label, part)
                        if native else _legacy_weights(root, layer_name(layer) or "", label,
                                                       prefix, within=within)),
                    expected=expected)
                for base, (name, value) in found.items():
                    entry = _keras_entry(name, number, kind, _FIELDS[base], value.dtype,
                                         suffix)
                    entry.set(fields, value.astype(np.float64))
                    entries.append(entry)
            counts[outer] = counts.get(outer, 0) + 1
            sequences = returns_sequences(layer)
            if len(parts) == 2 and not sequences:
                raise UsageError(f"{where}: a Bidirectional with return_sequences false "
                                 f"outputs the forward layer's last step beside the backward "
                                 f"layer's first; nnrtl's outputs are every step's")
            direction = {"direction": "bidirectional"} if len(parts) == 2 else {}
            try:
                built.append(kind(**fields[number], **direction))
            except ValueError as error:
                raise UsageError(f"{where}: {error}") from None
    return Network(tuple(built), source=label, format="keras", entries=tuple(entries),
                   writer=writer, return_sequences=sequences)


def _direction_weights(layer, where, *, last, part, label, weights, expected):
    """``({base: (dataset path, array)}, layer class)`` of one direction of an RNN layer
    dict (``part``: ``""``, or a Bidirectional's ``forward_layer`` / ``backward_layer``),
    its config and its weights' shapes checked; ``weights(within)`` reads the datasets;
    ``expected``: the input size (``None``: the kernel's)."""
    config = _check_lstm_config(layer, where, last, backwards=part == "backward_layer")
    units, class_name = config["units"], layer["class_name"]
    kind = _CLASSES[class_name]
    rows = kind.GATES * units
    found = weights(config.get("name") if part else None)
    needed = ("kernel", "recurrent_kernel") + (("bias",) if config.get("use_bias", True)
                                               else ())
    for base in needed:
        if base not in found:
            raise UsageError(f"{label}: no {base} for {class_name} layer "
                             f"{config.get('name', where)!r}")
    if expected is None:
        expected = found["kernel"][1].shape[0] if found["kernel"][1].ndim else None
    gates = f"{kind.GATES} * units"
    for base, shape, rule in (
            ("kernel", (expected, rows), f"(input size, {gates})"),
            ("recurrent_kernel", (units, rows), f"(units, {gates})"),
            ("bias", (rows,) if kind is LSTM else (2, rows),
             f"({gates},)" if kind is LSTM else f"(2, {gates})")):
        if base in found and found[base][1].shape != shape:
            raise UsageError(f"{label}: {found[base][0]} has shape {found[base][1].shape}, "
                             f"expected {shape}: {base} must be {rule}")
    for base in needed:
        name, value = found[base]
        if not np.issubdtype(value.dtype, np.floating) or not np.all(np.isfinite(value)):
            raise UsageError(f"{label}: {name} has NaN or infinite values, or is not "
                             f"floating point")
    return {base: found[base] for base in needed}, kind


def _overwrite(h5_file, arrays):
    import h5py
    with h5py.File(h5_file, "r+") as h5:
        for name, value in arrays.items():
            dataset = h5[name]
            dataset[...] = np.asarray(value, dtype=dataset.dtype)


def save_keras(network, path):
    """A copy of the source (the ``.keras`` archive, the whole-model ``.h5`` or the HDF5
    weights of a JSON + weights pair; the JSON itself does not change) with the datasets
    overwritten."""
    kind, source = network.writer
    _save_arrays(kind, source, os.fspath(path),
                 {entry.name: entry.get(network.layers) for entry in network.entries})


def _save_arrays(kind, source, path, arrays):
    """``source`` copied to ``path`` with the datasets ``arrays`` overwritten."""
    if kind == "hdf5":
        if os.path.abspath(source) != os.path.abspath(path):
            shutil.copyfile(source, path)
        _overwrite(path, arrays)
        return
    with zipfile.ZipFile(source) as archive:
        records = {info.filename: archive.read(info) for info in archive.infolist()}
    weights = io.BytesIO(records["model.weights.h5"])
    _overwrite(weights, arrays)
    records["model.weights.h5"] = weights.getvalue()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in records.items():
            archive.writestr(name, data)


def _embedding_layer(layers):
    """``(position, layer dict)`` of an ``Embedding`` before the first LSTM/GRU, or None."""
    for n, layer in enumerate(layers):
        kind = layer.get("class_name") if isinstance(layer, Mapping) else None
        if kind in _CLASSES:
            return None
        if kind == "Embedding":
            return n, layer
    return None


def load_keras_embedding(path):
    """The ``Embedding`` before the first LSTM/GRU of a Keras model (a ``.keras`` archive
    or a whole-model ``.h5``) as an :class:`~.train_model.Embedding` whose key is its
    dataset's path; ``None`` when there is none.

    Raises
    ------
    UsageError
        An embedding whose weights are missing, not floating point or not finite, or a
        configuration its forward differs from (``mask_zero``), naming it.
    """
    from .train_model import Embedding

    config, h5, label = _open_keras(path, None)
    with h5:
        layers, _ = _keras_layers(config, path, True, embedding=True)
        found = _embedding_layer(layers)
        if found is None:
            return None
        n, layer = found
        settings = layer.get("config") if isinstance(layer.get("config"), Mapping) else {}
        if settings.get("mask_zero", False):
            raise UsageError(f"{path}: config.layers[{n}].config.mask_zero is true: token 0 "
                             f"masks the RNN's steps, which nnrtl does not compute")
        root = h5["model_weights"] if "model_weights" in h5 else h5
        prefix = "model_weights/" if "model_weights" in h5 else ""
        if "layers" in root and "layer_names" not in root.attrs:
            key = "layers/embedding/vars/0"
            weights = {"embeddings": (key, root[key][()])} if key in root else {}
        else:
            weights = _legacy_weights(root, settings.get("name", ""), label, prefix,
                                      bases=("embeddings",))
        if "embeddings" not in weights:
            raise UsageError(f"{label}: no embeddings for Embedding layer "
                             f"{settings.get('name', n)!r}")
        name, value = weights["embeddings"]
        if not np.issubdtype(value.dtype, np.floating) or not np.all(np.isfinite(value)):
            raise UsageError(f"{label}: {name} has NaN or infinite values, or is not "
                             f"floating point")
    return Embedding(key=name, weight=value.astype(np.float64), dtype=str(value.dtype))


def overwrite_datasets(writer, arrays):
    """Overwrite the datasets ``arrays`` (path to array) of the Keras file a network was
    read from, in place (``writer``: its :attr:`~.network.Network.writer`, after
    :func:`save_keras` wrote the copy)."""
    kind, path = writer
    _save_arrays(kind, path, path, arrays)


def _dense_entry(name, index, field, dtype):
    """A Dense layer's dataset: kernel (``weight.T``) or bias, of head layer ``index``."""
    def get(layers):
        value = getattr(layers[index], field)
        return value.T if field == "weight" else value

    def set_(fields, array):
        fields.setdefault(index, {})[field] = array.T if field == "weight" else array
    return Entry(name, get, set_, dtype)


#: The activations of a Dense layer in a head, and the layer each is (``None``: linear).
_HEAD_ACTIVATIONS = {"linear": None, None: None, "relu": "ReLU", "tanh": "Tanh",
                     "sigmoid": "Sigmoid", "softmax": "Softmax"}


def _dense_weights(root, label, prefix, layers, n, dense):
    """``{"kernel": (path, array), "bias": ...}`` of the Dense layer at position ``n``."""
    if "layers" in root and "layer_names" not in root.attrs:
        index = sum(1 for m, item in enumerate(layers) if m < n and isinstance(
            item, Mapping) and item.get("class_name") == "Dense")
        key = f"layers/{'dense' if index == 0 else f'dense_{index}'}/vars"
        group = root[key] if key in root else {}
        return {base: (f"{key}/{number}", group[str(number)][()])
                for number, base in enumerate(("kernel", "bias")) if str(number) in group}
    return _legacy_weights(root, dense.get("name", ""), label, prefix)


def load_keras_head(path):
    """The ``Dense`` layers after the last LSTM/GRU of a Keras model (a ``.keras`` archive
    or a whole-model ``.h5``), as a :class:`Network` of :class:`~.layers.Linear` layers
    (their parameters the HDF5 dataset paths), each followed by its activation's layer
    (``relu``, ``tanh``, ``sigmoid``, ``softmax``; none for ``linear``); ``None`` when the
    RNN is the last layer.

    Raises
    ------
    UsageError
        Anything after the last RNN but ``Dense`` layers with those activations reading
        every step (``return_sequences`` true), naming the layer: nothing is left
        untrained.
    """
    from . import layers as kinds

    config, h5, label = _open_keras(path, None)
    with h5:
        layers, rnns = _keras_layers(config, path, True, embedding=True)
        last, rnn = rnns[-1]
        after = [(n, layer) for n, layer in enumerate(layers) if n > last
                 and not (isinstance(layer, Mapping) and layer.get("class_name") ==
                          "InputLayer")]
        if not after:
            return None
        others = [(n, item) for n, item in after
                  if not isinstance(item, Mapping) or item.get("class_name") != "Dense"]
        if others:
            extra = [f"config.layers[{n}] "
                     f"({item.get('class_name') if isinstance(item, Mapping) else item})"
                     for n, item in others]
            raise UsageError(f"{path}: {', '.join(extra)} after the last LSTM or GRU: nnrtl "
                             f"train trains Dense layers there, and would leave "
                             f"{'it' if len(others) == 1 else 'them'} untrained")
        if not returns_sequences(rnn):
            raise UsageError(f"{path}: config.layers[{last}].config.return_sequences is "
                             f"false: the Dense reads the last step only, and nnrtl train "
                             f"takes the loss at the head's outputs of every step")
        root = h5["model_weights"] if "model_weights" in h5 else h5
        prefix = "model_weights/" if "model_weights" in h5 else ""
        built, entries = [], []
        for n, layer in after:
            where = f"{path}: config.layers[{n}]"
            dense = layer.get("config") if isinstance(layer.get("config"), Mapping) else {}
            activation = _activation_name(dense.get("activation", "linear"))
            if activation not in _HEAD_ACTIVATIONS:
                raise UsageError(f"{where}.config.activation is {activation!r}; nnrtl runs "
                                 f"a Dense head's linear, relu, tanh, sigmoid and softmax")
            found = _dense_weights(root, label, prefix, layers, n, dense)
            if "kernel" not in found or (dense.get("use_bias", True) and "bias" not in found):
                raise UsageError(f"{label}: no kernel or bias for Dense layer "
                                 f"{dense.get('name', n)!r}")
            arrays = {}
            for base, field in (("kernel", "weight"), ("bias", "bias")):
                if base in found:
                    name, value = found[base]
                    if not np.issubdtype(value.dtype, np.floating) \
                            or not np.all(np.isfinite(value)):
                        raise UsageError(f"{label}: {name} has NaN or infinite values, or "
                                         f"is not floating point")
                    entries.append(_dense_entry(name, len(built), field, value.dtype))
                    value = value.astype(np.float64)
                    arrays[field] = value.T if field == "weight" else value
            try:
                built.append(kinds.Linear(**arrays))
            except ValueError as error:
                raise UsageError(f"{where}: {error}") from None
            if _HEAD_ACTIVATIONS[activation] is not None:
                built.append(getattr(kinds, _HEAD_ACTIVATIONS[activation])())
    try:
        return Network(tuple(built), source=label, format="keras", entries=tuple(entries))
    except ValueError as error:
        raise UsageError(f"{label}: {error}") from None

"""LSTM weights from Keras and PyTorch files, in one float64 form the SBE derives from.

Internal form (:class:`LSTMLayer`): per layer ``w_x`` (``4H x I``), ``w_h`` (``4H x H``) and
``bias`` (``4H``), the gate blocks stacked in :data:`~nnrtl.hw.sbe.GATES` order -- i (input),
u (cell candidate, the paper's "input modulation gate", Keras' c, PyTorch's g), f (forget),
o (output) -- so rows ``g * H .. (g + 1) * H - 1`` are gate ``g``. The SBE's interleaved
matrix (:meth:`LSTMLayer.interleaved`) has row ``4 * j + g`` = row ``j`` of gate ``g``.

The equations (the paper's, Keras' and PyTorch's), with ``z = w_x x_t + w_h h_{t-1} + bias``:
``i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o)``, ``u = tanh(z_u)``,
``c_t = f * c_{t-1} + i * u``, ``h_t = o * tanh(c_t)``.

Keras (:func:`load_keras`): the model JSON of ``model.to_json()`` (a ``Sequential``) with the
weights of ``model.save_weights`` / ``model.save`` in HDF5, or a whole-model ``.h5`` of
``model.save`` alone (its ``model_config`` attribute is the JSON), in either layout:

* Keras 2 and Keras 3's legacy ``.h5``: a group per layer name (under ``model_weights`` in a
  whole-model file) whose ``weight_names`` attribute lists its datasets, e.g.
  ``lstm_1/kernel:0`` (Keras 2.2), ``lstm/lstm_cell/kernel:0`` (tf.keras 2.x),
  ``.../kernel`` (Keras 3); ``kernel`` is ``I x 4H``, ``recurrent_kernel`` ``H x 4H``,
  ``bias`` ``4H``, gate order i, f, c, o.
* Keras 3's ``.weights.h5`` (also inside a ``.keras`` archive): ``layers/<name>/cell/vars/0``
  (kernel), ``1`` (recurrent kernel), ``2`` (bias), where ``<name>`` is ``lstm``,
  ``lstm_1``, ... by position among the model's LSTM layers (keras ``saving_lib``).

PyTorch (:func:`load_torch`): a ``torch.save``-d ``state_dict`` of an ``nn.LSTM`` (or of a
module holding one): ``weight_ih_l{k}`` (``4H x I``), ``weight_hh_l{k}``, ``bias_ih_l{k}``,
``bias_hh_l{k}`` (summed), gate order i, f, g, o.

Every malformed input raises :class:`~nnrtl.gen.errors.UsageError` naming the file, the key
and the rule.
"""

import dataclasses
import io
import json
import os
import zipfile
from collections.abc import Mapping

import numpy as np

from ...hw.sbe.config import GATES
from ..errors import UsageError

__all__ = ["ModelSpec", "LSTMLayer", "LSTMModel", "lstm_forward", "load_keras",
           "load_torch", "KERAS_GATES", "TORCH_GATES"]

#: Gate order of Keras' kernels (i, f, c, o) and PyTorch's weights (i, f, g, o), named
#: with :data:`GATES` letters.
KERAS_GATES = ("i", "f", "u", "o")
TORCH_GATES = ("i", "f", "u", "o")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """The shape of a stacked LSTM, what the design-space exploration needs.

    Attributes
    ----------
    input_size, hidden_size, layers : int
    """

    input_size: int
    hidden_size: int
    layers: int

    def __post_init__(self):
        for name in ("input_size", "hidden_size", "layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")


def _reorder(array, order, axis=0):
    """Gate blocks of ``array`` along ``axis`` from ``order`` to :data:`GATES` order."""
    blocks = np.split(np.asarray(array, dtype=np.float64), 4, axis=axis)
    return np.concatenate([blocks[order.index(gate)] for gate in GATES], axis=axis)


@dataclasses.dataclass(frozen=True, eq=False)
class LSTMLayer:
    """One layer's weights, float64, gate blocks in :data:`GATES` order.

    Attributes
    ----------
    w_x : ndarray, shape (4H, I)
    w_h : ndarray, shape (4H, H)
    bias : ndarray, shape (4H,)
    """

    w_x: np.ndarray
    w_h: np.ndarray
    bias: np.ndarray

    def __post_init__(self):
        rows, hidden = np.shape(self.w_h)
        if rows != 4 * hidden or np.shape(self.w_x)[:1] != (rows,) or np.ndim(self.w_x) != 2 \
                or np.shape(self.bias) != (rows,):
            raise ValueError(f"w_x, w_h and bias must be (4H, I), (4H, H) and (4H,), not "
                             f"{np.shape(self.w_x)}, {np.shape(self.w_h)} and "
                             f"{np.shape(self.bias)}")
        for name in ("w_x", "w_h", "bias"):
            object.__setattr__(self, name, np.array(getattr(self, name), dtype=np.float64))

    @property
    def input_size(self):
        return self.w_x.shape[1]

    @property
    def hidden_size(self):
        return self.w_h.shape[1]

    def gate(self, name):
        """``(w_x, w_h, bias)`` of gate ``name`` (one of :data:`GATES`)."""
        rows = slice(GATES.index(name) * self.hidden_size,
                     (GATES.index(name) + 1) * self.hidden_size)
        return self.w_x[rows], self.w_h[rows], self.bias[rows]

    def interleaved(self):
        """The SBE's matrix ``[w_x | w_h]`` and bias with row ``4 * j + g`` = row ``j`` of
        gate ``g``; shapes ``(4H, I + H)`` and ``(4H,)``."""
        hidden = self.hidden_size
        matrix = np.concatenate([self.w_x, self.w_h], axis=1)
        matrix = matrix.reshape(4, hidden, -1).transpose(1, 0, 2).reshape(4 * hidden, -1)
        return matrix, self.bias.reshape(4, hidden).T.reshape(-1)


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def lstm_forward(layers, x, h0=None, c0=None, *, trace=None):
    """float64 forward pass of stacked LSTM layers, as ``torch.nn.LSTM`` computes it.

    Parameters
    ----------
    layers : sequence of LSTMLayer
    x : array, shape (T, I) or (T, N, I)
        Time first, as ``nn.LSTM`` with ``batch_first=False``.
    h0, c0 : array, shape (L, H) or (L, N, H), optional
        Initial states (zeros by default).
    trace : dict, optional
        If given, filled with per-layer lists of arrays: ``"x"`` (layer inputs), ``"z"``
        (gate pre-activations, ``T x N x 4H``, :data:`GATES` blocks), ``"c"`` and ``"h"``.

    Returns
    -------
    output : ndarray, shape (T, [N,] H)
        The last layer's h at every step.
    (h_n, c_n) : ndarrays, shape (L, [N,] H)
    """
    x = np.asarray(x, dtype=np.float64)
    single = x.ndim == 2
    if single:
        x = x[:, None, :]
    steps, count = x.shape[:2]
    h_n, c_n = [], []
    for index, layer in enumerate(layers):
        hidden = layer.hidden_size
        h = np.zeros((count, hidden)) if h0 is None else \
            np.asarray(h0, dtype=np.float64)[index].reshape(count, hidden)
        c = np.zeros((count, hidden)) if c0 is None else \
            np.asarray(c0, dtype=np.float64)[index].reshape(count, hidden)
        outputs, zs, cs = [], [], []
        for t in range(steps):
            z = x[t] @ layer.w_x.T + h @ layer.w_h.T + layer.bias
            i, u, f, o = np.split(z, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(u)
            h = _sigmoid(o) * np.tanh(c)
            outputs.append(h)
            zs.append(z)
            cs.append(c)
        if trace is not None:
            for key, value in (("x", x), ("z", np.stack(zs)), ("c", np.stack(cs)),
                               ("h", np.stack(outputs))):
                trace.setdefault(key, []).append(value)
        x = np.stack(outputs)
        h_n.append(h)
        c_n.append(c)
    h_n, c_n = np.stack(h_n), np.stack(c_n)
    if single:
        return x[:, 0], (h_n[:, 0], c_n[:, 0])
    return x, (h_n, c_n)


@dataclasses.dataclass(frozen=True, eq=False)
class LSTMModel:
    """Stacked LSTM layers read from a file.

    Attributes
    ----------
    layers : tuple of LSTMLayer
    source : str
        Where the weights came from.
    return_sequences : bool
        Whether the model's output is h at every step (``False``: the last step's only).
    """

    layers: tuple
    source: str = ""
    return_sequences: bool = True

    @property
    def spec(self):
        """The :class:`ModelSpec` of the model."""
        return ModelSpec(self.layers[0].input_size, self.layers[0].hidden_size,
                         len(self.layers))

    def forward(self, x, h0=None, c0=None, *, trace=None):
        """:func:`lstm_forward` over the model's layers."""
        return lstm_forward(self.layers, x, h0, c0, trace=trace)


# -- Keras -------------------------------------------------------------------------------

_SKIPPED = {"InputLayer", "Dropout"}       # no weights, identity at inference
_RNN_NAMES = {"GRU", "SimpleRNN", "CuDNNLSTM", "CuDNNGRU", "ConvLSTM1D", "ConvLSTM2D",
              "ConvLSTM3D", "RNN", "LSTMCell", "StackedRNNCells"}


def _activation_name(value):
    if isinstance(value, dict):
        value = value.get("config", value.get("class_name"))
    return value


def _keras_layers(config, path, ignore_trailing):
    """``[(position, layer dict)]`` of the LSTM layers of a Keras model config."""
    if not isinstance(config, Mapping) or "class_name" not in config:
        raise UsageError(f"{path}: not a Keras model JSON (no top-level 'class_name')")
    if config["class_name"] != "Sequential":
        raise UsageError(f"{path}: class_name is {config['class_name']!r}; only Sequential "
                         f"models are supported")
    inner = config.get("config")
    layers = inner.get("layers") if isinstance(inner, Mapping) else inner
    if not isinstance(layers, list):
        raise UsageError(f"{path}: config.layers is missing or not a list")
    lstm_positions = [n for n, layer in enumerate(layers)
                      if isinstance(layer, Mapping) and layer.get("class_name") == "LSTM"]
    if not lstm_positions:
        raise UsageError(f"{path}: config.layers has no LSTM layer")
    found = []
    for n, layer in enumerate(layers):
        kind = layer.get("class_name") if isinstance(layer, Mapping) else None
        where = f"{path}: config.layers[{n}]"
        if kind == "LSTM":
            found.append((n, layer))
        elif kind == "Bidirectional":
            raise UsageError(f"{where} is Bidirectional; the SBE runs unidirectional LSTMs")
        elif kind in _RNN_NAMES:
            raise UsageError(f"{where} is a {kind}; the SBE imports only LSTM layers")
        elif kind in _SKIPPED:
            continue
        elif not (ignore_trailing and n > lstm_positions[-1]):
            after = "" if ignore_trailing else "; pass ignore_trailing to skip layers after " \
                "the last LSTM"
            raise UsageError(f"{where} is a {kind}; the SBE imports only LSTM layers (and "
                             f"InputLayer, Dropout){after}")
    return layers, found


def _check_lstm_config(layer, where, last):
    config = layer.get("config")
    if not isinstance(config, Mapping):
        raise UsageError(f"{where}.config is missing")
    units = config.get("units")
    if not isinstance(units, int) or isinstance(units, bool) or units <= 0:
        raise UsageError(f"{where}.config.units must be a positive integer, not {units!r}")
    for key, wanted in (("activation", "tanh"), ("recurrent_activation", "sigmoid")):
        value = _activation_name(config.get(key, wanted))
        if value != wanted:
            raise UsageError(f"{where}.config.{key} is {value!r}; the SBE computes {wanted}")
    for key in ("go_backwards", "time_major"):
        if config.get(key, False):
            raise UsageError(f"{where}.config.{key} is true; the SBE runs forward in time "
                             f"over time-second inputs")
    if not last and not config.get("return_sequences", False):
        raise UsageError(f"{where}.config.return_sequences must be true: a later LSTM "
                         f"reads every step")
    return config


def _keras_input_size(layers):
    for layer in layers:
        for holder in (layer.get("config", {}), layer.get("build_config", {})):
            for key in ("batch_input_shape", "batch_shape", "input_shape"):
                shape = holder.get(key) if isinstance(holder, Mapping) else None
                if isinstance(shape, list) and shape and isinstance(shape[-1], int):
                    return shape[-1]
        if layer.get("class_name") == "LSTM":
            return None
    return None


def _legacy_weights(group, layer_name, path, prefix):
    """``{"kernel": dataset, ...}`` from a Keras 2 / Keras 3 legacy layer group."""
    if layer_name not in group:
        raise UsageError(f"{path}: no group {prefix}{layer_name} for LSTM layer "
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
        if base in ("kernel", "recurrent_kernel", "bias"):
            if name not in layer_group:
                raise UsageError(f"{path}: {prefix}{layer_name} lists weight {name!r} "
                                 f"but has no such dataset")
            found[base] = (f"{prefix}{layer_name}/{name}", layer_group[name][()])
    return found


def _native_weights(root, index, path):
    """``{"kernel": ...}`` of the ``index``-th LSTM of a Keras 3 ``.weights.h5``."""
    name = "lstm" if index == 0 else f"lstm_{index}"
    key = f"layers/{name}/cell/vars"
    if key not in root:
        raise UsageError(f"{path}: no group {key} for the LSTM layer number {index}")
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


def load_keras(json_path, weights_path=None, *, ignore_trailing=False):
    """Read a Keras LSTM model.

    Parameters
    ----------
    json_path : path
        ``model.to_json()`` output; or (then no ``weights_path``) a Keras 3 ``.keras``
        archive or a whole-model HDF5 file of ``model.save``.
    weights_path : path, optional
        HDF5 weights (``save_weights`` or ``save``), either layout (see the module).
    ignore_trailing : bool
        Accept any layers after the last LSTM (e.g. a Dense classifier run elsewhere).

    Returns
    -------
    LSTMModel

    Raises
    ------
    UsageError
        Naming the file, the key and the rule: not a Sequential model, no LSTM, a
        Bidirectional or other unsupported layer, an activation other than tanh/sigmoid,
        ``go_backwards``, a missing group or dataset, a shape that does not fit, layers of
        different sizes.
    """
    config, h5, label = _open_keras(json_path, weights_path)
    with h5:
        layers, lstms = _keras_layers(config, json_path, ignore_trailing)
        root = h5["model_weights"] if "model_weights" in h5 else h5
        prefix = "model_weights/" if "model_weights" in h5 else ""
        native = "layers" in root and "layer_names" not in root.attrs
        model_layers = []
        inputs = _keras_input_size(layers)
        return_sequences = True
        for number, (n, layer) in enumerate(lstms):
            where = f"{json_path}: config.layers[{n}]"
            last = number == len(lstms) - 1
            lstm = _check_lstm_config(layer, where, last)
            units = lstm["units"]
            if model_layers and units != model_layers[0].hidden_size:
                raise UsageError(f"{where}.config.units is {units}, but the first LSTM has "
                                 f"{model_layers[0].hidden_size}: the SBE needs one hidden "
                                 f"size for every layer")
            found = (_native_weights(root, number, label) if native
                     else _legacy_weights(root, lstm.get("name", ""), label, prefix))
            use_bias = lstm.get("use_bias", True)
            needed = ("kernel", "recurrent_kernel") + (("bias",) if use_bias else ())
            for base in needed:
                if base not in found:
                    raise UsageError(f"{label}: no {base} for LSTM layer "
                                     f"{lstm.get('name', number)!r}")
            expected_inputs = inputs if number == 0 else units
            kernel_rows = found["kernel"][1].shape[0] if found["kernel"][1].ndim else None
            if expected_inputs is None:
                expected_inputs = kernel_rows
            for base, shape, rule in (
                    ("kernel", (expected_inputs, 4 * units), "(input size, 4 * units)"),
                    ("recurrent_kernel", (units, 4 * units), "(units, 4 * units)"),
                    ("bias", (4 * units,), "(4 * units,)")):
                if base in found and found[base][1].shape != shape:
                    raise UsageError(f"{label}: {found[base][0]} has shape "
                                     f"{found[base][1].shape}, expected {shape}: {base} "
                                     f"must be {rule}")
            bias = found["bias"][1] if use_bias else np.zeros(4 * units)
            model_layers.append(LSTMLayer(
                w_x=_reorder(found["kernel"][1], KERAS_GATES, axis=1).T,
                w_h=_reorder(found["recurrent_kernel"][1], KERAS_GATES, axis=1).T,
                bias=_reorder(bias, KERAS_GATES)))
            return_sequences = bool(lstm.get("return_sequences", False))
    return LSTMModel(tuple(model_layers), source=label, return_sequences=return_sequences)


# -- PyTorch -----------------------------------------------------------------------------

def load_torch(source, *, prefix=None):
    """Read the ``nn.LSTM`` weights of a PyTorch ``state_dict``.

    Parameters
    ----------
    source : path or mapping
        A file written by ``torch.save(module.state_dict(), path)`` (read with
        ``weights_only=True``), or the state dict itself.
    prefix : str, optional
        Key prefix of the LSTM (e.g. ``"encoder.rnn."``); needed only when the state dict
        holds several.

    Returns
    -------
    LSTMModel

    Raises
    ------
    UsageError
        Naming the file, the key and the rule: not a state dict, no or several LSTMs,
        bidirectional (``*_reverse``) or projected (``weight_hr_l*``) LSTMs, a shape that
        does not fit, missing biases of some layers.
    """
    if isinstance(source, Mapping):
        state, label = source, "state_dict"
    else:
        label = os.fspath(source)
        try:
            import torch
        except ImportError:
            raise UsageError(f"{label}: reading a PyTorch file needs torch installed") \
                from None
        try:
            state = torch.load(label, map_location="cpu", weights_only=True)
        except Exception as error:              # torch raises many kinds for bad files
            raise UsageError(f"{label}: not a PyTorch state_dict file "
                             f"({type(error).__name__}: {error})") from None
        if not isinstance(state, Mapping):
            raise UsageError(f"{label}: holds a {type(state).__name__}, not a state_dict")
    keys = [key for key in state if isinstance(key, str)]
    prefixes = sorted(key[:-len("weight_ih_l0")] for key in keys
                      if key.endswith("weight_ih_l0"))
    if prefix is None:
        if not prefixes:
            raise UsageError(f"{label}: no key ends in weight_ih_l0: not an nn.LSTM "
                             f"state_dict")
        if len(prefixes) > 1:
            raise UsageError(f"{label}: several LSTMs ({', '.join(map(repr, prefixes))}); "
                             f"choose one with prefix")
        prefix = prefixes[0]
    elif prefix not in prefixes:
        raise UsageError(f"{label}: no key {prefix}weight_ih_l0")
    for key in keys:
        if key.startswith(prefix) and key.endswith("_reverse"):
            raise UsageError(f"{label}: {key} belongs to a bidirectional LSTM; the SBE "
                             f"runs unidirectional LSTMs")
        if key.startswith(prefix + "weight_hr_l"):
            raise UsageError(f"{label}: {key} is a projection (proj_size > 0); the SBE "
                             f"runs LSTMs without projections")

    def array(key):
        value = state[key]
        value = value.detach().cpu().double().numpy() if hasattr(value, "detach") else value
        return np.asarray(value, dtype=np.float64)

    layers = []
    has_bias = f"{prefix}bias_ih_l0" in state
    while f"{prefix}weight_ih_l{len(layers)}" in state:
        k = len(layers)
        if f"{prefix}weight_hh_l{k}" not in state:
            raise UsageError(f"{label}: {prefix}weight_ih_l{k} has no {prefix}weight_hh_l{k}")
        w_ih, w_hh = array(f"{prefix}weight_ih_l{k}"), array(f"{prefix}weight_hh_l{k}")
        if w_hh.ndim != 2 or w_hh.shape[0] != 4 * w_hh.shape[1] or not w_hh.size:
            raise UsageError(f"{label}: {prefix}weight_hh_l{k} has shape {w_hh.shape}: it "
                             f"must be (4 * hidden_size, hidden_size)")
        hidden = w_hh.shape[1]
        inputs = layers[-1].hidden_size if layers else w_ih.shape[-1]
        checks = [(f"weight_hh_l{k}", w_hh, (4 * hidden, hidden),
                   "(4 * hidden_size, hidden_size)"),
                  (f"weight_ih_l{k}", w_ih, (4 * hidden, inputs),
                   "(4 * hidden_size, input size of the layer)")]
        for name in (f"bias_ih_l{k}", f"bias_hh_l{k}"):
            if (prefix + name in state) != has_bias:
                raise UsageError(f"{label}: {prefix}{name} is "
                                 f"{'missing' if has_bias else 'unexpected'}: every layer "
                                 f"has both biases or none")
            if has_bias:
                checks.append((name, array(prefix + name), (4 * hidden,),
                               "(4 * hidden_size,)"))
        for name, value, shape, rule in checks:
            if value.shape != shape:
                raise UsageError(f"{label}: {prefix}{name} has shape {value.shape}, expected "
                                 f"{shape}: it must be {rule}")
        if layers and hidden != layers[0].hidden_size:
            raise UsageError(f"{label}: {prefix}weight_hh_l{k} has hidden size {hidden}, "
                             f"layer 0 has {layers[0].hidden_size}: the SBE needs one hidden "
                             f"size for every layer")
        bias = sum((value for _, value, _, _ in checks[2:]), np.zeros(4 * hidden))
        layers.append(LSTMLayer(w_x=_reorder(w_ih, TORCH_GATES),
                                w_h=_reorder(w_hh, TORCH_GATES),
                                bias=_reorder(bias, TORCH_GATES)))
    return LSTMModel(tuple(layers), source=label)

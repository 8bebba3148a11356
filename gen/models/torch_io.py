"""PyTorch files: ``state_dict`` of RNNs and ``torch.export`` archives of CNNs (TorchScript:
:mod:`.torchscript`).

Nothing is unpickled in a way that can run code, and no module's ``forward`` is called:

* ``torch.save(module.state_dict())`` files are read with ``torch.load(...,
  weights_only=True)``, whose unpickler only builds tensors, containers and primitive
  types. A pickled module (``torch.save(model)``) is refused by it; we say so.
* TorchScript (``torch.jit.save``): read as data by :mod:`.torchscript`, never with
  ``torch.jit.load`` (not safe on untrusted files).
* ``torch.export`` (``.pt2``): ``torch.export.load`` is not used, because its
  ``deserialize_torch_artifact`` (``torch/_export/serde/serialize.py``) falls back to
  ``torch.load(weights_only=False)`` for the archive's sample inputs and constants. The
  archive is read as a zip instead: the graph and its signature from ``models/*.json``
  (JSON), the weights as raw bytes described by ``model_weights_config.json``, or, if
  stored pickled, with ``torch.load(weights_only=True)``. Writing copies every record and
  replaces the weights' bytes.
"""

import io
import json
import os
import pickle
import zipfile
from collections.abc import Mapping

import numpy as np

from ..errors import UsageError
from .layers import GRU, LSTM, Conv2d, Flatten, Linear, MaxPool2d, ReLU
from .network import Entry, Network

__all__ = ["load_state_dict", "load_export", "save_state_dict", "save_export"]


def _finite(label, name, array):
    if not np.all(np.isfinite(array)):
        raise UsageError(f"{label}: {name} has NaN or infinite values")
    return array


def _numpy(value):
    return value.detach().cpu().double().numpy()


def _field_entry(name, index, field, dtype):
    def get(layers):
        return getattr(layers[index], field)

    def set_(fields, array):
        fields.setdefault(index, {})[field] = array
    return Entry(name, get, set_, dtype)


# -- state_dict ---------------------------------------------------------------------------

def _torch_load(label):
    import torch
    try:
        return torch.load(label, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        if "Unsupported global" in str(error):
            raise UsageError(f"{label}: holds pickled Python objects (a whole module saved "
                             f"with torch.save(model)?), which nnrtl does not unpickle; save "
                             f"model.state_dict() instead") from None
        raise UsageError(f"{label}: not a PyTorch state_dict file ({error})") from None
    except Exception as error:              # torch raises many kinds for bad files
        raise UsageError(f"{label}: not a PyTorch state_dict file "
                         f"({type(error).__name__}: {error})") from None


def load_state_dict(source, *, prefix=None, label=None):
    """The stacked ``nn.LSTM`` or ``nn.GRU`` of a PyTorch ``state_dict``.

    Parameters
    ----------
    source : path or mapping
        A ``torch.save(module.state_dict(), path)`` file, or the state dict itself.
    prefix : str, optional
        Key prefix of the RNN (e.g. ``"encoder.rnn."``); needed only when several.
    label : str, optional
        The name messages and :attr:`Network.source` give a mapping ``source`` (default
        ``"state_dict"``).

    Returns
    -------
    Network
        Format ``"state_dict"``; the parameters are the RNN's keys, with the prefix.
    """
    if isinstance(source, Mapping):
        state, label = source, label or "state_dict"
    else:
        label = os.fspath(source)
        state = _torch_load(label)
        if not isinstance(state, Mapping):
            raise UsageError(f"{label}: holds a {type(state).__name__}, not a state_dict")
    keys = [key for key in state if isinstance(key, str)]
    prefixes = sorted(key[:-len("weight_ih_l0")] for key in keys
                      if key.endswith("weight_ih_l0"))
    if prefix is None:
        if not prefixes:
            raise UsageError(f"{label}: no key ends in weight_ih_l0: not the state_dict of an "
                             f"nn.LSTM or nn.GRU")
        if len(prefixes) > 1:
            raise UsageError(f"{label}: several RNNs ({', '.join(map(repr, prefixes))}); "
                             f"choose one with --prefix (e.g. --prefix {prefixes[0]})")
        prefix = prefixes[0]
    elif prefix not in prefixes:
        raise UsageError(f"{label}: no key {prefix}weight_ih_l0")
    bidirectional = f"{prefix}weight_ih_l0_reverse" in state
    projected = f"{prefix}weight_hr_l0" in state
    suffixes = ("", "_reverse") if bidirectional else ("",)
    has_bias = f"{prefix}bias_ih_l0" in state

    def array(key):
        value = state[key]
        if not hasattr(value, "detach") or value.dtype.is_complex \
                or not value.dtype.is_floating_point:
            raise UsageError(f"{label}: {key} is not a floating-point tensor")
        return _finite(label, key, _numpy(value))

    w_hh = array(f"{prefix}weight_hh_l0")
    width = state[f"{prefix}weight_hr_l0"].shape[1] if projected else \
        (w_hh.shape[1] if w_hh.ndim == 2 else 0)
    if w_hh.ndim != 2 or width == 0 or w_hh.shape[0] not in (3 * width, 4 * width) \
            or (projected and w_hh.shape[0] != 4 * width):
        raise UsageError(f"{label}: {prefix}weight_hh_l0 has shape {tuple(w_hh.shape)}: it "
                         f"must be (4 * hidden_size, hidden_size or proj_size) (nn.LSTM) or "
                         f"(3 * hidden_size, hidden_size) (nn.GRU)")
    kind = LSTM if w_hh.shape[0] == 4 * width else GRU
    layers, entries, used = [], [], set()
    while f"{prefix}weight_ih_l{len(layers)}" in state:
        k = len(layers)
        fields = {}
        for suffix in suffixes:
            for field in kind.FIELDS:
                key = f"{prefix}{field}_l{k}{suffix}"
                wanted = field != "weight_hr" or projected
                if field.startswith("bias"):
                    wanted = has_bias
                if (key in state) != wanted:
                    raise UsageError(f"{label}: {key} is "
                                     f"{'missing' if wanted else 'unexpected'}: every layer "
                                     f"and direction has the same tensors as layer 0")
                if wanted:
                    fields[field + suffix] = array(key)
                    entries.append(_field_entry(key, k, field + suffix,
                                                _torch_dtype(state[key])))
                    used.add(key)
        try:
            layers.append(kind(direction="bidirectional" if bidirectional else "forward",
                               **fields))
        except ValueError as error:
            raise UsageError(f"{label}: layer {k} ({prefix}*_l{k}): {error}") from None
    for key in keys:
        if key.startswith(prefix) and key not in used and key[len(prefix):].startswith(
                ("weight_", "bias_")):
            raise UsageError(f"{label}: {key} does not belong to layers 0..{len(layers) - 1} "
                             f"of the {kind.__name__}")
    try:
        network = Network(tuple(layers), source=label, format="state_dict",
                          entries=tuple(entries), writer=dict(state))
    except ValueError as error:
        raise UsageError(f"{label}: {error}") from None
    return network


def _torch_dtype(tensor):
    return str(tensor.dtype).removeprefix("torch.")


def save_state_dict(network, path):
    """``torch.save`` of a plain dict of tensors: the source's keys (every key, the RNN's
    with the network's values), each in its source dtype."""
    import torch
    state = dict(network.writer)
    for entry in network.entries:
        state[entry.name] = torch.tensor(entry.get(network.layers),
                                         dtype=getattr(torch, entry.dtype))
    torch.save(state, os.fspath(path))


# -- CNN graphs of torch.export --------------------------------------------

def _cnn_layer(label, op, args, params, where):
    """The layer of one aten op; ``args`` maps argument names to values, tensors as
    parameter names."""
    def pair(name, default):
        value = args.get(name, default)
        value = list(value) if isinstance(value, (list, tuple)) else [value]
        return tuple(value * 2 if len(value) == 1 else value)

    def tensor(name):
        key = args.get(name)
        return None if key is None else params[key]
    if op in ("conv2d", "_convolution"):
        if args.get("groups", 1) != 1 or args.get("transposed", False):
            raise UsageError(f"{label}: {where}: {op} with groups {args.get('groups')} or "
                             f"transposed: only groups=1 convolutions are supported")
        return Conv2d(tensor("weight"), tensor("bias"), stride=pair("stride", 1),
                      padding=pair("padding", 0), dilation=pair("dilation", 1))
    if op in ("relu", "relu_"):
        return ReLU()
    if op == "max_pool2d":
        if args.get("ceil_mode", False) or pair("dilation", 1) != (1, 1):
            raise UsageError(f"{label}: {where}: max_pool2d with ceil_mode or dilation: "
                             f"only ceil_mode=False, dilation 1 are supported")
        kernel = pair("kernel_size", 1)
        stride = pair("stride", []) if args.get("stride") else kernel
        return MaxPool2d(kernel, stride, pair("padding", 0))
    if op == "flatten":
        if args.get("start_dim", 0) != 1 or args.get("end_dim", -1) != -1:
            raise UsageError(f"{label}: {where}: flatten from dimension "
                             f"{args.get('start_dim', 0)} to {args.get('end_dim', -1)}: only "
                             f"nn.Flatten() (1 to -1) is supported")
        return Flatten()
    if op == "linear":
        return Linear(tensor("weight"), tensor("bias"))
    raise UsageError(f"{label}: {where}: operator {op} is not supported; a CNN is Conv2d, "
                     f"ReLU, MaxPool2d, Flatten and Linear")


def _cnn_network(label, ops, params, fmt, writer):
    """``ops``: ``[(op, args, where)]`` in order; ``params``: name -> (array, dtype)."""
    arrays = {name: _finite(label, name, value) for name, (value, _) in params.items()}
    layers, entries = [], []
    for op, args, where in ops:
        try:
            layer = _cnn_layer(label, op, args, arrays, where)
        except ValueError as error:
            raise UsageError(f"{label}: {where}: {error}") from None
        for field in layer.tensor_fields():
            name = args[field]
            entries.append(_field_entry(name, len(layers), field, params[name][1]))
        layers.append(layer)
    if not layers:
        raise UsageError(f"{label}: the graph has no layers")
    try:
        return Network(tuple(layers), source=label, format=fmt, entries=tuple(entries),
                       writer=writer)
    except ValueError as error:
        raise UsageError(f"{label}: {error}") from None


_EXPORT_DTYPES = {6: np.float16, 7: np.float32, 8: np.float64}


def _export_records(label):
    try:
        with zipfile.ZipFile(label) as archive:
            return {name: archive.read(name) for name in archive.namelist()}
    except (zipfile.BadZipFile, OSError) as error:
        raise UsageError(f"{label}: not a torch.export archive ({error})") from None


def load_export(path):
    """A CNN from a ``torch.export.save`` archive (``.pt2``), read as a zip (see the
    module); parameters named as the exported module's state_dict (``"0.weight"``)."""
    label = os.fspath(path)
    records = _export_records(label)
    models = [n for n in records if n.split("/")[-2:-1] == ["models"] and n.endswith(".json")]
    configs = [n for n in records if n.endswith("data/weights/model_weights_config.json")]
    if len(models) != 1 or len(configs) != 1:
        raise UsageError(f"{label}: not a torch.export archive of one model (models/*.json "
                         f"and data/weights/model_weights_config.json)")
    try:
        program = json.loads(records[models[0]])["graph_module"]
        weights = json.loads(records[configs[0]])["config"]
        specs = program["signature"]["input_specs"]
        nodes = program["graph"]["nodes"]
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{label}: malformed torch.export archive ({error!r})") from None
    base = configs[0].rsplit("/", 1)[0]
    placeholders, params = {}, {}
    for spec in specs:
        kind, body = next(iter(spec.items()))
        if kind in ("parameter", "buffer"):
            name = body.get("parameter_name", body.get("buffer_name"))
            placeholders[body["arg"]["name"]] = name
            params[name] = _export_weight(label, name, weights, records, base)
        elif kind != "user_input":
            raise UsageError(f"{label}: input {kind} is not supported (a CNN has "
                             f"parameters and one input)")
    ops = []
    for number, node in enumerate(nodes):
        target = node["target"]
        op = target.split(".")[-2] if target.startswith("torch.ops.aten.") else target
        args = {}
        for item in node["inputs"]:
            arg = item["arg"]
            kind, value = next(iter(arg.items()))
            if kind == "as_tensor":
                args[item["name"]] = placeholders.get(value["name"], value["name"])
            elif kind != "as_none":
                args[item["name"]] = value
        args = {("input" if name == "self" else name): value for name, value in args.items()}
        ops.append((op, args, f"graph node {number} ({target})"))
    return _cnn_network(label, ops, params, "export", records)


def _export_weight(label, name, weights, records, base):
    import torch
    info = weights.get(name)
    if info is None or f"{base}/{info['path_name']}" not in records:
        raise UsageError(f"{label}: no stored weight for parameter {name}")
    data = records[f"{base}/{info['path_name']}"]
    if info.get("use_pickle"):
        tensor = torch.load(io.BytesIO(data), weights_only=True)
        return _numpy(tensor), _torch_dtype(tensor)
    meta = info["tensor_meta"]
    dtype = _EXPORT_DTYPES.get(meta["dtype"])
    sizes = [s["as_int"] for s in meta["sizes"]]
    if dtype is None:
        raise UsageError(f"{label}: parameter {name} has dtype code {meta['dtype']}; "
                         f"float16, float32 and float64 are supported")
    count = int(np.prod(sizes))
    if len(data) != count * np.dtype(dtype).itemsize:
        raise UsageError(f"{label}: parameter {name} has {len(data)} bytes for shape "
                         f"{tuple(sizes)}")
    array = np.frombuffer(data, dtype=dtype).reshape(sizes).astype(np.float64)
    return array, np.dtype(dtype).name


def save_export(network, path):
    """A copy of the source archive with the weights' records replaced."""
    import torch
    records = dict(network.writer)
    config_name = next(n for n in records if n.endswith("data/weights/model_weights_config.json"))
    base = config_name.rsplit("/", 1)[0]
    weights = json.loads(records[config_name])["config"]
    for entry in network.entries:
        info = weights[entry.name]
        array = np.ascontiguousarray(entry.get(network.layers), dtype=entry.dtype)
        if info.get("use_pickle"):
            buffer = io.BytesIO()
            torch.save(torch.from_numpy(array), buffer)
            records[f"{base}/{info['path_name']}"] = buffer.getvalue()
        else:
            records[f"{base}/{info['path_name']}"] = array.tobytes()
    with zipfile.ZipFile(os.fspath(path), "w", zipfile.ZIP_STORED) as archive:
        for name, data in records.items():
            archive.writestr(name, data)



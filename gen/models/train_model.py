"""The whole model ``nnrtl train`` trains: the recurrent layers an engine runs and the
layers around them that the host runs, with every tensor of the file accounted for.

:func:`load_train_model` reads a model file into a :class:`TrainModel`:

* a PyTorch ``state_dict`` (``torch.save(module.state_dict())``): its RNN stacks (the
  prefixes of the keys ending in ``weight_ih_l0``) and at most one ``nn.Linear`` head
  reading the last stack's outputs (a module prefix with ``weight`` of shape
  ``(out_features, last hidden or proj size)`` and optionally ``bias``). Several stacks
  run one after another, in the file's key order, when each one's ``input_size`` is the
  previous one's output size (a tapered stack saved as ``nn.ModuleList([nn.GRU(1, 8),
  nn.GRU(8, 1)])``); otherwise, or to train one of them, ``prefix`` picks one (the
  stacks not picked are written back unchanged and listed in
  :attr:`TrainModel.unchanged`). A ``state_dict`` records no activations, so two
  ``Linear`` modules after the RNN, an embedding or any other tensor are refused,
  naming the keys: nothing is left untrained without the user saying so.
* a Keras model (``.keras`` archive, whole-model ``.h5``): its LSTM/GRU layers and at
  most one ``Dense`` after them (linear activation, reading every step of an RNN with
  ``return_sequences``), :func:`~.keras_io.load_keras_head`; anything else after the RNN
  is refused naming the layers.
* any other format :func:`~nnrtl.gen.models.load_network` reads: the network it
  reads. The ONNX reader refuses operators after the RNN itself (a ``Gemm``), and a CNN
  is run whole by its engine.

:func:`save_train_model` writes the model back in its source's format with the head's
tensors updated as well.
"""

import dataclasses
import os
from collections.abc import Mapping

from ..errors import UsageError
from .files import load_network, model_format, save_network
from .layers import Linear
from .network import Entry, Network

__all__ = ["TrainModel", "load_train_model", "save_train_model"]


@dataclasses.dataclass(frozen=True)
class TrainModel:
    """A model split between an engine and the host.

    Attributes
    ----------
    network : Network
        The layers the engine runs (an RNN stack, every chained stack's layers in order,
        or a CNN).
    head : Network or None
        ``Linear`` layers the host runs on the network's outputs (a
        :class:`~nnrtl.gen.models.Network` of :class:`~nnrtl.gen.models.Linear` layers,
        its entries named as the source file names them), or ``None``.
    stacks : tuple of str
        The key prefixes of the RNN stacks in :attr:`network`, in the order they run
        (``()`` for formats other than a ``state_dict``).
    unchanged : tuple of str
        Keys of the source file written back as they are: those of the RNN stacks that
        ``prefix`` did not pick.
    """

    network: Network
    head: Network | None = None
    stacks: tuple = ()
    unchanged: tuple = ()

    def placement(self):
        """``{"engine": [...], "host": [...], "unchanged": [...]}``: the layers the
        engine's trainer runs (its hardware part and the host part it owns, e.g. a CNN's
        Linear layers) and those :mod:`nnrtl.gen.train` runs on the host, each as
        ``"<layer> (<its tensors' names>)"``, and the keys written back unchanged."""
        def describe(network):
            names = {}
            for entry in network.entries:
                names.setdefault(_entry_layer(network, entry), []).append(entry.name)
            return [f"{_layer_text(layer)} ({', '.join(names.get(index, ['no tensors']))})"
                    for index, layer in enumerate(network.layers)]
        return {"engine": describe(self.network),
                "host": [] if self.head is None else describe(self.head),
                "unchanged": list(self.unchanged)}


def _entry_layer(network, entry):
    """The index of the layer whose field ``entry`` holds."""
    fields = {}
    entry.set(fields, entry.get(network.layers))
    return next(iter(fields))


def _layer_text(layer):
    kind = type(layer).__name__
    if isinstance(layer, Linear):
        return f"Linear({layer.in_features} -> {layer.out_features})"
    if hasattr(layer, "hidden_size"):
        return f"{kind}({layer.input_size} -> {layer.output_size})"
    return kind


def _shifted(entry, offset):
    """``entry`` of a stack whose layers start at ``offset`` of the merged network."""
    def get(layers):
        return entry.get(layers[offset:])

    def set_(fields, array):
        local = {}
        entry.set(local, array)
        for index, values in local.items():
            fields.setdefault(index + offset, {}).update(values)
    return Entry(entry.name, get, set_, entry.dtype)


def _linear_entry(name, field, dtype):
    def get(layers):
        return getattr(layers[0], field)

    def set_(fields, array):
        fields.setdefault(0, {})[field] = array
    return Entry(name, get, set_, dtype)


def _prefixes(state):
    """The RNN stacks' key prefixes, in the file's key order."""
    return [key[:-len("weight_ih_l0")] for key in state
            if isinstance(key, str) and key.endswith("weight_ih_l0")]


def _rnn_keys(state, prefix):
    return [key for key in state if isinstance(key, str) and key.startswith(prefix)
            and key[len(prefix):].startswith(("weight_", "bias_"))]


def _head(state, label, leftover, features, inputs):
    """The ``Linear`` module among ``leftover`` keys reading ``features`` values, as a
    one-layer Network, or None. A ``weight`` alone whose rows are also ``inputs`` long
    (the RNN's input size) may as well be an embedding in front: it is no head."""
    import torch

    from .torch_io import _torch_dtype

    modules = {}
    for key in leftover:
        if not isinstance(key, str):
            continue
        module, _, name = key.rpartition(".")
        modules.setdefault(module, {})[name] = key
    for module, names in modules.items():
        if set(names) not in ({"weight"}, {"weight", "bias"}):
            continue
        weight = state[names["weight"]]
        bias = state.get(names.get("bias"))
        if not (isinstance(weight, torch.Tensor) and weight.dtype.is_floating_point
                and weight.ndim == 2 and weight.shape[1] == features):
            continue
        if bias is None and features == inputs:
            continue
        if bias is not None and not (isinstance(bias, torch.Tensor)
                                     and bias.dtype.is_floating_point
                                     and tuple(bias.shape) == tuple(weight.shape[:1])):
            continue
        arrays = {field: state[key].detach().cpu().double().numpy()
                  for field, key in names.items()}
        try:
            layer = Linear(**arrays)
        except ValueError as error:
            raise UsageError(f"{label}: {module}: {error}") from None
        entries = tuple(_linear_entry(key, field, _torch_dtype(state[key]))
                        for field, key in names.items())
        return Network((layer,), source=label, format="state_dict", entries=entries)
    return None


def _stack(state, label, prefix):
    from .torch_io import load_state_dict
    return load_state_dict(state, prefix=prefix, label=label)


def _merge(stacks, label, state):
    """One Network running ``stacks`` (``[(prefix, Network)]``) one after another."""
    layers, entries = [], []
    for _, network in stacks:
        entries += [_shifted(entry, len(layers)) for entry in network.entries]
        layers += network.layers
    return Network(tuple(layers), source=label, format="state_dict", entries=tuple(entries),
                   writer=dict(state))


def _check_chain(stacks, label, prefixes):
    for (before, first), (after, second) in zip(stacks, stacks[1:]):
        gives, takes = first.layers[-1].output_size, second.layers[0].input_size
        if gives != takes:
            listed = ", ".join(map(repr, prefixes))
            raise UsageError(f"{label}: several RNNs ({listed}) that do not chain: "
                             f"{after!r} takes {takes} features, {before!r} gives {gives}; "
                             f"pick one with --prefix (e.g. --prefix {prefixes[0]})")


def _load_state_dict_model(path, prefix):
    from .torch_io import _torch_load

    label = os.fspath(path)
    state = _torch_load(label)
    if not isinstance(state, Mapping):
        raise UsageError(f"{label}: holds a {type(state).__name__}, not a state_dict")
    prefixes = _prefixes(state)
    if prefix is not None and prefix not in prefixes:
        found = ", ".join(map(repr, prefixes)) or "none"
        raise UsageError(f"--prefix {prefix!r}: {label} has no key {prefix}weight_ih_l0; "
                         f"its RNNs are at the prefixes: {found}")
    if not prefixes:
        _stack(state, label, None)           # raises: no RNN
    chosen = [prefix] if prefix is not None else prefixes
    stacks = [(p, _stack(state, label, p)) for p in chosen]
    _check_chain(stacks, label, prefixes)
    network = _merge(stacks, label, state)
    used = {entry.name for entry in network.entries}
    unchanged = sorted({key for p in prefixes if p not in chosen
                        for key in _rnn_keys(state, p)} - used)
    leftover = [key for key in state if key not in used and key not in unchanged]
    head = _head(state, label, leftover, network.layers[-1].output_size,
                 network.layers[0].input_size)
    if head is not None:
        leftover = [key for key in leftover
                    if key not in {entry.name for entry in head.entries}]
    if leftover:
        features = network.layers[-1].output_size
        raise UsageError(f"{label}: {', '.join(map(str, leftover))} "
                         f"{'is' if len(leftover) == 1 else 'are'} neither an RNN stack "
                         f"({', '.join(map(repr, chosen))}) nor one nn.Linear reading its "
                         f"{features} outputs: nnrtl train would leave "
                         f"{'it' if len(leftover) == 1 else 'them'} untrained")
    return TrainModel(network, head, tuple(chosen), tuple(unchanged))


def load_train_model(path, *, prefix=None):
    """Read a model file for training (see the module).

    Parameters
    ----------
    path : path
        Any format :func:`~nnrtl.gen.models.load_network` reads.
    prefix : str, optional
        The key prefix of the one RNN stack of a ``state_dict`` to train (``--prefix``).

    Returns
    -------
    TrainModel

    Raises
    ------
    UsageError
        ``prefix`` for a format other than a ``state_dict``, or naming no stack; several
        stacks that do not chain and no ``prefix``; keys that are neither an RNN stack
        nor its ``Linear`` head (naming them); every error of the format's reader.
    """
    if prefix is not None and not isinstance(prefix, str):
        raise TypeError(f"prefix must be a string, not {prefix!r}")
    kind = model_format(path) if os.path.exists(path) else None
    if kind == "state_dict":
        return _load_state_dict_model(path, prefix)
    if prefix is not None:
        raise UsageError(f"--prefix picks an RNN of a PyTorch state_dict; "
                         f"{os.fspath(path)} is not one")
    if kind in ("keras", "hdf5"):
        from .keras_io import load_keras, load_keras_head
        head = load_keras_head(path)
        return TrainModel(load_keras(path, ignore_trailing=head is not None), head)
    return TrainModel(load_network(path))


def save_train_model(model, path):
    """Write ``model`` in its source's format: the network's tensors and the head's, every
    other key of the source as it was."""
    network = model.network
    if model.head is not None and network.format == "keras":
        save_network(network, path)
        kind, _ = network.writer
        save_network(dataclasses.replace(model.head, writer=(kind, os.fspath(path))), path)
        return
    if model.head is not None:
        import torch

        state = dict(network.writer)
        for entry in model.head.entries:
            state[entry.name] = torch.tensor(entry.get(model.head.layers),
                                             dtype=getattr(torch, entry.dtype))
        network = dataclasses.replace(network, writer=state)
    save_network(network, path)

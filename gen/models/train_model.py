"""The whole model ``nnrtl train`` trains: the recurrent layers an engine runs and the
layers around them that the host runs, with every tensor of the file accounted for.

:func:`load_train_model` reads a model file into a :class:`TrainModel`:

* a PyTorch ``state_dict`` (``torch.save(module.state_dict())``): its RNN stacks (the
  prefixes of the keys ending in ``weight_ih_l0``), at most one ``nn.Embedding`` feeding
  the first stack (a module prefix with ``weight`` alone, floating point, of shape
  ``(num_embeddings, first stack's input_size)``: :class:`Embedding`) and at most one
  ``nn.Linear`` head reading the last stack's outputs (a module prefix with ``weight`` of
  shape ``(out_features, last hidden or proj size)`` and optionally ``bias``). Several
  stacks run one after another, in the file's key order, when each one's ``input_size``
  is the previous one's output size (a tapered stack saved as ``nn.ModuleList([nn.GRU(1,
  8), nn.GRU(8, 1)])``); otherwise, or to train one of them, ``prefix`` picks one (the
  stacks not picked are written back unchanged and listed in
  :attr:`TrainModel.unchanged`). A ``state_dict`` records no activations, so two
  ``Linear`` modules after the RNN, a bias-free ``weight`` that may be the embedding or
  the head (the RNN's input and output equally wide, no head with a bias beside it) or
  any other tensor are refused, naming the keys: nothing is left untrained without the
  user saying so.
* a Keras model (``.keras`` archive, whole-model ``.h5``): its LSTM/GRU layers and at
  most one ``Dense`` after them (linear activation, reading every step of an RNN with
  ``return_sequences``), :func:`~.keras_io.load_keras_head`, and at most one
  ``Embedding`` before them (:func:`~.keras_io.load_keras_embedding`); anything else
  after the RNN is refused naming the layers.
* an ONNX graph: its RNN stack and the ``Linear`` layers after it (``Gemm``, or ``MatMul``
  and ``Add``) as the head (:func:`~.onnx_io.load_onnx` with ``head``);
* any other format :func:`~nnrtl.gen.models.load_network` reads: the network it
  reads; a CNN is run whole by its engine.

:func:`save_train_model` writes the model back in its source's format with the head's
and the embedding's tensors updated as well.
"""

import dataclasses
import os
from collections.abc import Mapping

import numpy as np

from ..errors import UsageError
from .files import check_finite, load_network, model_format, save_network
from .layers import Linear
from .network import Entry, Network

__all__ = ["Embedding", "TrainModel", "load_train_model", "save_train_model"]


@dataclasses.dataclass(frozen=True, eq=False)
class Embedding:
    """An ``nn.Embedding`` in front of the RNN, run and trained on the host: token id
    ``k`` of the inputs gives row ``k`` of :attr:`weight` as the RNN's input vector.

    Attributes
    ----------
    key : str
        The ``state_dict`` key of its weight (e.g. ``"embed.weight"``).
    weight : ndarray
        float64, ``num_embeddings x embedding_dim`` (the first RNN layer's
        ``input_size``).
    dtype : str
        The file's dtype of the weight (``"float32"``), which it is written back in.
    """

    key: str
    weight: np.ndarray
    dtype: str = "float32"

    def __post_init__(self):
        weight = self.weight
        if not (isinstance(weight, np.ndarray) and weight.ndim == 2 and 0 not in weight.shape):
            raise TypeError(f"weight must be a non-empty 2-D array, not {weight!r}")

    @property
    def num_embeddings(self):
        return self.weight.shape[0]

    @property
    def embedding_dim(self):
        return self.weight.shape[1]

    def with_weight(self, weight):
        """The same embedding with ``weight`` (float64, the same shape)."""
        weight = np.asarray(weight, dtype=np.float64)
        if weight.shape != self.weight.shape:
            raise ValueError(f"{self.key}: weight of shape {weight.shape}, not "
                             f"{self.weight.shape}")
        return dataclasses.replace(self, weight=weight)

    def lookup(self, tokens):
        """The RNN's inputs for the token ids ``tokens`` (integers, ``T x B``): the rows
        they read, ``T x B x embedding_dim`` float64."""
        return self.weight[np.asarray(tokens)]

    def sgd_step(self, tokens, grad_inputs, lr):
        """The embedding after PyTorch's own ``torch.optim.SGD`` step on its gradient: the
        gradient at the RNN's inputs (``grad_inputs``, ``T x B x embedding_dim``) summed
        into the rows the token ids ``tokens`` read (the backward pass of
        ``torch.nn.functional.embedding``, float64).

        Raises
        ------
        ValueError
            ``grad_inputs`` not of the inputs' shape.
        """
        import torch

        grad = np.asarray(grad_inputs, dtype=np.float64)
        shape = tuple(np.shape(tokens)) + (self.embedding_dim,)
        if grad.shape != shape:
            raise ValueError(f"the gradient at the RNN's inputs has shape {grad.shape}, "
                             f"not {shape}")
        weight = torch.tensor(self.weight, requires_grad=True)
        torch.nn.functional.embedding(torch.as_tensor(np.asarray(tokens)), weight).backward(
            torch.tensor(grad))
        torch.optim.SGD([weight], lr=lr).step()
        return self.with_weight(weight.detach().numpy())


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
    embedding : Embedding or None
        The embedding the host runs in front of :attr:`network` (its inputs are then
        token ids), or ``None``.
    """

    network: Network
    head: Network | None = None
    stacks: tuple = ()
    unchanged: tuple = ()
    embedding: Embedding | None = None

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
        host = [] if self.embedding is None else [
            f"Embedding({self.embedding.num_embeddings} -> {self.embedding.embedding_dim}) "
            f"({self.embedding.key})"]
        return {"engine": describe(self.network),
                "host": host + ([] if self.head is None else describe(self.head)),
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


def _modules(keys):
    """``{module prefix: {tensor name: key}}`` of ``keys``."""
    modules = {}
    for key in keys:
        if isinstance(key, str):
            module, _, name = key.rpartition(".")
            modules.setdefault(module, {})[name] = key
    return modules


def _float_matrix(tensor):
    import torch
    return (isinstance(tensor, torch.Tensor) and tensor.dtype.is_floating_point
            and tensor.ndim == 2 and 0 not in tensor.shape)


def _head(state, label, modules, features, inputs):
    """``(module, Network)``: the ``Linear`` module among ``modules`` reading ``features``
    values, as a one-layer Network, or ``(None, None)``. A ``weight`` alone whose rows are
    also ``inputs`` long (the RNN's input size) may as well be an embedding in front: it
    is no head."""
    import torch

    from .torch_io import _torch_dtype

    for module, names in modules.items():
        if set(names) not in ({"weight"}, {"weight", "bias"}):
            continue
        weight = state[names["weight"]]
        bias = state.get(names.get("bias"))
        if not (_float_matrix(weight) and weight.shape[1] == features):
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
        return module, Network((layer,), source=label, format="state_dict", entries=entries)
    return None, None


def _embedding_keys(state, modules, inputs):
    """The keys among ``modules`` that may be an ``nn.Embedding`` giving ``inputs``
    values: a floating-point ``weight`` alone, ``inputs`` wide."""
    return [names["weight"] for names in modules.values() if set(names) == {"weight"}
            and _float_matrix(state[names["weight"]])
            and state[names["weight"]].shape[1] == inputs]


def _embedding(state, label, key):
    from .torch_io import _torch_dtype

    weight = state[key].detach().cpu().double().numpy()
    if not np.all(np.isfinite(weight)):
        raise UsageError(f"{label}: {key} has NaN or infinite values")
    return Embedding(key, weight, _torch_dtype(state[key]))


def _host_layers(state, label, leftover, features, inputs):
    """``(head, embedding)`` among the ``leftover`` keys (each or both None); a bias-free
    weight that may be either is refused naming its keys."""
    modules = _modules(leftover)
    module, head = _head(state, label, modules, features, inputs)
    candidates = _embedding_keys(state, {m: names for m, names in modules.items()
                                         if m != module}, inputs)
    if head is None and features == inputs and candidates:
        raise UsageError(f"{label}: {', '.join(candidates)}: a bias-free weight {inputs} "
                         f"wide may be an nn.Embedding in front of the RNN or an nn.Linear "
                         f"head after it (the RNN takes and gives {inputs} features): "
                         f"nnrtl train cannot tell which from a state_dict")
    return head, None if not candidates else _embedding(state, label, candidates[0])


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
    features, inputs = network.layers[-1].output_size, network.layers[0].input_size
    head, embedding = _host_layers(state, label, leftover, features, inputs)
    taken = set() if head is None else {entry.name for entry in head.entries}
    taken |= set() if embedding is None else {embedding.key}
    leftover = [key for key in leftover if key not in taken]
    if leftover:
        raise UsageError(f"{label}: {', '.join(map(str, leftover))} "
                         f"{'is' if len(leftover) == 1 else 'are'} neither an RNN stack "
                         f"({', '.join(map(repr, chosen))}), one nn.Linear reading its "
                         f"{features} outputs nor one nn.Embedding giving its {inputs} "
                         f"inputs: nnrtl train would leave "
                         f"{'it' if len(leftover) == 1 else 'them'} untrained")
    return TrainModel(network, head, tuple(chosen), tuple(unchanged), embedding)


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
        stacks that do not chain and no ``prefix``; keys that are neither an RNN stack,
        its ``Linear`` head nor its ``Embedding`` (naming them); a bias-free weight that
        may be the head or the embedding; every error of the
        format's reader.
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
        from .keras_io import load_keras, load_keras_embedding, load_keras_head
        head, embedding = load_keras_head(path), load_keras_embedding(path)
        network = load_keras(path, ignore_trailing=head is not None, embedding=True)
        return TrainModel(network, head, embedding=embedding)
    if kind == "onnx":
        from .onnx_io import load_onnx
        network, head = load_onnx(path, head=True)
        return TrainModel(network, head)
    return TrainModel(load_network(path))


def _check_embedding(network, embedding):
    if embedding is not None and not np.all(np.isfinite(embedding.weight)):
        raise UsageError(f"{network.source}: parameter {embedding.key} has NaN or infinite "
                         f"values; nothing written")


def save_train_model(model, path):
    """Write ``model`` in its source's format: the network's tensors, the head's and the
    embedding's, every other key of the source as it was.

    Raises
    ------
    UsageError
        NaN or infinite weights (nothing is written), every error of
        :func:`~nnrtl.gen.models.save_network`.
    """
    network, embedding = model.network, model.embedding
    if model.head is not None and network.format == "onnx":
        from .onnx_io import save_onnx
        for part in (network, model.head):
            check_finite(part)
        save_onnx(network, path, also=(model.head,))
        return
    if network.format == "keras" and (model.head is not None or embedding is not None):
        from .keras_io import overwrite_datasets
        for part in (network, model.head):
            if part is not None:
                check_finite(part)
        _check_embedding(network, embedding)
        save_network(network, path)
        kind, _ = network.writer
        if model.head is not None:
            save_network(dataclasses.replace(model.head, writer=(kind, os.fspath(path))), path)
        if embedding is not None:
            overwrite_datasets((kind, os.fspath(path)), {embedding.key: embedding.weight})
        return
    if model.head is not None or embedding is not None:
        import torch

        state = dict(network.writer)
        for entry in () if model.head is None else model.head.entries:
            state[entry.name] = torch.tensor(entry.get(model.head.layers),
                                             dtype=getattr(torch, entry.dtype))
        if embedding is not None:
            _check_embedding(network, embedding)
            state[embedding.key] = torch.tensor(embedding.weight,
                                                dtype=getattr(torch, embedding.dtype))
        network = dataclasses.replace(network, writer=state)
    save_network(network, path)

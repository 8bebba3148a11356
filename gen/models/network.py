"""A :class:`Network`: ordered layers, the file they came from and how the file names and
lays out each tensor (its :class:`Entry` list), so that a trained network is written back
in the format it was read from."""

import dataclasses

import numpy as np

from ..errors import UsageError
from .layers import (RNN_LAYERS, Conv2d, Dropout, Flatten, Linear, LocalResponseNorm,
                     MaxPool2d, ReLU, Sigmoid, Softmax, Tanh)

__all__ = ["Entry", "Network", "ModelSpec", "default_entries", "FORMATS"]

#: Formats of :attr:`Network.format`.
FORMATS = ("state_dict", "torchscript", "export", "onnx", "keras", "")
_CNN_LAYERS = (Conv2d, ReLU, MaxPool2d, Flatten, Linear, LocalResponseNorm, Dropout,
               Softmax, Tanh, Sigmoid)


@dataclasses.dataclass(frozen=True, eq=False)
class Entry:
    """One tensor of the source file.

    Attributes
    ----------
    name : str
        As the file names it (state_dict key, ONNX initializer, Keras weight path, ...).
    get : callable
        ``get(layers) -> ndarray``: the tensor in the file's layout, float64.
    set : callable
        ``set(fields, array)``: stores what ``array`` means into ``fields``, a dict of
        layer index to a dict of layer field to array.
    dtype : numpy dtype
        The file's dtype, used when writing.
    """

    name: str
    get: object
    set: object
    dtype: object = np.float32


def _field_entry(name, index, field, dtype=np.float32):
    def get(layers):
        return getattr(layers[index], field)

    def set_(fields, array):
        fields.setdefault(index, {})[field] = array
    return Entry(name, get, set_, dtype)


def default_entries(layers):
    """Entries named as PyTorch would: ``weight_ih_l{k}[_reverse]`` for stacked RNN layers
    (``nn.LSTM(num_layers=...)``'s keys), ``{k}.weight`` for others (``nn.Sequential``)."""
    entries = []
    for index, layer in enumerate(layers):
        for field in layer.tensor_fields():
            if isinstance(layer, RNN_LAYERS):
                name = f"{field.removesuffix('_reverse')}_l{index}" + \
                    ("_reverse" if field.endswith("_reverse") else "")
            else:
                name = f"{index}.{field}"
            entries.append(_field_entry(name, index, field, np.float64))
    return tuple(entries)


def apply_entries(layers, entries, arrays):
    """``layers`` with the tensors of ``arrays`` (entry name -> array in the file's
    layout) put in place."""
    fields = {}
    for entry in entries:
        if entry.name in arrays:
            entry.set(fields, np.asarray(arrays[entry.name], dtype=np.float64))
    return tuple(dataclasses.replace(layer, **fields[index]) if index in fields else layer
                 for index, layer in enumerate(layers))


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """The shape of a stacked RNN, what the SBE's design-space exploration needs.

    Attributes
    ----------
    input_size, hidden_size, layers : int
        ``hidden_size`` is the largest layer's.
    hidden_sizes : tuple of int
        Each layer's hidden size when they differ (``layers`` entries, the largest
        ``hidden_size``), else ``()``: as :class:`~nnrtl.hw.sbe.SbeConfig`'s.
    """

    input_size: int
    hidden_size: int
    layers: int
    hidden_sizes: tuple[int, ...] = ()

    def __post_init__(self):
        for name in ("input_size", "hidden_size", "layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        sizes = self.hidden_sizes
        if not isinstance(sizes, (tuple, list)) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in sizes):
            raise TypeError(f"hidden_sizes must be a tuple of positive integers, not "
                            f"{sizes!r}")
        object.__setattr__(self, "hidden_sizes", tuple(sizes))
        if sizes and len(sizes) != self.layers:
            raise ValueError(f"hidden_sizes {tuple(sizes)} must have one size per layer: "
                             f"layers is {self.layers}; set layers={len(sizes)}")
        if sizes and max(sizes) != self.hidden_size:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be the largest of "
                             f"hidden_sizes {tuple(sizes)}; set hidden_size={max(sizes)}")

    @property
    def layer_hidden_sizes(self):
        """Every layer's hidden size."""
        return self.hidden_sizes or (self.hidden_size,) * self.layers


@dataclasses.dataclass(frozen=True, eq=False)
class Network:
    """Ordered layers: a stack of RNN layers (:class:`LSTM`, :class:`GRU`), or a CNN
    (:class:`Conv2d`, :class:`ReLU`, :class:`MaxPool2d`, :class:`Flatten`,
    :class:`Linear`, :class:`LocalResponseNorm`, :class:`Dropout`, and the activations
    :class:`Softmax`, :class:`Tanh`, :class:`Sigmoid`).

    Attributes
    ----------
    layers : tuple
    source : str
        The file the network was read from ("" when built by hand).
    format : str
        One of :data:`FORMATS` ("" when built by hand).
    entries : tuple of Entry
        The source file's tensors (by default :func:`default_entries`).
    writer : object
        What :func:`~nnrtl.gen.models.save_network` needs of the source (format specific).
    return_sequences : bool
        Whether the model's output is every step's (Keras' ``return_sequences`` of the
        last RNN layer; informative).
    input_shape : tuple or None
        The input's shape as the file states it (an ONNX graph input's static dimensions,
        ``None`` for a dynamic one), where the format has one.
    """

    layers: tuple
    source: str = ""
    format: str = ""
    entries: tuple = None
    writer: object = dataclasses.field(default=None, repr=False)
    return_sequences: bool = True
    input_shape: tuple | None = None

    def __post_init__(self):
        layers = tuple(self.layers)
        object.__setattr__(self, "layers", layers)
        if not layers:
            raise ValueError("a Network needs at least one layer")
        for n, layer in enumerate(layers):
            if not isinstance(layer, RNN_LAYERS + _CNN_LAYERS):
                raise TypeError(f"layers[{n}] must be a layer of nnrtl.gen.models, not "
                                f"{layer!r}")
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, not {self.format!r}")
        rnn = [isinstance(layer, RNN_LAYERS) for layer in layers]
        if any(rnn) and not all(rnn):
            raise ValueError("a Network is either a stack of LSTM/GRU layers or a CNN, not "
                             "a mix")
        if all(rnn):
            for n in range(1, len(layers)):
                if layers[n].input_size != layers[n - 1].output_size:
                    raise ValueError(f"layers[{n}] has input_size {layers[n].input_size}, "
                                     f"but layers[{n - 1}] outputs "
                                     f"{layers[n - 1].output_size} features")
        else:
            convs = [(n, l) for n, l in enumerate(layers) if isinstance(l, Conv2d)]
            for (a, first), (b, second) in zip(convs, convs[1:]):
                if second.in_channels != first.out_channels:
                    raise ValueError(f"layers[{b}] has {second.in_channels} input channels, "
                                     f"but layers[{a}] outputs {first.out_channels}")
        if self.entries is None:
            object.__setattr__(self, "entries", default_entries(layers))

    @property
    def is_rnn(self):
        return isinstance(self.layers[0], RNN_LAYERS)

    @property
    def spec(self):
        """The :class:`ModelSpec` of a stack of RNN layers (``hidden_sizes`` set when the
        layers' hidden sizes differ)."""
        if not self.is_rnn:
            raise ValueError("spec needs a stack of RNN layers")
        sizes = tuple(int(layer.hidden_size) for layer in self.layers)
        return ModelSpec(int(self.layers[0].input_size), max(sizes), len(sizes),
                         hidden_sizes=sizes if len(set(sizes)) > 1 else ())

    def forward(self, x, states=None, *, lengths=None, trace=None):
        """The float64 reference forward (:func:`~nnrtl.gen.models.forward`)."""
        from .reference import forward
        return forward(self, x, states, lengths=lengths, trace=trace)

    def parameters(self):
        """``{name: array}``: every tensor as the source file names and lays it out
        (float64 copies)."""
        return {entry.name: np.array(entry.get(self.layers), dtype=np.float64)
                for entry in self.entries}

    def with_parameters(self, arrays):
        """A new Network with some or all tensors of :meth:`parameters` replaced.

        Raises
        ------
        UsageError
            A name the network does not have, a shape other than the current one, NaN or
            infinite values.
        """
        current = self.parameters()
        for name, value in arrays.items():
            if name not in current:
                raise UsageError(f"{self.source or 'network'}: no parameter {name!r}; the "
                                 f"parameters are {', '.join(current)}")
            value = np.asarray(value)
            if value.shape != current[name].shape:
                raise UsageError(f"{self.source or 'network'}: parameter {name} has shape "
                                 f"{current[name].shape}, not {value.shape}")
            if not np.all(np.isfinite(value)):
                raise UsageError(f"{self.source or 'network'}: parameter {name} has NaN or "
                                 f"infinite values")
        return dataclasses.replace(self, layers=apply_entries(self.layers, self.entries,
                                                              arrays))

    def with_layers(self, layers):
        """A new Network with ``layers`` (same types and shapes), the same source."""
        layers = tuple(layers)
        if [type(l) for l in layers] != [type(l) for l in self.layers]:
            raise ValueError("with_layers needs layers of the same types")
        new = dataclasses.replace(self, layers=layers)
        for a, b in zip(self.parameters().items(), new.parameters().items()):
            if a[1].shape != b[1].shape:
                raise ValueError(f"parameter {a[0]} has shape {a[1].shape}, not {b[1].shape}")
        return new

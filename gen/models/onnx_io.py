"""ONNX graphs: stacked ``LSTM``/``GRU`` operators, and CNNs of ``Conv`` (grouped too),
``Relu``, ``MaxPool`` (its end padding may differ from its start's), ``LRN``,
``Dropout``, ``Flatten`` (or a 2-D ``Reshape`` as flatten), ``Gemm`` and ``MatMul`` +
``Add``, ``Softmax``; read with the ``onnx`` package (protobuf, no code). Weights are
initializers, or tensors a ``ConstantOfShape`` fills (read; :func:`save_onnx` refuses to
write them back).

The data path is followed from the graph's one input: each node reading the current value
is a layer or glue (``Transpose`` with perm ``[0, 2, 1, 3]``, ``Reshape`` and ``Squeeze``
around an RNN's ``Y``, ``Identity``); nodes off the path (e.g. ``Concat`` of the final
states) are ignored. ``torch.onnx.export`` (dynamo) writes an ``nn.LSTM`` as one ``LSTM``
node per layer with initializers ``W``, ``R``, ``B`` and zero ``initial_h``/``initial_c``,
then ``Transpose`` + ``Reshape``.

Gate orders: ``LSTM`` W/R/B blocks i, o, f, c (canonical i, f, g, o), peepholes ``P``
i, o, f (canonical i, f, o); ``GRU`` z, r, h (canonical r, z, n), either
``linear_before_reset``. ``B`` is ``[Wb, Rb]``: ``bias_ih`` and ``bias_hh``. Either
``layout`` (the data's order in the graph; the weights, and so the layer, are the same,
and nnrtl's inputs are time first whatever the file's), default activations, no ``clip``;
``sequence_lens`` as a graph input (each run's lengths: ``nnrtl train --lengths``,
:mod:`.sequences`; every sequence its full length without them) or a constant equal to
every sequence's full length (the graph input's time dimension). After an RNN stack, a head of ``Linear`` layers (``Gemm``, or
``MatMul`` and ``Add``, as the exporter writes an ``nn.Linear`` on a sequence) and
activations (``Relu``, ``Tanh``, ``Sigmoid``, ``Softmax`` over the features) is read apart
(:func:`load_onnx` with ``head``).
"""

import copy
import os

import numpy as np

from ..errors import UsageError
from .layers import (GRU, LSTM, Conv2d, Dropout, Flatten, Linear, LocalResponseNorm, MaxPool2d,
                     ReLU, Sigmoid, Softmax, Tanh)
from .network import Entry, Network

__all__ = ["load_onnx", "save_onnx"]

#: Canonical gate blocks from ONNX's (``canonical = onnx[order]``) and back; ``"peep"``
#: the LSTM's peepholes (ONNX i, o, f; canonical i, f, o).
_FROM_ONNX = {LSTM: [0, 2, 3, 1], GRU: [1, 0, 2], "peep": [0, 2, 1]}
_TO_ONNX = {LSTM: [0, 3, 1, 2], GRU: [1, 0, 2], "peep": [0, 2, 1]}
#: Operators of a head after an RNN stack: Linear layers and activations.
_HEAD_OPS = ("Gemm", "MatMul", "Add", "Relu", "Tanh", "Sigmoid", "Softmax")
_RNN_DEFAULTS = {"activation_alpha": None, "activation_beta": None, "clip": None,
                 "input_forget": 0}


def _blocks(array, order, gates):
    blocks = np.split(np.asarray(array), gates, axis=0)
    return np.concatenate([blocks[i] for i in order], axis=0)


def _rnn_entry(name, index, kind, field, directions, dtype):
    """W, R (``field`` weight_ih/weight_hh), B (``field`` "bias") or P (``field``
    weight_peep) of an RNN node."""
    suffixes = ("", "_reverse")[:directions]
    if field == "weight_peep":
        return _peep_entry(name, index, suffixes, dtype)

    def get(layers):
        layer = layers[index]
        if field == "bias":
            return np.stack([np.concatenate([
                _blocks(getattr(layer, "bias_ih" + s), _TO_ONNX[kind], kind.GATES),
                _blocks(getattr(layer, "bias_hh" + s), _TO_ONNX[kind], kind.GATES)])
                for s in suffixes])
        return np.stack([_blocks(getattr(layer, field + s), _TO_ONNX[kind], kind.GATES)
                         for s in suffixes])

    def set_(fields, array):
        target = fields.setdefault(index, {})
        for d, s in enumerate(suffixes):
            if field == "bias":
                wb, rb = np.split(array[d], 2)
                target["bias_ih" + s] = _blocks(wb, _FROM_ONNX[kind], kind.GATES)
                target["bias_hh" + s] = _blocks(rb, _FROM_ONNX[kind], kind.GATES)
            else:
                target[field + s] = _blocks(array[d], _FROM_ONNX[kind], kind.GATES)
    return Entry(name, get, set_, dtype)


def _peep_entry(name, index, suffixes, dtype):
    def get(layers):
        return np.stack([_blocks(getattr(layers[index], "weight_peep" + s), _TO_ONNX["peep"],
                                 3) for s in suffixes])

    def set_(fields, array):
        target = fields.setdefault(index, {})
        for d, s in enumerate(suffixes):
            target["weight_peep" + s] = _blocks(array[d], _FROM_ONNX["peep"], 3)
    return Entry(name, get, set_, dtype)


def _plain_entry(name, index, field, dtype, transpose=False):
    def get(layers):
        value = getattr(layers[index], field)
        return value.T if transpose else value

    def set_(fields, array):
        fields.setdefault(index, {})[field] = array.T if transpose else array
    return Entry(name, get, set_, dtype)


class _Reader:
    def __init__(self, path):
        import onnx
        from onnx import numpy_helper
        self.label = os.fspath(path)
        try:
            self.model = onnx.load(self.label)
        except Exception as error:          # DecodeError, OSError, ValidationError ...
            raise UsageError(f"{self.label}: not an ONNX model ({type(error).__name__}: "
                             f"{error})") from None
        graph = self.model.graph
        self.arrays, self.dtypes = {}, {}
        for tensor in graph.initializer:
            value = numpy_helper.to_array(tensor)
            self.dtypes[tensor.name] = value.dtype
            self.arrays[tensor.name] = value
        self.producers = {output: node for node in graph.node for output in node.output}
        self.inputs = {value.name for value in graph.input}
        data = [value for value in graph.input if value.name not in self.dtypes]
        # the data input's static dimensions (None where dynamic)
        dims = data[0].type.tensor_type.shape.dim if len(data) == 1 else ()
        self.input_dims = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        #: Tensors a ``ConstantOfShape`` node fills (the onnx package's "light" model zoo
        #: files give their weights so): read as weights, never written back.
        self.filled = set()
        for node in graph.node:
            if node.op_type == "Constant" and len(node.output) == 1:
                for attribute in node.attribute:
                    if attribute.name == "value":
                        self.arrays[node.output[0]] = numpy_helper.to_array(attribute.t)
            elif node.op_type == "ConstantOfShape" and node.input[0] in self.arrays:
                fill = {a.name: numpy_helper.to_array(a.t) for a in node.attribute}.get(
                    "value", np.zeros(1, np.float32))
                value = np.full(tuple(int(d) for d in self.arrays[node.input[0]]),
                                fill.reshape(-1)[0], fill.dtype)
                self.arrays[node.output[0]] = value
                self.dtypes[node.output[0]] = value.dtype
                self.filled.add(node.output[0])
        self.attribute = onnx.helper.get_attribute_value

    def where(self, number, node):
        return f"node {number} ({node.op_type} {node.name!r})"

    def attributes(self, node):
        return {a.name: self.attribute(a) for a in node.attribute}

    def weight(self, name, where, used=True):
        if name not in self.arrays or name not in self.dtypes:
            raise UsageError(f"{self.label}: {where}: input {name!r} is not an initializer; "
                             f"weights must be constant initializers")
        value = np.asarray(self.arrays[name], dtype=np.float64) \
            if np.issubdtype(self.dtypes[name], np.floating) else None
        if value is None:
            raise UsageError(f"{self.label}: {where}: initializer {name} is "
                             f"{self.dtypes[name]}, not floating point")
        if not np.all(np.isfinite(value)):
            raise UsageError(f"{self.label}: initializer {name} has NaN or infinite values")
        return value


def _rnn(reader, number, node, index, layers, entries):
    where = reader.where(number, node)
    kind = LSTM if node.op_type == "LSTM" else GRU
    attrs = reader.attributes(node)
    for name, default in _RNN_DEFAULTS.items():
        if name in attrs and attrs[name] != default:
            raise UsageError(f"{reader.label}: {where}: attribute {name}={attrs[name]!r} is "
                             f"not supported (only {default!r})")
    if "activations" in attrs:
        wanted = [b"Sigmoid", b"Tanh", b"Tanh"][:3 if kind is LSTM else 2]
        if list(attrs["activations"])[:len(wanted)] != wanted:
            raise UsageError(f"{reader.label}: {where}: activations {attrs['activations']} "
                             f"are not supported (only the defaults)")
    layout = attrs.get("layout", 0)
    if layout not in (0, 1):
        raise UsageError(f"{reader.label}: {where}: attribute layout={layout!r} is not "
                         f"supported (0 or 1)")
    direction = attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    inputs = list(node.input) + [""] * (8 - len(node.input))
    if inputs[4]:
        _check_full_lengths(reader, where, inputs[4], layout)
    for state in inputs[5:7 if kind is LSTM else 6]:
        _check_state(reader, where, state)
    w, r = reader.weight(inputs[1], where), reader.weight(inputs[2], where)
    directions = 2 if direction == "bidirectional" else 1
    hidden = attrs.get("hidden_size", r.shape[-1] if r.ndim == 3 else 0)
    rows = kind.GATES * hidden
    shapes = [("W", w, (directions, rows, w.shape[-1] if w.ndim == 3 else -1)),
              ("R", r, (directions, rows, hidden))]
    if inputs[3]:
        b = reader.weight(inputs[3], where)
        shapes.append(("B", b, (directions, 2 * rows)))
    for label, value, shape in shapes:
        if value.shape != shape:
            raise UsageError(f"{reader.label}: {where}: {label} has shape {value.shape}, "
                             f"expected {shape} (directions, gates * hidden_size, ...)")
    new = [_rnn_entry(inputs[1], index, kind, "weight_ih", directions,
                      reader.dtypes[inputs[1]]),
           _rnn_entry(inputs[2], index, kind, "weight_hh", directions,
                      reader.dtypes[inputs[2]])]
    if inputs[3]:
        new.append(_rnn_entry(inputs[3], index, kind, "bias", directions,
                              reader.dtypes[inputs[3]]))
    if kind is LSTM and inputs[7]:
        peep = reader.weight(inputs[7], where)
        if peep.shape != (directions, 3 * hidden):
            raise UsageError(f"{reader.label}: {where}: P has shape {peep.shape}, expected "
                             f"{(directions, 3 * hidden)} (directions, 3 * hidden_size)")
        new.append(_rnn_entry(inputs[7], index, kind, "weight_peep", directions,
                              reader.dtypes[inputs[7]]))
    fields = {}
    for entry in new:
        entry.set(fields, reader.arrays[entry.name])
    extra = {"linear_before_reset": bool(attrs.get("linear_before_reset", 0))} \
        if kind is GRU else {}
    try:
        layers.append(kind(direction=direction, **fields[index], **extra))
    except ValueError as error:
        raise UsageError(f"{reader.label}: {where}: {error}") from None
    entries.extend(new)


def _check_full_lengths(reader, where, name, layout):
    """``sequence_lens`` a graph input (the lengths of each run: ``--lengths``), or one
    that changes nothing: a constant whose every entry is the graph input's (static) time
    dimension (dimension 0, or 1 with ``layout`` 1)."""
    if name in reader.inputs and name not in reader.dtypes:
        return
    lengths = reader.arrays.get(name)
    dims = reader.input_dims
    steps = dims[layout] if len(dims) > layout else None
    if lengths is None or steps is None or np.any(np.asarray(lengths) != steps):
        raise UsageError(f"{reader.label}: {where}: sequence_lens {name} is not supported "
                         f"(only a graph input, given at run time with --lengths, or a "
                         f"constant equal to every sequence's full length, the input's "
                         f"time dimension)")


def _check_state(reader, where, state):
    """An initial state is absent, a graph input, or zeros (an initializer, or an
    ``Expand`` of one, as ``torch.onnx.export(dynamo=False)`` writes for a dynamic batch)."""
    if not state or state in reader.inputs and state not in reader.dtypes:
        return
    producer = reader.producers.get(state)
    source = producer.input[0] if producer is not None and producer.op_type == "Expand" \
        else state
    if source not in reader.arrays:
        raise UsageError(f"{reader.label}: {where}: initial state {state} is computed by a "
                         f"{producer.op_type if producer else 'missing'} node; only zeros, "
                         f"or a graph input, are supported")
    if np.any(reader.arrays[source]):
        raise UsageError(f"{reader.label}: {where}: a constant nonzero initial state "
                         f"({state}) is not supported")


def _symmetric(reader, where, pads):
    pads = list(pads or [0, 0, 0, 0])
    if len(pads) != 4 or pads[:2] != pads[2:]:
        raise UsageError(f"{reader.label}: {where}: pads {pads} are not supported (only "
                         f"symmetric 2-D padding)")
    return tuple(pads[:2])


def _cnn(reader, number, node, index, layers, entries, sequence=False):
    """Appends the layer of a CNN node (``sequence``: of a head on an RNN's ``T x N x F``
    outputs); returns False for glue."""
    where, op = reader.where(number, node), node.op_type
    attrs = reader.attributes(node)
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise UsageError(f"{reader.label}: {where}: auto_pad is not supported")
    if op == "Conv":
        weight = reader.weight(node.input[1], where)
        bias = reader.weight(node.input[2], where) if len(node.input) > 2 and node.input[2] \
            else None
        layer = Conv2d(weight, bias, stride=tuple(attrs.get("strides", (1, 1))),
                       padding=_symmetric(reader, where, attrs.get("pads")),
                       dilation=tuple(attrs.get("dilations", (1, 1))),
                       groups=attrs.get("group", 1))
        new = [_plain_entry(node.input[1], index, "weight", reader.dtypes[node.input[1]])]
        if bias is not None:
            new.append(_plain_entry(node.input[2], index, "bias", reader.dtypes[node.input[2]]))
    elif op == "Relu":
        layer, new = ReLU(), []
    elif op == "MaxPool":
        if attrs.get("ceil_mode", 0) or list(attrs.get("dilations", [1, 1])) != [1, 1] \
                or len(node.output) > 1:
            raise UsageError(f"{reader.label}: {where}: ceil_mode, dilations or indices are "
                             f"not supported")
        kernel = tuple(attrs["kernel_shape"])
        pads = list(attrs.get("pads") or [0, 0, 0, 0])
        try:
            layer = MaxPool2d(kernel, tuple(attrs.get("strides", (1, 1))), tuple(pads[:2]),
                              tuple(pads[2:]))
        except (TypeError, ValueError) as error:
            raise UsageError(f"{reader.label}: {where}: {error}") from None
        new = []
    elif op == "LRN":
        layer, new = LocalResponseNorm(attrs["size"], attrs.get("alpha", 1e-4),
                                       attrs.get("beta", 0.75), attrs.get("bias", 1.0)), []
    elif op == "Dropout":
        ratio = reader.arrays.get(node.input[1]) if len(node.input) > 1 and node.input[1] \
            else attrs.get("ratio", 0.5)
        layer, new = Dropout(float(np.asarray(ratio))), []
    elif op == "Softmax":
        opset = max((o.version for o in reader.model.opset_import if o.domain in ("", "ai.onnx")),
                    default=13)
        axis = attrs.get("axis", -1 if opset >= 13 else 1)
        if axis not in ((2, -1) if sequence else (1, -1)):
            raise UsageError(f"{reader.label}: {where}: Softmax over axis {axis} is not "
                             f"supported (only over the features, the last axis"
                             f"{' of T x N x F' if sequence else ''})")
        layer, new = Softmax(), []
    elif op in ("Tanh", "Sigmoid"):
        layer, new = (Tanh() if op == "Tanh" else Sigmoid()), []
    elif op in ("Flatten", "Reshape"):
        if op == "Flatten" and attrs.get("axis", 1) != 1:
            raise UsageError(f"{reader.label}: {where}: axis={attrs['axis']} is not "
                             f"supported (only 1)")
        shape = reader.arrays.get(node.input[1]) if op == "Reshape" else None
        if op == "Reshape" and (shape is None or np.ndim(shape) != 1 or len(shape) != 2):
            raise UsageError(f"{reader.label}: {where}: only a Reshape to 2 dimensions (a "
                             f"flatten) is supported")
        layer, new = Flatten(), []
    elif op == "Gemm":
        if attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0 \
                or attrs.get("transA", 0):
            raise UsageError(f"{reader.label}: {where}: only Gemm with alpha=beta=1 and "
                             f"transA=0 is supported")
        transpose = not attrs.get("transB", 0)
        weight = reader.weight(node.input[1], where)
        bias = reader.weight(node.input[2], where) if len(node.input) > 2 and node.input[2] \
            else None
        layer = Linear(weight.T if transpose else weight, bias)
        new = [_plain_entry(node.input[1], index, "weight", reader.dtypes[node.input[1]],
                            transpose)]
        if bias is not None:
            new.append(_plain_entry(node.input[2], index, "bias", reader.dtypes[node.input[2]]))
    elif op == "MatMul":
        weight = reader.weight(node.input[1], where)
        layer = Linear(weight.T)
        new = [_plain_entry(node.input[1], index, "weight", reader.dtypes[node.input[1]],
                            True)]
    elif op == "Add" and layers and isinstance(layers[-1], Linear) \
            and layers[-1].bias is None:
        bias = reader.weight(node.input[1], where)
        layers[-1] = Linear(layers[-1].weight, bias)
        entries.append(_plain_entry(node.input[1], index - 1, "bias",
                                    reader.dtypes[node.input[1]]))
        return False
    elif op == "Identity":
        return False
    else:
        raise UsageError(f"{reader.label}: {where}: operator {op} is not supported")
    layers.append(layer)
    entries.extend(new)
    return True


def load_onnx(path, *, head=False):
    """A Network from an ONNX model (see the module); with ``head``, ``(network, head)``:
    the ``Linear`` layers after an RNN stack (``Gemm``, or ``MatMul`` and ``Add``) as a
    Network of their own, ``None`` when there are none. Without ``head``, such layers are
    refused, naming them."""
    reader = _Reader(path)
    graph = reader.model.graph
    lengths = {node.input[4] for node in graph.node
               if node.op_type in ("LSTM", "GRU") and len(node.input) > 4}
    inputs = [value.name for value in graph.input
              if value.name not in reader.dtypes and value.name not in lengths]
    if len(inputs) != 1:
        raise UsageError(f"{reader.label}: the graph has {len(inputs)} inputs besides the "
                         f"initializers; a model has one (optional RNN states aside)")
    current, layers, entries = inputs[0], [], []
    after, after_entries = [], []               # the Linear layers after an RNN stack
    rnn = any(node.op_type in ("LSTM", "GRU") for node in graph.node)
    for number, node in enumerate(graph.node):
        if current not in node.input:
            continue
        where = reader.where(number, node)
        if node.op_type == "Shape":         # reads the shape only, off the data path
            continue
        if node.input[0] != current:
            raise UsageError(f"{reader.label}: {where} reads the data path as input "
                             f"{list(node.input).index(current)}; only as input 0")
        try:
            if rnn and after and node.op_type not in _HEAD_OPS:
                raise UsageError(f"{reader.label}: {where}: operator {node.op_type} in the "
                                 f"head is not supported (a head of Linear layers, Gemm or "
                                 f"MatMul and Add, and Relu, Tanh, Sigmoid, Softmax)")
            if rnn and node.op_type in _HEAD_OPS and layers:
                if not head:
                    raise UsageError(f"{reader.label}: {where}: a head ({node.op_type}) "
                                     f"after the RNN; the whole model runs where the host "
                                     f"runs the head (nnrtl sim sbe --model, nnrtl train), "
                                     f"not here")
                _cnn(reader, number, node, len(after), after, after_entries, sequence=True)
            elif rnn and node.op_type in ("LSTM", "GRU"):
                _rnn(reader, number, node, len(layers), layers, entries)
            elif rnn and node.op_type in ("Transpose", "Reshape", "Squeeze", "Identity"):
                perm = reader.attributes(node).get("perm")
                if node.op_type == "Transpose" and list(perm) != [0, 2, 1, 3]:
                    raise UsageError(f"{reader.label}: {where}: only perm [0, 2, 1, 3] (the "
                                     f"directions next to the features) is supported")
            elif rnn:
                raise UsageError(f"{reader.label}: {where}: operator {node.op_type} is not "
                                 f"supported in an RNN graph (LSTM and GRU layers only)")
            else:
                _cnn(reader, number, node, len(layers), layers, entries)
        except ValueError as error:
            raise UsageError(f"{reader.label}: {where}: {error}") from None
        current = node.output[0]
    if not layers:
        raise UsageError(f"{reader.label}: no LSTM, GRU or CNN layer on the data path")
    try:
        network = Network(tuple(layers), source=reader.label, format="onnx",
                          entries=tuple(entries), writer=reader.model,
                          input_shape=tuple(reader.input_dims) or None)
        linear = Network(tuple(after), source=reader.label, format="onnx",
                         entries=tuple(after_entries), writer=reader.model) if after else None
    except ValueError as error:
        raise UsageError(f"{reader.label}: {error}") from None
    return (network, linear) if head else network


def save_onnx(network, path, *, also=()):
    """The source model with its initializers replaced (those of ``network`` and of the
    networks ``also``, e.g. its head), ``onnx.save``."""
    import onnx
    from onnx import numpy_helper
    model = copy.deepcopy(network.writer)
    by_name = {entry.name: (entry, part) for part in (network, *also)
               for entry in part.entries}
    stored = {tensor.name for tensor in model.graph.initializer}
    missing = sorted(set(by_name) - stored)
    if missing:
        raise UsageError(f"{network.source}: {', '.join(missing)} are computed by the graph "
                         f"(e.g. ConstantOfShape), not initializers: nnrtl writes weights "
                         f"back into initializers only")
    for tensor in model.graph.initializer:
        if tensor.name in by_name:
            entry, part = by_name[tensor.name]
            value = np.asarray(entry.get(part.layers), dtype=entry.dtype)
            tensor.CopyFrom(numpy_helper.from_array(value, tensor.name))
    onnx.save(model, os.fspath(path))

"""The layers of a Keras model's configuration (``model.to_json()``, a ``.keras`` archive's
``config.json``, a whole-model ``.h5``'s ``model_config``), in the order data flows through
them.

A ``Sequential`` model's layers are its ``config.layers``. A functional model (``Functional``,
Keras 2's ``Model``) is read when it is a chain: one input, one output, and every layer
reading exactly one tensor, the one layer before it, called once; its layers are then the
chain's, from the input to the output. A branch, a merge (``Concatenate``, ``Add``), a
layer called twice or a layer off the path is refused, naming it.

An RNN layer is an ``LSTM``, a ``GRU`` or a ``Bidirectional`` of one
(:func:`rnn_parts`: the forward and the backward layer's configurations).
"""

from collections.abc import Mapping

from ..errors import UsageError

__all__ = ["RNN_CLASSES", "model_layers", "rnn_parts", "returns_sequences", "input_size",
           "layer_name"]

#: Keras classes of the recurrent layers nnrtl reads.
RNN_CLASSES = ("LSTM", "GRU")
#: Keras 2's and Keras 3's class names of a functional model.
_FUNCTIONAL = ("Functional", "Model")


def layer_name(layer):
    """A layer dict's name (Keras 3 puts it beside the config, Keras 2 inside)."""
    if not isinstance(layer, Mapping):
        return None
    config = layer.get("config") if isinstance(layer.get("config"), Mapping) else {}
    return layer.get("name", config.get("name"))


def _sources(value, found):
    """The names of the layers whose tensors an ``inbound_nodes`` entry reads."""
    if isinstance(value, Mapping):
        history = value.get("config", {}).get("keras_history") \
            if value.get("class_name") == "__keras_tensor__" else None
        if isinstance(history, list) and history:
            found.append(history[0])
            return found
        for item in value.values():
            _sources(item, found)
    elif isinstance(value, list):
        if len(value) >= 3 and isinstance(value[0], str) and isinstance(value[1], int):
            found.append(value[0])              # Keras 2: [name, node, tensor, kwargs]
        else:
            for item in value:
                _sources(item, found)
    return found


def _ends(value):
    """Layer names of ``input_layers`` / ``output_layers``: ``[name, 0, 0]`` or a list
    of them."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        return [value[0]]
    return [item[0] for item in value or [] if isinstance(item, list) and item]


def _chain(inner, path):
    """The layers of a functional model's config, input to output (see the module)."""
    layers = inner.get("layers")
    if not isinstance(layers, list):
        raise UsageError(f"{path}: config.layers is missing or not a list")
    by_name, consumers = {}, {}
    for n, layer in enumerate(layers):
        name = layer_name(layer)
        if name is None or name in by_name:
            raise UsageError(f"{path}: config.layers[{n}] has no name, or one another layer "
                             f"has")
        by_name[name] = n
        nodes = layer.get("inbound_nodes") or []
        if len(nodes) > 1:
            raise UsageError(f"{path}: config.layers[{n}] ({name}) is called {len(nodes)} "
                             f"times; nnrtl reads functional models that are a chain")
        sources = _sources(nodes, [])
        if len(sources) > 1:
            raise UsageError(f"{path}: config.layers[{n}] ({name}) reads {len(sources)} "
                             f"tensors ({', '.join(sources)}); nnrtl reads functional "
                             f"models that are a chain of one-input layers")
        for source in sources:
            consumers.setdefault(source, []).append(name)
    inputs, outputs = _ends(inner.get("input_layers")), _ends(inner.get("output_layers"))
    if len(inputs) != 1 or len(outputs) != 1:
        raise UsageError(f"{path}: the model has {len(inputs)} inputs and {len(outputs)} "
                         f"outputs; nnrtl reads functional models with one of each")
    order = [inputs[0]]
    while consumers.get(order[-1]):
        after = consumers[order[-1]]
        if len(after) > 1:
            raise UsageError(f"{path}: {order[-1]}'s output is read by {', '.join(after)}; "
                             f"nnrtl reads functional models that are a chain")
        order.append(after[0])
    missing = [name for name in by_name if name not in order]
    if order[-1] != outputs[0] or missing:
        raise UsageError(f"{path}: layers {', '.join(missing) or order[-1]} are off the "
                         f"path from the input {inputs[0]} to the output {outputs[0]}")
    return [layers[by_name[name]] for name in order if name in by_name]


def model_layers(config, path):
    """The layer dicts of a model config, in data order (see the module).

    Raises
    ------
    UsageError
        Not a model config, another class than Sequential or a functional chain, naming
        the file and the rule.
    """
    if not isinstance(config, Mapping) or "class_name" not in config:
        raise UsageError(f"{path}: not a Keras model JSON (no top-level 'class_name')")
    inner = config.get("config")
    if config["class_name"] in _FUNCTIONAL and isinstance(inner, Mapping):
        return _chain(inner, path)
    if config["class_name"] != "Sequential":
        raise UsageError(f"{path}: class_name is {config['class_name']!r}; only Sequential "
                         f"models and functional chains are supported")
    layers = inner.get("layers") if isinstance(inner, Mapping) else inner
    if not isinstance(layers, list):
        raise UsageError(f"{path}: config.layers is missing or not a list")
    return layers


def rnn_parts(layer, where):
    """``[(part, layer dict)]`` of an RNN layer dict: ``[("", layer)]`` for an LSTM or
    GRU, ``[("forward_layer", ...), ("backward_layer", ...)]`` for a ``Bidirectional``
    (its ``backward_layer``, or a copy of its ``layer`` running backwards). ``None`` for
    another layer.

    Raises
    ------
    UsageError
        A Bidirectional of another layer, or whose ``merge_mode`` is not ``"concat"``.
    """
    kind = layer.get("class_name") if isinstance(layer, Mapping) else None
    if kind in RNN_CLASSES:
        return [("", layer)]
    if kind != "Bidirectional":
        return None
    config = layer.get("config") if isinstance(layer.get("config"), Mapping) else {}
    forward = config.get("layer") if isinstance(config.get("layer"), Mapping) else {}
    if forward.get("class_name") not in RNN_CLASSES:
        raise UsageError(f"{where} is a Bidirectional {forward.get('class_name')}; nnrtl "
                         f"reads Bidirectional LSTM and GRU layers")
    if config.get("merge_mode", "concat") != "concat":
        raise UsageError(f"{where}.config.merge_mode is {config.get('merge_mode')!r}; nnrtl "
                         f"reads Bidirectional layers that concatenate the two directions "
                         f"(merge_mode 'concat')")
    backward = config.get("backward_layer")
    if not isinstance(backward, Mapping):
        inner = dict(forward.get("config", {}), go_backwards=True)
        backward = dict(forward, config=inner)
    if backward.get("class_name") != forward.get("class_name"):
        raise UsageError(f"{where}: the backward layer is a {backward.get('class_name')}, "
                         f"the forward one a {forward.get('class_name')}")
    return [("forward_layer", forward), ("backward_layer", backward)]


def returns_sequences(layer):
    """Whether an RNN layer dict (an LSTM, GRU or Bidirectional) outputs every step."""
    part = rnn_parts(layer, "")[0][1]
    return bool(part.get("config", {}).get("return_sequences", False))


def input_size(layers):
    """The features of the model's input, from the first layer that states its input
    shape before the first RNN; ``None`` when none does."""
    for layer in layers:
        for holder in (layer.get("config", {}), layer.get("build_config", {})):
            for key in ("batch_input_shape", "batch_shape", "input_shape"):
                shape = holder.get(key) if isinstance(holder, Mapping) else None
                if isinstance(shape, list) and shape and isinstance(shape[-1], int):
                    return shape[-1]
        if layer.get("class_name") in RNN_CLASSES + ("Bidirectional",):
            return None
    return None

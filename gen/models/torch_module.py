"""A :class:`~.network.Network` as a PyTorch module and back: the training engines' float64
reference step runs on it.

:func:`to_torch` builds a :class:`torch.nn.Sequential` for a CNN and, for an RNN, a module
holding one ``nn.LSTM``/``nn.GRU`` per layer (``layers``) whose ``forward(x,
states=None, lengths=None)`` returns ``(output, states)`` as :func:`~.reference.forward`
does (a ``"reverse"`` layer runs on the time-flipped sequence; ``lengths``: PyTorch's
packed sequences, ``pack_padded_sequence`` and ``pad_packed_sequence``). :func:`from_torch` reads the
module's weights back into the network.
"""

import numpy as np

from .layers import (LSTM, RNN_LAYERS, Conv2d, Dropout, Flatten, Linear, LocalResponseNorm,
                     MaxPool2d, ReLU, Sigmoid, Softmax, Tanh, refuse_extensions)

__all__ = ["to_torch", "from_torch", "torch_parameter"]


def _rnn_class():
    import torch

    class StackedRNN(torch.nn.Module):
        """Stacked ``nn.LSTM``/``nn.GRU`` layers, one module per layer."""

        def __init__(self, modules, reverse):
            super().__init__()
            self.layers = torch.nn.ModuleList(modules)
            self.reverse = tuple(reverse)

        def forward(self, x, states=None, lengths=None):
            finals = []
            steps = x.shape[0]
            for index, (module, reverse) in enumerate(zip(self.layers, self.reverse)):
                state = None if states is None else states[index]
                if reverse:
                    x = _flip(x, lengths)
                if lengths is None:
                    x, final = module(x, state)
                else:
                    packed = torch.nn.utils.rnn.pack_padded_sequence(
                        x, torch.as_tensor(lengths).cpu(), enforce_sorted=False)
                    x, final = module(packed, state)
                    x = torch.nn.utils.rnn.pad_packed_sequence(x, total_length=steps)[0]
                if reverse:
                    x = _flip(x, lengths)
                finals.append(final)
            return x, finals
    return StackedRNN


def _flip(x, lengths):
    """``x`` (time first) reversed in time, or each sequence within its length."""
    import torch

    if lengths is None:
        return torch.flip(x, (0,))
    from .sequences import reverse_within
    index = reverse_within(np.arange(x.shape[0])[:, None].repeat(x.shape[1], 1), lengths)
    return torch.gather(x, 0, torch.as_tensor(index)[..., None].expand(x.shape))


def _tensor(array, dtype):
    import torch
    return torch.nn.Parameter(torch.tensor(np.asarray(array), dtype=dtype))


def to_torch(network, dtype=None):
    """The PyTorch module computing ``network`` with its weights loaded.

    Parameters
    ----------
    network : Network
    dtype : torch.dtype, optional
        Default ``torch.float64``.
    """
    import torch
    dtype = torch.float64 if dtype is None else dtype
    if network.is_rnn:
        modules = []
        for n, layer in enumerate(network.layers):
            refuse_extensions(layer, f"{network.source or 'model'}: layer {n}", "PyTorch")
            kind = torch.nn.LSTM if isinstance(layer, LSTM) else torch.nn.GRU
            extra = {"proj_size": layer.proj_size} if isinstance(layer, LSTM) else {}
            module = kind(layer.input_size, layer.hidden_size, bias=layer.has_bias,
                          bidirectional=layer.direction == "bidirectional", dtype=dtype,
                          **extra)
            state = {}
            for field in layer.tensor_fields():
                name = field.removesuffix("_reverse") + "_l0" + \
                    ("_reverse" if field.endswith("_reverse") else "")
                state[name] = torch.tensor(getattr(layer, field), dtype=dtype)
            module.load_state_dict(state, strict=True)
            modules.append(module)
        return _rnn_class()(modules, [layer.direction == "reverse"
                                      for layer in network.layers])
    modules = []
    for layer in network.layers:
        if isinstance(layer, Conv2d):
            module = torch.nn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size,
                                     stride=layer.stride, padding=layer.padding,
                                     dilation=layer.dilation, groups=layer.groups,
                                     bias=layer.bias is not None, dtype=dtype)
        elif isinstance(layer, Linear):
            module = torch.nn.Linear(layer.in_features, layer.out_features,
                                     bias=layer.bias is not None, dtype=dtype)
        elif isinstance(layer, MaxPool2d) and layer.padding_end != layer.padding:
            (top, left), (bottom, right) = layer.padding, layer.padding_end
            module = torch.nn.Sequential(
                torch.nn.ConstantPad2d((left, right, top, bottom), -float("inf")),
                torch.nn.MaxPool2d(layer.kernel_size, layer.stride))
        elif isinstance(layer, MaxPool2d):
            module = torch.nn.MaxPool2d(layer.kernel_size, layer.stride, layer.padding)
        elif isinstance(layer, LocalResponseNorm):
            if layer.size % 2 == 0:
                from ..errors import UsageError
                raise UsageError(f"{network.source or 'model'}: LRN of even size "
                                 f"{layer.size}: PyTorch's LocalResponseNorm centres its "
                                 f"window elsewhere than ONNX's")
            module = torch.nn.LocalResponseNorm(layer.size, layer.alpha, layer.beta, layer.k)
        elif isinstance(layer, Dropout):
            module = torch.nn.Dropout(layer.p)
        elif isinstance(layer, Softmax):
            module = torch.nn.Softmax(dim=-1)
        elif isinstance(layer, Tanh):
            module = torch.nn.Tanh()
        elif isinstance(layer, Sigmoid):
            module = torch.nn.Sigmoid()
        elif isinstance(layer, ReLU):
            module = torch.nn.ReLU()
        else:
            assert isinstance(layer, Flatten)
            module = torch.nn.Flatten()
        for field in layer.tensor_fields():
            setattr(module, field, _tensor(getattr(layer, field), dtype))
        modules.append(module)
    return torch.nn.Sequential(*modules)


def torch_parameter(network, module, index, field):
    """The parameter of ``module`` (built by :func:`to_torch` from ``network``) holding
    field ``field`` of layer ``index``."""
    layer = network.layers[index]
    if isinstance(layer, RNN_LAYERS):
        name = field.removesuffix("_reverse") + "_l0" + \
            ("_reverse" if field.endswith("_reverse") else "")
        return getattr(module.layers[index], name)
    return getattr(module[index], field)


def from_torch(network, module):
    """``network`` with the weights of ``module`` (built by :func:`to_torch`, e.g. after a
    training step); the source, format and entries stay, so
    :func:`~nnrtl.gen.models.save_network` writes the same format."""
    import dataclasses
    layers = []
    for index, layer in enumerate(network.layers):
        fields = {field: torch_parameter(network, module, index, field).detach().cpu()
                  .double().numpy() for field in layer.tensor_fields()}
        layers.append(dataclasses.replace(layer, **fields))
    return network.with_layers(layers)

"""The batch and the loss of ``nnrtl train`` (:mod:`.train`): the user's inputs and
targets checked against the model and made tensors (:func:`prepare_batch`), the loss and
its gradient at the outputs (:func:`loss_and_gradient`), through a host-side head
(:func:`head_loss_and_gradient`).

Sequences of different lengths (``--lengths``, :mod:`nnrtl.gen.models.sequences`): the
``mse`` loss is the mean over each sequence's own steps, ``cross-entropy`` takes each
sequence's last step; the padding's outputs add nothing and get no gradient. A head that
ends in a ``Softmax`` gives ``cross-entropy`` its logits (:func:`loss_head`).
"""

import dataclasses
from typing import Any

import numpy as np

from .errors import UsageError

__all__ = ["Batch", "prepare_batch", "loss_value", "loss_and_gradient", "loss_head",
           "head_loss_and_gradient",
           "module_parameters"]


@dataclasses.dataclass(frozen=True)
class Batch:
    """Inputs and targets as tensors: RNN inputs time first (with an embedding, its token
    ids: an int64 ``seq_len x batch`` tensor); ``batch_first`` says whether the user's
    arrays had a batch dimension in front; ``lengths`` each sequence's steps (an int64
    array, or ``None``: every sequence is ``seq_len`` steps)."""

    inputs: Any
    targets: Any
    batch_first: bool
    lengths: Any = None


def _classes(network, head=None):
    """The number of outputs of ``network`` (an RNN's last layer, a CNN's last Linear) or
    of its ``head``."""
    if head is not None:
        return next(layer.out_features for layer in reversed(head.layers)
                    if hasattr(layer, "out_features"))
    if network.is_rnn:
        return network.layers[-1].output_size
    return next(layer.out_features for layer in reversed(network.layers)
                if hasattr(layer, "out_features"))


def _describe(array):
    if array.size <= 8:
        return f"{array.tolist()} (shape {array.shape})"
    return f"shape {array.shape}, values from {array.min():g} to {array.max():g}"


def _token_ids(inputs, embedding):
    """``inputs`` as time-first int64 token ids of ``embedding`` and whether they had a
    batch dimension; a UsageError naming the value and the rule otherwise."""
    name = f"the embedding {embedding.key} ({embedding.num_embeddings} rows)"
    if not np.issubdtype(inputs.dtype, np.integer):
        raise UsageError(f"--inputs must be integer token ids for {name}, not "
                         f"{inputs.dtype} values")
    if inputs.ndim not in (1, 2) or 0 in inputs.shape:
        raise UsageError(f"--inputs must be seq_len or batch x seq_len token ids for {name}, "
                         f"not {inputs.shape}")
    outside = np.argwhere((inputs < 0) | (inputs >= embedding.num_embeddings))
    if len(outside):
        where = tuple(int(k) for k in outside[0])
        raise UsageError(f"--inputs holds token id {inputs[where]} at {where}: token ids "
                         f"must be from 0 to {embedding.num_embeddings - 1} for {name}")
    batch_first = inputs.ndim == 2
    return (inputs.T if batch_first else inputs[:, None]).astype(np.int64), batch_first


def prepare_batch(network, inputs, targets, loss, head=None, embedding=None, lengths=None):
    """Check the user's arrays against ``network`` (followed by ``head``, a Network of
    Linear layers, and preceded by ``embedding``, an
    :class:`~nnrtl.gen.models.train_model.Embedding`, if given), ``loss`` and
    ``lengths`` (each sequence's steps, RNN batches only);
    :class:`UsageError` naming the array, its shape and the shape it must have (token ids:
    their dtype, or the id out of range and the range).

    Notes
    -----
    Shapes. RNN inputs are ``seq_len x input_size`` (one sequence) or ``batch x seq_len x
    input_size``, or with an embedding integer token ids ``seq_len`` or ``batch x seq_len``
    (from 0 to ``num_embeddings - 1``); the outputs are the last layer's at every step (the
    head's, when there is one), laid out the same way (``seq_len x H`` or ``batch x seq_len
    x H``). CNN inputs are ``batch x C x H x W``, the outputs ``batch x classes``. Inside,
    RNN tensors are time first (``T x N x ...``), as ``nn.LSTM`` takes them.
    """
    import torch

    if embedding is not None and not network.is_rnn:
        raise ValueError("an embedding feeds an RNN, not a CNN")
    if network.is_rnn:
        if embedding is not None:
            x, batch_first = _token_ids(np.asarray(inputs), embedding)
        else:
            inputs = np.asarray(inputs, dtype=np.float64)
            features = network.layers[0].input_size
            if inputs.ndim not in (2, 3) or inputs.shape[-1] != features or (
                    0 in inputs.shape):
                raise UsageError(f"--inputs must be seq_len x {features} or batch x "
                                 f"seq_len x {features} for {network.source}, not "
                                 f"{inputs.shape}")
            batch_first = inputs.ndim == 3
            x = inputs.transpose(1, 0, 2) if batch_first else inputs[:, None, :]
        steps, batch = x.shape[:2]
        outputs = _classes(network, head)
        if loss == "mse":
            shape = (batch, steps, outputs) if batch_first else (steps, outputs)
        else:
            shape = (batch,) if batch_first else ()
    else:
        inputs = np.asarray(inputs, dtype=np.float64)
        first = network.layers[0]
        if inputs.ndim != 4 or (hasattr(first, "in_channels")
                                and inputs.shape[1] != first.in_channels):
            raise UsageError(f"--inputs must be batch x C x H x W for {network.source}, not "
                             f"{inputs.shape}")
        batch_first, x = True, inputs
        batch = inputs.shape[0]
        shape = None if loss == "mse" else (batch,)
    targets = np.asarray(targets)
    if loss == "cross-entropy":
        classes = _classes(network, head)
        if targets.shape != shape or np.any(targets != np.round(targets)) or np.any(
                targets < 0) or np.any(targets >= classes):
            raise UsageError(f"--targets must be class indices (integers from 0 to "
                             f"{classes - 1}) of shape {shape} for cross-entropy, not "
                             f"{_describe(targets)}")
        y = torch.tensor(targets.reshape(-1).astype(np.int64))
    else:
        if shape is not None and targets.shape != shape:
            raise UsageError(f"--targets must have the outputs' shape {shape} for mse, not "
                             f"{targets.shape}")
        targets = targets.astype(np.float64)
        if network.is_rnn:
            targets = targets.transpose(1, 0, 2) if batch_first else targets[:, None, :]
        y = torch.tensor(targets)
    if lengths is not None:
        from .models.sequences import check_lengths
        if not (network.is_rnn and batch_first):
            raise UsageError("--lengths gives each sequence of a batch its length: the "
                             "inputs must be batch x seq_len (x features) for an RNN")
        lengths = check_lengths(lengths, x.shape[0], x.shape[1])
    return Batch(torch.tensor(x), y, batch_first, lengths)


def loss_value(outputs, batch, loss, is_rnn):
    """The loss of ``outputs`` (a tensor shaped as the network gives them; with
    ``batch.lengths``, over each sequence's own steps: the module docstring)."""
    import torch
    lengths = batch.lengths
    if loss == "mse":
        if outputs.shape != batch.targets.shape:
            raise UsageError(f"--targets must have the outputs' shape "
                             f"{tuple(outputs.shape)} for mse, not "
                             f"{tuple(batch.targets.shape)}")
        if lengths is None:
            return torch.nn.MSELoss()(outputs, batch.targets)
        from .models.sequences import step_mask
        mask = torch.tensor(step_mask(lengths, outputs.shape[0]), dtype=outputs.dtype)[..., None]
        return ((outputs - batch.targets) ** 2 * mask).sum() / (mask.sum() * outputs.shape[-1])
    if not is_rnn:
        logits = outputs
    elif lengths is None:
        logits = outputs[-1]
    else:
        logits = outputs[torch.as_tensor(lengths - 1), torch.arange(outputs.shape[1])]
    return torch.nn.CrossEntropyLoss()(logits, batch.targets)


def loss_and_gradient(outputs, batch, loss, is_rnn):
    """The loss of ``outputs`` (float64 array) and its gradient at them."""
    import torch
    out = torch.tensor(np.asarray(outputs, dtype=np.float64), requires_grad=True)
    value = loss_value(out, batch, loss, is_rnn)
    value.backward()
    return float(value.detach()), out.grad.numpy()


def loss_head(head, loss):
    """``head`` as the loss takes it: ``cross-entropy`` takes logits, so a ``Softmax`` that
    ends the head is the loss's own (the same loss and gradients as a cross-entropy on
    the probabilities) and is left out; ``head`` otherwise (``None`` stays ``None``)."""
    from .models import Softmax
    if head is not None and loss == "cross-entropy" and isinstance(head.layers[-1], Softmax):
        return dataclasses.replace(head, layers=head.layers[:-1]) if len(head.layers) > 1 \
            else None
    return head


def head_loss_and_gradient(head, outputs, batch, loss):
    """The host's part of a step with a head: the engine's ``outputs`` (float64, time
    first) through ``head`` (a Network of Linear layers) in PyTorch float64, the loss at
    the head's outputs, and autograd back. Returns ``(loss, gradient at outputs, head
    gradients)``: the gradient the engine's backward pass consumes, and ``{(layer index,
    field): ndarray}`` of every tensor of ``head``."""
    import torch

    from .models import to_torch

    module = to_torch(head, torch.float64)
    out = torch.tensor(np.asarray(outputs, dtype=np.float64), requires_grad=True)
    value = loss_value(module(out), batch, loss, True)
    value.backward()
    gradients = {key: parameter.grad.numpy()
                 for key, parameter in module_parameters(head, module).items()}
    return float(value.detach()), out.grad.numpy(), gradients


def module_parameters(network, module):
    """``{(layer index, field): parameter}`` of a module built by ``to_torch``."""
    from .models import torch_parameter
    return {(index, field): torch_parameter(network, module, index, field)
            for index, layer in enumerate(network.layers)
            for field in layer.tensor_fields()}

"""A model as people write it, on the SBE: the LSTM stack runs on the engine, the layers
around it on the host.

:func:`load_whole_model` reads a model file with
:func:`~nnrtl.gen.models.train_model.load_train_model` (the placement ``nnrtl train``
uses): a PyTorch ``state_dict`` may hold one ``nn.Embedding`` in front of the stack and
one ``nn.Linear`` head after it, a Keras model one ``Dense`` head (linear activation, on
every step); a tensor it cannot place is refused, naming it. The host's part is a
:class:`HostLayers`: with an embedding, ``--inputs`` are token ids (:func:`load_tokens`)
and the engine's inputs are the rows they read; with a head, the outputs are the head's
on every step's ``h``, in float64, as PyTorch's layer computes them. A stack whose layers
all run in reverse is the forward stack on the reversed sequence, its outputs reversed
back: the host reverses both. A Keras model JSON
with its weights file is read as before (:func:`~.frommodel.load_model`: layers after the
last LSTM are refused unless ignored explicitly).
"""

import dataclasses
import os

import numpy as np

from ..errors import UsageError
from ..models import load_array

__all__ = ["HostLayers", "load_whole_model", "load_tokens"]


@dataclasses.dataclass(frozen=True, eq=False)
class HostLayers:
    """The layers the host runs around the engine's stack.

    Attributes
    ----------
    embedding : nnrtl.gen.models.train_model.Embedding or None
    head : nnrtl.gen.models.Network or None
        ``Linear`` layers on every step's output.
    described : tuple of str
        Each layer as ``"<layer> (<its tensors' names>)"``, embedding first.
    reverse : bool
        The stack runs in reverse: the engine takes the steps last first
        (:meth:`engine_order`).
    """

    embedding: object = None
    head: object = None
    described: tuple = ()
    reverse: bool = False

    def __bool__(self):
        return self.embedding is not None or self.head is not None or self.reverse

    def engine_order(self, values):
        """``values`` (time first) between the model's time order and the engine's: a
        reverse stack's steps last first (its own inverse: the engine's inputs going in,
        its outputs coming back)."""
        return np.ascontiguousarray(values[::-1]) if self.reverse else values

    def engine_inputs(self, inputs):
        """The stack's input vectors (``T x input_size``, float64) for the model's inputs:
        an embedding's rows for token ids, else the inputs themselves."""
        if self.embedding is None:
            return np.asarray(inputs, dtype=np.float64)
        return self.embedding.lookup(inputs)

    def calibration(self, seq_len):
        """``(inputs, description)``: what the quantization calibrates on without the
        user's inputs: the embedding's rows for token ids drawn uniformly, as many
        sequences and steps as :func:`~.frommodel.synthetic_calibration` and with its
        seed."""
        from .frommodel import calibration_used

        used = calibration_used(seq_len)
        tokens = np.random.default_rng(used["seed"]).integers(
            0, self.embedding.num_embeddings, size=(used["steps"], used["sequences"]))
        used.update(distribution=f"the embedding's rows ({self.embedding.key}) of token "
                                 f"ids uniform in 0..{self.embedding.num_embeddings - 1}")
        return self.embedding.lookup(tokens), used

    def outputs(self, hs):
        """The model's outputs for the stack's (``T x hidden``): the head's, float64."""
        from ..models.reference import layer_forward

        out = np.asarray(hs, dtype=np.float64)
        for layer in () if self.head is None else self.head.layers:
            out = layer_forward(layer, out)
        return out


def load_whole_model(path, weights=None, *, prefix=None):
    """``(network, host)``: the forward LSTM stack the SBE runs
    (:func:`~.frommodel.check_model`) and the :class:`HostLayers` around it.

    Raises
    ------
    UsageError
        The errors of :func:`~nnrtl.gen.models.train_model.load_train_model` (a tensor
        that is neither the stack, its embedding nor its head, naming it) and of
        :func:`~.frommodel.check_model`.
    """
    from ..models import model_format
    from ..models.train_model import load_train_model
    from .frommodel import check_model, load_model

    if weights is not None:
        return load_model(path, weights, prefix=prefix), HostLayers()
    # a state_dict's stack as the SBE reads it (several RNNs need --prefix), then the
    # layers around it as nnrtl train places them
    if not os.path.exists(path) or model_format(path) == "state_dict":
        load_model(path, prefix=prefix)
    model = load_train_model(path, prefix=prefix)
    network = check_model(model.network)
    host = model.placement()["host"]
    reverse = network.layers[0].direction == "reverse"
    return network, HostLayers(embedding=model.embedding, head=model.head,
                               described=tuple(host), reverse=reverse)


def load_tokens(path, embedding):
    """Token ids from a ``.npy`` file (``seq_len`` integers, or ``seq_len x 1``), each in
    ``[0, num_embeddings)``.

    Raises
    ------
    UsageError
        Naming the file, the shape or value found and the rule.
    """
    tokens = load_array(path, what="inputs")
    if tokens.ndim == 2 and tokens.shape[1] == 1:
        tokens = tokens[:, 0]
    if tokens.ndim != 1 or not len(tokens):
        raise UsageError(f"{path}: the model starts with an embedding ({embedding.key}), so "
                         f"the inputs are token ids: an array of shape (seq_len,), not "
                         f"{tokens.shape}")
    if not np.all(np.isfinite(tokens)) or np.any(tokens != np.round(tokens)):
        raise UsageError(f"{path}: token ids must be integers")
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= embedding.num_embeddings:
        bad = low if low < 0 else high
        raise UsageError(f"{path}: token id {bad} is outside the embedding's "
                         f"0..{embedding.num_embeddings - 1} ({embedding.key})")
    return tokens.astype(np.int64)

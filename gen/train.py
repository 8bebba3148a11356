"""The training interface: ``nnrtl train ENGINE``, shared by the training engines.

An SGD step is split between the engine and the host. The engine's ``train`` hook returns
a :class:`Trainer` that computes the network's outputs (:meth:`Trainer.forward`) and,
given the gradient of the loss at those outputs, the gradient of every weight
(:meth:`Trainer.backward`) -- its hardware part through its golden model or its RTL, the
rest in PyTorch on the host. This module does what is the same for every engine:

* reads the model (:func:`nnrtl.gen.models.train_model.load_train_model`: a PyTorch
  ``state_dict``, TorchScript, a ``torch.export`` archive, ONNX, Keras) and the inputs
  and targets (``.npy``). The engine runs the model's network (its RNN stacks, chained
  stacks one after another, or its CNN); the host runs, in PyTorch float64, an
  ``nn.Linear`` head after the RNN (it takes the engine's outputs, the loss is taken at
  its outputs, and its backward pass gives the gradient at the engine's outputs that the
  engine's backward pass consumes) and an ``nn.Embedding`` in front of it (the inputs
  are token ids; their rows are the engine's inputs, and the gradient at those inputs,
  :meth:`Trainer.input_gradient`, is summed into the rows the tokens read:
  :meth:`~nnrtl.gen.models.train_model.Embedding.sgd_step`). A file with anything else
  is refused naming the keys; which layers ran where is logged and recorded in
  ``train.json`` (``placement``);
* the loss and its gradient at the outputs, in PyTorch (:mod:`.train_batch`): ``mse`` is
  ``torch.nn.MSELoss()`` over every step and unit (targets the shape of the outputs),
  ``cross-entropy`` is ``torch.nn.CrossEntropyLoss()`` on the last step's outputs (an
  RNN) or the network's outputs (a CNN), the targets class indices; with ``--lengths``
  over each sequence's own steps, and the reference runs PyTorch's packed sequences;
* the weight update: PyTorch's own ``torch.optim.SGD`` step on the gradients the engine
  returned, and on the head's and the embedding's gradients with the same ``lr``;
* the reference: the same step of the whole model (embedding, network and head) in
  plain PyTorch float64 (``nn.Embedding``, autograd through
  :func:`nnrtl.gen.models.to_torch` and ``torch.optim.SGD``) from the same weights (a
  pipelined engine's stale forward weights too, when its trainer has
  ``forward_networks``); the step passes when no updated weight, the head's and the
  embedding's included, differs from the reference's by more than ``lr *
  trainer.gradient_bound`` (the engine states its gradient bound and why);
* writes ``DIR/model.<suffix of the model file>`` (the updated weights, same format),
  ``DIR/train.json`` (per step: loss, the reference's loss, cycles, useful MACs,
  utilization, the update's largest difference from the reference -- of every weight,
  of the head's alone and of the embedding's alone -- and its bound) and
  ``DIR/manifest.json``, completely or not at all (:mod:`nnrtl.gen.output`).
"""

import dataclasses
import hashlib
import json
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from .errors import UsageError
from .output import MANIFEST, staged_directory
from .train_batch import (Batch, head_loss_and_gradient, loss_and_gradient, loss_head,
                          loss_value, module_parameters, prepare_batch)

__all__ = ["TrainRequest", "Trainer", "HostTrainer", "train", "LOSSES", "BACKENDS",
           "Batch", "prepare_batch", "loss_and_gradient", "head_loss_and_gradient",
           "sgd_step", "reference_step", "reference_model_step"]

LOSSES = ("mse", "cross-entropy")
BACKENDS = ("golden", "rtl")


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    """What ``nnrtl train`` asks of an engine's ``train`` hook (and of :func:`train`).

    ``params`` are ``--param k=v`` strings, ``options`` the engine's own ``train`` options
    (:attr:`Engine.options <nnrtl.gen.engines.Engine.options>`, e.g. ``{"fpgas": 3}``), by
    ``argparse`` dest; ``prefix``
    (``--prefix``) the key prefix of the one RNN stack of a ``state_dict`` to train.
    ``input_shape`` is the shape of the inputs the trainer's :meth:`Trainer.forward` gets
    (an RNN's time first, ``seq_len x batch x input_size``, an embedding's rows in place
    of token ids), set by :func:`train` before it calls the hook; ``None`` when a hook is
    called without it (the hook then reads ``inputs``)."""

    board: type
    model: Path
    inputs: Path
    targets: Path
    loss: str = "mse"
    lr: float = 0.01
    steps: int = 1
    backend: str = "golden"
    params: tuple = ()
    options: dict = dataclasses.field(default_factory=dict)
    seed: int = 1
    log: Callable | None = None
    prefix: str | None = None
    input_shape: tuple | None = None
    lengths: Path | None = None


class Trainer(Protocol):
    """What an engine's ``train(request, network)`` hook returns.

    Attributes
    ----------
    config : the engine's configuration (written to ``train.json`` and the manifest)
    gradient_bound : float
        The largest difference of any weight gradient from PyTorch float64 autograd that
        the engine's arithmetic allows (documented by the engine).
    """

    config: Any
    gradient_bound: float

    def forward(self, network, inputs) -> np.ndarray:
        """The outputs of ``network`` (a :class:`nnrtl.gen.models.Network`) for ``inputs``
        (time-first for an RNN), float64."""
        ...

    def backward(self, grad_outputs) -> dict:
        """The gradients of the last :meth:`forward`'s weights, given the loss gradient at
        its outputs: ``{(layer index, field): ndarray}`` for every tensor field of every
        layer (:meth:`Layer.tensor_fields`)."""
        ...

    def counters(self) -> dict:
        """The last step's ``cycles``, ``useful_macs``, ``utilization`` (``None`` where the
        backend has none)."""
        ...

    # Optional: ``approximation`` (str or None, read after each step's backward): what
    # the engine deliberately computed differently from SGD in that step (e.g. η-LSTM's
    # MS1 pruning, MS2's skipped cells). That step's update is then not expected within
    # ``gradient_bound`` of the reference: it reports its difference and the
    # approximation, its ``within_bound`` is ``None`` (not applicable) and it does not
    # fail (the backend's own checks, e.g. an RTL pass bit-exact against the golden
    # model, still do). Steps without one are checked as usual.
    # Optional: ``takes_lengths = True``: ``forward(network, inputs, lengths=None)`` takes
    # each sequence's steps (``--lengths``; :mod:`nnrtl.gen.models.sequences`: outputs
    # past a sequence's end zero, a reverse direction from the sequence's last step).
    # Without it :func:`train` refuses ``--lengths`` for the engine, naming it.
    # Optional: ``observe_loss(loss)``, called with each step's loss (the whole model's,
    # a float) after ``forward`` and before ``backward`` (e.g. η-LSTM's MS2 predictor).
    # Optional: ``forward_networks() -> list | None``, per sample of the last forward the
    # network whose weights its forward pass used, when a pipelined engine's samples ran
    # with stale weights; the reference (:func:`reference_step`) then does the same.
    # Optional: ``input_gradient() -> ndarray``, after ``backward``: the gradient of the
    # loss at the last forward's inputs, float64, their shape (time first for an RNN),
    # within ``gradient_bound`` as the weight gradients are. An embedding in front of
    # the network needs it: without it :func:`train` refuses the model (a UsageError
    # naming the engine and the embedding's key) before running a step.


def sgd_step(network, gradients, lr):
    """``network`` after PyTorch's own ``torch.optim.SGD`` step on ``gradients``
    (``{(layer index, field): array}``, every tensor of the network)."""
    import torch

    from .models import from_torch, to_torch

    module = to_torch(network, torch.float64)
    parameters = module_parameters(network, module)
    if set(gradients) != set(parameters):
        missing = sorted(set(parameters) - set(gradients))
        extra = sorted(set(gradients) - set(parameters))
        raise ValueError(f"the engine's gradients miss {missing} and have extra {extra}")
    for key, parameter in parameters.items():
        grad = np.asarray(gradients[key], dtype=np.float64)
        if grad.shape != tuple(parameter.shape):
            raise ValueError(f"gradient of layer {key[0]} {key[1]} has shape {grad.shape}, "
                             f"not {tuple(parameter.shape)}")
        parameter.grad = torch.tensor(grad)
    torch.optim.SGD(list(parameters.values()), lr=lr).step()
    return from_torch(network, module)


def _run_module(module, network, inputs, lengths=None):
    with warnings.catch_warnings():
        # torch's note that its oneDNN kernels lack LSTM projections: it falls back to its
        # own implementation, which is the one wanted here.
        warnings.filterwarnings("ignore", "LSTM with projections is not supported")
        outputs = module(inputs) if lengths is None else module(inputs, None, lengths)
    return outputs[0] if network.is_rnn else outputs


def _stale_forward(module, stale, x):
    """``module`` (a CNN's ``nn.Sequential``) on ``x`` with the values of ``stale`` (the
    same layers, other weights) and the gradients of ``module``: each weighted layer's
    output is ``module``'s plus the detached difference to ``stale``'s."""
    import torch
    for layer, old in zip(module, stale, strict=True):
        y = layer(x)
        if any(True for _ in layer.parameters()):
            with torch.no_grad():
                shift = old(x) - y
            y = y + shift
        x = y
    return x


def _all_checked(verdicts):
    """``None`` if no verdict is a bool (no step was checked), else whether all checked
    ones hold."""
    checked = [v for v in verdicts if v is not None]
    return all(checked) if checked else None


def reference_step(network, batch, loss, lr, forward_networks=None):
    """The step in plain PyTorch float64: ``(loss, updated network)``.

    ``forward_networks`` (a CNN's; one network per sample, or None): the weights each
    sample's forward pass used when they are not ``network``'s -- a pipelined engine's
    stale weights (:meth:`Trainer.forward_networks`). The sample's values then come from
    them, its errors and gradients from ``network``'s weights, as the engine computes."""
    from .models.train_model import TrainModel

    value, updated = reference_model_step(TrainModel(network), batch, loss, lr,
                                          forward_networks)
    return value, updated.network


def reference_model_step(model, batch, loss, lr, forward_networks=None):
    """The step of ``model`` (a :class:`~nnrtl.gen.models.train_model.TrainModel`: its
    ``nn.Embedding``, network and ``Linear`` head, those it has) in plain PyTorch float64,
    one ``torch.optim.SGD`` over all: ``(loss, updated model)``; ``forward_networks`` as
    :func:`reference_step`'s."""
    import torch

    from .models import from_torch, to_torch

    network, head, embedding = model.network, model.head, model.embedding
    module = to_torch(network, torch.float64)
    parameters = list(module.parameters())
    inputs = batch.inputs
    if embedding is not None:
        lookup = torch.nn.Embedding.from_pretrained(torch.tensor(embedding.weight),
                                                    freeze=False)
        inputs = lookup(inputs)
        parameters.append(lookup.weight)
    if forward_networks is None:
        outputs = _run_module(module, network, inputs, batch.lengths)
    else:
        if network.is_rnn or len(forward_networks) != len(inputs):
            raise ValueError("forward_networks: one network per sample of a CNN's batch")
        outputs = torch.cat([
            _stale_forward(module, to_torch(stale, torch.float64), inputs[n:n + 1])
            for n, stale in enumerate(forward_networks)])
    used = loss_head(head, loss)
    if used is not None:
        head_module = to_torch(used, torch.float64)
        outputs = head_module(outputs)
        parameters += list(head_module.parameters())
    value = loss_value(outputs, batch, loss, network.is_rnn)
    value.backward()
    torch.optim.SGD(parameters, lr=lr).step()
    if used is not None:
        head = dataclasses.replace(head, layers=from_torch(used, head_module).layers
                                   + head.layers[len(used.layers):])
    return float(value.detach()), dataclasses.replace(
        model, network=from_torch(network, module), head=head,
        embedding=None if embedding is None else embedding.with_weight(
            lookup.weight.detach().numpy()))


class HostTrainer:
    """A trainer that runs the whole step on the host in PyTorch (float32 autograd), the
    gradient at its inputs included (:meth:`input_gradient`): the host part the engines
    share, and the reference engine of the interface's tests.

    Its gradients differ from float64 autograd by float32 rounding only:
    :attr:`gradient_bound` (``1e-4``) covers the models of the interface's tests (gradients
    of order one) with two orders of magnitude to spare."""

    gradient_bound = 1e-4

    def __init__(self, config=None):
        self.config = config
        self._module = self._network = self._outputs = self._inputs = None

    takes_lengths = True

    def forward(self, network, inputs, lengths=None):
        import torch

        from .models import to_torch

        self._network = network
        self._module = to_torch(network, torch.float32)
        self._inputs = torch.tensor(np.asarray(inputs, dtype=np.float32), requires_grad=True)
        self._outputs = _run_module(self._module, network, self._inputs, lengths)
        return self._outputs.detach().double().numpy()

    def backward(self, grad_outputs):
        import torch
        self._module.zero_grad()
        self._outputs.backward(torch.as_tensor(grad_outputs, dtype=torch.float32))
        return {key: parameter.grad.double().numpy()
                for key, parameter in module_parameters(self._network,
                                                         self._module).items()}

    def input_gradient(self):
        """The gradient of the loss at the last :meth:`forward`'s inputs (their shape,
        float64), from the last :meth:`backward`."""
        return self._inputs.grad.double().numpy()

    def counters(self):
        return {"cycles": None, "useful_macs": None, "utilization": None}


def _max_difference(a, b):
    pa, pb = a.parameters(), b.parameters()
    return max(float(np.max(np.abs(pa[name] - pb[name]), initial=0.0)) for name in pa)


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _placement_lines(engine, placement):
    """The log lines saying which layers run where."""
    lines = [f"train: {engine.name} runs {'; '.join(placement['engine'])}"]
    if placement["host"]:
        lines.append(f"train: the host runs (PyTorch) {'; '.join(placement['host'])}")
    if placement["unchanged"]:
        lines.append(f"train: written back unchanged (not picked by --prefix): "
                     f"{', '.join(placement['unchanged'])}")
    return lines


def _step(trainer, model, batch, request):
    """One SGD step of ``model`` (a TrainModel): ``(updated model, train.json record)``."""
    network, head, embedding = model.network, model.head, model.embedding
    lr = request.lr
    inputs = batch.inputs.numpy()
    lengths = {} if batch.lengths is None else {"lengths": batch.lengths}
    outputs = trainer.forward(network, inputs if embedding is None else
                              embedding.lookup(inputs), **lengths)
    used = loss_head(head, request.loss)
    if used is None:
        loss, grad_outputs = loss_and_gradient(outputs, batch, request.loss, network.is_rnn)
    else:
        loss, grad_outputs, head_gradients = head_loss_and_gradient(
            used, outputs, batch, request.loss)
    if hasattr(trainer, "observe_loss"):
        trainer.observe_loss(loss)
    updated = dataclasses.replace(
        model, network=sgd_step(network, trainer.backward(grad_outputs), lr))
    if used is not None:
        updated = dataclasses.replace(updated, head=sgd_step(head, head_gradients, lr))
    if embedding is not None:
        updated = dataclasses.replace(updated, embedding=embedding.sgd_step(
            inputs, trainer.input_gradient(), lr))
    approximation = getattr(trainer, "approximation", None)
    stale = getattr(trainer, "forward_networks", None)
    reference_loss, reference = reference_model_step(model, batch, request.loss, lr,
                                                     None if stale is None else stale())
    difference = _max_difference(updated.network, reference.network)
    record = {}
    if head is not None:
        record["head_update_max_abs_diff"] = _max_difference(updated.head, reference.head)
    if embedding is not None:
        record["embedding_update_max_abs_diff"] = float(np.max(np.abs(
            updated.embedding.weight - reference.embedding.weight)))
    difference = max([difference, *record.values()])
    bound = lr * trainer.gradient_bound
    within = None if approximation else bool(difference <= bound)
    return updated, {"loss": loss, "reference_loss": reference_loss, **trainer.counters(),
                     "update_max_abs_diff": difference, **record, "update_bound": bound,
                     "within_bound": within,
                     **({"approximation": approximation} if approximation else {})}


def _step_line(step, count, record):
    """The log line of a step's ``record``."""
    parts = [f"{name} {record[f'{name}_update_max_abs_diff']:.3g}"
             for name in ("head", "embedding") if f"{name}_update_max_abs_diff" in record]
    approximation = record.get("approximation")
    parts = f" ({', '.join(parts)})" if parts else ""
    return (f"train: step {step + 1}/{count}: loss {record['loss']:.6g} (float64 reference "
            f"{record['reference_loss']:.6g}), update within "
            f"{record['update_max_abs_diff']:.3g}{parts} of the reference " + (
                f"(bound {record['update_bound']:.3g})" if not approximation else
                f"(not bounded: {approximation})"))


def train(engine, hook, request, output, *, force=False):
    """Run ``request.steps`` SGD steps of ``engine`` (its ``train`` hook ``hook``) and write
    the output directory; return the summary (also in ``train.json``).

    Raises
    ------
    UsageError
        A bad request, model or array (exit 2; nothing written), or an embedding in front
        of the network with a trainer that has no :meth:`Trainer.input_gradient`.
    """
    from .emit import tool_versions
    from .models import load_array
    from .models.train_model import load_train_model, save_train_model

    if request.loss not in LOSSES:
        raise UsageError(f"--loss must be one of {', '.join(LOSSES)}, not {request.loss!r}")
    if request.backend not in BACKENDS:
        raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, not "
                         f"{request.backend!r}")
    if request.steps <= 0:
        raise UsageError(f"--steps must be a positive integer, not {request.steps}")
    if not (np.isfinite(request.lr) and request.lr > 0):
        raise UsageError(f"--lr must be a positive number, not {request.lr}")
    start = time.monotonic()
    model = load_train_model(request.model, prefix=request.prefix)
    network, embedding = model.network, model.embedding
    lengths = None if request.lengths is None else load_array(
        request.lengths, what="--lengths", ndim=1, keep_dtype=True)
    batch = prepare_batch(network, load_array(request.inputs, what="--inputs",
                                              keep_dtype=True),
                          load_array(request.targets, what="--targets"), request.loss,
                          model.head, embedding, lengths)
    shape = tuple(batch.inputs.shape)
    if embedding is not None:
        shape += (embedding.embedding_dim,)
    placement = model.placement()
    trainer = hook(dataclasses.replace(request, input_shape=shape), network)
    if batch.lengths is not None and not getattr(trainer, "takes_lengths", False):
        raise UsageError(f"the {engine.name} engine's trainer runs every sequence of a "
                         f"batch to its end: it does not take --lengths")
    if embedding is not None and not callable(getattr(trainer, "input_gradient", None)):
        raise UsageError(f"the {engine.name} engine's trainer gives no gradient at the "
                         f"network's inputs: it cannot train the embedding {embedding.key} "
                         f"in front of the RNN")
    if request.log is not None:
        for line in _placement_lines(engine, placement):
            request.log(line)
    steps = []
    for step in range(request.steps):
        model, record = _step(trainer, model, batch, request)
        steps.append({"step": step, **record})
        if request.log is not None:
            request.log(_step_line(step, request.steps, record))
    network = model.network
    config = trainer.config
    summary = {
        "engine": engine.name, "board": request.board.name, "model": str(request.model),
        "format": network.format, "loss": request.loss, "lr": request.lr,
        "backend": request.backend, "gradient_bound": trainer.gradient_bound,
        "config": None if config is None else dataclasses.asdict(config),
        "prefix": request.prefix, "placement": placement,
        "lengths": None if batch.lengths is None else batch.lengths.tolist(),
        # None when every step was an approximation, else whether the checked steps hold
        "within_bound": _all_checked(s["within_bound"] for s in steps),
        "steps": steps, "seconds": round(time.monotonic() - start, 3),
    }
    with staged_directory(output, force=force) as staging:
        model_file = staging / f"model{''.join(Path(request.model).suffixes) or '.pt'}"
        save_train_model(model, model_file)
        (staging / "train.json").write_text(json.dumps(summary, indent=2) + "\n")
        files = sorted(p.name for p in staging.iterdir())
        (staging / MANIFEST).write_text(json.dumps({
            "engine": engine.name, "command": "train", "board": request.board.name,
            "parameters": summary["config"], "tools": tool_versions(),
            "files": {name: _sha256(staging / name) for name in files},
        }, indent=2) + "\n")
    summary["output"] = str(output)
    summary["model_file"] = str(Path(output) / model_file.name)
    return {key: summary[key] for key in ("engine", "output", "model_file", "within_bound",
                                           "seconds")} | {"loss": [s["loss"] for s in steps]}

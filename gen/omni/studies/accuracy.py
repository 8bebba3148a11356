"""Accuracy of MS1, MS2 and both against unmodified PyTorch training on two real tasks.

``python -m nnrtl.gen.omni.studies.accuracy [--quick]`` trains, for the same epochs, seed,
initial weights and batch order, (1) ``nn.LSTM`` with PyTorch autograd (the baseline) and
(2-4) the η-LSTM decomposition (:mod:`.training`) with MS1, MS2, and both; it prints one
JSON line per task and run (final accuracy or perplexity, the relative difference from
the baseline, the measured P1 density, skipped cells, rows and the bytes stored per
iteration) and a summary line. ``--sweep [--seed K] [--seeds N] [--both θ/F,...]
[--scaling S] [-o DIR]``: the multi-seed threshold sweep of :mod:`.accuracy_sweep` (MS1
alone, MS2 alone and both together, seeds K .. K + N - 1; its measurements and the
defaults chosen from them); ``--summarise PATH...`` pools recorded sweeps (one per seed,
say) into its summary and markdown tables (:mod:`.accuracy_report`); ``--grad-clip X``
clips the gradient norm of both trainings (:class:`TaskSpec`); ``--epochs N`` trains
both for N epochs instead of the task's.

Tasks (data shipped inside installed packages, nothing downloaded):

* ``digits`` -- single loss. scikit-learn's handwritten digits (1,797 8 x 8 images),
  each read row by row as an 8-step sequence of 8 pixels (scaled to [0, 1]); the class
  from the last step's output; a fixed 80/20 split. Metric: test accuracy.
* ``text`` -- per-timestamp loss. A character-level language model on the text of
  CPython's ``pydoc_data/topics.py`` (the stdlib's help topics; its text depends on the
  Python version), one-hot characters, the next character predicted at every step.
  Training on the first ``train_chars``, validation on the next ``valid_chars``.
  Metric: validation perplexity.

Optimizer (the paper names none [U]): ``torch.optim.Adam`` for the digits,
``torch.optim.SGD`` with momentum 0.9 for the language model (it reaches a lower
perplexity than Adam in the same epochs); float32; one thread.

The measurements (spec §7.6's 1 % on ten text and eight digits seeds, the single-seed
runs at θ 0.1 and why the text task lost more there, what θ prunes, the MS1 and MS2
trade-offs, the multi-seed sweeps and the chosen defaults) are recorded with their
commands in ``docs/engines/omni/accuracy.md``; :mod:`.accuracy_report` renders the
sweeps' tables and :mod:`.accuracy_sweep` runs them.
"""

import argparse
import dataclasses
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from ..cell import PART1, bp_ew_part1
from ..skipping import SCALINGS, SkipController, magnitude_map
from ..training import MsConfig, backward, forward, layers_from_module

__all__ = ["TaskSpec", "TASKS", "QUICK", "load_task", "train_run", "compare",
           "pruned_share", "main"]


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A task's model and schedule. ``grad_clip`` > 0: the gradient's L2 norm over all
    the parameters is clipped to it before every step (``clip_grad_norm_``), for the
    baseline and the decomposition alike; 0 (the default of both tasks): no clipping."""

    name: str
    loss_type: str
    hidden_size: int
    layers: int
    epochs: int
    batch: int
    lr: float
    seq_len: int = 8
    train_chars: int = 0
    valid_chars: int = 0
    optimizer: str = "adam"
    momentum: float = 0.9
    prune_threshold: float = 0.1
    skip_threshold: float = 0.02
    grad_clip: float = 0.0


TASKS = {
    "digits": TaskSpec("digits", "single", hidden_size=64, layers=2, epochs=20, batch=32,
                       lr=5e-3),
    "text": TaskSpec("text", "per-timestamp", hidden_size=64, layers=2, epochs=20,
                     batch=64, lr=1.0, optimizer="sgd", seq_len=40, train_chars=64_000,
                     valid_chars=16_000),
}
#: Tiny versions for the fast tests (seconds).
QUICK = {
    "digits": dataclasses.replace(TASKS["digits"], hidden_size=16, epochs=5),
    "text": dataclasses.replace(TASKS["text"], hidden_size=24, epochs=5, seq_len=20,
                                batch=32, train_chars=6_400, valid_chars=2_000),
}


def _digits():
    import torch

    from ...optional import require
    require("sklearn", "the omni accuracy's digits task")
    from sklearn.datasets import load_digits
    data = load_digits()
    images = torch.tensor(data.images / 16.0, dtype=torch.float32)      # N x 8 x 8
    labels = torch.tensor(data.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    cut = int(0.8 * len(order))
    train, test = order[:cut], order[cut:]
    return dict(train=(images[train], labels[train]), test=(images[test], labels[test]),
                classes=10, features=8)


def _text(spec):
    import torch

    path = importlib.util.find_spec("pydoc_data.topics").origin
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    vocabulary = {char: code for code, char in enumerate(sorted(set(text)))}
    codes = torch.tensor([vocabulary[c] for c in text[:spec.train_chars
                                                       + spec.valid_chars + 1]])
    chunks = []
    for start, size in ((0, spec.train_chars), (spec.train_chars, spec.valid_chars)):
        count = size // spec.seq_len
        span = codes[start:start + count * spec.seq_len + 1]
        inputs = span[:-1].reshape(count, spec.seq_len)
        targets = span[1:].reshape(count, spec.seq_len)
        chunks.append((inputs, targets))
    return dict(train=chunks[0], test=chunks[1], classes=len(vocabulary),
                features=len(vocabulary))


def load_task(spec):
    """The task's data: ``{"train": (inputs, targets), "test": ..., "classes",
    "features"}``, sequences batch first (digits: N x 8 x 8 floats; text: N x T codes)."""
    return _digits() if spec.name == "digits" else _text(spec)


def _inputs(task, spec, batch):
    """Time-first float inputs of a batch of sequences."""
    import torch

    if spec.name == "digits":
        return batch.transpose(0, 1).contiguous()
    return torch.nn.functional.one_hot(batch.t(), task["features"]).float()


def _loss(head, ys, targets, loss_type):
    import torch

    if loss_type == "single":
        return torch.nn.functional.cross_entropy(head(ys[-1]), targets)
    logits = head(ys)                                                     # T x B x C
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.t().reshape(-1))


def _evaluate(task, spec, run_lstm, head):
    import torch

    inputs, targets = task["test"]
    with torch.no_grad():
        ys = run_lstm(_inputs(task, spec, inputs))
        if spec.loss_type == "single":
            return float((head(ys[-1]).argmax(1) == targets).double().mean())
        return math.exp(float(_loss(head, ys, targets, spec.loss_type)))


def train_run(spec, config=None, seed=1, task=None):
    """Train one model; ``config`` ``None`` = the baseline (``nn.LSTM`` and autograd),
    else an :class:`~.training.MsConfig`. Returns a dict of the final metric, the loss
    per epoch, the measured densities and bytes, and the seconds taken."""
    import torch

    task = task or load_task(spec)
    torch.manual_seed(seed)
    module = torch.nn.LSTM(task["features"], spec.hidden_size, num_layers=spec.layers)
    head = torch.nn.Linear(spec.hidden_size, task["classes"])
    if config is None:
        parameters = list(module.parameters()) + list(head.parameters())
    else:
        layers = layers_from_module(module)
        for layer in layers:
            for value in layer.values():
                value.requires_grad_(False)
        parameters = [v for layer in layers for v in layer.values()] + list(head.parameters())
        controller = SkipController(spec.layers, spec.seq_len, spec.loss_type,
                                    config.skip_threshold if config.ms2 else 0.0,
                                    scaling=config.scaling)
    if spec.optimizer == "adam":
        optimizer = torch.optim.Adam(parameters, lr=spec.lr)
    else:
        optimizer = torch.optim.SGD(parameters, lr=spec.lr, momentum=spec.momentum)
    inputs, targets = task["train"]
    order_rng = torch.Generator().manual_seed(seed)
    losses, skipped, stored, density, rows = [], [], [], [], []
    dropped, clipped = [], []
    start = time.perf_counter()
    for epoch in range(1, spec.epochs + 1):
        if config is not None:
            kept, factors, predicted = controller.plan(epoch)
            measure = controller.wants_measurements(epoch)
            skipped.append(float(1 - kept.mean()))
            if predicted is not None and controller.alpha is not None and not kept.all():
                predicted_map = magnitude_map(controller.alpha, predicted, spec.layers,
                                              spec.seq_len, spec.loss_type)
                dropped.append(controller.dropped_share(kept, predicted_map))
        order = torch.randperm(len(targets), generator=order_rng)
        epoch_losses = []
        for begin in range(0, len(order), spec.batch):
            index = order[begin:begin + spec.batch]
            xs, y = _inputs(task, spec, inputs[index]), targets[index]
            optimizer.zero_grad()
            if config is None:
                loss = _loss(head, module(xs)[0], y, spec.loss_type)
                loss.backward()
            else:
                ys, tape = forward(layers, xs, config, kept)
                ys.requires_grad_(True)
                loss = _loss(head, ys, y, spec.loss_type)
                loss.backward()
                grads, info = backward(layers, tape, ys.grad, factors, measure)
                for layer, grad in zip(layers, grads):
                    for field, value in grad.items():
                        layer[field].grad = value
                if measure:
                    controller.observe(info["magnitudes"], loss.item())
                stored.append(tape.stored["activations"] + tape.stored["intermediates"])
                if config.ms1:
                    density.append(tape.stored["p1_survivors"] / tape.stored["p1_values"])
                rows.append(float(np.mean(info["rows"])))
            if spec.grad_clip:
                norm = torch.nn.utils.clip_grad_norm_(parameters, spec.grad_clip)
                clipped.append(float(norm) > spec.grad_clip)
            optimizer.step()
            epoch_losses.append(loss.item())
        losses.append(float(np.mean(epoch_losses)))
        if config is not None:
            controller.end_epoch(losses[-1])
    if config is None:
        metric = _evaluate(task, spec, lambda xs: module(xs)[0], head)
    else:
        metric = _evaluate(task, spec, lambda xs: forward(layers, xs)[0], head)
    result = dict(task=spec.name, run="pytorch" if config is None else config.name,
                  metric="accuracy" if spec.loss_type == "single" else "perplexity",
                  value=metric, epochs=spec.epochs, losses=losses,
                  seconds=round(time.perf_counter() - start, 1))
    if spec.grad_clip:
        result["clipped_share"] = float(np.mean(clipped))     # of the steps
    if config is not None:
        result.update(skipped_per_epoch=skipped, rows=float(np.mean(rows)),
                      stored_bytes_per_iteration=float(np.mean(stored)))
        if dropped:
            # MS2: the mean over the skipping epochs of the gradient-magnitude share of the
            # skipped cells, as eq. 4 predicts it and as epoch 1 measured it
            result.update(dropped_predicted=float(np.mean([d[0] for d in dropped])),
                          dropped_measured=float(np.mean([d[1] for d in dropped])))
        if config.ms1:
            result["p1_density"] = float(np.mean(density))
    return result


def compare(spec, seed=1, prune_threshold=None, skip_threshold=None):
    """PyTorch, the decomposition without MS, MS1, MS2 and both on one task: a list of
    :func:`train_run` results, each with ``relative_difference`` (``(value - pytorch) /
    pytorch``) and, for the decomposition's runs, ``stored_reduction`` (bytes stored
    between FW and BP per iteration against the decomposition without MS)."""
    task = load_task(spec)
    prune_threshold = spec.prune_threshold if prune_threshold is None else prune_threshold
    skip_threshold = spec.skip_threshold if skip_threshold is None else skip_threshold
    configs = [None] + [MsConfig(ms1=ms1, ms2=ms2, prune_threshold=prune_threshold,
                                   skip_threshold=skip_threshold, loss_type=spec.loss_type)
                        for ms1, ms2 in ((False, False), (True, False), (False, True),
                                         (True, True))]
    results = [train_run(spec, config, seed, task) for config in configs]
    base = results[0]["value"]
    stored = results[1]["stored_bytes_per_iteration"]
    for result in results:
        result["relative_difference"] = (result["value"] - base) / base
        if "stored_bytes_per_iteration" in result:
            result["stored_reduction"] = 1 - result["stored_bytes_per_iteration"] / stored
    return results


def _shares(task, spec, module, threshold, samples=256):
    """Per P1 vector and layer: ``[share of values, share of L1 mass]`` below
    ``threshold`` on the first ``samples`` training sequences."""
    import torch

    layers = layers_from_module(module)
    inputs = task["train"][0][:samples]
    with torch.no_grad():
        _, tape = forward(layers, _inputs(task, spec, inputs))
    out = {name: [] for name in PART1}
    for taped in tape.layers:
        part1 = torch.stack([bp_ew_part1(gates, s, s_prev) for (gates, s), s_prev
                             in zip(taped["cells"], taped["s_prev"])]).abs()
        for k, name in enumerate(PART1):
            values = part1[:, :, k]
            small = values < threshold
            out[name].append([round(float(small.double().mean()), 3),
                              round(float(values[small].sum() / values.sum()), 3)])
    return out


def pruned_share(spec, seed=1, threshold=None):
    """What MS1's pruning removes, along unmodified PyTorch training of ``spec``: per P1
    vector (:data:`.cell.PART1`) and layer, the share of the values below θ and their
    share of the vector's L1 mass, at initialisation, after epoch 1 and after the last
    epoch. A list of dicts (``at``, then one ``[count, mass]`` pair per layer for each
    vector)."""
    import torch

    threshold = spec.prune_threshold if threshold is None else threshold
    task = load_task(spec)
    torch.manual_seed(seed)
    module = torch.nn.LSTM(task["features"], spec.hidden_size, num_layers=spec.layers)
    head = torch.nn.Linear(spec.hidden_size, task["classes"])
    parameters = list(module.parameters()) + list(head.parameters())
    optimizer = (torch.optim.Adam(parameters, lr=spec.lr) if spec.optimizer == "adam" else
                 torch.optim.SGD(parameters, lr=spec.lr, momentum=spec.momentum))
    inputs, targets = task["train"]
    order_rng = torch.Generator().manual_seed(seed)
    results = [dict(task=spec.name, at="init", **_shares(task, spec, module, threshold))]
    for epoch in range(1, spec.epochs + 1):
        order = torch.randperm(len(targets), generator=order_rng)
        for begin in range(0, len(order), spec.batch):
            index = order[begin:begin + spec.batch]
            optimizer.zero_grad()
            ys = module(_inputs(task, spec, inputs[index]))[0]
            _loss(head, ys, targets[index], spec.loss_type).backward()
            optimizer.step()
        if epoch in (1, spec.epochs):
            results.append(dict(task=spec.name, at=f"epoch {epoch}",
                                **_shares(task, spec, module, threshold)))
    return results


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


def _thresholds(text):
    if text == "none":                          # --sweep: no MS1-alone / MS2-alone runs
        return ()
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers, not "
                                         f"{text!r}") from None
    if not all(0 <= v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"must be numbers from 0 to below 1, not {text!r}")
    return values


def _pairs(text):
    """``--both``: ``θ/F[,θ/F...]`` as a tuple of float pairs, each in [0, 1)."""
    pairs = []
    for item in text.split(","):
        parts = item.split("/")
        try:
            pairs.append(_thresholds(",".join(parts)) if len(parts) == 2 else None)
        except argparse.ArgumentTypeError:
            pairs.append(None)
        if pairs[-1] is None:
            raise argparse.ArgumentTypeError(f"must be comma-separated THETA/F pairs of "
                                             f"numbers from 0 to below 1, not {text!r}")
    return tuple(pairs)


def _run_sweep(args, specs):
    from .accuracy_report import summary_table, write_outputs
    from .accuracy_sweep import BOTH_THRESHOLDS, PRUNE_THRESHOLDS, SKIP_THRESHOLDS, sweep
    lines, rows = [], []

    def emit(line):
        lines.append(line)
        print(json.dumps(line), flush=True)

    start = time.perf_counter()
    for name in args.task or sorted(specs):
        rows += sweep(specs[name], range(args.seed, args.seed + args.seeds),
                      PRUNE_THRESHOLDS if args.prune_thresholds is None
                      else args.prune_thresholds,
                      SKIP_THRESHOLDS if args.skip_thresholds is None
                      else args.skip_thresholds, emit,
                      BOTH_THRESHOLDS if args.both is None else args.both,
                      args.scaling or MsConfig.scaling)
    print(summary_table(rows))
    print(f"wall time {time.perf_counter() - start:.0f} s")
    if args.output is not None:
        write_outputs(args.output, lines, rows)
    return 0


def _summarise_files(paths):
    from ...errors import UsageError
    from .accuracy_report import markdown_tables, summary_table
    from .accuracy_sweep import rows_from_files
    try:
        rows, _ = rows_from_files(paths)
    except UsageError as error:
        print(f"python -m nnrtl.gen.omni.studies.accuracy: error: --summarise: {error}",
              file=sys.stderr)
        return 2
    for row in rows:
        print(json.dumps(row))
    print(summary_table(rows))
    print(markdown_tables(rows))
    return 0


def main(argv=None):
    import torch

    parser = argparse.ArgumentParser(prog="python -m nnrtl.gen.omni.studies.accuracy",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny versions")
    parser.add_argument("--task", choices=sorted(TASKS), action="append")
    parser.add_argument("--seed", type=int, default=1, help="the seed (--sweep: the "
                        "first of --seeds consecutive seeds; default 1)")
    parser.add_argument("--prune-threshold", type=float, help="MS1's θ (default: the "
                        "task's)")
    parser.add_argument("--skip-threshold", type=float, help="MS2's threshold (default: "
                        "the task's)")
    parser.add_argument("--pruned-share", action="store_true", help="instead: the share "
                        "of the P1 values and of their L1 mass below θ along PyTorch "
                        "training (pruned_share)")
    parser.add_argument("--sweep", action="store_true", help="instead: the multi-seed "
                        "threshold sweep of MS1 and MS2 (accuracy_sweep.sweep)")
    parser.add_argument("--seeds", type=_positive, default=3, help="--sweep: N seeds from "
                        "--seed on (default 3)")
    parser.add_argument("--prune-thresholds", type=_thresholds, help="--sweep: MS1's θ "
                        "values, comma-separated, or none (default 0.1,0.05,0.03,0.01)")
    parser.add_argument("--skip-thresholds", type=_thresholds, help="--sweep: MS2's "
                        "thresholds, comma-separated, or none (default 0.02,0.005,0.001)")
    parser.add_argument("--both", type=_pairs, help="--sweep: MS1 and MS2 together at "
                        "these THETA/F pairs, comma-separated (default: the documented "
                        "defaults, MsConfig's)")
    parser.add_argument("--scaling", choices=SCALINGS, help="MS2's scaling factor "
                        "(default: MsConfig's)")
    parser.add_argument("--grad-clip", type=_positive_float, help="clip the gradient's "
                        "L2 norm to this before every step (baseline and decomposition "
                        "alike; default: none)")
    parser.add_argument("--epochs", type=_positive, help="train this many epochs (both "
                        "trainings; default: the task's)")
    parser.add_argument("-o", "--output", help="--sweep: write sweep.jsonl and sweep.png "
                        "to this directory")
    parser.add_argument("--summarise", nargs="+", metavar="PATH", help="instead: the "
                        "setting rows, summary and markdown tables of recorded sweeps "
                        "(sweep.jsonl files or directories holding them, pooled per "
                        "task: seed-by-seed runs summarised together)")
    args = parser.parse_args(argv)
    if args.summarise:
        return _summarise_files(args.summarise)
    if args.output is not None and not args.sweep:
        parser.error("-o/--output is for --sweep only")
    if args.output is not None and Path(args.output).exists() and \
            not Path(args.output).is_dir():
        parser.error(f"-o/--output: {args.output} exists and is not a directory")
    torch.set_num_threads(1)
    specs = QUICK if args.quick else TASKS
    if args.grad_clip:
        specs = {name: dataclasses.replace(spec, grad_clip=args.grad_clip)
                 for name, spec in specs.items()}
    if args.epochs:
        specs = {name: dataclasses.replace(spec, epochs=args.epochs)
                 for name, spec in specs.items()}
    if args.sweep:
        return _run_sweep(args, specs)
    if args.pruned_share:
        for name in args.task or sorted(specs):
            for result in pruned_share(specs[name], args.seed, args.prune_threshold):
                print(json.dumps(result), flush=True)
        return 0
    worst = 0.0
    for name in args.task or sorted(specs):
        for result in compare(specs[name], args.seed, args.prune_threshold,
                              args.skip_threshold):
            print(json.dumps(result), flush=True)
            worst = max(worst, abs(result["relative_difference"]))
    print(json.dumps({"largest_relative_difference": worst, "within_1_percent": worst
                      <= 0.01}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

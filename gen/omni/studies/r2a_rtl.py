"""Dynamic against static R2A allocation measured on the η-LSTM top's RTL: ``python -m
nnrtl.gen.omni.studies.r2a_rtl --out DIR [SHAPE ...]`` writes ``r2a_rtl.json`` and
``r2a_rtl.md`` (the omni bench's ``rtl_allocation`` part, full set).

Each Table I shape (default TREC-10, PTB, IMDB) is scaled to simulate in minutes
(:func:`rtl_shape`: its layers, length / 36 rounded up and at least 2, hidden and input
16, batch 1, on 4 channels of 4 Omni-PEs with 2 swing channels) and one training step
(FW and BP, the tiled graph of :class:`~..top_passes.StepGraph`, random weights and
data) runs through the top under Verilator (:class:`~..train_top.RtlTop`) three ways:
``dynamic`` (R2A: the own workload split, swing channels), ``static`` (the same split,
``swing_mask`` 0) and ``static_trec10`` (TREC-10's split on every shape, the paper's
Static-Arch). The figures are the RTL's counters: ``cycles``, per-kind busy channel-cycles,
swings; ``utilization`` = useful MACs / (PEs x cycles); every beat bit-exact. Beside them:
``model_cycles`` (:func:`~..perf.step_cycles`, the R2A model of the same graph, equal to
the RTL's), and what bounds each run: ``critical_path`` (the longest dependency chain of
task cycles, per window) and ``work_bound`` (the channel-cycles of the tasks / channels);
``cycles`` can be below neither; a static run also not below ``matmul_bound`` (the
MatMul tasks' channel-cycles / the MatMul group's channels). The paper's figure is performance, not utilization:
Dyn-Arch 1.42x and Static-Arch 0.97x the V100's (Fig. 15), a ratio of 1.46x (labelled
as the paper's; it gives no utilization).
"""

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["SHAPES", "PAPER_RATIO", "rtl_shape", "measure", "rows", "matmul_bound",
           "markdown", "main"]

#: The shapes measured by default.
SHAPES = ("TREC-10", "PTB", "IMDB")
#: Dyn-Arch over Static-Arch implied by the paper's Fig. 15 speedups (1.42x / 0.97x).
PAPER_RATIO = 1.42 / 0.97


def rtl_shape(workload):
    """The :class:`~nnrtl.hw.omni.top_config.OmniConfig` of a Table I ``workload``
    scaled for the RTL (module docstring), with one HBM port (the baseline runs move
    nothing through the DMAs; one keeps the Verilator build small)."""
    from nnrtl.hw.omni.top_config import OmniConfig
    return OmniConfig(input_size=16, hidden_size=16, layers=workload.layers,
                      seq_len=max(2, math.ceil(workload.length / 36)), batch=1, channels=4,
                      pes_per_channel=4, swing_channels=2, max_tasks=64, hbm_ports=1)


def _splits(top):
    """``(own, trec10)``: EW-group channels of the top's own split (the ``ew_mask``
    reset) and of scaled TREC-10's (Static-Arch)."""
    from nnrtl.hw.omni.workload import Workload, static_split, training_graph

    from ..accounting import TABLE_I
    from ..perf import ew_channels

    trec = rtl_shape(TABLE_I["TREC-10"])
    workload = Workload(input_size=trec.input_size, hidden_size=trec.hidden_size,
                        layers=trec.layers, length=trec.seq_len, batch=trec.batch)
    return ew_channels(top), static_split(training_graph(workload, tiles=top.channels),
                                          top.r2a)


def _bounds(top, graphs):
    """``(critical_path, work_bound)`` of the runs' graphs (windows as the top runs them)."""
    from ..perf import top_task_cycles
    from ..top_passes import windows

    path = work = 0
    for graph in graphs:
        for _, window in windows(graph.tasks, top.max_tasks):
            finish = []
            for task in window:
                finish.append(top_task_cycles(task) + max(
                    (finish[d] for d in task.deps), default=0))
                work += top_task_cycles(task)
            path += max(finish)
    return path, math.ceil(work / top.channels)


def _network(top, seed):
    """A random LSTM stack of ``top``'s sizes: weights and biases ``U(-1/sqrt(H),
    1/sqrt(H))``, PyTorch's initial scale."""
    from nnrtl.gen.models import LSTM, Network

    rng = np.random.default_rng(seed)
    h, scale = top.hidden_size, 1 / math.sqrt(top.hidden_size)
    return Network(layers=tuple(LSTM(
        weight_ih=rng.uniform(-scale, scale, (4 * h, top.layer_input(l))),
        weight_hh=rng.uniform(-scale, scale, (4 * h, h)),
        bias_ih=rng.uniform(-scale, scale, 4 * h), bias_hh=rng.uniform(-scale, scale, 4 * h))
        for l in range(top.layers)))


def measure(name, *, seed=1, log=None):
    """The three runs of shape ``name`` (module docstring): a dict with ``shape``,
    ``config``, ``useful_macs``, ``critical_path``, ``work_bound`` and per allocation
    (``dynamic``, ``static``, ``static_trec10``) its ``ew_channels``, ``cycles``,
    ``model_cycles``, ``utilization``, ``busy_matmul``, ``busy_ew``, ``swings``,
    ``returns``, ``seconds``."""
    from ..accounting import TABLE_I
    from ..top_passes import StepGraph
    from ..trainer import OmniTrainConfig, OmniTrainer

    top = rtl_shape(TABLE_I[name])
    network = _network(top, seed)
    config = OmniTrainConfig(tuple(top.layer_channel(l) for l in range(top.layers)),
                             top.seq_len, top.batch, top=top)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (top.seq_len, top.batch, top.input_size))
    grads = rng.uniform(-1, 1, (top.seq_len, top.batch, top.hidden_size)) / x.size
    own, trec = _splits(top)
    kept = np.ones((top.layers, top.seq_len), bool)
    graphs = [StepGraph.of_shape(top, phase, kept, False) for phase in ("fw", "bp")]
    path, work = _bounds(top, graphs)
    result = {"shape": name, "config": dataclasses.asdict(top), "critical_path": path,
              "work_bound": work}
    trainer = OmniTrainer(config, "rtl", seed=seed, log=log)
    for label, split, dynamic in (("dynamic", own, True), ("static", own, False),
                                  ("static_trec10", trec, False)):
        start = time.monotonic()
        trainer.rtl_top.allocation = {"ew_channels": split, "dynamic": dynamic}
        trainer.forward(network, x)
        trainer.backward(grads)
        counters = trainer.counters()
        result["useful_macs"] = counters["useful_macs"]
        result[label] = {"ew_channels": split, **{key: counters[key] for key in (
            "cycles", "model_cycles", "utilization", "busy_matmul", "busy_ew", "swings")},
            "returns": sum(run["returns"] for run in counters["runs"]),
            "seconds": round(time.monotonic() - start, 1)}
        if log:
            log(f"r2a_rtl: {name} {label}: {counters['cycles']} cycles")
    result["gain"] = result["static"]["cycles"] / result["dynamic"]["cycles"]
    result["gain_trec10"] = result["static_trec10"]["cycles"] / result["dynamic"]["cycles"]
    return result


def rows(shapes=SHAPES, *, seed=1, log=None):
    """:func:`measure` of every shape."""
    return [measure(name, seed=seed, log=log) for name in shapes]


def matmul_bound(result):
    """A static run's lower bound: its MatMul tasks' channel-cycles over the MatMul
    group's channels (``channels - ew_channels``)."""
    static = result["static"]
    return math.ceil(static["busy_matmul"]
                     / (result["config"]["channels"] - static["ew_channels"]))


def markdown(results):
    """The markdown table of :func:`rows`' results."""
    lines = ["## R2A dynamic against static allocation, measured on the top RTL", "",
             "One training step (FW + BP, tiled graph) per shape under Verilator, scaled: "
             "hidden 16, batch 1, length / 36, 4 channels x 4 PEs, 2 swing channels; "
             "cycles are the RTL's counter (the R2A model's equal them: `model`). "
             "Bounds: the critical path and the work per channel (task cycles / channels). "
             f"Paper (Fig. 15, performance over the V100): Dyn-Arch 1.42x, Static-Arch "
             f"0.97x, ratio {PAPER_RATIO:.2f}x; the paper gives no utilization.", "",
             "| shape | L x T | EW ch. (own / TREC) | dynamic | static | static TREC-10 | "
             "gain | gain vs TREC split | swings | critical path | work bound | "
             "static MatMul bound | model = RTL |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        d, s, t = r["dynamic"], r["static"], r["static_trec10"]
        same = all(v["cycles"] == v["model_cycles"] for v in (d, s, t))
        lines.append(
            f"| {r['shape']} | {r['config']['layers']} x {r['config']['seq_len']} | "
            f"{d['ew_channels']} / {t['ew_channels']} | "
            f"{100 * d['utilization']:.1f}% ({d['cycles']:,}) | "
            f"{100 * s['utilization']:.1f}% ({s['cycles']:,}) | "
            f"{100 * t['utilization']:.1f}% ({t['cycles']:,}) | {r['gain']:.3f}x | "
            f"{r['gain_trec10']:.3f}x | {d['swings']} | {r['critical_path']:,} | "
            f"{r['work_bound']:,} | {matmul_bound(r):,} | {'yes' if same else 'no'} |")
    return "\n".join(lines + [""])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nnrtl.gen.omni.studies.r2a_rtl",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("shapes", nargs="*", default=list(SHAPES))
    args = parser.parse_args(argv)
    from ..accounting import TABLE_I
    unknown = [s for s in args.shapes if s not in TABLE_I]
    if unknown:
        parser.error(f"shape must be one of {', '.join(TABLE_I)}, not {unknown[0]!r}")
    args.out.mkdir(parents=True, exist_ok=True)
    results = rows(args.shapes, seed=args.seed, log=lambda line: print(line, flush=True))
    (args.out / "r2a_rtl.json").write_text(json.dumps(results, indent=1))
    (args.out / "r2a_rtl.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

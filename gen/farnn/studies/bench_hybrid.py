"""FARNN bench, the system (:mod:`..hybrid`): the paper's Figs. 7, 8 and 10 analogues, one
training step of 5 RNN layers on the paper's GPU (modelled from its published figures)
with the VU9P engine (the cycle model of the paper's designs), beside the GPU alone
(cuDNN's standard and persistent algorithms, modelled).

* Fig. 7: cells per layer (T = 1,600, batch 1); the LSTM on the paper's 4K design
  (:data:`~nnrtl.hw.farnn.presets.VU9P_LSTM1024`), the GRU on the exploration's 8K design
  (:data:`~nnrtl.hw.farnn.presets.VU9P_GRU1280`); a size whose layer does not fit on chip
  is left out.
* Fig. 8: sequence length (1,024 LSTM cells, 1,280 GRU cells, batch 1).
* Fig. 10: the off-loading strategies at T = 800 (1,024 LSTM cells, batch 1), normalized
  to FARNN.

Every row names its bound (the busiest of the FPGA, PCIe and the GPU) and which inputs
were modelled; the paper's statements stand beside them as the paper's.
"""

from pathlib import Path

from ...baseline.gpu_model import (P100, Workload, gpu_only_seconds, measure_gpu_only,
                                   measure_tasks)
from ..hybrid import STRATEGIES, farnn_seconds, fpga_config

__all__ = ["hybrid_rows", "hybrid_markdown", "plot_hybrid", "PAPER"]

#: The paper's statements these figures are read against (Sec. 6.2), its own words.
PAPER = {
    "fig7": "1,024 LSTM cells: FARNN-9P 52% less time than cuDNN-PD; 1,280 GRU cells: 32% "
            "less; cuDNN-PD's gain shrinks as the weights outgrow the GPU's on-chip memory",
    "fig8": "T = 100: no significant benefit over cuDNN-Std; T = 1,600: LSTM 3.6x faster "
            "than cuDNN-Std",
    "fig10": "FARNN-AllFPGA about 2x FARNN's time; FARNN-NoOverlap more than 20% slower "
             "on average",
}

#: The sweeps.
FIG7_CELLS = {"lstm": (256, 512, 768, 1024), "gru": (320, 640, 960, 1280)}
FIG8_STEPS = (100, 200, 400, 800, 1600)
LAYERS = 5


def _bases():
    from ....hw.farnn.presets import VU9P_GRU1280, VU9P_LSTM1024
    return {"lstm": VU9P_LSTM1024, "gru": VU9P_GRU1280}


def _row(work, gpu, device):
    config = fpga_config(work, _bases()[work.cell])
    if config is None:
        return None
    if device is None:
        std = gpu_only_seconds(work, gpu)
        pd = gpu_only_seconds(work, gpu, algorithm="cudnn_pd")
        farnn = farnn_seconds(work, config, gpu)
    else:       # measured: PyTorch picks cuDNN's algorithm; the persistent one is not asked
        std = measure_gpu_only(work, device)
        pd = {"seconds": None, "weights_on_chip": None}
        farnn = farnn_seconds(work, config, gpu, tasks=measure_tasks(work, device))
    return {"cell": work.cell, "hidden": work.hidden, "seq_len": work.seq_len,
            "batch": work.batch, "pes": config.pes, "weight_depth": config.weight_depth,
            "cudnn_std": std["seconds"], "cudnn_pd": pd["seconds"],
            "pd_weights_on_chip": pd["weights_on_chip"], "farnn": farnn["seconds"],
            "farnn_fw": farnn["fw"], "farnn_bw_gc_wu": farnn["bw_gc_wu"],
            "bound": farnn["bound"], "busy": {k: farnn[k] for k in ("fpga", "pcie", "gpu")},
            "speedup_vs_std": std["seconds"] / farnn["seconds"],
            "reduction_vs_pd": None if pd["seconds"] is None
            else 1 - farnn["seconds"] / pd["seconds"]}


def hybrid_rows(gpu=P100, *, device=None):
    """``{gpu, gpu_source, fpga_source, paper, fig7, fig8, fig10}``: rows of each figure
    (module docstring). With ``device`` (a PyTorch device, ``"cuda"``), the GPU's part is
    measured there (:func:`~nnrtl.gen.baseline.gpu_model.measure_tasks`) and the GPU alone
    is PyTorch's training step on it (:func:`~nnrtl.gen.baseline.gpu_model.
    measure_gpu_only`, cuDNN's own algorithm; no persistent column); ``gpu`` then names
    nothing measured."""
    fig7 = [_row(Workload(cell, hidden, LAYERS, 1600, 1), gpu, device)
            for cell, sizes in FIG7_CELLS.items() for hidden in sizes]
    fig8 = [_row(Workload(cell, hidden, LAYERS, steps, 1), gpu, device)
            for cell, hidden in (("lstm", 1024), ("gru", 1280)) for steps in FIG8_STEPS]
    work = Workload("lstm", 1024, LAYERS, 800, 1)
    config = fpga_config(work, _bases()["lstm"])
    tasks = None if device is None else measure_tasks(work, device)
    runs = {s: farnn_seconds(work, config, gpu, strategy=s, tasks=tasks) for s in STRATEGIES}
    fig10 = [{"strategy": s, "seconds": r["seconds"], "fw": r["fw"],
              "bw_gc_wu": r["bw_gc_wu"], "bound": r["bound"],
              "normalized": r["seconds"] / runs["farnn"]["seconds"]} for s, r in runs.items()]
    if device is not None:
        return {"gpu": _device_name(device), "gpu_source": f"measured on {device} "
                f"(PyTorch float32; the GPU alone: PyTorch's training step)",
                "fpga_source": "modelled: the engine's cycle model (perf.pass_cycles, "
                               "schedule overlap), 400 MHz, PCIe 12.5 GB/s",
                "paper": PAPER, "fig7": [r for r in fig7 if r],
                "fig8": [r for r in fig8 if r], "fig10": fig10}
    return {"gpu": gpu.name, "gpu_source": f"modelled: {gpu.source}",
            "fpga_source": "modelled: the engine's cycle model (perf.pass_cycles, "
                           "schedule overlap), 400 MHz, PCIe 12.5 GB/s",
            "paper": PAPER, "fig7": [r for r in fig7 if r], "fig8": [r for r in fig8 if r],
            "fig10": fig10}


def _device_name(device):
    import torch
    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    from .bench_gpu import _cpu_name
    return _cpu_name()


def hybrid_markdown(result):
    """:func:`hybrid_rows` as markdown."""
    lines = [f"GPU: {result['gpu']} ({result['gpu_source']}). FPGA: {result['fpga_source']}.",
             "", "**Fig. 7 / Fig. 8 analogues** (5 layers, batch 1; ms per training step)", "",
             "| figure | cell | cells | T | cuDNN-Std | cuDNN-PD | FARNN (FW + BW/GC/WU) "
             "| × Std | vs PD | bound |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for figure in ("fig7", "fig8"):
        for r in result[figure]:
            pd = "-" if r["cudnn_pd"] is None else f"{r['cudnn_pd'] * 1e3:,.1f}" + (
                "" if r["pd_weights_on_chip"] else " (off chip)")
            vs_pd = "-" if r["reduction_vs_pd"] is None else f"{r['reduction_vs_pd']:+.0%}"
            lines.append(
                f"| {figure[3:]} | {r['cell']} | {r['hidden']:,} | {r['seq_len']:,} | "
                f"{r['cudnn_std'] * 1e3:,.1f} | {pd} | {r['farnn'] * 1e3:,.1f} "
                f"({r['farnn_fw'] * 1e3:,.1f} + {r['farnn_bw_gc_wu'] * 1e3:,.1f}) | "
                f"{r['speedup_vs_std']:.2f} | {vs_pd} | {r['bound']} |")
    lines += ["", f"Paper, Fig. 7: {result['paper']['fig7']}.",
              f"Paper, Fig. 8: {result['paper']['fig8']}.", "",
              "**Fig. 10 analogue** (1,024 LSTM cells, T = 800, batch 1)", "",
              "| strategy | ms | FW | BW/GC/WU | normalized to FARNN | bound |",
              "|---|---:|---:|---:|---:|---|"]
    lines += [f"| {r['strategy']} | {r['seconds'] * 1e3:,.1f} | {r['fw'] * 1e3:,.1f} | "
              f"{r['bw_gc_wu'] * 1e3:,.1f} | {r['normalized']:.2f} | {r['bound']} |"
              for r in result["fig10"]]
    lines += ["", f"Paper, Fig. 10: {result['paper']['fig10']}."]
    return "\n".join(lines)


def plot_hybrid(result, out, filename="farnn_hybrid.png"):
    """``filename`` under ``out``: the Fig. 7 and Fig. 8 analogues, time per training step of
    each system; returns the file's name."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, name, key, label in ((axes[0], "fig7", "hidden", "cells per layer (T = 1,600)"),
                                   (axes[1], "fig8", "seq_len", "sequence length")):
        for cell, style in (("lstm", "-"), ("gru", "--")):
            rows = [r for r in result[name] if r["cell"] == cell]
            for system, marker in (("cudnn_std", "s"), ("cudnn_pd", "^"), ("farnn", "o")):
                points = [(r[key], r[system] * 1e3) for r in rows if r[system] is not None]
                if points:
                    axis.plot(*zip(*points), marker + style, label=f"{system} {cell}")
        axis.set_xlabel(label)
        axis.set_ylabel(f"ms per training step ({result['gpu_source'].split(':')[0].split(' ')[0]})")
        axis.set_yscale("log")
    axes[0].legend(fontsize=7)
    figure.suptitle(f"FARNN + {result['gpu']} vs the GPU alone (5 layers, batch 1)")
    figure.tight_layout()
    path = Path(out) / filename
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path.name


def main(argv=None):
    """``python -m nnrtl.gen.farnn.studies.bench_hybrid --out DIR [--device cuda]``: the
    figures (modelled, and measured on ``--device``) as ``farnn_hybrid.json``, ``.md`` and
    the plots, under ``DIR``."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", help="a PyTorch device to measure the GPU part on")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"modelled": hybrid_rows()}
    plot_hybrid(results["modelled"], out)
    if args.device:
        results["measured"] = hybrid_rows(device=args.device)
        plot_hybrid(results["measured"], out, "farnn_hybrid_measured.png")
    (out / "farnn_hybrid.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "farnn_hybrid.md").write_text("\n\n".join(
        f"## {kind}\n\n{hybrid_markdown(result)}" for kind, result in results.items()) + "\n")
    print(f"wrote {out / 'farnn_hybrid.md'}")


if __name__ == "__main__":
    main()

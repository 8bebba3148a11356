"""The SBE's part of ``nnrtl sim``'s summary and of ``nnrtl report``.

:func:`breakdown` splits a simulation's cycles by the engine's counters (they are
exclusive: each running cycle the controller either issues a column step or waits for one
reason, ``hw/sbe/controller.py``). :func:`report` draws the exploration (cycles against
DSP and against BRAM of every feasible configuration in ``explore.json``, the chosen one
marked) and the shape of the paper's Figs. 9, 13 and 14: utilization against batch and
against blocks, from the performance model (:func:`~nnrtl.gen.sbe.perf.predict`) around
the design.
"""

import dataclasses

from ...hw.sbe.config import SBEConfig
from ..report import new_figure, save_figure
from .perf import predict

__all__ = ["breakdown", "report", "utilization_sweeps"]

#: The counters of :mod:`nnrtl.sim.tb.sbe`'s result, in the order the summary lists them.
WAITS = (("waiting for h (data dependency)", "stall_cycles"),
         ("waiting for weights", "weight_wait_cycles"),
         ("waiting for inputs (x)", "input_wait_cycles"),
         ("output backpressure (hand-over waits)", "handover_wait_cycles"))

#: Most design points of one utilization sweep (each a run of the performance model).
MAX_POINTS = 12


def breakdown(result):
    """``[(label, cycles), ...]`` summing to ``result["cycles"]``: column steps issued,
    the four waits, and the rest (pipeline fill and the post-processing drain after a
    run's last column step); ``[]`` for a result without counters (a failed run)."""
    if "column_steps" not in result or "cycles" not in result:
        return []
    rows = [("computing (column steps)", result["column_steps"])]
    rows += [(label, result[key]) for label, key in WAITS]
    rest = result["cycles"] - sum(cycles for _, cycles in rows)
    rows.append(("pipeline fill and drain", rest))
    return rows


def _explore_figure(data):
    explore = data.explore
    candidates = explore.get("candidates", [])
    if not candidates:
        return None
    found = explore.get("feasible_points") or {}
    points = found.get("points", [])
    exact = [p for p in points if p.get("cycles") is not None]
    bounds = [p for p in points if p.get("cycles") is None]
    chosen = [c for c in candidates if c.get("chosen")]
    figure = new_figure(10.0, 4.5)
    for index, (key, label) in enumerate((("dsp", "DSP"), ("bram36", "BRAM36"))):
        axes = figure.add_subplot(1, 2, index + 1)
        if bounds:
            axes.scatter([p[key] for p in bounds], [p["lower_bound_cycles"] for p in bounds],
                         marker="^", s=10, color="#a5a5a5", alpha=0.5,
                         label="lower bound (not ranked)")
        axes.scatter([p[key] for p in exact], [p["cycles"] for p in exact], s=14,
                     color="#4472c4", alpha=0.8, label="predicted (ranked)")
        if chosen:
            axes.scatter([c["resources"][key] for c in chosen],
                         [c["cycles"] for c in chosen], marker="*", s=250, color="#c00000",
                         edgecolors="black", linewidths=0.5, label="chosen", zorder=3)
        capacity = data.manifest["board"]["capacity"].get(key)
        if capacity:
            axes.axvline(capacity, color="black", linestyle="--", linewidth=1,
                         label=f"{data.manifest['board']['name']} has {capacity:,}")
        axes.set_yscale("log")
        axes.set_xlabel(label)
        axes.set_ylabel(f"cycles for {explore['seq_len']} steps")
        axes.legend(fontsize=8)
    model = explore["model"]
    shown = (f"{found['kept']} of them plotted: {found['kept_which']}"
             if found.get("sampled") else "all plotted")
    figure.suptitle(f"explore: LSTM {model['input_size']}x{model['hidden_size']}x"
                    f"{model['layers']} on {explore['board']}, {explore['feasible']:,} "
                    f"feasible configurations", fontsize=11)
    return save_figure(
        figure, data.directory, "report-explore.png", "Exploration",
        f"Every feasible configuration in explore.json against its DSPs and BRAM36s "
        f"({explore['considered']:,} considered, {explore['feasible']:,} fit the board, "
        f"{shown}). Blue: the performance model's cycles (perf.model_cycles) of the "
        f"configurations the ranking computed; grey triangles: a lower bound "
        f"(perf.lower_bound_cycles, no pipeline latency, h stalls or exposed loads) of the "
        f"others, whose bound already showed they cannot beat the best; their real "
        f"cycles lie above the triangle. The red star is the chosen configuration.")


def _sweep(config, field, values):
    points = []
    for value in values:
        try:
            changed = dataclasses.replace(config, **{field: value})
        except (TypeError, ValueError):
            continue                     # a value the RTL cannot build
        points.append((value, predict(changed).utilization))
    return points


def utilization_sweeps(config):
    """The performance model's utilization against batch (powers of two up to
    ``seq_len``, and the design's) and against blocks (around the design's), the rest of
    ``config`` fixed: ``{"batch": [(batch, u), ...], "blocks": [(blocks, u), ...]}``."""
    batches = sorted({1 << k for k in range(config.seq_len.bit_length())
                      if 1 << k <= config.seq_len} | {config.batch})
    columns = config.input_size + config.hidden_size
    blocks = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128) if b <= columns}
                    | {config.blocks})
    return {"batch": _sweep(config, "batch", batches[-MAX_POINTS:]),
            "blocks": _sweep(config, "blocks", blocks[:MAX_POINTS])}


def _utilization_figure(data):
    config = SBEConfig(**data.manifest["parameters"])
    sweeps = utilization_sweeps(config)
    figure = new_figure(9.0, 4.0)
    for index, (field, label) in enumerate((("batch", "batch B (Figs. 9, 14)"),
                                            ("blocks", "blocks Nb (Fig. 13)"))):
        axes = figure.add_subplot(1, 2, index + 1)
        points = sweeps[field]
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                  color="#4472c4", label="performance model")
        mine = [p for p in points if p[0] == getattr(config, field)]
        if mine:
            axes.scatter([mine[0][0]], [mine[0][1]], marker="*", s=250, color="#c00000",
                         zorder=3, label=f"this design ({field}={mine[0][0]})")
        axes.set_xscale("log", base=2)
        axes.set_xlabel(label)
        axes.set_ylabel("utilization (useful MACs / PE cycles)")
        axes.set_ylim(0, 1.05)
        axes.legend(fontsize=8)
    figure.suptitle(f"Utilization around this design ({config.pes} PEs, "
                    f"Nt={config.bus_weights}, {config.seq_len} steps)")
    return save_figure(figure, data.directory, "report-utilization.png",
                       "Blocking and batching",
                       "The performance model (nnrtl.gen.sbe.perf.predict) with one "
                       "parameter changed at a time; values the RTL cannot build are left "
                       "out. Batching hides the weight loads (Fig. 9), more blocks shrink "
                       "the buffers at a cost in h stalls (Figs. 13, 14).")


def report(data):
    """The SBE's figures for ``nnrtl report`` (:mod:`nnrtl.gen.report`)."""
    figures = [_utilization_figure(data)]
    if data.explore is not None:
        figures.append(_explore_figure(data))
    return [f for f in figures if f is not None]

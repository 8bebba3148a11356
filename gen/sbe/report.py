"""The SBE's part of ``nnrtl sim``'s summary and of ``nnrtl report``.

:func:`breakdown` splits a simulation's cycles by the engine's counters (they are
exclusive: each running cycle the controller either issues a column step or waits for one
reason, ``hw/sbe/controller.py``). :func:`report` draws, for the design in the report's
directory: its resources with what the SBE's resource model counts (:data:`MODEL_COUNTS`:
of the LUTs only LUT-RAM and LUT multipliers); the shape of the paper's Figs. 9, 13 and
14, utilization against batch and against blocks from the performance model of the work
the simulation ran (:func:`workload`; one sequence without ``sim.json``), with this
design on that model and its simulation's own utilization; and the exploration (cycles
against DSP and against BRAM of every feasible configuration in ``explore.json``) with
this design and the exploration's choice marked apart, or a note when ``explore.json`` is
of another model or board.
"""

import dataclasses

from ...hw.sbe.config import SbeConfig
from ..report import Note, new_figure, resources_figure, save_figure
from .perf import model_cycles, predict, run_cycles

__all__ = ["breakdown", "report", "explore_data", "workload", "workload_utilization",
           "utilization_sweeps", "utilization_data", "MODEL_COUNTS", "PARTIAL"]

#: The counters of :mod:`nnrtl.sim.tb.sbe.engine`'s result, in the order the summary lists them.
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


def _config(data):
    return SbeConfig(**data.manifest["parameters"])


def _describe(config):
    return (f"{config.pes} PEs, batch {config.batch}, {config.blocks} blocks, "
            f"{config.bus_weights} weights a cycle")


def explore_data(data):
    """What the exploration figure shows of ``explore.json``, or why it cannot show this
    directory's design among its configurations.

    Returns
    -------
    dict
        ``{"plotted": True, "points", "this", "choice"}``: the feasible points as in
        ``explore.json``; ``this``, the directory's design (``label``, ``dsp``, ``bram36``
        from the manifest's resource model, ``cycles``:
        :func:`~nnrtl.gen.sbe.perf.model_cycles` for the exploration's ``seq_len``);
        ``choice``, the exploration's chosen configuration (``label`` saying whether it
        is this design, ``dsp``, ``bram36``, ``cycles``), ``None`` when it lists none.
        Or ``{"plotted": False, "reason": text}`` when the exploration is of another
        model or board, so that this design is none of its configurations.
    """
    explore, config = data.explore, _config(data)
    model, board = explore["model"], data.manifest["board"]["name"]
    shape = (model["input_size"], model["hidden_size"], model["layers"])
    mine = (config.input_size, config.hidden_size, config.layers)
    sizes = list(model.get("hidden_sizes") or []) != list(config.hidden_sizes or [])
    if shape != mine or sizes or explore["board"] != board:
        def lstm(numbers, hidden_sizes):
            text = f"LSTM {'x'.join(map(str, numbers))}"
            return text + (f" (hidden sizes {list(hidden_sizes)})" if hidden_sizes else "")
        return {"plotted": False, "reason": (
            f"explore.json is an exploration of {lstm(shape, model.get('hidden_sizes'))} "
            f"on {explore['board']}; this directory's design is "
            f"{lstm(mine, config.hidden_sizes)} on {board}, none of its configurations, so "
            f"it is not plotted here. 'nnrtl explore sbe --board {board} --param "
            f"input_size={config.input_size} --param hidden_size={config.hidden_size} "
            f"--param layers={config.layers} -o DIR' explores this design's model.")}
    needed = data.manifest.get("resources_needed", {})
    this = {"label": f"this design ({_describe(config)})", "dsp": needed.get("dsp"),
            "bram36": needed.get("bram36"),
            "cycles": model_cycles(config, seq_len=explore["seq_len"])}
    choice = next((c for c in explore.get("candidates", []) if c.get("chosen")), None)
    if choice is not None:
        try:
            chosen = SbeConfig(**choice["config"])
        except (TypeError, ValueError):
            chosen = None
        label = ("explore's choice: this design" if chosen == config else
                 f"explore's choice, not this design "
                 f"({_describe(chosen) if chosen else 'not an SbeConfig'})")
        choice = {"label": label, "dsp": choice["resources"]["dsp"],
                  "bram36": choice["resources"]["bram36"], "cycles": choice["cycles"]}
    points = (explore.get("feasible_points") or {}).get("points", [])
    return {"plotted": True, "points": points, "this": this, "choice": choice}


def _explore_figure(data):
    explore = data.explore
    if not explore.get("candidates"):
        return None
    shown = explore_data(data)
    if not shown["plotted"]:
        return Note("Exploration", shown["reason"])
    found = explore.get("feasible_points") or {}
    points = shown["points"]
    exact = [p for p in points if p.get("cycles") is not None]
    bounds = [p for p in points if p.get("cycles") is None]
    this, choice = shown["this"], shown["choice"]
    figure = new_figure(10.0, 4.8)
    for index, (key, label) in enumerate((("dsp", "DSP"), ("bram36", "BRAM36"))):
        axes = figure.add_subplot(1, 2, index + 1)
        if bounds:
            axes.scatter([p[key] for p in bounds], [p["lower_bound_cycles"] for p in bounds],
                         marker="^", s=10, color="#a5a5a5", alpha=0.5,
                         label="other configurations: lower bound (not ranked)")
        axes.scatter([p[key] for p in exact], [p["cycles"] for p in exact], s=14,
                     color="#4472c4", alpha=0.8, label="other configurations: predicted")
        if choice is not None and choice["label"] != "explore's choice: this design":
            axes.scatter([choice[key]], [choice["cycles"]], marker="D", s=70,
                         color="#7030a0", edgecolors="black", linewidths=0.5,
                         label=choice["label"].replace(", not", ",\nnot"), zorder=3)
        axes.scatter([this[key]], [this["cycles"]], marker="*", s=250, color="#c00000",
                     edgecolors="black", linewidths=0.5, zorder=4,
                     label=this["label"] + ("\n= explore's choice" if choice is not None
                                            and choice["label"].endswith("this design")
                                            else ""))
        capacity = data.manifest["board"]["capacity"].get(key)
        if capacity:
            axes.axvline(capacity, color="black", linestyle="--", linewidth=1,
                         label=f"{data.manifest['board']['name']} has {capacity:,}")
        axes.set_yscale("log")
        axes.set_xlabel(label)
        axes.set_ylabel(f"cycles for {explore['seq_len']} steps")
        axes.legend(fontsize=7)
    model = explore["model"]
    plotted = (f"{found['kept']} of them plotted: {found['kept_which']}"
               if found.get("sampled") else "all plotted")
    figure.suptitle(f"explore: LSTM {model['input_size']}x{model['hidden_size']}x"
                    f"{model['layers']} on {explore['board']}, {explore['feasible']:,} "
                    f"feasible configurations", fontsize=11)
    return save_figure(
        figure, data.directory, "report-explore.png", "Exploration",
        f"Every feasible configuration in explore.json against its DSPs and BRAM36s "
        f"({explore['considered']:,} considered, {explore['feasible']:,} fit the board, "
        f"{plotted}). Blue: the performance model's cycles (perf.model_cycles) of the "
        f"configurations the ranking computed; grey triangles: a lower bound "
        f"(perf.lower_bound_cycles, no pipeline latency, h stalls or exposed loads) of the "
        f"others, whose bound already showed they cannot beat the best; their real "
        f"cycles lie above the triangle. The red star is this directory's design "
        f"({_describe(_config(data))}), its cycles from the same model for "
        f"{explore['seq_len']} steps and its resources from the manifest"
        + ("; the purple diamond is the configuration the exploration chose, another "
           "design." if choice is not None and not choice["label"].endswith("this design")
           else "."))


def workload(data):
    """The work the utilization figure models: ``{"runs": [(layer, steps), ...],
    "useful_macs": n, "label": text}`` for the runs of ``sim.json`` (when it lists them),
    else ``{"runs": None, "useful_macs": None, "label": text}`` for one sequence of the
    design's ``seq_len`` steps through every layer."""
    config, sim = _config(data), data.sim or {}
    runs = sim.get("runs") or []
    if runs and sim.get("useful_macs") and all("layer" in r and "steps" in r for r in runs):
        steps = " and ".join(str(r["steps"]) for r in runs)
        layers = sorted({r["layer"] for r in runs})
        return {"runs": [(r["layer"], r["steps"]) for r in runs],
                "useful_macs": sim["useful_macs"],
                "label": f"the simulated runs ({steps} steps, layer"
                         f"{'s' if len(layers) > 1 else ''} "
                         f"{', '.join(map(str, layers))}) with gapless streams"}
    return {"runs": None, "useful_macs": None,
            "label": f"one sequence of {config.seq_len} steps with gapless streams"}


def workload_utilization(config, work):
    """The performance model's utilization of ``config`` on ``work`` (:func:`workload`):
    useful MACs over PE cycles, the runs' cycles by :func:`~.perf.run_cycles`, one
    sequence's by :func:`~.perf.predict`."""
    if work["runs"] is None:
        return predict(config).utilization
    cycles = sum(run_cycles(config, layer, steps) for layer, steps in work["runs"])
    return work["useful_macs"] / (config.pes * cycles)


def _sweep(config, field, values, work):
    points = []
    for value in values:
        try:
            changed = dataclasses.replace(config, **{field: value})
        except (TypeError, ValueError):
            continue                     # a value the RTL cannot build
        points.append((value, workload_utilization(changed, work)))
    return points


def utilization_sweeps(config, work=None):
    """The performance model's utilization on ``work`` (:func:`workload`; default one
    sequence of ``seq_len`` steps) against batch (powers of two up to ``seq_len``, and
    the design's) and against blocks (around the design's), the rest of ``config`` fixed:
    ``{"batch": [(batch, u), ...], "blocks": [(blocks, u), ...]}``."""
    work = work or {"runs": None, "useful_macs": None}
    batches = sorted({1 << k for k in range(config.seq_len.bit_length())
                      if 1 << k <= config.seq_len} | {config.batch})
    columns = config.input_size + config.hidden_size
    blocks = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128) if b <= columns}
                    | {config.blocks})
    return {"batch": _sweep(config, "batch", batches[-MAX_POINTS:], work),
            "blocks": _sweep(config, "blocks", blocks[:MAX_POINTS], work)}


def utilization_data(data):
    """What the blocking-and-batching figure shows: ``{"workload", "sweeps", "marks"}``,
    the sweeps of :func:`utilization_sweeps` on :func:`workload`, and this design's marks:
    the model's utilization on that work and, after a simulation that counted it, the
    simulation's own (``{"kind": "model" | "simulated", "label", "utilization"}``)."""
    config, sim = _config(data), data.sim or {}
    work = workload(data)
    marks = [{"kind": "model", "label": "this design, performance model",
              "utilization": workload_utilization(config, work)}]
    if sim.get("utilization") is not None:
        marks.append({"kind": "simulated", "utilization": sim["utilization"],
                      "label": f"this design, simulated (streams {sim.get('backpressure')}, "
                               f"seed {sim.get('seed')})"})
    return {"workload": work, "sweeps": utilization_sweeps(config, work), "marks": marks}


def _utilization_figure(data):
    config = _config(data)
    shown = utilization_data(data)
    figure = new_figure(9.0, 5.0)
    for index, (field, label) in enumerate((("batch", "batch B (Figs. 9, 14)"),
                                            ("blocks", "blocks Nb (Fig. 13)"))):
        axes = figure.add_subplot(1, 2, index + 1)
        points = shown["sweeps"][field]
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                  color="#4472c4", label="performance model, one parameter changed")
        mine = getattr(config, field)
        for mark in shown["marks"]:
            simulated = mark["kind"] == "simulated"
            axes.scatter([mine], [mark["utilization"]], marker="*" if simulated else "o",
                         s=250 if simulated else 90, zorder=3,
                         color="#c00000" if simulated else "none",
                         edgecolors="#c00000" if not simulated else "black",
                         linewidths=1.5 if not simulated else 0.5,
                         label=f"{mark['label']}: {mark['utilization']:.1%}")
        axes.set_xscale("log", base=2)
        axes.set_xlabel(label)
        axes.set_ylabel("utilization (useful MACs / PE cycles)")
        axes.set_ylim(0, 1.05)
    handles, labels = axes.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", fontsize=8, ncols=1)
    figure.suptitle(f"Utilization around this design ({config.pes} PEs, batch "
                    f"{config.batch}, {config.blocks} blocks, Nt = {config.bus_weights} "
                    f"weights a cycle)\nmodel of {shown['workload']['label']}",
                    fontsize=10)
    simulated = len(shown["marks"]) > 1
    return save_figure(figure, data.directory, "report-utilization.png",
                       "Blocking and batching",
                       f"The performance model (nnrtl.gen.sbe.perf) of "
                       f"{shown['workload']['label']}, with one parameter changed at a "
                       f"time; values the RTL cannot build are left out. The ring is this "
                       f"design on that model"
                       + ("; the star is its simulation's own utilization (sim.json), "
                          "lower where the streams' gaps and backpressure held it up"
                          if simulated else "")
                       + ". Batching hides the weight loads (Fig. 9), more blocks shrink "
                       "the buffers at a cost in h stalls (Figs. 13, 14).")


#: What the SBE's resource model counts (:mod:`nnrtl.gen.sbe.resources`), for the
#: report's resources figure; of the LUTs only a part (:data:`PARTIAL`).
MODEL_COUNTS = {"lut": "LUT-RAM and LUT multipliers only, not the logic",
                "dsp": "PE multipliers and post-processing units",
                "bram36": "the memories too deep for LUT-RAM"}

#: The resources of which the SBE's model counts only a part.
PARTIAL = ("lut",)


def report(data):
    """The SBE's figures for ``nnrtl report`` (:mod:`nnrtl.gen.report`): the resources
    with what its resource model counts, utilization against batch and blocks, and the
    exploration with this design marked (or why it is not plotted)."""
    figures = [resources_figure(data, MODEL_COUNTS, PARTIAL), _utilization_figure(data)]
    if data.explore is not None:
        figures.append(_explore_figure(data))
    return [f for f in figures if f is not None]

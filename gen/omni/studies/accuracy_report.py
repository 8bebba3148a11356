"""Tables, markdown and plot of :mod:`.accuracy_sweep`'s setting rows, and the writing of
a sweep's outputs (``sweep.jsonl``, ``sweep.png``).

:func:`summary_table` is the plain-text table the CLI prints; :func:`markdown_tables` the
markdown of the omni bench's accuracy section (:mod:`.bench_markdown`) and of ``python -m
nnrtl.gen.omni.studies.accuracy --summarise``. Software, no hardware timing.

The recorded results and their analysis are in ``docs/engines/omni/accuracy.md``.
"""

import json
from pathlib import Path

from ...errors import UsageError
from .accuracy_sweep import LIMIT, label

__all__ = ["summary_table", "markdown_tables", "plot", "write_outputs"]


def _percent(value):
    return f"{100 * value:+.2f} %"


def _mean_sem(mean, sem):
    """``+0.12 % ± 0.34 %`` (no ``±`` part without a standard error)."""
    return _percent(mean) + ("" if sem is None else f" ± {100 * sem:.2f} %")


def _upper_text(upper):
    return "" if upper is None else _percent(upper)


def summary_table(rows):
    """A plain-text table of setting rows: metric difference mean [min, max], its
    standard error and median over the seeds, the one-sided 95 % upper bound of the
    mean degradation, within 1 % (on the mean), the difference from ``exact`` of the
    same seed (mean ± standard error, 95 % bound) and the savings."""
    header = ("task", "run", "threshold", "difference mean [min, max]", "± SE", "median",
              "upper 95", "within 1 %", "vs exact mean ± SE", "upper 95",
              "stored vs exact", "P1 density", "skipped")
    lines = []
    for row in rows:
        sem = row.get("relative_difference_sem")
        lines.append((row["task"], row["run"], label(row["threshold"]),
                      f"{_percent(row['relative_difference_mean'])} "
                      f"[{_percent(row['relative_difference_min'])}, "
                      f"{_percent(row['relative_difference_max'])}]",
                      "" if sem is None else f"{100 * sem:.2f} %",
                      _percent(row["relative_difference_median"]),
                      _upper_text(row.get("degradation_upper_95")),
                      ("yes" if row["within_1_percent"] else "no")
                      + ("" if row["all_seeds_within_1_percent"] else " (not all seeds)"),
                      _mean_sem(row["vs_exact_mean"], row["vs_exact_sem"])
                      if "vs_exact" in row else "",
                      _upper_text(row.get("vs_exact_degradation_upper_95")),
                      _percent(0.0 - row["stored_reduction"]) if "stored_reduction" in row
                      else "",
                      f"{row['p1_density']:.3f}" if "p1_density" in row else "",
                      f"{100 * row['skipped']:.1f} %" if "skipped" in row else ""))
    widths = [max(len(str(line[k])) for line in [header] + lines) for k in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    text = [rule, "  ".join(h.ljust(w) for h, w in zip(header, widths)), rule]
    text += ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in lines]
    return "\n".join(text + [rule])


def _yes(flag):
    return "" if flag is None else ("yes" if flag else "no")


def markdown_tables(rows, title="Accuracy against PyTorch"):
    """Markdown of setting rows: a summary table (per setting: seeds, difference from
    PyTorch of the same seed as mean ± standard error [min, max], the one-sided 95 %
    upper bound of the mean degradation and whether it is within 1 %, the same against
    ``exact`` of the same seed, the savings) and, per task, a per-seed table (every
    setting's value and its differences from PyTorch and from ``exact``). Degradation
    is the difference signed so that positive is worse."""
    lines = [f"## {title}", "",
             "| task | run | θ/F | seeds | vs PyTorch: mean ± SE [min, max] | upper 95 "
             "| within 1 % (mean / upper 95) | vs exact: mean ± SE [min, max] | upper 95 "
             "| within 1 % (mean / upper 95) | stored vs exact | P1 density | skipped |",
             "|---|---|---|---:|---:|---:|---|---:|---:|---|---:|---:|---:|"]
    for row in rows:
        versus = ("", "", "")
        if "vs_exact" in row:
            versus = (f"{_mean_sem(row['vs_exact_mean'], row['vs_exact_sem'])} "
                      f"[{_percent(row['vs_exact_min'])}, {_percent(row['vs_exact_max'])}]",
                      _upper_text(row["vs_exact_degradation_upper_95"]),
                      f"{_yes(row['vs_exact_degradation_mean'] <= LIMIT)} / "
                      f"{_yes(row['vs_exact_within_1_percent_95'])}")
        lines.append(
            f"| {row['task']} | {row['run']} | {label(row['threshold'])} | {row['seeds']} | "
            f"{_mean_sem(row['relative_difference_mean'], row.get('relative_difference_sem'))}"
            f" [{_percent(row['relative_difference_min'])}, "
            f"{_percent(row['relative_difference_max'])}] | "
            f"{_upper_text(row.get('degradation_upper_95'))} | "
            f"{_yes(row['within_1_percent'])} / {_yes(row.get('within_1_percent_95'))} | "
            + " | ".join(versus) + " | "
            + (_percent(0.0 - row["stored_reduction"]) if "stored_reduction" in row else "")
            + " | " + (f"{row['p1_density']:.3f}" if "p1_density" in row else "")
            + " | " + (f"{100 * row['skipped']:.1f} %" if "skipped" in row else "") + " |")
    for task in dict.fromkeys(row["task"] for row in rows):
        mine = [row for row in rows if row["task"] == task]
        head = ["seed"] + [f"{row['run']} {label(row['threshold'])}"
                           if row["run"] not in ("pytorch", "exact") else row["run"]
                           for row in mine]
        lines += ["", f"{task} ({mine[0]['metric']}) per seed: value (vs PyTorch; vs "
                  "exact)", "", "| " + " | ".join(head) + " |",
                  "|" + "---:|" * len(head)]
        for index, seed in enumerate(mine[0]["seed_list"]):
            cells = [str(seed)]
            for row in mine:
                value = row["values"][index]
                text = f"{100 * value:.2f} %" if row["metric"] == "accuracy" else \
                    f"{value:.4f}"
                if row["run"] != "pytorch":
                    text += f" ({_percent(row['relative_difference'][index])}"
                    if "vs_exact" in row:
                        text += f"; {_percent(row['vs_exact'][index])}"
                    text += ")"
                cells.append(text)
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + [""])


def plot(rows, path):
    """Metric difference (mean over seeds, bars min..max) against the stored-bytes
    saving, one point per threshold, one panel per task; written to ``path`` (PNG)."""
    from ...report import new_figure
    tasks = sorted({row["task"] for row in rows})
    figure = new_figure(5.0 * len(tasks), 4.0)
    for index, task in enumerate(tasks):
        axes = figure.add_subplot(1, len(tasks), index + 1)
        for run, colour in (("exact", "black"), ("ms1", "tab:blue"), ("ms2", "tab:orange"),
                            ("both", "tab:green")):
            points = [r for r in rows if r["task"] == task and r["run"] == run]
            if not points:
                continue
            x = [100 * r["stored_reduction"] for r in points]
            y = [100 * r["relative_difference_mean"] for r in points]
            low = [100 * (r["relative_difference_mean"] - r["relative_difference_min"])
                   for r in points]
            high = [100 * (r["relative_difference_max"] - r["relative_difference_mean"])
                    for r in points]
            axes.errorbar(x, y, yerr=[low, high], fmt="o-" if run != "exact" else "s",
                          color=colour, capsize=3, label=run)
            for r, xv, yv in zip(points, x, y):
                if run != "exact":
                    axes.annotate(label(r["threshold"]), (xv, yv), fontsize=8,
                                  textcoords="offset points", xytext=(4, 4))
        for limit in (-1, 1):
            axes.axhline(limit, color="grey", linestyle="--", linewidth=0.8)
        metric = next(r["metric"] for r in rows if r["task"] == task)
        axes.set_title(f"{task} ({metric})")
        axes.set_xlabel("bytes stored FW -> BP saved against exact (%)")
        axes.set_ylabel(f"{metric} difference from PyTorch (%)")
        axes.legend(fontsize=8)
    figure.savefig(path)


def write_outputs(directory, lines, rows):
    """``sweep.jsonl`` (every run and setting line) and ``sweep.png`` in ``directory``
    (made if missing); written only after the sweep has finished."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "sweep.jsonl").write_text("".join(json.dumps(line) + "\n"
                                                       for line in lines))
        plot(rows, directory / "sweep.png")
    except OSError as error:
        raise UsageError(f"cannot write to -o {directory}: {error.strerror or error}") \
            from None

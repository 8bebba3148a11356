"""``nnrtl report DIR``: a self-contained HTML page with plots of a generated design.

From what is in ``DIR``: ``manifest.json`` (always; written by ``nnrtl generate``), and when
present ``sim.json`` (``nnrtl sim -o``), ``synth.json`` (``nnrtl synth``) and
``explore.json`` (``nnrtl explore -o``). The generic figures live here -- the design's
parameters (an HTML table), its resources against the board (the resource model beside Yosys' counts),
where a simulation's cycles went -- and every engine adds its own through its ``report``
hook (:mod:`nnrtl.gen.engines`), drawing with :func:`new_figure` and saving with
:func:`save_figure`. The PNGs are written beside ``report.html``, which embeds them as
base64 data URIs so that it can be mailed or opened anywhere. matplotlib's ``Agg``
backend: no display needed.

Every figure is of the design in ``DIR``: a plot that shows other designs (an
exploration's configurations, a sweep of one parameter) marks this one and labels the
others as what they are; where a file of ``DIR`` describes another design, a hook
returns a :class:`Note` saying so in place of the plot. Each figure says what its
numbers count: the resource model's figures (what the engine's hook counts, e.g. only
LUT-RAM and LUT multipliers) beside Yosys' count of every cell, a simulation's
measurement beside the performance model of the same work.
"""

import base64
import dataclasses
import html
import json
import os
import tempfile
from pathlib import Path

from .errors import UsageError
from .output import ADDED_LATER, MANIFEST

__all__ = ["ReportData", "Figure", "Table", "Note", "load_report_data", "new_figure", "save_figure",
           "resource_rows", "resources_figure", "write_report", "write_result", "REPORT",
           "RESOURCES", "MODEL_COUNTS", "YOSYS_COUNTS"]

REPORT = "report.html"

#: The resources plotted, with their labels.
RESOURCES = {"lut": "LUT", "ff": "FF", "dsp": "DSP", "bram36": "BRAM36", "uram": "URAM"}


@dataclasses.dataclass(frozen=True)
class ReportData:
    """The contents of a report directory: ``manifest`` always, the others ``None`` when
    their file is absent."""

    directory: Path
    manifest: dict
    sim: dict | None = None
    synth: dict | None = None
    explore: dict | None = None


@dataclasses.dataclass(frozen=True)
class Figure:
    """One plot of the report: ``DIR/<file>``, its section title and a caption."""

    file: str
    title: str
    caption: str


@dataclasses.dataclass(frozen=True)
class Table:
    """A table of the report (text a reader can select and copy): its section title,
    column headers, rows of strings and a caption."""

    title: str
    header: tuple
    rows: tuple
    caption: str


@dataclasses.dataclass(frozen=True)
class Note:
    """A paragraph in place of a plot: its section title and text (e.g. why a file of the
    directory is not plotted)."""

    title: str
    text: str


def _read_json(path):
    try:
        return json.loads(path.read_text())
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise UsageError(f"{path} is not valid JSON: {error}") from None


def load_report_data(directory):
    """The :class:`ReportData` of ``directory``; :class:`UsageError` if it is not a
    directory or holds no ``manifest.json``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UsageError(f"report: {directory} is not a directory")
    if not (directory / MANIFEST).is_file():
        raise UsageError(f"report: {directory} holds no {MANIFEST}; give a directory "
                         f"written by 'nnrtl generate'")
    manifest = _read_json(directory / MANIFEST)
    missing = [key for key in ("engine", "module", "parameters", "board")
               if not isinstance(manifest, dict) or key not in manifest]
    missing += [f"board.{key}" for key in ("name", "title", "part", "clock_hz", "capacity")
                if not missing and key not in manifest["board"]]
    if missing:
        raise UsageError(f"report: {directory / MANIFEST} lacks {', '.join(missing)}; "
                         f"regenerate the directory with 'nnrtl generate'")
    found = {name: _read_json(directory / f"{name}.json")
             for name in ("sim", "synth", "explore") if (directory / f"{name}.json").is_file()}
    return ReportData(directory=directory, manifest=manifest, **found)


def write_result(directory, name, result):
    """Write ``result`` as ``directory/name`` atomically (a temporary file renamed)."""
    directory = Path(directory)
    if name not in ADDED_LATER:
        raise ValueError(f"{name} is not in nnrtl.gen.output.ADDED_LATER")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
        with os.fdopen(handle, "w") as file:
            file.write(json.dumps(result, indent=2, default=str) + "\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, directory / name)
    except OSError as error:
        raise UsageError(f"cannot write {directory / name}: {error.strerror or error}") \
            from None


def new_figure(width=7.0, height=4.0):
    """A matplotlib figure on the ``Agg`` backend (headless)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure as MplFigure
    return MplFigure(figsize=(width, height), dpi=100, layout="constrained")


def save_figure(figure, directory, file, title, caption):
    """Save a matplotlib ``figure`` as ``directory/file`` (a PNG listed in
    :data:`~nnrtl.gen.output.ADDED_LATER`, so that ``generate --force`` may still replace
    the directory) and return its :class:`Figure`."""
    if file not in ADDED_LATER or not file.endswith(".png"):
        raise ValueError(f"report figure {file} must be a .png listed in "
                         f"nnrtl.gen.output.ADDED_LATER")
    figure.savefig(Path(directory) / file)
    return Figure(file, title, caption)


# -- Generic figures ------------------------------------------------------------------

def _parameters(data):
    manifest = data.manifest
    rows = [(name, ",".join(map(str, value)) if isinstance(value, list) else str(value))
            for name, value in manifest["parameters"].items()]
    return Table("Parameters", ("parameter", "value"), tuple(rows),
                 f"The configuration of {manifest['module']} (manifest.json).")


#: What Yosys' figures in ``synth.json`` count (:func:`nnrtl.gen.synth.counts`).
YOSYS_COUNTS = {"lut": "every LUT: logic and LUT-RAM/SRL", "ff": "every flip-flop",
                "dsp": "every DSP slice", "bram36": "block RAMs, a RAMB18 as one half",
                "uram": "UltraRAMs"}

#: What a resource model's figure counts when its engine does not say otherwise.
MODEL_COUNTS = "what the engine's resource model checks against the board"


def resource_rows(data, model_counts=None, partial=()):
    """The rows of the resources figure: one per resource the board has and the model or
    Yosys counts, ``{"resource", "label", "capacity", "model", "model_counts",
    "partial", "yosys", "yosys_counts", "yosys_parts"}`` (``model``/``yosys`` ``None``
    when absent; ``yosys_parts``: Yosys' LUTs as ``[("logic", n), ("LUT-RAM/SRL", n)]``
    when ``synth.json`` splits them, else ``None``). ``model_counts`` maps a resource to
    what the engine's model counts of it (default :data:`MODEL_COUNTS`); ``partial``
    names the resources of which the model counts only a part (so its figure is not
    comparable with Yosys')."""
    capacity = data.manifest["board"]["capacity"]
    needed = data.manifest.get("resources_needed", {})
    synth = data.synth or {}
    counts = model_counts or {}
    rows = []
    for resource, label in RESOURCES.items():
        if not capacity.get(resource) or not (resource in needed or resource in synth):
            continue
        parts = None
        if resource == "lut" and "lut_logic" in synth and "lut_memory" in synth:
            parts = [("logic", synth["lut_logic"]), ("LUT-RAM/SRL", synth["lut_memory"])]
        rows.append({"resource": resource, "label": label, "capacity": capacity[resource],
                     "model": needed.get(resource),
                     "model_counts": counts.get(resource, MODEL_COUNTS),
                     "partial": resource in partial,
                     "yosys": synth.get(resource), "yosys_counts": YOSYS_COUNTS[resource],
                     "yosys_parts": parts})
    return rows


def _count(value):
    """A count for a bar label: ``"5,176"``, ``"0.5"``, ``"-"`` when absent."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def resources_figure(data, model_counts=None, partial=()):
    """The resources figure (``report-resources.png``): the resource model's figures
    beside Yosys' as shares of the board, each bar labelled with its count and, where the
    model counts only part of the resource, hatched and with what it counts
    (``model_counts`` and ``partial``, see :func:`resource_rows`); the caption says what
    each figure counts. An engine's ``report`` hook returns it with its own
    ``model_counts`` to replace the generic one."""
    import numpy as np
    from matplotlib.patches import Patch

    rows = resource_rows(data, model_counts, partial)
    synth = data.synth is not None
    figure = new_figure(8.0, 4.5)
    axes = figure.add_subplot()
    x = np.arange(len(rows))
    width = 0.38 if synth else 0.6
    model = [100 * (r["model"] or 0) / r["capacity"] for r in rows]
    bars = axes.bar(x - (width / 2 if synth else 0), model, width, color="#4472c4")
    handles = [Patch(color="#4472c4", label="resource model (generate)")]
    for bar, row in zip(bars, rows):
        if row["partial"]:
            bar.set_hatch("//")
            bar.set_edgecolor("white")
            handles.append(Patch(facecolor="#4472c4", edgecolor="white", hatch="//",
                                 label=f"resource model, {row['label']}: "
                                       f"{row['model_counts']}"))
    axes.bar_label(bars, labels=[_count(r["model"]) for r in rows], fontsize=8)
    if synth:
        yosys = [100 * (r["yosys"] or 0) / r["capacity"] for r in rows]
        bars = axes.bar(x + width / 2, yosys, width, color="#ed7d31")
        handles.append(Patch(color="#ed7d31", label="Yosys synth_xilinx: every cell"))
        for index, row in enumerate(rows):
            if row["yosys_parts"] and row["yosys_parts"][1][1]:
                memory = 100 * row["yosys_parts"][1][1] / row["capacity"]
                axes.bar(x[index] + width / 2, memory, width, color="#f4b183")
                handles.append(Patch(color="#f4b183", label=f"of which Yosys' "
                                                            f"{row['label']} as LUT-RAM/SRL"))
        axes.bar_label(bars, labels=[_count(r["yosys"]) for r in rows], fontsize=8)
    handles.append(axes.axhline(100, color="black", linewidth=1, linestyle="--",
                                label="board capacity"))
    axes.set_xticks(x, [f"{r['label']}\n(of {r['capacity']:,})" for r in rows])
    axes.set_ylabel("% of the board")
    axes.set_title(f"Resources on {data.manifest['board']['name']} "
                   f"({data.manifest['board']['part']})")
    axes.legend(handles=handles, fontsize=8)
    counted = "; ".join(f"{r['label']}: {r['model_counts']}" for r in rows
                        if r["model_counts"] != MODEL_COUNTS) or MODEL_COUNTS
    caption = ("Bars: share of the board; labels: counts. The resource model's figures "
               f"come from the manifest ({counted})"
               + ("; hatched: a model figure that counts only part of the resource, not "
                  "comparable with Yosys' count of every cell"
                  if any(r["partial"] for r in rows) else "")
               + (". Yosys' from synth.json: " + "; ".join(
                   f"{r['label']}: {r['yosys_counts']}" for r in rows) + "."
                  if synth else "; run 'nnrtl synth DIR' to add Yosys' counts."))
    return save_figure(figure, data.directory, "report-resources.png", "Resources",
                       caption)


def _cycles(data):
    sim = data.sim
    breakdown = [(label, cycles) for label, cycles in sim.get("breakdown", []) if cycles]
    if not breakdown or not sim.get("cycles"):
        return None                      # a run that failed before its counters
    figure = new_figure(8.5, 1.4 + 0.45 * len(breakdown))
    axes = figure.add_subplot()
    labels = [label for label, _ in breakdown]
    values = [cycles for _, cycles in breakdown]
    bars = axes.barh(range(len(values)), values, color="#70ad47")
    total = sim["cycles"]
    axes.bar_label(bars, labels=[f"{v:,} ({100 * v / total:.1f}%)" for v in values],
                   fontsize=8)
    axes.set_yticks(range(len(labels)), labels)
    axes.invert_yaxis()
    axes.set_xlabel("cycles")
    axes.set_xlim(0, max(values) * 1.3)
    axes.set_title(f"Where the {total:,} cycles went\n(seed {sim.get('seed')}, streams "
                   f"{sim.get('backpressure')})", fontsize=10)
    return save_figure(figure, data.directory, "report-cycles.png", "Simulation",
                       "The engine's cycle counters of the simulation (sim.json).")


# -- The page ---------------------------------------------------------------------------

def _engine_clock(manifest):
    """The engine's own clock (:meth:`~nnrtl.gen.engines.Engine.clock_hz`) when it is not
    the board's."""
    clock = manifest.get("engine_clock_hz")
    if clock is None or clock == manifest["board"]["clock_hz"]:
        return ""
    return f", engine figures at {clock / 1e6:g} MHz"


#: What the figures of ``sim.json`` that the page lists are.
SIM_NOTES = {"cycles": "simulated, streams {backpressure}, seed {seed}",
             "model_cycles": "the engine's performance model of the same work",
             "utilization": "simulated: useful MACs / (MAC units x cycles)",
             "gops": "simulated, at the engine's clock"}


def _sim_lines(sim):
    lines = [f"bit-exact: {sim.get('bit_exact')}"]
    for key in ("cycles", "model_cycles", "model_error",
                "utilization", "gops", "first_mismatch", "error"):
        if sim.get(key) is not None:
            value = sim[key]
            line = f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}"
            if key in SIM_NOTES:
                note = SIM_NOTES[key].format(backpressure=sim.get("backpressure"),
                                             seed=sim.get("seed"))
                line += f" ({note})"
            lines.append(line)
    return lines


def _html(data, figures):
    manifest = data.manifest
    board = manifest["board"]
    sources = [MANIFEST] + [f"{name}.json" for name in ("sim", "synth", "explore")
                            if getattr(data, name) is not None]
    parts = [
        "<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
        f"<title>nnrtl report: {html.escape(manifest['module'])} on "
        f"{html.escape(board['name'])}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;}"
        "img{max-width:100%;} pre{background:#f4f4f4;padding:.5em;}"
        "table{border-collapse:collapse;} th,td{border:1px solid #ccc;padding:.2em .6em;"
        "text-align:left;} th{background:#d9e2f3;}</style>",
        "</head><body>",
        f"<h1>{html.escape(manifest['module'])} on {html.escape(board['title'])}</h1>",
        f"<p>Engine {html.escape(manifest['engine'])}, part {html.escape(board['part'])}, "
        f"board clock {board['clock_hz'] / 1e6:g} MHz{_engine_clock(manifest)}. From this "
        f"directory: "
        f"{', '.join(sources)}.</p>",
    ]
    if data.sim is not None:
        parts.append("<h2>Simulation result</h2><pre>"
                     + html.escape("\n".join(_sim_lines(data.sim))) + "</pre>")
    section = None
    for figure in figures:
        if figure.title != section:
            parts.append(f"<h2>{html.escape(figure.title)}</h2>")
            section = figure.title
        if isinstance(figure, Note):
            parts.append(f"<p>{html.escape(figure.text)}</p>")
            continue
        if isinstance(figure, Table):
            cells = ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in figure.header)
                     + "</tr>"]
            cells += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                      for row in figure.rows]
            parts.append(f"<table>{''.join(cells)}</table><p>"
                         f"{html.escape(figure.caption)}</p>")
            continue
        encoded = base64.b64encode((data.directory / figure.file).read_bytes()).decode()
        parts.append(f"<figure><img src='data:image/png;base64,{encoded}' "
                     f"alt='{html.escape(figure.file)}'><figcaption>"
                     f"{html.escape(figure.caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(directory, engine_for):
    """Write ``directory/report.html`` and its PNGs; return the page's path.

    ``engine_for(name)`` gives the :class:`~nnrtl.gen.engines.Engine` the manifest names;
    its ``report`` hook, if any, adds the engine's figures (and :class:`Table` s and
    :class:`Note` s) after the generic ones; a figure of the hook with a generic figure's file name (e.g.
    :func:`resources_figure` with the engine's ``model_counts``) takes that figure's
    place."""
    data = load_report_data(directory)
    engine = engine_for(data.manifest["engine"])
    figures = [_parameters(data), resources_figure(data)]
    if data.sim is not None:
        figures.append(_cycles(data))
    if engine.report is not None:
        for figure in engine.report(data):
            replaced = [i for i, f in enumerate(figures) if isinstance(figure, Figure)
                        and isinstance(f, Figure) and f.file == figure.file]
            if replaced:
                figures[replaced[0]] = figure
            else:
                figures.append(figure)
    figures = [f for f in figures if f is not None]
    page = _html(data, figures)
    path = Path(directory) / REPORT
    handle, temporary = tempfile.mkstemp(prefix=f".{REPORT}.", dir=directory)
    with os.fdopen(handle, "w") as file:
        file.write(page)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
    return path

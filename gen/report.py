"""``nnrtl report DIR``: a self-contained HTML page with plots of a generated design.

From what is in ``DIR``: ``manifest.json`` (always; written by ``nnrtl generate``), and when
present ``sim.json`` (``nnrtl sim -o``), ``synth.json`` (``nnrtl synth``) and
``explore.json`` (``nnrtl explore -o``). The generic figures live here -- the design's
parameters, its resources against the board (the resource model beside Yosys' counts),
where a simulation's cycles went -- and every engine adds its own through its ``report``
hook (:mod:`nnrtl.gen.engines`), drawing with :func:`new_figure` and saving with
:func:`save_figure`. The PNGs are written beside ``report.html``, which embeds them as
base64 data URIs so that it can be mailed or opened anywhere. matplotlib's ``Agg``
backend: no display needed.
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

__all__ = ["ReportData", "Figure", "load_report_data", "new_figure", "save_figure",
           "write_report", "write_result", "REPORT", "RESOURCES"]

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
    rows = [[name, str(value)] for name, value in manifest["parameters"].items()]
    figure = new_figure(6.0, 0.6 + 0.28 * len(rows))
    axes = figure.add_subplot()
    axes.axis("off")
    table = axes.table(cellText=rows, colLabels=["parameter", "value"], loc="center",
                       cellLoc="left", colColours=["#d9e2f3"] * 2)
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.scale(1, 1.2)
    axes.set_title(f"{manifest['engine']} on {manifest['board']['name']}: parameters")
    return save_figure(figure, data.directory, "report-parameters.png", "Parameters",
                       f"The configuration of {manifest['module']} (manifest.json).")


def _resources(data):
    import numpy as np

    capacity = data.manifest["board"]["capacity"]
    needed = data.manifest.get("resources_needed", {})
    synth = data.synth or {}
    names = [r for r in RESOURCES if capacity.get(r) and (r in needed or r in synth)]
    figure = new_figure(7.0, 4.0)
    axes = figure.add_subplot()
    x = np.arange(len(names))
    width = 0.38 if synth else 0.6
    model = [100 * needed.get(r, 0) / capacity[r] for r in names]
    bars = axes.bar(x - (width / 2 if synth else 0), model, width,
                    label="resource model (generate)", color="#4472c4")
    axes.bar_label(bars, labels=[f"{needed.get(r, 0):,.0f}" if r in needed else "-"
                                 for r in names], fontsize=8)
    if synth:
        yosys = [100 * synth.get(r, 0) / capacity[r] for r in names]
        bars = axes.bar(x + width / 2, yosys, width, label="Yosys synth_xilinx",
                        color="#ed7d31")
        axes.bar_label(bars, labels=[f"{synth.get(r, 0):,.0f}" for r in names], fontsize=8)
    axes.axhline(100, color="black", linewidth=1, linestyle="--", label="board capacity")
    axes.set_xticks(x, [f"{RESOURCES[r]}\n(of {capacity[r]:,})" for r in names])
    axes.set_ylabel("% of the board")
    axes.set_title(f"Resources on {data.manifest['board']['name']} "
                   f"({data.manifest['board']['part']})")
    axes.legend(fontsize=8)
    caption = ("Bars: share of the board; labels: counts. The resource model's figures "
               "come from the manifest" + (", Yosys' from synth.json." if synth else
                                           "; run 'nnrtl synth DIR' to add Yosys' counts."))
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


def _sim_lines(sim):
    lines = [f"bit-exact: {sim.get('bit_exact')}"]
    for key in ("cycles", "model_cycles", "model_error",
                "utilization", "gops", "first_mismatch", "error"):
        if sim.get(key) is not None:
            value = sim[key]
            lines.append(f"{key}: {value:.4g}" if isinstance(value, float)
                         else f"{key}: {value}")
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
        "img{max-width:100%;} pre{background:#f4f4f4;padding:.5em;}</style>",
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
        encoded = base64.b64encode((data.directory / figure.file).read_bytes()).decode()
        parts.append(f"<figure><img src='data:image/png;base64,{encoded}' "
                     f"alt='{html.escape(figure.file)}'><figcaption>"
                     f"{html.escape(figure.caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(directory, engine_for):
    """Write ``directory/report.html`` and its PNGs; return the page's path.

    ``engine_for(name)`` gives the :class:`~nnrtl.gen.engines.Engine` the manifest names;
    its ``report`` hook, if any, adds the engine's figures after the generic ones."""
    data = load_report_data(directory)
    engine = engine_for(data.manifest["engine"])
    figures = [_parameters(data), _resources(data)]
    if data.sim is not None:
        figures.append(_cycles(data))
    if engine.report is not None:
        figures += engine.report(data)
    figures = [f for f in figures if f is not None]
    page = _html(data, figures)
    path = Path(directory) / REPORT
    handle, temporary = tempfile.mkstemp(prefix=f".{REPORT}.", dir=directory)
    with os.fdopen(handle, "w") as file:
        file.write(page)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
    return path

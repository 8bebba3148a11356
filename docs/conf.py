"""Sphinx configuration of the nnrtl documentation (``make docs``).

Pages are MyST Markdown. Before reading them, :func:`_generate` writes ``docs/_generated/``
from the installed package, so that no figure of the tool is typed into a page: the
boards' capacities (``nnrtl boards``), each engine's parameters, presets and default boards
(``nnrtl engines``), and each engine's results from the benchmark output in
``build/bench/`` (``make bench``) where it exists.
"""

import contextlib
import io
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GENERATED = HERE / "_generated"
BENCH = Path(os.environ.get("NNRTL_BENCH_DIR", ROOT / "build" / "bench"))

project = "nnrtl"
author = "the nnrtl developers"
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinxarg.ext",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_generated/*.fragment.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
html_theme = "furo"
html_title = "nnrtl"
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True
intersphinx_mapping = {}
nitpicky = False
suppress_warnings = ["myst.xref_missing"]


def _run(*argv):
    """stdout of ``nnrtl ARGV`` run in this process."""
    from nnrtl.gen.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    if code:
        raise RuntimeError(f"nnrtl {' '.join(argv)} exited {code}")
    return out.getvalue()


def _write(name, text):
    path = GENERATED / name
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _cell(value):
    return str(value).replace("|", "\\|")


def _boards():
    boards = json.loads(_run("boards", "--json"))
    rows = ["| board | part | LUT | FF | DSP | BRAM36 | URAM | on-chip Mb | off-chip memory |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for board in boards:
        rows.append(f"| `{board['name']}` | `{board['part']}` | {board['lut']:,} "
                    f"| {board['ff']:,} | {board['dsp']:,} {board['dsp_kind']} "
                    f"| {board['bram36']:,} | {board['uram']:,} | {board['onchip_mb']} "
                    f"| {_cell(board['offchip_kind'])}, {board['offchip_gbps']} GB/s |")
    rows += ["", "Sources:", ""]
    for board in boards:
        rows += [f"- `{board['name']}` ({board['title']}): " + "; ".join(
            _cell(source) for source in board["sources"])]
    return "\n".join(rows) + "\n"


def _engine(engine):
    lines = [f"`nnrtl engines` says of `{engine['name']}`: {engine['summary']}; its "
             f"configuration is `{engine['config']}`.", "",
             "| parameter | type | default |", "| --- | --- | --- |"]
    lines += [f"| `{p['name']}` | {p['type']} | `{_cell(p['default'])}` |"
              for p in engine["parameters"]]
    lines.append("")
    if engine["presets"]:
        lines += ["Presets (`--preset`):", ""]
        lines += [f"- `{name}` (board `{preset['board']}`): {_cell(preset['source'])}"
                  for name, preset in engine["presets"].items()]
        lines.append("")
    boards = engine["default_boards"]
    if boards:
        lines.append("The default configuration generates on " + ", ".join(
            f"`{board}`" + (" (" + ", ".join(f"{k}={v}" for k, v in chosen.items()) + ")"
                            if chosen else "") for board, chosen in boards.items()) + ".")
    else:
        lines.append("The default configuration generates on no board.")
    lines += ["", "Hooks: " + ", ".join(f"`{hook}`" for hook in engine["hooks"]) + ".", ""]
    return "\n".join(lines)


def _results(name):
    source = BENCH / f"{name}.md"
    if source.exists():
        return (f"From `{source.relative_to(ROOT) if source.is_relative_to(ROOT) else source}`"
                f" (`make bench`):\n\n" + source.read_text())
    return (f"This build of the documentation has no benchmark output for `{name}` "
            f"(`build/bench/{name}.md`). Run `make bench` (or `python -m nnrtl.gen.bench "
            f"--out build/bench --only {name}`), then `make docs`: the tables and figures "
            f"the bench measured appear here, each beside the paper's.\n")


def _generate(app):
    GENERATED.mkdir(exist_ok=True)
    _write("boards.fragment.md", _boards())
    for engine in json.loads(_run("engines", "--json")):
        _write(f"engine-{engine['name']}.fragment.md", _engine(engine))
        _write(f"results-{engine['name']}.fragment.md", _results(engine["name"]))


def setup(app):
    sys.path.insert(0, str(HERE))
    app.connect("builder-inited", _generate)

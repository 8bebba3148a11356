"""``nnrtl report DIR``: the page and its plots rendered headless from a generated design
with ``sim.json``, ``synth.json`` and ``explore.json``; the SBE's cycle breakdown; the
errors."""

import base64
import io
import json
import re

import numpy as np
import pytest
from matplotlib.image import imread

from nnrtl.gen.cli import main
from nnrtl.gen.engines import get_engine
from nnrtl.gen.output import ADDED_LATER
from nnrtl.gen.sbe.exploration import MAX_POINTS

from sbe_results import SBE_RUN, SBE_SYNTH



def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_png(path):
    """A real picture: decodes, at least 300 x 200 pixels, many colours, and not one
    colour on its rows or columns throughout."""
    image = imread(path)
    assert image.shape[0] >= 200 and image.shape[1] >= 300
    pixels = image.reshape(-1, image.shape[2])
    assert len(np.unique(pixels, axis=0)) > 20
    assert image.std() > 0.05


def test_sbe_breakdown_sums_to_the_cycles():
    rows = get_engine("sbe").breakdown(SBE_RUN)
    # 5272 - 1536 - 234 - 3442 - 0 - 0 = 60 cycles of pipeline fill and drain
    assert rows == [("computing (column steps)", 1536),
                    ("waiting for h (data dependency)", 234),
                    ("waiting for weights", 3442),
                    ("waiting for inputs (x)", 0),
                    ("output backpressure (hand-over waits)", 0),
                    ("pipeline fill and drain", 60)]
    failed = {"bit_exact": False, "error": "a budget overrun"}
    assert get_engine("sbe").breakdown(failed) == []


def test_report_of_a_small_sbe(tmp_path, capsys):
    output = tmp_path / "sbe"
    assert run(capsys, "generate", "sbe", "--board", "zc706", "-o", str(output))[0] == 0
    sim = {**SBE_RUN, "breakdown": get_engine("sbe").breakdown(SBE_RUN)}
    (output / "sim.json").write_text(json.dumps(sim))
    (output / "synth.json").write_text(json.dumps(SBE_SYNTH))
    code, _, err = run(capsys, "explore", "sbe", "--board", "zc706", "--param",
                       "input_size=80", "--param", "hidden_size=16", "--top", "12",
                       "-o", str(output))
    assert code == 0 and f"wrote {output / 'explore.json'}" in err
    explore = json.loads((output / "explore.json").read_text())
    assert len(explore["candidates"]) == 12 and explore["candidates"][0]["chosen"]
    # every feasible configuration (a sample of them beyond MAX_POINTS) for the plot
    points = explore["feasible_points"]
    assert points["count"] == explore["feasible"] > points["kept"] == MAX_POINTS
    assert len({(p["dsp"], p["bram36"]) for p in points["points"]}) > 100

    code, out, _ = run(capsys, "report", str(output))
    page = output / "report.html"
    assert code == 0 and out.startswith(f"wrote {page} (open file://")
    html = page.read_text()
    embedded = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)' alt='([^']+)'",
                          html)
    files = [name for _, name in embedded]
    assert files == ["report-resources.png", "report-cycles.png",
                     "report-utilization.png", "report-explore.png"]
    for data, name in embedded:
        assert base64.b64decode(data) == (output / name).read_bytes()
        check_png(output / name)
        check_png(io.BytesIO(base64.b64decode(data)))
    for section in ("Parameters", "Resources", "Simulation", "Blocking and batching",
                    "Exploration"):
        assert f"<h2>{section}</h2>" in html
    assert "Yosys" in html and "bit-exact: True" in html
    assert (f"Every feasible configuration in explore.json against its DSPs and BRAM36s "
            f"({explore['considered']:,} considered, {explore['feasible']:,} fit the board, "
            f"{MAX_POINTS} of them plotted: the ") in html
    # everything the report wrote leaves the directory replaceable by generate --force
    assert {p.name for p in output.iterdir()} - set(json.loads(
        (output / "manifest.json").read_text())["files"]) - {"manifest.json"} \
        <= set(ADDED_LATER)
    assert run(capsys, "generate", "sbe", "--board", "zc706", "-o", str(output),
               "--force")[0] == 0


def test_report_of_a_synthesised_demo(tmp_path, capsys):
    """The real ``nnrtl synth`` (seconds for a 2-lane demo) beside the resource model, and
    the sim.json of a run that failed before its counters: no cycle plot, the error shown."""
    output = tmp_path / "demo"
    assert run(capsys, "generate", "demo", "--board", "zc706", "--param", "lanes=2",
               "-o", str(output))[0] == 0
    assert run(capsys, "synth", str(output))[0] == 0
    (output / "sim.json").write_text(json.dumps({
        "engine": "demo", "board": "zc706", "seed": 1, "backpressure": "bursty",
        "bit_exact": False, "error": "m_axis: no frame 3 within its budget",
        "seconds": 4.2, "breakdown": []}))
    assert run(capsys, "report", str(output))[0] == 0
    html = (output / "report.html").read_text()
    assert "bit-exact: False\nerror: m_axis: no frame 3 within its budget" in html
    assert re.findall(r"alt='([^']+)'", html) == ["report-resources.png"]
    # the parameters as a table of text
    assert ("<h2>Parameters</h2>\n<table><tr><th>parameter</th><th>value</th></tr>"
            "<tr><td>lanes</td><td>2</td></tr>") in html
    check_png(output / "report-resources.png")
    assert not (output / "report-cycles.png").exists()


@pytest.mark.parametrize("make, message", [
    (lambda d: d.mkdir(), r"report: {d} holds no manifest\.json; give a directory written "
                          r"by 'nnrtl generate'"),
    (lambda d: None, r"report: {d} is not a directory"),
    (lambda d: (d.mkdir(), (d / "manifest.json").write_text("{")),
     r"{d}/manifest\.json is not valid JSON: .*"),
    (lambda d: (d.mkdir(), (d / "manifest.json").write_text('{"engine": "sbe"}')),
     r"report: {d}/manifest\.json lacks module, parameters, board; regenerate the "
     r"directory with 'nnrtl generate'"),
])
def test_report_errors_exit_2(tmp_path, capsys, make, message):
    directory = tmp_path / "out"
    make(directory)
    code, out, err = run(capsys, "report", str(directory))
    assert code == 2 and out == ""
    assert re.fullmatch("nnrtl: error: " + message.format(d=re.escape(str(directory)))
                        + "\n", err)
    assert not (directory / "report.html").exists()

"""gen/synth.py's retry on Yosys' ABC name clash (YosysHQ/yosys#4349): Yosys itself is
replaced by a stand-in that fails the first script the way Yosys does on the η-LSTM channel
and checks the second, so the test runs in milliseconds."""

import json
import subprocess

import pytest

from nnrtl.gen import synth
from nnrtl.gen.errors import UsageError

CLASH = "ERROR: Assert `count_id(wire->name) == 0' failed in kernel/rtlil.cc:2872."


def fake_yosys(outcomes, scripts):
    """A ``subprocess.run`` that records each script and answers from ``outcomes``."""
    def run(command, cwd, capture_output, text):
        script = (cwd / command[-1]).read_text()
        scripts.append(script)
        code, stderr = outcomes[len(scripts) - 1]
        (cwd / "synth.log").write_text(stderr)
        if code == 0:
            (cwd / "synth_stat.json").write_text(json.dumps(
                {"design": {"num_cells_by_type": {"LUT6": 3, "FDRE": 2}}}))
            (cwd / "synth_netlist.json").write_text(json.dumps({"modules": {"top": {}}}))
        return subprocess.CompletedProcess(command, code, "", stderr)
    return run


@pytest.fixture
def design(tmp_path, monkeypatch):
    (tmp_path / "top.v").write_text("module top; endmodule\n")
    monkeypatch.setattr(synth, "_yosys_command", lambda: ["yosys"])
    monkeypatch.setattr(synth, "logic_levels", lambda module: 0)
    return tmp_path


def test_the_abc_name_clash_is_retried_with_splitnets(design, monkeypatch):
    scripts = []
    monkeypatch.setattr(subprocess, "run", fake_yosys([(1, CLASH), (0, "")], scripts))
    cells, _, _ = synth.run_yosys(design / "top.v", "top", "xcup", design)
    assert cells == {"LUT6": 3, "FDRE": 2} and len(scripts) == 2
    assert "splitnets" not in scripts[0]
    lines = scripts[1].splitlines()
    split = lines.index("splitnets")
    assert lines[split - 1].endswith("-run :map_luts")
    assert lines[split + 1] == "opt_clean -purge"
    assert lines[split + 2].endswith("-run map_luts:")


def test_other_failures_are_not_retried(design, monkeypatch):
    scripts = []
    monkeypatch.setattr(subprocess, "run", fake_yosys([(1, "ERROR: syntax error")], scripts))
    with pytest.raises(UsageError, match=r"^Yosys rejected top\.v \(exit 1: ERROR: syntax "
                                         r"error\); its log is "):
        synth.run_yosys(design / "top.v", "top", "xcup", design)
    assert len(scripts) == 1

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


def test_zero_initialisers_are_left_out_of_what_yosys_reads():
    """Every loop hw.hierarchy writes for an all-zero memory (plain and escaped names) goes;
    a memory with other contents and the rest of the text stay."""
    from nnrtl.hw import hierarchy

    lines = "\n".join(f"    m[{n}] = 16'h0;" for n in range(70))
    zero = hierarchy.compact_zero_init(f"  initial begin\n{lines}\n  end\n")
    escaped = zero.replace("m[", "\\ram$1 [")
    other = "  initial begin\n    t[0] = 16'h0;\n    t[1] = 16'h7;\n  end\n"
    text = f"module top;\n  reg [15:0] m [69:0];\n{zero}{other}endmodule\n" \
           f"module sub;\n{escaped}  assign x = 1;\nendmodule\n"
    stripped, count = synth.strip_zero_init(text)
    assert count == 2 and "nnrtl_zero_init" in zero and "\\ram$1 [" in escaped
    assert stripped == f"module top;\n  reg [15:0] m [69:0];\n{other}endmodule\n" \
                       f"module sub;\n  assign x = 1;\nendmodule\n"


def test_synthesize_reads_the_stripped_text_and_keeps_the_design(design, monkeypatch):
    from nnrtl.hw import hierarchy

    zero = hierarchy.compact_zero_init(
        "  initial begin\n" + "".join(f"    m[{n}] = 8'h0;\n" for n in range(3)) + "  end\n")
    verilog = f"module top;\n  reg [7:0] m [2:0];\n{zero}endmodule\n"
    (design / "top.v").write_text(verilog)
    (design / "manifest.json").write_text(json.dumps({"module": "top",
                                                      "board": {"name": "vc709"}}))
    read = []

    def run(command, cwd, capture_output, text):
        read.append((cwd / "top.synth.v").read_text())
        return fake_yosys([(0, "")], [])(command, cwd, capture_output, text)
    monkeypatch.setattr(subprocess, "run", run)
    report = synth.synthesize(design, hierarchy="flat")
    assert read == ["module top;\n  reg [7:0] m [2:0];\nendmodule\n"]
    assert report["zero_inits_left_out"] == 1 and report["lut"] == 3
    assert (design / "top.v").read_text() == verilog and not (design / "top.synth.v").exists()


#: top instantiates mid twice and leaf once; mid instantiates leaf three times.
NESTED = ("module leaf(a, y);\n  input a;\n  output y;\nendmodule\n"
          "module \\mid.x (a, y);\n  input a;\n  output y;\n"
          "  leaf l0 (\n  );\n  leaf l1 (\n  );\n  leaf l2 (\n  );\nendmodule\n"
          "module top(a, y);\n  input a;\n  output y;\n"
          "  \\mid.x  m0 (\n  );\n  \\mid.x  m1 (\n  );\n  leaf l (\n  );\nendmodule\n"
          "module unused;\nendmodule\n")


def test_module_instances_counts_through_the_hierarchy():
    plan = synth.module_instances(NESTED, "top")
    assert plan == {"top": (1, {"\\mid.x": 2, "leaf": 1}),
                    "\\mid.x": (2, {"leaf": 3}),
                    "leaf": (7, {})}
    assert list(plan) == ["top", "\\mid.x", "leaf"]
    with pytest.raises(UsageError, match=r"^the Verilog holds no module nope$"):
        synth.module_instances(NESTED, "nope")


@pytest.mark.parametrize("limit, chosen", [(len(NESTED), "shared"),
                                           (len(NESTED) - 1, "per-module")])
def test_auto_goes_per_module_above_the_limit(design, monkeypatch, limit, chosen):
    """NESTED repeats instances (not flat); at most the limit whole, above it per module."""
    monkeypatch.setattr(synth, "PER_MODULE_LIMIT_BYTES", limit)
    monkeypatch.setattr(synth, "FLAT_LIMIT_BYTES", 0)
    monkeypatch.setattr(subprocess, "run", fake_yosys([(0, "")] * 3, []))
    (design / "top.v").write_text(NESTED)
    (design / "manifest.json").write_text(json.dumps({"module": "top",
                                                      "board": {"name": "vc709"}}))
    assert synth.synthesize(design)["hierarchy"] == chosen


def test_per_module_multiplies_each_module_by_its_instances(design, monkeypatch):
    """One Yosys run per module, its children read as black boxes (their cells not
    counted): leaf 2 LUT6 x 7 instances = 14, mid 1 FDRE x 2 = 2, top 1 DSP48E1."""
    own = {"top": {"DSP48E1": 1, "mid.x": 2, "leaf": 1}, "mid.x": {"FDRE": 1, "leaf": 3},
           "leaf": {"LUT6": 2}}
    seen = []

    def run(command, cwd, capture_output, text):
        script = (cwd / command[-1]).read_text()
        top = script.split(" -top ")[1].split()[0]
        seen.append((top, script.splitlines()[0], (cwd / "library.v").read_text()))
        (cwd / "synth.log").write_text("")
        (cwd / "synth_stat.json").write_text(json.dumps(
            {"design": {"num_cells_by_type": own[top]}}))
        (cwd / "synth_netlist.json").write_text(json.dumps({"modules": {top: {}}}))
        return subprocess.CompletedProcess(command, 0, "", "")
    monkeypatch.setattr(subprocess, "run", run)
    (design / "top.v").write_text(NESTED)
    (design / "manifest.json").write_text(json.dumps({"module": "top",
                                                      "board": {"name": "vc709"}}))
    report = synth.synthesize(design, hierarchy="per-module")
    assert [top for top, _, _ in seen] == ["top", "mid.x", "leaf"]
    assert all(first == "read_verilog -sv -lib library.v" for _, first, _ in seen)
    assert seen[1][2].startswith("module leaf(") and seen[2][2] == ""
    assert report["cells"] == {"DSP48E1": 1, "FDRE": 2, "LUT6": 14}
    assert (report["dsp"], report["ff"], report["lut"]) == (1, 2, 14)
    assert [(r["module"], r["instances"]) for r in report["module_runs"]] == [
        ("top", 1), ("\\mid.x", 2), ("leaf", 7)]
    assert report["hierarchy"] == "per-module" and not list(design.glob("per_module*"))

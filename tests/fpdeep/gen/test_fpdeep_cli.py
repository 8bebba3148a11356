"""``nnrtl map``: the generic command reaches FPDeep's mapper through the registered
engine's ``map`` hook (:func:`nnrtl.gen.fpdeep.hooks.map_hook`); the output directory is
complete or absent; bad input exits 2 naming the parameter."""

import copy
import json
import re

import pytest
import torch

from nnrtl.gen import engines as registry
from nnrtl.gen.cli import main


@pytest.fixture
def mapper():
    """The registered FPDeep engine, the one with a ``map`` hook."""
    return registry.get_engine("fpdeep")


@pytest.fixture(scope="module")
def cnn_file(tmp_path_factory):
    """A small CNN as a torch.export archive: 32 x 32 x 3 -> conv 16 -> pool -> conv 32 ->
    pool -> 10."""
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 10))
    path = tmp_path_factory.mktemp("model") / "cnn.pt2"
    torch.export.save(torch.export.export(cnn, (torch.zeros(1, 3, 32, 32),)), path)
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_map_a_model_file(mapper, cnn_file, tmp_path, capsys):
    out_dir = tmp_path / "map"
    code, out, err = run(capsys, "map", "fpdeep", "--model", cnn_file, "--fpgas", 3,
                         "--board", "vc709", "-o", out_dir)
    assert code == 0, err
    assert "image size 32 x 32 inferred" in err
    assert sorted(p.name for p in out_dir.iterdir()) == ["manifest.json", "mapping.json"]
    found = json.loads((out_dir / "mapping.json").read_text())
    assert found["board"] == {"name": "vc709", "dsp": 3600, "bram36": 1470, "lut": 433200,
                              "fpgas": 3}
    assert len(found["nodes"]) == 3 and len(found["boundaries"]) == 2
    assert found["cost_model"]["name"] == "paper" and found["options"]["link_gbps"] == 150
    assert [l["macs"] for l in found["network"]["layers"]] == [
        32 * 32 * 16 * 3 * 9, 16 * 16 * 32 * 16 * 9, 2048 * 10]
    summary = found["summary"]
    assert summary["feasible"] and summary["period_cycles"] > 0
    for key in ("images_per_second", "gops_per_fpga", "idle_share", "v_coarse", "v_fine",
                "max_link_gbps"):
        assert key in summary
    node = found["nodes"][0]
    assert {"segments", "storage", "hosted", "dsp", "bram36", "idle", "dsp_use"} <= set(node)
    lines = out.splitlines()
    assert lines[0].startswith("FPDeep: cnn.pt2 on 3 x vc709, precision fixed16")
    assert any(line.split()[:1] == ["1"] and "layers[0]" in line for line in lines)
    # --force replaces it (nnrtl wrote it); fp32 on the VC709: LUT multipliers, DSP adders,
    # 6 DSP per MAC; the adders pinned to LUT shifts, the multipliers' chosen: DSP, 4 DSP
    code, out, err = run(capsys, "map", "fpdeep", "--model", cnn_file, "--fpgas", 2,
                         "--board", "vc709", "--precision", "fp32", "--image-size", 32,
                         "--link-gbps", 250, "-o", out_dir, "--force")
    assert code == 0, err
    found = json.loads((out_dir / "mapping.json").read_text())
    assert found["cost_model"]["dsp_per_mac"] == 6 and len(found["nodes"]) == 2
    assert (found["cost_model"]["multiplier_shifts"], found["cost_model"]["adder_shifts"]) == (
        "lut", "dsp")
    code, out, err = run(capsys, "map", "fpdeep", "--model", cnn_file, "--fpgas", 2,
                         "--board", "vc709", "--precision", "fp32", "--image-size", 32,
                         "--param", "adder_shifts=lut", "-o", out_dir, "--force")
    assert code == 0, err
    found = json.loads((out_dir / "mapping.json").read_text())
    assert found["cost_model"]["dsp_per_mac"] == 4 and found["cost_model"]["lut_per_mac"] == 820


def test_map_a_builtin_network_with_params(mapper, tmp_path, capsys):
    code, out, err = run(capsys, "map", "fpdeep", "--network", "alexnet", "--fpgas", 15,
                         "--board", "vc709", "--param", "fc_batch=4", "-o", tmp_path / "a")
    assert code == 0, err
    found = json.loads((tmp_path / "a" / "mapping.json").read_text())
    assert found["options"]["fc_batch"] == 4 and found["summary"]["bound"] == "ddr"
    assert "conv1" in out and len(found["nodes"]) == 15


def test_infeasible_mapping_is_refused(mapper, tmp_path, capsys):
    out_dir = tmp_path / "vgg"
    code, out, err = run(capsys, "map", "fpdeep", "--network", "vgg16", "--fpgas", 15,
                         "--board", "vc709", "--precision", "fp32", "-o", out_dir)
    assert code == 2 and out == ""
    assert re.match(r"^nnrtl: error: vgg16 does not fit 15 x vc709 in fp32: node \d+ needs "
                    r"[\d,]+ BRAM36, [\d,]+ over vc709's 1,470; its largest buffer is lpram "
                    r"\([\d,]+ words\).*; it fits with --fpgas \d+ or .*--precision fixed16$",
                    err), err
    assert not out_dir.exists()


def test_paper_setting_maps_with_no_option(mapper, tmp_path, capsys):
    """AlexNet on 15 VC709s: fc_batch and the Act-RAM placement chosen, printed and in
    mapping.json; compute-bound, node 1's Act-RAM (conv1's input) in DDR."""
    code, out, err = run(capsys, "map", "fpdeep", "--network", "alexnet", "--fpgas", 15,
                         "--board", "vc709", "-o", tmp_path / "a")
    assert code == 0, err
    found = json.loads((tmp_path / "a" / "mapping.json").read_text())
    batch = found["options"]["fc_batch"]
    assert found["summary"]["feasible"] and batch > 1
    assert found["summary"]["bound"] == "compute"
    assert found["options"]["chosen"]["fc_batch"].startswith(f"{batch} (the fastest that fits")
    assert found["options"]["balance"] is True
    assert found["nodes"][0]["act_ram_ddr_words"] > 0
    assert found["nodes"][0]["segments"][0]["act_ram_in_ddr"] is True
    assert re.search(r"^  period [\d,]+ cycles \(compute-bound; ", out, re.M), out
    assert re.search(r"^ +1 .* conv1 \d+x\d+ \(Act-RAM in DDR\)$", out, re.M), out
    assert re.search(rf"^  chosen: balance on .*; act_ram overflow: in DDR on node\(s\) 1\b.*; "
                     rf"fc_batch {batch} \(the fastest", out, re.M)
    assert re.search(rf"^map: chose balance on .*; fc_batch {batch} ", err, re.M)


def test_pinned_value_that_does_not_fit_is_refused(mapper, tmp_path, capsys):
    code, out, err = run(capsys, "map", "fpdeep", "--network", "alexnet", "--fpgas", 15,
                         "--board", "vc709", "--param", "fc_batch=30", "--param",
                         "act_ram=chip", "-o", tmp_path / "a")
    assert code == 2 and out == ""
    assert re.match(r"^nnrtl: error: alexnet does not fit 15 x vc709 in fixed16 with --param "
                    r"fc_batch=30, --param act_ram=chip \(pinned\): node 1 needs [\d,]+ "
                    r"BRAM36, [\d,]+ over vc709's 1,470; its largest buffer is act_ram "
                    r"\([\d,]+ words\), with the free choices at their most storage-saving "
                    r"\(balancing on\); it fits with fc_batch unpinned or act_ram unpinned$",
                    err), err


@pytest.fixture(scope="module")
def alexnet_mapping(tmp_path_factory):
    """``mapping.json`` of AlexNet on 15 VC709s as ``nnrtl map`` chooses it."""
    path = tmp_path_factory.mktemp("alexnet") / "map"
    assert main(["map", "fpdeep", "--network", "alexnet", "--fpgas", "15", "--board",
                 "vc709", "-o", str(path)]) == 0
    return json.loads((path / "mapping.json").read_text())


def _cluster(capsys, tmp_path, found, *argv):
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(found))
    return run(capsys, "cluster", "fpdeep", "--mapping", path, "--images", 6, *argv)


def test_cluster_agrees_with_the_map(mapper, alexnet_mapping, tmp_path, capsys):
    code, out, err = _cluster(capsys, tmp_path, alexnet_mapping)
    assert code == 0, err
    assert re.search(r"^checks: buffers within their depths, period within 10% of the "
                     r"mapping's$", out, re.M), out


def test_cluster_exits_1_on_a_period_off_the_mapping(mapper, alexnet_mapping, tmp_path,
                                                     capsys):
    found = copy.deepcopy(alexnet_mapping)
    found["summary"]["period_cycles"] //= 2
    code, out, err = _cluster(capsys, tmp_path, found)
    assert code == 1
    assert re.search(r"^\s+15\s+[\d.]+\s", out, re.M)        # the table came out first
    assert re.match(r"^nnrtl: check failed: simulated period [\d,.]+ cycles differs from the "
                    r"mapping's [\d,]+ by \+100\.\d%, beyond the 10% tolerance$", err), err


def test_cluster_exits_1_on_a_buffer_over_its_depth(mapper, alexnet_mapping, tmp_path,
                                                    capsys):
    found = copy.deepcopy(alexnet_mapping)
    storage = found["nodes"][2]["storage"]
    storage["pab"] = 1
    code, out, err = _cluster(capsys, tmp_path, found, "--json")
    assert code == 1
    assert json.loads(out)["pab_within_depth"] is False
    assert re.match(r"^nnrtl: check failed: node 3: PAB peak [\d,]+ words exceeds its depth "
                    r"1$", err), err


@pytest.mark.parametrize("argv, message", [
    (["--fpgas", "2"], "give --model FILE or --network NAME (one of them)"),
    (["--network", "vgg16", "--model", "x.pt", "--fpgas", "2"], "give --model FILE or "
                                                                  "--network NAME"),
    (["--network", "resnet", "--fpgas", "2"], "--network 'resnet': FPDeep has alexnet, "
                                              "vgg16, vgg19 built in"),
    (["--model", "missing.pt", "--fpgas", "2"], "--model missing.pt: no such file"),
    (["--network", "vgg16", "--fpgas", "0"], "--fpgas must be a positive integer, not 0"),
    (["--network", "vgg16", "--fpgas", "2", "--link-gbps", "-1"],
     "--link-gbps must be a positive number, not -1"),
    (["--network", "vgg16", "--fpgas", "2", "--image-size", "0"],
     "--image-size must be a positive integer, not 0"),
    (["--network", "vgg16", "--fpgas", "2", "--precision", "fp64"],
     "--precision must be one of fixed16, fp32, not 'fp64'"),
    (["--network", "vgg16", "--fpgas", "2", "--param", "depth=3"],
     "--param 'depth=3': FPDeep's mapping options are fc_batch=..."),
    (["--network", "vgg16", "--fpgas", "2", "--param", "dsp_cap=lots"],
     "--param dsp_cap must be a number in (0, 1], not 'lots'"),
    (["--network", "vgg16", "--fpgas", "2", "--board", "vc999"], "unknown board"),
])
def test_bad_input_exits_2(mapper, tmp_path, capsys, argv, message):
    if "--board" not in argv:
        argv = [*argv, "--board", "vc709"]
    code, out, err = run(capsys, "map", "fpdeep", *argv, "-o", tmp_path / "m")
    assert code == 2 and out == ""
    assert err.startswith("nnrtl: error: ") and message in err, err
    assert not (tmp_path / "m").exists()


def test_refused_model_files(mapper, tmp_path, capsys):
    """An RNN, and a CNN without a Linear layer and no --image-size."""
    torch.save(torch.nn.LSTM(3, 5).state_dict(), tmp_path / "lstm.pt")
    code, _, err = run(capsys, "map", "fpdeep", "--model", tmp_path / "lstm.pt", "--fpgas", 2,
                       "--board", "vc709", "-o", tmp_path / "m")
    assert code == 2 and "lstm.pt: FPDeep maps CNNs" in err
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
    torch.export.save(torch.export.export(conv, (torch.zeros(1, 3, 8, 8),)),
                      tmp_path / "conv.pt2")
    code, _, err = run(capsys, "map", "fpdeep", "--model", tmp_path / "conv.pt2", "--fpgas", 2,
                       "--board", "vc709", "-o", tmp_path / "m")
    assert code == 2 and "conv.pt2: no Linear layer fixes the input size; give " \
                         "--image-size" in err
    assert not (tmp_path / "m").exists()


def test_engine_without_a_mapper(mapper, tmp_path, capsys):
    code, _, err = run(capsys, "map", "demo", "--network", "vgg16", "--fpgas", 2,
                       "--board", "vc709", "-o", tmp_path / "m")
    assert code == 2
    assert err == "nnrtl: error: demo has no command map; engines with one: fpdeep\n"


def test_engines_lists_the_map_command(mapper, capsys):
    code, out, _ = run(capsys, "engines", "--json")
    by_name = {e["name"]: e for e in json.loads(out)}
    assert by_name["fpdeep"]["hooks"] == ["top", "resources", "predict", "simulate", "train",
                                          "bench", "draw"]
    assert by_name["fpdeep"]["commands"] == ["cluster", "map"]
    assert by_name["fpdeep"]["options"] == ["train"]


def test_cluster_checks_the_act_ram_held_in_ddr(mapper, alexnet_mapping, tmp_path, capsys):
    """Node 1's Act-RAM waits in DDR: its depth there is what the peak is checked against,
    and its channel's cycles per sample pace conv1 (slowed to 3 periods a sample, the chain
    follows)."""
    node = alexnet_mapping["nodes"][0]
    assert node["segments"][0]["act_ram_in_ddr"] and node["act_ram_ddr_words"] > 0
    found = copy.deepcopy(alexnet_mapping)
    found["nodes"][0]["act_ram_ddr_words"] = 1000
    code, out, err = _cluster(capsys, tmp_path, found, "--json")
    assert code == 1 and json.loads(out)["act_ram_within_depth"] is False
    assert re.match(r"^nnrtl: check failed: node 1: Act-RAM peak [\d,]+ words exceeds its "
                    r"depth [\d,]+$", err), err
    found = copy.deepcopy(alexnet_mapping)
    period = found["summary"]["period_cycles"]
    found["nodes"][0]["act_ddr_cycles"] = 3 * period
    code, out, err = _cluster(capsys, tmp_path, found, "--json")
    assert code == 1
    assert json.loads(out)["period_cycles"] == pytest.approx(3 * period, rel=0.02)

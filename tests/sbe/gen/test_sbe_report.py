"""The SBE's report figures describe the design in the report's directory: the data they
plot (not their pixels) -- the utilization marks from the simulated run and from the
model of exactly its work, the exploration with this design and the exploration's choice
told apart, the resource model's LUTs labelled as what they count."""

import json

import pytest

from nnrtl.gen.cli import main
from nnrtl.gen.report import MODEL_COUNTS, load_report_data, resource_rows
from nnrtl.gen.sbe import report as sbe_report
from nnrtl.gen.sbe.perf import model_cycles, predict
from nnrtl.hw.sbe.config import SbeConfig

from sbe_results import SBE_RUN, SBE_SYNTH


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    """The default SBE generated for the ZC706 (64 PEs, batch 8, 4 blocks)."""
    output = tmp_path_factory.mktemp("report") / "sbe"
    assert main(["generate", "sbe", "--board", "zc706", "-o", str(output)]) == 0
    return output


@pytest.fixture
def directory(design, tmp_path):
    """A copy of :func:`design` that a test may add files to."""
    copied = tmp_path / "sbe"
    copied.mkdir()
    for path in design.iterdir():
        (copied / path.name).write_bytes(path.read_bytes())
    return copied


def _candidate(config, cycles, dsp, bram36, chosen):
    return {"rank": 1 if chosen else 2, "chosen": chosen, "config": config,
            "cycles": cycles, "resources": {"dsp": dsp, "bram36": bram36}}


def _explore(config, *, model=None, board="zc706", chosen=None):
    """An explore.json of the default model whose chosen configuration is ``chosen``
    (default: the exploration's real choice, 512 PEs)."""
    chosen = chosen or {**config, "pes": 512, "batch": 16, "blocks": 12, "bus_weights": 32}
    return {"engine": "sbe", "board": board, "seq_len": 16, "considered": 10, "feasible": 2,
            "model": model or {"input_size": 80, "hidden_size": 16, "layers": 1,
                               "hidden_sizes": [], "source": None},
            "chosen": chosen,
            "candidates": [_candidate(chosen, 672, 548, 0, True),
                           _candidate(config, 2009, 100, 1, False)],
            "feasible_points": {"count": 2, "kept": 2, "sampled": False, "kept_which": "all",
                                "points": [{"pes": 512, "dsp": 548, "bram36": 0,
                                            "cycles": 672, "lower_bound_cycles": 600}]}}


def test_utilization_marks_are_the_simulated_run_and_the_model_of_its_work(directory):
    """The star is the simulation's own utilization; the ring the performance model of
    exactly the runs it simulated (3 and 13 steps, 2,918 cycles: sim.json's
    model_cycles), not of one 16-step sequence (2,009 cycles)."""
    (directory / "sim.json").write_text(json.dumps(SBE_RUN))
    shown = sbe_report.utilization_data(load_report_data(directory))
    config = SbeConfig()
    assert shown["workload"]["runs"] == [(0, 3), (0, 13)]
    assert shown["workload"]["label"] == ("the simulated runs (3 and 13 steps, layer 0) "
                                          "with gapless streams")
    model, simulated = shown["marks"]
    assert model["kind"] == "model" and simulated["kind"] == "simulated"
    assert model["utilization"] == pytest.approx(
        SBE_RUN["useful_macs"] / (config.pes * SBE_RUN["model_cycles"]))     # 52.6 %
    assert model["utilization"] != pytest.approx(predict(config).utilization)  # 76.5 %
    assert simulated["utilization"] == SBE_RUN["utilization"]                # 29.1 %
    assert simulated["label"] == "this design, simulated (streams random, seed 1)"
    # the ring lies on both curves, at this design's batch and blocks
    assert dict(shown["sweeps"]["batch"])[config.batch] == model["utilization"]
    assert dict(shown["sweeps"]["blocks"])[config.blocks] == model["utilization"]


def test_utilization_without_a_simulation_models_one_sequence(directory):
    shown = sbe_report.utilization_data(load_report_data(directory))
    assert shown["workload"] == {"runs": None, "useful_macs": None,
                                 "label": "one sequence of 16 steps with gapless streams"}
    (mark,) = shown["marks"]
    assert mark == {"kind": "model", "label": "this design, performance model",
                    "utilization": predict(SbeConfig()).utilization}


def test_explore_marks_this_design_and_labels_the_choice_as_another(directory):
    manifest = json.loads((directory / "manifest.json").read_text())
    config = manifest["parameters"]
    (directory / "explore.json").write_text(json.dumps(_explore(config)))
    shown = sbe_report.explore_data(load_report_data(directory))
    assert shown["plotted"]
    assert shown["this"] == {
        "label": "this design (64 PEs, batch 8, 4 blocks, 8 weights a cycle)",
        "dsp": manifest["resources_needed"]["dsp"],
        "bram36": manifest["resources_needed"]["bram36"],
        "cycles": model_cycles(SbeConfig(), seq_len=16)}
    assert shown["choice"] == {
        "label": "explore's choice, not this design (512 PEs, batch 16, 12 blocks, "
                 "32 weights a cycle)", "dsp": 548, "bram36": 0, "cycles": 672}


def test_explore_whose_choice_is_this_design(directory):
    config = json.loads((directory / "manifest.json").read_text())["parameters"]
    (directory / "explore.json").write_text(json.dumps(_explore(config, chosen=config)))
    shown = sbe_report.explore_data(load_report_data(directory))
    assert shown["choice"]["label"] == "explore's choice: this design"


@pytest.mark.parametrize("change, described", [
    ({"model": {"input_size": 16, "hidden_size": 8, "layers": 1, "hidden_sizes": []}},
     "LSTM 16x8x1 on zc706"),
    ({"board": "vc709"}, "LSTM 80x16x1 on vc709"),
])
def test_explore_of_another_model_or_board_is_a_note_not_a_plot(directory, capsys, change,
                                                                 described):
    config = json.loads((directory / "manifest.json").read_text())["parameters"]
    (directory / "explore.json").write_text(json.dumps(_explore(config, **change)))
    shown = sbe_report.explore_data(load_report_data(directory))
    assert shown == {"plotted": False, "reason": (
        f"explore.json is an exploration of {described}; this directory's design is "
        f"LSTM 80x16x1 on zc706, none of its configurations, so it is not plotted here. "
        f"'nnrtl explore sbe --board zc706 --param input_size=80 --param hidden_size=16 "
        f"--param layers=1 -o DIR' explores this design's model.")}
    assert main(["report", str(directory)]) == 0
    capsys.readouterr()
    page = (directory / "report.html").read_text()
    assert "<h2>Exploration</h2>\n<p>explore.json is an exploration of " in page
    assert not (directory / "report-explore.png").exists()
    assert "report-explore.png" not in page


def test_resources_say_what_the_model_counts(directory):
    (directory / "synth.json").write_text(json.dumps(SBE_SYNTH))
    data = load_report_data(directory)
    rows = {r["resource"]: r for r in resource_rows(data, sbe_report.MODEL_COUNTS,
                                                    sbe_report.PARTIAL)}
    lut = rows["lut"]
    assert lut["partial"] and lut["model_counts"] == ("LUT-RAM and LUT multipliers only, "
                                                      "not the logic")
    assert lut["model"] == data.manifest["resources_needed"]["lut"]
    assert lut["yosys"] == 9000 and lut["yosys_counts"] == "every LUT: logic and LUT-RAM/SRL"
    assert lut["yosys_parts"] == [("logic", 8500), ("LUT-RAM/SRL", 500)]
    assert not rows["dsp"]["partial"] and rows["ff"]["model"] is None
    generic = {r["resource"]: r for r in resource_rows(data)}
    assert not any(r["partial"] for r in generic.values())
    assert generic["lut"]["model_counts"] == MODEL_COUNTS
    # the page's caption says it
    assert main(["report", str(directory)]) == 0
    page = (directory / "report.html").read_text()
    assert ("come from the manifest (LUT: LUT-RAM and LUT multipliers only, not the logic; "
            "DSP: PE multipliers and post-processing units; BRAM36: the memories too deep "
            "for LUT-RAM); hatched: a model figure that counts only part of the resource, "
            "not comparable with Yosys&#x27; count of every cell") in page
    assert page.count("alt='report-resources.png'") == 1


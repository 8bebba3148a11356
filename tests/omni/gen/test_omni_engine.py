# amaranth: UnusedElaboratable=no
"""The η-LSTM engine's hooks (gen/omni/engine.py): registration, the resource model
against the VCU128 (gen/omni/resources.py), the cycle model (gen/omni/perf.py), the
command line's sim and generate."""

import dataclasses
import json

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import budget, check_fit, get_engine
from nnrtl.gen.errors import UsageError
from nnrtl.gen.omni.engine import ENGINE, PAPER_VCU128, PRESETS, SMALL
from nnrtl.gen.omni.perf import predict, top_schedule, top_task_cycles
from nnrtl.gen.omni.resources import (CHANNEL_LOGIC, UNIT_LOGIC, measure, measure_channel,
                                      resource_estimate)
from nnrtl.hw.omni.top_config import OmniConfig
from nnrtl.hw.omni.top_program import top_tasks

VCU128 = get_board("vcu128")


def test_registered_with_its_hooks_and_parameters():
    assert get_engine("omni") is ENGINE
    described = ENGINE.describe()
    names = [p["name"] for p in described["parameters"]]
    assert names[:10] == ["input_size", "hidden_size", "layers", "seq_len", "batch",
                          "channels", "pes_per_channel", "swing_channels", "adder_stages",
                          "prune_threshold"]
    assert set(described["hooks"]) >= {"top", "resources", "predict", "simulate", "train",
                                       "clock"}
    assert ENGINE.clock_hz(SMALL, VCU128) == 500e6


def test_train_hook_imports_the_trainer_lazily(monkeypatch):
    """``_train`` reaches ``gen/omni/trainer.py`` (another helper's) only when called."""
    import sys
    import types

    module = types.ModuleType("nnrtl.gen.omni.trainer")
    module.train_hook = lambda request, network: ("trained", request, network)
    monkeypatch.setitem(sys.modules, "nnrtl.gen.omni.trainer", module)
    assert ENGINE.train("request", "network") == ("trained", "request", "network")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_fit_their_board(name):
    preset = PRESETS[name]
    needs = check_fit(ENGINE, preset.config, get_board(preset.board))
    assert needs["lut"] <= budget(get_board(preset.board).capacity, "lut")


def test_resources_add_up_from_lane_channel_and_shared_units():
    estimate = resource_estimate(PAPER_VCU128)
    lane, control = UNIT_LOGIC["lane"], UNIT_LOGIC["pe_control"]
    assert estimate.per_pe["lut"] == lane["lut"] + lane["lut_memory"]
    activation = UNIT_LOGIC["activation"]
    # one PE control, 32 lanes, the activation unit, then the channel's own logic
    assert estimate.per_channel["dsp"] == 32 * lane["dsp"] + activation["dsp"]
    assert estimate.per_channel["lut"] > (32 * estimate.per_pe["lut"] + control["lut"]
                                          + activation["lut"])
    assert estimate.total["dsp"] == 40 * estimate.per_channel["dsp"] + \
        UNIT_LOGIC["r2a"]["dsp"] + 14 * UNIT_LOGIC["dma"]["dsp"]     # a DMA per HBM port


def test_lanes_without_dsp48e2_instances_count_the_inferred_lane():
    """``dsp_primitives=False``: every lane is the measured ``lane_inferred`` (its adder and
    multiplier left to the tool), the same DSPs, the channel's own logic the same."""
    instances = resource_estimate(PAPER_VCU128)
    inferred = resource_estimate(dataclasses.replace(PAPER_VCU128, dsp_primitives=False))
    lane, other = UNIT_LOGIC["lane"], UNIT_LOGIC["lane_inferred"]
    assert inferred.per_pe["lut"] == other["lut"] + other["lut_memory"]
    assert inferred.total["lut"] - instances.total["lut"] == 40 * 32 * (other["lut"]
                                                                        - lane["lut"])
    assert inferred.total["dsp"] == instances.total["dsp"]


@pytest.mark.parametrize("lanes", sorted(CHANNEL_LOGIC))
def test_a_channel_is_what_yosys_measured_of_the_whole(lanes):
    """The model's channel LUTs, DSPs and block RAM equal the channels Yosys measured
    with their hierarchy kept (the flip-flops add the top's operand registers)."""
    config = dataclasses.replace(PAPER_VCU128, pes_per_channel=lanes)
    channel = resource_estimate(config).per_channel
    measured = CHANNEL_LOGIC[lanes]
    assert round(channel["lut"], 6) == measured["lut"] + measured["lut_memory"]
    assert channel["dsp"] == measured["dsp"] and channel["bram36"] == measured["bram36"]
    assert round(channel["ff"], 6) == measured["ff"] + 2 * config.channel.beat_layout.size + 64


def test_the_papers_40_channels_exceed_only_the_lut_budget():
    """1,280 Omni-PE lanes as Yosys maps them (subnormals flushed, the adders' shifts on
    DSPs, the rest of the fp32 arithmetic in LUTs, a PE control per channel) fit the
    VCU128's LUTs but not its 0.7 budget; DSPs and block RAM fit."""
    needs = ENGINE.resources(PAPER_VCU128, "xcup")
    capacity = VCU128.capacity
    assert budget(capacity, "lut") < needs["lut"] <= capacity.lut
    assert needs["dsp"] <= capacity.dsp and needs["bram36"] <= capacity.bram36
    with pytest.raises(UsageError, match=r"^omni with .* needs \d+ lut counted by its "
                                         r"resource model, but vcu128 allows 912576: "):
        check_fit(ENGINE, PAPER_VCU128, VCU128)


def _macs(config):
    """MACs of one iteration from the LSTM's equations (spec §1.3), not the task graph:
    per cell FW-MatMul and eq. 3 4H(I_l + H) B each, eq. 2 4H H B for t > 0 (δH_{t-1})
    and 4H I_l B for l > 0 (δX_t)."""
    h, b = config.hidden_size, config.batch
    total = 0
    for layer in range(config.layers):
        inputs = config.input_size if layer == 0 else h
        for t in range(config.seq_len):
            total += 2 * 4 * h * (inputs + h) * b
            total += 4 * h * h * b if t > 0 else 0
            total += 4 * h * inputs * b if layer > 0 else 0
    return total


@pytest.mark.parametrize("config, full", [(SMALL, False), (PAPER_VCU128, True),
                                          (PRESETS["vcu128"].config, True)])
def test_predict(config, full):
    """The MACs are the LSTM's; at full size R2A's swing channels beat the static split
    (on the 3-channel test top tasks are a few cycles long and a swing's 8-cycle mode
    switch costs more than it wins: no such claim there)."""
    result = predict(config, {})
    assert result["useful_macs"] == _macs(config)
    assert 0 < result["utilization"] <= 1
    if full:
        assert result["cycles"] < result["static_cycles"] and result["swings"] > 0
    assert result["cycles"] * config.pes >= result["useful_ops"]
    ms1 = predict(config, {"ms1": True, "density": 0.35})
    assert ms1["useful_ops"] < result["useful_ops"]
    with pytest.raises(UsageError, match=r"^omni predict takes ms1, kept, density and "
                                         r"hbm_ports, not steps$"):
        predict(config, {"steps": 3})


def test_top_schedule_is_at_least_the_critical_path():
    """A task decided in cycle a frees its successors in a + D + 2 (the R2A's timing,
    hw/omni/r2a.py), so the run is at least the longest dependency chain of D + 2."""
    tasks = top_tasks(SMALL)
    model = top_schedule(SMALL)
    finish = []
    for task in tasks:
        finish.append(max((finish[d] for d in task.deps), default=0)
                      + top_task_cycles(task) + 2)
    assert max(finish) <= model.cycles <= sum(top_task_cycles(t) + 2 for t in tasks)
    assert model.useful == sum(top_task_cycles(t) * SMALL.pes_per_channel for t in tasks)


@pytest.mark.parametrize("hidden, pes", [(5, 4), (11, 2), (16, 4)])
def test_task_cycles_of_element_wise_steps(hidden, pes):
    """An element-wise step of n elements with both operands from the lanes, alone in a
    task: at the top's one operand port its two beats an element come one a cycle
    (n - 1 cycles more than the channel's two ports) through the operand register (one
    more): n cycles more than on the channel bench."""
    from nnrtl.hw.omni.channel_timing import program_cycles

    config = dataclasses.replace(SMALL, hidden_size=hidden, pes_per_channel=pes)
    task = next(t for t in top_tasks(config) if t.part == "fw_ew")
    step = task.steps[0]            # a = f * s_prev: both operands from the lanes
    single = dataclasses.replace(task, steps=(step,))
    assert top_task_cycles(single) == program_cycles(task.channel, [step]) + \
        step.instruction.job.length
    assert top_task_cycles(task) > task.model_cycles


def test_sim_refuses_a_model_and_too_many_steps(capsys, tmp_path):
    assert main(["sim", "omni", "--preset", "small", "--board", "vcu128", "--steps", "9"]) == 2
    assert "omni sim: layers x seq_len x 4 (72 tasks) cannot exceed max_tasks" in \
        capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(UNIT_LOGIC))
def test_unit_logic_is_what_yosys_measures(name):
    """Re-measure a unit (a minute for a PE, several for the DMA and the scheduler)."""
    assert measure(name) == UNIT_LOGIC[name]


@pytest.mark.slow
@pytest.mark.parametrize("lanes", sorted(CHANNEL_LOGIC))
def test_channel_logic_is_what_yosys_measures(lanes):
    """Re-measure a whole channel, hierarchy kept (about 3 minutes each)."""
    counts = measure_channel(lanes)
    del counts["seconds"]
    assert counts == CHANNEL_LOGIC[lanes]


def test_generate_a_tiny_top(capsys, tmp_path):
    """``nnrtl generate`` of a top whose ports carry data layouts (struct and array
    payloads): the board top ties them off by their bits; the header has every register
    of the manifest. Two channels of one PE, the least top (the conversion is most of
    the test's time)."""
    output = tmp_path / "omni"
    params = dict(channels=2, pes_per_channel=1, input_size=1, hidden_size=1, layers=1,
                  seq_len=1, max_tasks=4, adder_stages=1)
    assert main(["generate", "omni", "--board", "vcu128", "-o", str(output),
                 *(f"--param={name}={value}" for name, value in params.items())]) == 0
    manifest = json.loads((output / "manifest.json").read_text())
    header = (output / "nnrtl_omni.h").read_text()
    for register in manifest["registers"]["registers"]:
        assert f"NNRTL_OMNI_{register['name'].upper()}_OFFSET" in header
    # the per-PE-mode counters, 64 bits each
    for mode in ("MVM", "EW_MUL", "OUTER", "EW_ADD"):
        assert f"NNRTL_OMNI_BUSY_{mode}_OFFSET" in header
    assert ".s_operand__1__payload(33'h0" in (output / "top.v").read_text()
    assert manifest["parameters"] == {**dataclasses.asdict(OmniConfig()), **params}


@pytest.mark.slow
def test_generate_the_vcu128_preset(capsys, tmp_path):
    """``nnrtl generate omni --board vcu128`` (40 channels of 32 PEs): the Verilog,
    board files, C header and a manifest whose resources are the model's."""
    output = tmp_path / "omni"
    assert main(["generate", "omni", "--board", "vcu128", "--preset", "vcu128", "-o",
                 str(output)]) == 0
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["resources_needed"] == ENGINE.resources(PRESETS["vcu128"].config, "xcup")
    assert manifest["parameters"]["channels"] == 40
    assert {"nnrtl_omni.v", "nnrtl_omni.h", "top.v", "top.xdc", "top.tcl"} <= \
        set(manifest["files"])


@pytest.mark.slow
def test_the_papers_40_channel_top_generates(tmp_path):
    """The paper's 40 x 32 top is refused by the fit check but its Verilog generates
    (emit.generate has no fit check): about 50 s and 0.5 GB."""
    from nnrtl.gen.emit import generate

    manifest = generate(ENGINE, PAPER_VCU128, VCU128, tmp_path / "paper")
    text = (tmp_path / "paper" / "nnrtl_omni.v").read_text()
    assert text.count("nnrtl_omni__channel_") >= 41      # one module, 40 instances
    assert manifest["resources_needed"]["lut"] > budget(VCU128.capacity, "lut")

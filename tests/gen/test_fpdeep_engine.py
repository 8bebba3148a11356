"""The FPDeep engine's registration (gen/fpdeep/engine.py): its hooks, presets, the resource
model against counts by hand, the cycle model against the segment's own, ``nnrtl generate``
of the small node (Verilog written, fits by the model), the VC709 AlexNet node refused by
the BRAM model with the reason, and ``nnrtl sim``'s refusals."""

import json

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import SimRequest, check_fit, get_engine
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep.engine import ALEXNET_NODE, simulate, vc709_alexnet_node
from nnrtl.gen.fpdeep.resources import memories
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.node import NodeConfig, module_cycles

VC709 = get_board("vc709")


@pytest.fixture(scope="module")
def engine():
    return get_engine("fpdeep")


def test_registered_hooks_and_presets(engine):
    assert engine.hooks == ("train", "bench", "map", "cluster")
    assert set(engine.presets) == {"small", "vc709-alexnet"}
    assert engine.preset("small") == NodeConfig()


def test_small_node_resources_by_hand(engine):
    """3 modules × P 2 × S_IC 2 × 9 taps = 108 DSP48E1 (fixed16, 1 per MAC); every memory
    of the small node is LUTRAM (LPRAM 19 banks × 2 rows × 32 bits: 64 bits each)."""
    config = engine.preset("small")
    needs = check_fit(engine, config, VC709)
    assert needs["dsp"] == 3 * 2 * 2 * 9 and needs["bram36"] == 0
    found = {name: (count, depth, width) for name, count, depth, width in memories(config)}
    assert found["s0.lpram"] == (2 * 9 + 1, 2, 2 * 16)
    assert found["s0.act_ram"] == (1, 3 * 4 * 4, 2 * 16)
    # LUTs: width · ⌈depth/64⌉ a memory (all shallow here)
    assert needs["lut"] == sum(c * w for c, _, w in found.values())


def test_vc709_alexnet_node_is_refused_by_bram(engine):
    """Node 11 of AlexNet on 15 VC709s (conv4, 126 input channels, P = 1, Q = S_IC): its
    3,402 MAC units fit the DSPs, but its 1,135 LPRAM and 1,134 LGB banks of 384 rows are
    a BRAM36 each, as the RTL builds them, and the check refuses it naming the resource."""
    config = engine.preset("vc709-alexnet")
    assert config == vc709_alexnet_node() and config.node == ALEXNET_NODE
    (segment,) = config.segments
    assert (segment.n_in, segment.n_out, segment.p, segment.q, segment.k) == (126, 384, 1,
                                                                           126, 3)
    needs = engine.resources(config, None)
    assert needs["dsp"] == 3 * 126 * 9 == 3402
    found = {name: (count, depth, width) for name, count, depth, width in memories(config)}
    assert found["s0.lpram"] == (1135, 384, 16) and found["s0.lgb"] == (1134, 384, 40)
    assert needs["bram36"] >= 1135 + 1134 > VC709.capacity.bram36
    with pytest.raises(UsageError, match=r"^fpdeep with NodeConfig\(.*\) needs \d+ bram36, "
                                         r"but vc709 has 1470$"):
        check_fit(engine, config, VC709)


def test_predict_uses_the_module_cycles(engine):
    """The small node (4×4 maps, pad 1, G = 2): FP and PG 16 · 2 cycles an image, EB
    4² · 2 (same padding: as many); a valid convolution's EB takes longer than its FP."""
    config = engine.preset("small")
    cfg = config.segments[0]
    found = engine.predict(config, {"images": 4})
    rows = (cfg.banks + 1) * cfg.groups                 # weights and bias, 3 cycles each
    assert found["cycles"] == 4 * cfg.cycles + 2 * 3 * rows == 4 * 16 * 2 + 2 * 3 * 38
    assert found["useful_macs"] == 4 * 16 * 3 * 2 * 9 * 3
    valid = NodeConfig((FpConfig("fixed16", 3, 1, 0, 6, 1, 2, 1),), (True,))
    assert module_cycles(valid.segments[0]) == {"fp": 16 * 2, "pg": 16 * 2, "eb": 36 * 2}
    assert valid.cycles == 72


def test_generate_small_node(tmp_path, capsys):
    out = tmp_path / "node"
    assert main(["generate", "fpdeep", "--board", "vc709", "--preset", "small",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resources_needed"]["dsp"] == 108
    assert [r["name"] for r in manifest["registers"]["registers"]][:2] == ["control", "lr"]
    verilog = (out / "nnrtl_fpdeep.v").read_text()
    assert "module nnrtl_fpdeep" in verilog and "s0_err_out__payload" in verilog


def test_generate_refuses_the_vc709_alexnet_node(tmp_path, capsys):
    code = main(["generate", "fpdeep", "--board", "vc709", "--preset", "vc709-alexnet",
                 "-o", str(tmp_path / "n")])
    assert code == 2 and "bram36, but vc709 has 1470" in capsys.readouterr().err
    assert not (tmp_path / "n").exists()


def test_simulate_refusals():
    two = NodeConfig((NodeConfig().segments[0],) * 2, (True, True))
    with pytest.raises(UsageError, match=r"^fpdeep sim runs one-segment nodes; this node "
                                         r"has 2 segments$"):
        simulate(SimRequest(config=two, board=VC709))
    with pytest.raises(UsageError, match=r"^fpdeep sim takes no --model"):
        simulate(SimRequest(config=NodeConfig(), board=VC709, model=object()))

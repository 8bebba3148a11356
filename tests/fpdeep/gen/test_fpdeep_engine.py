"""The FPDeep engine's registration (gen/fpdeep/engine.py): its hooks, presets, the resource
model against counts by hand, the cycle model against the segment's own, ``nnrtl generate``
of the small node (Verilog written, fits by the model), the VC709 AlexNet node fitting the
BRAM model (and refused at the mapper's FC batch, with the reason), and ``nnrtl sim``'s
refusals."""

import dataclasses
import json

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import SimRequest, check_fit, get_engine
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep.engine import ALEXNET_NODE, simulate, vc709_alexnet_node
from nnrtl.gen.fpdeep.resources import logic, memories
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.node import FpdeepConfig, module_cycles

VC709 = get_board("vc709")


@pytest.fixture(scope="module")
def engine():
    return get_engine("fpdeep")


def test_registered_hooks_and_presets(engine):
    assert engine.hooks == ("train", "bench", "draw")
    assert set(engine.commands) == {"map", "cluster"} and set(engine.options) == {"train"}
    assert set(engine.presets) == {"small", "vc709-alexnet"}
    assert engine.preset("small") == FpdeepConfig()


def test_small_node_resources_by_hand(engine):
    """3 modules × P 2 × S_IC 2 × 9 taps = 108 DSP48E1 (fixed16, 1 per MAC); every memory
    of the small node is LUTRAM (2 rows). LPRAM: 18 weight banks and the bias bank of
    2 · 16 = 32 bits, packed 72 // 32 = 2 a memory: 9 memories of 64 bits, twice (the EB
    port), and the bias bank alone. LGB: 19 banks of 2 · (32 + ⌈log2(16 · 2)⌉) = 74 bits,
    packed 576 // 74 = 7 a memory (lcm(74, 72) is wider than 576): 7, 7 and 5 banks."""
    config = engine.preset("small")
    needs = check_fit(engine, config, VC709)
    assert needs["dsp"] == 3 * 2 * 2 * 9 and needs["bram36"] == 0
    found = memories(config)
    assert [m for m in found if m[0] == "s0.lpram"] == [("s0.lpram", 18, 2, 64),
                                                        ("s0.lpram", 1, 2, 32)]
    assert [m for m in found if m[0] == "s0.lgb"] == [("s0.lgb", 2, 2, 7 * 74),
                                                      ("s0.lgb", 1, 2, 5 * 74)]
    assert ("s0.act_ram", 1, 3 * 4 * 4, 2 * 16) in found
    # LUT-RAM: 4 LUTs (a RAM32M) per 6 bits of width a memory of 32 rows or fewer, but the
    # Act-RAM's 48 rows: RAM64M, 64 rows of 3 bits in 4 LUTs (32 bits: 44 LUT)
    lutram = sum(c * 4 * -(-w // (3 if d > 32 else 6)) for _, c, d, w in found)
    assert [m for m in found if m[2] > 32] == [("s0.act_ram", 1, 48, 32)]
    assert needs["lut"] == lutram + sum(logic(config).values())


def test_vc709_alexnet_node_fits_by_bram(engine):
    """Node 11 of AlexNet on 15 VC709s at FC batch 23 (conv4, 126 input channels, the
    mapper's P = 3, Q = 21: 6 passes, 128 groups, 768 rows): 3 · 3 · 21 · 9 = 1,701 MAC
    units; LPRAM 190 banks of 3 · 16 = 48 bits (one a memory: 72 // 48), 768 rows: 3
    RAMB18E1 of 1K × 18 = 1.5 BRAM36 each, the 189 weight banks twice for the EB port,
    = 568.5; LGB 189 banks of 3 · 40 bits packed 3 a memory (360 bits = 5 × 72) × 768
    rows: 63 · 10 = 630; Act-RAM 27 images of 169 pixels × 2,016 bits: 28 columns × 9
    rows of 512 = 252; EB line buffer 9 banks of 640 × 48 bits: 9 · 1.5 = 13.5 →
    1,464 ≤ 1,470. The single-pass shape (P = 1, Q = S_IC): 3,402 MACs, 1,459 BRAM36."""
    config = engine.preset("vc709-alexnet")
    assert config == vc709_alexnet_node() and config.node == ALEXNET_NODE
    (segment,) = config.segments
    assert (segment.n_in, segment.n_out, segment.p, segment.q, segment.k) == (126, 384, 3,
                                                                           21, 3)
    assert (segment.passes, segment.rows) == (6, 768) and config.act_images == 27
    needs = check_fit(engine, config, VC709)
    assert needs["dsp"] == 3 * 3 * 21 * 9 == 1701
    found = memories(config)
    assert [m for m in found if m[0] in ("s0.lpram", "s0.lgb", "s0.act_ram")] == [
        ("s0.lpram", 2 * 189, 768, 48), ("s0.lpram", 1, 768, 48), ("s0.lgb", 63, 768, 360),
        ("s0.act_ram", 1, 27 * 169, 126 * 16)]
    assert needs["bram36"] == 568.5 + 630 + 252 + 13.5 == 1464
    single = vc709_alexnet_node(single_pass=True)
    assert (single.segments[0].p, single.segments[0].q) == (1, 126)
    assert engine.resources(single, None)["bram36"] == 568 + 630 + 252 + 9 == 1459
    assert engine.resources(single, None)["dsp"] == 3 * 126 * 9


def test_vc709_alexnet_node_at_the_mappers_fc_batch_is_refused(engine):
    """At the mapper's own FC batch (42) the Act-RAM holds 46 images: 448 BRAM36, the node
    568.5 + 630 + 448 + 13.5 = 1,660 over 1,470, and the check refuses it naming the
    resource."""
    config = dataclasses.replace(engine.preset("vc709-alexnet"), act_images=46)
    assert engine.resources(config, None)["bram36"] == 1660
    with pytest.raises(UsageError, match=r"^fpdeep with FpdeepConfig\(.*\) needs 1660 bram36, "
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
    valid = FpdeepConfig((FpConfig(precision="fixed16", k=3, stride=1, pad=0, w_in=6, n_in=1,
                                   n_out=2, p=1),), (True,))
    assert module_cycles(valid.segments[0]) == {"fp": 16 * 2, "pg": 16 * 2, "eb": 36 * 2}
    assert valid.cycles == 72


def _generate(preset, out, capsys):
    """``nnrtl generate fpdeep --board vc709 --preset PRESET -o OUT``: the manifest."""
    assert main(["generate", "fpdeep", "--board", "vc709", "--preset", preset,
                 "-o", str(out)]) == 0
    capsys.readouterr()
    return json.loads((out / "manifest.json").read_text())


def test_generate_small_node(tmp_path, capsys):
    out = tmp_path / "node"
    manifest = _generate("small", out, capsys)
    assert manifest["resources_needed"]["dsp"] == 108
    assert [r["name"] for r in manifest["registers"]["registers"]][:2] == ["control", "lr"]
    verilog = (out / "nnrtl_fpdeep.v").read_text()
    assert "module nnrtl_fpdeep" in verilog and "s0_err_out__payload" in verilog


@pytest.mark.slow
def test_generate_vc709_alexnet_node_slow(tmp_path, capsys):
    """``nnrtl generate fpdeep --board vc709 --preset vc709-alexnet`` writes the node (4.3 MB
    of Verilog), the manifest's needs those of the model (1,464 BRAM36, above)."""
    manifest = _generate("vc709-alexnet", tmp_path / "n", capsys)
    assert manifest["resources_needed"]["bram36"] == 1464
    assert manifest["resources_needed"]["dsp"] == 1701


def test_simulate_refusals():
    with pytest.raises(UsageError, match=r"^fpdeep sim takes no --model"):
        simulate(SimRequest(config=FpdeepConfig(), board=VC709, model=object()))

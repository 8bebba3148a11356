"""FPDeep on the paper's setups (Sec. 6.3, Table 6, Fig. 14/15): AlexNet, VGG-16 and VGG-19
on 15 VC709s under the paper's cost model (1 DSP per MAC, 200 MHz), and fp32.

Expected values are the paper's: ~80% DSP use per FPGA (spec §5.3: 78-86%), Table 6's
GOPS per FPGA (spec §5.5: within 5%), idle stages under 5% (Fig. 15(B)(D)(F)); the fp32
refusal by hand arithmetic (spec §4.8). Storage is left out of the paper-model checks
(``check_storage=False``): under this model's residency rule it does not fit (see
``test_paper_model_storage``)."""

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep import builtin, map_network

VC709 = get_board("vc709")

#: Table 6, FPDeep on 15 XC7VX690T: GOPS per FPGA.
TABLE6 = {"alexnet": 1157, "vgg16": 1197, "vgg19": 1220}


@pytest.fixture(scope="module")
def paper():
    return {name: map_network(builtin(name), 15, VC709, precision="fixed16", link_gbps=150,
                              check_storage=False) for name in TABLE6}


@pytest.mark.parametrize("name", TABLE6)
def test_dsp_use_per_fpga(paper, name):
    """Fig. 14(C)(F)(I): DSP use ~80% on every FPGA (spec §5.3: 78-86% at N=15)."""
    mapping = paper[name]
    for node in mapping.nodes:
        assert 0.78 <= node.dsp / 3600 <= 0.86, (node.node, node.dsp)


@pytest.mark.parametrize("name", TABLE6)
def test_gops_per_fpga_against_table6(paper, name):
    """GOPS per FPGA = 2 ops · useful MACs per sample · images/s / 15, within 5% of
    Table 6 (spec §5.5)."""
    mapping = paper[name]
    gops = 2 * mapping.chain.work * 200e6 / mapping.period / 15 / 1e9
    assert gops == pytest.approx(mapping.gops_per_fpga)
    assert abs(gops / TABLE6[name] - 1) <= 0.05, gops
    # the same as 2 · f · allocated MACs · (1 - idle) (spec §5.5)
    units = sum(node.mac_units for node in mapping.nodes)
    assert gops == pytest.approx(2 * 200e6 * units * (1 - mapping.idle) / 15 / 1e9)


@pytest.mark.parametrize("name", TABLE6)
def test_links_within_150_gbps(paper, name):
    """Fig. 15: at 15 FPGAs the chain is compute-bound at 150 Gb/s (paper's highest link:
    18.6 Gb/s with 32-bit words; these are 16-bit)."""
    mapping = paper[name]
    assert mapping.bound == "compute"
    assert max(max(g) for g in mapping.boundary_gbps()) < 150


@pytest.mark.parametrize("name", TABLE6)
@pytest.mark.parametrize("fpgas", [5, 15, 30])
def test_idle_under_five_percent(name, fpgas):
    """Fig. 15(B)(D)(F): idle stages under 5% while the chain is compute-bound. AlexNet on
    30 is too: its conv1 line buffer takes more than one pixel a cycle (224 · 224 pixels
    a sample against a compute period of 37,908 cycles: at least two)."""
    mapping = map_network(builtin(name), fpgas, VC709, check_storage=False)
    assert mapping.bound == "compute"
    assert 0 <= mapping.idle < 0.05
    if (name, fpgas) == ("alexnet", 30):
        assert mapping.compute_period == mapping.period < 224 * 224
        assert max(c.line_pixels for node in mapping.nodes for c in node.segments
                   if c.layer == "conv1") >= 2
    assert mapping.v_fine <= mapping.v_coarse


@pytest.mark.parametrize("name", ["vgg16", "vgg19"])
def test_vgg_fp32_refused(name):
    """Spec §4.8: the fp32 LPRAM + LGB of VGG-16's conv layers alone are 2 · 14.71 M · 4 B
    = 112.2 MiB against 15 · 1,470 BRAM36 · 4 KiB = 86.1 MiB (VGG-19: 152.7 MiB): no
    balancing makes them fit; the mapper refuses, naming a node and its BRAM36."""
    chain = builtin(name)
    weights = 2 * sum(l.params for l in chain.layers if l.kind == "conv") * 4
    assert weights > 15 * 1470 * 4096
    with pytest.raises(UsageError, match=r"^node \d+: storage needs [\d,]+ words of 32 bits = "
                                         r"\d+ BRAM36, but vc709 has 1470 BRAM36"):
        map_network(chain, 15, VC709, precision="fp32", link_gbps=150)


def test_fp32_costs():
    """fp32 on the VC709: its variant (LUT multipliers, DSP adders) takes 6 DSP + 696 LUT a
    MAC, so 0.7 · 433,200 / 696 = 435 MAC units a node (2,610 DSP, 73% of 3,600), at most
    2 · 435 · 200 MHz = 174 GOPS per FPGA; with LUT shifts alone (2 DSP + 890 LUT) 340
    units. Storage unchecked (VGG's fp32 weights do not fit 15 VC709s,
    ``test_vgg_fp32_refused``): GOPS per FPGA 166.3 against 123.1 (VGG-16), 163.0 against
    122.1 (VGG-19), 152.2 against 116.2 (AlexNet)."""
    gops = {}
    for name in TABLE6:
        mapping = map_network(builtin(name), 15, VC709, precision="fp32",
                              check_storage=False)
        assert mapping.unit_budget == 435 and mapping.budget_resource == "lut"
        assert all(node.dsp <= 6 * 435 for node in mapping.nodes)
        assert mapping.gops_per_fpga <= 174
        lut = map_network(builtin(name), 15, VC709, precision="fp32", check_storage=False,
                          multiplier_shifts="lut", adder_shifts="lut")
        assert lut.unit_budget == 340
        gops[name] = round(mapping.gops_per_fpga, 1), round(lut.gops_per_fpga, 1)
    assert gops == {"alexnet": (152.2, 116.2), "vgg16": (166.3, 123.1),
                    "vgg19": (163.0, 122.1)}


def test_paper_model_storage():
    """Under the paper's cost model AlexNet's FC weights come from DDR: 4 words per weight
    per pass of 58.6 M weights at 16 bits = 469 MB a pass, 29.9 GB/s of DDR3: one pass per
    ~16 ms, so the FC stage must batch tens of samples (42 at the compute rate), and each
    batched sample stays in every Act-RAM: node 1 (the image, 3 · 224² words per sample)
    then overflows. With 4 samples per pass it fits and the DDR sets the period."""
    chain = builtin("alexnet")
    with pytest.raises(UsageError, match=r"^node 1: storage needs .* act_ram"):
        map_network(chain, 15, VC709, link_gbps=150)
    mapping = map_network(chain, 15, VC709, link_gbps=150, fc_batch=4)
    assert mapping.bound == "ddr" and not mapping.infeasible
    # 469 MB / 4 samples at 29.86 GB/s: 3.93 ms per 4 samples -> 254.6 images/s
    assert mapping.images_per_second == pytest.approx(29.856e9 / (58.62e6 * 4 * 2 / 4),
                                                      rel=0.01)

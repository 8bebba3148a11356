"""The FPDeep bench part (gen/fpdeep/studies/bench.py, bench_markdown.py) on its quick set, run once
through the bench driver (the registered engine's ``bench`` hook): the JSON's structure,
the paper's figures as the paper prints them, and figures recomputed here by hand (AlexNet's
MACs from its layer shapes, GOPS, hours per epoch, idle stages, the fp32 MAC budget, the
knees from the rows' own link periods)."""

import json

import pytest

from nnrtl.gen import bench as driver
from nnrtl.gen.fpdeep.studies.bench import QUICK, BenchSet

#: AlexNet as built in (224 x 224, conv1 11 x 11 / 4 pad 2 -> 55 x 55, no groups): MACs of
#: one pass, by hand.
ALEXNET_MACS = {
    "conv1": 55 * 55 * 96 * 3 * 11 * 11,
    "conv2": 27 * 27 * 256 * 96 * 5 * 5,
    "conv3": 13 * 13 * 384 * 256 * 3 * 3,
    "conv4": 13 * 13 * 384 * 384 * 3 * 3,
    "conv5": 13 * 13 * 256 * 384 * 3 * 3,
    "fc6": 256 * 6 * 6 * 4096, "fc7": 4096 * 4096, "fc8": 4096 * 1000}
#: FP, EB and PG on every layer but the first (no EB).
ALEXNET_WORK = 2 * ALEXNET_MACS["conv1"] + 3 * sum(
    v for k, v in ALEXNET_MACS.items() if k != "conv1")
CLOCK = 200e6


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NNRTL_BENCH_FPDEEP", "quick")
        assert "fpdeep" in driver.benchmarks()
        assert driver.main(["--out", str(out), "--only", "fpdeep"]) == 0
    return out, json.loads((out / "fpdeep.json").read_text())


def test_structure(run):
    out, result = run
    assert result["set"]["networks"] == ["alexnet"] and result["set"]["fpgas"] == [5, 6, 7]
    for key in ("table6", "scaling", "knees", "idle", "cluster", "pixels", "resources",
                "plots", "paper", "seconds"):
        assert key in result, key
    assert [(r["network"], r["model"]) for r in result["table6"]] == [
        ("alexnet", "paper"), ("alexnet", "fp32")]
    assert [r["fpgas"] for r in result["scaling"]] == [5, 6, 7]
    for name in result["plots"]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (out / "fpdeep.md").read_text()
    assert "| alexnet | paper | " in markdown and "(1,157)" in markdown
    assert "## Cluster simulator points" in markdown
    assert "## Resources of a node" in markdown


def test_paper_figures_as_printed(run):
    """Table 6, Sec. 6.3.1 and 6.3.3 of the paper."""
    paper = run[1]["paper"]
    assert paper["table6"]["gops_per_fpga"] == {"alexnet": 1157, "vgg16": 1197,
                                                "vgg19": 1220}
    assert paper["table6"]["hours_per_epoch"] == {"alexnet": 0.17, "vgg16": 2.19,
                                                  "vgg19": 2.76}
    assert paper["knees"]["150"] == {"alexnet": 83, "vgg16": 56, "vgg19": 70}
    assert paper["max_link_gbps"]["value"] == 18.6
    assert paper["idle"]["below"] == 0.05 and paper["idle"]["band"] == [0.005, 0.01]


def test_table6_by_hand(run):
    paper, fp32 = run[1]["table6"]
    for row in (paper, fp32):
        assert row["work_macs_per_sample"] == ALEXNET_WORK
        images = CLOCK / row["period_cycles"]
        assert row["gops_per_fpga"] == pytest.approx(2 * ALEXNET_WORK * images / 15 / 1e9)
        assert row["hours_per_epoch"] == pytest.approx(1_281_167 / images / 3600)
        assert row["idle_share"] == pytest.approx(
            1 - ALEXNET_WORK / (row["mac_units"] * row["period_cycles"]))
    # the paper's model: 1 DSP per MAC, ~80% DSP on every FPGA, within 5% of Table 6
    assert sum(paper["dsp_per_node"]) == paper["mac_units"]
    assert all(0.78 <= d / 3600 <= 0.86 for d in paper["dsp_per_node"])
    assert abs(paper["gops_per_fpga"] / 1157 - 1) <= 0.05
    assert paper["bound"] == "compute"
    # the scan maps without balancing: in the paper's setting balancing hosts nothing
    assert paper["hosted_banks"] == 0
    # fp32: LUT multipliers and DSP adders, 6 DSP per MAC, LUT-bound at 0.7 x 433,200 / 696
    # = 435 MAC units a node
    assert sum(fp32["dsp_per_node"]) == 6 * fp32["mac_units"]
    assert fp32["unit_budget"] == 435 and fp32["budget_limited_by"] == "lut"
    assert fp32["gops_per_fpga"] <= 2 * 435 * CLOCK / 1e9
    # a refusal is the mapper's reason, naming a node and its block RAM
    for row in (paper, fp32):
        if row["refused"] is not None:
            assert row["refused"].startswith("node ") and "BRAM36" in row["refused"]
            assert not row["storage_fits"]


def test_scaling_and_knees_by_hand(run):
    result = run[1]
    for row in result["scaling"]:
        assert 0 <= row["idle_share"] < 0.05                 # Fig. 15: under 5%
        roof = row["roof_period_cycles"]
        for g, entry in row["budgets"].items():
            for convention, figures in entry.items():
                period = max(roof, figures["link_period_cycles"])
                assert figures["period_cycles"] == period
                assert figures["gops_total"] == pytest.approx(
                    2 * ALEXNET_WORK * CLOCK / period / 1e9)
                assert figures["linear"] == (figures["link_period_cycles"] <= roof)
    for g in ("150", "250"):
        for convention in ("link", "fpga"):
            flags = [r["budgets"][g][convention]["linear"] for r in result["scaling"]]
            counts = [r["fpgas"] for r in result["scaling"]]
            broken = [n for n, ok in zip(counts, flags) if not ok]
            knee = result["knees"]["alexnet"][g][convention]
            assert knee["first_break"] == (broken[0] if broken else None)
            expected = max((n for n in counts if not broken or n < broken[0]), default=None)
            assert knee["knee"] == expected


def test_cluster_points_agree_with_the_mapper(run):
    """The cycle-level simulator on 2 MPI ranks: compute-bound points run at the mapper's
    period (spec §5 check 4: within 2%), idle as the mapper's at the simulated period."""
    rows = run[1]["cluster"]
    assert {(r["fpgas"], r["link_gbps"]) for r in rows} >= {(15, 150.0), (7, 150.0),
                                                            (7, 250.0)}
    for row in rows:
        assert row["ranks"] == 2 and row["hosted_banks"] == 0
        assert row["period_cycles"] == pytest.approx(row["mapper_period_cycles"], rel=0.02)
        assert row["gops_per_fpga"] == pytest.approx(
            2 * ALEXNET_WORK * CLOCK / row["period_cycles"] / row["fpgas"] / 1e9)
        if row["mapper_bound"] == "compute":
            # the simulator's period holds the FP line buffer's refill the mapper leaves out
            assert row["linear"] and row["idle_share"] == pytest.approx(
                1 - (1 - row["mapper_idle_share"]) * row["mapper_period_cycles"]
                / row["period_cycles"], abs=1e-6)


@pytest.mark.parametrize("change, error, message", [
    (dict(networks=("resnet",)), ValueError,
     r"^networks must be built-in \(alexnet, vgg16, vgg19\), not 'resnet'$"),
    (dict(fpgas=(5, 0)), TypeError, r"^fpgas must be a positive integer, not 0$"),
    (dict(fpgas=(7, 5)), ValueError, r"^fpgas must be increasing, not \(7, 5\)$"),
    (dict(table_fpgas=-3), TypeError, r"^table_fpgas must be a positive integer, not -3$"),
    (dict(cluster_ranks=True), TypeError,
     r"^cluster_ranks must be a positive integer, not True$"),
    (dict(gbps=(150.0, -1)), TypeError, r"^gbps must be positive numbers, not -1$"),
])
def test_bench_set_checks(change, error, message):
    fields = {f: getattr(QUICK, f) for f in ("networks", "table_fpgas", "fpgas", "gbps",
                                             "cluster_images", "cluster_ranks")}
    with pytest.raises(error, match=message):
        BenchSet(**{**fields, **change})


def test_resource_rows_beside_the_model(run):
    """The preset's shape (the mapper's, P = 3, Q = 21, six passes) and single-pass (P = 1,
    Q = 126): 3 · P·Q·9 DSP48E1 each, the recorded Yosys counts beside them."""
    rows = run[1]["resources"]
    assert [(r["shape"], r["p"], r["q"], r["passes"]) for r in rows] == [
        ("preset", 3, 21, 6), ("single-pass", 1, 126, 1)]
    assert [r["model"]["dsp"] for r in rows] == [3 * 63 * 9, 3 * 126 * 9]
    assert [r["yosys"]["bram36"] for r in rows] == [1464, 1459]
    assert all(r["board"]["dsp"] == 3600 and r["board"]["bram36"] == 1470 for r in rows)


def test_storage_checked_table6(run):
    """The storage-checked rows (gen/fpdeep/studies/checked.py): AlexNet on 15 VC709s maps
    with no option in fixed16 and fp32, compute-bound, every node within its 1,470 BRAM36,
    conv1's input waiting in DDR on node 1; GOPS by hand from the period; the fixed16 FC
    batch the least whose weight pass (58.6 M weights, 4 words of 2 bytes each) the two
    DDR3-1866 channels carry in a period."""
    out, result = run
    rows = {r["setting"]: r for r in result["checked"]}
    assert set(rows) == {"fixed16", "fp32"}
    for row in rows.values():
        assert row["refused"] is None and row["storage_fits"] and row["bound"] == "compute"
        assert row["bram36_max"] <= 1470 and 1 in row["act_ram_ddr_nodes"]
        assert row["period_cycles"] == row["compute_period_cycles"]
        assert row["gops_per_fpga"] == pytest.approx(
            2 * ALEXNET_WORK * CLOCK / row["period_cycles"] / 15 / 1e9)
        assert row["paper_gops_per_fpga"] == 1157
    fc_weights = 9216 * 4096 + 4096 * 4096 + 4096 * 1000
    rate = CLOCK / rows["fixed16"]["period_cycles"]
    assert rows["fixed16"]["fc_batch"] == -(-fc_weights * 4 * 2 * rate // (2 * 8 * 1866e6))
    markdown = (out / "fpdeep.md").read_text()
    assert "## Table 6, storage checked: 15 VC709s" in markdown
    assert "| alexnet | fixed16 | 1,161 (1,157) | compute | DDR on node(s) 1" in markdown


def test_storage_checked_rows_simulated(run):
    """Each storage-checked mapping run through the cluster simulator: every buffer within
    the mapping's depth (Act-RAMs in DDR included), the period within 2% of the mapper's."""
    for row in run[1]["checked"]:
        simulated = row["simulated"]
        assert simulated["act_ram_within_depth"] and simulated["pab_within_depth"]
        assert simulated["period_cycles"] == pytest.approx(row["period_cycles"], rel=0.02)


def test_pixels_sweep(run):
    """The line-buffer sweep's quick point: AlexNet on 25 VC709s at 150 Gb/s, storage
    checked. Its compute period (below conv1's 224² = 50,176 input pixels) sets the
    period, conv1 takes more than one pixel a cycle, the figures follow from the period
    (GOPS = 2 · work · f / T), the simulator within 0.3% of it; the paper's claim is
    Table 6's 1,157 GOPS per FPGA times 25 (within its 83-FPGA knee)."""
    out, result = run
    (row,) = result["pixels"]
    assert (row["network"], row["fpgas"], row["link_gbps"]) == ("alexnet", 25, 150.0)
    assert row["refused"] is None and row["bound"] == "compute"
    assert row["period_cycles"] == row["compute_period_cycles"] < 224 * 224
    assert row["line_pixels"]["conv1"] >= 2
    assert row["gops_total"] == pytest.approx(2 * ALEXNET_WORK * CLOCK / row["period_cycles"]
                                              / 1e9)
    assert row["gops_per_fpga"] == pytest.approx(row["gops_total"] / 25)
    assert 1 <= row["simulated_over_mapper"] <= 1.003 and row["buffers_within_depth"]
    assert row["paper_gops_total"] == 1157 * 25
    assert "fpdeep_pixels.png" in result["plots"]
    assert "## Scaling with each line buffer" in (out / "fpdeep.md").read_text()

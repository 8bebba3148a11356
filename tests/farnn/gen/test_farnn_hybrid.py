"""The FARNN system model (:mod:`nnrtl.gen.farnn.hybrid`) and its bench part
(:mod:`nnrtl.gen.farnn.studies.bench_hybrid`)."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnrtl.gen.baseline.gpu_model import P100, Workload, gpu_tasks
from nnrtl.gen.farnn.hybrid import STRATEGIES, farnn_seconds, fpga_config
from nnrtl.gen.farnn.perf import CLOCK_HZ, pass_cycles
from nnrtl.hw.farnn.presets import VU9P_LSTM1024

def _parts(work, config):
    fw, bw = (pass_cycles(config, phase, schedule="overlap") for phase in ("fw", "bw"))
    return fw, bw, gpu_tasks(work, P100)


def test_no_overlap_is_every_part_in_turn_and_farnn_overlaps_within_it():
    work = Workload("lstm", 1024, 5, 200, 1)
    config = fpga_config(work, VU9P_LSTM1024)
    fw, bw, g = _parts(work, config)
    serial = 5 * (g["imvm_fw"] + g["gc"] + g["wu"]
                  + (fw.load + fw.compute + bw.load + bw.compute) / CLOCK_HZ) \
        + 4 * g["imvm_bw"]                      # layer 1's input gradient is not needed
    plain = farnn_seconds(work, config, P100, strategy="no_overlap")
    assert plain["seconds"] == pytest.approx(serial)
    farnn = farnn_seconds(work, config, P100)
    # at most the serial time, at least the busiest resource's
    assert max(farnn[k] for k in ("fpga", "pcie", "gpu")) <= farnn["seconds"] < serial
    assert farnn["fw"] + farnn["bw_gc_wu"] == pytest.approx(farnn["seconds"])


def test_all_fpga_moves_the_input_products_off_the_gpu():
    work = Workload("lstm", 1024, 5, 800, 1)
    config = fpga_config(work, VU9P_LSTM1024)
    fw, _, g = _parts(work, config)
    moved = farnn_seconds(work, config, P100, strategy="all_fpga")
    assert moved["gpu"] == pytest.approx(5 * (g["gc"] + g["wu"]))
    assert moved["pcie"] == pytest.approx(2 * farnn_seconds(work, config, P100)["pcie"])
    with pytest.raises(ValueError, match=r"^strategy must be one of farnn, no_overlap, "
                                         r"all_fpga, not 'gpu'$"):
        farnn_seconds(work, config, P100, strategy="gpu")


def test_a_layer_whose_weights_do_not_fit_has_no_fpga_config():
    assert fpga_config(Workload("lstm", 1024, 5, 10, 1), VU9P_LSTM1024) is not None
    assert fpga_config(Workload("lstm", 1280, 5, 10, 1), VU9P_LSTM1024) is None


def test_the_bench_reproduces_the_papers_structure(tmp_path):
    """Which part dominates where (Sec. 6.2): FARNN gains with the sequence and beats the
    persistent algorithm once the weights leave the GPU's chip; the PCIe loads bound short
    sequences; all on the FPGA about doubles the time, no overlap costs more."""
    from nnrtl.gen.farnn.studies.bench_hybrid import hybrid_markdown, hybrid_rows, plot_hybrid
    result = hybrid_rows()
    lstm8 = {r["seq_len"]: r for r in result["fig8"] if r["cell"] == "lstm"}
    assert lstm8[100]["bound"] == "pcie" and lstm8[1600]["bound"] == "fpga"
    assert lstm8[100]["speedup_vs_std"] < lstm8[1600]["speedup_vs_std"]
    lstm7 = {r["hidden"]: r for r in result["fig7"] if r["cell"] == "lstm"}
    assert not lstm7[1024]["pd_weights_on_chip"] and lstm7[1024]["reduction_vs_pd"] > 0
    fig10 = {r["strategy"]: r["normalized"] for r in result["fig10"]}
    assert set(fig10) == set(STRATEGIES) and fig10["farnn"] == 1
    assert 1.5 < fig10["all_fpga"] < 2.5 and fig10["no_overlap"] > 1
    assert "modelled" in result["gpu_source"] and "modelled" in result["fpga_source"]
    text = hybrid_markdown(result)
    assert "Paper, Fig. 10:" in text and "| all_fpga |" in text
    assert plot_hybrid(result, tmp_path) == "farnn_hybrid.png"
    assert (tmp_path / "farnn_hybrid.png").stat().st_size > 0


def test_a_faster_pcie_shortens_the_loads():
    work = Workload("gru", 640, 2, 100, 1)
    config = fpga_config(work, dataclasses.replace(VU9P_LSTM1024, cell="gru"))
    slow = farnn_seconds(work, config, P100, pcie_gbps=6.25)
    fast = farnn_seconds(work, config, P100, pcie_gbps=25.0)
    assert fast["pcie"] < slow["pcie"] and fast["seconds"] < slow["seconds"]


@settings(max_examples=40, deadline=None)
@given(cell=st.sampled_from(["lstm", "gru"]), hidden=st.integers(16, 1024),
       layers=st.integers(1, 6), steps=st.integers(1, 2000), batch=st.integers(1, 4),
       pcie=st.sampled_from([6.25, 12.5, 25.0]))
def test_system_draws_keep_the_schedules_order(cell, hidden, layers, steps, batch, pcie):
    """Random stacks on the paper's 4K design: the overlapped step is no shorter than its
    busiest resource and no longer than every part in turn; the persistent GPU algorithm
    is no slower than the standard one."""
    from nnrtl.gen.baseline.gpu_model import gpu_only_seconds
    work = Workload(cell, hidden, layers, steps, batch)
    config = fpga_config(work, dataclasses.replace(VU9P_LSTM1024, cell=cell))
    if config is None:
        return
    farnn = farnn_seconds(work, config, P100, pcie_gbps=pcie)
    plain = farnn_seconds(work, config, P100, strategy="no_overlap", pcie_gbps=pcie)
    assert max(farnn[k] for k in ("fpga", "pcie", "gpu")) <= farnn["seconds"] * (1 + 1e-12)
    assert farnn["seconds"] <= plain["seconds"] * (1 + 1e-12)
    assert gpu_only_seconds(work, P100, algorithm="cudnn_pd")["seconds"] <= \
        gpu_only_seconds(work, P100)["seconds"]


def test_the_gpu_part_measured_on_a_device(monkeypatch):
    """With a device the GPU's tasks and the GPU alone are timed in PyTorch there (here
    the CPU, at a small size) and labelled measured; no persistent column."""
    from nnrtl.gen.baseline.gpu_model import measure_gpu_only, measure_tasks
    from nnrtl.gen.farnn.studies import bench_hybrid
    work = Workload("lstm", 32, 2, 10, 1)
    tasks = measure_tasks(work, "cpu", repeats=1)
    assert set(tasks) == {"imvm_fw", "imvm_bw", "gc", "wu"}
    assert all(value > 0 for value in tasks.values())
    assert measure_gpu_only(work, "cpu", repeats=1)["seconds"] > 0
    config = fpga_config(work, VU9P_LSTM1024)
    measured = farnn_seconds(work, config, P100, tasks=tasks)
    assert measured["gpu"] == pytest.approx(2 * (tasks["imvm_fw"] + tasks["gc"] + tasks["wu"])
                                            + tasks["imvm_bw"])
    monkeypatch.setattr(bench_hybrid, "FIG7_CELLS", {"lstm": (32,)})
    monkeypatch.setattr(bench_hybrid, "FIG8_STEPS", (10,))
    monkeypatch.setattr(bench_hybrid, "LAYERS", 1)
    monkeypatch.setattr(bench_hybrid, "measure_tasks",
                        lambda work, device: measure_tasks(work, device, repeats=1))
    monkeypatch.setattr(bench_hybrid, "measure_gpu_only",
                        lambda work, device: measure_gpu_only(work, device, repeats=1))
    result = bench_hybrid.hybrid_rows(device="cpu")
    assert result["gpu_source"].startswith("measured on cpu")
    assert all(row["cudnn_pd"] is None for row in result["fig7"] + result["fig8"])
    assert "| - | 1,024" not in bench_hybrid.hybrid_markdown(result)

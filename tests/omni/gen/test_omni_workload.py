"""The training task graph of gen/omni/workload.py: op counts against spec §1.3, the
dependency rules, MS1 / MS2, the graph checks."""

import numpy as np
import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.omni.accounting import Workload
from nnrtl.gen.omni.workload import Task, check_graph, estimate, training_graph

SHAPE = Workload(input_size=7, hidden_size=10, layers=3, length=4, batch=5)


def by_phase(tasks):
    phases = {}
    for task in tasks:
        phases.setdefault((task.phase, task.layer, task.step), []).append(task)
    return phases


def test_baseline_counts_follow_spec_formulas():
    # spec §1.3 per cell and sample: FW-MatMul 4H(I+H), BP eq.2 4H(I+H) (δH and δX),
    # eq.3 4H(I+H); FW-EW 3H mul + 1H add, P1 10H mul + 5H add, P2 6H mul + 2H add.
    i, h, b, ll, ln = 7, 10, 5, 4, 3
    tasks = training_graph(SHAPE, tiles=4)
    macs = 0
    for layer in range(ln):
        inputs = i if layer == 0 else h
        # FW all cells; eq.3 all cells; eq.2: δH for t > 0, δX for layer > 0.
        macs += ll * 4 * h * (inputs + h) * b * 2
        macs += (ll - 1) * 4 * h * h * b + (ll * 4 * h * inputs * b if layer else 0)
    est = estimate(tasks, pes=8)
    assert est["ops"]["matmul"] == macs
    assert est["ops"]["ew"] == ln * ll * (4 + 15 + 8) * h * b
    # σ of i, f, o in FW (3 per unit), tanh(s_t) again in BP-EW-P1.
    assert est["activations"]["ew"] == ln * ll * (3 + 1) * h * b
    assert est["length"]["ew"] == est["ops"]["ew"] + 8 * est["activations"]["ew"]
    assert est["length"]["matmul"] == macs


def test_tiles_split_hidden_units_and_inputs():
    phases = by_phase(training_graph(SHAPE, tiles=4))
    assert [t.ops for t in phases["fw_mm_h", 1, 2]] == [4 * n * 10 * 5 for n in (3, 3, 2, 2)]
    assert [t.ops for t in phases["bp_inner_x", 1, 2]] == [4 * 10 * n * 5 for n in (3, 3, 2, 2)]
    assert [t.ops for t in phases["bp_inner_x", 2, 0]] == [4 * 10 * n * 5 for n in (3, 3, 2, 2)]
    assert len(phases["fw_ew", 0, 0]) == 4
    wide = by_phase(training_graph(SHAPE, tiles=50))
    assert len(wide["fw_ew", 0, 0]) == 10  # capped at H


def ids(tasks):
    return sorted(t.id for t in tasks)


def test_dependency_rules_baseline():
    tasks = training_graph(SHAPE, tiles=3)
    p = by_phase(tasks)
    ew = lambda l, t: ids(p["fw_ew", l, t])  # noqa: E731
    for j in range(3):
        assert sorted(p["fw_mm_x", 0, 1][j].deps) == []
        assert sorted(p["fw_mm_x", 1, 1][j].deps) == ew(0, 1)
        assert sorted(p["fw_mm_h", 1, 1][j].deps) == ew(1, 0)
        assert p["fw_mm_h", 1, 0][j].deps == ()
        assert p["fw_ew", 1, 1][j].deps == (p["fw_mm_x", 1, 1][j].id, p["fw_mm_h", 1, 1][j].id)
        # The top layer's last cell waits for the loss; P1 belongs to the BP cell.
        assert sorted(p["bp_p1", 2, 3][j].deps) == sorted([p["fw_ew", 2, 3][j].id] + ew(2, 3))
        grads = ids(p["bp_inner_h", 1, 3]) + ids(p["bp_inner_x", 2, 2])
        assert sorted(p["bp_p1", 1, 2][j].deps) == sorted([p["fw_ew", 1, 2][j].id] + grads)
        assert p["bp_p2", 1, 2][j].deps == (p["bp_p1", 1, 2][j].id,)
        assert sorted(p["bp_inner_h", 1, 2][j].deps) == ids(p["bp_p2", 1, 2])
        assert sorted(p["bp_outer", 1, 2][j].deps) == sorted(
            [p["bp_p2", 1, 2][j].id, p["bp_outer", 1, 3][j].id])
    assert ("bp_inner_h", 1, 0) not in p and ("bp_inner_x", 0, 1) not in p
    # Priority: FW first, the outer products last.
    assert max(t.id for t in tasks if t.phase.startswith("fw")) < min(
        t.id for t in tasks if t.phase.startswith("bp"))
    assert min(t.id for t in tasks if t.phase == "bp_outer") > max(
        t.id for t in tasks if t.phase.startswith("bp") and t.phase != "bp_outer")
    check_graph(tasks)


def test_ms1_moves_part1_into_fw():
    base = training_graph(SHAPE, tiles=3)
    tasks = training_graph(SHAPE, tiles=3, ms1=True, density=0.25)
    p = by_phase(tasks)
    for j in range(3):
        assert p["bp_p1", 1, 2][j].deps == (p["fw_ew", 1, 2][j].id,)
        assert p["bp_p1", 1, 2][j].activations == 0
        grads = ids(p["bp_inner_h", 1, 3]) + ids(p["bp_inner_x", 2, 2])
        assert sorted(p["bp_p2", 1, 2][j].deps) == sorted([p["bp_p1", 1, 2][j].id] + grads)
    # In FW order: right after the cell's FW-EW, before the next timestamp's FW.
    assert max(ids(p["fw_ew", 1, 2])) < min(ids(p["bp_p1", 1, 2]))
    assert max(ids(p["bp_p1", 1, 2])) < min(ids(p["fw_mm_x", 0, 3]))
    est, est_base = estimate(tasks, 8), estimate(base, 8)
    assert est["ops"]["matmul"] == est_base["ops"]["matmul"]
    assert est["ops"]["ew"] == 3 * 4 * (4 + 15 + 2) * 10 * 5  # P2 8H -> 2H at density 1/4
    check_graph(tasks)


def test_ms2_skipped_cells_have_no_bp():
    kept = np.ones((3, 4), dtype=bool)
    kept[2, :2] = False   # single loss: the earliest cells of the top layer
    kept[1, 0] = False
    tasks = training_graph(SHAPE, tiles=2, ms1=True, kept=kept)
    p = by_phase(tasks)
    for l, t in ((2, 0), (2, 1), (1, 0)):
        assert not [k for k in p if k[1:] == (l, t) and k[0].startswith("bp")]
    # (2, 1) is skipped: (2, 2) emits no δH_1 and (1, 1) gets no δY from it, only
    # δH from (1, 2); (1, 0) is skipped: (1, 1) emits no δH_0.
    assert ("bp_inner_h", 2, 2) not in p and ("bp_inner_h", 1, 1) not in p
    assert ("bp_inner_x", 2, 1) not in p
    grads = ids(p["bp_inner_h", 1, 2])
    assert sorted(p["bp_p2", 1, 1][0].deps) == sorted([p["bp_p1", 1, 1][0].id] + grads)
    # δW accumulation of layer 2 chains its kept cells 3 -> 2.
    assert sorted(p["bp_outer", 2, 2][1].deps) == sorted(
        [p["bp_p2", 2, 2][1].id, p["bp_outer", 2, 3][1].id])
    check_graph(tasks)


def test_errors():
    with pytest.raises(UsageError, match=r"^tiles must be a positive integer, not 0$"):
        training_graph(SHAPE, tiles=0)
    with pytest.raises(UsageError, match=r"^kept must be layers x length = 3 x 4, not \(4, 3\)$"):
        training_graph(SHAPE, tiles=2, kept=np.ones((4, 3)))
    with pytest.raises(UsageError, match=r"^density must be a number in \(0, 1\], not 0$"):
        training_graph(SHAPE, tiles=2, density=0)
    with pytest.raises(UsageError, match=r"^workload must be a Workload"):
        training_graph((1, 2), tiles=2)
    with pytest.raises(UsageError, match=r"^task 0 depends on itself through task 1: the "
                                         r"graph must have no cycle$"):
        check_graph([Task(id=0, kind="ew", ops=1, deps=(1,)),
                     Task(id=1, kind="ew", ops=1, deps=(0,))])
    with pytest.raises(UsageError, match=r"^task 0: dependency 5 is not another task of the "
                                         r"graph \(0\.\.1\)$"):
        check_graph([Task(id=0, kind="ew", ops=1, deps=(5,)), Task(id=1, kind="ew", ops=1)])
    with pytest.raises(UsageError, match=r"^task 0: kind must be one of matmul, ew, not 'mvm'$"):
        check_graph([Task(id=0, kind="mvm", ops=1)])
    with pytest.raises(UsageError, match=r"^task 1 must be a Task with id 1"):
        check_graph([Task(id=0, kind="ew", ops=1), Task(id=2, kind="ew", ops=1)])
    with pytest.raises(UsageError, match=r"^task 0: ops must be positive"):
        check_graph([Task(id=0, kind="ew", ops=0)])

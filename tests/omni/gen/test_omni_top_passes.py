"""The step's task graphs on the top (nnrtl.gen.omni.top_passes): run on the golden model in
id order they give the layer passes' outputs (nnrtl.gen.omni.channel_passes, the golden
trainer's) bit for bit, MS1 and MS2's skipped cells included; the dependencies are the
data each task reads; windows renumber."""

import numpy as np
import pytest

from nnrtl.gen.omni import channel_passes as passes
from nnrtl.gen.omni.top_passes import StepGraph, run_golden, windows
from nnrtl.hw.omni.top_config import OmniConfig
from nnrtl.sim.golden.float import to_bits

TOP = OmniConfig(input_size=3, hidden_size=5, layers=2, seq_len=3, batch=2, channels=3,
                 pes_per_channel=4, swing_channels=1, max_tasks=24)


def _bits(channel, values):
    return np.asarray(to_bits(channel.fmt, values), np.uint64)


def _reference(kept, ms1, rng):
    """Both runs through the layer passes on the golden model, layer by layer, and the
    arrays the graphs take."""
    channels = [TOP.layer_channel(l) for l in range(TOP.layers)]
    h, length, batch = TOP.hidden_size, TOP.seq_len, TOP.batch
    weights = [passes.weights_vector(c, rng.uniform(-1, 1, (4 * h, c.input_size)),
                                     rng.uniform(-1, 1, (4 * h, h)), rng.uniform(-1, 1, 4 * h))
               for c in channels]
    xs0 = _bits(channels[0], rng.normal(size=(length, batch, TOP.input_size)))
    fw, xs = [], xs0
    for l, c in enumerate(channels):
        fw.append(passes.drive(passes.fw_pass(c, weights[l], xs, ms1=ms1, kept=kept[l]),
                               passes.run_golden(c)))
        xs = fw[-1]["h"]
    ins = [xs0] + [fw[l]["h"] for l in range(TOP.layers - 1)]
    stored_names = passes.PART1_VECTORS if ms1 else passes.SAVED
    stored = [{n: fw[l][n] for n in stored_names} for l in range(TOP.layers)]
    dys = _bits(channels[-1], rng.normal(size=(length, batch, h)))
    bp, dy = [None] * TOP.layers, dys
    for l in reversed(range(TOP.layers)):
        bp[l] = passes.drive(passes.bp_pass(channels[l], weights[l], ins[l], fw[l]["h"],
                                            stored[l], dy, kept=kept[l], ms1=ms1),
                             passes.run_golden(channels[l]))
        dy = bp[l]["dx"]
    fw_arrays = {"weights": weights, "xs": xs0}
    bp_arrays = {"weights": weights, "xs": ins, "hs": [f["h"] for f in fw],
                 "stored": stored, "dys": dys}
    return fw, bp, fw_arrays, bp_arrays


@pytest.mark.parametrize("ms1, skip", [(False, False), (True, True)])
def test_graph_outputs_are_the_layer_passes(ms1, skip):
    rng = np.random.default_rng(3)
    kept = np.ones((TOP.layers, TOP.seq_len), bool)
    if skip:
        kept[0, 1] = kept[1, 2] = False
    fw, bp, fw_arrays, bp_arrays = _reference(kept, ms1, rng)
    graph = StepGraph(TOP, "fw", fw_arrays, kept, ms1)
    assert len(graph.tasks) == 2 * 3 * TOP.layers * TOP.seq_len * TOP.batch   # 3 tiles
    for got, want in zip(run_golden(graph), fw):
        assert set(got) == set(want)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    graph = StepGraph(TOP, "bp", bp_arrays, kept, ms1)
    first_steps = int(kept[:, 0].sum())          # no bp_inner_h at t = 0
    assert len(graph.tasks) == 3 * TOP.batch * (4 * int(kept.sum()) - first_steps)
    for got, want in zip(run_golden(graph), bp):
        for name in ("dx", "dgates", "dw", "db"):
            np.testing.assert_array_equal(got[name], want[name])


def test_dependencies_and_windows():
    rng = np.random.default_rng(1)
    kept = np.ones((TOP.layers, TOP.seq_len), bool)
    _, _, fw_arrays, bp_arrays = _reference(kept, False, rng)
    fw = StepGraph(TOP, "fw", fw_arrays, kept, False)
    ids = {}
    for task in fw.tasks:
        ids.setdefault((task.part, *fw.cells[task.id]), []).append(task.id)
    tile = {task.id: task.tile for task in fw.tasks}
    # 5 hidden units in 3 tiles: 2, 2, 1 units; the MVM rounds of 4 gates of 2 units
    assert [len(fw.tasks[i].steps) for i in ids["fw_mm", 0, 0, 0]] == [4, 4, 4]
    assert [tile[i] for i in ids["fw_ew", 0, 0, 0]] == [0, 1, 2]
    # fw_mm(1, 1, 0) reads h of every tile of (0, 1, 0) and of (1, 0, 0)
    for i in ids["fw_mm", 1, 1, 0]:
        assert fw.tasks[i].deps == tuple(sorted(ids["fw_ew", 1, 0, 0]
                                                + ids["fw_ew", 0, 1, 0]))
    assert [fw.tasks[i].deps for i in ids["fw_ew", 0, 0, 1]] == [
        (i,) for i in ids["fw_mm", 0, 0, 1]]
    assert {t.kind for t in fw.tasks if t.part == "fw_mm"} == {"matmul"}
    bp = StepGraph(TOP, "bp", bp_arrays, kept, False)
    ids = {}
    for task in bp.tasks:
        ids.setdefault((task.part, *bp.cells[task.id]), []).append(task.id)
    # the δW chain per tile: (0, 1, 0) after (0, 2, 1)
    for j, i in enumerate(ids["bp_outer", 0, 1, 0]):
        assert bp.tasks[i].deps == (ids["bp_ew", 0, 1, 0][j], ids["bp_outer", 0, 2, 1][j])
    assert all(bp.tasks[i].deps == () for i in ids["bp_ew", 1, 2, 0])
    assert bp.tasks[ids["bp_ew", 0, 1, 1][0]].deps == tuple(sorted(
        ids["bp_inner_h", 0, 2, 1] + ids["bp_inner_x", 1, 1, 1]))
    assert ("bp_inner_h", 0, 0, 0) not in ids and ("bp_inner_x", 0, 0, 0) in ids
    assert max(i for key, i in ids.items() if key[0] != "bp_outer")[0] < min(
        i for key, i in ids.items() if key[0] == "bp_outer")[0]
    assert all(d < t.id for t in fw.tasks + bp.tasks for d in t.deps)
    parts = windows(fw.tasks, 30)
    assert [start for start, _ in parts] == [0, 30, 60]
    assert [len(chunk) for _, chunk in parts] == [30, 30, 12]
    for start, chunk in parts:
        for task in chunk:
            original = fw.tasks[start + task.id]
            assert task.deps == tuple(d - start for d in original.deps if d >= start)
            assert task.tile == original.tile

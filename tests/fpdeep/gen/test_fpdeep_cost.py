"""The FP line buffer's pace in the cost model (gen/fpdeep/cost.py: line_buffer_cycles)
against cycle counts worked by hand, and the mapper's period against the cluster simulator
where AlexNet's conv1 input (224 x 224 pixels, one a cycle) sets it."""

import json

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.fpdeep.cluster import ClusterConfig, load_plan, simulate
from nnrtl.gen.fpdeep.cost import line_buffer_cycles
from nnrtl.gen.fpdeep.mapper import map_network
from nnrtl.gen.fpdeep.network import builtin


def test_compute_bound_is_the_fill_and_the_windows():
    """4 x 4, 3 x 3 pad 1: the first window's last pixel is (1, 1), index 5, ready at 6;
    16 windows of 10 cycles: 6 + 160 (the cluster simulator's ``cycles + (K − 1 − pad) ·
    (w_in + 1) + 1``)."""
    assert line_buffer_cycles(4, 3, 1, 1, 10) == 6 + 16 * 10


def test_input_bound_is_the_pixels_and_the_queue():
    """4 x 4, 2 x 2 stride 2: the windows' last pixels 5, 7, 13, 15 (ready 6, 8, 14, 16).
    At 5 cycles a window the first window sets it (6 + 4·5 = 26); at 2 the last one does
    (16 + 2 = 18: the 16 pixels, the last window after them); a 1 x 1 kernel at one cycle
    a window: 8² pixels + 1."""
    assert line_buffer_cycles(4, 2, 2, 0, 5) == 26
    assert line_buffer_cycles(4, 2, 2, 0, 2) == 18
    assert line_buffer_cycles(8, 1, 1, 0, 1) == 65


@pytest.mark.parametrize("fpgas", [63, 100])
def test_alexnet_period_is_the_line_buffers_and_the_cluster_agrees(tmp_path, fpgas):
    """From 23 FPGAs on AlexNet's compute period is below conv1's 224² = 50,176 input
    pixels; the mapper's period is then set by the line buffer and the cluster simulator
    (its own pixel-level model of the line buffer, gen/fpdeep/cluster_node.py) gives the
    same period on the mapping."""
    mapping = map_network(builtin("alexnet"), fpgas, get_board("vc709"), check_storage=False)
    assert mapping.bound == "line"
    assert mapping.compute_period < 224 * 224 <= mapping.period == mapping.line_period
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(mapping.as_json(), default=str))
    found = simulate(load_plan(path), ClusterConfig(images=6))
    assert found["period_cycles"] == pytest.approx(mapping.period, rel=1e-3)

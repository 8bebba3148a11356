"""The FP line buffer's pace in the cost model (gen/fpdeep/cost.py: line_buffer_cycles)
against cycle counts worked by hand, and the mapper's period against the cluster simulator
where AlexNet's conv1 takes more than one input pixel a cycle; the pixels a cycle chosen
from a layer's DSP share (line_pixels_for) and their block RAM (line_buffer_words)."""

import json

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.fpdeep.cluster import ClusterConfig, load_plan, simulate
from nnrtl.gen.fpdeep.cost import line_buffer_cycles, line_buffer_words, line_pixels_for
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


def test_two_pixels_a_cycle_halve_the_input():
    """4 x 4, 2 x 2 stride 2 at 2 cycles a window (18 cycles at one pixel a cycle, above):
    at two pixels a cycle the last pixels 5, 7, 13, 15 are taken at 2.5, 3.5, 6.5, 7.5,
    the windows ready at 3.5, 4.5, 7.5, 8.5; with 8, 6, 4, 2 cycles of windows from each
    on: 11.5, 10.5, 11.5, 10.5, so 12 cycles."""
    assert line_buffer_cycles(4, 2, 2, 0, 2, 2) == 12


def test_pixels_a_cycle_from_the_dsp_share():
    """An 8 x 8 input, 2 x 2 stride 2 (16 windows; the last pixels of rows and columns 1,
    3, 5, 7), its DSP share one window a cycle (P = n_out = 8, Q = n_in = 3: 16 cycles of
    compute). Period 24: one pixel a cycle takes 64 + 1; two, 63/2 + 1 + 1 = 33.5 -> 34;
    three, max over windows of last/3 + 1 + windows left: window 12 (pixel 57) 19 + 1 + 4
    = 24, so three. Period 23: four (window 0: 9/4 + 1 + 16 = 19.25, window 12: 57/4 +
    1 + 4 = 19.25 -> 20). Capped at two: two (the line buffer then sets the period). At
    five cycles a window (80 compute cycles, above its 64 pixels) the input does not pace
    it: one; nor when its 64 pixels fit the period one a cycle (the line buffer as built,
    its fill then sets the period)."""
    per_window = -(-8 // 8) * -(-3 // 3)
    assert line_buffer_cycles(8, 2, 2, 0, per_window, 1) == 65
    assert line_buffer_cycles(8, 2, 2, 0, per_window, 2) == 34
    assert line_buffer_cycles(8, 2, 2, 0, per_window, 3) == 24
    assert line_pixels_for(8, 2, 2, 0, per_window, 24, 8) == 3
    assert line_pixels_for(8, 2, 2, 0, per_window, 23, 8) == 4
    assert line_pixels_for(8, 2, 2, 0, per_window, 24, 2) == 2
    assert line_pixels_for(8, 2, 2, 0, 5, 24, 8) == 1
    # 64 pixels fit a period of 64 one a cycle: one, the fill (65 cycles) sets the period
    assert line_pixels_for(8, 2, 2, 0, per_window, 64, 8) == 1


def test_banked_line_buffer_words():
    """AlexNet conv1's 3 channels, 11 x 11 on 224: one pixel a cycle 10 rows + 11 pixels =
    3 · 2,251 = 6,753 words; four a cycle, 11 column banks of 11 rows of ⌈224/11⌉ = 21:
    3 · 11 · 11 · 21 = 7,623; sixteen, 16 banks of ⌈224/16⌉ = 14: 3 · 11 · 16 · 14 =
    7,392."""
    assert line_buffer_words(3, 11, 224) == 6753
    assert line_buffer_words(3, 11, 224, 4) == 7623
    assert line_buffer_words(3, 11, 224, 16) == 7392


@pytest.mark.parametrize("fpgas", [40, 63])
def test_alexnet_conv1_takes_pixels_its_share_needs_and_the_cluster_agrees(tmp_path, fpgas):
    """From 23 FPGAs on AlexNet's compute period is below conv1's 224² = 50,176 input
    pixels; its line buffers take two or more pixels a cycle, so the period stays the
    compute period; every node's line buffers are counted at their width in its storage
    (FP and PG windows at the segment's width, EB's δ windows), and the cluster simulator
    (its own pixel-level model of the line buffer, gen/fpdeep/cluster_node.py) gives the
    same period on the mapping, within the fill the mapper does not charge on the
    compute-bound stride-1 layers (conv2: (5 − 1 − 2) · 28 + 1 = 57 cycles, 0.3% of 18,954
    at 63 FPGAs)."""
    mapping = map_network(builtin("alexnet"), fpgas, get_board("vc709"), check_storage=False)
    assert mapping.bound == "compute"
    assert mapping.period == mapping.compute_period < 224 * 224
    widths = [c.line_pixels for node in mapping.nodes for c in node.segments
              if c.layer == "conv1"]
    assert min(widths) >= 2 and all(c.line_pixels == 1 for node in mapping.nodes
                                    for c in node.segments if c.layer != "conv1")
    for node in mapping.nodes:
        words = 0
        for c in node.segments:
            if c.kind != "conv":
                continue
            w_out = (c.w_in + 2 * c.pad - c.k) // c.stride + 1
            if c.line_pixels == 1:
                fp = c.n_in * ((c.k - 1) * c.w_in + c.k)
            else:
                banks = max(c.k, c.line_pixels)
                fp = c.n_in * c.k * banks * -(-c.w_in // banks)
            words += 2 * fp + (c.n_out * ((c.k - 1) * w_out + c.k) if c.modules == 3 else 0)
        assert dict(node.storage)["line_buffers"] == words
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(mapping.as_json(), default=str))
    found = simulate(load_plan(path), ClusterConfig(images=6))
    assert mapping.period <= found["period_cycles"] <= mapping.period + 57 + 1

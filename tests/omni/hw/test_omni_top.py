# amaranth: UnusedElaboratable=no
"""OmniTop (hw/omni/top.py) in the Amaranth simulator: the R2A scheduler dispatches the
cell tasks of hw/omni/top_program.py to the channels, every task only once its inputs are
done, every result beat bit-exact against the golden channel model (the bench,
sim/tb/omni/top.py); the counters; the configuration's and the task graph's errors."""

import itertools

import pytest

from nnrtl.hw.omni.channel_program import bp_program, fw_program

from nnrtl.hw.omni.top import COUNTERS, MODE_COUNTERS, OmniTop, dma_port_names, register_map
from nnrtl.hw.omni.top_config import OmniConfig
from nnrtl.hw.omni.top_program import PARTS, task_count, top_tasks
from nnrtl.sim.tb.omni.top import check_in_amaranth

#: 2 channels of 2 PEs, a 1-layer LSTM of input 1 and hidden 3 over one timestamp: four
#: tasks (FW MatMul, FW EW, BP EW, BP MatMul), 2-stage adders to keep the run short; the
#: lanes' DSP48E2 slices in their Amaranth behaviour (Amaranth's simulator runs no Instance).
TINY = OmniConfig(input_size=1, hidden_size=3, layers=1, seq_len=1, channels=2,
                  pes_per_channel=2, swing_channels=1, adder_stages=2,
                  dsp_primitives="behaviour")


def test_dispatch_counters_and_swings():
    """Both channels in the EW group, channel 0 swinging (ew_mask 0b11, swing_mask 0b01):
    by the R2A's rules (the lowest free channel that can take a ready task, its own
    group's kind first) the MatMul tasks must run on channel 0 as swings, the EW task
    after the first one returns it home, and the chain of the cell's four tasks runs
    on channel 0 alone."""
    state = check_in_amaranth(TINY, seed=3, gap=0.25, stall=0.25, masks=(0b11, 0b01))
    assert not state["failures"] and not state["mismatches"], (state["failures"],
                                                                state["mismatches"][:2])
    assert state["task_count"] == 4
    assert [(c, t) for _, c, t in state["dispatch"]] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    counters = state["counters"]
    assert counters["swings"] == 2 and counters["returns"] == 1
    # every channel-cycle of a task is one of a kind; channel 1 never ran one
    assert counters["group_busy_matmul"] == 0
    assert 0 < counters["busy_matmul"] + counters["busy_ew"] <= counters["group_busy_ew"]
    assert counters["busy_ew"] > 0 and counters["busy_matmul"] > 0
    assert counters["cycles"] >= counters["busy_matmul"] + counters["busy_ew"]
    # the per-PE-mode counters: every mode of the cell ran; with gaps a held task may
    # wait for its next command, counted in no mode
    modes = [counters[name] for name in MODE_COUNTERS.values()]
    assert all(value > 0 for value in modes)
    assert sum(modes) <= counters["busy_matmul"] + counters["busy_ew"]
    assert [counters[name] for name in ("bytes_written", "bytes_read", "values_pruned",
                                        "values_kept")] == [0, 0, 0, 0]


def test_task_graph():
    config = OmniConfig(input_size=3, hidden_size=5, layers=2, seq_len=3, channels=3,
                        pes_per_channel=4, swing_channels=1)
    tasks = top_tasks(config)
    assert len(tasks) == task_count(config) == 24
    ids = {(t.part, t.layer, t.step): t.id for t in tasks}
    assert tasks[ids["fw_mm", 1, 1]].deps == tuple(sorted((ids["fw_ew", 1, 0],
                                                          ids["fw_ew", 0, 1])))
    assert tasks[ids["bp_ew", 0, 1]].deps == tuple(sorted(
        (ids["fw_ew", 1, 2], ids["bp_mm", 0, 2], ids["bp_mm", 1, 1])))
    assert all(dep < task.id for task in tasks for dep in task.deps)
    for task in tasks:
        assert task.kind == PARTS[task.part]
        # a task's length in the table is its result beats
        assert task.out_beats == sum(s.instruction.out_beats for s in task.steps) > 0
    # the four parts of a cell are its whole FW and BP programs, in order
    cell = [t for t in tasks if (t.layer, t.step) == (1, 2)]
    assert [t.part for t in cell] == list(PARTS)
    channel = config.layer_channel(1)
    program = fw_program(channel) + bp_program(channel)
    assert [t.first for t in cell] == [0, *itertools.accumulate(len(t.steps)
                                                                for t in cell[:3])]
    assert [s.instruction for t in cell for s in t.steps] == [s.instruction for s in program]
    assert cell[2].first == len(fw_program(channel))

def test_register_map():
    config = OmniConfig(input_size=3, hidden_size=5, channels=40)
    regmap = register_map(config)
    assert regmap["task_deps"].width == 64 and regmap["ew_mask"].width == 64
    assert all(regmap[name].width == 64 for name in COUNTERS)
    ew = regmap["ew_mask"].reset
    swing = regmap["swing_mask"].reset
    # the EW group is the last channels, the swing channels straddle the boundary
    first_ew = 40 - bin(ew).count("1")
    assert ew == ((1 << 40) - 1) ^ ((1 << first_ew) - 1)
    assert swing == 0b11 << (first_ew - 1)
    assert regmap["threshold"].reset == 0x3DCCCCCD      # 0.1 in fp32


@pytest.mark.parametrize("kwargs, error, message", [
    ({"layers": 0}, TypeError, r"^layers must be a positive integer, not 0$"),
    ({"seq_len": -3}, TypeError, r"^seq_len must be a positive integer, not -3$"),
    ({"batch": 1.5}, TypeError, r"^batch must be a positive integer, not 1\.5$"),
    ({"prune_threshold": -0.1}, TypeError,
     r"^prune_threshold must be a finite number of at least 0, not -0\.1$"),
    ({"prune_threshold": float("nan")}, TypeError,
     r"^prune_threshold must be a finite number of at least 0, not nan$"),
    ({"channels": 1}, ValueError, r"^channels \(1\) must be at least 2: one MatMul and one "
                                  r"EW group channel$"),
    ({"channels": 3, "swing_channels": 4}, ValueError,
     r"^swing_channels \(4\) cannot exceed channels \(3\)$"),
    ({"pes_per_channel": 0}, TypeError, r"^pes_per_channel must be a positive integer, "
                                        r"not 0$"),
    ({"hidden_size": -1}, TypeError, r"^hidden_size must be a positive integer, not -1$"),
    ({"adder_stages": 9}, TypeError, r"^adder_stages must be an integer from 1 to 8, not 9$"),
    ({"max_tasks": 0}, TypeError, r"^max_tasks must be a positive integer, not 0$"),
    ({"channels": 65}, ValueError, r"^channels \(65\) cannot exceed 64: the ew_mask and "
                                   r"swing_mask registers have 64 bits$"),
    ({"max_tasks": 65}, ValueError, r"^max_tasks \(65\) cannot exceed 64: the task_deps "
                                    r"register has 64 bits$"),
    ({"hbm_ports": 33}, TypeError, r"^hbm_ports must be an integer from 1 to 32, not 33$"),
    ({"hbm_ports": 0}, TypeError, r"^hbm_ports must be an integer from 1 to 32, not 0$"),
])
def test_config_checks(kwargs, error, message):
    with pytest.raises(error, match=message):
        OmniConfig(**kwargs)


def test_top_and_graph_checks():
    with pytest.raises(TypeError, match=r"^config must be an OmniConfig, not 'x'$"):
        OmniTop("x")
    with pytest.raises(TypeError, match=r"^config must be an OmniConfig, not 3$"):
        top_tasks(3)
    with pytest.raises(ValueError, match=r"^layers x seq_len x 4 \(68 tasks\) cannot exceed "
                                         r"max_tasks \(64\): the task table holds one "
                                         r"window$"):
        top_tasks(OmniConfig(layers=1, seq_len=17))
    with pytest.raises(ValueError, match=r"^layer must be an integer from 0 to 1, not 2$"):
        OmniConfig().layer_channel(2)


def test_a_dma_per_hbm_port():
    """``hbm_ports`` DMAs, each with its descriptor streams and AXI4 port; port 0 keeps
    the unnumbered names; 14 by default (224 GB/s / (32 bytes x 500 MHz))."""
    assert OmniConfig().hbm_ports == 14
    top = OmniTop(OmniConfig(channels=2, pes_per_channel=1, hbm_ports=3))
    members = set(top.signature.members)
    for tag in ("", "1", "2"):
        assert {f"s_dma{tag}_wr_cmd", f"s_dma{tag}_wr_data", f"s_dma{tag}_rd_cmd",
                f"m_dma{tag}_rd_data", f"m_axi{tag}"} <= members
    assert "m_axi3" not in members
    assert dma_port_names(2)["m_axi"] == "m_axi2" and dma_port_names(0)["rd_data"] == \
        "m_dma_rd_data"

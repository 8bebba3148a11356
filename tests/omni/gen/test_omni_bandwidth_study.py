"""The bandwidth study (nnrtl.gen.omni.studies.bandwidth) on a small shape: the compute
cycles the R2A model's, the memory cycles the bytes over each port option's bandwidth,
the bound the larger, the markdown naming it."""

import json

from nnrtl.gen.omni.accounting import Workload
from nnrtl.gen.omni.memory import step_bytes
from nnrtl.gen.omni.r2a import channel_durations, schedule
from nnrtl.gen.omni.studies import bandwidth
from nnrtl.gen.omni.workload import training_graph
from nnrtl.hw.omni.r2a import R2AConfig


def test_small_shape_row_and_markdown():
    shape = Workload(input_size=64, hidden_size=64, layers=2, length=3, batch=4)
    config = R2AConfig(channels=4, pes_per_channel=8)
    row = bandwidth.shape_row("small", shape, config)
    tasks = training_graph(shape, tiles=4)
    compute = schedule(tasks, config, dynamic=True,
                       durations=channel_durations(tasks, shape, config)).cycles
    assert row["compute_cycles"] == compute
    total = step_bytes(shape)["total"]
    # one 256-bit port: 32 bytes a cycle; 14 ports: 448; 32 ports: 460.8 GB/s / 500 MHz
    for ports, per_cycle in ((1, 32), (14, 448), (32, 921.6)):
        port = row["ports"][str(ports)]
        memory = -(-total // per_cycle)
        assert port["memory_cycles"] == memory
        assert port["bound"] == ("memory" if memory > compute else "compute")
        assert port["milliseconds"] == max(memory, compute) / 5e5
    needed = row["ports_to_compute_bound"]
    assert needed is None or (-(-total // (32 * needed)) <= compute
                              and (needed == 1 or -(-total // (32 * (needed - 1))) > compute))
    text = bandwidth.markdown([row])
    assert text.startswith("| shape | compute cycles |") and "-bound" in text
    json.dumps(row)

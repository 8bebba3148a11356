"""The HBM bandwidth term (nnrtl.gen.omni.memory, perf.step_memory / step_bound): the
bytes of a step counted by hand, the ports' bandwidth and its cap, the bound named."""

import re

import numpy as np
import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.omni.accounting import Workload
from nnrtl.gen.omni.memory import (HBM_PSEUDO_CHANNELS, PAPER_HBM_GBPS, hbm_bandwidth,
                                   memory_cycles, ports_for, step_bytes, step_time)
from nnrtl.gen.omni.perf import predict, step_bound, step_memory
from nnrtl.hw.omni.top_config import OmniConfig


def test_paper_bandwidth_needs_fourteen_ports():
    # 224e9 B/s / (32 B x 500e6 /s) = 14 ports of 256 bits
    assert ports_for(PAPER_HBM_GBPS) == 14
    assert ports_for(16.0) == 1 and ports_for(16.1) == 2
    assert hbm_bandwidth(14)["bytes_per_s"] == 224e9
    assert hbm_bandwidth(1) == {"bytes_per_s": 16e9, "bytes_per_cycle": 32.0, "ports": 1,
                                "capped": False}
    # 32 x 16 GB/s = 512 GB/s, above the two stacks' 2 x 128 B x 1.8 GT/s = 460.8 GB/s
    full = hbm_bandwidth(HBM_PSEUDO_CHANNELS)
    assert full["capped"] and full["bytes_per_s"] == pytest.approx(460.8e9)


def test_refusals():
    with pytest.raises(UsageError, match=r"^hbm_ports must be an integer from 1 to 32 "
                                         r"\(the HBM's pseudo-channels\), not 33$"):
        hbm_bandwidth(33)
    with pytest.raises(UsageError, match=r"^gbps \(600\) needs 38 ports of 256 bits at "
                                         r"500 MHz; the HBM has 32 pseudo-channels$"):
        ports_for(600)
    with pytest.raises(UsageError, match=re.escape("clock_hz must be a positive number, "
                                                   "not 0")):
        hbm_bandwidth(1, clock_hz=0)


def test_step_bytes_by_hand():
    """I = 8, H = 8, 2 layers, 3 steps, batch 1, every cell kept, MS1 off."""
    moved = step_bytes(Workload(input_size=8, hidden_size=8, layers=2, length=3, batch=1))
    params = 4 * 4 * 8 * (8 + 8 + 1)                 # W, U, b of a layer, fp32
    assert moved["weights"] == 2 * (3 + 3) * params    # FW per timestamp, BP per cell
    assert moved["weight_gradients"] == 2 * 2 * 3 * params
    assert moved["activations"] == 2 * 2 * 3 * 4 * (8 + 8)
    assert moved["intermediates"] == 2 * 2 * 3 * 4 * 5 * 8
    assert moved["inputs"] == moved["outputs"] == 3 * 4 * (8 + 8)
    assert moved["total"] == 55296


def test_step_bytes_ms1_and_ms2():
    """MS1's records (6 vectors, bitmap + survivors), MS2's skipped cells move nothing."""
    workload = Workload(input_size=4, hidden_size=16, layers=1, length=4, batch=2)
    kept = np.array([[True, False, True, False]])
    moved = step_bytes(workload, density=0.25, kept=kept)
    params = 4 * 4 * 16 * (4 + 16 + 1)
    assert moved["weights"] == (4 + 2) * params
    assert moved["weight_gradients"] == 2 * 2 * params
    # per kept cell: 12 blocks of 16 values: 12 x 2 bitmap bytes + 4 x 48 survivors
    assert moved["intermediates"] == 2 * 2 * (24 + 4 * 48)
    assert moved["activations"] == 2 * 2 * 2 * 4 * 20


def test_bound_named():
    assert step_time(100, 99) == {"cycles": 100, "compute_cycles": 100,
                                  "memory_cycles": 99, "bound": "compute"}
    assert step_time(100, 101)["bound"] == "memory"
    assert memory_cycles(33, hbm_bandwidth(1)) == 2
    config = OmniConfig(channels=4, pes_per_channel=4, hbm_ports=1)
    assert OmniConfig().hbm_ports == 14
    term = step_memory(config)
    assert term["memory_cycles"] == 55296 // 32
    assert step_bound(config, 892) == {"cycles": 1728, "compute_cycles": 892,
                                       "memory_cycles": 1728, "bound": "memory",
                                       "memory_bytes": 55296.0, "ports": 1}
    assert step_bound(config, 892, ports=14)["memory_cycles"] == -(-55296 // 448)
    result = predict(config, {"hbm_ports": 14})
    assert result["memory_cycles"] == 124
    assert result["bound"] == "compute" and result["bound_cycles"] == result["cycles"]

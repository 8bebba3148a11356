"""The compressing DMA under Verilator (bench: nnrtl.sim.tb.omni.dma): one small build,
cocotbext-axi's AxiRam as the AXI4 memory, the four backpressure patterns on the value
source, the output sink and every memory channel; write images, read beats, counters and
the dense rows a gather touches all checked against the golden model."""

import dataclasses

import pytest

from nnrtl.hw.omni.dma import OmniDMA
from nnrtl.hw.omni.dma_config import DmaConfig
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

#: 64-bit bus, bursts of 4 beats: records of a few dozen values span several bursts.
CONFIG = DmaConfig(data_width=64, addr_width=20, max_length=37, max_blocks=6,
                   max_row_words=5, burst_len=4, wt_data_depth=8, wt_index_depth=4,
                   rd_data_depth=8, rd_index_depth=4, rd_dense_depth=8, pending_depth=4,
                   counter_width=32)


def run(transfers, seed):
    return simulate(OmniDMA(CONFIG), test_module="nnrtl.sim.tb.omni.dma", name="omni_dma",
                    seed=seed, params={"config": dataclasses.asdict(CONFIG),
                                       "patterns": list(PATTERNS), "transfers": transfers,
                                       "memory_bytes": 1 << 16})


def test_dma_four_patterns():
    transfers = 3                       # sparse records per pattern, plus one dense
    result = run(transfers=transfers, seed=31)
    assert result["bit_exact"]
    assert result["transfers"] == len(PATTERNS) * (transfers + 1)
    assert result["budget_use"] < 0.5
    assert result["values"] > 100


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_dma_many_transfers():
    result = run(transfers=60, seed=32)
    assert result["bit_exact"] and result["transfers"] == len(PATTERNS) * 61

# amaranth: UnusedElaboratable=no
"""The channel's cycle model (hw/omni/channel_timing.py) against the RTL in the Amaranth
simulator: one FW and one BP cell, gapless, on random small configurations (odd lane
counts, input and hidden sizes, pipelines; a seed each), the model's cycles equal to the
bench's count (and in ``test_omni_channel.py``'s gapless run). The paper's 32-PE channel is compared under Verilator
(``tests/omni/sim/test_omni_channel_verilator.py``, slow)."""

import numpy as np
import pytest

from nnrtl.hw.omni.channel import Channel
from nnrtl.hw.omni.channel_config import (Activation, ChannelConfig, ChannelInstruction,
                                          Source)
from nnrtl.hw.omni.channel_timing import program_cycles, raw_order
from nnrtl.hw.omni.config import OmniJob, OmniMode
from nnrtl.sim.tb.omni.channel import cell_programs, check_in_amaranth


def random_config(seed):
    rng = np.random.default_rng(seed)
    adder = int(rng.integers(1, 4))
    return ChannelConfig(
        pes_per_channel=int(rng.integers(2, 5)), input_size=int(rng.integers(1, 4)),
        hidden_size=int(rng.integers(2, 4)), adder_stages=adder,
        # seed 2: a multiplier deeper than the adder plus one (the EW-add hold)
        multiplier_stages=int(rng.integers(0, 3)) + (adder + 2 if seed == 2 else 0),
        activation_adder_stages=int(rng.integers(1, 3)),
        activation_multiplier_stages=int(rng.integers(0, 2)), input_depth=2 + seed % 2)


@pytest.mark.parametrize("seed", [2, 7])  # 2 lanes, M > L + 1; 3 lanes, I = H = 3
def test_model_equals_rtl_cycles(seed):
    config = random_config(seed)
    program, pad = cell_programs(config, np.random.default_rng(seed))
    cycles, board = check_in_amaranth(Channel(config), program, pad)
    assert board.finished
    assert program_cycles(config, program) == cycles
    assert config.program_cycles(program) == cycles


def test_raw_order_and_plain_instructions():
    config = ChannelConfig(pes_per_channel=2, input_size=1, hidden_size=2)
    program, _pad = cell_programs(config, np.random.default_rng(0))
    after = raw_order(program)
    # s = a + b waits for the steps writing a and b
    names = [step.result.name for step in program]
    s = names.index("s")
    assert after[s] == max(names.index("a"), names.index("b"))
    assert after[0] == -1
    # plain instructions have no read-after-write wait: two EW multiplies of 3 beats
    # stream back to back (the second PE job waits one cycle behind the first's last
    # issue), then the multiplier and the queues
    job = ChannelInstruction(OmniJob(OmniMode.EW_MUL, 3), 2)
    pe = config.pe
    one = program_cycles(config, [job])
    # the distribute queue, the PE's Input queue, the multiplier, its Output queue, the
    # result queue: 1 + 1 + M + 1 + 1 behind the first element, then 3 beats
    assert one == 3 + pe.multiplier_stages + 4
    assert program_cycles(config, [job, job]) == one + 3 + 1
    assert program_cycles(config, []) == 0
    with pytest.raises(ValueError, match=r"^lanes \(3\) cannot exceed pes_per_channel \(2\)$"):
        program_cycles(config, [ChannelInstruction(OmniJob(OmniMode.EW_MUL, 3), 3)])
    tanh = ChannelInstruction(OmniJob(OmniMode.EW_MUL, 3), 2, Source.LANES,
                              Source.BROADCAST, Activation.TANH)
    # through the tanh unit one word per cycle: 6 words, then the unit's latency
    assert program_cycles(config, [tanh]) >= 6 + config.activation_latency


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_model_equals_rtl_cycles_32_pes():
    """The paper's channel: 32 Omni-PEs, fp32, 8-stage adder, on a layer of I = 40,
    H = 36 (MVM rounds of 32 lanes and tails of 16 and 12, element-wise steps of 32 and
    4 lanes, eq. 2 on 32 and 12 lanes), and on I = 5, H = 9 (every step one round)."""
    for input_size, hidden_size in ((40, 36), (5, 9)):
        config = ChannelConfig(pes_per_channel=32, input_size=input_size,
                               hidden_size=hidden_size)
        program, pad = cell_programs(config, np.random.default_rng(32))
        cycles, board = check_in_amaranth(Channel(config), program, pad, timeout=6000)
        assert board.finished
        assert program_cycles(config, program) == cycles

# amaranth: UnusedElaboratable=no
"""η-LSTM channel (Amaranth simulator): one FW cell and one BP cell through the RTL, every
result beat bit-exact against the golden channel model, on small odd configurations
(3 and 4 lanes, odd hidden and input sizes with tail rounds, shallow pipelines to keep
the simulator fast), with and without input gaps and output stalls; the configuration's
and the instructions' checks in Amaranth's wording. The four backpressure patterns run
under Verilator (``tests/omni/sim/test_omni_channel_verilator.py``).
"""

import numpy as np
import pytest
from amaranth.hdl import Shape

from nnrtl.hw.omni.channel import Channel
from nnrtl.hw.omni.channel_config import (Activation, ChannelConfig, ChannelInstruction,
                                          Source)
from nnrtl.hw.omni.channel_program import bp_program, fw_program
from nnrtl.hw.omni.config import OmniJob, OmniMode
from nnrtl.sim.tb.omni.channel import cell_programs, check_in_amaranth

FAST = dict(adder_stages=2, multiplier_stages=1, activation_adder_stages=1,
            activation_multiplier_stages=1)


@pytest.mark.parametrize("lanes,input_size,hidden_size,gap,stall", [
    (3, 3, 5, 0.3, 0.4),      # tails of 2 lanes, gaps and stalls together
    (4, 5, 3, 0.0, 0.0),      # fewer hidden units than lanes, gapless
])
def test_fw_and_bp_cell_bit_exact(lanes, input_size, hidden_size, gap, stall):
    config = ChannelConfig(pes_per_channel=lanes, input_size=input_size,
                           hidden_size=hidden_size, **FAST)
    program, pad = cell_programs(config, np.random.default_rng(lanes * 100 + hidden_size))
    cycles, board = check_in_amaranth(Channel(config), program, pad, seed=lanes, gap=gap,
                                      stall=stall)
    assert board.finished and board.beats == sum(s.instruction.out_beats for s in program)
    # every vector the BP cell hands on was written by the RTL and matches the model
    assert board.completed == len(program)
    if gap == 0 and stall == 0:
        # the cycle model (hw/omni/channel_timing.py) is exact
        assert config.program_cycles(program) == cycles


def random_odd_sizes(seed):
    """``(lanes, input_size, hidden_size)`` drawn from ``seed``: 2-4 lanes, input 1-6,
    hidden 2-7 and never a multiple of the lanes (every round of rows has a tail)."""
    rng = np.random.default_rng(seed)
    lanes = int(rng.integers(2, 5))
    hidden = int(rng.choice([h for h in range(2, 8) if h % lanes]))
    return lanes, int(rng.integers(1, 7)), hidden


@pytest.mark.parametrize("seed", [2026])
def test_random_odd_sizes_bit_exact_and_cycle_model(seed):
    lanes, input_size, hidden_size = random_odd_sizes(seed)
    config = ChannelConfig(pes_per_channel=lanes, input_size=input_size,
                           hidden_size=hidden_size, **FAST)
    program, pad = cell_programs(config, np.random.default_rng(seed))
    cycles, board = check_in_amaranth(Channel(config), program, pad, seed=seed)
    assert board.finished and board.beats == sum(s.instruction.out_beats for s in program)
    assert config.program_cycles(program) == cycles


def test_one_lane_paper_pipelines():
    """A channel of one PE with the paper's 8-stage adder: every round is one row."""
    config = ChannelConfig(pes_per_channel=1, input_size=1, hidden_size=2)
    program, pad = cell_programs(config, np.random.default_rng(7))
    check_in_amaranth(Channel(config), program, pad, seed=1, gap=0.2, stall=0.2)


def test_programs_cover_the_cell():
    config = ChannelConfig(pes_per_channel=4, input_size=5, hidden_size=7)
    fw, bp = fw_program(config), bp_program(config)
    # FW: 4 gates x 2 rounds of MVM through the activations, rows of I + H + 1
    mvm = [s for s in fw if s.instruction.job.mode is OmniMode.MVM]
    assert len(mvm) == 8 and {s.instruction.job.length for s in mvm} == {13}
    assert [s.instruction.lanes for s in mvm[:2]] == [4, 3]
    assert [s.instruction.activation for s in mvm[::2]] == [
        Activation.SIGMOID, Activation.SIGMOID, Activation.TANH, Activation.SIGMOID]
    # BP: eq. 2 over I + H columns of 4H, eq. 3 outer products over 4H rows of I + H
    eq2 = [s for s in bp if s.instruction.job.mode is OmniMode.MVM]
    outer = [s for s in bp if s.instruction.job.mode is OmniMode.OUTER]
    assert [s.instruction.lanes for s in eq2] == [4, 4, 4]
    assert {s.instruction.job.length for s in eq2} == {28}
    assert len(outer) == 7 and {s.instruction.job.length for s in outer} == {12}
    assert sum(s.instruction.lanes for s in outer) == 28
    # one sigmoid and one tanh unit: activations only on the FW gates and tanh(s)
    assert sum(s.instruction.activation is Activation.TANH for s in bp) == 2


def test_config_derived():
    config = ChannelConfig()
    assert (config.pes_per_channel, config.adder_stages) == (32, 8)
    assert config.longest_job == 4096 and config.pe.max_length == 4096
    assert config.peak_macs_per_cycle == 32 and config.activation_latency == 9
    assert Shape.cast(config.command_layout["lanes"].shape).width == 6
    assert config.beat_layout.size == 32 * 32


@pytest.mark.parametrize("kwargs,error,message", [
    ({"pes_per_channel": 0}, TypeError,
     r"^pes_per_channel must be a positive integer, not 0$"),
    ({"hidden_size": -3}, TypeError, r"^hidden_size must be a positive integer, not -3$"),
    ({"input_size": 2.5}, TypeError, r"^input_size must be a positive integer, not 2\.5$"),
    ({"adder_stages": 9}, TypeError, r"^adder_stages must be an integer from 1 to 8, not 9$"),
    ({"broadcast_depth": 1}, TypeError,
     r"^broadcast_depth must be an integer of at least 2, not 1$"),
    ({"result_depth": True}, TypeError,
     r"^result_depth must be an integer of at least 2, not True$"),
    ({"activation_adder_stages": 0}, TypeError,
     r"^activation_adder_stages must be an integer from 1 to 8, not 0$"),
    ({"segment_bits": 24}, TypeError, r"^segment_bits must be an integer from 0 to 23, not 24$"),
    ({"fmt": 32}, TypeError, r"^fmt must be a FloatFormat, not 32$"),
    ({"flush_subnormals": 1}, TypeError, r"^flush_subnormals must be a bool, not 1$"),
    ({"hidden_size": 8, "input_size": 8, "max_length": 31}, ValueError,
     r"^max_length \(31\) cannot be less than the longest job of the cell programs \(32\)$"),
])
def test_config_checks(kwargs, error, message):
    with pytest.raises(error, match=message):
        ChannelConfig(**kwargs)


def test_instruction_checks():
    job = OmniJob(OmniMode.EW_MUL, 3)
    with pytest.raises(ValueError, match=r"^source1 and source2 cannot both be BROADCAST: "):
        ChannelInstruction(job, 2, Source.BROADCAST, Source.BROADCAST)
    with pytest.raises(ValueError, match=r"^source1 can be BROADCAST only for an EW_ADD job, "
                                         r"not EW_MUL: "):
        ChannelInstruction(job, 2, Source.BROADCAST)
    assert ChannelInstruction(OmniJob(OmniMode.EW_ADD, 3, True), 2, Source.BROADCAST)
    with pytest.raises(TypeError, match=r"^lanes must be a positive integer, not 0$"):
        ChannelInstruction(job, 0)
    with pytest.raises(TypeError, match=r"^source2 must be a Source, not 1$"):
        ChannelInstruction(job, 1, Source.LANES, 1)
    with pytest.raises(TypeError, match=r"^job must be an OmniJob, not 'MVM'$"):
        ChannelInstruction("MVM", 1)
    config = ChannelConfig(pes_per_channel=4, input_size=2, hidden_size=2)
    with pytest.raises(ValueError, match=r"^lanes \(5\) cannot exceed pes_per_channel \(4\)$"):
        config.command_word(ChannelInstruction(job, 5))
    with pytest.raises(ValueError, match=r"^job length \(9\) cannot exceed max_length \(8\)$"):
        config.command_word(ChannelInstruction(OmniJob(OmniMode.MVM, 9), 1))
    with pytest.raises(TypeError, match=r"^config must be a ChannelConfig, not 4$"):
        Channel(4)

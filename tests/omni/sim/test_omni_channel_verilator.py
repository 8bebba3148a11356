"""η-LSTM channel under Verilator (bench: nnrtl.sim.tb.omni.channel).

One small build (5 Omni-PEs with the paper's 8-stage adder, fp32, jobs up to 32
elements) and one simulation: per backpressure pattern (``none``, ``cycle``, ``random``,
``bursty`` on the four input streams and the output) one FW cell and one BP cell at two
random layer sizes each (input 3-6, hidden 6-8: rounds of 5 lanes with a tail),
every result beat bit-exact against the golden channel model.
"""

import numpy as np
import pytest

from nnrtl.hw.omni.channel_config import ChannelConfig
from nnrtl.hw.omni.channel_program import bp_program, fw_program
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.omni.channel import build_channel, channel_spec

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

SPEC = channel_spec(ChannelConfig(pes_per_channel=5, input_size=6, hidden_size=7,
                                  max_length=32))


def sizes(seed, count):
    """``count`` random ``[input_size, hidden_size]``: input 3-6, hidden 6-8 (never a
    multiple of the 5 lanes: every MVM round has a tail; 4H up to SPEC's 32)."""
    rng = np.random.default_rng(seed)
    return [[int(rng.integers(3, 7)), int(rng.integers(6, 9))] for _ in range(count)]


def run(seed, count, patterns=PATTERNS, spec=SPEC):
    return simulate(build_channel(spec), test_module="nnrtl.sim.tb.omni.channel",
                    name="omni_channel", seed=seed,
                    params={"channel": spec, "sizes": sizes(seed, count),
                            "patterns": list(patterns)})


def test_omni_channel_fw_bp_cells_under_the_four_patterns():
    result = run(17, 2)
    assert result["bit_exact"] and result["mismatches"] == 0
    assert [r["pattern"] for r in result["runs"]] == [p for p in PATTERNS for _ in range(2)]
    want_beats = 0
    for input_size, hidden_size in sizes(17, 2):
        config = ChannelConfig(pes_per_channel=5, input_size=input_size,
                               hidden_size=hidden_size, max_length=32)
        program = fw_program(config) + bp_program(config)
        want_beats += sum(step.instruction.out_beats for step in program)
    assert result["beats"] == len(PATTERNS) * want_beats
    # the cycle model (hw/omni/channel_timing.py) is exact without backpressure
    for run_ in result["runs"][:2]:
        assert run_["pattern"] == "none" and run_["cycles"] == run_["model_cycles"]


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_omni_channel_full_size():
    """The paper's 32-PE channel (fp32, 8-stage adder, jobs up to the default 4,096
    elements) on a reduced layer, I = 5, H = 33: the gate MVMs run 4H = 132 rows (four
    rounds of 32 lanes and a tail of 4), eq. 2 I + H = 38 columns (a round and a tail of
    6), under the four patterns; bit-exact against the golden model, and the channel's
    cycles equal to :func:`~nnrtl.hw.omni.channel_timing.program_cycles` under ``none``.
    About 4 minutes on the shared 2-core machine, build included (the lane emitted once;
    220 s on 2026-11-24)."""
    config = ChannelConfig(pes_per_channel=32, input_size=5, hidden_size=33)
    spec = channel_spec(config)
    result = simulate(build_channel(spec), test_module="nnrtl.sim.tb.omni.channel",
                      name="omni_channel_full", seed=5,
                      params={"channel": spec, "sizes": [[5, 33]],
                              "patterns": list(PATTERNS)})
    assert result["bit_exact"] and result["mismatches"] == 0
    assert [r["pattern"] for r in result["runs"]] == list(PATTERNS)
    program = fw_program(config) + bp_program(config)
    assert result["beats"] == len(PATTERNS) * sum(s.instruction.out_beats for s in program)
    none = result["runs"][0]
    assert none["pattern"] == "none"
    assert none["cycles"] == none["model_cycles"] == config.program_cycles(program)

"""Streaming accumulators under Verilator (bench: nnrtl.sim.tb.arith_accumulator).

One build and one simulation for a bundle of accumulators (fp32 with every adder depth,
bf16 and fp16 with flushed subnormals): random streams of 1 to 2000 values with special
values mixed in, under the project's pause patterns (and gaps without backpressure),
bit-exact against the golden model; then streams of 16 to 4096 values back to back
under pattern ``none``, whose measured latency must equal ``latency(n)`` and stay under
the paper's 2.87 % overhead from 1024 values on (adder depths 1 to 6; the paper's 8 is
3.03 % over ``n`` at 1024 and 1.05 % over the paper's ``n + 20`` reference, measured in
``tests/hw/test_arith_accumulator.py``).
"""

import pytest

from nnrtl.hw.arith.float import BF16, FP16, FP32
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.arith_accumulator import AccumulatorBundle, accumulator_spec


#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

#: Pause patterns (``"<source>/<sink>"`` where they differ); each unit's streams are split
#: among them.
PATTERNS = ["none", "random/none", "none/random", "cycle", "random", "bursty"]
LENGTHS = [16, 64, 256, 1024, 4096]
PAPER_OVERHEAD = 0.0287  # eta-LSTM, Sec. VI: "< 2.87% ... more than 1024 streaming inputs"

SPECS = {f"fp32_{stages}": accumulator_spec(FP32, adder_stages=stages)
         for stages in range(1, 7)}
SPECS["bf16_3_flush"] = accumulator_spec(BF16, adder_stages=3, flush_subnormals=True)
SPECS["fp16_6_flush"] = accumulator_spec(FP16, adder_stages=6, flush_subnormals=True)


def test_accumulators():
    result = simulate(AccumulatorBundle(SPECS), test_module="nnrtl.sim.tb.arith_accumulator",
                      name="arith_accumulators", seed=21,
                      params={"units": SPECS, "streams": 30, "max_length": 2000,
                              "patterns": PATTERNS, "overhead_lengths": LENGTHS})
    assert result["bit_exact"]
    for name, unit in result["units"].items():
        assert unit["mismatches"] == 0, name
        assert unit["streams"] == 30 + len(LENGTHS), name
        assert unit["latency_matches"] and unit["latency_checked"] > len(LENGTHS), name
        for n in LENGTHS:
            assert unit["measured_latency"][str(n)] == [unit["latency"][str(n)]], (name, n)
        for n in (1024, 4096):
            assert unit["overhead"][str(n)] < PAPER_OVERHEAD, (name, n)
    assert result["values"] > 8 * 30 * 100


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_accumulators_many_streams():
    result = simulate(AccumulatorBundle(SPECS), test_module="nnrtl.sim.tb.arith_accumulator",
                      name="arith_accumulators", seed=22,
                      params={"units": SPECS, "streams": 400, "max_length": 2000,
                              "patterns": PATTERNS})
    assert result["bit_exact"] and result["streams"] == 8 * 400
    assert all(unit["mismatches"] == 0 and unit["latency_matches"]
               for unit in result["units"].values())

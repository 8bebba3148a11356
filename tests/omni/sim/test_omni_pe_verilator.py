"""Omni-PE under Verilator (bench: nnrtl.sim.tb.omni.pe).

One small build (fp32, the paper's 8-stage adder, a 4-stage multiplier, jobs up to 64
elements) and one simulation: a random mix of all four modes (lengths from 1, odd and
even, modes switched back to back) per backpressure pattern, ``none``, ``cycle``,
``random`` and ``bursty`` on the three inputs and the output, bit-exact against the
golden model with ``last`` on each job's last result.
"""

import pytest

from nnrtl.hw.omni import OmniPE, OmniPEConfig
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.omni.pe import build_pe, pe_spec

#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

SPEC = pe_spec(OmniPEConfig(max_length=64))


def run(jobs, seed):
    return simulate(build_pe(SPEC), test_module="nnrtl.sim.tb.omni.pe", name="omni_pe",
                    seed=seed, params={"pe": SPEC, "jobs": jobs, "max_length": 40,
                                       "patterns": list(PATTERNS)})


def test_omni_pe_under_the_four_patterns():
    result = run(30, 13)
    assert result["bit_exact"] and result["mismatches"] == 0
    assert result["jobs"] == 4 * 30 and result["results"] > 4 * 30
    assert set(result["patterns"]) == set(PATTERNS)
    none = result["patterns"]["none"]
    # a mix's switches overlap, so the model (exact for one mode and long jobs) is close
    assert none["cycles"] <= 1.2 * none["model_cycles"]


@pytest.mark.slow
def test_omni_pe_on_dsp48e2_instances():
    """The adder's and the multiplier's DSP48E2 Instances, built with the primitive's
    model that the runner appends: bit-exact under the four patterns."""
    config = OmniPEConfig(max_length=64, dsp_primitives=True)
    spec = pe_spec(config)     # the bench's golden model: the same bits every form
    design = OmniPE(config)
    result = simulate(design, test_module="nnrtl.sim.tb.omni.pe", name="omni_pe_dsp",
                      seed=17, params={"pe": spec, "jobs": 12, "max_length": 24,
                                       "patterns": list(PATTERNS)})
    assert result["bit_exact"] and result["mismatches"] == 0
    assert result["jobs"] == 4 * 12


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_omni_pe_many_jobs():
    result = run(400, 14)
    assert result["bit_exact"] and result["jobs"] == 4 * 400

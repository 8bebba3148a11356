"""The FARNN MVM unit under Verilator (:mod:`nnrtl.sim.tb.farnn.mvm`): bit-exact against
:mod:`nnrtl.sim.golden.farnn.mvm` under every backpressure pattern on the results, and
with gapless streams a run's cycles equal to :func:`~nnrtl.sim.golden.farnn.mvm.cycles`
and the load's to :func:`~nnrtl.sim.golden.farnn.mvm.load_cycles`.

``make test`` builds one small unit (split 2, so both a full and a split round run, a
batch of 2 and two runs on one weight load). ``make test-slow`` runs the paper's shapes
(Sec. 5.1.3) at full size: 1,024 x 1,024 on 16 chains of 16 PEs (4 rounds, 4,096 words
per PE) and on 16 chains of 48 (2 rounds, unsplit and with split 2), their RTL cycles
printed (:func:`nnrtl.gen.farnn.studies.bench.bench_slices` puts them in the bench tables).
"""

import functools
import re

import pytest

from nnrtl.gen.farnn.studies.bench import PAPER_SHAPES, run_shape
from nnrtl.hw.arith.float_format import FP32
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate, to_verilog
from nnrtl.sim.tb.farnn.tops import MVMUnitTop

pytestmark = pytest.mark.timeout(900)    # a Verilator build (minutes on a busy machine)

#: 4 chains of 3 PEs, split 2: 20 rows take a full round of 12 and a split round of 6
#: rows (lanes 2, chunks of 4 and 3 of the 7 inputs); stages shorter than the defaults.
SMALL = dict(chains=4, chain_length=3, weight_depth=32, adder_stages=3, multiplier_stages=2,
             split=2)


@functools.cache
def small_verilog():
    """Converted once per process (seconds; the Verilator build is cached apart)."""
    return to_verilog(MVMUnitTop(FP32, **SMALL), "farnn_mvm_small")


def run(sink_pauses, *, seed=1, **params):
    params = {"unit": SMALL, "n_out": 18, "n_in": 7, "batch": 2, "steps": 2,
              "sink_pauses": sink_pauses, **params}
    return simulate(small_verilog(), test_module="nnrtl.sim.tb.farnn.mvm", params=params,
                    seed=seed, name="farnn_mvm_small")


def check(result):
    assert result["bit_exact"] is True, result["first_mismatch"]
    assert result["mismatches"] == 0 and result["first_mismatch"] is None
    assert result["budget_use"] < 0.5
    for got in result["runs"]:
        assert got["mac_cycles"] == got["model_mac_cycles"]


def test_one_module_per_pe_kind_and_chain():
    """The Verilog has one chain module, one pair module (two PEs sharing a memory) and
    one for the odd chain's lone tail, however many chains the unit has
    (:func:`nnrtl.hw.hierarchy.shared`)."""
    tops = re.findall(r"^module (farnn_mvm_small__\w+?)_[0-9a-f]{10}\(", small_verilog(),
                      re.M)
    assert sorted(tops) == ["farnn_mvm_small__farnn_pe", "farnn_mvm_small__pe_chain",
                            "farnn_mvm_small__pe_pair"]


@pytest.mark.parametrize("sink_pauses", PATTERNS)
def test_mvm_unit_bit_exact(sink_pauses):
    result = run(sink_pauses)
    check(result)
    assert (result["rounds"], result["split_last"], result["words_per_pe"]) == (2, True, 11)
    if sink_pauses == "none":
        assert result["load_cycles"] == result["model_load_cycles"] == 1 + 3 * 11
        assert [got["cycles"] for got in result["runs"]] == \
            [got["model_cycles"] for got in result["runs"]]
        assert all(got["stall_cycles"] == 0 for got in result["runs"])
    else:
        assert all(got["cycles"] >= got["model_cycles"] for got in result["runs"])
    if sink_pauses in ("random", "bursty"):
        assert all(got["stall_cycles"] > 0 for got in result["runs"])


def test_split_unit_runs_unsplit():
    """The same build with ``split_last`` off: 2 full rounds (14 words per PE), bit-exact,
    cycles as modelled (the fold adders' latency still counted)."""
    result = run("none", seed=2, n_out=20, split_last=False)
    check(result)
    assert (result["rounds"], result["split_last"], result["words_per_pe"]) == (2, False, 14)
    assert [got["cycles"] for got in result["runs"]] == \
        [got["model_cycles"] for got in result["runs"]]


def test_mismatch_is_reported_not_raised(monkeypatch):
    """A wrong value (the bench flips the lowest bit of the first expected word) comes
    back as ``bit_exact: False`` with that word as the first mismatch."""
    monkeypatch.setenv("NNRTL_TB_FAULT", "corrupt-golden")
    result = run("none")
    assert result["bit_exact"] is False and result["mismatches"] == 1
    mismatch = result["first_mismatch"]
    assert (mismatch["stream"], mismatch["index"], mismatch["frame"]) == ("m_axis", 0, 0)
    assert mismatch["expected"] ^ mismatch["got"] == 1


@pytest.mark.slow
@pytest.mark.timeout(3 * 3600)
@pytest.mark.parametrize("name", PAPER_SHAPES)
def test_paper_shape_at_full_size(name):
    row = run_shape(name)
    print(f"{name}: {row}")
    assert row["bit_exact"] is True
    assert row["mac_cycles"] == row["paper_mac_cycles"]
    assert row["cycles"] == row["model_cycles"]

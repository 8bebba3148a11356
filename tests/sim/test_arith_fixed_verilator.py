"""Fixed-point units and activations under Verilator (bench: nnrtl.sim.tb.arith_fixed).

Two bundles, each one build and one simulation: the arithmetic units on tens of
thousands of random operands, and the 16-bit activation and derivative units on every
input code; under the project's pause patterns (and gaps without backpressure, where the
latency is measured); bit-exact against the golden models, latency and throughput
measured.
"""

import pytest

from nnrtl.hw.arith.fixed import Overflow, QFormat, Rounding
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.arith_fixed import UnitBundle, unit_spec


#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)

Q = QFormat
VECTORS = 12000  # random beats per arithmetic unit
#: Pause patterns (``"<source>/<sink>"`` where they differ); each unit's vectors are split
#: among them.
PATTERNS = ["none", "random/none", "cycle", "random", "bursty"]


def run(units, name, seed, patterns=PATTERNS):
    bundle = UnitBundle({unit: entry["spec"] for unit, entry in units.items()})
    result = simulate(bundle, test_module="nnrtl.sim.tb.arith_fixed", name=name, seed=seed,
                      params={"units": units, "patterns": patterns})
    assert result["bit_exact"]
    assert list(result["patterns"]) == list(patterns)
    for unit, summary in result["units"].items():
        assert summary["mismatches"] == 0, unit
        assert summary["measured_latency"] == [summary["latency"]], unit
    return result


def test_arithmetic_units():
    units = {
        "mul": {"spec": unit_spec("FixedMul", Q(16, 12), Q(16, 12)), "vectors": VECTORS},
        "mul_even": {"spec": unit_spec("FixedMul", Q(16, 12), Q(16, 12), Q(16, 12),
                                       rounding=Rounding.HALF_EVEN, stages=2),
                     "vectors": VECTORS},
        "mul_32": {"spec": unit_spec("FixedMul", Q(32, 24), Q(32, 24), Q(32, 24)),
                   "vectors": VECTORS},
        "rescale": {"spec": unit_spec("Rescale", Q(32, 24), Q(16, 12)), "vectors": VECTORS},
        "sub_32": {"spec": unit_spec("FixedAdd", Q(32, 24), Q(32, 24), Q(32, 24),
                                     subtract=True), "vectors": VECTORS},
        "add_wrap": {"spec": unit_spec("FixedAdd", Q(32, 20), Q(16, 12), Q(16, 8),
                                       rounding=Rounding.TRUNCATE, overflow=Overflow.WRAP),
                     "vectors": VECTORS},
        "mac": {"spec": unit_spec("FixedMac", Q(16, 12), Q(16, 12)), "vectors": VECTORS},
        "mac_init": {"spec": unit_spec("FixedMac", Q(16, 12), Q(16, 12), Q(16, 12),
                                       init=True, acc_overflow=Overflow.SATURATE),
                     "vectors": VECTORS},
    }
    result = run(units, "arith_fixed_units", seed=11)
    assert result["vectors"] == 8 * VECTORS
    assert result["units"]["mac"]["results"] > VECTORS // 10


def test_activation_units_every_code():
    units = {name: {"spec": unit_spec(unit), "exhaustive": True}
             for name, unit in [("sigmoid", "PWLSigmoid"), ("tanh", "PWLTanh"),
                                ("sigmoid_derivative", "SigmoidDerivative"),
                                ("tanh_derivative", "TanhDerivative")]}
    result = run(units, "arith_pwl_units", seed=12, patterns=["none", "random/none", "random"])
    for summary in result["units"].values():
        assert summary["vectors"] == summary["results"] == 1 << 16

"""The FPDeep FC engine under Verilator (bench: nnrtl.sim.tb.fpdeep.fc), fixed16 and fp32:
two mini-batches per backpressure pattern on all six streams (inputs, weights from and to
DDR, δy in, y and δx out), every beat bit-exact against the golden model, and without pauses
the cycles the cycle model gives (nnrtl.gen.fpdeep.fc_cycles) plus the source driver's one
queueing cycle (nnrtl.sim.tb.streams: a word queued at edge e is taken at e + 2 at the
earliest). Slow: the Amaranth tests (tests/fpdeep/hw/test_fpdeep_fc.py) cover the engine in
the fast suite."""

import pytest

from nnrtl.hw.fpdeep.fc import FcEngine
from nnrtl.hw.fpdeep.fc_config import FcConfig
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import simulate
from nnrtl.sim.tb.fpdeep.fc import fields_of, random_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

#: Cycles the source driver adds before the first word can be taken.
QUEUE_CYCLES = 1


@pytest.mark.parametrize("cfg, order", [
    (FcConfig(precision="fixed16", n_in=7, n_out=3, p=3, batch=2, input_relu=True), "sample"),
    (FcConfig(precision="fp32", n_in=5, n_out=2, p=2, batch=3), "feature"),
], ids=["fixed16", "fp32"])
def test_fc_engine_every_pattern(cfg, order):
    batches = 2
    result = simulate(FcEngine(cfg, input_order=order),
                      test_module="nnrtl.sim.tb.fpdeep.fc",
                      name=f"fpdeep_fc_{cfg.precision}", seed=3,
                      params={"cfg": fields_of(cfg), "order": order, "batches": batches,
                              "patterns": list(PATTERNS)})
    assert result["bit_exact"], result["patterns"]
    for kind in PATTERNS:
        run = result["patterns"][kind]
        assert run["beats"] == {"o_y": batches * cfg.batch * cfg.n_out,
                                "o_w": batches * cfg.n_out * cfg.beats,
                                "o_dx": batches * cfg.batch * cfg.n_in}, (kind, run)
        assert not run["mismatches"], (kind, run)
    none = result["patterns"]["none"]
    assert none["cycles"] == none["model_cycles"] + QUEUE_CYCLES, none


@pytest.mark.parametrize("seed", [100, 102, 103, 104])
def test_fc_engine_random_draws(seed):
    """A seeded draw of FC shapes (the bench's strategy), one mini-batch under the random
    and bursty patterns, and the cycles without pauses."""
    cfg, order = random_config(seed)
    result = simulate(FcEngine(cfg, input_order=order), test_module="nnrtl.sim.tb.fpdeep.fc",
                      name=f"fpdeep_fc_draw{seed}", seed=seed,
                      params={"cfg": fields_of(cfg), "order": order, "batches": 1,
                              "patterns": ["none", "random", "bursty"]})
    assert result["bit_exact"], (cfg, result["patterns"])
    none = result["patterns"]["none"]
    assert none["cycles"] == none["model_cycles"] + QUEUE_CYCLES, (cfg, none)

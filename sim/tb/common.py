"""What every cocotb testbench module shares: its parameters, its report, reset and clock.

A testbench runs inside the Verilator process that :func:`nnrtl.sim.runner.simulate`
starts. The parameters passed to ``simulate(params=...)`` reach it as JSON through the
environment variable ``NNRTL_TB_PARAMS``; what it hands to :func:`report` is written as
JSON to the file named by ``NNRTL_TB_RESULT`` and returned by ``simulate``.
"""

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

__all__ = ["tb_params", "report", "start_clock_and_reset"]

PARAMS_ENV = "NNRTL_TB_PARAMS"
RESULT_ENV = "NNRTL_TB_RESULT"

#: Period of the simulated clock; only ratios matter, the cycle is the unit we report.
CLOCK_PERIOD_NS = 10


def tb_params():
    """Return the dict passed as ``params`` to :func:`nnrtl.sim.runner.simulate`."""
    return json.loads(os.environ.get(PARAMS_ENV, "{}"))


def report(result):
    """Hand a JSON-serialisable dict back to the caller of ``simulate``.

    Successive calls merge their keys into one result.
    """
    path = os.environ.get(RESULT_ENV)
    if path is None:
        raise RuntimeError(f"{RESULT_ENV} is not set; run testbenches through nnrtl.sim.runner")
    merged = {}
    if os.path.exists(path):
        with open(path) as f:
            merged = json.load(f)
    merged.update(result)
    with open(path, "w") as f:
        json.dump(merged, f)


async def start_clock_and_reset(dut, *, cycles=2):
    """Start the ``clk`` clock and hold ``rst`` (active high) for ``cycles`` cycles."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


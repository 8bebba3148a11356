"""What every cocotb testbench module shares: its parameters, its report, reset and clock.

A testbench runs inside the Verilator process that :func:`nnrtl.sim.runner.simulate`
starts. The parameters passed to ``simulate(params=...)`` reach it as JSON through the
environment variable ``NNRTL_TB_PARAMS``; what it hands to :func:`report` is written as
JSON to the file named by ``NNRTL_TB_RESULT`` and returned by ``simulate``.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

__all__ = ["tb_params", "report", "start_clock_and_reset", "pause_pattern"]

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


def pause_pattern(kind, rng=None):
    """An endless generator of pause bits for cocotbext-axi ``set_pause_generator``.

    Parameters
    ----------
    kind : str
        ``"none"`` (never pause), ``"cycle"`` (pause one cycle in four, like
        ``itertools.cycle([0, 0, 0, 1])``) or ``"random"`` (pause with probability 1/2).
    rng : random.Random, optional
        Source of randomness for ``"random"``.
    """
    rng = rng or random.Random(0)
    if kind == "none":
        while True:
            yield 0
    elif kind == "cycle":
        while True:
            yield from (0, 0, 0, 1)
    elif kind == "random":
        while True:
            yield rng.getrandbits(1)
    else:
        raise ValueError(f"pause pattern must be one of none, cycle, random, not {kind!r}")

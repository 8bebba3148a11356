"""cocotb bench: DSP48E2 slices (:mod:`nnrtl.hw.arith.dsp48e2`, Instance form with the
subset's Verilog model) driven by per-cycle input vectors, their outputs recorded.

Parameters (``tb_params()``): ``inputs_file``, the path of a JSON file holding
``{port: [value per cycle, ...]}`` (Verilog port names, ``rst`` included; every list as
long as the run; a file, as the vectors outgrow an environment variable); ``outputs``,
the port names to record. Each cycle the inputs are set after the falling edge of
``clk`` and the outputs read 1 ns later, before the next rising edge -- the moment an
Amaranth testbench's ``ctx.get`` sees them before ``await ctx.tick()``. Reported:
``outputs``, ``{port: [value per cycle, ...]}`` (unsigned integers) and ``cycles``.
"""

import json

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, tb_params

__all__ = ["run_vectors"]


@cocotb.test()
async def run_vectors(dut):
    """Drive every cycle's inputs, record every cycle's outputs."""
    params = tb_params()
    with open(params["inputs_file"]) as f:
        inputs = json.load(f)
    names = params["outputs"]
    cycles = len(next(iter(inputs.values())))
    assert all(len(values) == cycles for values in inputs.values())
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    recorded = {name: [] for name in names}
    for cycle in range(cycles):
        await FallingEdge(dut.clk)
        for name, values in inputs.items():
            getattr(dut, name).value = values[cycle]
        await Timer(1, unit="ns")
        for name in names:
            recorded[name].append(int(getattr(dut, name).value))
    report({"outputs": recorded, "cycles": cycles})

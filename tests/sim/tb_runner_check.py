"""cocotb bench for tests/sim/test_runner.py: an incrementer, checked or made to fail."""

import cocotb
from cocotb.triggers import RisingEdge

from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params


@cocotb.test()
async def increments(dut):
    params = tb_params()
    await start_clock_and_reset(dut)
    dut.i__valid.value = 1
    dut.o__ready.value = 1
    seen = []
    for value in params["values"]:
        dut.i__payload.value = value
        await RisingEdge(dut.clk)
        await RisingEdge(dut.clk)
        seen.append(int(dut.o__payload.value))
    report({"seen": seen, "seed": params["seed"]})
    if params.get("failure"):
        report({"failure": params["failure"]})
    if params.get("fail"):
        assert False, "asked to fail"

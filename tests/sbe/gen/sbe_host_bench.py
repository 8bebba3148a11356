"""cocotb bench for tests/sbe/gen/test_sbe_host.py: the ``host.py`` of a generated directory
drives the SBE's RTL under Verilator through its four platform functions (32-bit
AXI4-Lite words by offset, AXI4-Stream frames), bridged from its blocking calls into
cocotb; the h codes it returns are reported.

Parameters (``tb_params()``): ``config`` (SbeConfig fields), ``directory`` (the
generated design), ``xs`` (input codes), ``seed``, ``source_pauses``, ``sink_pauses``.
"""

import importlib.util
import os

import cocotb
from cocotb.task import bridge, resume
from cocotbext.axi import AxiStreamFrame

from nnrtl.gen.sbe.perf import run_cycles
from nnrtl.hw.sbe import SbeConfig
from nnrtl.sim.golden import sbe as golden
from nnrtl.sim.tb.common import report, tb_params
from nnrtl.sim.tb.engine_bench import EngineBench

PARAMS = tb_params()
CONFIG = SbeConfig(**PARAMS["config"])


@cocotb.test()
async def host_py_runs_the_rtl(dut):
    spec = importlib.util.spec_from_file_location(
        "generated_host", os.path.join(PARAMS["directory"], "host.py"))
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    xs = PARAMS["xs"]
    async with EngineBench(dut, CONFIG.registers, sources=["s_weights", "s_inputs"],
                           sinks=["m_axis"], params=PARAMS) as bench:
        @resume
        async def write_register(offset, value):
            await bench.regs.master.write(offset, int(value).to_bytes(4, "little"))

        @resume
        async def read_register(offset):
            return int.from_bytes((await bench.regs.master.read(offset, 4)).data, "little")

        @resume
        async def send(stream, data):
            await bench.source(stream).send(AxiStreamFrame(data))

        @resume
        async def receive(stream, size):
            frame = await bench.recv(stream, "frame")
            return bytes(frame.tdata)

        runner = host.Host(PARAMS["directory"], write_register=write_register,
                           read_register=read_register, send=send, receive=receive)
        steps = len(xs)
        bench.begin("host.py's runs", sum(run_cycles(CONFIG, layer, steps)
                                          for layer in range(CONFIG.layers)),
                    output_beats=sum(golden.beat_counts(CONFIG, layer, steps)["outputs"]
                                     for layer in range(CONFIG.layers)))
        hs = await bridge(runner.run)(xs, codes=True)
        await bench.finish()
        report({**bench.result(), "hs": hs, "cycles": bench.cycle})

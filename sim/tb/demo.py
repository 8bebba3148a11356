"""cocotb bench: the demo engine end to end under Verilator.

Parameters (``tb_params()``): ``config`` (the :class:`DemoConfig` fields), ``frames``,
``max_beats`` (longest frame), ``source_pauses`` / ``sink_pauses`` (names for
:func:`nnrtl.sim.tb.common.pause_pattern`), ``seed``.

Driver (AXI4-Stream source with random operands over the full signed range, frames of
random length) -> engine -> monitor (AXI4-Stream sink) -> in-order checker against
:func:`nnrtl.sim.golden.demo.dot_products`. The configuration registers must read back the
configuration; the counters must agree with what was sent. Reported: ``bit_exact``,
``cycles`` (busy cycles), ``model_cycles``, ``useful_macs``, ``utilization``,
``stall_cycles``, ``frames``, ``beats``, ``total_cycles`` (every cycle from the counter
clear to the counter read, what the simulator ran).
"""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from nnrtl.hw.demo import DemoConfig
from nnrtl.sim.golden.demo import dot_products, pack_operands, unpack_sums
from nnrtl.sim.tb.common import pause_pattern, report, start_clock_and_reset, tb_params

PARAMS = tb_params()
CONFIG = DemoConfig(**PARAMS["config"])
REGS = CONFIG.registers


async def read_register(master, name):
    register = REGS[name]
    data = await master.read(REGS.offset_of(name), register.width // 8)
    return int.from_bytes(data.data, "little")


@cocotb.test()
async def frames_match_golden_model(dut):
    rng = random.Random(PARAMS["seed"])
    await start_clock_and_reset(dut)
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk, dut.rst)
    source.set_pause_generator(pause_pattern(PARAMS["source_pauses"], random.Random(rng.random())))
    sink.set_pause_generator(pause_pattern(PARAMS["sink_pauses"], random.Random(rng.random())))

    for name in ("lanes", "operand_width", "acc_width"):
        assert await read_register(master, name) == getattr(CONFIG, name), name
    await master.write(REGS.offset_of("control"), (1).to_bytes(4, "little"))

    low, high = -(1 << (CONFIG.operand_width - 1)), (1 << (CONFIG.operand_width - 1)) - 1
    in_bytes = CONFIG.in_width // 8
    expected, lengths = [], []
    for _ in range(PARAMS["frames"]):
        beats = rng.randint(1, PARAMS["max_beats"])
        a = [[rng.randint(low, high) for _ in range(CONFIG.lanes)] for _ in range(beats)]
        b = [[rng.randint(low, high) for _ in range(CONFIG.lanes)] for _ in range(beats)]
        payload = b"".join(pack_operands(ra, rb, CONFIG).to_bytes(in_bytes, "little")
                           for ra, rb in zip(a, b))
        await source.send(AxiStreamFrame(payload))
        expected.append(dot_products(a, b, CONFIG))
        lengths.append(beats)

    mismatches = 0
    for index, sums in enumerate(expected):
        frame = await sink.recv()
        got = unpack_sums(int.from_bytes(bytes(frame.tdata), "little"), CONFIG)
        if got != sums:
            mismatches += 1
            dut._log.error("frame %d: got %s, expected %s", index, got, sums)
    await source.wait()
    await ClockCycles(dut.clk, 4)
    assert sink.empty(), "the engine sent more results than frames"

    counters = {name: await read_register(master, name)
                for name in ("cycles", "busy_cycles", "stall_cycles", "useful_macs", "frames")}
    assert counters["useful_macs"] == CONFIG.lanes * sum(lengths)
    assert counters["frames"] == len(lengths)
    assert await read_register(master, "status") == 0
    cycles = counters["busy_cycles"]
    report({
        "bit_exact": mismatches == 0,
        "cycles": cycles,
        "model_cycles": CONFIG.model_cycles(lengths),
        "useful_macs": counters["useful_macs"],
        "utilization": counters["useful_macs"] / (CONFIG.lanes * cycles),
        "stall_cycles": counters["stall_cycles"],
        "frames": len(lengths),
        "beats": sum(lengths),
        "total_cycles": counters["cycles"],
    })
    assert mismatches == 0, f"{mismatches} of {len(lengths)} frames differ from the model"

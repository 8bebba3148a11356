"""cocotb bench: the demo engine end to end under Verilator, on the generic
:class:`~nnrtl.sim.tb.engine_bench.EngineBench`.

Parameters (``tb_params()``): ``config`` (the :class:`DemoConfig` fields), ``frames``,
``max_beats`` (longest frame), ``source_pauses`` / ``sink_pauses`` (names of
:data:`nnrtl.sim.patterns.PATTERNS`), ``seed``.

Driver (AXI4-Stream source ``s_axis`` with random operands over the full signed range,
frames of random length) -> engine -> sink ``m_axis`` -> in-order checker against
:func:`nnrtl.sim.golden.demo.dot_products`. All waits share one budget from
:meth:`DemoConfig.model_cycles`. The configuration registers must read back the
configuration, the source must drain, the ``frames`` and ``useful_macs`` counters must
equal what was sent and nothing more may come out (protocol failures). Reported: the
checker's ``bit_exact``, ``mismatches``, ``first_mismatch``, ``fault``, ``budget_use``;
``cycles`` (busy cycles), ``model_cycles``, ``useful_macs``, ``utilization``,
``stall_cycles``, ``frames``, ``beats``, ``total_cycles`` (every cycle from the counter
clear to the counter read).
"""

import random

import cocotb
from cocotbext.axi import AxiStreamFrame

from nnrtl.hw.demo import DemoConfig
from nnrtl.sim.golden.demo import dot_products, pack_operands, unpack_sums
from nnrtl.sim.tb.common import report, tb_params
from nnrtl.sim.tb.engine_bench import EngineBench

PARAMS = tb_params()
CONFIG = DemoConfig(**PARAMS["config"])
COUNTERS = ("cycles", "busy_cycles", "stall_cycles", "useful_macs", "frames")


def random_frames(rng):
    """``(a, b)`` operand rows of each frame, over the full signed range."""
    low, high = -(1 << (CONFIG.operand_width - 1)), (1 << (CONFIG.operand_width - 1)) - 1
    frames = []
    for _ in range(PARAMS["frames"]):
        beats = rng.randint(1, PARAMS["max_beats"])
        a = [[rng.randint(low, high) for _ in range(CONFIG.lanes)] for _ in range(beats)]
        b = [[rng.randint(low, high) for _ in range(CONFIG.lanes)] for _ in range(beats)]
        frames.append((a, b))
    return frames


@cocotb.test()
async def frames_match_golden_model(dut):
    rng = random.Random(PARAMS["seed"])
    async with EngineBench(dut, CONFIG.registers, sources=["s_axis"], sinks=["m_axis"],
                           params=PARAMS) as bench:
        await bench.regs.expect({name: getattr(CONFIG, name)
                                 for name in ("lanes", "operand_width", "acc_width")})
        await bench.regs.write_fields("control", clear=1)

        frames = random_frames(rng)
        lengths = [len(a) for a, _ in frames]
        model_cycles = CONFIG.model_cycles(lengths)
        bench.begin(f"{len(frames)} frames", model_cycles, output_beats=len(frames))
        in_bytes = CONFIG.in_width // 8
        for a, b in frames:
            await bench.source("s_axis").send(AxiStreamFrame(b"".join(
                pack_operands(ra, rb, CONFIG).to_bytes(in_bytes, "little")
                for ra, rb in zip(a, b))))
        for index, (a, b) in enumerate(frames):
            frame = await bench.recv("m_axis", f"frame {index}")
            bench.expect_count(f"the beats of m_axis frame {index}",
                               len(frame.tdata) * 8 // CONFIG.out_width, 1,
                               source="one result beat per frame")
            got = unpack_sums(int.from_bytes(bytes(frame.tdata), "little"), CONFIG)
            bench.check("m_axis", dot_products(a, b, CONFIG), got, frame=index)
        await bench.wait_field("status", "busy", 0, "the last result sent")
        await bench.finish()

        counters = await bench.regs.read_many(COUNTERS)
        bench.expect_count("the frames counter", counters["frames"], len(frames),
                           source="frames sent")
        bench.expect_count("the useful_macs counter", counters["useful_macs"],
                           CONFIG.lanes * sum(lengths),
                           source="lanes x beats sent")
        cycles = counters["busy_cycles"]
        report({
            **bench.result(),
            "cycles": cycles,
            "model_cycles": model_cycles,
            "useful_macs": counters["useful_macs"],
            "utilization": counters["useful_macs"] / (CONFIG.lanes * cycles),
            "stall_cycles": counters["stall_cycles"],
            "frames": len(frames),
            "beats": sum(lengths),
            "total_cycles": counters["cycles"],
        })

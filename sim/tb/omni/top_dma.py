"""The top bench's DMA round trip (:func:`dma_round_trip`, part of
:mod:`nnrtl.sim.tb.omni.top`): MS1's record of one cell through the top's compressing DMA
into an HBM model (cocotbext-axi's ``AxiRam``) and back, against the golden DMA model
(:mod:`nnrtl.sim.golden.omni.dma`), on the top bench's shared stream drivers
(:mod:`nnrtl.sim.tb.streams`).
"""

import random

import numpy as np
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout

from nnrtl.hw.omni.decode import MODE, output_layout
from nnrtl.hw.omni.dma import read_command_layout, write_command_layout
from nnrtl.hw.omni.top import dma_port_names
from nnrtl.sim.golden.omni import dma as golden
from nnrtl.sim.patterns import cycle_budget, pause_pattern
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS

__all__ = ["P1_VECTORS", "dma_round_trip", "dma_transfer"]

#: The P1 vectors MS1 compresses (spec §2.1): a cell's record, one block each.
P1_VECTORS = ("p_o", "p_s", "p_i", "p_f", "p_c", "f")


def _pack(layout, **fields):
    return sum((int(fields[name]) & ((1 << field.width) - 1)) << field.offset
               for name, field in layout)


async def dma_transfer(bench, dma, port, command, fields, *, words=(), beats=0, budget,
                       failures, where=""):
    """One descriptor on DMA ``port``: ``fields`` packed on its ``command`` stream
    (``"s_dma_wr_cmd"`` or ``"s_dma_rd_cmd"``, the layout of ``dma``'s configuration),
    ``words`` on its write-data stream, and the ``beats`` output words it gives back.

    Returns
    -------
    list of int
        The output words; on a timeout of ``budget`` cycles, those that came, and a
        message in ``failures`` naming ``where``, the command and the beats missing.
    """
    layout = (write_command_layout if command == "s_dma_wr_cmd"
              else read_command_layout)(dma)
    sources, out = bench.dmas[port]
    values = sources["s_dma_wr_data"]
    first = len(out.words)
    sources[command].send_words([_pack(layout, **fields)])
    values.send_words(words)

    async def traffic():
        await sources[command].wait()
        if not values.idle():
            await values.wait()
        return await out.receive(beats)

    try:
        return await with_timeout(traffic(), budget * CLOCK_PERIOD_NS, "ns")
    except SimTimeoutError:
        failures.append(f"DMA {where}{command}: not done within {budget} cycles "
                        f"({len(out.words) - first} of {beats} beats)")
        return out.words[first:]


async def dma_round_trip(bench, regs, ram, config, pad, pattern, rng, port=0):
    """MS1's record of one cell through DMA ``port`` of the top: its P1 vectors written
    sparse at the ``threshold`` register's θ into the HBM model on that port, then read
    back re-densified (``expand``). The memory image, the beats and the counter registers
    (cleared first: the sums over the DMAs are this one's) must be the golden DMA
    model's.

    Parameters
    ----------
    bench : nnrtl.sim.tb.omni.top.TopStreams
        The top bench's stream drivers (the values and the output are paused by
        ``pattern``, the commands are not).
    regs : nnrtl.sim.tb.registers.RegisterBus
        The top's registers.
    ram : cocotbext.axi.AxiRam
        The HBM model on ``m_axi`` (every channel paused by ``pattern``).
    config : OmniConfig
    pad : dict
        The golden scratchpad after BP-EW (its :data:`P1_VECTORS`).
    pattern : str
        The pause pattern.
    rng : random.Random
        Seeds the pause generators.
    port : int
        The DMA (:func:`~nnrtl.hw.omni.top.dma_port_names`; ``bench`` drives its
        streams).

    Returns
    -------
    tuple
        ``(failures, counters)``: messages, and the DMA's counter registers.
    """
    dma = config.dma
    bits = np.stack([np.asarray(pad[name], dtype=np.uint32)
                     for name in P1_VECTORS])[:, :config.hidden_size]
    blocks, length = bits.shape
    model = golden.write_record(bits, sparse=True, threshold=config.prune_threshold)
    size = ram.size
    ram.write(0, bytes(size))
    for channel in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
                    ram.read_if.ar_channel, ram.read_if.r_channel):
        channel.set_pause_generator(pause_pattern(pattern, random.Random(rng.random())))
    names = dma_port_names(port)
    out = bench.dmas[port][1]
    bench.streams.pause(pattern, rng, ports=(names["wr_data"], names["rd_data"]))
    await regs.write_fields("control", clear=1)
    budget = cycle_budget(4 * bits.size + 64, output_beats=bits.size, patterns=(pattern,))
    failures = []

    async def transfer(command, fields, words=(), beats=0):
        return await dma_transfer(bench, dma, port, command, fields, words=words,
                                  beats=beats, budget=budget, failures=failures)

    await transfer("s_dma_wr_cmd", dict(sparse=1, base=0, blocks=blocks, length=length),
                   words=[int(v) for v in bits.flat])
    for _ in range(budget):
        if not (await regs.read_field("status", "dma_write_busy")):
            break
    image = ram.read(0, len(model.image))
    if image != model.image:
        failures.append("DMA: the record in memory differs from the golden record")
    want = golden.read_record(ram.read(0, size), mode="expand", base=0, blocks=blocks,
                              length=length)
    got = await transfer("s_dma_rd_cmd",
                         dict(mode=MODE["expand"], base=0, blocks=blocks, length=length,
                              dense_base=0, row_stride=0, block_stride=0, row_words=0),
                         beats=len(want.beats))
    await ClockCycles(bench.dut.clk, 4)
    extra = out.extra()
    if extra or getattr(bench.dut, f"{names['rd_data']}__valid").value:
        failures.append(f"DMA: {len(extra)} beats taken beyond the {len(want.beats)} "
                        "expanded ones (or one waiting)")
    layout = output_layout(dma)
    beats = [golden.Beat(**{name: (word >> field.offset) & ((1 << field.width) - 1)
                            for name, field in layout}) for word in got]
    if beats != want.beats:
        failures.append(f"DMA: {sum(a != b for a, b in zip(beats, want.beats))} of "
                        f"{len(want.beats)} expanded beats differ from the golden model")
    counters = await regs.read_many(("bytes_written", "bytes_read", "values_pruned",
                                     "values_kept"))
    expected = {"bytes_written": model.bytes_written, "bytes_read": want.bytes_read,
                "values_pruned": model.pruned, "values_kept": model.kept}
    if counters != expected:
        failures.append(f"DMA counters {counters}, golden {expected}")
    return failures + bench.check(), counters

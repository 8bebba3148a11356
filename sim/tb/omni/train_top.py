"""The η-LSTM top under Verilator running one run (FW or BP) of a training step: the bench
of :class:`nnrtl.gen.omni.train_top.RtlTop`.

The run's task graph is :class:`nnrtl.gen.omni.top_passes.StepGraph` on the trainer's
arrays. The bench is the host and the scratchpad, as the top bench
(:mod:`nnrtl.sim.tb.omni.top`) is: per window of ``max_tasks`` consecutive tasks it loads
the R2A task table, starts the run and serves each task the top offers on ``m_task[c]``
(its dependencies finished, never twice), streaming its steps into channel ``c`` from the
cell's vectors (:meth:`~nnrtl.gen.omni.top_passes.StepGraph.pad_for`: the vectors earlier
tasks' result beats wrote, the RTL's) and checking every result beat, bit for bit and in
order, against the golden model run on those vectors; a finished task's vectors go back to
the graph (:meth:`~nnrtl.gen.omni.top_passes.StepGraph.finish`). Every wait is bounded by
the window's cycle model; a task not done within it is a failure naming the tasks waited
for.

With MS1, after the FW windows, each kept timestamp's P1 record of each layer (its
``B x 6`` vectors of ``H`` values, :data:`~nnrtl.gen.omni.channel_passes.PART1_VECTORS`
per sample) is written sparse through the top's DMAs (record ``k`` on port ``k mod
hbm_ports``) at the ``threshold`` register's θ into an HBM model per port (cocotbext-axi's
``AxiRam``, records 64-byte aligned) and read back
re-densified (``expand``); the memory image, the beats and the DMA's counters must be
:mod:`nnrtl.sim.golden.omni.dma`'s, and the decoded values replace the P1 outputs.

Parameters (``tb_params()``): ``config`` (``dataclasses.asdict`` of the OmniConfig),
``phase``, ``ms1``, ``threshold`` (θ), ``allocation`` (``None``: the masks' reset
values; else ``{"ew_channels": k, "dynamic": bool}``, written to ``ew_mask`` and
``swing_mask`` before each window), ``inputs`` / ``outputs`` (``.npz``,
:func:`~nnrtl.gen.omni.train_top.save_arrays`: the graph's arrays plus ``kept``; the
outputs under ``layers``), ``pattern``, ``seed``. Reported: ``bit_exact``,
``mismatches``, ``first_mismatch``, ``failures``, ``tasks``, ``windows``, and
:data:`~nnrtl.gen.omni.train_top.RUN_COUNTERS` summed over the windows.
"""

from functools import partial

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from nnrtl.gen.omni.channel_passes import PART1_VECTORS
from nnrtl.gen.omni.perf import top_schedule
from nnrtl.gen.omni.top_passes import StepGraph, windows
from nnrtl.gen.omni.train_top import RUN_COUNTERS, load_arrays, save_arrays
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.omni.top import (Scratchpads, TopStreams, _run, _wait_finished,
                                   config_from_params)

__all__ = ["GraphPads", "omni_top_trains"]


class _Befores:
    """``befores[local id]``: the graph's pad of the window's task."""

    def __init__(self, graph, offset):
        self.graph, self.offset = graph, offset

    def __getitem__(self, task_id):
        return self.graph.pad_for(self.offset + task_id)


class GraphPads(Scratchpads):
    """:class:`~nnrtl.sim.tb.omni.top.Scratchpads` of one window of a
    :class:`~nnrtl.gen.omni.top_passes.StepGraph`: a finished task's vectors go back to
    the graph."""

    graph = None
    offset = 0

    def take_beat(self, c, word):
        board, task = self.boards[c], self.running[c]
        super().take_beat(c, word)
        if board is not None and board.finished:
            self.graph.finish(self.offset + task.id, board.pad)


async def _write_allocation(regs, config, ew_channels, dynamic):
    """Write the ``ew_mask`` and ``swing_mask`` of ``ew_channels`` EW-group channels,
    swinging or not (:func:`~nnrtl.hw.omni.workload.allocation`'s rule)."""
    from nnrtl.hw.omni.workload import allocation

    groups, swing = allocation(config.r2a, ew_channels, dynamic=dynamic)
    await regs.write("ew_mask", sum(g << c for c, g in enumerate(groups)))
    await regs.write("swing_mask", sum(int(w) << c for c, w in enumerate(swing)))


def _pads_class(graph, offset):
    return type("WindowPads", (GraphPads,), {"graph": graph, "offset": offset})


async def _dma_records(bench, regs, rams, graph, results, threshold):
    """MS1's records of ``results`` (the FW run's outputs, their P1 vectors replaced by
    the decoded ones) through the DMAs and back (module docstring), record ``k`` on port
    ``k mod hbm_ports`` (``rams``: the HBM model per port); returns ``(failures,
    counters)``."""
    from nnrtl.hw.omni.decode import MODE
    from nnrtl.hw.omni.dma_config import threshold_bits
    from nnrtl.sim.golden.omni import dma as golden
    from nnrtl.sim.tb.omni.top_dma import dma_transfer

    dma = graph.top.dma
    await regs.write("threshold", threshold_bits(threshold))
    await regs.write_fields("control", clear=1)
    failures, totals = [], dict.fromkeys(("bytes_written", "bytes_read", "values_kept",
                                          "values_pruned"), 0)
    bases = [0] * len(rams)

    async def transfer(port, command, fields, words=(), beats=0, budget=0):
        return await dma_transfer(bench, dma, port, command, fields, words=words,
                                  beats=beats, budget=budget, failures=failures,
                                  where=f"{port} at {bases[port]:#x} ")

    record = 0
    for l, outputs in enumerate(results):
        for t in np.flatnonzero(graph.kept[l]):
            port, record = record % len(rams), record + 1
            ram, base = rams[port], bases[port]
            bits = np.stack([outputs[name][t] for name in PART1_VECTORS], axis=1)
            bits = bits.reshape(-1, bits.shape[-1]).astype(np.uint32)   # (B x 6) x H
            blocks, length = bits.shape
            model = golden.write_record(bits, sparse=True, threshold=threshold)
            budget = 8 * bits.size + 256
            await transfer(port, "s_dma_wr_cmd", dict(sparse=1, base=base, blocks=blocks,
                                                length=length),
                           words=[int(v) for v in bits.flat], budget=budget)
            for _ in range(budget):
                if not await regs.read_field("status", "dma_write_busy"):
                    break
            if ram.read(base, len(model.image)) != model.image:
                failures.append(f"DMA: layer {l} step {t}'s record in memory differs from "
                                f"the golden record")
            want = golden.read_record(ram.read(0, ram.size), mode="expand", base=base,
                                      blocks=blocks, length=length)
            got = await transfer(port, "s_dma_rd_cmd", dict(
                mode=MODE["expand"], base=base, blocks=blocks, length=length, dense_base=0,
                row_stride=0, block_stride=0, row_words=0), beats=len(want.beats),
                budget=budget)
            decoded = np.array([(word >> dma_value_offset(dma)) & 0xFFFFFFFF
                                for word in got], dtype=np.uint64)
            wanted = np.array([beat.value for beat in want.beats], dtype=np.uint64)
            if decoded.shape != wanted.shape or (decoded != wanted).any():
                failures.append(f"DMA: layer {l} step {t}'s decoded record differs from "
                                f"the golden decoder's")
            else:          # BP reads what came back
                decoded = decoded.reshape(-1, len(PART1_VECTORS), length)
                for k, name in enumerate(PART1_VECTORS):
                    outputs[name][t] = decoded[:, k]
            totals["bytes_written"] += model.bytes_written
            totals["bytes_read"] += want.bytes_read
            totals["values_kept"] += model.kept
            totals["values_pruned"] += model.pruned
            bases[port] += -(-len(model.image) // 64) * 64
    await ClockCycles(bench.dut.clk, 4)
    counters = await regs.read_many(tuple(totals))
    if counters != totals:
        failures.append(f"DMA counters {counters}, golden {totals}")
    return failures + bench.check(), counters


def dma_value_offset(dma):
    """Bit offset of ``value`` in the decoder's output beat."""
    from nnrtl.hw.omni.decode import output_layout
    return dict(output_layout(dma))["value"].offset


def _record_bytes(graph):
    """An upper bound of the HBM model's bytes for the run's records."""
    total = 0
    for l, channel in enumerate(graph.channels):
        blocks = 6 * graph.batch
        size = blocks * -(-channel.hidden_size // 8) + 4 * blocks * channel.hidden_size
        total += int(graph.kept[l].sum()) * (-(-size // 64) * 64)
    return total


@cocotb.test()
async def omni_top_trains(dut):
    from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

    from nnrtl.hw.omni.top import COUNTERS, dma_port_names, register_map
    from nnrtl.sim.tb.registers import RegisterBus

    params = tb_params()
    config = config_from_params(params["config"])
    arrays = load_arrays(params["inputs"])
    kept = arrays.pop("kept")
    graph = StepGraph(config, params["phase"], arrays, kept, params["ms1"])
    bench = TopStreams(dut, config.channels, ports=config.hbm_ports)
    await start_clock_and_reset(dut)
    await ClockCycles(dut.clk, config.adder_stages + 2)
    regs = RegisterBus(AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk,
                                     dut.rst), register_map(config))
    totals = dict.fromkeys(RUN_COUNTERS, 0)
    failures, mismatches = [], []
    parts = windows(graph.tasks, config.max_tasks)
    allocation = params.get("allocation")
    model = None
    if allocation is not None:
        model = partial(top_schedule, config, **allocation)
    for index, (offset, tasks) in enumerate(parts):
        await regs.write_fields("control", clear_tasks=1)
        if allocation is not None:
            await _write_allocation(regs, config, **allocation)
        cycles, window_model, run_failures, run_mismatches, _beats, _dispatch = await _run(
            bench, config, tasks, _Befores(graph, offset), regs, params["pattern"],
            params["seed"] + index, pads=_pads_class(graph, offset), model=model)
        if not run_failures and not await _wait_finished(dut, regs, 100):
            run_failures.append("status.finished stayed 0 after the last task's result")
        counters = await regs.read_many(COUNTERS)
        for name in ("cycles", "busy_matmul", "busy_ew", "group_busy_matmul",
                     "group_busy_ew", "swings", "returns"):
            totals[name] += counters[name]
        totals["model_cycles"] += window_model.cycles
        failures += [f"window {index} (tasks {offset}-{offset + len(tasks) - 1}): {f}"
                     for f in run_failures]
        mismatches += [(offset + task, c, m) for task, c, m in run_mismatches]
        if run_failures or run_mismatches:
            break
    results = graph.results()
    if params["ms1"] and params["phase"] == "fw" and not failures and not mismatches:
        rams = [AxiRam(AxiBus.from_prefix(dut, dma_port_names(port)["m_axi"] + "_"),
                       dut.clk, dut.rst, size=1 << max(12, _record_bytes(graph).bit_length()))
                for port in range(config.hbm_ports)]
        dma_failures, dma_counters = await _dma_records(bench, regs, rams, graph, results,
                                                        params["threshold"])
        failures += dma_failures
        totals.update(dma_counters)
    for failure in failures:
        dut._log.error("%s", failure)
    save_arrays(params["outputs"], {"layers": results})
    first = mismatches[0] if mismatches else None
    report({"bit_exact": not mismatches and not failures, "mismatches": len(mismatches),
            "first_mismatch": None if first is None else
            {"task": first[0], "channel": first[1], "step": first[2][0],
             "beat": first[2][1], "vector": first[2][2]},
            "failures": failures, "tasks": len(graph.tasks), "windows": len(parts),
            **totals})

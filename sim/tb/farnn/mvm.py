"""cocotb bench: the FARNN MVM unit (:class:`~nnrtl.hw.farnn.MVMUnit`, in the AXI4-Stream
test top :class:`~nnrtl.sim.tb.farnn.tops.MVMUnitTop`) under Verilator, on the generic
:class:`~nnrtl.sim.tb.engine_bench.EngineBench`.

Parameters (``tb_params()``): ``unit`` (the :class:`~nnrtl.hw.farnn.MVMUnit` keyword
arguments: ``chains``, ``chain_length``, ``weight_depth``, ``adder_stages``,
``multiplier_stages``, ``split``), ``n_out`` and ``n_in`` (the matrix), ``batch``
(vectors per run), ``steps`` (runs after the one weight load), optionally ``split_last``
(default :func:`~nnrtl.sim.golden.farnn.mvm.plan`'s; ``false`` runs a split unit
unsplit), ``specials`` (the share of special fp32 values among the operands, default
0.05), ``source_pauses`` / ``sink_pauses`` (names of :data:`nnrtl.sim.patterns.PATTERNS`;
the sink's is the backpressure on the results), ``seed``.

Driver: the configuration ports, the weight stream of
:func:`~nnrtl.sim.golden.farnn.mvm.pack_weights` on ``s_axis_w`` (one frame), then per
run the batch's vectors on ``s_axis_x`` (a frame per vector); every stream's
``chain_length`` result beats are one ``m_axis`` frame, checked word by word against
:func:`~nnrtl.sim.golden.farnn.mvm.result_beats`. Every wait has the budget of
:func:`~nnrtl.sim.patterns.cycle_budget` from the model of the work
(:func:`~nnrtl.sim.golden.farnn.mvm.load_cycles`, :func:`~nnrtl.sim.golden.farnn.mvm.cycles`).

Protocol failures (:class:`~nnrtl.sim.tb.registers.BenchFailure`): a budget overrun, a
result frame of the wrong length, ``load_error`` or ``vector_error`` set, the
``mac_cycles`` counter differing from the model's issue cycles, with gapless streams the
``load_cycles`` counter differing from the model's, output after the last run.

Reported: the checker's ``bit_exact``, ``mismatches``, ``first_mismatch``, ``fault``,
``budget_use``; ``rounds``, ``split_last``, ``words_per_pe``; ``load_cycles`` and
``model_load_cycles``; ``runs``: per run ``cycles`` (from the first element's handshake
on ``s_axis_x`` to the last result beat's on ``m_axis``, both counted), ``model_cycles``,
``mac_cycles`` (the counter's increase), ``model_mac_cycles``, ``stall_cycles``.
"""

import logging

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiStreamFrame

from nnrtl.sim.golden.farnn import mvm as golden
from nnrtl.sim.tb.common import report, tb_params
from nnrtl.sim.tb.engine_bench import EngineBench
from nnrtl.sim.tb.farnn.tops import STATUS_PORTS
from nnrtl.sim.tb.registers import BenchFailure

PARAMS = tb_params()
UNIT = PARAMS.get("unit", {})


class MVMBench(EngineBench):
    """:class:`EngineBench` on the ports of :class:`~nnrtl.sim.tb.farnn.tops.MVMUnitTop`:
    no register file, the status ports read directly."""

    def __init__(self, dut, *, params):
        super().__init__(dut, None, sources=["s_axis_w", "s_axis_x"], sinks=["m_axis"],
                         params=params)
        self.handshakes = {"s_axis_x": [], "m_axis": []}

    async def snapshot(self):
        return "ports: " + " ".join(f"{name}={int(getattr(self.dut, name).value)}"
                                    for name in STATUS_PORTS)

    def port(self, name):
        return int(getattr(self.dut, name).value)

    async def wait_port(self, name, value, what):
        """Wait until the port ``name`` reads ``value``, within the budget."""
        async def poll():
            while self.port(name) != value:
                await RisingEdge(self.dut.clk)
        await self._within_budget(poll(), f"{name} == {value} ({what})")

    async def monitor(self):
        """Record the cycle of every handshake on ``s_axis_x`` and ``m_axis``."""
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            if dut.s_axis_x__tvalid.value and dut.s_axis_x__tready.value:
                self.handshakes["s_axis_x"].append(self.cycle)
            if dut.m_axis__tvalid.value and dut.m_axis__tready.value:
                self.handshakes["m_axis"].append(self.cycle)


def beats_bytes(beats):
    """Little-endian bytes of rows of fp32 lanes (lane 0 in the lowest bits)."""
    return np.ascontiguousarray(np.asarray(beats, dtype="<u4")).tobytes()


@cocotb.test()
async def mvm_matches_golden_model(dut):
    chains, length = UNIT["chains"], UNIT["chain_length"]
    split = UNIT.get("split", 1)
    adder, multiplier = UNIT.get("adder_stages", 4), UNIT.get("multiplier_stages", 3)
    n_out, n_in, batch = PARAMS["n_out"], PARAMS["n_in"], PARAMS["batch"]
    rng = np.random.default_rng(PARAMS["seed"])
    specials = PARAMS.get("specials", 0.05)
    layout = golden.plan(n_out, n_in, chains=chains, chain_length=length, split=split)
    rounds = layout["rounds"]
    split_last = PARAMS.get("split_last", layout["split_last"])
    shape = dict(chains=chains, chain_length=length, split=split)
    matrix = golden.random_operands(rng, (n_out, n_in), specials=specials)
    gapless = (PARAMS.get("source_pauses", "none") == "none"
               and PARAMS.get("sink_pauses", "none") == "none")

    async with MVMBench(dut, params=PARAMS) as bench:
        cocotb.start_soon(bench.monitor())
        # cocotbext-axi logs every frame it sends: megabytes for a full-size weight load
        bench.source("s_axis_w").log.setLevel(logging.WARNING)
        dut.n_in.value, dut.rounds.value, dut.batch.value = n_in, rounds, batch
        dut.split_last.value = int(split_last)
        words = golden.pack_weights(matrix, rounds=rounds, split_last=split_last, **shape)
        model_load = golden.load_cycles(n_in, rounds=rounds, chain_length=length,
                                        split=split, split_last=split_last)
        bench.begin("the weight load", model_load)
        await bench.wait_port("busy", 0, "the accumulators to fill after reset")
        await bench.source("s_axis_w").send(AxiStreamFrame(beats_bytes(words)))
        await bench.drain("s_axis_w")
        await bench.wait_port("busy", 0, "the end of the weight load")
        if bench.port("load_error"):
            raise BenchFailure(f"load_error set by a weight stream of {len(words)} beats "
                               f"(cycle {bench.cycle})")
        load = bench.port("load_cycles")
        if PARAMS.get("source_pauses", "none") == "none":
            bench.expect_count("the load_cycles counter", load, model_load,
                               source="golden.load_cycles")

        model = golden.cycles(n_in, rounds=rounds, batch=batch, split_last=split_last,
                              adder_stages=adder, multiplier_stages=multiplier, **shape)
        runs = []
        for step in range(PARAMS.get("steps", 1)):
            x = golden.random_operands(rng, (batch, n_in), specials=specials)
            expected = golden.result_beats(matrix, x, rounds=rounds, split_last=split_last,
                                           adder_stages=adder, **shape)
            streams = rounds * batch
            mac_before, stall_before = bench.port("mac_cycles"), bench.port("stall_cycles")
            seen_x, seen_o = (len(bench.handshakes[k]) for k in ("s_axis_x", "m_axis"))
            bench.begin(f"run {step}", model["cycles"], output_beats=len(expected))
            for vector in x:
                await bench.source("s_axis_x").send(AxiStreamFrame(beats_bytes(vector)))
            for j in range(streams):
                frame = await bench.recv("m_axis", f"the sums of stream {j} of run {step}")
                got = np.frombuffer(bytes(frame.tdata), dtype="<u4")
                bench.expect_count(f"the beats of m_axis frame {j} of run {step}",
                                   len(got) // chains, length, source="chain_length")
                want = [word for lanes, _last in expected[j * length:(j + 1) * length]
                        for word in lanes]
                bench.check("m_axis", want, got)
            await bench.drain("s_axis_x")
            await bench.wait_port("busy", 0, f"the end of run {step}")
            for flag in ("load_error", "vector_error"):
                if bench.port(flag):
                    raise BenchFailure(f"{flag} set after run {step} (cycle {bench.cycle})")
            macs = bench.port("mac_cycles") - mac_before
            bench.expect_count(f"the mac_cycles counter of run {step}", macs,
                               model["mac_cycles"], source="golden.cycles mac_cycles")
            first = bench.handshakes["s_axis_x"][seen_x]
            last = bench.handshakes["m_axis"][seen_o + len(expected) - 1]
            runs.append({"cycles": last - first + 1, "model_cycles": model["cycles"],
                         "mac_cycles": macs, "model_mac_cycles": model["mac_cycles"],
                         "stall_cycles": bench.port("stall_cycles") - stall_before})
        await bench.finish()
        report({
            **bench.result(),
            "rounds": rounds, "split_last": bool(split_last),
            "words_per_pe": golden.words_per_pe(n_in, rounds=rounds, split=split,
                                                split_last=split_last),
            "load_cycles": load, "model_load_cycles": model_load,
            "gapless": gapless, "runs": runs,
        })

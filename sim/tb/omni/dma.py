"""cocotb bench: the compressing DMA (:class:`nnrtl.hw.omni.dma.OmniDMA`) under Verilator
against cocotbext-axi's ``AxiRam`` and the golden model (:mod:`nnrtl.sim.golden.omni.dma`).

Parameters (``tb_params()``): ``config`` (the :class:`~nnrtl.hw.omni.dma_config.DmaConfig`
fields), ``patterns`` (names of :data:`nnrtl.sim.patterns.PATTERNS`; each applies to the
value source, the output sink (:class:`Bench`: the shared stream drivers) and every
channel of the memory), ``transfers`` (sparse records per pattern), ``memory_bytes``,
``seed``.

Per pattern: ``transfers`` sparse records of random shape (odd lengths, one-value blocks,
the longest vector), value mix and θ (0 among them), and one dense record. For each:
write it; the memory image must equal the golden (= software) record byte for byte and
nothing else may change; the counters must equal the golden counts. Read it back
(``expand`` or ``dense``): beats equal the golden beats. Then a ``gather`` of a dense
operand by the record's surviving indices: beats equal the golden beats and the AR
requests touch exactly the bus beats of the rows named (and only those, in the operand's
region). Every wait is bounded by :func:`nnrtl.sim.patterns.cycle_budget`; a mismatch is
reported as a :class:`~nnrtl.sim.tb.registers.BenchFailure` naming the transfer and what
differs. Reported: ``bit_exact``, ``transfers``, ``values``, ``beats``, ``cycles``,
``budget_use`` (largest fraction of a budget used), ``counters`` (the last values).
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge, SimTimeoutError, with_timeout
from cocotbext.axi import AxiBus, AxiRam

from nnrtl.hw.omni.decode import MODE, output_layout
from nnrtl.hw.omni.dma import read_command_layout, write_command_layout
from nnrtl.hw.omni.dma_config import DmaConfig, threshold_bits
from nnrtl.sim.golden.omni import dma as golden
from nnrtl.sim.patterns import cycle_budget, pause_pattern
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS, report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.registers import BenchFailure
from nnrtl.sim.tb.streams import Streams, cycle_now

PARAMS = tb_params()
CONFIG = DmaConfig(**PARAMS["config"])
COUNTERS = ("bytes_written", "bytes_read", "values_pruned", "values_kept")


def pack(layout, **fields):
    """A payload word of ``layout`` from its fields."""
    word = 0
    for name, field in layout:
        word |= (int(fields[name]) & ((1 << field.width) - 1)) << field.offset
    return word


def unpack(layout, word):
    return {name: (word >> field.offset) & ((1 << field.width) - 1) for name, field in layout}


def random_bits(rng, blocks, length, theta):
    kind = rng.choice(["mixed", "mixed", "none", "all"])
    nrng = np.random.default_rng(rng.getrandbits(32))
    scale = theta if theta > 0 else 0.1
    if kind == "none":
        x = (1 + nrng.random((blocks, length))) * scale * nrng.choice([-1, 1], (blocks, length))
    elif kind == "all" and theta > 0:
        x = nrng.uniform(-0.999, 0.999, (blocks, length)) * theta
    else:
        x = nrng.normal(size=(blocks, length)) * 2 * scale
    bits = x.astype(np.float32).view(np.uint32).copy()
    if kind == "mixed":
        t = threshold_bits(theta)
        specials = np.array([0, 0x80000000, 0x7FC00001, 0xFF800000, t, max(t, 1) - 1,
                             t | 0x80000000], dtype=np.uint32)
        where = nrng.random(bits.shape) < 0.15
        bits[where] = nrng.choice(specials, int(where.sum()))
    return bits


class Bench:
    """The DMA's streams on the shared drivers (:mod:`nnrtl.sim.tb.streams`): a source on
    each command port and on ``wr_data``, a sink on ``rd_data``; a monitor logs the bus
    beats every AR request asks for.

    Parameters
    ----------
    dut : cocotb handle
        The DMA's top level.
    ram : cocotbext.axi.AxiRam
        The memory on ``m_axi``.
    """

    def __init__(self, dut, ram):
        self.dut, self.ram = dut, ram
        self.streams = Streams(dut)
        self.commands = {name: self.streams.source(name) for name in ("wr_cmd", "rd_cmd")}
        self.values = self.streams.source("wr_data", record=True)
        self.beats = self.streams.sink("rd_data")
        self.start = cycle_now()
        self.ar_log = []
        self.budget_use = 0.0
        cocotb.start_soon(self._log_ar())

    @property
    def cycle(self):
        """Cycles since the bench was made."""
        return cycle_now() - self.start

    def patterns(self, name, rng):
        """Pause the values, the output and every channel of the memory by pattern
        ``name`` (the commands are not paused)."""
        self.streams.pause(name, rng, ports=("wr_data", "rd_data"))
        for channel in (self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                        self.ram.write_if.b_channel, self.ram.read_if.ar_channel,
                        self.ram.read_if.r_channel):
            channel.set_pause_generator(pause_pattern(name, random.Random(rng.random())))

    async def _log_ar(self):
        dut, edge = self.dut, RisingEdge(self.dut.clk)
        while True:
            await edge
            if dut.m_axi__arvalid.value and dut.m_axi__arready.value:
                addr, beats = int(dut.m_axi__araddr.value), int(dut.m_axi__arlen.value) + 1
                self.ar_log += [addr + k * CONFIG.bus_bytes for k in range(beats)]

    async def _finished(self, command, busy):
        """The cycle of the first clock edge that sees ``busy`` low, from the second after
        the command and the values are taken."""
        await self.commands[command].wait()
        if not self.values.idle():
            await self.values.wait()
        edge = RisingEdge(self.dut.clk)
        await edge
        while True:
            await edge
            if not busy.value:
                return cycle_now()

    async def run(self, what, budget, *, command, layout, fields, source=(), sink=None):
        """Issue a command, feed ``source`` words, collect the output beats taken until the
        side is idle again into ``sink`` (none may come without one); at most ``budget``
        cycles."""
        dut = self.dut
        busy = dut.wr_busy if command == "wr_cmd" else dut.rd_busy
        words, start = [int(word) for word in source], cycle_now()
        taken, received = len(self.values.cycles), len(self.beats.words)
        self.commands[command].send_words([pack(layout, **fields)])
        self.values.send_words(words)
        try:
            end = await with_timeout(self._finished(command, busy), budget * CLOCK_PERIOD_NS,
                                     "ns")
        except SimTimeoutError:
            raise BenchFailure(f"{what}: not finished within its budget of {budget} cycles "
                               f"({len(words) - len(self.values.cycles) + taken} values not "
                               "taken)") from None
        await ClockCycles(dut.clk, 4)
        self.beats.received()
        cycles = self.beats.cycles[received:]
        if any(cycle > end for cycle in cycles) or dut.rd_data__valid.value:
            raise BenchFailure(f"{what}: a beat after the end of the transfer")
        if sink is None and cycles:
            raise BenchFailure(f"{what}: {len(cycles)} output beats during a write")
        if sink is not None:
            out_layout = output_layout(CONFIG)
            sink.extend(golden.Beat(**unpack(out_layout, word))
                        for word in self.beats.words[received:])
        self.streams.check()
        self.budget_use = max(self.budget_use, (cycle_now() - start) / budget)

    def counters(self):
        return {name: int(getattr(self.dut, name).value) for name in COUNTERS}


def _budget(pattern, values, nbytes, beats):
    """Cycles allowed: a gapless transfer moves a value or a beat a cycle, plus a bus beat
    per ``bus_bytes`` and an address phase per burst (the bound, not a model)."""
    bus = nbytes // CONFIG.bus_bytes + 1
    model = values + beats + 2 * bus + 4 * (bus // CONFIG.burst_len + 2)
    return cycle_budget(model, output_beats=beats, patterns=(pattern,))


def check(what, name, got, want):
    if got != want:
        raise BenchFailure(f"{what}: {name} differs: got {got!r}, golden {want!r}")


def check_beats(what, got, want):
    if len(got) != len(want):
        raise BenchFailure(f"{what}: {len(got)} beats, golden {len(want)}")
    for k, (g, w) in enumerate(zip(got, want)):
        if g != w:
            raise BenchFailure(f"{what}: beat {k} is {g}, golden {w}")


@cocotb.test()
async def dma_matches_golden(dut):
    rng = random.Random(PARAMS["seed"])
    size = PARAMS["memory_bytes"]
    await start_clock_and_reset(dut)
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst, size=size)
    ram.write(0, bytes(rng.getrandbits(8) for _ in range(size)))
    bench = Bench(dut, ram)
    dut.clear.value = 0
    wl, rl = write_command_layout(CONFIG), read_command_layout(CONFIG)
    transfers = values = beats = 0
    for pattern in PARAMS["patterns"]:
        bench.patterns(pattern, rng)
        for number in range(PARAMS["transfers"] + 1):
            sparse = number < PARAMS["transfers"]
            what = f"pattern {pattern} transfer {number}"
            blocks = rng.randint(1, CONFIG.max_blocks)
            length = rng.choice([1, CONFIG.max_length, rng.randint(1, CONFIG.max_length)])
            theta = rng.choice([0.0, 0.1, 0.1, 0.5])
            bits = random_bits(rng, blocks, length, theta)
            dut.threshold.value = threshold_bits(theta)
            base = rng.randrange(0, size // 4 - 4 * bits.size - blocks * length)
            model = golden.write_record(bits, sparse=sparse, threshold=theta)
            before, start = ram.read(0, size), bench.counters()
            await bench.run(f"{what} write", _budget(pattern, bits.size, len(model.image), 0),
                            command="wr_cmd", layout=wl, source=[int(v) for v in bits.flat],
                            fields=dict(sparse=sparse, base=base, blocks=blocks, length=length))
            after, end = ram.read(0, size), bench.counters()
            stop = base + len(model.image)
            check(what, "the memory image", after[base:stop], model.image)
            if after[:base] != before[:base] or after[stop:] != before[stop:]:
                raise BenchFailure(f"{what}: bytes outside the record changed")
            delta = {k: end[k] - start[k] for k in COUNTERS}
            check(what, "the write counters", delta, dict(
                bytes_written=model.bytes_written, bytes_read=0, values_pruned=model.pruned,
                values_kept=model.kept))

            mode = "expand" if sparse else "dense"
            want = golden.read_record(after, mode=mode, base=base, blocks=blocks, length=length)
            got = []
            await bench.run(f"{what} {mode} read", _budget(pattern, 0, len(model.image),
                                                          len(want.beats)),
                            command="rd_cmd", layout=rl, sink=got, fields=dict(
                                mode=MODE[mode], base=base, blocks=blocks, length=length,
                                dense_base=0, row_stride=0, block_stride=0, row_words=0))
            check_beats(f"{what} {mode} read", got, want.beats)
            check(what, "bytes_read", bench.counters()["bytes_read"] - end["bytes_read"],
                  want.bytes_read)
            transfers += 1
            values += bits.size
            beats += len(got)
            if not sparse:
                continue

            row_words = rng.randint(1, CONFIG.max_row_words)
            row_stride = 4 * (row_words + rng.randint(0, 2))
            block_stride = rng.choice([0, row_stride * length])
            dense_base = size // 2 + 4 * rng.randrange(64)
            fields = dict(base=base, blocks=blocks, length=length, dense_base=dense_base,
                          row_stride=row_stride, block_stride=block_stride, row_words=row_words)
            want = golden.read_record(after, mode="gather", **fields)
            got, bench.ar_log = [], []
            dense_bytes = 4 * row_words * len(want.rows)
            await bench.run(f"{what} gather", _budget(pattern, 0, len(model.image) + 2
                                                      * dense_bytes, len(want.beats)),
                            command="rd_cmd", layout=rl, sink=got,
                            fields=dict(mode=MODE["gather"], **fields))
            check_beats(f"{what} gather", got, want.beats)
            w = CONFIG.bus_bytes
            rows = golden.gather_rows(want.rows, dense_base=dense_base, row_stride=row_stride,
                                      block_stride=block_stride, row_words=row_words)
            named = {a for s, e in rows for a in range(s // w * w, e, w)}
            touched = {a for a in bench.ar_log if a >= dense_base // w * w}
            check(what, "the dense operand's beats read (AR requests)", sorted(touched),
                  sorted(named))
            beats += len(got)
    report({"bit_exact": True, "transfers": transfers, "values": values, "beats": beats,
            "cycles": bench.cycle, "budget_use": bench.budget_use,
            "counters": bench.counters()})

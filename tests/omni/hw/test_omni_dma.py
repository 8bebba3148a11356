# amaranth: UnusedElaboratable=no
"""The compressing DMA (:mod:`nnrtl.hw.omni.dma`) in the Amaranth simulator against a small
AXI4 memory model (:class:`Memory`, below) and the golden model
(:mod:`nnrtl.sim.golden.omni.dma`): the memory image a write leaves equals the golden
(= software) layout byte for byte and nothing else changes, reads deliver the golden
beats, the counters equal the golden counts, and a gather reads exactly the bus beats
that hold the rows named by surviving indices."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.omni.decode import MODE
from nnrtl.hw.omni.dma import OmniDMA
from nnrtl.hw.omni.dma_config import DmaConfig, threshold_bits
from nnrtl.sim.golden.omni import dma as golden

#: Small enough to simulate fast; bursts of 4 beats so regions span several bursts.
CONFIG = DmaConfig(data_width=64, addr_width=16, max_length=40, max_blocks=8,
                   max_row_words=6, burst_len=4, wt_data_depth=8, wt_index_depth=4,
                   rd_data_depth=8, rd_index_depth=4, rd_dense_depth=8, pending_depth=4,
                   counter_width=32)
MEMORY_BYTES = 1 << 16


class Memory:
    """AXI4 slave with random ready/valid pauses; checks the master's side of the
    protocol (stable address while waiting, no burst across 4 KiB, INCR, full-size
    beats) and logs the beat addresses read."""

    def __init__(self, config, rng, pause):
        self.c, self.rng, self.pause = config, rng, pause
        self.data = bytearray(rng.getrandbits(8) for _ in range(MEMORY_BYTES))
        self.aw, self.b, self.ar, self.r = [], [], [], None
        self.read_log = []
        self.w_beat = 0
        self.waiting = {}

    def _hold(self):
        return self.rng.random() < self.pause

    def _check_request(self, ctx, axi, ch):
        addr, length = ctx.get(getattr(axi, f"{ch}addr")), ctx.get(getattr(axi, f"{ch}len"))
        assert ctx.get(getattr(axi, f"{ch}burst")) == 1
        assert ctx.get(getattr(axi, f"{ch}size")) == self.c.size_code
        nbytes = (length + 1) * self.c.bus_bytes
        assert addr % self.c.bus_bytes == 0 and addr // 4096 == (addr + nbytes - 1) // 4096
        assert addr + nbytes <= MEMORY_BYTES
        if ch in self.waiting:
            assert self.waiting[ch] == (addr, length), f"{ch}addr changed while waiting"
        return addr, length

    def drive(self, ctx, axi):
        """Set this cycle's slave outputs."""
        self.ready = {ch: not self._hold() for ch in ("aw", "w", "ar")}
        ctx.set(axi.awready, self.ready["aw"])
        ctx.set(axi.wready, self.ready["w"] and bool(self.aw))
        ctx.set(axi.arready, self.ready["ar"])
        self.b_valid = bool(self.b) and not self._hold()
        ctx.set(axi.bvalid, self.b_valid)
        ctx.set(axi.bresp, 0)
        self.r_valid = self.r is not None and not self._hold()
        if self.r_valid:
            addr, left = self.r
            ctx.set(axi.rdata, int.from_bytes(self.data[addr:addr + self.c.bus_bytes],
                                              "little"))
            ctx.set(axi.rlast, left == 1)
        ctx.set(axi.rvalid, self.r_valid)
        ctx.set(axi.rresp, 0)

    def sample(self, ctx, axi):
        """Take this cycle's handshakes (after ``drive``, before the clock edge)."""
        w = self.c.bus_bytes
        for ch, queue in (("aw", self.aw), ("ar", self.ar)):
            if ctx.get(getattr(axi, f"{ch}valid")):
                request = self._check_request(ctx, axi, ch)
                if self.ready[ch]:
                    queue.append(list(request))
                    self.waiting.pop(ch, None)
                else:
                    self.waiting[ch] = request
        if ctx.get(axi.wvalid) and self.ready["w"] and self.aw:
            addr, length = self.aw[0]
            data, strb = ctx.get(axi.wdata), ctx.get(axi.wstrb)
            at = addr + self.w_beat * w
            for k in range(w):
                if strb >> k & 1:
                    self.data[at + k] = data >> (8 * k) & 0xFF
            assert ctx.get(axi.wlast) == (self.w_beat == length)
            self.w_beat += 1
            if self.w_beat == length + 1:
                self.aw.pop(0)
                self.b.append(1)
                self.w_beat = 0
        if self.b_valid and ctx.get(axi.bready):
            self.b.pop(0)
        if self.r_valid and ctx.get(axi.rready):
            addr, left = self.r
            self.read_log.append(addr)
            self.r = (addr + w, left - 1) if left > 1 else None
        if self.r is None and self.ar:
            addr, length = self.ar.pop(0)
            self.r = (addr, length + 1)


class Bench:
    """Drives the DMA's command, value and output streams and the memory each cycle."""

    def __init__(self, dut, rng, pause):
        self.dut, self.rng, self.pause = dut, rng, pause
        self.memory = Memory(dut.config, rng, pause)
        self.cycles = 0

    async def cycle(self, ctx, source=None, sink=None):
        dut = self.dut
        self.memory.drive(ctx, dut.m_axi)
        offer = source is not None and bool(source) and not self.rng.random() < self.pause
        ctx.set(dut.wr_data.valid, offer)
        if offer:
            ctx.set(dut.wr_data.payload, source[0])
        take = not self.rng.random() < self.pause
        ctx.set(dut.rd_data.ready, take)
        self.memory.sample(ctx, dut.m_axi)
        if offer and ctx.get(dut.wr_data.ready):
            source.pop(0)
        if take and ctx.get(dut.rd_data.valid) and sink is not None:
            p = dut.rd_data.payload
            sink.append(golden.Beat(*(ctx.get(getattr(p, f)) for f in
                                      ("value", "dense", "index", "row_last", "last"))))
        await ctx.tick()
        self.cycles += 1
        assert self.cycles < 200_000, "the DMA stopped making progress"

    async def command(self, ctx, stream, **fields):
        for name, value in fields.items():
            ctx.set(getattr(stream.payload, name), value)
        ctx.set(stream.valid, 1)
        while True:
            ready = ctx.get(stream.ready)
            await self.cycle(ctx)
            if ready:
                break
        ctx.set(stream.valid, 0)

    async def write(self, ctx, bits, *, sparse, base):
        blocks, length = bits.shape
        await self.command(ctx, self.dut.wr_cmd, sparse=sparse, base=base, blocks=blocks,
                           length=length)
        source = [int(v) for v in bits.reshape(-1)]
        while source or ctx.get(self.dut.wr_busy):
            await self.cycle(ctx, source=source)

    async def read(self, ctx, mode, **fields):
        full = dict(dense_base=0, row_stride=0, block_stride=0, row_words=0)
        full.update(fields)
        await self.command(ctx, self.dut.rd_cmd, mode=MODE[mode], **full)
        beats = []
        while ctx.get(self.dut.rd_busy):
            await self.cycle(ctx, sink=beats)
        for _ in range(8):
            await self.cycle(ctx, sink=beats)   # nothing after the end
        return beats

    async def counters(self, ctx):
        return {name: ctx.get(getattr(self.dut, name))
                for name in ("bytes_written", "bytes_read", "values_pruned", "values_kept")}


def random_values(rng, blocks, length, kind):
    """fp32 bit patterns: ``mixed`` (normals at several scales, zeros of both signs, NaN,
    infinities, values at the threshold), ``none`` (all |v| >= 1), ``all`` (all |v| < 0.1)."""
    nrng = np.random.default_rng(rng.getrandbits(32))
    if kind == "none":
        x = (1 + nrng.random((blocks, length))) * nrng.choice([-1, 1], (blocks, length))
    elif kind == "all":
        x = nrng.uniform(-0.0999, 0.0999, (blocks, length))
    else:
        x = nrng.normal(size=(blocks, length)) * 0.2
    bits = x.astype(np.float32).view(np.uint32).copy()
    if kind == "mixed":
        specials = np.array([0, 0x80000000, 0x7FC00001, 0xFF800000, 0x7F800000,
                             threshold_bits(0.1), threshold_bits(0.1) - 1,
                             threshold_bits(0.1) | 0x80000000], dtype=np.uint32)
        where = nrng.random((blocks, length)) < 0.15
        bits[where] = nrng.choice(specials, int(where.sum()))
    return bits


def run(dut, bench_fn, *, seed, pause):
    rng = random.Random(seed)
    bench = Bench(dut, rng, pause)

    async def testbench(ctx):
        await bench_fn(ctx, bench, rng)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return bench


def beats_covering(ranges, bus_bytes):
    """Addresses of the bus beats that hold any byte of the ``[start, stop)`` ranges."""
    return {a for start, stop in ranges
            for a in range(start // bus_bytes * bus_bytes, stop, bus_bytes)}


CASES = [  # (blocks, length, kind, threshold)
    (3, 13, "mixed", 0.1),
    (1, 40, "mixed", 0.0),
    (2, 8, "all", 0.1),
    (4, 5, "none", 0.1),
    (5, 1, "mixed", 0.1),
    (8, 17, "mixed", 0.25),
]


@pytest.mark.parametrize("case, pause", [(case, 0.4) for case in range(len(CASES))]
                         + [(0, 0.0), (5, 0.0)])
def test_round_trip(case, pause):
    blocks, length, kind, theta = CASES[case]
    dut = OmniDMA(CONFIG)
    w = CONFIG.bus_bytes

    async def scenario(ctx, bench, rng):
        ctx.set(dut.threshold, threshold_bits(theta))
        bits = random_values(rng, blocks, length, kind)
        base = 0x1000 + rng.randrange(64)          # any byte address
        before = bytes(bench.memory.data)
        await bench.write(ctx, bits, sparse=1, base=base)
        model = golden.write_record(bits, sparse=True, threshold=theta)
        after = bytes(bench.memory.data)
        assert after[base:base + len(model.image)] == model.image
        assert after[:base] == before[:base]
        assert after[base + len(model.image):] == before[base + len(model.image):]
        counts = await bench.counters(ctx)
        assert counts == dict(bytes_written=model.bytes_written, bytes_read=0,
                              values_pruned=model.pruned, values_kept=model.kept)
        if kind == "all":
            assert model.kept == 0
        if kind == "none" or theta == 0:
            assert model.pruned == 0

        # expand: the dense vector back, pruned positions +0.0
        got = await bench.read(ctx, "expand", base=base, blocks=blocks, length=length)
        want = golden.read_record(bench.memory.data, mode="expand", base=base, blocks=blocks,
                                  length=length)
        assert got == want.beats
        pruned = np.array([b.value for b in got], dtype=np.uint32).reshape(blocks, length)
        keep = ~(np.abs(bits.view(np.float32)) < np.float32(theta))
        assert (pruned[keep] == bits[keep]).all() and (pruned[~keep] == 0).all()
        read0 = (await bench.counters(ctx))["bytes_read"]
        assert read0 == want.bytes_read

        # gather: the dense operand's rows named by surviving indices, nothing else
        row_words = 1 + rng.randrange(CONFIG.max_row_words)
        dense_base = 0x4000 + 4 * rng.randrange(16)
        row_stride = 4 * row_words + 4 * rng.randrange(3)
        block_stride = rng.choice([0, row_stride * length])
        fields = dict(base=base, blocks=blocks, length=length, dense_base=dense_base,
                      row_stride=row_stride, block_stride=block_stride, row_words=row_words)
        bench.memory.read_log.clear()
        got = await bench.read(ctx, "gather", **fields)
        want = golden.read_record(bench.memory.data, mode="gather", **fields)
        assert got == want.beats
        assert (await bench.counters(ctx))["bytes_read"] == read0 + want.bytes_read
        floor = dense_base // w * w          # the record lies below the dense operand
        touched = {a for a in bench.memory.read_log if a >= floor}
        record = {a for a in bench.memory.read_log if a < floor}
        assert record <= beats_covering([(base, base + len(model.image))], w)
        assert touched == beats_covering(golden.gather_rows(
            want.rows, dense_base=dense_base, row_stride=row_stride,
            block_stride=block_stride, row_words=row_words), w)
        assert len(want.rows) == model.kept

    run(dut, scenario, seed=case * 10 + int(pause * 10), pause=pause)


@pytest.mark.parametrize("pause", [0.0, 0.4])
def test_dense_pass_through(pause):
    dut = OmniDMA(CONFIG)

    async def scenario(ctx, bench, rng):
        ctx.set(dut.threshold, threshold_bits(0.1))
        for blocks, length in [(3, 7), (1, 1), (2, 40)]:
            bits = random_values(rng, blocks, length, "mixed")
            base = 0x2000 + rng.randrange(64)
            before = bytes(bench.memory.data)
            start = await bench.counters(ctx)
            await bench.write(ctx, bits, sparse=0, base=base)
            model = golden.write_record(bits, sparse=False)
            after = bytes(bench.memory.data)
            assert after[base:base + len(model.image)] == model.image
            assert after[:base] + after[base + len(model.image):] == \
                before[:base] + before[base + len(model.image):]
            got = await bench.read(ctx, "dense", base=base, blocks=blocks, length=length)
            want = golden.read_record(bench.memory.data, mode="dense", base=base,
                                      blocks=blocks, length=length)
            assert got == want.beats
            end = await bench.counters(ctx)
            assert end["bytes_written"] - start["bytes_written"] == 4 * bits.size
            assert end["bytes_read"] - start["bytes_read"] == want.bytes_read == 4 * bits.size
            assert end["values_pruned"] == start["values_pruned"]    # dense: no pruning

    run(dut, scenario, seed=7 + int(pause * 10), pause=pause)


def test_config_rules():
    with pytest.raises(TypeError, match="burst_len must be a power of two, not 3"):
        DmaConfig(burst_len=3)
    with pytest.raises(TypeError, match="rd_index_depth must be at least burst_len"):
        DmaConfig(burst_len=16, rd_index_depth=8)
    with pytest.raises(TypeError, match="data_width must be 32, 64, 128, 256 or 512"):
        DmaConfig(data_width=48)
    with pytest.raises(TypeError, match="^prune_threshold must be a finite number >= 0, "
                                        "not -0.5$"):
        threshold_bits(-0.5)
    with pytest.raises(TypeError, match="length must be an integer from 1 to max_length"):
        CONFIG.check_transfer(2, 41)
    assert CONFIG.index_width == 6 and DmaConfig(max_length=4096).index_width == 12
    assert threshold_bits(0.1) == 0x3DCCCCCD


#: Other buses and bursts: a 32-bit bus (a value is a whole beat), single-beat bursts,
#: a 128-bit bus with long bursts and minimal queues.
OTHER_CONFIGS = [
    DmaConfig(data_width=32, addr_width=16, max_length=40, max_blocks=8, max_row_words=6,
              burst_len=1, wt_data_depth=2, wt_index_depth=1, rd_data_depth=2,
              rd_index_depth=1, rd_dense_depth=1, pending_depth=1, counter_width=32),
    DmaConfig(data_width=128, addr_width=16, max_length=40, max_blocks=8, max_row_words=6,
              burst_len=8, wt_data_depth=8, wt_index_depth=8, rd_data_depth=8,
              rd_index_depth=8, rd_dense_depth=8, pending_depth=2, counter_width=32),
]


def sweep(config, seed, count, pause):
    """``count`` random records on ``config``: write, expand, gather, dense, each against
    the golden model."""
    dut = OmniDMA(config)

    async def scenario(ctx, bench, rng):
        for _ in range(count):
            blocks = rng.randint(1, config.max_blocks)
            length = rng.randint(1, config.max_length)
            theta = rng.choice([0.0, 0.1, 0.3])
            ctx.set(dut.threshold, threshold_bits(theta))
            bits = random_values(rng, blocks, length, rng.choice(["mixed", "all", "none"]))
            base = 0x1000 + rng.randrange(64)
            model = golden.write_record(bits, sparse=True, threshold=theta)
            await bench.write(ctx, bits, sparse=1, base=base)
            assert bytes(bench.memory.data[base:base + len(model.image)]) == model.image
            got = await bench.read(ctx, "expand", base=base, blocks=blocks, length=length)
            assert got == golden.read_record(bench.memory.data, mode="expand", base=base,
                                             blocks=blocks, length=length).beats
            fields = dict(base=base, blocks=blocks, length=length,
                          dense_base=0x4000 + 4 * rng.randrange(16),
                          row_words=rng.randint(0, config.max_row_words))
            fields.update(row_stride=4 * fields["row_words"] + 4 * rng.randrange(2),
                          block_stride=rng.choice([0, 4 * config.max_row_words * length]))
            got = await bench.read(ctx, "gather", **fields)
            assert got == golden.read_record(bench.memory.data, mode="gather", **fields).beats
            base = 0x8000 + rng.randrange(64)
            await bench.write(ctx, bits, sparse=0, base=base)
            image = golden.write_record(bits, sparse=False).image
            assert bytes(bench.memory.data[base:base + len(image)]) == image

    run(dut, scenario, seed=seed, pause=pause)


@pytest.mark.parametrize("index", range(len(OTHER_CONFIGS)))
def test_other_buses(index):
    sweep(OTHER_CONFIGS[index], seed=100 + index, count=2, pause=0.3)


@pytest.mark.slow
@pytest.mark.parametrize("config", [CONFIG] + OTHER_CONFIGS)
@pytest.mark.parametrize("pause", [0.0, 0.2, 0.6])
def test_random_sweep(config, pause):
    sweep(config, seed=int(pause * 10) + config.data_width, count=25, pause=pause)

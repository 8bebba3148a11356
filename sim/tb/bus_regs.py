"""cocotb bench: the AXI4-Lite RegisterFile under Verilator, driven by cocotbext-axi.

The design is :class:`nnrtl.sim.tb.bus_tops.RegisterTestTop`. Parameters (``tb_params()``):

``regmap``
    ``RegisterMap.as_dict()`` of the top; the bench rebuilds the map from it.
``cycles_init``
    Reset value of the free-running ``cycles`` counter.
``batches``, ``batch_size``
    Amount of random traffic per backpressure pattern.
``pauses``
    Backpressure patterns, names for ``nnrtl.sim.patterns.pause_pattern`` (``none``, ``cycle``,
    ``random``), applied to all five channels of the master.

Reported: ``regs_writes``, ``regs_reads``, ``regs_errors``, ``regs_wide_reads``.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from nnrtl.hw.bus import Access, RegisterMap
from nnrtl.sim.patterns import pause_pattern
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params
from nnrtl.sim.tb.registers import RegisterBus


PARAMS = tb_params()
REGMAP = RegisterMap.from_dict(PARAMS["regmap"])
WORD = REGMAP.data_width // 8


def byte_map():
    """Byte address -> register, for every mapped byte."""
    owner = {}
    for register in REGMAP:
        start = REGMAP.offset_of(register.name)
        for address in range(start, start + REGMAP.words_of(register.name) * WORD):
            owner[address] = register
    return owner


BYTES = byte_map()
UNMAPPED_WORDS = [address for address in range(0, 1 << REGMAP.addr_width, WORD)
                  if address not in BYTES]


class Model:
    """Expected register contents, updated byte by byte like the RTL."""

    def __init__(self):
        self.values = {register.name: register.reset for register in REGMAP}

    def write(self, address, data):
        """Apply a write of ``data`` bytes at ``address``; return the expected response."""
        registers = {BYTES.get(address + k) for k in range(len(data))}
        # the RTL answers per word; cocotbext-axi reports the worst response of the words
        words = {(address + k) // WORD for k in range(len(data))}
        if any(BYTES.get(word * WORD) is None or BYTES[word * WORD].access is Access.RO
               for word in words):
            expected = AxiResp.SLVERR
        else:
            expected = AxiResp.OKAY
        for k, byte in enumerate(data):
            register = BYTES.get(address + k)
            if register is None or register.access is not Access.RW:
                continue
            shift = 8 * (address + k - REGMAP.offset_of(register.name))
            value = self.values[register.name]
            self.values[register.name] = (value & ~(0xff << shift)) | (byte << shift)
        assert registers  # at least one byte was addressed
        return expected

    def expected(self, name):
        """Value a read of register ``name`` returns (RW / echo registers, PULSE)."""
        register = REGMAP[name]
        if register.access is Access.PULSE:
            return 0
        if register.access is Access.RO and name.endswith("_echo"):
            return self.values[name[:-len("_echo")]]
        return self.values[name]


def make_master(dut, pauses=None, seed=0):
    """One master per cocotb test (its coroutines drive the bus until the test ends)."""
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
    if pauses is not None:
        set_pauses(master, pauses, seed)
    return master


def set_pauses(master, pauses, seed):
    """Apply backpressure pattern ``pauses`` to all five channels of ``master``."""
    rng = random.Random(seed)
    for channel in (master.write_if.aw_channel, master.write_if.w_channel,
                    master.write_if.b_channel, master.read_if.ar_channel,
                    master.read_if.r_channel):
        channel.set_pause_generator(pause_pattern(pauses, random.Random(rng.random())))


async def reset(dut, cycles=2):
    """Reset the design again (the clock is already running)."""
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


@cocotb.test()
async def reset_values_and_error_responses(dut):
    """Every register reads its reset value; unmapped and read-only accesses get SLVERR."""
    await start_clock_and_reset(dut)
    master = make_master(dut)
    regs = RegisterBus(master, REGMAP)
    model = Model()
    errors = 0
    for register in REGMAP:
        if register.name in ("cycles", "starts"):
            continue
        assert await regs.read(register.name) == model.expected(register.name), \
            register.name
    assert await regs.read("starts") == 0
    for address in UNMAPPED_WORDS:
        result = await master.read(address, WORD)
        assert result.resp == AxiResp.SLVERR and result.data == bytes(WORD), address
        result = await master.write(address, b"\xff" * WORD)
        assert result.resp == AxiResp.SLVERR, address
        errors += 2
    for register in REGMAP:
        if register.access is Access.RO:
            before = model.expected(register.name) if register.name.endswith("_echo") else None
            result = await master.write(REGMAP.offset_of(register.name), b"\xa5" * WORD)
            assert result.resp == AxiResp.SLVERR, register.name
            errors += 1
            if before is not None:
                assert await regs.read(register.name) == before
    # nothing changed by the refused writes
    for register in REGMAP:
        if register.access is Access.RW:
            assert await regs.read(register.name) == register.reset
    report({"regs_errors": errors})


@cocotb.test()
async def random_traffic_with_backpressure(dut):
    """Concurrent random writes (any byte offset and length) and reads, checked against
    a model, under every backpressure pattern."""
    rng = random.Random(PARAMS["seed"])
    writes = reads = 0
    writable = [register for register in REGMAP if register.access is Access.RW]
    checked = [register.name for register in REGMAP if register.name not in ("cycles", "starts")]
    await start_clock_and_reset(dut)
    master = make_master(dut)
    regs = RegisterBus(master, REGMAP)
    for pauses in PARAMS["pauses"]:
        await reset(dut)
        set_pauses(master, pauses, seed=rng.random())
        model = Model()
        for _ in range(PARAMS["batches"]):
            write_tasks, read_tasks = [], []
            for _ in range(PARAMS["batch_size"]):
                register = rng.choice(writable)
                size = REGMAP.words_of(register.name) * WORD
                start = rng.randrange(size)
                length = rng.randint(1, size - start)
                address = REGMAP.offset_of(register.name) + start
                data = bytes(rng.getrandbits(8) for _ in range(length))
                expected = model.write(address, data)
                write_tasks.append((cocotb.start_soon(master.write(address, data)), expected))
                # reads that do not depend on the order of the writes run alongside them
                address = rng.choice(UNMAPPED_WORDS + [REGMAP.offset_of("control")])
                read_tasks.append((cocotb.start_soon(master.read(address, WORD)), address))
            for task, expected in write_tasks:
                assert (await task).resp == expected
                writes += 1
            for task, address in read_tasks:
                result = await task
                if address in UNMAPPED_WORDS:
                    assert result.resp == AxiResp.SLVERR and result.data == bytes(WORD)
                else:
                    assert result.resp == AxiResp.OKAY and result.data == bytes(WORD)
                reads += 1
            for name in checked:
                assert await regs.read(name) == model.expected(name), \
                    (pauses, name)
                reads += 1
        dut._log.info("pattern %s: %d writes, %d reads so far", pauses, writes, reads)
    report({"regs_writes": writes, "regs_reads": reads})


@cocotb.test()
async def pulses_and_atomic_counter_reads(dut):
    """control.start pulses are counted once each; 64-bit counter reads are never torn,
    also while the high word changes; control.clear clears both counters."""
    rng = random.Random(PARAMS["seed"] + 1)
    await start_clock_and_reset(dut)
    master = make_master(dut, "random", seed=rng.random())
    regs = RegisterBus(master, REGMAP)
    start_mask = REGMAP["control"].fields[0].mask
    clear_mask = REGMAP["control"].fields[1].mask
    count = rng.randint(3, 12)
    for _ in range(count):
        assert (await master.write(REGMAP.offset_of("control"),
                                   start_mask.to_bytes(WORD, "little"))).resp == AxiResp.OKAY
    assert await regs.read("starts") == count

    init = PARAMS["cycles_init"]
    previous = await regs.read("cycles")
    assert init <= previous < init + 10_000
    crossed_from = crossed_to = None
    wide_reads = 0
    while previous < (1 << 32) + 500:
        value = await regs.read("cycles")
        wide_reads += 1
        assert 0 < value - previous < 1000, (hex(previous), hex(value))
        if (previous >> 32) != (value >> 32):
            crossed_from, crossed_to = previous, value
        previous = value
        assert wide_reads < 100_000
    assert crossed_from is not None, "the counter never crossed 2**32 during the test"

    assert (await master.write(REGMAP.offset_of("control"),
                               clear_mask.to_bytes(WORD, "little"))).resp == AxiResp.OKAY
    assert await regs.read("starts") == 0
    assert init <= await regs.read("cycles") < init + 100
    report({"regs_wide_reads": wide_reads, "regs_starts": count})

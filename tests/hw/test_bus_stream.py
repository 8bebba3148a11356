# amaranth: UnusedElaboratable=no
"""AXI4-Stream edge adapters (Amaranth simulator)."""

import random

import pytest
from amaranth.back import verilog
from amaranth.hdl import ClockDomain, Module
from amaranth.lib import data, stream
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from nnrtl.hw.bus import (AXI4StreamSignature, AXI4StreamToStream, StreamToAXI4Stream,
                          stream_layout)
from nnrtl.sim.tb.bus_amaranth import (axis_receive, axis_send, stream_receive,
                                       stream_send)


CONFIGS = [(8, 0, False), (32, 0, False), (32, 3, False), (8, 0, True), (64, 5, True)]
PATTERNS = [(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.3, 0.6)]


def run(dut, *testbenches):
    top = Module()  # gives pass-through (combinational) adapters a clock to step with
    top.domains.sync = ClockDomain()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    for testbench in testbenches:
        sim.add_testbench(testbench)
    sim.run()


def random_beats(rng, data_width, user_width, count):
    beats = []
    for _ in range(count):
        beat = (rng.getrandbits(data_width), int(rng.random() < 0.2))
        if user_width:
            beat += (rng.getrandbits(user_width),)
        beats.append(beat)
    return beats


def as_payload(beat):
    payload = {"data": beat[0], "last": beat[1]}
    if len(beat) > 2:
        payload["user"] = beat[2]
    return payload


def from_payload(payload, user_width):
    beat = (payload.data, payload.last)
    return beat + (payload.user,) if user_width else beat


@pytest.mark.parametrize("gap, stall", PATTERNS)
@pytest.mark.parametrize("data_width, user_width, registered", CONFIGS)
def test_axi4_stream_to_stream(data_width, user_width, registered, gap, stall):
    rng = random.Random(hash((data_width, user_width, registered, gap, stall)) & 0xffff)
    dut = AXI4StreamToStream(data_width, user_width=user_width, registered=registered)
    beats = random_beats(rng, data_width, user_width, 200)

    async def source(ctx):
        await axis_send(ctx, dut.s_axis, beats, rng=random.Random(1), gap_probability=gap)

    async def sink(ctx):
        received = await stream_receive(ctx, dut.o, len(beats), rng=random.Random(2),
                                        stall_probability=stall)
        assert [from_payload(payload, user_width) for payload in received] == beats

    run(dut, source, sink)


@pytest.mark.parametrize("gap, stall", PATTERNS)
@pytest.mark.parametrize("data_width, user_width, registered", CONFIGS)
def test_stream_to_axi4_stream(data_width, user_width, registered, gap, stall):
    rng = random.Random(hash((data_width, user_width, registered, gap, stall)) & 0xffff)
    dut = StreamToAXI4Stream(data_width, user_width=user_width, registered=registered)
    beats = random_beats(rng, data_width, user_width, 200)

    async def source(ctx):
        await stream_send(ctx, dut.i, [as_payload(beat) for beat in beats],
                          rng=random.Random(3), gap_probability=gap)

    async def sink(ctx):
        received = await axis_receive(ctx, dut.m_axis, len(beats), rng=random.Random(4),
                                      stall_probability=stall)
        assert received == beats

    run(dut, source, sink)


@pytest.mark.parametrize("registered", [False, True])
def test_loop_back_full_throughput(registered):
    m = Module()
    m.submodules.rx = rx = AXI4StreamToStream(16, user_width=2, registered=registered)
    m.submodules.tx = tx = StreamToAXI4Stream(16, user_width=2, registered=registered)
    connect(m, rx.o, tx.i)
    beats = random_beats(random.Random(5), 16, 2, 100)
    cycles = []

    async def source(ctx):
        await axis_send(ctx, rx.s_axis, beats)

    async def sink(ctx):
        start = 0
        received = []
        ctx.set(tx.m_axis.tready, 1)
        for cycle in range(200):
            _clk, _rst, valid, *beat = await ctx.tick().sample(
                tx.m_axis.tvalid, tx.m_axis.tdata, tx.m_axis.tlast, tx.m_axis.tuser)
            if valid:
                if not received:
                    start = cycle
                received.append(tuple(beat))
            if len(received) == len(beats):
                cycles.append(cycle - start + 1)
                break
        assert received == beats
        assert start == rx.latency + tx.latency

    run(m, source, sink)
    assert cycles == [len(beats)]  # one beat per cycle


def test_registered_has_no_combinational_path():
    rng = random.Random(6)
    for dut, inputs, outputs in [
            (lambda d: (d, [d.s_axis.tdata, d.s_axis.tlast, d.s_axis.tvalid, d.o.ready],
                        [d.s_axis.tready, d.o.valid, d.o.payload.as_value()]))(
                AXI4StreamToStream(8, registered=True)),
            (lambda d: (d, [d.i.payload.as_value(), d.i.valid, d.m_axis.tready],
                        [d.i.ready, d.m_axis.tvalid, d.m_axis.tdata, d.m_axis.tlast]))(
                StreamToAXI4Stream(8, registered=True))]:

        async def bench(ctx):
            for _ in range(200):
                for signal in inputs:
                    ctx.set(signal, rng.getrandbits(len(signal)))
                before = [ctx.get(signal) for signal in outputs]
                for signal in inputs:
                    ctx.set(signal, rng.getrandbits(len(signal)))
                assert [ctx.get(signal) for signal in outputs] == before
                await ctx.tick()

        run(dut, bench)


def test_signatures_and_ports():
    layout = stream_layout(32, user_width=4)
    assert layout == data.StructLayout({"data": 32, "last": 1, "user": 4})
    assert stream_layout(8) == data.StructLayout({"data": 8, "last": 1})
    dut = AXI4StreamToStream(32, user_width=4)
    assert dut.signature.members["o"].signature == stream.Signature(layout)
    assert dut.signature.members["s_axis"].signature == AXI4StreamSignature(32, user_width=4).flip()
    assert dut.latency == 0 and dut.data_width == 32 and dut.user_width == 4
    assert not dut.registered
    assert AXI4StreamToStream(8, registered=True).latency == 1
    assert list(AXI4StreamSignature(16).members) == ["tdata", "tvalid", "tlast", "tkeep",
                                                     "tready"]
    assert "tuser" in AXI4StreamSignature(16, user_width=1).members
    assert AXI4StreamSignature(16) != AXI4StreamSignature(16, user_width=1)
    assert repr(AXI4StreamSignature(16)) == "AXI4StreamSignature(16, user_width=0)"
    text = verilog.convert(StreamToAXI4Stream(32, user_width=4), name="tx")
    for port in ["output [31:0] m_axis__tdata;", "output [3:0] m_axis__tkeep;",
                 "output [3:0] m_axis__tuser;", "input m_axis__tready;",
                 "input [36:0] i__payload;", "input i__valid;", "output i__ready;"]:
        assert port in text


@pytest.mark.parametrize("call, error, message", [
    (lambda: AXI4StreamSignature(12), TypeError,
     r"^data_width must be a positive multiple of 8, not 12$"),
    (lambda: AXI4StreamSignature(0), TypeError,
     r"^data_width must be a positive multiple of 8, not 0$"),
    (lambda: AXI4StreamSignature(8, user_width=-1), TypeError,
     r"^user_width must be a non-negative integer, not -1$"),
    (lambda: AXI4StreamToStream(12), TypeError,
     r"^data_width must be a positive multiple of 8, not 12$"),
    (lambda: StreamToAXI4Stream("8"), TypeError,
     r"^data_width must be a positive multiple of 8, not '8'$"),
    (lambda: StreamToAXI4Stream(8, user_width=1.5), TypeError,
     r"^user_width must be a non-negative integer, not 1\.5$"),
    (lambda: AXI4StreamToStream(8, registered=1), TypeError,
     r"^registered must be a bool, not 1$"),
    (lambda: stream_layout(7), TypeError,
     r"^data_width must be a positive multiple of 8, not 7$"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()

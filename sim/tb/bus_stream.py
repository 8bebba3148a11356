"""cocotb bench: AXI4-Stream adapters back to back under Verilator (cocotbext-axi).

The design is :class:`nnrtl.sim.tb.bus_tops.StreamLoopbackTop`. Parameters
(``tb_params()``): ``data_width``, ``user_width``, ``frames`` (per pattern),
``max_beats`` (longest frame), ``patterns`` (list of ``[source_pauses, sink_pauses]``
names for ``nnrtl.sim.patterns.pause_pattern``).

Every frame is compared byte for byte, with its ``tuser`` per beat and its ``tlast``
framing (one received frame per sent frame, of the same length); the top's beat and frame
counters must match what was sent. Reported: ``stream_frames``, ``stream_beats``.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from nnrtl.sim.patterns import pause_pattern
from nnrtl.sim.tb.common import report, start_clock_and_reset, tb_params


PARAMS = tb_params()
LANES = PARAMS["data_width"] // 8


def per_byte_user(frame):
    """``tuser`` of a received frame as one value per byte."""
    if frame.tuser is None:
        return [0] * len(frame.tdata)
    if isinstance(frame.tuser, int):
        return [frame.tuser] * len(frame.tdata)
    return list(frame.tuser)


@cocotb.test()
async def frames_survive_backpressure(dut):
    rng = random.Random(PARAMS["seed"])
    user_width = PARAMS["user_width"]
    sent_frames = sent_beats = 0
    await start_clock_and_reset(dut)
    # One source and one sink for the whole test: their coroutines drive the bus until
    # the test ends, so a second pair would fight the first.
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_"), dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk, dut.rst)
    frames_before = beats_before = 0
    for source_pauses, sink_pauses in PARAMS["patterns"]:
        source.set_pause_generator(pause_pattern(source_pauses, random.Random(rng.random())))
        sink.set_pause_generator(pause_pattern(sink_pauses, random.Random(rng.random())))

        frames = []
        for _ in range(PARAMS["frames"]):
            beats = rng.randint(1, PARAMS["max_beats"])
            data = bytes(rng.getrandbits(8) for _ in range(beats * LANES))
            users = [rng.getrandbits(user_width) if user_width else 0 for _ in range(beats)]
            frames.append((data, users))
            frame = AxiStreamFrame(data, tuser=[u for u in users for _ in range(LANES)]
                                   if user_width else None)
            await source.send(frame)

        for index, (data, users) in enumerate(frames):
            received = await sink.recv(compact=False)
            assert bytes(received.tdata) == data, (source_pauses, sink_pauses, index)
            assert received.tkeep == [1] * len(data)
            if user_width:
                assert per_byte_user(received) == [u for u in users for _ in range(LANES)], \
                    (source_pauses, sink_pauses, index)
            sent_frames += 1
            sent_beats += len(users)
        await source.wait()
        await ClockCycles(dut.clk, 4)
        assert sink.empty(), "the sink received more frames than were sent"
        assert int(dut.frames.value) - frames_before == len(frames)
        assert int(dut.beats.value) - beats_before == sum(len(users) for _data, users in frames)
        frames_before, beats_before = int(dut.frames.value), int(dut.beats.value)
        dut._log.info("patterns %s/%s: %d frames", source_pauses, sink_pauses, len(frames))
    report({"stream_frames": sent_frames, "stream_beats": sent_beats})

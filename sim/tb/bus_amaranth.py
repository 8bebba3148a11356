"""Bus drivers for Amaranth-simulator testbenches (``Simulator.add_testbench``).

An AXI4-Lite master (:func:`axil_write`, :func:`axil_read`), an ``amaranth.lib.stream``
driver / collector (:func:`stream_send`, :func:`stream_receive`) and an AXI4-Stream one
(:func:`axis_send`, :func:`axis_receive`), with optional random gaps and backpressure.
They check the handshake rules they rely on: once valid is high, it and the payload stay
put until accepted.

Every handshake is decided on the values sampled *at* the clock edge
(``await ctx.tick().sample(...)``), so a driver and a collector running as two
testbenches agree even when the design under test is a combinational pass-through.
Every function takes the testbench context ``ctx`` and the interface object (e.g.
``dut.s_axil`` or ``dut.o``), and returns right after the edge that completed its last
handshake.
"""

from amaranth.hdl import Value

from nnrtl.hw.bus.axi import AXI_RESP_OKAY, AXI_RESP_SLVERR


__all__ = ["AXI_RESP_OKAY", "AXI_RESP_SLVERR", "BusTimeout",
           "axil_write", "axil_read", "stream_send", "stream_receive",
           "axis_send", "axis_receive", "stream_through"]


class BusTimeout(AssertionError):
    """A handshake did not complete within the allowed number of cycles."""


async def _edge(ctx, *signals):
    """Wait for the next clock edge; return the values of ``signals`` sampled at it."""
    _clk, _rst, *values = await ctx.tick().sample(*signals)
    return values


async def _send_channels(ctx, channels, *, timeout):
    """Raise several valid strobes (with their payloads) and drop each one once accepted.

    ``channels`` is a list of ``(valid, ready, [(signal, value), ...])``.
    """
    for valid, ready, payload in channels:
        for signal, value in payload:
            ctx.set(signal, value)
        ctx.set(valid, 1)
    pending = list(channels)
    for _ in range(timeout):
        readies = await _edge(ctx, *(ready for _valid, ready, _payload in pending))
        for channel, ready in zip(list(pending), readies):
            if ready:
                ctx.set(channel[0], 0)
                pending = [other for other in pending if other is not channel]
        if not pending:
            return
    raise BusTimeout(f"{len(pending)} channel(s) not accepted in {timeout} cycles")


async def _take_response(ctx, valid, ready, fields, *, delay, timeout):
    """Keep ``ready`` low for ``delay`` cycles (checking the response holds), then accept."""
    held = None
    for _ in range(delay):
        seen, *values = await _edge(ctx, valid, *fields)
        if seen:
            assert held is None or held == values, "response changed while not accepted"
            held = values
        elif held is not None:
            raise AssertionError("valid dropped before the response was accepted")
    ctx.set(ready, 1)
    for _ in range(timeout):
        seen, *values = await _edge(ctx, valid, *fields)
        if seen:
            assert held is None or held == values, "response changed while not accepted"
            ctx.set(ready, 0)
            return tuple(values)
        elif held is not None:
            raise AssertionError("valid dropped before the response was accepted")
    raise BusTimeout(f"no response in {timeout} cycles")


async def axil_write(ctx, bus, addr, data, *, strb=None, order="together", gap=0,
                     response_delay=0, timeout=1000):
    """One AXI4-Lite write; returns ``bresp``.

    Parameters
    ----------
    order : str
        ``"together"`` (AW and W raised in the same cycle), ``"aw_first"`` or ``"w_first"``
        (the second channel is raised ``gap`` cycles after the first one was accepted).
    response_delay : int
        Cycles ``bready`` is held low before the response is accepted.
    """
    if strb is None:
        strb = (1 << len(bus.wstrb)) - 1
    aw = (bus.awvalid, bus.awready, [(bus.awaddr, addr), (bus.awprot, 0)])
    w = (bus.wvalid, bus.wready, [(bus.wdata, data), (bus.wstrb, strb)])
    if order == "together":
        await _send_channels(ctx, [aw, w], timeout=timeout)
    elif order in ("aw_first", "w_first"):
        first, second = (aw, w) if order == "aw_first" else (w, aw)
        await _send_channels(ctx, [first], timeout=timeout)
        for _ in range(gap):
            await ctx.tick()
        await _send_channels(ctx, [second], timeout=timeout)
    else:
        raise ValueError(f"order must be together, aw_first or w_first, not {order!r}")
    (resp,) = await _take_response(ctx, bus.bvalid, bus.bready, [bus.bresp],
                                   delay=response_delay, timeout=timeout)
    return resp


async def axil_read(ctx, bus, addr, *, response_delay=0, timeout=1000):
    """One AXI4-Lite read; returns ``(rdata, rresp)``.

    ``response_delay`` is the number of cycles ``rready`` is held low first.
    """
    await _send_channels(ctx, [(bus.arvalid, bus.arready, [(bus.araddr, addr),
                                                           (bus.arprot, 0)])],
                         timeout=timeout)
    data, resp = await _take_response(ctx, bus.rvalid, bus.rready, [bus.rdata, bus.rresp],
                                      delay=response_delay, timeout=timeout)
    return data, resp


async def _send_beats(ctx, valid, ready, fields, beats, *, rng, gap_probability, timeout):
    for beat in beats:
        while rng is not None and rng.random() < gap_probability:
            await ctx.tick()
        for field, value in zip(fields, beat):
            ctx.set(field, value)
        ctx.set(valid, 1)
        for _ in range(timeout):
            (accepted,) = await _edge(ctx, ready)
            if accepted:
                break
        else:
            raise BusTimeout(f"beat not accepted in {timeout} cycles")
        ctx.set(valid, 0)


async def _receive_beats(ctx, valid, ready, fields, count, *, rng, stall_probability,
                         timeout):
    received = []
    offered = None
    idle = 0
    while len(received) < count:
        accept = not (rng is not None and rng.random() < stall_probability)
        ctx.set(ready, int(accept))
        seen, *beat = await _edge(ctx, valid, *fields)
        if offered is not None:
            assert seen, "valid dropped before the beat was accepted"
            assert beat == offered, "beat changed before it was accepted"
        offered = None
        idle += 1
        if seen and accept:
            received.append(tuple(beat))
            idle = 0
        elif seen:
            offered = beat
        if idle > timeout:
            raise BusTimeout(f"no beat in {timeout} cycles")
    ctx.set(ready, 0)
    return received


async def stream_send(ctx, port, payloads, *, rng=None, gap_probability=0.0, timeout=1000):
    """Send ``payloads`` (values for ``port.payload``, e.g. dicts for a struct) on a
    stream; with ``rng``, valid is low for a random number of cycles before each beat."""
    await _send_beats(ctx, port.valid, port.ready, [port.payload], [(p,) for p in payloads],
                      rng=rng, gap_probability=gap_probability, timeout=timeout)


async def stream_receive(ctx, port, count, *, rng=None, stall_probability=0.0,
                         timeout=1000):
    """Collect ``count`` payloads from a stream, with random backpressure.

    Returns the payload values (a struct payload comes back as a ``data.Const``).
    """
    beats = await _receive_beats(ctx, port.valid, port.ready, [port.payload], count, rng=rng,
                                 stall_probability=stall_probability, timeout=timeout)
    return [payload for (payload,) in beats]


def _axis_fields(bus):
    fields = [bus.tdata, bus.tlast]
    if hasattr(bus, "tuser"):
        fields.append(bus.tuser)
    return fields


async def axis_send(ctx, bus, beats, *, rng=None, gap_probability=0.0, timeout=1000):
    """Send AXI4-Stream ``beats`` (tuples ``(tdata, tlast)`` or ``(tdata, tlast, tuser)``),
    ``tkeep`` all ones, with random gaps like :func:`stream_send`."""
    ctx.set(bus.tkeep, (1 << len(bus.tkeep)) - 1)
    await _send_beats(ctx, bus.tvalid, bus.tready, _axis_fields(bus), beats, rng=rng,
                      gap_probability=gap_probability, timeout=timeout)


async def axis_receive(ctx, bus, count, *, rng=None, stall_probability=0.0, timeout=1000):
    """Collect ``count`` AXI4-Stream beats as tuples ``(tdata, tlast[, tuser])``, with
    random backpressure; also checks that ``tkeep`` is all ones on every beat."""
    all_ones = (1 << len(bus.tkeep)) - 1
    beats = await _receive_beats(ctx, bus.tvalid, bus.tready, _axis_fields(bus) + [bus.tkeep],
                                 count, rng=rng, stall_probability=stall_probability,
                                 timeout=timeout)
    for beat in beats:
        assert beat[-1] == all_ones, f"tkeep is {beat[-1]:#x}, not all ones"
    return [beat[:-1] for beat in beats]


async def stream_through(ctx, unit, words, count, *, rng, gap=0.0, stall=0.0, timeout=10000):
    """Drive a stream unit (``unit.i`` in, ``unit.o`` out) from one testbench: offer the
    payload integers ``words`` on ``unit.i`` with gap probability ``gap`` while taking
    ``count`` payloads from ``unit.o`` with stall probability ``stall``, checking that a
    payload offered and not taken stays put. Fails after ``timeout`` cycles without an
    output. Returns ``(accepted, taken, outputs)``: the cycles of the input and output
    handshakes (counted from 1) and the output payloads as integers."""
    i_payload, o_payload = Value.cast(unit.i.payload), Value.cast(unit.o.payload)
    accepted, taken, outputs = [], [], []
    sent, cycle, offering, idle, held = 0, 0, False, 0, None
    while len(outputs) < count:
        if not offering and sent < len(words) and not rng.random() < gap:
            ctx.set(i_payload, int(words[sent]))
            ctx.set(unit.i.valid, 1)
            offering = True
        ready = not rng.random() < stall
        ctx.set(unit.o.ready, int(ready))
        _clk, _rst, in_ready, out_valid, out_bits = await ctx.tick().sample(
            unit.i.ready, unit.o.valid, o_payload)
        cycle += 1
        idle += 1
        if offering and in_ready:
            accepted.append(cycle)
            sent += 1
            offering = False
            ctx.set(unit.i.valid, 0)
        if held is not None:
            assert out_valid and out_bits == held, "o changed before it was taken"
        held = out_bits if out_valid and not ready else None
        if out_valid and ready:
            taken.append(cycle)
            outputs.append(out_bits)
            idle = 0
        assert idle < timeout, f"no output in {timeout} cycles"
    ctx.set(unit.o.ready, 0)
    return accepted, taken, outputs

"""Adapters between AXI4-Stream (at an engine's edge) and ``amaranth.lib.stream`` (inside).

Inside an engine a beat is a ``stream.Signature`` whose payload is
``data.StructLayout({"data": data_width, "last": 1})`` (plus ``"user": user_width`` when
``user_width > 0``); :func:`stream_layout` builds that layout so both sides of a design use
the same object.
"""

from amaranth.hdl import Module, Signal, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi import AXI4StreamSignature


__all__ = ["stream_layout", "AXI4StreamToStream", "StreamToAXI4Stream"]


def stream_layout(data_width, *, user_width=0):
    """Payload layout of an internal stream carrying AXI4-Stream beats.

    Parameters
    ----------
    data_width : int
        Positive multiple of 8.
    user_width : int
        Non-negative; a ``user`` field exists only if it is positive.

    Returns
    -------
    data.StructLayout
        ``{"data": data_width, "last": 1}`` plus ``"user": user_width``.
    """
    # Validate with the same wording as the bus signature.
    AXI4StreamSignature(data_width, user_width=user_width)
    fields = {"data": data_width, "last": 1}
    if user_width > 0:
        fields["user"] = user_width
    return data.StructLayout(fields)


class _Adapter(wiring.Component):
    def __init__(self, data_width, *, user_width=0, registered=False, members):
        if not isinstance(registered, bool):
            raise TypeError(f"registered must be a bool, not {registered!r}")
        self._data_width = data_width
        self._user_width = user_width
        self._registered = registered
        super().__init__(members)

    @property
    def data_width(self):
        return self._data_width

    @property
    def user_width(self):
        return self._user_width

    @property
    def registered(self):
        return self._registered

    @property
    def latency(self):
        """Cycles from a beat on the input to the same beat on the output."""
        return 1 if self._registered else 0


def _skid_buffer(m, *, i_valid, i_ready, i_data, o_valid, o_ready, o_data):
    """Register slice with a skid buffer: full throughput, all outputs registered."""
    width = len(i_data)
    main_valid = Signal()
    main_data = Signal(width)
    skid_valid = Signal()
    skid_data = Signal(width)
    m.d.comb += [
        i_ready.eq(~skid_valid),
        o_valid.eq(main_valid),
        o_data.eq(main_data),
    ]
    with m.If(o_ready | ~main_valid):
        # The output register is free (or drains this cycle): refill it from the skid
        # buffer first, else from the input.
        m.d.sync += [
            main_valid.eq(skid_valid | i_valid),
            main_data.eq(Mux(skid_valid, skid_data, i_data)),
            skid_valid.eq(0),
        ]
    with m.Elif(i_valid & ~skid_valid):
        m.d.sync += [skid_valid.eq(1), skid_data.eq(i_data)]


class AXI4StreamToStream(_Adapter):
    """AXI4-Stream slave to ``amaranth.lib.stream`` source.

    ``tdata``, ``tlast`` and ``tuser`` become the payload fields ``data``, ``last`` and
    ``user``; ``tkeep`` is ignored (every beat is a full beat, as the engines exchange whole
    words).

    Parameters
    ----------
    data_width : int
        Width of ``tdata``; a positive multiple of 8.
    user_width : int
        Width of ``tuser`` (0: no ``tuser``).
    registered : bool
        False (default): valid, ready and payload pass straight through, latency 0.
        True: a register slice with a skid buffer; latency 1 cycle, still one beat per cycle,
        and no combinational path from one side to the other.

    Attributes
    ----------
    s_axis : In(AXI4StreamSignature(data_width, user_width=user_width))
    o : Out(stream.Signature(stream_layout(data_width, user_width=user_width)))
    latency : int
        0, or 1 when ``registered``. Throughput: one beat per cycle.

    Raises
    ------
    TypeError
        If ``data_width`` is not a positive multiple of 8, ``user_width`` is not a
        non-negative integer or ``registered`` is not a bool.
    """

    def __init__(self, data_width, *, user_width=0, registered=False):
        layout = stream_layout(data_width, user_width=user_width)
        super().__init__(data_width, user_width=user_width, registered=registered, members={
            "s_axis": In(AXI4StreamSignature(data_width, user_width=user_width)),
            "o": Out(stream.Signature(layout)),
        })

    def elaborate(self, platform):
        m = Module()
        payload = Signal(self.o.payload.shape())
        m.d.comb += [payload.data.eq(self.s_axis.tdata), payload.last.eq(self.s_axis.tlast)]
        if self._user_width > 0:
            m.d.comb += payload.user.eq(self.s_axis.tuser)
        if self._registered:
            _skid_buffer(m, i_valid=self.s_axis.tvalid, i_ready=self.s_axis.tready,
                         i_data=payload.as_value(),
                         o_valid=self.o.valid, o_ready=self.o.ready,
                         o_data=self.o.payload.as_value())
        else:
            m.d.comb += [
                self.o.valid.eq(self.s_axis.tvalid),
                self.s_axis.tready.eq(self.o.ready),
                self.o.payload.eq(payload),
            ]
        return m


class StreamToAXI4Stream(_Adapter):
    """``amaranth.lib.stream`` sink to AXI4-Stream master.

    The payload fields ``data``, ``last`` and ``user`` drive ``tdata``, ``tlast`` and
    ``tuser``; ``tkeep`` is all ones.

    Parameters
    ----------
    data_width : int
        Width of ``tdata``; a positive multiple of 8.
    user_width : int
        Width of ``tuser`` (0: no ``tuser``).
    registered : bool
        False (default): pass-through, latency 0. True: register slice with a skid buffer,
        latency 1 cycle, full throughput.

    Attributes
    ----------
    i : In(stream.Signature(stream_layout(data_width, user_width=user_width)))
    m_axis : Out(AXI4StreamSignature(data_width, user_width=user_width))
    latency : int
        0, or 1 when ``registered``. Throughput: one beat per cycle.

    Raises
    ------
    TypeError
        If ``data_width`` is not a positive multiple of 8, ``user_width`` is not a
        non-negative integer or ``registered`` is not a bool.
    """

    def __init__(self, data_width, *, user_width=0, registered=False):
        layout = stream_layout(data_width, user_width=user_width)
        super().__init__(data_width, user_width=user_width, registered=registered, members={
            "i": In(stream.Signature(layout)),
            "m_axis": Out(AXI4StreamSignature(data_width, user_width=user_width)),
        })

    def elaborate(self, platform):
        m = Module()
        payload = Signal(self.i.payload.shape())
        valid = Signal()
        if self._registered:
            _skid_buffer(m, i_valid=self.i.valid, i_ready=self.i.ready,
                         i_data=self.i.payload.as_value(),
                         o_valid=valid, o_ready=self.m_axis.tready,
                         o_data=payload.as_value())
        else:
            m.d.comb += [
                valid.eq(self.i.valid),
                self.i.ready.eq(self.m_axis.tready),
                payload.eq(self.i.payload),
            ]
        m.d.comb += [
            self.m_axis.tvalid.eq(valid),
            self.m_axis.tdata.eq(payload.data),
            self.m_axis.tlast.eq(payload.last),
            self.m_axis.tkeep.eq((1 << (self._data_width // 8)) - 1),
        ]
        if self._user_width > 0:
            m.d.comb += self.m_axis.tuser.eq(payload.user)
        return m

"""AXI4-Lite and AXI4-Stream interface signatures.

Both signatures are described from the point of view of the *master* (the side that drives
the address / data and the valid strobes). A slave takes the flipped signature, e.g.
``In(AXI4LiteSignature(addr_width=8))``.

Amaranth joins the path of an interface member with ``__`` when it becomes a top-level port,
so a member ``s_axil`` of a top component turns into Verilog ports ``s_axil__awaddr``,
``s_axil__awvalid``, ...; cocotbext-axi finds them with
``AxiLiteBus.from_prefix(dut, "s_axil_")`` because it joins the prefix and the signal name
with one more ``_``.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..checks import check_positive


__all__ = ["AXI4LiteSignature", "AXI4StreamSignature", "AXI_RESP_OKAY", "AXI_RESP_SLVERR",
           "MAX_BUS_BITS", "bus_bits"]


#: Widest AXI4 data bus, in bits (AMBA AXI4 allows 8 to 1024).
MAX_BUS_BITS = 1024


def bus_bits(words, width):
    """AXI4-Stream data width carrying ``words`` words of ``width`` bits (whole bytes)."""
    return -(-words * width // 8) * 8


#: ``bresp`` / ``rresp`` encoding of a successful access.
AXI_RESP_OKAY = 0b00
#: ``bresp`` / ``rresp`` encoding of a slave error (unmapped address, write to a read-only
#: register).
AXI_RESP_SLVERR = 0b10


def _check_byte_multiple(name, value):
    if (not isinstance(value, int) or isinstance(value, bool) or value <= 0
            or value % 8 != 0):
        raise TypeError(f"{name} must be a positive multiple of 8, not {value!r}")


class AXI4LiteSignature(wiring.Signature):
    """Signature of an AXI4-Lite bus, seen from the master.

    Parameters
    ----------
    addr_width : int
        Width of ``awaddr`` and ``araddr`` in bits (byte addresses).
    data_width : int
        Width of ``wdata`` and ``rdata``; AXI4-Lite allows 32 or 64.

    Members
    -------
    awaddr, awprot, awvalid : Out
        Write address channel (``awprot`` is 3 bits).
    awready : In
    wdata, wstrb, wvalid : Out
        Write data channel; ``wstrb`` has one bit per byte of ``wdata``.
    wready : In
    bresp, bvalid : In
        Write response channel (``bresp`` is 2 bits).
    bready : Out
    araddr, arprot, arvalid : Out
        Read address channel.
    arready : In
    rdata, rresp, rvalid : In
        Read data channel.
    rready : Out

    Raises
    ------
    TypeError
        If ``addr_width`` is not a positive integer or ``data_width`` is not 32 or 64.
    """

    def __init__(self, addr_width, data_width=32):
        check_positive("addr_width", addr_width)
        if data_width not in (32, 64) or isinstance(data_width, bool):
            raise TypeError(f"data_width must be 32 or 64, not {data_width!r}")
        self._addr_width = addr_width
        self._data_width = data_width
        super().__init__({
            "awaddr":  Out(addr_width),
            "awprot":  Out(3),
            "awvalid": Out(1),
            "awready": In(1),
            "wdata":   Out(data_width),
            "wstrb":   Out(data_width // 8),
            "wvalid":  Out(1),
            "wready":  In(1),
            "bresp":   In(2),
            "bvalid":  In(1),
            "bready":  Out(1),
            "araddr":  Out(addr_width),
            "arprot":  Out(3),
            "arvalid": Out(1),
            "arready": In(1),
            "rdata":   In(data_width),
            "rresp":   In(2),
            "rvalid":  In(1),
            "rready":  Out(1),
        })

    @property
    def addr_width(self):
        """Width of the byte address in bits."""
        return self._addr_width

    @property
    def data_width(self):
        """Width of the data bus in bits."""
        return self._data_width

    def __eq__(self, other):
        return (type(other) is type(self) and
                other.addr_width == self.addr_width and
                other.data_width == self.data_width)

    __hash__ = None

    def __repr__(self):
        return f"AXI4LiteSignature({self.addr_width}, data_width={self.data_width})"


class AXI4StreamSignature(wiring.Signature):
    """Signature of an AXI4-Stream link, seen from the master (the transmitter).

    Parameters
    ----------
    data_width : int
        Width of ``tdata``; a positive multiple of 8.
    user_width : int
        Width of ``tuser``; the member exists only if it is positive.

    Members
    -------
    tdata : Out(data_width)
    tvalid : Out(1)
    tlast : Out(1)
        End of a frame (packet).
    tkeep : Out(data_width // 8)
        One bit per byte of ``tdata``.
    tuser : Out(user_width)
        Only if ``user_width > 0``.
    tready : In(1)

    Raises
    ------
    TypeError
        If ``data_width`` is not a positive multiple of 8, or ``user_width`` is not a
        non-negative integer.
    """

    def __init__(self, data_width, *, user_width=0):
        _check_byte_multiple("data_width", data_width)
        if not isinstance(user_width, int) or isinstance(user_width, bool) or user_width < 0:
            raise TypeError(f"user_width must be a non-negative integer, not {user_width!r}")
        self._data_width = data_width
        self._user_width = user_width
        members = {
            "tdata":  Out(data_width),
            "tvalid": Out(1),
            "tlast":  Out(1),
            "tkeep":  Out(data_width // 8),
        }
        if user_width > 0:
            members["tuser"] = Out(user_width)
        members["tready"] = In(1)
        super().__init__(members)

    @property
    def data_width(self):
        """Width of ``tdata`` in bits."""
        return self._data_width

    @property
    def user_width(self):
        """Width of ``tuser`` in bits (0 if there is no ``tuser``)."""
        return self._user_width

    def __eq__(self, other):
        return (type(other) is type(self) and
                other.data_width == self.data_width and
                other.user_width == self.user_width)

    __hash__ = None

    def __repr__(self):
        return f"AXI4StreamSignature({self.data_width}, user_width={self.user_width})"

"""Engine edges: AXI4-Lite register files, AXI4-Stream adapters, performance counters."""

from .axi import (AXI4LiteSignature, AXI4StreamSignature, AXI_RESP_OKAY, AXI_RESP_SLVERR,
                  MAX_BUS_BITS, bus_bits)
from .counter import PerfCounter
from .header import c_header
from .regs import Access, Field, Register, RegisterFile, RegisterMap
from .stream import AXI4StreamToStream, StreamToAXI4Stream, stream_layout

__all__ = [
    "AXI4LiteSignature", "AXI4StreamSignature", "AXI_RESP_OKAY", "AXI_RESP_SLVERR",
    "MAX_BUS_BITS", "bus_bits",
    "PerfCounter",
    "c_header",
    "Access", "Field", "Register", "RegisterFile", "RegisterMap",
    "AXI4StreamToStream", "StreamToAXI4Stream", "stream_layout",
]

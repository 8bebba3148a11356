"""Configuration of the demo engine: the one object its RTL, model, testbench, header and
manifest derive from."""

import dataclasses

from ..bus import Access, Field, Register, RegisterMap

__all__ = ["DemoConfig"]


def _check_int(name, value, minimum, maximum):
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise TypeError(f"{name} must be an integer from {minimum} to {maximum}, not {value!r}")


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    """A MAC array of ``lanes`` lanes behind an AXI4-Lite register file.

    Each input beat carries ``lanes`` pairs of signed ``operand_width``-bit operands; lane
    ``k`` accumulates ``a[k] * b[k]`` into an ``acc_width``-bit two's-complement
    accumulator (wrapping on overflow). The beat with ``tlast`` closes a frame: the
    ``lanes`` sums leave as one output beat and the accumulators restart from zero.

    Parameters
    ----------
    lanes : int
        Number of multiply-accumulate lanes (one DSP each), 1 to 4096.
    operand_width : int
        Bits of each signed operand, 2 to 27 (one DSP48 multiplier input).
    acc_width : int
        Bits of each accumulator, a multiple of 8 from ``2 * operand_width`` to 64.
    """

    lanes: int = 8
    operand_width: int = 16
    acc_width: int = 48

    def __post_init__(self):
        _check_int("lanes", self.lanes, 1, 4096)
        _check_int("operand_width", self.operand_width, 2, 27)
        _check_int("acc_width", self.acc_width, 8, 64)
        if self.acc_width % 8:
            raise ValueError(f"acc_width ({self.acc_width}) must be a multiple of 8")
        if self.acc_width < 2 * self.operand_width:
            raise ValueError(f"acc_width ({self.acc_width}) must be at least twice "
                             f"operand_width ({self.operand_width})")

    @property
    def in_width(self):
        """Bits of an input beat: ``lanes`` (a, b) pairs, padded to whole bytes."""
        return -(-2 * self.lanes * self.operand_width // 8) * 8

    @property
    def out_width(self):
        """Bits of an output beat: ``lanes`` accumulators."""
        return self.lanes * self.acc_width

    @property
    def dsp(self):
        """DSP slices the design needs (one multiplier per lane)."""
        return self.lanes

    @property
    def latency(self):
        """Cycles from the handshake of a frame's last beat to its result being valid."""
        return 1

    def model_cycles(self, frame_lengths):
        """Busy cycles of a run without gaps or backpressure: one beat per cycle, plus the
        result register of the last frame."""
        return sum(frame_lengths) + self.latency

    @property
    def registers(self):
        """The AXI4-Lite register map."""
        return RegisterMap([
            Register("control", Access.PULSE, doc="Write 1 to CLEAR to zero the counters",
                     fields=[Field("clear", 0, doc="zero every performance counter")]),
            Register("status", Access.RO, doc="Engine state",
                     fields=[Field("busy", 0, doc="a beat is taken, a frame is in flight or a result waits")]),
            Register("lanes", Access.RO, doc="Configuration: number of MAC lanes"),
            Register("operand_width", Access.RO, doc="Configuration: operand bits"),
            Register("acc_width", Access.RO, doc="Configuration: accumulator bits"),
            Register("cycles", Access.RO, width=64, doc="Cycles since the last clear"),
            Register("busy_cycles", Access.RO, width=64,
                     doc="Cycles with a frame in flight or a result waiting"),
            Register("stall_cycles", Access.RO, width=64,
                     doc="Cycles a result waited for the output stream (backpressure)"),
            Register("useful_macs", Access.RO, width=64, doc="Multiply-accumulates done"),
            Register("frames", Access.RO, width=64, doc="Results sent"),
        ])

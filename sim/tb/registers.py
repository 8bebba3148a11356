"""Registers by name over AXI4-Lite (cocotbext-axi), from a
:class:`~nnrtl.hw.bus.RegisterMap`: offsets, widths and field positions all come from
the map, none is written by hand.

Every access must be answered OKAY within :data:`REGISTER_BUDGET` cycles; otherwise
:class:`BenchFailure`, a protocol failure of the design under test.
"""

from cocotb.simtime import get_sim_time
from cocotb.triggers import SimTimeoutError, with_timeout
from cocotbext.axi import AxiResp

from nnrtl.hw.bus import Access
from nnrtl.sim.tb.common import CLOCK_PERIOD_NS

__all__ = ["RegisterBus", "BenchFailure", "REGISTER_BUDGET"]

#: Cycles one AXI4-Lite register access may take (the register file answers in two
#: cycles; a master with paused channels needs more).
REGISTER_BUDGET = 2000


class BenchFailure(AssertionError):
    """A protocol failure of the design under test (the message says which)."""


def _cycle():
    return int(get_sim_time("ns") // CLOCK_PERIOD_NS)


class RegisterBus:
    """The registers of ``registers`` behind the AXI4-Lite ``master``.

    Parameters
    ----------
    master : cocotbext.axi.AxiLiteMaster
    registers : nnrtl.hw.bus.RegisterMap
    """

    def __init__(self, master, registers):
        self.master = master
        self.registers = registers

    def _bytes(self, name):
        return self.registers.words_of(name) * self.registers.data_width // 8

    async def _access(self, awaitable, what):
        try:
            result = await with_timeout(awaitable, REGISTER_BUDGET * CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            raise BenchFailure(f"budget overrun: AXI4-Lite {what} got no response within "
                               f"{REGISTER_BUDGET} cycles (cycle {_cycle()})") from None
        if result.resp != AxiResp.OKAY:
            raise BenchFailure(f"AXI4-Lite {what} answered {result.resp.name} at cycle "
                               f"{_cycle()}")
        return result

    async def read(self, name):
        """Register ``name`` (all of its words, low first)."""
        result = await self._access(
            self.master.read(self.registers.offset_of(name), self._bytes(name)),
            f"read of {name}")
        return int.from_bytes(result.data, "little")

    async def read_many(self, names):
        """``{name: value}`` of the registers ``names``."""
        return {name: await self.read(name) for name in names}

    async def read_field(self, register, field):
        """Field ``field`` of register ``register``."""
        field = self.registers[register].field(field)
        return (await self.read(register) & field.mask) >> field.offset

    async def write(self, name, value):
        """Write ``value`` to register ``name`` (all of its words)."""
        width = self.registers[name].width
        if not 0 <= value < 1 << width:
            raise ValueError(f"value {value} does not fit register {name!r} ({width} bits)")
        await self._access(
            self.master.write(self.registers.offset_of(name),
                              int(value).to_bytes(self._bytes(name), "little")),
            f"write of {name}")

    async def write_fields(self, name, **fields):
        """Write register ``name`` with the named fields set and the others 0, e.g.
        ``write_fields("control", start=1)``."""
        register = self.registers[name]
        value = 0
        for field_name, field_value in fields.items():
            field = register.field(field_name)
            field_value = int(field_value)
            if not 0 <= field_value < 1 << field.width:
                raise ValueError(f"value {field_value} does not fit field {name}.{field_name} "
                                 f"({field.width} bits)")
            value |= field_value << field.offset
        await self.write(name, value)

    async def expect(self, values):
        """Each register of ``{name: value}`` must read ``value`` (configuration
        registers); :class:`BenchFailure` naming the first that does not."""
        for name, value in values.items():
            got = await self.read(name)
            if got != value:
                raise BenchFailure(f"register {name} reads {got}, the configuration says "
                                   f"{value}")

    async def snapshot(self):
        """Every read-only register as ``name=value`` text, for failure messages; stops
        at the first access that fails."""
        values = []
        for register in self.registers:
            if register.access is Access.RO:
                try:
                    values.append(f"{register.name}={await self.read(register.name)}")
                except BenchFailure as failure:
                    values.append(f"{register.name}=<{failure}>")
                    break
        return " ".join(values)

"""One register description for the RTL, the C header and the manifest.

A :class:`RegisterMap` lists :class:`Register` objects (each with an :class:`Access` kind and
optional :class:`Field` s). The same object is given to :class:`RegisterFile` (the AXI4-Lite
slave in RTL), to :func:`nnrtl.hw.bus.header.c_header` (the C header) and, through
:meth:`RegisterMap.as_dict`, to the manifest. Nothing restates an offset or a width by hand.

Example
-------
>>> regmap = RegisterMap([
...     Register("control", Access.PULSE, fields=[Field("start", 0)]),
...     Register("length", Access.RW, reset=16),
...     Register("cycles", Access.RO, width=64),
... ])
>>> [regmap.offset_of(name) for name in ("control", "length", "cycles")]
[0, 4, 8]
"""

import dataclasses
import enum
import keyword
import re

from amaranth.hdl import Signal, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..checks import is_int
from .axi import AXI4LiteSignature, AXI_RESP_OKAY, AXI_RESP_SLVERR


__all__ = ["Access", "Field", "Register", "RegisterMap", "RegisterFile"]


_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_RESERVED_NAMES = {"signature"}  # taken by `wiring` interfaces


def _check_name(what, name):
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be a string, not {name!r}")
    if not _NAME_RE.match(name) or keyword.iskeyword(name) or name in _RESERVED_NAMES:
        raise ValueError(f"{what} name {name!r} must be a lower-case identifier "
                         f"(letters, digits, '_', starting with a letter; not a keyword)")


class Access(enum.Enum):
    """How software and the core use a register.

    Attributes
    ----------
    RW
        Stored in the register file; software reads and writes it (honouring ``wstrb``), the
        core sees the current value on an output.
    RO
        Driven by the core (status, performance counter); software reads it, a write is
        ignored and answered with SLVERR.
    PULSE
        Write-1-to-pulse: each 1 bit written gives a one-cycle pulse on the core's output
        (start, clear). Reads return 0.
    """
    RW = "RW"
    RO = "RO"
    PULSE = "PULSE"


@dataclasses.dataclass(frozen=True)
class Field:
    """A named bit field inside a register (used by the C header and the manifest).

    Parameters
    ----------
    name : str
        Lower-case identifier.
    offset : int
        Position of the least significant bit inside the register.
    width : int
        Width in bits.
    doc : str
        One line of documentation.

    Raises
    ------
    TypeError
        If ``offset`` is not a non-negative integer or ``width`` not a positive integer.
    ValueError
        If ``name`` is not a lower-case identifier.
    """
    name: str
    offset: int
    width: int = 1
    doc: str = ""

    def __post_init__(self):
        _check_name("field", self.name)
        if not is_int(self.offset) or self.offset < 0:
            raise TypeError(f"offset must be a non-negative integer, not {self.offset!r}")
        if not is_int(self.width) or self.width <= 0:
            raise TypeError(f"width must be a positive integer, not {self.width!r}")
        if not isinstance(self.doc, str):
            raise TypeError(f"doc must be a string, not {self.doc!r}")

    @property
    def mask(self):
        """Mask of the field in place (already shifted by :attr:`offset`)."""
        return ((1 << self.width) - 1) << self.offset


@dataclasses.dataclass(frozen=True)
class Register:
    """One software-visible register.

    Parameters
    ----------
    name : str
        Lower-case identifier; the core sees the register as ``regfile.regs.<name>``.
    access : Access
        Kind of register.
    width : int
        32 or 64 (64 for performance counters).
    reset : int
        Value after reset; only an ``RW`` register stores one.
    doc : str
        One line of documentation, copied into the C header and the manifest.
    fields : sequence of Field
        Named bit fields; they must fit in ``width`` and must not overlap.

    Raises
    ------
    TypeError
        If ``access`` is not an :class:`Access`, ``width`` is not 32 or 64, ``reset`` is not a
        non-negative integer or a field is not a :class:`Field`.
    ValueError
        If the name is not a lower-case identifier, ``reset`` does not fit, a non-RW register
        has a reset value, or fields do not fit, overlap or share a name.
    """
    name: str
    access: Access
    _: dataclasses.KW_ONLY
    width: int = 32
    reset: int = 0
    doc: str = ""
    fields: tuple = ()

    def __post_init__(self):
        try:
            object.__setattr__(self, "fields", tuple(self.fields))
        except TypeError:
            raise TypeError(f"fields must be a sequence of Field objects, not "
                            f"{self.fields!r}") from None
        _check_name("register", self.name)
        if not isinstance(self.access, Access):
            raise TypeError(f"access must be an Access, not {self.access!r}")
        if self.width not in (32, 64) or isinstance(self.width, bool):
            raise TypeError(f"width must be 32 or 64, not {self.width!r}")
        if not is_int(self.reset) or self.reset < 0:
            raise TypeError(f"reset must be a non-negative integer, not {self.reset!r}")
        if not isinstance(self.doc, str):
            raise TypeError(f"doc must be a string, not {self.doc!r}")
        if self.reset >> self.width:
            raise ValueError(f"reset {self.reset:#x} of register {self.name!r} does not fit "
                             f"in {self.width} bits")
        if self.reset and self.access is not Access.RW:
            raise ValueError(f"register {self.name!r} is {self.access.name} and cannot have "
                             f"a reset value")
        used = 0
        names = set()
        for field in self.fields:
            if not isinstance(field, Field):
                raise TypeError(f"fields must be Field objects, not {field!r}")
            if field.name in names:
                raise ValueError(f"field name {field.name!r} is used twice in register "
                                 f"{self.name!r}")
            names.add(field.name)
            if field.offset + field.width > self.width:
                raise ValueError(f"field {field.name!r} (bits {field.offset}.."
                                 f"{field.offset + field.width - 1}) does not fit in the "
                                 f"{self.width} bits of register {self.name!r}")
            if used & field.mask:
                raise ValueError(f"field {field.name!r} overlaps another field of register "
                                 f"{self.name!r}")
            used |= field.mask

    def field(self, name):
        """The :class:`Field` called ``name``; ``KeyError`` naming the valid ones."""
        for field in self.fields:
            if field.name == name:
                return field
        raise KeyError(f"register {self.name!r} has no field {name!r}; fields: "
                       f"{', '.join(f.name for f in self.fields) or 'none'}")

    def as_dict(self):
        """JSON-serialisable description (without the offset, which the map assigns)."""
        return {
            "name": self.name,
            "access": self.access.name,
            "width": self.width,
            "reset": self.reset,
            "doc": self.doc,
            "fields": [dataclasses.asdict(field) for field in self.fields],
        }


class RegisterMap:
    """Registers with byte offsets assigned in order.

    A register of ``width`` bits takes ``ceil(width / data_width)`` bus words and is aligned
    to its own size in bytes: with a 32-bit bus a 32-bit register takes one word, a 64-bit
    register is 8-byte aligned and takes two words (low word at its offset, high word at
    offset + 4). A word left free by alignment is unmapped.

    Parameters
    ----------
    registers : iterable of Register
        In address order; names must be unique.
    data_width : int
        Width of the AXI4-Lite data bus, 32 or 64.

    Attributes
    ----------
    registers : tuple of Register
    data_width : int
    size : int
        Bytes spanned by the map (end of the last register).
    addr_width : int
        Width of the byte address: the smallest width whose address space
        (``2 ** addr_width`` bytes) covers :attr:`size`, and at least 4 bits. Addresses
        inside that space that no register covers are unmapped (SLVERR).

    Raises
    ------
    TypeError
        If ``data_width`` is not 32 or 64 or an element is not a :class:`Register`.
    ValueError
        If the map is empty or a name is used twice.
    """

    def __init__(self, registers, *, data_width=32):
        if data_width not in (32, 64) or isinstance(data_width, bool):
            raise TypeError(f"data_width must be 32 or 64, not {data_width!r}")
        registers = tuple(registers)
        if not registers:
            raise ValueError("register map must have at least one register")
        offsets = {}
        cursor = 0
        word_bytes = data_width // 8
        for register in registers:
            if not isinstance(register, Register):
                raise TypeError(f"registers must be Register objects, not {register!r}")
            if register.name in offsets:
                raise ValueError(f"register name {register.name!r} is used twice")
            size = -(-register.width // data_width) * word_bytes
            cursor = -(-cursor // size) * size
            offsets[register.name] = cursor
            cursor += size
        self._registers = registers
        self._by_name = {register.name: register for register in registers}
        self._offsets = offsets
        self._data_width = data_width
        self._size = cursor
        self._addr_width = max(4, (cursor - 1).bit_length())

    @property
    def registers(self):
        return self._registers

    @property
    def data_width(self):
        return self._data_width

    @property
    def size(self):
        return self._size

    @property
    def addr_width(self):
        return self._addr_width

    def offset_of(self, name):
        """Byte offset of register ``name`` (of its low word for a multi-word register)."""
        self[name]
        return self._offsets[name]

    def words_of(self, name):
        """Number of bus words register ``name`` takes."""
        return -(-self[name].width // self._data_width)

    def __getitem__(self, name):
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no register named {name!r}") from None

    def __contains__(self, name):
        return name in self._by_name

    def __iter__(self):
        return iter(self._registers)

    def __len__(self):
        return len(self._registers)

    def __repr__(self):
        names = ", ".join(register.name for register in self._registers)
        return f"RegisterMap([{names}], data_width={self._data_width})"

    def as_dict(self):
        """JSON-serialisable description for the manifest.

        Returns
        -------
        dict
            ``{"data_width", "addr_width", "size", "registers": [{"name", "offset", "access",
            "width", "reset", "doc", "fields": [{"name", "offset", "width", "doc"}]}]}``.
        """
        return {
            "data_width": self._data_width,
            "addr_width": self._addr_width,
            "size": self._size,
            "registers": [{"offset": self._offsets[register.name], **register.as_dict()}
                          for register in self._registers],
        }

    @classmethod
    def from_dict(cls, description):
        """Rebuild a map from :meth:`as_dict` output (offsets are re-derived and checked)."""
        registers = [
            Register(entry["name"], Access[entry["access"]], width=entry["width"],
                     reset=entry["reset"], doc=entry["doc"],
                     fields=[Field(**field) for field in entry["fields"]])
            for entry in description["registers"]]
        regmap = cls(registers, data_width=description["data_width"])
        for entry in description["registers"]:
            offset = regmap.offset_of(entry["name"])
            if "offset" in entry and entry["offset"] != offset:
                raise ValueError(f"offset {entry['offset']:#x} of register {entry['name']!r} "
                                 f"does not match the layout ({offset:#x})")
        return regmap


class RegisterFile(wiring.Component):
    """AXI4-Lite slave holding the registers of a :class:`RegisterMap`.

    Parameters
    ----------
    regmap : RegisterMap

    Attributes
    ----------
    s_axil : In(AXI4LiteSignature(regmap.addr_width, regmap.data_width))
        The bus. ``awprot`` / ``arprot`` are ignored, and so are the address bits below the
        word. OKAY for mapped addresses; SLVERR (0b10) for unmapped addresses and for writes
        to ``RO`` registers (the write is ignored; a read of an unmapped address returns 0).
    regs : Out(wiring.Signature({...}))
        One member per register, named after it: ``RW`` -> ``Out(width)`` (current value,
        reset to ``reset``), ``RO`` -> ``In(width)`` (value from the core), ``PULSE`` ->
        ``Out(width)`` (each written 1 bit is high for exactly one cycle).
    read_latency : int
        1: ``rvalid`` rises the cycle after the AR handshake.
    write_latency : int
        2: ``bvalid`` rises, ``RW`` outputs change and ``PULSE`` outputs pulse two cycles after
        the later of the AW and W handshakes.

    Notes
    -----
    AW and W may arrive in either order or together; one write and one read are in flight at
    a time, independently. Responses are held until accepted (``bready`` / ``rready`` may
    stay low for any number of cycles). Throughput: one read every 2 cycles and one write
    every 2 cycles when the master answers at once. Every AXI output comes from a register
    (``awready = ~aw_full`` etc.): there is no combinational path from AXI inputs to AXI
    outputs.

    A 64-bit register on a 32-bit bus is read atomically: reading the low word also
    captures the high word of an ``RO`` register into a snapshot, and a read of the high
    word returns that snapshot (software reads low then high). The high word of an ``RW``
    register reads its stored value; writing a 64-bit ``RW`` register low word then high
    word needs no atomicity since only software changes it.

    Raises
    ------
    TypeError
        If ``regmap`` is not a :class:`RegisterMap`.
    """

    def __init__(self, regmap):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"regmap must be a RegisterMap, not {regmap!r}")
        self._regmap = regmap
        members = {}
        for register in regmap:
            if register.access is Access.RW:
                members[register.name] = Out(register.width, init=register.reset)
            elif register.access is Access.RO:
                members[register.name] = In(register.width)
            else:
                members[register.name] = Out(register.width)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(regmap.addr_width, regmap.data_width)),
            "regs": Out(wiring.Signature(members)),
        })

    @property
    def regmap(self):
        return self._regmap

    @property
    def read_latency(self):
        return 1

    @property
    def write_latency(self):
        return 2

    def _words(self):
        """Yield ``(register, word within register, word index on the bus)``."""
        word_bytes = self._regmap.data_width // 8
        for register in self._regmap:
            first = self._regmap.offset_of(register.name) // word_bytes
            for word in range(self._regmap.words_of(register.name)):
                yield register, word, first + word

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        data_width = self._regmap.data_width
        lanes = data_width // 8
        shift = exact_log2(lanes)
        word_width = self._regmap.addr_width - shift

        # Write path: latch AW and W independently, write when both are held and the
        # previous response has been accepted.
        aw_full = Signal()
        aw_word = Signal(word_width)
        w_full = Signal()
        w_data = Signal(data_width)
        w_strb = Signal(lanes)
        b_valid = Signal()
        b_resp = Signal(2)
        m.d.comb += [
            bus.awready.eq(~aw_full),
            bus.wready.eq(~w_full),
            bus.bvalid.eq(b_valid),
            bus.bresp.eq(b_resp),
        ]
        with m.If(bus.awvalid & ~aw_full):
            m.d.sync += [aw_full.eq(1), aw_word.eq(bus.awaddr[shift:])]
        with m.If(bus.wvalid & ~w_full):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        with m.If(b_valid & bus.bready):
            m.d.sync += b_valid.eq(0)

        for register in self._regmap:
            if register.access is Access.PULSE:
                m.d.sync += getattr(self.regs, register.name).eq(0)

        with m.If(aw_full & w_full & ~b_valid):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), b_valid.eq(1),
                         b_resp.eq(AXI_RESP_SLVERR)]
            with m.Switch(aw_word):
                for register, word, index in self._words():
                    if register.access is Access.RO:
                        continue  # default: SLVERR, write ignored
                    port = getattr(self.regs, register.name)
                    base = word * data_width
                    with m.Case(index):
                        m.d.sync += b_resp.eq(AXI_RESP_OKAY)
                        for lane in range(min(lanes, (register.width - base) // 8)):
                            target = port[base + 8 * lane:base + 8 * lane + 8]
                            byte = w_data[8 * lane:8 * lane + 8]
                            if register.access is Access.RW:
                                with m.If(w_strb[lane]):
                                    m.d.sync += target.eq(byte)
                            else:
                                m.d.sync += target.eq(Mux(w_strb[lane], byte, 0))

        # Read path: register the selected word on the AR handshake; hold it until accepted.
        r_valid = Signal()
        r_data = Signal(data_width)
        r_resp = Signal(2)
        m.d.comb += [
            bus.arready.eq(~r_valid),
            bus.rvalid.eq(r_valid),
            bus.rdata.eq(r_data),
            bus.rresp.eq(r_resp),
        ]
        snapshots = {}
        for register in self._regmap:
            if register.access is Access.RO and register.width > data_width:
                snapshots[register.name] = Signal(register.width - data_width,
                                                  name=f"{register.name}_snapshot")
        with m.If(r_valid & bus.rready):
            m.d.sync += r_valid.eq(0)
        with m.If(bus.arvalid & ~r_valid):
            m.d.sync += [r_valid.eq(1), r_data.eq(0), r_resp.eq(AXI_RESP_SLVERR)]
            with m.Switch(bus.araddr[shift:]):
                for register, word, index in self._words():
                    port = getattr(self.regs, register.name)
                    base = word * data_width
                    with m.Case(index):
                        m.d.sync += r_resp.eq(AXI_RESP_OKAY)
                        if register.access is Access.PULSE:
                            pass  # reads return 0
                        elif register.name in snapshots:
                            snapshot = snapshots[register.name]
                            if word == 0:
                                m.d.sync += [r_data.eq(port[:data_width]),
                                             snapshot.eq(port[data_width:])]
                            else:
                                m.d.sync += r_data.eq(snapshot[base - data_width:base])
                        else:
                            m.d.sync += r_data.eq(port[base:base + data_width])
        return m

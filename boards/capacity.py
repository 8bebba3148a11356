"""What a board offers an accelerator: logic, DSP slices, on-chip RAM and off-chip bandwidth.

A :class:`Capacity` is a plain, frozen record. Each board module fills one in from the public
data sheets and board user guides and names them in :attr:`Capacity.sources`; the generator
checks a design's resource estimate against it and copies :meth:`Capacity.as_dict` into the
manifest.

Units
-----
* On-chip RAM is in the data sheets' unit: 1 Kb = 1024 bits, 1 Mb = 1024 Kb. A 36 Kb block RAM
  holds 36 Kb, an UltraRAM block 288 Kb. This is the unit that makes DS190's "19.2 Mb (545)"
  and DS890's "75.9 Mb" for 2160 blocks come out right.
* Off-chip bandwidth is in GB/s with 1 GB = 10**9 bytes, the peak of the interface pins
  (see :func:`peak_bandwidth_gbps`); no refresh, turnaround or controller efficiency is
  taken off.
"""

import dataclasses
import math
import numbers


__all__ = ["Capacity", "peak_bandwidth_gbps", "BRAM36_BITS", "LUTRAM_DEPTH", "bram36_for"]


#: Block RAM and UltraRAM block sizes in Kb (UG473 for 7 series, UG573 for UltraScale+).
BRAM36_KB = 36
URAM_KB = 288

#: Bits of a 36 Kb block RAM (the ``BRAM_size`` of the SBE paper's eq. 7), 7-series UG473.
BRAM36_BITS = BRAM36_KB * 1024

#: Entries of one LUTRAM primitive (RAM64X1D, UG474): a memory this shallow fits in LUTs.
LUTRAM_DEPTH = 64

#: 7-series BRAM36 aspect ratios (data bits incl. parity, depth), UG473 Table 1-5.
_BRAM36_SHAPES = ((72, 512), (36, 1024), (18, 2048), (9, 4096), (4, 8192), (2, 16384),
                  (1, 32768))


def bram36_for(words, depth, word_bits):
    """Fewest 36 Kb block RAMs holding a memory ``words`` words wide (read in one cycle)
    and ``depth`` deep, over the 7-series aspect ratios (bits-only counts, like eq. 7 of
    the SBE paper, miss that a wide, shallow memory is limited by the 72-bit port, not by
    its bits)."""
    best = None
    for width, rows in _BRAM36_SHAPES:
        if width >= word_bits:
            count = math.ceil(words / (width // word_bits)) * math.ceil(depth / rows)
        else:
            count = words * math.ceil(word_bits / width) * math.ceil(depth / rows)
        best = count if best is None else min(best, count)
    return best

#: The Yosys ``synth_xilinx -family`` names this package uses, and the DSP slice each has.
YOSYS_FAMILIES = {
    "xc7":  "DSP48E1",   # 7 series, including the Zynq-7000 programmable logic
    "xcup": "DSP48E2",   # UltraScale+
}


def peak_bandwidth_gbps(*, channels, width_bits, mega_transfers):
    """Peak off-chip bandwidth in GB/s.

    ``channels × width_bits / 8 bytes × mega_transfers × 10**6 / 10**9``: every independent
    interface moves ``width_bits`` data bits (ECC bits not counted) on every transfer, at
    ``mega_transfers`` MT/s (for DDR memories, twice the memory clock).

    Parameters
    ----------
    channels : int
        Number of independent interfaces (SODIMMs, component interfaces, HBM stacks).
    width_bits : int
        Data width of one interface in bits.
    mega_transfers : int or float
        Transfer rate of one interface in MT/s.

    Returns
    -------
    float
        Bandwidth in GB/s (10**9 bytes per second).

    Examples
    --------
    >>> peak_bandwidth_gbps(channels=1, width_bits=64, mega_transfers=1600)
    12.8
    """
    for what, value in (("channels", channels), ("width_bits", width_bits)):
        if not _is_int(value) or value <= 0:
            raise TypeError(f"{what} must be a positive integer, not {value!r}")
    if not _is_number(mega_transfers) or mega_transfers <= 0:
        raise TypeError(f"mega_transfers must be a positive number, not {mega_transfers!r}")
    return channels * width_bits * mega_transfers / 8 / 1000


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Capacity:
    """Resources of one board, with the public documents each figure comes from.

    Parameters
    ----------
    lut : int
        6-input LUTs in the programmable logic.
    ff : int
        Flip-flops in the programmable logic.
    dsp : int
        DSP slices.
    dsp_kind : str
        ``"DSP48E1"`` (7 series) or ``"DSP48E2"`` (UltraScale+).
    bram36 : int
        36 Kb block RAMs.
    uram : int
        288 Kb UltraRAM blocks (0 on 7 series).
    onchip_mb : float
        Block RAM plus UltraRAM in Mb, as the data sheet rounds it (distributed RAM not
        included); it must agree with ``bram36`` and ``uram`` to the rounding (0.05 Mb).
    offchip_kind : str
        What the off-chip memory is, e.g. ``"DDR3-1600, 64-bit SODIMM, 1 GB, PL side"``.
    offchip_gbps : float
        Peak off-chip bandwidth in GB/s, from :func:`peak_bandwidth_gbps`.
    yosys_family : str
        ``synth_xilinx -family`` value: ``"xc7"`` or ``"xcup"``.
    sources : tuple of str
        The data sheets and user guides (document number, title, table or section) that the
        figures come from.

    Attributes
    ----------
    bram_mb : float
        Block RAM alone, in Mb.
    uram_mb : float
        UltraRAM alone, in Mb.

    Raises
    ------
    TypeError
        If a field has the wrong type or is out of range (a count that is not a positive
        integer, an empty string, an empty or non-tuple ``sources``).
    ValueError
        If ``dsp_kind`` or ``yosys_family`` is not one of the known values, or if fields
        conflict: ``dsp_kind`` not the DSP slice of ``yosys_family``, UltraRAM on a 7-series
        part, or ``onchip_mb`` that does not match ``bram36`` and ``uram``.
    """
    lut: int
    ff: int
    dsp: int
    dsp_kind: str
    bram36: int
    uram: int
    onchip_mb: float
    offchip_kind: str
    offchip_gbps: float
    yosys_family: str
    sources: tuple[str, ...]

    def __post_init__(self):
        for name in ("lut", "ff", "dsp", "bram36"):
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if not _is_int(self.uram) or self.uram < 0:
            raise TypeError(f"uram must be a non-negative integer, not {self.uram!r}")
        for name in ("onchip_mb", "offchip_gbps"):
            value = getattr(self, name)
            if not _is_number(value) or value <= 0:
                raise TypeError(f"{name} must be a positive number, not {value!r}")
            object.__setattr__(self, name, float(value))
        for name in ("dsp_kind", "offchip_kind", "yosys_family"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise TypeError(f"{name} must be a non-empty string, not {value!r}")
        if (not isinstance(self.sources, tuple) or not self.sources
                or not all(isinstance(source, str) and source for source in self.sources)):
            raise TypeError(f"sources must be a non-empty tuple of non-empty strings, "
                            f"not {self.sources!r}")

        dsp_kinds = sorted(set(YOSYS_FAMILIES.values()))
        if self.dsp_kind not in dsp_kinds:
            raise ValueError(f"dsp_kind must be one of {_or_list(dsp_kinds)}, "
                             f"not {self.dsp_kind!r}")
        if self.yosys_family not in YOSYS_FAMILIES:
            raise ValueError(f"yosys_family must be one of {_or_list(YOSYS_FAMILIES)}, "
                             f"not {self.yosys_family!r}")

        expected_kind = YOSYS_FAMILIES[self.yosys_family]
        if self.dsp_kind != expected_kind:
            raise ValueError(f"dsp_kind ({self.dsp_kind!r}) does not match yosys_family "
                             f"({self.yosys_family!r}), whose DSP slice is {expected_kind!r}")
        if self.yosys_family == "xc7" and self.uram != 0:
            raise ValueError(f"uram ({self.uram}) must be 0 for yosys_family 'xc7', "
                             f"which has no UltraRAM")
        expected_mb = self.bram_mb + self.uram_mb
        if abs(self.onchip_mb - expected_mb) > 0.05 + 1e-9:
            raise ValueError(f"onchip_mb ({self.onchip_mb}) does not match bram36 "
                             f"({self.bram36}) × {BRAM36_KB} Kb + uram ({self.uram}) × "
                             f"{URAM_KB} Kb = {expected_mb:.1f} Mb (1 Mb = 1024 Kb)")

    @property
    def bram_mb(self):
        return self.bram36 * BRAM36_KB / 1024

    @property
    def uram_mb(self):
        return self.uram * URAM_KB / 1024

    def as_dict(self):
        """The record as a JSON-serialisable dict (``sources`` becomes a list).

        Returns
        -------
        dict
            One key per field, in field order.
        """
        result = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        result["sources"] = list(self.sources)
        return result


def _or_list(values):
    values = [repr(value) for value in values]
    return ", ".join(values[:-1]) + " or " + values[-1]

"""A channel's activation unit: one
:class:`~nnrtl.hw.arith.activation.FloatActivation` datapath holding the sigmoid and the
tanh table (η-LSTM, Sec. V-D: a sigmoid and a tanh unit per channel).

The channel feeds one function at a time and waits for the unit to empty before it
changes function (:class:`~.channel.Channel`), so the two functions never share a cycle
of the pipeline: one subtractor, multiplier and adder serve both, each input carrying
the function that reads its table. Results, latency and throughput are those of two
:class:`FloatActivation` units with the same tables and stages, bit for bit and cycle
for cycle; the LUTs of one unit are saved (:mod:`nnrtl.gen.omni.resources`).
"""

from amaranth.hdl import Array, Cat, Const, Module
from amaranth.lib import data

from ..arith.activation import ActivationTable, FloatActivation

__all__ = ["SharedActivation"]


class SharedActivation(FloatActivation):
    """Table look-up and linear interpolation of one of several tables on one datapath.

    Parameters
    ----------
    tables : tuple of ActivationTable
        Of one format, ``segment_bits`` and ``min_exponent`` (their ``max_exponent`` may
        differ); table ``f`` is read for inputs of ``function`` ``f``.
    adder_stages, multiplier_stages, flush_subnormals, shifts
        As :class:`FloatActivation`.

    Attributes
    ----------
    i : In(stream.Signature(StructLayout({"x": fmt.width, "function": range(len(tables))})))
        ``x`` as a bit pattern and the table to read.
    o : Out(stream.Signature(fmt.width))
        ``f(x)`` as a bit pattern.
    tables : tuple of ActivationTable
    latency : int
        ``2 * adder_stages + multiplier_stages`` cycles, one value per cycle (as
        :class:`FloatActivation`).

    Raises
    ------
    TypeError
        If ``tables`` is not a non-empty tuple of :class:`ActivationTable`, or as
        :class:`FloatActivation`.
    ValueError
        If the tables differ in format, ``segment_bits`` or ``min_exponent``.
    """

    def __init__(self, tables, *, adder_stages=3, multiplier_stages=3, flush_subnormals=False,
                 shifts="lut"):
        if (not isinstance(tables, tuple) or not tables
                or not all(isinstance(table, ActivationTable) for table in tables)):
            raise TypeError(f"tables must be a non-empty tuple of ActivationTable, not "
                            f"{tables!r}")
        first = tables[0]
        for table in tables[1:]:
            for name in ("fmt", "segment_bits", "min_exponent"):
                if getattr(table, name) != getattr(first, name):
                    raise ValueError(f"the tables' {name} differ ({getattr(first, name)} "
                                     f"and {getattr(table, name)})")
        self._tables = tables
        super().__init__(first, adder_stages=adder_stages, multiplier_stages=multiplier_stages,
                         flush_subnormals=flush_subnormals, shifts=shifts)

    def _input_shape(self, fmt):
        return data.StructLayout({"x": fmt.width, "function": range(len(self._tables))})

    @property
    def tables(self):
        return self._tables

    @property
    def table_bits(self):
        """Address bits of one table's region (each table starts at ``f << table_bits``)."""
        return max(table.depth for table in self._tables).bit_length()

    def elaborate(self, platform):
        m = Module()
        tables, bits = self._tables, self.table_bits
        function = self.i.payload.function
        entries = []
        for table in tables:
            entries += [(0, 0)] * ((len(entries) + (1 << bits) - 1) // (1 << bits)
                                   * (1 << bits) - len(entries))
            entries += list(zip(table.y0, table.slope))
        width = max(table.max_exponent for table in tables).bit_length() + 1
        max_exponent = Array(Const(table.max_exponent, width) for table in tables)[function]
        if len(tables) == 1:
            return self._interpolate(m, self.i.payload.x, tables[0], tables[0].max_exponent,
                                     entries)
        return self._interpolate(m, self.i.payload.x, tables[0], max_exponent, entries,
                                 place=lambda address: Cat(address[:bits], function))

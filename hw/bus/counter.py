"""Performance counter for cycles, busy cycles, stall cycles and useful MACs."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


__all__ = ["PerfCounter"]


class PerfCounter(wiring.Component):
    """Counter of enabled cycles (or of an amount added per enabled cycle).

    Each cycle with ``enable`` high adds 1 (or ``increment`` when ``increment_width > 0``)
    to ``count``, which wraps modulo ``2 ** width``. ``clear`` sets ``count`` to 0 and has
    priority over ``enable``.

    Parameters
    ----------
    width : int
        Width of ``count``.
    increment_width : int
        Width of the ``increment`` input; 0 (default) means there is no ``increment`` input and
        each enabled cycle adds 1.

    Attributes
    ----------
    enable : In(1)
    clear : In(1)
    increment : In(increment_width)
        Only if ``increment_width > 0``.
    count : Out(width)
        Registered: reflects ``enable`` / ``clear`` / ``increment`` of the previous cycle.
    latency : int
        1 cycle from ``enable`` to ``count``. Throughput: one update per cycle.

    Raises
    ------
    TypeError
        If ``width`` is not a positive integer or ``increment_width`` not a non-negative
        integer.
    ValueError
        If ``increment_width`` exceeds ``width``.
    """

    def __init__(self, width=64, *, increment_width=0):
        if not isinstance(width, int) or isinstance(width, bool) or width <= 0:
            raise TypeError(f"width must be a positive integer, not {width!r}")
        if (not isinstance(increment_width, int) or isinstance(increment_width, bool)
                or increment_width < 0):
            raise TypeError(f"increment_width must be a non-negative integer, "
                            f"not {increment_width!r}")
        if increment_width > width:
            raise ValueError(f"increment_width ({increment_width}) cannot exceed "
                             f"width ({width})")
        self._width = width
        self._increment_width = increment_width
        members = {"enable": In(1), "clear": In(1)}
        if increment_width > 0:
            members["increment"] = In(increment_width)
        members["count"] = Out(width)
        super().__init__(members)

    @property
    def width(self):
        return self._width

    @property
    def increment_width(self):
        return self._increment_width

    @property
    def latency(self):
        return 1

    def elaborate(self, platform):
        m = Module()
        step = self.increment if self._increment_width > 0 else 1
        with m.If(self.clear):
            m.d.sync += self.count.eq(0)
        with m.Elif(self.enable):
            m.d.sync += self.count.eq(self.count + step)
        return m

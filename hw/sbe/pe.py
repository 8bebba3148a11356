"""A group of SBE processing elements: ``bus_weights`` PEs sharing one slice of the weight
double buffer and one slice of the BB-FIFO memory (Fig. 7).

Each PE multiplies the broadcast vector element of its column lane by its weight and
accumulates; a segment (one step and pass of a block, see :mod:`.controller`) starts from
zero (block 0), from the PE's BB-FIFO entry (the paper's "Exter-Block link") or continues
the running sum (the "Inter-Block link" of merged hidden blocks), and ends by writing the
sum back to the BB-FIFO or, in a step's final block, by leaving it in the accumulator for
the interconnection to capture.
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arith.multiplier import lut_product
from .config import SbeConfig

__all__ = ["PEGroup"]


class PEGroup(wiring.Component):
    """``bus_weights`` PEs: weight buffer slice, multipliers, accumulators, BB-FIFO slice.

    Timing, from the controller's issue cycle ``I`` of a column step: ``r_addr`` at ``I``
    (weight read), ``x`` registered by the engine at ``I + 2`` together with the weights,
    the products at ``I + 3``, where the accumulation uses ``first``/``init_zero``/``last``/
    ``bb_write`` and the BB-FIFO word read with ``bb_read_addr`` at ``I + 2``; ``acc``
    holds a segment's sum from ``I + 4``. The BB-FIFO read is transparent to its write, so
    a segment may start the cycle after the one that wrote its entry.

    Parameters
    ----------
    config : SbeConfig
    lut_pes : int (keyword-only)
        How many of the group's PEs (the last ones) build their multiplier from LUTs
        (:func:`~nnrtl.hw.arith.multiplier.lut_product`) instead of a DSP slice.

    Attributes
    ----------
    w_en, w_addr, w_data : In
        Weight buffer write (one bus beat: ``bus_weights`` words).
    r_addr : In
        Weight buffer read address (at ``I``).
    x : In(signed(operand_width))
        The vector element of this group's column lane (at ``I + 2``).
    valid, first, init_zero, last, bb_write : In(1)
        Column step control at ``I + 3``.
    bb_read_addr : In
        BB-FIFO entry of the segment starting at ``I + 3``, given at ``I + 2``.
    bb_write_addr : In
        BB-FIFO entry written at ``I + 3``.
    acc : Out(ArrayLayout(signed(acc_width), bus_weights))
        The accumulators.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`SbeConfig` or ``lut_pes`` is not an integer from 0
        to ``bus_weights``.
    """

    def __init__(self, config, *, lut_pes):
        if not isinstance(config, SbeConfig):
            raise TypeError(f"config must be an SbeConfig, not {config!r}")
        n = config.bus_weights
        if not isinstance(lut_pes, int) or isinstance(lut_pes, bool) or not 0 <= lut_pes <= n:
            raise TypeError(f"lut_pes must be an integer from 0 to {n} (bus_weights), "
                            f"not {lut_pes!r}")
        self._config = config
        self._lut_pes = lut_pes
        n, ow, aw = config.bus_weights, config.operand_width, config.acc_width
        super().__init__({
            "w_en": In(1),
            "w_addr": In(range(self.weight_depth(config))),
            "w_data": In(unsigned(n * ow)),
            "r_addr": In(range(self.weight_depth(config))),
            "x": In(signed(ow)),
            "valid": In(1),
            "first": In(1),
            "init_zero": In(1),
            "last": In(1),
            "bb_write": In(1),
            "bb_read_addr": In(range(config.bb_fifo_depth)),
            "bb_write_addr": In(range(config.bb_fifo_depth)),
            "acc": Out(data.ArrayLayout(signed(aw), n)),
        })

    @staticmethod
    def weight_depth(config):
        """Entries of the weight double buffer: two halves of ``passes * block steps``."""
        return 2 * config.passes * config.max_block_columns // config.columns_per_cycle

    def elaborate(self, platform):
        m = Module()
        config = self._config
        n, ow, aw = config.bus_weights, config.operand_width, config.acc_width

        m.submodules.weights = weights = Memory(
            shape=unsigned(n * ow), depth=self.weight_depth(config), init=[])
        write = weights.write_port()
        read = weights.read_port(domain="sync")
        m.d.comb += [write.en.eq(self.w_en), write.addr.eq(self.w_addr),
                     write.data.eq(self.w_data), read.addr.eq(self.r_addr)]

        m.submodules.bb_fifo = bb_fifo = Memory(
            shape=unsigned(n * aw), depth=config.bb_fifo_depth, init=[])
        bb_write = bb_fifo.write_port()
        bb_read = bb_fifo.read_port(domain="sync", transparent_for=(bb_write,))
        m.d.comb += bb_read.addr.eq(self.bb_read_addr)

        sums = []
        for pe in range(n):
            weight = Signal(signed(ow), name=f"w{pe}")          # I + 2 (A/B register)
            product = Signal(signed(2 * ow), name=f"m{pe}")     # I + 3 (M register)
            acc = Signal(signed(aw), name=f"acc{pe}")           # I + 4 (P register)
            if pe >= n - self._lut_pes:
                multiply = lut_product(m, weight, self.x, name=f"lut_m{pe}")
            else:
                multiply = weight * self.x
            m.d.sync += [weight.eq(read.data[pe * ow:(pe + 1) * ow]), product.eq(multiply)]
            entry = bb_read.data[pe * aw:(pe + 1) * aw].as_signed()
            base = Mux(self.first, Mux(self.init_zero, 0, entry), acc)
            total = Signal(signed(aw), name=f"sum{pe}")
            m.d.comb += total.eq(base + product)                 # wraps at acc_width
            with m.If(self.valid):
                m.d.sync += acc.eq(total)
            sums.append(total)
            m.d.comb += self.acc[pe].eq(acc)
        m.d.comb += [bb_write.en.eq(self.valid & self.bb_write),
                     bb_write.addr.eq(self.bb_write_addr), bb_write.data.eq(Cat(*sums))]
        return m

"""The convolution engines (spec §3.4): an array of CEs, each of ``tiles`` tiles of ``taps``
MACs; every cycle each tile forms one window dot product and each CE sums its tiles, so the
array yields one partial per CE (lane) per cycle.

Summation order (the golden model's :func:`nnrtl.sim.golden.fpdeep.fp.tree_sum`): the
products of a tile are reduced by a **tile tree** (pairs ``(0,1), (2,3), …`` of the taps in
window raster order, level by level, an odd last item passed to the next level unchanged),
then the tile sums of a CE by a **CE tree** of the same shape over the tiles in order. Every
level is one stage group: fp32 ``hw/arith`` FloatAdd units (``adder_stages`` cycles, shifts
``adder_shifts``), fixed16 one register of exact 48-bit adds; the products are FloatMul units
(``multiplier_stages``, ``multiplier_shifts``) or one register of exact 16 × 16 → 32-bit
products (one DSP48 each, the paper's 1 MAC per DSP).

:func:`ce_array` is a builder, not a component: the FP module calls it with window taps ×
LPRAM rows; the EB module (next task) calls it with its own operand wiring (S_IC CEs of P
tiles over δ windows and the rotated kernels), the PG module likewise, so the three share
this datapath code and the LPRAM.

Hierarchy (:mod:`nnrtl.hw.hierarchy`): every tile is a :class:`MacTile` (fixed16) emitted
once per shape and instantiated per tile (the ``vc709-alexnet`` node, ``P = 3, Q = 21``:
FP's 3 CEs of 21 tiles and EB's 21 CEs of 3 are 126 instances of one module, PG's 567
one-tap tiles of another); its registers load on
stage enables the array's control drives (the enables are ports, so every instance is the
same module). fp32 tiles stay inline, each of their ``hw/arith`` units shared
(:func:`.pipe.float_unit`).
"""

from amaranth.hdl import Cat, Module, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from ..arith.float_mul import FloatMul
from ..checks import check_positive
from ..hierarchy import shared
from .pipe import float_unit, register_stage, unit_stage

__all__ = ["ce_array", "ce_latency", "tree_levels", "MacTile"]


def tree_levels(items):
    """Levels of :func:`tree_sum`'s reduction of ``items`` values."""
    levels = 0
    while items > 1:
        items = (items + 1) // 2
        levels += 1
    return levels


def ce_latency(cfg, tiles, taps):
    """Cycles from operands to sums of :func:`ce_array` without stalls."""
    levels = tree_levels(taps) + tree_levels(tiles)
    if cfg.precision == "fp32":
        return cfg.multiplier_stages + levels * cfg.adder_stages
    return 1 + levels


class MacTile(wiring.Component):
    """One fixed16 tile of ``taps`` MACs: the exact products of the ``a`` and ``w`` words,
    then the tile tree (:func:`tree_levels` levels of exact signed adds, pairs in tap
    order, an odd last item registered alongside), every stage one register.

    Parameters
    ----------
    taps : int
        MACs of the tile (``K²``; 1 in the PG module: the product alone).
    word_bits : int
        Operand width (signed).

    Attributes
    ----------
    a, w : In(ArrayLayout(word_bits, taps))
        Activations and weights of the taps.
    en : In(1 + tree_levels(taps))
        Stage ``s``'s registers load while ``en[s]`` is high (stage 0 the products); the
        array's control (:func:`ce_array`) drives every tile's enables alike.
    sum : Out(signed(2·word_bits + tree_levels(taps)))
        The tile's sum, the width the tree grows to (the first tap is in every level's
        first pair).

    Latency and throughput: ``1 + tree_levels(taps)`` stages, one window per cycle while
    the enables are high; the result moves only with the enables (a stalled stage holds).

    Raises
    ------
    TypeError
        ``taps`` or ``word_bits`` not a positive integer.
    """

    def __init__(self, taps, *, word_bits=16):
        check_positive("taps", taps)
        check_positive("word_bits", word_bits)
        self._taps, self._word_bits = taps, word_bits
        super().__init__({
            "a": In(data.ArrayLayout(word_bits, taps)),
            "w": In(data.ArrayLayout(word_bits, taps)),
            "en": In(self.stages),
            "sum": Out(signed(2 * word_bits + tree_levels(taps))),
        })

    @property
    def stages(self):
        """Register stages: products and the tree's levels."""
        return 1 + tree_levels(self._taps)

    def elaborate(self, platform):
        m = Module()
        values = [Value.cast(self.a[t]).as_signed() * Value.cast(self.w[t]).as_signed()
                  for t in range(self._taps)]
        for stage in range(self.stages):
            if stage:
                pairs = [values[n] + values[n + 1] for n in range(0, len(values) - 1, 2)]
                values = pairs + ([values[-1]] if len(values) % 2 else [])
            registers = [Signal(v.shape(), name=f"s{stage}_{n}") for n, v in enumerate(values)]
            with m.If(self.en[stage]):
                m.d.sync += [r.eq(v) for r, v in zip(registers, values)]
            values = registers
        m.d.comb += self.sum.eq(values[0])
        return m


def _reduce(m, cfg, flow, groups, sides, name):
    """Reduce every list of ``groups`` (all the same length) by the tree order, one level
    per stage group; returns the flow, one sum per group and the delayed ``sides``."""
    level = 0
    while len(groups[0]) > 1:
        count = len(groups[0])
        pairs = [(g[n], g[n + 1]) for g in groups for n in range(0, count - 1, 2)]
        odd = [g[-1] for g in groups] if count % 2 else []
        stage = f"{name}_l{level}"
        if cfg.precision == "fp32":
            units = [float_unit(m, f"{stage}_{n}", FloatAdd(FP32, stages=cfg.adder_stages,
                                                                shifts=cfg.adder_shifts))
                     for n in range(len(pairs))]
            flow, sums, delayed = unit_stage(
                m, flow, units, [{"a": a, "b": b, "subtract": 0} for a, b in pairs],
                odd + sides, stage)
        else:
            flow, registered = register_stage(
                m, flow, [(Value.cast(a).as_signed() + Value.cast(b).as_signed())
                          for a, b in pairs] + odd + sides, stage)
            sums, delayed = registered[:len(pairs)], registered[len(pairs):]
        odd, sides = delayed[:len(odd)], delayed[len(odd):]
        per = count // 2
        groups = [sums[k * per:(k + 1) * per] + ([odd[k]] if odd else [])
                  for k in range(len(groups))]
        level += 1
    return flow, [g[0] for g in groups], sides


def _tiles(m, cfg, flow, operands, sides, name):
    """fixed16: a shared :class:`MacTile` per tile; the sides ride through registers of the
    same stages (the control's register stages, whose enables drive the tiles)."""
    taps = len(operands[0][0])
    enables = []
    for stage in range(1 + tree_levels(taps)):
        enables.append(flow.ready)          # register_stage drives it: the stage's enable
        flow, sides = register_stage(m, flow, sides,
                                     f"{name}_mul" if stage == 0 else f"{name}_tile_l{stage - 1}")
    sums = []
    for lane, tiles in enumerate(operands):
        for n, tile in enumerate(tiles):
            unit = MacTile(taps, word_bits=cfg.word_bits)
            m.submodules[f"{name}_tile_{lane}_{n}"] = shared(unit, key=(taps, cfg.word_bits))
            m.d.comb += [unit.en.eq(Cat(enables)),
                         *(unit.a[t].eq(a) for t, (a, _) in enumerate(tile)),
                         *(unit.w[t].eq(w) for t, (_, w) in enumerate(tile))]
            sums.append(unit.sum)
    return flow, sums, sides


def ce_array(m, cfg, flow, operands, sides, name="ce"):
    """The CE array on ``operands[lane][tile][tap] = (activation, weight)`` (word Values)
    of the items of ``flow``: returns the flow of the sums, ``sums[lane]`` (fp32 bit
    patterns, fixed16 signed 48-bit) and ``sides`` delayed alike."""
    lanes, tiles, taps = len(operands), len(operands[0]), len(operands[0][0])
    flat = [pair for lane in operands for tile in lane for pair in tile]
    if cfg.precision == "fp32":
        units = [float_unit(m, f"{name}_mul_{n}", FloatMul(FP32, stages=cfg.multiplier_stages,
                                                           shifts=cfg.multiplier_shifts))
                 for n in range(len(flat))]
        flow, products, sides = unit_stage(m, flow, units, [{"a": w, "b": a} for a, w in flat],
                                           sides, f"{name}_mul")
        groups = [products[n * taps:(n + 1) * taps] for n in range(lanes * tiles)]
        flow, tile_sums, sides = _reduce(m, cfg, flow, groups, sides, f"{name}_tile")
    else:
        flow, tile_sums, sides = _tiles(m, cfg, flow, operands, sides, name)
    groups = [tile_sums[n * tiles:(n + 1) * tiles] for n in range(lanes)]
    flow, sums, sides = _reduce(m, cfg, flow, groups, sides, f"{name}_ce")
    return flow, sums, sides

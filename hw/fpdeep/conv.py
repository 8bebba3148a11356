"""The convolution engines (spec §3.4): an array of CEs, each of ``tiles`` tiles of ``taps``
MACs; every cycle each tile forms one window dot product and each CE sums its tiles, so the
array yields one partial per CE (lane) per cycle.

Summation order (the golden model's :func:`nnrtl.sim.golden.fpdeep.fp.tree_sum`): the
products of a tile are reduced by a **tile tree** (pairs ``(0,1), (2,3), …`` of the taps in
window raster order, level by level, an odd last item passed to the next level unchanged),
then the tile sums of a CE by a **CE tree** of the same shape over the tiles in order. Every
level is one stage group: fp32 ``hw/arith`` FloatAdd units (``adder_stages`` cycles), fixed16
one register of exact 48-bit adds; the products are FloatMul units (``multiplier_stages``) or
one register of exact 16 × 16 → 32-bit products (one DSP48 each, the paper's 1 MAC per DSP).

:func:`ce_array` is a builder, not a component: the FP module calls it with window taps ×
LPRAM rows; the EB module (next task) calls it with its own operand wiring (S_IC CEs of P
tiles over δ windows and the rotated kernels), the PG module likewise, so the three share
this datapath code and the LPRAM.
"""

from amaranth.hdl import Value

from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32
from ..arith.float_mul import FloatMul
from .pipe import register_stage, unit_stage

__all__ = ["ce_array", "ce_latency", "tree_levels"]


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
            units = [FloatAdd(FP32, stages=cfg.adder_stages) for _ in pairs]
            for n, unit in enumerate(units):
                m.submodules[f"{stage}_{n}"] = unit
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


def ce_array(m, cfg, flow, operands, sides, name="ce"):
    """The CE array on ``operands[lane][tile][tap] = (activation, weight)`` (word Values)
    of the items of ``flow``: returns the flow of the sums, ``sums[lane]`` (fp32 bit
    patterns, fixed16 signed 48-bit) and ``sides`` delayed alike."""
    lanes, tiles, taps = len(operands), len(operands[0]), len(operands[0][0])
    flat = [pair for lane in operands for tile in lane for pair in tile]
    if cfg.precision == "fp32":
        units = [FloatMul(FP32, stages=cfg.multiplier_stages) for _ in flat]
        for n, unit in enumerate(units):
            m.submodules[f"{name}_mul_{n}"] = unit
        flow, products, sides = unit_stage(m, flow, units, [{"a": w, "b": a} for a, w in flat],
                                           sides, f"{name}_mul")
    else:
        flow, registered = register_stage(
            m, flow, [Value.cast(a).as_signed() * Value.cast(w).as_signed() for a, w in flat]
            + sides, f"{name}_mul")
        products, sides = registered[:len(flat)], registered[len(flat):]
    groups = [products[n * taps:(n + 1) * taps] for n in range(lanes * tiles)]
    flow, tile_sums, sides = _reduce(m, cfg, flow, groups, sides, f"{name}_tile")
    groups = [tile_sums[n * tiles:(n + 1) * tiles] for n in range(lanes)]
    flow, sums, sides = _reduce(m, cfg, flow, groups, sides, f"{name}_ce")
    return flow, sums, sides

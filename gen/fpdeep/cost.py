"""Cost models of a MAC unit and the per-node budget (spec §3.9), and the allocation of MAC
units to the segments of a node (spec §2.8, §2.11 step 4).

Two cost models, chosen by the precision:

* ``fixed16`` = the **paper** model: one DSP48E1 per MAC at 200 MHz (the VC709's system
  clock), the only reading under which Table 6's GOPS come out of 3,600 DSPs at ~80% (spec
  §3.9); 16-bit words in buffers and on links. No LUTs per MAC (the DSP slice does a 16 x 16
  multiply-accumulate alone).
* ``fp32``: the units the fp32 CE array (:mod:`nnrtl.hw.fpdeep.conv`) builds per MAC, one
  ``hw/arith`` FloatMul and one FloatAdd (exact subnormals, PG's adders combinational, shifts
  in LUTs or on DSP slices), by Yosys ``synth_xilinx -family xc7`` (:func:`measure_fp32_mac`,
  :data:`FP32_VARIANTS`); the mapper takes the variant with the most MAC units on the board
  (:func:`fp32_model_for`; the VC709: LUT multipliers and DSP adders, 6 DSP48E1 + 696 LUT,
  435 units); 32-bit words; 200 MHz on the VC709 assumed, not a timing result.

A node's budget of MAC units is ``min(u · DSP / dsp_per_mac, LUT_SHARE · LUT /
lut_per_mac)``, ``u`` the DSP utilization cap (default 0.85, spec §2.11 step 4:
0.8-0.85 matches the paper's ~80%), ``LUT_SHARE`` the platform's
(:data:`nnrtl.gen.engines.LUT_SHARE`).

A segment runs its FP, EB and PG modules (EB omitted on the first layer) on ``P`` CEs of
``Q`` tiles of ``K x K`` MACs each: ``modules · P · Q · K²`` MAC units, and
``W_out² · ⌈n_out/P⌉ · ⌈n_in/Q⌉`` cycles per sample (spec §2.8, ``Q < S_IC`` allowed:
input channels time-multiplexed in a CE), ``n_out`` = OC and ``n_in`` = S_IC under ICP,
``n_out`` = S_OC and ``n_in`` = IC under OCP.

A segment's FP line buffer takes ``m`` input pixels a cycle (``line_pixels``, a mapped
quantity: :func:`line_pixels_for`) and an image's first pixel once the previous image's
windows have all left, so a segment cannot take fewer than ``W_in² / m`` cycles a sample,
and when the input sets its pace it spends :func:`line_buffer_cycles` (the windows still
queued after the last pixel added). The mapper gives a layer whose input pixels outnumber
the period (AlexNet's conv1: 224² pixels, stride 4) the least ``m`` that keeps it within the
period its share of the DSPs sets, at most one input row a cycle and what its input link
delivers; the banked form's block RAM (:func:`line_buffer_words`) goes into the node's
storage check. Decision: ``m`` pixels a cycle is modelled (mapper and cluster simulator);
the RTL line buffer (:mod:`nnrtl.hw.fpdeep.line_buffer`) takes one pixel a cycle, so a
node whose mapping has ``m > 1`` is not yet built as mapped.
"""

import dataclasses
import functools
import math

import numpy as np

from ..engines import LUT_SHARE
from ..errors import UsageError

__all__ = ["CostModel", "COST_MODELS", "PRECISIONS", "DSP_CAP", "FP32_VARIANTS", "fp32_model",
           "fp32_model_for", "measure_fp32_mac", "unit_budget", "allocate", "segment_cycles",
           "line_buffer_cycles", "line_pixels_for", "line_buffer_words"]

#: Default DSP utilization cap ``u``.
DSP_CAP = 0.85


@dataclasses.dataclass(frozen=True, kw_only=True)
class CostModel:
    """What one MAC unit costs and how fast it runs.

    Attributes
    ----------
    name : str
        ``"paper"`` or ``"fp32"``.
    precision : str
    dsp_per_mac, lut_per_mac : int
    word_bits : int
        Width of a word in the buffers and on the links.
    clock_hz : float
    source : str
    multiplier_shifts, adder_shifts : str or None
        fp32: the shifts of the MAC's FloatMul and FloatAdd (what ``FpConfig`` builds);
        None for fixed16.
    """

    name: str
    precision: str
    dsp_per_mac: int
    lut_per_mac: int
    word_bits: int
    clock_hz: float
    source: str
    multiplier_shifts: str | None = None
    adder_shifts: str | None = None

    def words_per_bram36(self):
        """Words one 36 Kb block RAM holds (its data bits, parity left out: 1024 x 32,
        2048 x 16)."""
        return 32 * 1024 // self.word_bits


#: fp32 MAC variants, ``(multiplier_shifts, adder_shifts) -> (DSP48E1, LUT)`` per MAC unit:
#: :func:`measure_fp32_mac` (Yosys xc7, flattened, out of context). The units (3-stage
#: FloatMul; FloatAdd of 3 stages in the FP and EB trees, of 0 in PG's read-add-write):
#: multiplier lut 375 LUT + 2 DSP, dsp 305 + 4; adder lut 516 (0 stages 511), dsp 307 + 4
#: (349 + 4).
FP32_VARIANTS = {
    ("lut", "lut"): (2, 890),
    ("lut", "dsp"): (6, 696),
    ("dsp", "lut"): (4, 820),
    ("dsp", "dsp"): (8, 626),
}


def fp32_model(multiplier_shifts="lut", adder_shifts="dsp"):
    """The fp32 :class:`CostModel` of one variant of :data:`FP32_VARIANTS`
    (``KeyError`` for another)."""
    dsp, lut = FP32_VARIANTS[multiplier_shifts, adder_shifts]
    return CostModel(
        name="fp32", precision="fp32", dsp_per_mac=dsp, lut_per_mac=lut, word_bits=32,
        clock_hz=200e6, multiplier_shifts=multiplier_shifts, adder_shifts=adder_shifts,
        source=f"hw/arith FloatMul (shifts {multiplier_shifts}) + FloatAdd (shifts "
               f"{adder_shifts}), 3 stages each, the fp32 CE's units per MAC, Yosys "
               f"synth_xilinx xc7: {dsp} DSP + {lut} LUT per MAC; clock 200 MHz assumed, not "
               f"measured")


COST_MODELS = {
    "fixed16": CostModel(
        name="paper", precision="fixed16", dsp_per_mac=1, lut_per_mac=0, word_bits=16,
        clock_hz=200e6,
        source="the paper's Table 6 figures: 1 DSP48E1 per MAC per cycle at 200 MHz (spec §3.9)"),
    "fp32": fp32_model(),
}


def fp32_model_for(capacity, dsp_cap=DSP_CAP, lut_share=LUT_SHARE, pinned=None):
    """The fp32 variant of :data:`FP32_VARIANTS` with the most MAC units on a board of
    ``capacity`` (:func:`unit_budget`), the fewer DSP slices per MAC on a tie; ``pinned``
    (``{"multiplier_shifts": …, "adder_shifts": …}``, None values free) restricts it."""
    pinned = {k: v for k, v in (pinned or {}).items() if v is not None}
    keys = [key for key in FP32_VARIANTS
            if pinned.get("multiplier_shifts", key[0]) == key[0]
            and pinned.get("adder_shifts", key[1]) == key[1]]

    def units(key):
        model = fp32_model(*key)
        return unit_budget(model, capacity, dsp_cap, lut_share)[0], -model.dsp_per_mac
    return fp32_model(*max(keys, key=units))


def measure_fp32_mac(family="xc7", multiplier_shifts="lut", adder_shifts="dsp"):
    """Yosys' ``{lut, dsp}`` of one fp32 MAC unit as the node builds it, with the given
    shifts (logic LUTs and LUT-RAM): a :class:`~nnrtl.hw.arith.float_mul.FloatMul` at
    :class:`~nnrtl.hw.fpdeep.config.FpConfig`'s default stages and a
    :class:`~nnrtl.hw.arith.float_add.FloatAdd`, two of three MAC units' (FP's and EB's
    trees, :mod:`nnrtl.hw.fpdeep.conv`) at the default adder stages and one of three
    (PG's read-add-write, :mod:`nnrtl.hw.fpdeep.pg`) combinational: the adders' mean,
    rounded up. What :data:`FP32_VARIANTS` holds. Seconds of Yosys."""
    from ...hw.arith.float_add import FloatAdd
    from ...hw.arith.float_format import FP32
    from ...hw.arith.float_mul import FloatMul
    from ...hw.fpdeep.config import FpConfig
    from ..synth import measure_unit

    def count(unit):
        counts = measure_unit(unit, family)
        return np.array([counts["lut"] + counts["lut_memory"], counts["dsp"]])

    stages = {field.name: field.default for field in dataclasses.fields(FpConfig)}
    multiplier = count(FloatMul(FP32, stages=stages["multiplier_stages"],
                                shifts=multiplier_shifts))
    adders = (2 * count(FloatAdd(FP32, stages=stages["adder_stages"], shifts=adder_shifts))
              + count(FloatAdd(FP32, stages=0, shifts=adder_shifts)))
    lut, dsp = multiplier + -(-adders // 3)
    return {"lut": int(lut), "dsp": int(dsp)}


#: ``--precision`` values.
PRECISIONS = tuple(COST_MODELS)


def unit_budget(model, capacity, dsp_cap=DSP_CAP, lut_share=LUT_SHARE):
    """MAC units a node may have, and which resource limits it (``"dsp"`` or ``"lut"``)."""
    if not isinstance(dsp_cap, (int, float)) or not 0 < dsp_cap <= 1:
        raise UsageError(f"dsp_cap must be a number in (0, 1], not {dsp_cap!r}")
    by_dsp = int(dsp_cap * capacity.dsp) // model.dsp_per_mac
    if model.lut_per_mac:
        by_lut = int(lut_share * capacity.lut) // model.lut_per_mac
        if by_lut < by_dsp:
            return by_lut, "lut"
    return by_dsp, "dsp"


def segment_cycles(pixels, n_out, n_in, p, q):
    """Cycles per sample of a segment with ``p`` CEs of ``q`` tiles."""
    return pixels * math.ceil(n_out / p) * math.ceil(n_in / q)


def line_buffer_cycles(w_in, k, stride, pad, per_window, line_pixels=1):
    """Cycles a sample of a segment on its FP line buffer, the images back to back and the
    input never late: ``line_pixels`` = ``m`` pixels a cycle, pixel ``i`` of an image taken
    at cycle ``i / m``, a window ready one cycle after its last pixel in the map is taken
    (:mod:`nnrtl.hw.fpdeep.line_buffer`), the windows served in raster order ``per_window``
    cycles each, the next image's first pixel taken when the last window has left. So
    ``⌈max_j (last_j / m + 1 + (n − j) · per_window)⌉`` over the ``n`` windows ``j``
    (``last_j`` the index of window ``j``'s last pixel): ``j = 0`` the fill and the
    compute, the last windows the input and the windows queued behind it.
    """
    w_out = (w_in + 2 * pad - k) // stride + 1
    last = np.clip(np.arange(w_out) * stride + k - 1 - pad, 0, w_in - 1)
    ready = (last[:, None] * w_in + last[None, :]).ravel() / line_pixels + 1
    n = ready.size
    return math.ceil(np.max(ready + (n - np.arange(n)) * per_window) - 1e-9)


def line_pixels_for(w_in, k, stride, pad, per_window, period, most):
    """Pixels a cycle a segment's FP line buffer takes: the least ``m`` in ``1..most``
    whose :func:`line_buffer_cycles` fit ``period``, else ``most`` (the line buffer then
    sets the period). ``1`` when the input does not pace the segment (``W_in² <
    per_window · W_out²``: its compute covers the input; the fill is not charged) or its
    ``W_in²`` pixels fit ``period`` one a cycle (the line buffer as built: only its fill
    may then exceed the period, and sets it)."""
    w_out = (w_in + 2 * pad - k) // stride + 1
    if w_in ** 2 < per_window * w_out ** 2 or w_in ** 2 <= period:
        return 1
    for m in range(1, max(1, most) + 1):
        if line_buffer_cycles(w_in, k, stride, pad, per_window, m) <= period:
            return m
    return max(1, most)


def line_buffer_words(n_in, k, w_in, line_pixels=1):
    """Words of one line buffer of ``n_in`` channels: ``(K − 1) · W_in + K`` pixels at one
    pixel a cycle; at ``m > 1`` the banked form (:mod:`nnrtl.hw.fpdeep.line_buffer`) with
    ``C = max(K, m)`` column banks, so ``m`` pixels of a row go to ``m`` banks at once: ``K``
    rows of ``C · ⌈W_in / C⌉`` pixels."""
    if line_pixels <= 1:
        return n_in * ((k - 1) * w_in + k)
    banks = max(k, line_pixels)
    return n_in * k * banks * -(-w_in // banks)


def _cheapest(pixels, n_out, n_in, period):
    """Least ``P · Q`` meeting ``period``: ``(P, Q)`` or ``None`` when even ``P = n_out``,
    ``Q = n_in`` is too slow."""
    per_pixel = period // pixels
    if per_pixel < 1:
        return None
    groups = np.arange(1, min(n_out, per_pixel) + 1)          # ⌈n_out / P⌉
    p = -(-n_out // groups)
    rounds = np.minimum(per_pixel // groups, n_in)            # ⌈n_in / Q⌉ allowed
    q = -(-n_in // rounds)
    cost = p * q
    best = np.flatnonzero(cost == cost.min())
    cycles = pixels * (-(-n_out // p[best])) * (-(-n_in // q[best]))
    pick = best[int(np.argmin(cycles))]
    return int(p[pick]), int(q[pick])


@functools.lru_cache(maxsize=1 << 16)
def segment_units(shape, period):
    """MAC units a segment (``shape``: ``pixels, n_out, n_in, k, modules``) needs to finish a
    sample in ``period`` cycles: ``(units, P, Q)`` or ``None``."""
    pixels, n_out, n_in, k, modules = shape
    found = _cheapest(pixels, n_out, n_in, period)
    if found is None:
        return None
    p, q = found
    return modules * p * q * k * k, p, q


def allocate(shapes, period):
    """``[(units, P, Q), ...]`` for the segments at ``period``, or ``None`` if one cannot
    make it."""
    result = []
    for shape in shapes:
        found = segment_units(tuple(shape), int(period))
        if found is None:
            return None
        result.append(found)
    return result


def fastest_period(shapes, budget):
    """The shortest period (cycles per sample) at which the segments ``shapes`` of a node
    fit ``budget`` MAC units, or ``None`` if one tile per module per segment does not fit."""
    least = sum(modules * k * k for _, _, _, k, modules in shapes)
    if least > budget:
        return None
    work = sum(pixels * n_out * n_in * k * k * modules for pixels, n_out, n_in, k, modules
               in shapes)
    low = max(1, math.ceil(work / budget) - 1)                # too short: cannot fit
    high = max(pixels * n_out * n_in for pixels, n_out, n_in, _, _ in shapes)
    while high - low > 1:
        middle = (low + high) // 2
        found = allocate(shapes, middle)
        if found is not None and sum(u for u, _, _ in found) <= budget:
            high = middle
        else:
            low = middle
    return high

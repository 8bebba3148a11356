# amaranth: UnusedElaboratable=no
"""Resource model of the FARNN engine: DSP slices, LUTs, flip-flops, UltraRAM and block RAM
per PE, per chain, per MVM unit, of the activation units and of the engine.

Logic (DSP, LUT, FF) of the units the engine repeats is Yosys' count of their RTL, measured
once at the default stages (``adder_stages`` 4, ``multiplier_stages`` 3), fp32, on
``xcup`` (UltraScale+), flattened, out of context, by::

    .venv/bin/python -c "from nnrtl.gen.farnn.resources import measure; print(measure('pe'))"

(:func:`measure`: ``nnrtl.sim.runner.to_verilog`` then ``nnrtl.gen.synth.run_yosys``,
``synth_xilinx -family xcup -flatten``); the counts are :data:`UNIT_LOGIC`.

The PEs are measured as the chain builds them: two by two in a
:class:`~nnrtl.hw.farnn.pair.PEPair` (``pair4096`` ... ``pair8192_none``, their shared weight
memory marked ``ram_style = "ultra"`` and mapped by ``synth_xilinx -uram`` to one URAM288 at
4K words, two at 8K) and alone (``pe4096`` ..., an odd chain's tail, one URAM288 at either
depth), at every ``dsp_usage`` (:mod:`~nnrtl.hw.arith.dsp_usage`; no suffix ``"some"``,
``_max`` the multiplier's right shift and the accumulator adder's two shifts as products on
DSP slices too, ``_none`` the multiplier's product in LUTs; the fold adder ``add`` /
``add_max`` likewise), plus ``normal``, the chain head's normal-form converter
(:class:`~nnrtl.hw.arith.float_normal.ToNormalForm`). A PE's LUTs include the 24-28
LUT-RAM LUTs of its 2-deep result FIFO.

Where a PE's LUTs go, before and after the normal form and the DSP shifts: the FARNN
documentation's resource section (``docs/engines/farnn/index.md``).
(LUTs are logic LUTs plus LUT-RAM/SRL: the PEs' 28 and the activation units' delay lines,
276, 478, 330, 276, counted as ``lut_memory``.) A chain is its pairs, an odd tail and the
head's converter (nearest-neighbour wiring, nothing else); an MVM unit is ``chains`` chains, ``split - 1`` rows of
``chains / split`` fold adders and ``split`` vector buffers. Other stage counts use the same
figures (an approximation: stages change flip-flops, hardly LUTs or DSPs).

Memories, from the configuration: the PEs' weights are ``weight_depth`` normal-form
words of 33 bits each. On UltraScale+ (``xcup``) in UltraRAM (URAM288 = 4K x 72 b): a
pair's two 36-bit lanes, one URAM per 4K words, so two 4K PEs in one (the paper's Sec.
6.1) and one a PE at 8K; a lone tail one URAM; on 7-series (``xc7``) in 36 Kb block RAMs
(:func:`~nnrtl.boards.capacity.bram36_for`: 4 per 4K PE, 8 per 8K). The MVM units' vector
buffers (``split`` per unit, ``batch x n_in`` words, the largest input of the passes) in
block RAM. Not counted: the engine top's buffers (h, c, save stream FIFOs), AXI and
PCIe/DMA logic; the LUT rule's 30% margin (:data:`~nnrtl.gen.engines.LUT_SHARE`) is for
them.
"""

import dataclasses
import functools
import math

from ...boards.capacity import bram36_for
from ...hw.arith.float_format import FP32
from ...hw.arith.float_normal import normal_width
from ...hw.farnn.config import FP32_BITS
from ...hw.farnn.pair import lane_bits

__all__ = ["UNIT_LOGIC", "ResourceEstimate", "resource_estimate", "resources",
           "pe_memory", "pair_memory", "chain_memory", "URAM_WORDS", "measure", "MEASURED_FAMILY"]

#: Words of one URAM288 at its 72-bit width.
URAM_WORDS = 4096

#: The family the logic figures were measured for.
MEASURED_FAMILY = "xcup"

#: Logic of one unit, Yosys-measured (module docstring): ``{name: {lut, lut_memory, ff,
#: dsp, bram36}}``.
UNIT_LOGIC = {
    "pe4096": {"lut": 876, "lut_memory": 28, "ff": 476, "dsp": 2, "bram36": 0},
    "pe8192": {"lut": 907, "lut_memory": 28, "ff": 478, "dsp": 2, "bram36": 0},
    "pe4096_max": {"lut": 649, "lut_memory": 24, "ff": 504, "dsp": 6, "bram36": 0},
    "pe8192_max": {"lut": 682, "lut_memory": 24, "ff": 506, "dsp": 6, "bram36": 0},
    "pair4096": {"lut": 1773, "lut_memory": 56, "ff": 952, "dsp": 4, "bram36": 0},
    "pair8192": {"lut": 1831, "lut_memory": 56, "ff": 956, "dsp": 4, "bram36": 0},
    "pair4096_max": {"lut": 1313, "lut_memory": 48, "ff": 1008, "dsp": 12, "bram36": 0},
    "pair8192_max": {"lut": 1360, "lut_memory": 48, "ff": 1012, "dsp": 12, "bram36": 0},
    "pe4096_none": {"lut": 1653, "lut_memory": 28, "ff": 476, "dsp": 0, "bram36": 0},
    "pe8192_none": {"lut": 1677, "lut_memory": 28, "ff": 478, "dsp": 0, "bram36": 0},
    "pair4096_none": {"lut": 3303, "lut_memory": 56, "ff": 952, "dsp": 0, "bram36": 0},
    "pair8192_none": {"lut": 3359, "lut_memory": 56, "ff": 956, "dsp": 0, "bram36": 0},
    "normal": {"lut": 109, "lut_memory": 0, "ff": 0, "dsp": 0, "bram36": 0},
    "add": {"lut": 499, "lut_memory": 4, "ff": 204, "dsp": 0, "bram36": 0},
    "add_max": {"lut": 342, "lut_memory": 0, "ff": 231, "dsp": 3, "bram36": 0},
    "fw_lstm": {"lut": 10444, "lut_memory": 276, "ff": 5594, "dsp": 16, "bram36": 17.5},
    "bw_lstm": {"lut": 10888, "lut_memory": 478, "ff": 4931, "dsp": 34, "bram36": 3.5},
    "fw_gru": {"lut": 8207, "lut_memory": 330, "ff": 4156, "dsp": 12, "bram36": 10.5},
    "bw_gru": {"lut": 7096, "lut_memory": 276, "ff": 3031, "dsp": 22, "bram36": 0},
}


def _units():
    from ...hw.arith.float import FP32
    from ...hw.arith.float_add import FloatAdd
    from ...hw.arith.float_normal import ToNormalForm
    from ...hw.farnn.activation import BwActivation, FwActivation
    from ...hw.farnn.pair import PEPair
    from ...hw.farnn.pe import FarnnPE
    return {"pe4096": lambda: FarnnPE(FP32, weight_depth=4096),
            "pe8192": lambda: FarnnPE(FP32, weight_depth=8192),
            "pe4096_max": lambda: FarnnPE(FP32, weight_depth=4096, dsp_usage="max"),
            "pe8192_max": lambda: FarnnPE(FP32, weight_depth=8192, dsp_usage="max"),
            "pe4096_none": lambda: FarnnPE(FP32, weight_depth=4096, dsp_usage="none"),
            "pe8192_none": lambda: FarnnPE(FP32, weight_depth=8192, dsp_usage="none"),
            "pair4096": lambda: PEPair(FP32, weight_depth=4096),
            "pair8192": lambda: PEPair(FP32, weight_depth=8192),
            "pair4096_max": lambda: PEPair(FP32, weight_depth=4096, dsp_usage="max"),
            "pair8192_max": lambda: PEPair(FP32, weight_depth=8192, dsp_usage="max"),
            "pair4096_none": lambda: PEPair(FP32, weight_depth=4096, dsp_usage="none"),
            "pair8192_none": lambda: PEPair(FP32, weight_depth=8192, dsp_usage="none"),
            "normal": lambda: ToNormalForm(FP32),
            "add": lambda: FloatAdd(FP32, stages=4),
            "add_max": lambda: FloatAdd(FP32, stages=4, shifts="dsp"),
            "fw_lstm": lambda: FwActivation("lstm"), "bw_lstm": lambda: BwActivation("lstm"),
            "fw_gru": lambda: FwActivation("gru"), "bw_gru": lambda: BwActivation("gru")}


def measure(name, family=MEASURED_FAMILY):
    """Synthesize unit ``name`` of :data:`UNIT_LOGIC` with Yosys and return its counts
    (``lut`` the logic LUTs, ``lut_memory``, ``ff``, ``dsp``, ``bram36``; a PE's URAM is
    :func:`pe_memory`'s). Minutes for an activation unit."""
    from ..synth import measure_unit

    return measure_unit(_units()[name](), family)


def pe_memory(weight_depth, family):
    """``(uram, bram36)`` of a lone PE's weight memory (``weight_depth`` normal-form
    words of 33 bits): one URAM288 at 4K or 8K words on ``xcup`` (what Yosys maps it to:
    8K x 33 as 4K x 66); block RAMs on ``xc7``."""
    if family == "xcup":
        return 1, 0
    return 0, bram36_for(1, weight_depth, normal_width(FP32))


def pair_memory(weight_depth, family):
    """``(uram, bram36)`` of a :class:`~nnrtl.hw.farnn.pair.PEPair`'s shared memory
    (``weight_depth`` words of two 36-bit lanes): one URAM288 (4K x 72) per 4K words on
    ``xcup``, so two 4K PEs in one, as the paper packs them; block RAMs on ``xc7``."""
    if family == "xcup":
        return math.ceil(weight_depth / URAM_WORDS), 0
    return 0, bram36_for(1, weight_depth, 2 * lane_bits(FP32))


def chain_memory(chain_length, weight_depth, family):
    """``(uram, bram36)`` of one chain's weight memories: ``chain_length // 2`` pairs
    and an odd tail's own memory."""
    pairs, lone = divmod(chain_length, 2)
    pair, single = pair_memory(weight_depth, family), pe_memory(weight_depth, family)
    return tuple(pairs * p + lone * q for p, q in zip(pair, single))


@dataclasses.dataclass(frozen=True)
class ResourceEstimate:
    """Resources of a configuration, by part.

    Attributes
    ----------
    per_pe, per_chain, per_unit, activation : dict
        ``{lut, ff, dsp, uram, bram36}`` of one PE (half a pair, its share of the weight
        memory included; a lone PE in a chain of one), one chain (its pairs, an odd
        tail, the head's normal-form converter), one MVM unit (its chains, fold adders,
        vector buffers), the FW and BW activation units.
    total : dict
        The engine: ``units`` MVM units and the two activation units; ``uram`` rounded
        up to whole blocks, ``bram36`` too.
    pes : int
    """

    per_pe: dict
    per_chain: dict
    per_unit: dict
    activation: dict
    total: dict
    pes: int

    def needs(self):
        """What :func:`nnrtl.gen.engines.check_fit` checks: ``dsp``, ``lut``, ``uram``,
        ``bram36``."""
        return {key: self.total[key] for key in ("dsp", "lut", "uram", "bram36")}


def _scaled(counts, factor):
    return {key: value * factor for key, value in counts.items()}


def _sum(*parts):
    keys = ("lut", "ff", "dsp", "uram", "bram36")
    return {key: sum(part.get(key, 0) for part in parts) for key in keys}


def _logic(name):
    unit = UNIT_LOGIC[name]
    return {"lut": unit["lut"] + unit["lut_memory"], "ff": unit["ff"], "dsp": unit["dsp"],
            "bram36": unit["bram36"]}


@functools.cache
def resource_estimate(config, family=MEASURED_FAMILY):
    """The :class:`ResourceEstimate` of ``config`` in Yosys ``family``."""
    pes = {"some": "", "max": "_max", "none": "_none"}[config.dsp_usage]
    adders = "_max" if config.dsp_usage == "max" else ""
    depth = config.weight_depth
    pairs, lone = divmod(config.chain_length, 2)
    pair_uram, pair_bram = pair_memory(depth, family)
    pair = _sum(_logic(f"pair{depth}{pes}"), {"uram": pair_uram, "bram36": pair_bram})
    uram, bram = pe_memory(depth, family)
    single = _sum(_logic(f"pe{depth}{pes}"), {"uram": uram, "bram36": bram})
    per_pe = _scaled(pair, 0.5) if pairs else single
    per_chain = _sum(_scaled(pair, pairs), _scaled(single, lone), _logic("normal"))
    split = config.split_factor
    inputs = max(shape.inputs for phase in ("fw", "bw")
                 for shape in config.pass_matrices(phase))
    vectors = {"bram36": split * bram36_for(1, config.batch * inputs, FP32_BITS)}
    folds = _scaled(_logic(f"add{adders}"), (split - 1) * (config.chains // split))
    per_unit = _sum(_scaled(per_chain, config.chains), folds, vectors)
    activation = _sum(_logic(f"fw_{config.cell}"), _logic(f"bw_{config.cell}"))
    total = _sum(_scaled(per_unit, config.units), activation)
    total = {key: math.ceil(value) for key, value in total.items()}
    return ResourceEstimate(per_pe=per_pe, per_chain=per_chain, per_unit=per_unit,
                            activation=activation, total=total, pes=config.pes)


def resources(config, family=MEASURED_FAMILY):
    """The engine hook: :meth:`ResourceEstimate.needs` of ``config``."""
    return resource_estimate(config, family).needs()

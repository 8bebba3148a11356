# amaranth: UnusedElaboratable=no
"""Resource model of the FARNN engine: DSP slices, LUTs, flip-flops, UltraRAM and block RAM
per PE, per chain, per MVM unit, of the activation units and of the engine.

Logic (DSP, LUT, FF) of the units the engine repeats is Yosys' count of their RTL, measured
once at the default stages (``adder_stages`` 4, ``multiplier_stages`` 3), fp32, on
``xcup`` (UltraScale+), flattened, out of context, by::

    .venv/bin/python -c "from nnrtl.gen.farnn.resources import measure; print(measure('pe'))"

(:func:`measure`: ``nnrtl.sim.runner.to_verilog`` then ``nnrtl.gen.synth.run_yosys``,
``synth_xilinx -family xcup -flatten``); the counts are :data:`UNIT_LOGIC`.

The PE is measured at its real depths and both ``adder_shifts`` (``pe4096`` /
``pe4096_dsp``; the fold adder ``add`` / ``add_dsp`` likewise), its weight memory marked
``ram_style = "ultra"`` and mapped to one URAM288 by ``synth_xilinx -uram``
(:mod:`nnrtl.gen.synth`); its LUTs include the 24-28 LUT-RAM LUTs of its 2-deep result
FIFO, and the 8K PE 17-31 more for reading two 4K halves of the URAM. Where the 4K PE's
logic LUTs go (``adder_shifts`` ``lut`` / ``dsp``): the multiplier 421 (its subnormal
operand normalised before the product, :class:`~nnrtl.hw.arith.float_mul.FloatMul`'s
``normalize="operand"``; 574 when it normalised the product), the accumulator's adder
499 / 342, the accumulator's reduction control about 90, the feed relay, result FIFO and
output register the rest. The paper packs two 4K PEs into one URAM288 through its two ports; this RTL gives
each PE its own memory, so one URAM288 a PE at either depth.
(LUTs are logic LUTs plus LUT-RAM/SRL: the PEs' 28 and the activation units' delay lines,
276, 478, 330, 276, counted as ``lut_memory``.) A chain is ``chain_length`` PEs and nothing else
(nearest-neighbour wiring); an MVM unit is ``chains`` chains, ``split - 1`` rows of
``chains / split`` fold adders and ``split`` vector buffers. Other stage counts use the same
figures (an approximation: stages change flip-flops, hardly LUTs or DSPs). Yosys is not
Vivado: a Vivado synthesis with the vendor's floating-point cores (the paper's) maps more of
the adder into DSPs and takes fewer LUTs.

Memories, from the configuration: each PE's weight memory of ``weight_depth`` x 32 bits.
On UltraScale+ (``xcup``) in UltraRAM (URAM288 = 4K x 72 b): one URAM a PE at 4K and at 8K
words (the paper's Sec. 6.1 pairs two 4K PEs in one URAM; see above); on 7-series (``xc7``) in 36 Kb block RAMs
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
from ...hw.farnn.config import FP32_BITS

__all__ = ["UNIT_LOGIC", "ResourceEstimate", "resource_estimate", "resources",
           "pe_memory", "measure", "MEASURED_FAMILY"]

#: The family the logic figures were measured for.
MEASURED_FAMILY = "xcup"

#: Logic of one unit, Yosys-measured (module docstring): ``{name: {lut, lut_memory, ff,
#: dsp, bram36}}``.
UNIT_LOGIC = {
    "pe4096": {"lut": 1029, "lut_memory": 28, "ff": 473, "dsp": 2, "bram36": 0},
    "pe8192": {"lut": 1060, "lut_memory": 28, "ff": 475, "dsp": 2, "bram36": 0},
    "pe4096_dsp": {"lut": 895, "lut_memory": 24, "ff": 500, "dsp": 5, "bram36": 0},
    "pe8192_dsp": {"lut": 912, "lut_memory": 24, "ff": 502, "dsp": 5, "bram36": 0},
    "add": {"lut": 499, "lut_memory": 4, "ff": 204, "dsp": 0, "bram36": 0},
    "add_dsp": {"lut": 342, "lut_memory": 0, "ff": 231, "dsp": 3, "bram36": 0},
    "fw_lstm": {"lut": 10444, "lut_memory": 276, "ff": 5594, "dsp": 16, "bram36": 17.5},
    "bw_lstm": {"lut": 10888, "lut_memory": 478, "ff": 4931, "dsp": 34, "bram36": 3.5},
    "fw_gru": {"lut": 8207, "lut_memory": 330, "ff": 4156, "dsp": 12, "bram36": 10.5},
    "bw_gru": {"lut": 7096, "lut_memory": 276, "ff": 3031, "dsp": 22, "bram36": 0},
}


def _units():
    from ...hw.arith.float import FP32
    from ...hw.arith.float_add import FloatAdd
    from ...hw.farnn.activation import BwActivation, FwActivation
    from ...hw.farnn.pe import FarnnPE
    return {"pe4096": lambda: FarnnPE(FP32, weight_depth=4096),
            "pe8192": lambda: FarnnPE(FP32, weight_depth=8192),
            "pe4096_dsp": lambda: FarnnPE(FP32, weight_depth=4096, adder_shifts="dsp"),
            "pe8192_dsp": lambda: FarnnPE(FP32, weight_depth=8192, adder_shifts="dsp"),
            "add": lambda: FloatAdd(FP32, stages=4),
            "add_dsp": lambda: FloatAdd(FP32, stages=4, shifts="dsp"),
            "fw_lstm": lambda: FwActivation("lstm"), "bw_lstm": lambda: BwActivation("lstm"),
            "fw_gru": lambda: FwActivation("gru"), "bw_gru": lambda: BwActivation("gru")}


def measure(name, family=MEASURED_FAMILY):
    """Synthesize unit ``name`` of :data:`UNIT_LOGIC` with Yosys and return its counts
    (``lut`` the logic LUTs, ``lut_memory``, ``ff``, ``dsp``, ``bram36``; a PE's URAM is
    :func:`pe_memory`'s). Minutes for an activation unit."""
    from ..synth import measure_unit

    return measure_unit(_units()[name](), family)


def pe_memory(weight_depth, family):
    """``(uram, bram36)`` of one PE's weight memory: one URAM288 at 4K or 8K words on
    ``xcup`` (what Yosys maps the PE's memory to); block RAMs on ``xc7``."""
    if family == "xcup":
        return 1, 0
    return 0, bram36_for(1, weight_depth, FP32_BITS)


@dataclasses.dataclass(frozen=True)
class ResourceEstimate:
    """Resources of a configuration, by part.

    Attributes
    ----------
    per_pe, per_chain, per_unit, activation : dict
        ``{lut, ff, dsp, uram, bram36}`` of one PE (weight memory included), one chain, one
        MVM unit (its chains, fold adders, vector buffers), the FW and BW activation units.
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
    uram, bram = pe_memory(config.weight_depth, family)
    shifts = "" if config.adder_shifts == "lut" else "_dsp"
    per_pe = _sum(_logic(f"pe{config.weight_depth}{shifts}"), {"uram": uram, "bram36": bram})
    per_chain = _scaled(per_pe, config.chain_length)
    split = config.split_factor
    inputs = max(shape.inputs for phase in ("fw", "bw")
                 for shape in config.pass_matrices(phase))
    vectors = {"bram36": split * bram36_for(1, config.batch * inputs, FP32_BITS)}
    folds = _scaled(_logic(f"add{shifts}"), (split - 1) * (config.chains // split))
    per_unit = _sum(_scaled(per_chain, config.chains), folds, vectors)
    activation = _sum(_logic(f"fw_{config.cell}"), _logic(f"bw_{config.cell}"))
    total = _sum(_scaled(per_unit, config.units), activation)
    total = {key: math.ceil(value) for key, value in total.items()}
    return ResourceEstimate(per_pe=per_pe, per_chain=per_chain, per_unit=per_unit,
                            activation=activation, total=total, pes=config.pes)


def resources(config, family=MEASURED_FAMILY):
    """The engine hook: :meth:`ResourceEstimate.needs` of ``config``."""
    return resource_estimate(config, family).needs()

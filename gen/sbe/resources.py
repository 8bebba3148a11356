"""Resource model of the SBE engine: DSP slices, block RAMs and LUTRAM of a configuration.

The memories counted are those the RTL builds (:func:`memory_shapes`), with their depths
read from the RTL components' own properties; DSP slices are one per DSP-built PE
multiplier plus the post-processing units' multipliers as Yosys maps them
(:func:`post_unit_dsp`).
"""

import dataclasses
import math

from ...boards.capacity import LUTRAM_DEPTH, bram36_for
from ...hw.arith.multiplier import dsp_slices, lut_product_luts, rtl_products
from ...hw.sbe.controller import Controller
from ...hw.sbe.engine import SbeEngine
from ...hw.sbe.pe import PEGroup
from ...hw.sbe.post import PostProcessingUnit

__all__ = ["MemoryShape", "memory_shapes", "ResourceEstimate", "resource_estimate",
           "resources", "lut_multiplier_luts", "post_unit_dsp", "lutram_luts"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class MemoryShape:
    """``count`` memories of ``depth`` entries, each entry ``words`` words of ``word_bits``
    bits read in one cycle.

    Attributes
    ----------
    name : str
    count : int
    words : int
    word_bits : int
    depth : int
    """

    name: str
    count: int
    words: int
    word_bits: int
    depth: int

    @property
    def bits(self):
        """Bits of all ``count`` memories."""
        return self.count * self.words * self.word_bits * self.depth

    @property
    def in_lutram(self):
        """Whether the memory is shallow enough for LUTRAM (at most :data:`LUTRAM_DEPTH`
        entries), where this model puts it; deeper ones take block RAMs."""
        return self.depth <= LUTRAM_DEPTH


def memory_shapes(config):
    """The memories :class:`~nnrtl.hw.sbe.SbeEngine` builds for ``config``, as
    :class:`MemoryShape` records: per PE group its weight double buffer
    (:meth:`PEGroup.weight_depth`) and BB-FIFO slice; the vector double buffer (two
    :meth:`Controller.vector_half_depth` halves); the h store banks
    (:meth:`SbeEngine.h_store_shape`); per post-processing unit its parameter and cell
    memories (:meth:`PostProcessingUnit.depth`); the output FIFO
    (:meth:`SbeEngine.output_fifo_depth`). The PWL tables are ROMs, in LUTs, not
    counted."""
    ow, aw, nt = config.operand_width, config.acc_width, config.bus_weights
    groups = config.pes // nt
    banks, bank_words = SbeEngine.h_store_shape(config)
    pp_depth = PostProcessingUnit.depth(config)
    return [
        MemoryShape(name="weight buffer", count=groups, words=nt, word_bits=ow,
                    depth=PEGroup.weight_depth(config)),
        MemoryShape(name="bb-fifo", count=groups, words=nt, word_bits=aw,
                    depth=config.bb_fifo_depth),
        MemoryShape(name="vector buffer", count=1, words=config.columns_per_cycle, word_bits=ow,
                    depth=2 * Controller.vector_half_depth(config)),
        MemoryShape(name="hidden state", count=banks, words=1, word_bits=ow, depth=bank_words),
        MemoryShape(name="post parameters", count=config.post_units,
                    words=config.header_layout.fields, word_bits=aw, depth=pp_depth),
        MemoryShape(name="cell state", count=config.post_units, words=1, word_bits=aw,
                    depth=pp_depth),
        # SyncFIFOBuffered keeps one entry in its output register, the rest in memory;
        # each entry is PP h values and tlast.
        MemoryShape(name="output fifo", count=1, words=1, word_bits=config.post_units * ow + 1,
                    depth=SbeEngine.output_fifo_depth(config) - 1),
    ]


def lutram_luts(shape):
    """LUTs of a memory in LUTRAM: RAM64M primitives, 3 bits of 64 entries in 4 LUTs."""
    return (shape.count * math.ceil(shape.words * shape.word_bits / 3) * 4
            * math.ceil(shape.depth / LUTRAM_DEPTH))


def lut_multiplier_luts(width):
    """LUTs of one ``width`` x ``width`` PE multiplier built from LUTs
    (:func:`~nnrtl.hw.arith.multiplier.lut_product_luts`)."""
    return lut_product_luts(width, width)


_POST_UNIT_DSP = {}


def post_unit_dsp(config, family):
    """DSP slices of one post-processing unit of ``config`` in Yosys ``family``: its
    multipliers, listed from its RTL (:func:`~nnrtl.hw.arith.multiplier.rtl_products`),
    each cut as Yosys does (:func:`~nnrtl.hw.arith.multiplier.dsp_slices`). Computed once
    per set of number formats."""
    key = (config.formats, config.batch_norm, family)
    if key not in _POST_UNIT_DSP:
        _POST_UNIT_DSP[key] = sum(
            dsp_slices(a, b, family, a_signed=a_signed, b_signed=b_signed)
            for a, a_signed, b, b_signed in rtl_products(PostProcessingUnit(config)))
    return _POST_UNIT_DSP[key]


@dataclasses.dataclass(frozen=True)
class ResourceEstimate:
    """Resources of a configuration.

    Attributes
    ----------
    dsp : int
        DSP slices: ``dsp_pes + dsp_post``.
    dsp_pes : int
        Of the PE multipliers (one per PE of ``operand_width`` bits, less the LUT-built).
    dsp_post : int
        Of the post-processing units (:func:`post_unit_dsp`).
    bram36 : int
        36 Kb block RAMs of the memories deeper than LUTRAM (:func:`memory_shapes`).
    bram_eq7 : float
        The paper's eq. 7 for the same design (first layer, ``DW = operand_width``).
    lutram_luts : int
        LUTs of the memories in LUTRAM (:func:`lutram_luts`).
    lut_multiplier_luts : int
        LUTs of the LUT-built multipliers (estimate, :func:`lut_multiplier_luts`).
    memories : dict
        BRAM36 of each memory in block RAM.
    """

    dsp: int
    dsp_pes: int
    dsp_post: int
    bram36: int
    bram_eq7: float
    lutram_luts: int
    lut_multiplier_luts: int
    memories: dict

    @property
    def luts(self):
        """The LUTs counted here (memories and multipliers, not the rest of the logic)."""
        return self.lutram_luts + self.lut_multiplier_luts

    def needs(self):
        """``{"dsp": n, "bram36": n, "lut": n}``: what
        :func:`nnrtl.gen.engines.check_fit` checks against the board (``lut``: :attr:`luts`,
        against :data:`~nnrtl.gen.engines.LUT_SHARE` of the board's LUTs)."""
        return {"dsp": self.dsp, "bram36": self.bram36, "lut": self.luts}


def resource_estimate(config, family="xc7"):
    """The :class:`ResourceEstimate` of ``config`` in Yosys ``family`` (``xc7`` or
    ``xcup``: their DSP slices differ)."""
    ow = config.operand_width
    memories, lutram = {}, 0
    for shape in memory_shapes(config):
        if shape.in_lutram:
            lutram += lutram_luts(shape)
        else:
            memories[shape.name] = shape.count * bram36_for(shape.words, shape.depth,
                                                            shape.word_bits)
    dsp_pes = config.dsp * dsp_slices(ow, ow, family)
    dsp_post = config.post_units * post_unit_dsp(config, family)
    return ResourceEstimate(
        dsp=dsp_pes + dsp_post, dsp_pes=dsp_pes, dsp_post=dsp_post,
        bram36=sum(memories.values()), bram_eq7=config.bram_eq7, lutram_luts=lutram,
        lut_multiplier_luts=config.lut_multipliers * lut_multiplier_luts(ow),
        memories=memories)


def resources(config, family="xc7"):
    """:meth:`ResourceEstimate.needs` of ``config``: what
    :func:`nnrtl.gen.engines.check_fit` checks."""
    return resource_estimate(config, family).needs()

"""Records the SBE configuration derives (:class:`~nnrtl.hw.sbe.SbeConfig`): its number
formats, the post-processing units' PWL tables, the layout of a run's header and the
widths of its streams."""

import functools
from typing import NamedTuple

from ..arith.fixed import QFormat
from ..arith.pwl import PWLTable, pwl_table

__all__ = ["Formats", "PWLTables", "pwl_tables_of", "HeaderLayout", "StreamBits"]


class Formats(NamedTuple):
    """The four number formats of an engine (:attr:`SbeConfig.formats`).

    Attributes
    ----------
    weight : QFormat
        ``W``: weights, ``operand_width`` bits, ``weight_frac`` fraction bits.
    vector : QFormat
        ``V``: x inputs and h, ``operand_width`` bits, ``act_frac`` fraction bits.
    acc : QFormat
        ``A``: accumulators, biases and BN shifts, ``acc_width`` bits,
        ``weight_frac + act_frac`` fraction bits.
    cell : QFormat
        ``E``: gate activations, cell state and BN scales, ``acc_width`` bits,
        ``cell_frac`` fraction bits.
    """

    weight: QFormat
    vector: QFormat
    acc: QFormat
    cell: QFormat


class PWLTables(NamedTuple):
    """The post-processing units' piecewise-linear tables (:attr:`SbeConfig.pwl_tables`).

    Attributes
    ----------
    sigmoid : PWLTable
        ``SIG``: sigmoid, ``A`` -> ``E`` (gates i, f, o).
    tanh : PWLTable
        ``TANH_A``: tanh, ``A`` -> ``E`` (the cell candidate u).
    cell_tanh : PWLTable
        ``TANH_E``: tanh, ``E`` -> ``E`` (of the cell state).
    """

    sigmoid: PWLTable
    tanh: PWLTable
    cell_tanh: PWLTable


@functools.lru_cache(maxsize=64)
def pwl_tables_of(formats):
    """The :class:`PWLTables` of a set of :class:`Formats` (computed once per set)."""
    return PWLTables(sigmoid=pwl_table("sigmoid", formats.acc, formats.cell),
                     tanh=pwl_table("tanh", formats.acc, formats.cell),
                     cell_tanh=pwl_table("tanh", formats.cell, formats.cell))


class HeaderLayout(NamedTuple):
    """Where each value of a hidden unit sits in a run's header (:attr:`SbeConfig.
    header_layout`): the header is ``fields`` beats per hidden unit, one value per beat,
    and a post-processing unit keeps them as one word of ``fields`` values.

    Attributes
    ----------
    fields : int
        Values per hidden unit: 4, or 12 with batch norm.
    bias, scale, shift : int or None
        Index of gate 0's bias, batch-norm scale and shift; gate ``g``'s is that plus
        ``g`` (:meth:`index`). ``scale`` and ``shift`` are ``None`` without batch norm.
    """

    fields: int
    bias: int
    scale: int | None
    shift: int | None

    def index(self, kind, gate):
        """The field of value ``kind`` (``"bias"``, ``"scale"`` or ``"shift"``) of gate
        ``gate`` (0 to 3, :data:`GATES` order)."""
        base = getattr(self, kind)
        if base is None:
            raise ValueError(f"the header has no {kind} fields (batch_norm is False)")
        return base + gate


class StreamBits(NamedTuple):
    """AXI4-Stream data widths of the engine's streams, in bits (whole bytes:
    :func:`nnrtl.hw.bus.bus_bits`)."""

    weights: int
    inputs: int
    outputs: int

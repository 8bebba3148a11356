"""How one LSTM layer's weight matrix maps onto the SBE (:meth:`SbeConfig.layer
<nnrtl.hw.sbe.SbeConfig.layer>` builds it)."""

import dataclasses

__all__ = ["LayerShape"]


@dataclasses.dataclass(frozen=True)
class LayerShape:
    """How one LSTM layer's weight matrix maps onto the engine.

    Attributes
    ----------
    index : int
        Layer number, 0 first.
    input_size : int
        Length of the layer's x vector (``input_size`` for layer 0, ``hidden_size`` after).
    hidden_size : int
        Hidden units.
    columns : int
        ``input_size + hidden_size``: columns of the interleaved matrix.
    block_columns : int
        Columns per block, ``columns / blocks``.
    first_hidden_block : int
        Index of the first block holding a column of the h part (``input_size //
        block_columns``); blocks before it hold x columns only and are reused by the whole
        batch.
    hidden_blocks : int
        Blocks holding h columns: ``blocks - first_hidden_block``.
    x_columns_in_hidden_blocks : int
        x columns that share those blocks and run before the first h column; they hide the
        pipeline latency of the previous step's h (Fig. 4).
    case : int
        The paper's case: 1, 2 or 3 when the hidden weights take one, two or more than two
        blocks ("Performance Model").
    alpha : float
        The paper's alpha: the share of the matrix in blocks reused by the whole batch,
        ``first_hidden_block / blocks`` (eqs. 5 and 6).
    """

    index: int
    input_size: int
    hidden_size: int
    columns: int
    block_columns: int
    first_hidden_block: int
    hidden_blocks: int
    x_columns_in_hidden_blocks: int
    case: int
    alpha: float

"""MS1's near-zero pruning and the compressed format the DMA stores (spec §2.1, §3.5).

The format is the contract with the hardware's compression module and decoder
(:mod:`nnrtl.hw.omni.dma`): the RTL writes and reads exactly these bytes, and the footprint
and data-movement model (:mod:`.accounting`) counts them. The functions here run it on
PyTorch tensors (training); :mod:`nnrtl.sim.golden.omni.compress` runs the same record on
numpy arrays (the DMA's golden model) and serializes it for both.

Pruning [U §2.1, decided here]
    A BP-EW-P1 value ``v`` is pruned when ``|v| < threshold`` (strictly less: threshold 0
    prunes nothing, not even zeros, so MS1 at 0 is exact). One threshold for all six P1
    vectors, ``p_S = f_t`` included (one threshold register in the DMA; ``f_t`` is rarely
    below 0.1, so it mostly survives). Per sample: no sparsity has to hold across the
    batch. NaN is never pruned (``|NaN| < t`` is false).

Record of one cell (one layer, one timestamp), B samples, hidden size H
    The block of a sample and a P1 vector is the H values of that vector (order of
    :data:`.cell.PART1`: p_o, p_s, p_i, p_f, p_c, p_S). A cell's B x 6 blocks, row-major
    (sample, then vector), are stored as

    1. the index part: for each block, a bitmap of ``ceil(H / 8)`` bytes; bit ``j`` (LSB
       first) of byte ``k`` is 1 when position ``8k + j`` survives, padding bits 0;
    2. the value part: the surviving values as IEEE-754 binary32, little endian, in block
       order and ascending position within a block.

    Bytes: ``B * 6 * ceil(H / 8) + 4 * survivors`` (:func:`record_bytes`).

Why a bitmap index [U §2.1 "index encoding"]: its size is fixed (the index queue's depth
is known at elaboration time and nothing needs a count), the decoder turns it into row
addresses with a priority encoder, and it is smaller than explicit 16-bit indices at any
density above 1/16 (paper Fig. 6: about 35 % of P1 values survive θ = 0.1). Its cost over
dense storage at density 1 is 1/32.
"""

import dataclasses

from ...hw.omni import dma_config
from ...sim.golden.omni import compress as _format
from ...sim.golden.omni.compress import record_bytes
from ..errors import UsageError

__all__ = ["Compressed", "prune", "compress", "decompress", "record_bytes", "to_bytes",
           "from_bytes", "check_threshold"]


def _bits(torch):
    return torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)


def check_threshold(threshold, name="prune_threshold"):
    """``threshold`` as a float (:func:`nnrtl.hw.omni.dma_config.check_threshold`);
    :class:`UsageError` unless it is a finite number >= 0."""
    try:
        return dma_config.check_threshold(threshold, name)
    except TypeError as error:
        raise UsageError(str(error)) from None


@dataclasses.dataclass(frozen=True)
class Compressed:
    """One cell's compressed BP-EW-P1 record.

    Attributes
    ----------
    bitmap : uint8 tensor, B x 6 x ceil(H/8)
    values : float tensor, (survivors,)
    hidden_size : int
    """

    bitmap: "torch.Tensor"  # noqa: F821 (PyTorch is imported where a record is made)
    values: "torch.Tensor"  # noqa: F821
    hidden_size: int

    @property
    def survivors(self):
        return int(self.values.numel())

    @property
    def nbytes(self):
        """Bytes stored for this record (:func:`record_bytes`)."""
        batch, vectors = self.bitmap.shape[:2]
        return record_bytes(batch * vectors, self.hidden_size, self.survivors)


def prune(part1, threshold):
    """``part1`` with every value ``|v| < threshold`` set to 0 (what decoding gives)."""
    import torch

    if threshold == 0:
        return part1
    return torch.where(part1.abs() < threshold, torch.zeros_like(part1), part1)


def compress(part1, threshold):
    """The compression module: the record of one cell's P1 tensor (B x 6 x H)."""
    import torch

    hidden = part1.shape[-1]
    keep = ~(part1.abs() < threshold)
    values = part1[keep]
    pad = (-hidden) % 8
    if pad:
        keep = torch.nn.functional.pad(keep, (0, pad))
    bits = keep.reshape(*keep.shape[:-1], -1, 8).to(torch.uint8) * _bits(torch)
    return Compressed(bits.sum(-1, dtype=torch.uint8), values, hidden)


def decompress(record):
    """The decoder: the dense B x 6 x H tensor, pruned positions 0."""
    import torch

    bits = (record.bitmap.unsqueeze(-1) & _bits(torch)) != 0
    keep = bits.reshape(*record.bitmap.shape[:-1], -1)[..., :record.hidden_size]
    dense = torch.zeros(keep.shape, dtype=record.values.dtype)
    dense[keep] = record.values
    return dense


def to_bytes(record):
    """The record as the bytes the DMA writes (index part, then value part)."""
    import torch

    values = record.values.detach().to(torch.float32).numpy()
    return _format.to_bytes(_format.Record(record.bitmap.numpy(), values, record.hidden_size))


def from_bytes(data, batch, hidden_size, vectors=6):
    """Parse :func:`to_bytes`'s output back into a :class:`Compressed` (float32 values);
    ``ValueError`` when the length does not match the bitmap's survivor count
    (:func:`nnrtl.sim.golden.omni.compress.from_bytes`)."""
    import torch

    record = _format.from_bytes(data, batch, hidden_size, vectors)
    return Compressed(torch.from_numpy(record.bitmap), torch.from_numpy(record.values.copy()),
                      hidden_size)

"""MS1's near-zero pruning and the compressed format the DMA stores (spec §2.1, §3.5).

The format is the contract with the hardware's compression module and decoder (hw/omni,
later): the RTL writes and reads exactly these bytes, and the footprint and data-movement
model (:mod:`.accounting`) counts them.

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
import math

import numpy as np
import torch

from ..errors import UsageError

__all__ = ["Compressed", "prune", "compress", "decompress", "record_bytes", "to_bytes",
           "from_bytes", "check_threshold"]

_BITS = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8)


def check_threshold(threshold, name="prune_threshold"):
    """``threshold`` as a float; :class:`UsageError` unless it is a finite number >= 0."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (
            math.isfinite(threshold) and threshold >= 0):
        raise UsageError(f"{name} must be a finite number >= 0, not {threshold!r}")
    return float(threshold)


@dataclasses.dataclass(frozen=True)
class Compressed:
    """One cell's compressed BP-EW-P1 record.

    Attributes
    ----------
    bitmap : uint8 tensor, B x 6 x ceil(H/8)
    values : float tensor, (survivors,)
    hidden_size : int
    """

    bitmap: torch.Tensor
    values: torch.Tensor
    hidden_size: int

    @property
    def survivors(self):
        return int(self.values.numel())

    @property
    def nbytes(self):
        """Bytes stored for this record (:func:`record_bytes`)."""
        batch, vectors = self.bitmap.shape[:2]
        return record_bytes(batch * vectors, self.hidden_size, self.survivors)


def record_bytes(blocks, hidden_size, survivors):
    """Bytes of a compressed record of ``blocks`` blocks of ``hidden_size`` values of which
    ``survivors`` survive (``survivors`` may be a float: an expected count)."""
    return blocks * math.ceil(hidden_size / 8) + 4 * survivors


def prune(part1, threshold):
    """``part1`` with every value ``|v| < threshold`` set to 0 (what decoding gives)."""
    if threshold == 0:
        return part1
    return torch.where(part1.abs() < threshold, torch.zeros_like(part1), part1)


def compress(part1, threshold):
    """The compression module: the record of one cell's P1 tensor (B x 6 x H)."""
    hidden = part1.shape[-1]
    keep = ~(part1.abs() < threshold)
    values = part1[keep]
    pad = (-hidden) % 8
    if pad:
        keep = torch.nn.functional.pad(keep, (0, pad))
    bits = keep.reshape(*keep.shape[:-1], -1, 8).to(torch.uint8) * _BITS
    return Compressed(bits.sum(-1, dtype=torch.uint8), values, hidden)


def decompress(record):
    """The decoder: the dense B x 6 x H tensor, pruned positions 0."""
    bits = (record.bitmap.unsqueeze(-1) & _BITS) != 0
    keep = bits.reshape(*record.bitmap.shape[:-1], -1)[..., :record.hidden_size]
    dense = torch.zeros(keep.shape, dtype=record.values.dtype)
    dense[keep] = record.values
    return dense


def to_bytes(record):
    """The record as the bytes the DMA writes (index part, then value part)."""
    values = record.values.detach().to(torch.float32).numpy().astype("<f4")
    return record.bitmap.numpy().tobytes() + values.tobytes()


def from_bytes(data, batch, hidden_size, vectors=6):
    """Parse :func:`to_bytes`'s output back into a :class:`Compressed` (float32 values);
    ``ValueError`` when the length does not match the bitmap's survivor count."""
    index_bytes = batch * vectors * math.ceil(hidden_size / 8)
    if len(data) < index_bytes:
        raise ValueError(f"record of {len(data)} bytes is shorter than its index part "
                         f"({index_bytes} bytes)")
    bitmap = np.frombuffer(data[:index_bytes], dtype=np.uint8).reshape(batch, vectors, -1)
    survivors = int(np.unpackbits(bitmap, bitorder="little").sum())
    if len(data) != index_bytes + 4 * survivors:
        raise ValueError(f"record of {len(data)} bytes does not match its bitmap: "
                         f"{index_bytes} index bytes + 4 x {survivors} survivors")
    values = np.frombuffer(data[index_bytes:], dtype="<f4").astype(np.float32)
    return Compressed(torch.from_numpy(bitmap.copy()), torch.from_numpy(values), hidden_size)

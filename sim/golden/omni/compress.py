"""MS1's compressed record on numpy arrays: the bytes the compressing DMA
(:mod:`nnrtl.hw.omni.dma`) stores and reads back, bit for bit.

The format (the narrative, the pruning rule and why a bitmap index, is in
:mod:`nnrtl.gen.omni.compress`, which runs the same record on PyTorch tensors in training):
``blocks`` blocks of ``hidden_size`` values each are stored as

1. the index part: for each block, a bitmap of ``ceil(hidden_size / 8)`` bytes; bit ``j``
   (LSB first) of byte ``k`` is 1 when position ``8k + j`` survives, padding bits 0;
2. the value part: the surviving values as IEEE-754 binary32, little endian, in block
   order and ascending position within a block.

A value ``v`` survives when ``|v| < threshold`` is false (threshold 0 prunes nothing,
NaN is never pruned); the comparison is in fp32 (a Python float threshold is rounded to
fp32, as PyTorch compares a float with an fp32 tensor).
"""

import dataclasses
import math

import numpy as np

__all__ = ["Record", "record_bytes", "compress", "decompress", "to_bytes", "from_bytes"]


@dataclasses.dataclass(frozen=True)
class Record:
    """One compressed record.

    Attributes
    ----------
    bitmap : uint8 array, ``(..., ceil(hidden_size / 8))``
        One row of index bytes per block.
    values : float32 array, ``(survivors,)``
    hidden_size : int
        Values of one block.
    """

    bitmap: np.ndarray
    values: np.ndarray
    hidden_size: int

    @property
    def survivors(self):
        """Values stored."""
        return int(self.values.size)

    @property
    def blocks(self):
        """Blocks of the record."""
        return int(np.prod(self.bitmap.shape[:-1], dtype=np.int64))

    @property
    def nbytes(self):
        """Bytes stored for this record (:func:`record_bytes`)."""
        return record_bytes(self.blocks, self.hidden_size, self.survivors)


def record_bytes(blocks, hidden_size, survivors):
    """Bytes of a compressed record of ``blocks`` blocks of ``hidden_size`` values of which
    ``survivors`` survive (``survivors`` may be a float: an expected count)."""
    return blocks * math.ceil(hidden_size / 8) + 4 * survivors


def compress(values, threshold):
    """The record of ``values`` (float32, ``(..., hidden_size)``, one block per row along
    the last axis) pruned at ``threshold``."""
    values = np.asarray(values, dtype=np.float32)
    with np.errstate(over="ignore"):            # a threshold above fp32's range: inf
        limit = np.float32(threshold)
    keep = ~(np.abs(values) < limit)
    bitmap = np.packbits(keep, axis=-1, bitorder="little")
    return Record(bitmap, values[keep], values.shape[-1])


def decompress(record):
    """The dense float32 array of ``record``, ``(..., hidden_size)``, pruned positions
    +0.0."""
    keep = np.unpackbits(record.bitmap, axis=-1, count=record.hidden_size,
                         bitorder="little").astype(bool)
    dense = np.zeros(keep.shape, dtype=np.float32)
    dense[keep] = record.values
    return dense


def to_bytes(record):
    """The record as the bytes the DMA writes (index part, then value part)."""
    values = np.ascontiguousarray(record.values, dtype=np.float32).astype("<f4")
    return np.ascontiguousarray(record.bitmap, dtype=np.uint8).tobytes() + values.tobytes()


def from_bytes(data, batch, hidden_size, vectors=6):
    """Parse :func:`to_bytes`'s output of a ``batch x vectors x hidden_size`` record back
    into a :class:`Record` (float32 values).

    Raises
    ------
    ValueError
        When the length does not match the bitmap's survivor count.
    """
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
    return Record(bitmap.copy(), values, hidden_size)

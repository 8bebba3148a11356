"""Bit-exact model of the compressing DMA (:mod:`nnrtl.hw.omni.dma`): what a write transfer
stores, what a read transfer delivers, and the counters.

The format is not restated here: a sparse record is :func:`.compress.compress` of the
transfer's ``blocks x length`` fp32 values (one block per row, the record of ``blocks``
samples of one vector; MS1's record, :mod:`nnrtl.gen.omni.compress`) serialized by
:func:`~.compress.to_bytes`, and read back by :func:`~.compress.from_bytes` and
:func:`~.compress.decompress`. A dense record is the values, binary32 little
endian. Values are fp32 bit patterns (``uint32``) so NaN payloads and signed zeros are
compared bit for bit.
"""

import dataclasses
import math

import numpy as np

from .compress import compress, decompress, from_bytes, to_bytes

__all__ = ["WriteResult", "ReadResult", "Beat", "write_record", "read_record", "gather_rows",
           "index_bytes"]


@dataclasses.dataclass(frozen=True)
class WriteResult:
    """A write transfer: ``image`` (the bytes stored from the base address), the
    counters ``kept``, ``pruned`` (0 for dense) and ``bytes_written``."""

    image: bytes
    kept: int
    pruned: int
    bytes_written: int


@dataclasses.dataclass(frozen=True)
class Beat:
    """One beat of the decoder's output."""

    value: int
    dense: int
    index: int
    row_last: int
    last: int


@dataclasses.dataclass(frozen=True)
class ReadResult:
    """A read transfer: its ``beats``, the ``bytes_read`` counter, and the dense operand's
    rows fetched (``rows``: ``(block, index)`` pairs, in order)."""

    beats: list
    bytes_read: int
    rows: list


def index_bytes(blocks, length):
    """Bytes of a sparse record's index part: ``blocks * ceil(length / 8)``."""
    return blocks * math.ceil(length / 8)


def _floats(bits):
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def write_record(bits, *, sparse, threshold=0.0):
    """What a write transfer of ``bits`` (``blocks x length`` uint32 fp32 patterns) stores."""
    bits = np.asarray(bits, dtype=np.uint32)
    blocks, length = bits.shape
    if not sparse:
        image = bits.astype("<u4").tobytes()
        return WriteResult(image, 0, 0, len(image))
    record = compress(_floats(bits).reshape(blocks, 1, length), threshold)
    image = to_bytes(record)
    return WriteResult(image, record.survivors, bits.size - record.survivors, len(image))


def _record(memory, base, blocks, length):
    head = index_bytes(blocks, length)
    bitmap = np.frombuffer(bytes(memory[base:base + head]), dtype=np.uint8)
    survivors = int(np.unpackbits(bitmap, bitorder="little").sum())
    data = bytes(memory[base:base + head + 4 * survivors])
    record = from_bytes(data, blocks, length, vectors=1)
    dense = decompress(record).reshape(blocks, length)
    return record, dense.view(np.uint32), survivors


def read_record(memory, *, mode, base, blocks, length, dense_base=0, row_stride=0,
                block_stride=0, row_words=0):
    """What a read transfer delivers from ``memory`` (bytes-like, indexed by address)."""
    if mode == "dense":
        words = np.frombuffer(bytes(memory[base:base + 4 * blocks * length]), dtype="<u4")
        beats = [Beat(int(v), 0, k % length, 1, int(k == words.size - 1))
                 for k, v in enumerate(words)]
        return ReadResult(beats, 4 * words.size, [])
    record, dense, survivors = _record(memory, base, blocks, length)
    # Positions come from the bitmap, not from nonzero values: at θ = 0 zeros survive.
    nbytes = index_bytes(blocks, length) + 4 * survivors
    if mode == "expand":
        flat = dense.reshape(-1)
        beats = [Beat(int(v), 0, k % length, 1, int(k == flat.size - 1))
                 for k, v in enumerate(flat)]
        return ReadResult(beats, nbytes, [])
    if mode != "gather":
        raise ValueError(f"mode must be dense, expand or gather, not {mode!r}")
    bitmap = np.unpackbits(np.frombuffer(bytes(memory[base:base + index_bytes(blocks, length)]),
                                         dtype=np.uint8).reshape(blocks, -1),
                           axis=1, bitorder="little")[:, :length].astype(bool)
    values = record.values.view(np.uint32)
    rows = [(b, j) for b in range(blocks) for j in range(length) if bitmap[b, j]]
    beats = []
    for (b, j), value in zip(rows, values):
        if row_words == 0:
            beats.append(Beat(int(value), 0, j, 1, 0))
            continue
        addr = dense_base + b * block_stride + j * row_stride
        row = np.frombuffer(bytes(memory[addr:addr + 4 * row_words]), dtype="<u4")
        beats += [Beat(int(value), int(w), j, int(k == row_words - 1), 0)
                  for k, w in enumerate(row)]
    if beats:
        beats[-1] = dataclasses.replace(beats[-1], last=1)
    return ReadResult(beats, nbytes + 4 * row_words * len(rows), rows)


def gather_rows(rows, *, dense_base, row_stride, block_stride, row_words):
    """Byte ranges ``[start, stop)`` of the dense rows ``rows`` (``(block, index)``)."""
    return [(dense_base + b * block_stride + j * row_stride,
             dense_base + b * block_stride + j * row_stride + 4 * row_words) for b, j in rows]

"""The compressing DMA's golden model (:mod:`nnrtl.sim.golden.omni.dma`): round trips with
MS1's software format (:mod:`nnrtl.gen.omni.compress`) and byte counts against the
footprint and data-movement model (:mod:`nnrtl.gen.omni.accounting`)."""

import numpy as np
import pytest
import torch

from nnrtl.gen.omni import accounting
from nnrtl.gen.omni.compress import compress, decompress, from_bytes, prune, to_bytes
from nnrtl.sim.golden.omni import dma as golden


def p1_tensor(seed, batch, hidden):
    """A cell's BP-EW-P1 tensor (B x 6 x H, fp32) with exact zeros, -0.0, NaN and values
    on both sides of 0.1."""
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(batch, 6, hidden)) * 0.15).astype(np.float32)
    bits = x.view(np.uint32)
    where = rng.random(bits.shape) < 0.1
    bits[where] = rng.choice(np.array([0, 0x80000000, 0x7FC00000, 0x3DCCCCCD, 0x3DCCCCCC],
                                      dtype=np.uint32), int(where.sum()))
    return torch.from_numpy(x)


def memory_with(image, base, size=1 << 14):
    memory = bytearray(np.random.default_rng(base).integers(0, 256, size, dtype=np.uint8))
    memory[base:base + len(image)] = image
    return memory


@pytest.mark.parametrize("batch, hidden, theta", [(2, 13, 0.1), (1, 8, 0.0), (3, 1, 0.1),
                                                   (2, 33, 1e9), (1, 20, 0.05)])
def test_round_trip_with_software_record(batch, hidden, theta):
    part1 = p1_tensor(batch * 100 + hidden, batch, hidden)
    bits = part1.numpy().view(np.uint32).reshape(6 * batch, hidden)
    written = golden.write_record(bits, sparse=True, threshold=theta)
    # the bytes are the software's record of the cell (blocks = samples x vectors)
    assert written.image == to_bytes(compress(part1, theta))
    assert written.bytes_written == len(written.image) == compress(part1, theta).nbytes
    keep = ~(part1.abs() < theta)
    assert written.kept == int(keep.sum()) and written.pruned == part1.numel() - written.kept
    base = 37
    memory = memory_with(written.image, base)
    read = golden.read_record(memory, mode="expand", base=base, blocks=6 * batch,
                              length=hidden)
    got = np.array([b.value for b in read.beats], dtype=np.uint32).reshape(bits.shape)
    # survivors bit-exact at their positions, pruned positions +0.0
    assert (got[keep.reshape(bits.shape).numpy()] == bits[keep.reshape(bits.shape).numpy()]).all()
    assert (got[~keep.reshape(bits.shape).numpy()] == 0).all()
    # what MS1's BP reads (software decode of the same bytes)
    soft = decompress(from_bytes(written.image, batch, hidden))
    assert (soft.numpy().view(np.uint32).reshape(bits.shape) == got).all()
    assert torch.equal(torch.nan_to_num(soft, nan=7.0),
                       torch.nan_to_num(prune(part1, theta), nan=7.0))
    assert [b.index for b in read.beats] == list(range(hidden)) * (6 * batch)
    assert [b.last for b in read.beats] == [0] * (bits.size - 1) + [1]
    assert read.bytes_read == written.bytes_written
    if theta == 0:
        assert written.pruned == 0


def test_threshold_zero_keeps_zeros_and_large_threshold_prunes_all():
    bits = np.array([[0, 0x80000000, 0x3F800000, 0x7FC00000]], dtype=np.uint32)
    assert golden.write_record(bits, sparse=True, threshold=0.0).kept == 4
    everything = golden.write_record(bits, sparse=True, threshold=1e30)
    assert everything.kept == 1 and everything.image == bytes([0b1000]) + bits[0, 3:].tobytes()


@pytest.mark.parametrize("batch, hidden, theta", [(2, 16, 0.1), (4, 12, 0.1)])
def test_byte_counts_equal_accounting(batch, hidden, theta):
    """One cell (one layer, one timestamp): the record written and read back is the
    intermediates figure of the footprint and data-movement model at the measured
    density; the weight rows gathered are the model's BP weight reads at that density."""
    part1 = p1_tensor(batch + hidden, batch, hidden)
    bits = part1.numpy().view(np.uint32).reshape(6 * batch, hidden)
    written = golden.write_record(bits, sparse=True, threshold=theta)
    density = written.kept / bits.size
    work = accounting.Workload(input_size=hidden, hidden_size=hidden, layers=1, length=1,
                               batch=batch)
    held = accounting.footprint(work, density=density)
    assert held["intermediates"] == pytest.approx(written.bytes_written, abs=1e-6)
    memory = memory_with(written.image, 64)
    read = golden.read_record(memory, mode="expand", base=64, blocks=6 * batch, length=hidden)
    moved = accounting.data_movement(work, density=density)
    assert moved["intermediates"] == pytest.approx(written.bytes_written + read.bytes_read,
                                                   abs=1e-6)
    # MS1 off: five fp32 vectors per cell, dense transfers
    dense = golden.write_record(bits[:5 * batch], sparse=False)
    assert accounting.footprint(work)["intermediates"] == dense.bytes_written

    # BP weight rows: one sample's 4H δgate entries pruned, the [W | U | b] row of each
    # survivor gathered (block_stride 0: the same matrix for every block).
    gates = p1_tensor(7, 1, 4 * hidden).numpy().reshape(-1)[:4 * hidden]
    gate_bits = gates.view(np.uint32).reshape(1, 4 * hidden)
    record = golden.write_record(gate_bits, sparse=True, threshold=theta)
    row_words = 2 * hidden + 1
    memory = memory_with(record.image, 0, size=1 << 16)
    gathered = golden.read_record(memory, mode="gather", base=0, blocks=1, length=4 * hidden,
                                  dense_base=4096, row_stride=4 * row_words, block_stride=0,
                                  row_words=row_words)
    rows = record.kept / (4 * hidden)
    size = accounting.parameter_bytes(work, 0)
    assert gathered.bytes_read - len(record.image) == pytest.approx(rows * size, abs=1e-6)
    assert len(gathered.rows) == record.kept
    assert {j for _, j in gathered.rows} == {j for j in range(4 * hidden)
                                            if not abs(gates[j]) < np.float32(theta)}


def test_gather_beats_and_rows():
    bits = np.array([[0x3F800000, 0, 0x40000000, 0], [0, 0, 0, 0xBF800000]], dtype=np.uint32)
    written = golden.write_record(bits, sparse=True, threshold=0.5)
    assert written.image == bytes([0b0101, 0b1000]) + bits[0, [0, 2]].tobytes() + \
        bits[1, 3:].tobytes()
    memory = memory_with(written.image, 5, size=4096)
    row = np.arange(100, 100 + 64, dtype="<u4").tobytes()
    memory[1024:1024 + len(row)] = row
    got = golden.read_record(memory, mode="gather", base=5, blocks=2, length=4,
                             dense_base=1024, row_stride=8, block_stride=32, row_words=2)
    assert got.rows == [(0, 0), (0, 2), (1, 3)]
    words = [b.dense for b in got.beats]
    # rows at 1024 + 8 j + 32 b: words 2j + 8b, two each
    assert words == [100, 101, 104, 105, 100 + 14, 100 + 15]
    assert [b.value for b in got.beats] == [0x3F800000] * 2 + [0x40000000] * 2 + \
        [0xBF800000] * 2
    assert [b.row_last for b in got.beats] == [0, 1] * 3
    assert [b.last for b in got.beats] == [0] * 5 + [1]
    assert got.bytes_read == len(written.image) + 3 * 8
    assert golden.gather_rows(got.rows, dense_base=1024, row_stride=8, block_stride=32,
                              row_words=2) == [(1024, 1032), (1040, 1048), (1080, 1088)]

"""gen/omni/compress.py: MS1's pruning and the compressed record (the DMA contract)."""

import struct

import numpy as np
import pytest
import torch

from nnrtl.gen.errors import UsageError
from nnrtl.gen.omni.compress import (check_threshold, compress, decompress, from_bytes,
                                     prune, record_bytes, to_bytes)


def _example():
    part1 = torch.zeros(1, 6, 10)
    part1[0, 0] = torch.tensor([0.5, 0.05, -0.2, 0.0, 0.1, -0.09, 1.0, 0.0, 0.0, 0.3])
    part1[0, 5, 8] = -2.0
    return part1


def test_record_bytes_by_hand():
    record = compress(_example(), 0.1)
    # positions 0, 2, 4, 6 of vector 0 -> 0b01010101; position 9 -> bit 1 of byte 1;
    # vector 5 position 8 -> bit 0 of its byte 1.
    expected_bitmap = [[0x55, 0x02], [0, 0], [0, 0], [0, 0], [0, 0], [0x00, 0x01]]
    assert record.bitmap.tolist() == [expected_bitmap]
    assert record.values.tolist() == pytest.approx([0.5, -0.2, 0.1, 1.0, 0.3, -2.0])
    data = to_bytes(record)
    assert data == bytes(sum(expected_bitmap, [])) + struct.pack(
        "<6f", 0.5, -0.2, 0.1, 1.0, 0.3, -2.0)
    assert len(data) == record.nbytes == 6 * 2 + 4 * 6


def test_round_trip_prunes_below_threshold_only():
    part1 = _example()
    dense = decompress(from_bytes(to_bytes(compress(part1, 0.1)), 1, 10))
    expected = part1.clone()
    expected[0, 0, [1, 5]] = 0.0
    assert torch.equal(dense, expected)
    assert torch.equal(prune(part1, 0.1), expected)


@pytest.mark.parametrize("hidden", [1, 7, 8, 33])
@pytest.mark.parametrize("threshold", [0.0, 0.1, 0.5])
def test_random_round_trip(hidden, threshold):
    rng = np.random.default_rng(hidden)
    part1 = torch.tensor(rng.normal(0, 0.3, (3, 6, hidden)), dtype=torch.float32)
    part1[0, 0, 0] = 0.0
    record = compress(part1, threshold)
    keep = part1.abs() >= threshold
    assert record.survivors == int(keep.sum())
    data = to_bytes(record)
    assert len(data) == record_bytes(18, hidden, int(keep.sum()))
    back = decompress(from_bytes(data, 3, hidden))
    assert torch.equal(back[keep], part1[keep])
    assert not back[~keep].any()
    if threshold == 0:
        assert torch.equal(back, part1)


def test_from_bytes_rejects_wrong_lengths():
    data = to_bytes(compress(_example(), 0.1))
    with pytest.raises(ValueError, match=r"^record of 35 bytes does not match its bitmap: "
                                         r"12 index bytes \+ 4 x 6 survivors$"):
        from_bytes(data[:-1], 1, 10)
    with pytest.raises(ValueError, match=r"shorter than its index part \(12 bytes\)$"):
        from_bytes(data[:5], 1, 10)


def test_threshold_errors():
    assert check_threshold(0) == 0.0
    for bad in (-1, float("nan"), "0.1", True):
        with pytest.raises(UsageError, match=r"^prune_threshold must be a finite number "
                                             r">= 0, not "):
            check_threshold(bad)

"""The FARNN MVM golden model (:mod:`nnrtl.sim.golden.farnn.mvm`) against facts written
independently of it: the weight stream by an explicit loop over chains, PEs and
addresses; the fold order of split partials on a case where it decides the result; the
products' sum against float64; the chunk rule."""

import numpy as np
import pytest

from nnrtl.hw.arith.float import FP32
from nnrtl.sim.golden.accumulator import streaming_sum
from nnrtl.sim.golden.farnn import mvm as golden
from nnrtl.sim.golden.float import float_mul, from_bits, to_bits


@pytest.mark.parametrize("chains, length, split, n_out, n_in",
                         [(2, 3, 1, 7, 5), (4, 2, 2, 12, 9), (4, 3, 4, 15, 10),
                          (16, 2, 8, 40, 23), (2, 2, 2, 8, 5)])
def test_pack_weights_follows_the_documented_order(chains, length, split, n_out, n_in):
    rng = np.random.default_rng(n_out)
    matrix = rng.integers(1, 2**32, size=(n_out, n_in), dtype=np.uint64)
    words = golden.pack_weights(matrix, chains=chains, chain_length=length, split=split)
    layout = golden.plan(n_out, n_in, chains=chains, chain_length=length, split=split)
    pes, rounds = chains * length, layout["rounds"]
    lanes = chains // split
    c = -(-n_in // split)
    per_pe = (rounds - 1) * n_in + c if layout["split_last"] else rounds * n_in
    assert words.shape == (length * per_pe, chains)

    def entry(row, col):
        return matrix[row, col] if row < n_out and col < n_in else 0

    for chain in range(chains):
        g, j = divmod(chain, lanes)
        for k in range(length):
            block = words[k * per_pe:(k + 1) * per_pe, chain]
            for r in range(rounds):
                if layout["split_last"] and r == rounds - 1:
                    want = [entry(r * pes + k * lanes + j, g * c + t) for t in range(c)]
                    assert list(block[r * n_in:]) == want
                else:
                    want = [entry(r * pes + k * chains + chain, t) for t in range(n_in)]
                    assert list(block[r * n_in:(r + 1) * n_in]) == want
    back = golden.unpack_weights(words, n_out=n_out, n_in=n_in, chains=chains,
                                 chain_length=length, split=split)
    assert np.array_equal(back, matrix)


def test_plan_splits_only_a_last_round_that_fits():
    """The paper's example and its limits: 1,024 rows on 768 PEs split the second round
    (256 rows <= 384); 1,200 rows do not fit 384 and stay whole; one round never splits."""
    assert golden.plan(1024, 1024, chains=16, chain_length=48, split=2)["split_last"]
    assert golden.plan(1024, 1024, chains=16, chain_length=48, split=2)["split_from"] == 768
    assert not golden.plan(1200, 1024, chains=16, chain_length=48, split=2)["split_last"]
    assert not golden.plan(700, 1024, chains=16, chain_length=48, split=2)["split_last"]
    assert not golden.plan(1024, 1024, chains=16, chain_length=48, split=1)["split_last"]


def test_unpack_rejects_wrong_streams():
    matrix = np.arange(1, 13, dtype=np.uint64).reshape(4, 3)
    words = golden.pack_weights(matrix, chains=2, chain_length=2)
    with pytest.raises(ValueError, match=r"^a weight stream of \(5, 2\) beats x lanes does "
                                         r"not carry 4 x 3 on 2 chains of 2 with split 1: "
                                         r"expected \(6, 2\)$"):
        golden.unpack_weights(words[:5], n_out=4, n_in=3, chains=2, chain_length=2)
    with pytest.raises(ValueError, match=r"^split_last needs split > 1 and rounds >= 2, "
                                         r"not split 1 and rounds 1$"):
        golden.pack_weights(matrix, chains=2, chain_length=2, rounds=1, split_last=True)
    with pytest.raises(ValueError, match=r"padding"):
        golden.unpack_weights(words, n_out=3, n_in=3, chains=2, chain_length=2)


def test_split_partials_fold_left_in_group_order():
    """Chunks of one element each: partials 2**100, -2**100, 1. The left fold gives
    ``(2**100 - 2**100) + 1 = 1``; any other order loses the 1."""
    matrix = to_bits(FP32, np.array([[2.0**100, -2.0**100, 1.0]]))
    x = to_bits(FP32, np.ones(3))
    got = golden.mvm(matrix, x, adder_stages=4, split=3)
    assert from_bits(FP32, got).tolist() == [1.0]
    unsplit = golden.mvm(matrix, x, adder_stages=4, split=3, split_from=1)
    products = float_mul(FP32, matrix[0], x)
    assert int(unsplit[0]) == streaming_sum(FP32, products, adder_stages=4)


@pytest.mark.parametrize("split", [1, 2, 4])
def test_mvm_is_close_to_float64(split):
    rng = np.random.default_rng(split)
    matrix = rng.normal(size=(12, 33)).astype(np.float32)
    x = rng.normal(size=(2, 33)).astype(np.float32)
    got = from_bits(FP32, golden.mvm(to_bits(FP32, matrix), to_bits(FP32, x),
                                     adder_stages=4, split=split, split_from=5))
    exact = x.astype(np.float64) @ matrix.T.astype(np.float64)
    scale = np.abs(x).astype(np.float64) @ np.abs(matrix).T.astype(np.float64)
    assert np.all(np.abs(got - exact) <= 33 * 2.0**-24 * scale)


def test_chunk_rule():
    assert golden.chunks(10, 4) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    with pytest.raises(ValueError, match=r"^n_in \(9\) leaves chunk 3 of split 4 empty "
                                         r"\(chunks of 3\); every chunk needs at least one "
                                         r"element$"):
        golden.chunks(9, 4)
    with pytest.raises(ValueError, match=r"^split \(3\) must divide chains \(16\)$"):
        golden.plan(10, 10, chains=16, chain_length=2, split=3)


def test_result_beats_order():
    """10 rows of 2 on 2 chains of 2 with split 2: round 0 full (rows 0-3), round 1 split
    (rows 4-5, one per beat, lane 1 zero)."""
    matrix = to_bits(FP32, np.arange(1, 1 + 6 * 2, dtype=np.float32).reshape(6, 2))
    x = to_bits(FP32, np.array([[1.0, 0.0], [0.0, 1.0]]))
    beats = golden.result_beats(matrix, x, chains=2, chain_length=2, split=2,
                                adder_stages=2)
    values = [from_bits(FP32, np.array(lanes)).tolist() for lanes, _last in beats]
    # round 0: vector 0 (column 0), then vector 1 (column 1): beat k = rows 2k, 2k + 1
    assert values[:4] == [[1.0, 3.0], [5.0, 7.0], [2.0, 4.0], [6.0, 8.0]]
    # round 1, split: row 4 + k in lane 0 (chunks [0, 1) and [1, 2) added)
    assert values[4:] == [[9.0, 0.0], [11.0, 0.0], [10.0, 0.0], [12.0, 0.0]]
    assert [last for _lanes, last in beats] == [False, True] * 4

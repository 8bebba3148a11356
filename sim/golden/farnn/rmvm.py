"""Bit-exact model of the FARNN MVM arithmetic: the PE MAC and cell splitting of the
contract (:mod:`nnrtl.hw.farnn`, "Arithmetic"), on fp32 bit patterns.

Row ``j`` of a matrix is one PE's: the products ``p_e = float_mul(w[j, e], x[e])``
enter its :class:`~nnrtl.hw.arith.accumulator.StreamingAccumulator` in element order, and
the result is :func:`~nnrtl.sim.golden.accumulator.streaming_sum` of them.

Speed: the goldens of :mod:`nnrtl.sim.golden.float` compute with integers, a microsecond
or so per operation; a 1,024-cell step is millions. :func:`fp32_mul`, :func:`fp32_add` and
:func:`fp32_streaming_sums` give the same bits through numpy's IEEE binary32 arithmetic
(NaNs made canonical as the goldens make them), checked against the goldens over their
operand mixes by the tests, and fall back to the goldens should the FPU flush subnormals.
This is the one implementation of the MVM arithmetic: :mod:`.mvm` (the MVM unit's golden)
and :mod:`.layer` call it. Split by ``s``, the vector is cut into the chunks of
:func:`nnrtl.hw.farnn.config.chunk_bounds`; PE group ``g`` sums chunk ``g`` as a stream
of its own and the chain heads fold the partials left to right, ``((q0 + q1) + q2) +
...``, with ``float_add``.

:func:`rmvm` applies one split factor to every row it is given; :func:`unit_mvm` runs the
matrices of a :class:`~nnrtl.hw.farnn.config.MatrixShape` (each unit's gate matrix, or
the projection the units share), splitting the rows of a split last round only. The
round a row is computed in changes where and when its sum is computed, not its order.
"""

import numpy as np

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.farnn.config import chunk_bounds

from ..accumulator import _reduce, streaming_sums
from ..float import float_add, float_mul

__all__ = ["rmvm", "unit_mvm", "fold", "fp32_mul", "fp32_add", "fp32_streaming_sums"]

#: Products per block of work: bounds the temporaries of the vectorised arithmetic.
_BLOCK_PRODUCTS = 1 << 20


def _check_stages(name, value, lowest, highest):
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= highest:
        raise TypeError(f"{name} must be an integer from {lowest} to {highest}, not {value!r}")


def _ieee_float32():
    """Whether numpy's float32 arithmetic keeps subnormals (no flush-to-zero mode set in
    the FPU by some library): then its products are IEEE binary32's."""
    tiny = np.array([2.0 ** -126], np.float32)
    with np.errstate(all="ignore"):
        return bool((tiny * np.float32(0.5))[0] == np.float32(2.0 ** -127))


def fp32_mul(a_bits, b_bits):
    """``float_mul(FP32, a, b)``, fast: numpy's float32 multiply is IEEE 754 binary32's,
    one rounding to nearest even with subnormals, the same bits as the golden
    :func:`~nnrtl.sim.golden.float.float_mul` (pinned over its operand mixes by
    ``tests/farnn/golden/test_farnn_golden.py``) except for NaNs, which are made the canonical
    NaN as the golden's. Falls back to the golden if the FPU flushes subnormals."""
    a = np.asarray(a_bits, dtype=np.uint32)
    b = np.asarray(b_bits, dtype=np.uint32)
    if not _ieee_float32():
        return float_mul(FP32, a, b)
    with np.errstate(all="ignore"):
        product = np.multiply(a.view(np.float32), b.view(np.float32))
    bits = np.ascontiguousarray(product).view(np.uint32)
    return np.where(np.isnan(product), np.uint32(FP32.canonical_nan), bits)


def fp32_add(a_bits, b_bits):
    """``float_add(FP32, a, b)`` by numpy's IEEE float32 addition, as :func:`fp32_mul`
    (IEEE's rules for the sign of a zero sum are the golden's; NaNs made canonical)."""
    a = np.asarray(a_bits, dtype=np.uint32)
    b = np.asarray(b_bits, dtype=np.uint32)
    if not _ieee_float32():
        return float_add(FP32, a, b)
    with np.errstate(all="ignore"):
        total = np.add(a.view(np.float32), b.view(np.float32))
    bits = np.ascontiguousarray(total).view(np.uint32)
    return np.where(np.isnan(total), np.uint32(FP32.canonical_nan), bits)


def fp32_streaming_sums(streams, *, adder_stages):
    """:func:`~nnrtl.sim.golden.accumulator.streaming_sums` of equal-length fp32 streams
    (``streams`` ``count x n``, ``n >= 1``), the same rule -- slot ``i mod L``, then the
    accumulator golden's own reduction (``_reduce``) -- with :func:`fp32_add`; the same bits
    (pinned by ``tests/farnn/golden/test_farnn_golden.py``), fast."""
    streams = np.asarray(streams, dtype=np.uint32)
    count, n = streams.shape
    slots = adder_stages
    if not _ieee_float32():
        return streaming_sums(FP32, streams, adder_stages=adder_stages).astype(np.uint32)
    rows = -(-n // slots)
    padded = np.full((count, rows * slots), FP32.sign_mask, dtype=np.uint32)
    padded[:, :n] = streams
    partials = np.full((count, slots), -0.0, dtype=np.float32)
    values = padded.view(np.float32)
    with np.errstate(all="ignore"):
        for row in range(rows):
            partials = partials + values[:, row * slots:(row + 1) * slots]
    bits = np.where(np.isnan(partials), np.uint32(FP32.canonical_nan),
                    partials.view(np.uint32))
    leaving = bits[:, (n + np.arange(slots)) % slots]
    return _reduce(FP32, [leaving[:, j] for j in range(slots)], fp32_add)


def fold(parts):
    """``((parts[0] + parts[1]) + parts[2]) + ...`` with ``float_add`` (fp32 patterns)."""
    total = parts[0]
    for part in parts[1:]:
        total = fp32_add(total, part)
    return np.asarray(total, dtype=np.uint32)


def rmvm(weight_bits, x_bits, *, split, adder_stages, multiplier_stages):
    """``W x`` as the PEs compute it, every row split by ``split``.

    Parameters
    ----------
    weight_bits : array_like of uint32, shape (rows, n_in)
        fp32 patterns of the matrix.
    x_bits : array_like of uint32, shape (..., n_in)
        fp32 patterns of the vectors (any leading shape: batch, steps).
    split : int
        Chunks each row's sum is cut into (1: one stream per row); no chunk may be empty.
    adder_stages : int
        The accumulator's adder latency (1 to 6): its number of slots, which fixes the
        summation order.
    multiplier_stages : int
        The multiplier's latency (0 to 6); it does not change a bit of the result.

    Returns
    -------
    ndarray of uint32, shape (..., rows)

    Raises
    ------
    TypeError
        A stage count or ``split`` of the wrong type or range.
    ValueError
        Shapes that do not match, or a split leaving a chunk empty.
    """
    _check_stages("adder_stages", adder_stages, 1, 6)
    _check_stages("multiplier_stages", multiplier_stages, 0, 6)
    weights = np.asarray(weight_bits, dtype=np.uint32)
    x = np.asarray(x_bits, dtype=np.uint32)
    if weights.ndim != 2 or x.ndim < 1 or x.shape[-1] != weights.shape[1]:
        raise ValueError(f"weight_bits must be rows x n_in and x_bits ... x n_in, not "
                         f"{weights.shape} and {x.shape}")
    n_in = weights.shape[1]
    if not isinstance(split, int) or isinstance(split, bool) or not 1 <= split <= max(n_in, 1):
        raise TypeError(f"split must be an integer from 1 to n_in ({n_in}), not {split!r}")
    chunks = chunk_bounds(n_in, split)
    if any(start >= stop for start, stop in chunks):
        raise ValueError(f"split ({split}) leaves a chunk of the {n_in} inputs empty "
                         f"(chunks of {-(-n_in // split)})")
    lead = x.shape[:-1]
    vectors = x.reshape(-1, n_in)
    rows = weights.shape[0]
    out = np.zeros((vectors.shape[0], rows), dtype=np.uint32)
    if rows == 0 or vectors.shape[0] == 0:
        return out.reshape(*lead, rows)
    block = max(1, _BLOCK_PRODUCTS // max(1, n_in * vectors.shape[0]))
    for first in range(0, rows, block):
        w = weights[first:first + block]
        # products[v, j, e] = w[j, e] * x[v, e]
        products = fp32_mul(w[None, :, :], vectors[:, None, :])
        parts = []
        for start, stop in chunks:
            streams = products[:, :, start:stop].reshape(-1, stop - start)
            parts.append(fp32_streaming_sums(streams, adder_stages=adder_stages)
                         .reshape(vectors.shape[0], -1))
        out[:, first:first + block] = fold(parts)
    return out.reshape(*lead, rows)


def unit_mvm(shape, weight_bits, x_bits, *, per_group, adder_stages, multiplier_stages):
    """A matrix as the MVM units run it (:class:`~nnrtl.hw.farnn.config.MatrixShape`):
    rows ``[0, shape.split_from)`` of each unit's block summed whole, the rest of the block
    (a split last round) split by ``shape.split``.

    Parameters
    ----------
    shape : MatrixShape
    weight_bits : array_like of uint32, shape (groups, total_rows, n_in)
        ``groups`` matrices of this shape (the gate matrices of the units; 1 for the
        projection, whose rows the units share in blocks of ``shape.rows``).
    x_bits : array_like of uint32
        ``(..., groups, n_in)``: one vector per matrix (``per_group``, BW: each unit its
        gate's delta), or ``(..., n_in)``: one vector for all (FW: h).
    per_group : bool
    adder_stages, multiplier_stages : int
        As :func:`rmvm`.

    Returns
    -------
    ndarray of uint32, shape (..., groups, total_rows)
    """
    weights = np.asarray(weight_bits, dtype=np.uint32)
    groups, total, n_in = weights.shape
    if (total, n_in) != (shape.total_rows, shape.inputs):
        raise ValueError(f"the {shape.name} matrix must be {shape.total_rows} x "
                         f"{shape.inputs}, not {total} x {n_in}")
    x = np.asarray(x_bits, dtype=np.uint32)
    if per_group and (x.ndim < 2 or x.shape[-2] != groups):
        raise ValueError(f"x_bits must be ... x {groups} x {n_in}, not {x.shape}")
    lead = x.shape[:-2] if per_group else x.shape[:-1]
    split_rows = np.arange(total) % shape.rows >= shape.split_from   # index in its block
    out = np.zeros(lead + (groups, total), dtype=np.uint32)
    options = dict(adder_stages=adder_stages, multiplier_stages=multiplier_stages)
    for rows, split in ((~split_rows, 1), (split_rows, shape.split)):
        count = int(rows.sum())
        if not count:
            continue
        if per_group:
            for g in range(groups):
                out[..., g, rows] = rmvm(weights[g][rows], x[..., g, :], split=split,
                                         **options)
        else:
            stacked = weights[:, rows].reshape(groups * count, n_in)
            out[..., rows] = rmvm(stacked, x, split=split, **options).reshape(
                lead + (groups, count))
    return out

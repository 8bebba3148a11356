"""Bit-exact model of one FARNN MVM unit (:class:`nnrtl.hw.farnn.mvm.MVMUnit`): the
products and streaming sums of the arithmetic contract (``briefs/farnn-contract.md``),
the weight stream's packing, the order of the result beats, and the cycle count of a run
without gaps or backpressure.

Arithmetic (the contract). Row ``j`` of ``R`` times a vector ``x`` of ``n_in`` elements:
the products ``p[e] = float_mul(R[j, e], x[e])``; with ``split = s`` the elements are cut
into ``s`` contiguous chunks, chunk ``g = [g*c, min((g+1)*c, n_in))`` with
``c = ceil(n_in / s)``, each summed as its own stream ``q[g] = streaming_sum(p[chunk g],
adder_stages)``, and the partials folded in group order ``((q[0] + q[1]) + q[2]) + ...``
with ``float_add``. ``s = 1`` is one stream over all elements. Every chunk must hold at
least one element: ``(s - 1) * c < n_in``.

Geometry (decided here, the RTL and the host packer follow it). An MVM unit has
``chains`` chains of ``chain_length = L`` PEs; with split ``s`` the chains form ``s``
groups of ``lanes = chains // s`` consecutive chains (group ``g`` = chains ``g*lanes`` to
``(g+1)*lanes - 1``) and group ``g`` is fed chunk ``g``. The split applies to every round
(a split factor of the hardware, not of one round); a round computes
``rows_per_round = lanes * L`` rows and a matrix of ``n_out`` rows takes
``rounds = ceil(n_out / rows_per_round)`` rounds. Row of round ``r``, PE ``k``, lane
``j``: ``r * rows_per_round + k * lanes + j``; chain ``g * lanes + j``'s PE ``k`` holds
chunk ``g`` of that row, weight ``t`` of the chunk at address ``r * c + t``. Rows past
``n_out`` and columns past ``n_in`` are zeros (the unit computes them; their results are
dropped).

Weight stream (:func:`pack_weights`): beat ``b`` carries one word per chain (lane ``c`` of
the ``chains * 32``-bit port feeds chain ``c``); chain ``c``'s words are PE 0's block,
then PE 1's, ..., each block ``rounds * c`` words in address order. ``L * rounds * c``
beats, the last one marked ``last`` on the port.

Result beats (:func:`result_beats`): for each round, for each vector of the batch, ``L``
beats (PE 0 first) of ``lanes`` sums, lane ``j`` of beat ``k`` being row
``r * rows_per_round + k * lanes + j``; the beat of PE ``L - 1`` is marked ``last``.

Cycle count (:func:`cycles`): see its docstring.
"""

import numpy as np

from nnrtl.hw.arith.accumulator import reduction_schedule
from nnrtl.hw.arith.float_format import FloatFormat

from ..accumulator import streaming_sums
from ..float import float_add, float_mul, pattern_dtype


__all__ = ["reduction_cycles", "chunk_length", "chunks", "rows_per_round", "rounds_for",
           "words_per_pe", "row_index", "mvm", "pack_weights", "unpack_weights",
           "result_beats", "cycles", "load_cycles", "paper_cases"]


def _int(name, value, lowest=1):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < lowest:
        rule = "a positive integer" if lowest == 1 else f"an integer of at least {lowest}"
        raise TypeError(f"{name} must be {rule}, not {value!r}")
    return int(value)


def _geometry(chains, chain_length, split):
    chains = _int("chains", chains)
    chain_length = _int("chain_length", chain_length)
    split = _int("split", split)
    if chains % split:
        raise ValueError(f"split ({split}) must divide chains ({chains})")
    return chains, chain_length, split


def reduction_cycles(adder_stages):
    """``E``: the accumulator's input stall per stream (0, 3, 7, 11, 16, 21 for 1-6)."""
    return len(reduction_schedule(adder_stages)) - 1


def chunk_length(n_in, split):
    """``c = ceil(n_in / split)``, checking that every chunk is non-empty."""
    n_in = _int("n_in", n_in)
    split = _int("split", split)
    c = -(-n_in // split)
    if (split - 1) * c >= n_in:
        raise ValueError(f"n_in ({n_in}) leaves chunk {split - 1} of split {split} empty "
                         f"(chunks of {c}); every chunk needs at least one element")
    return c


def chunks(n_in, split):
    """The ``(start, stop)`` of each chunk, in group order."""
    c = chunk_length(n_in, split)
    return [(g * c, min((g + 1) * c, n_in)) for g in range(split)]


def rows_per_round(*, chains, chain_length, split=1):
    """Rows one round computes: ``chains // split * chain_length``."""
    chains, chain_length, split = _geometry(chains, chain_length, split)
    return chains // split * chain_length


def rounds_for(n_out, *, chains, chain_length, split=1):
    """Rounds (vector slices) for ``n_out`` rows."""
    return -(-_int("n_out", n_out) // rows_per_round(chains=chains, chain_length=chain_length,
                                                    split=split))


def words_per_pe(n_in, *, rounds, split=1):
    """Weight words each PE stores: ``rounds * chunk_length(n_in, split)``."""
    return _int("rounds", rounds) * chunk_length(n_in, split)


def row_index(round_, pe, lane, *, chains, chain_length, split=1):
    """The matrix row computed in round ``round_`` by PE ``pe`` of the chains of lane
    ``lane`` (``0 <= lane < chains // split``)."""
    lanes = chains // split
    return round_ * rows_per_round(chains=chains, chain_length=chain_length, split=split) \
        + pe * lanes + lane


def mvm(fmt, matrix_bits, vectors_bits, *, adder_stages, split=1):
    """``R x`` for each vector, as the MVM unit computes it (module docstring).

    Parameters
    ----------
    fmt : FloatFormat
    matrix_bits : array_like of int, shape (n_out, n_in)
    vectors_bits : array_like of int, shape (n_in,) or (batch, n_in)
    adder_stages : int
    split : int

    Returns
    -------
    ndarray of pattern_dtype(fmt), shape (n_out,) or (batch, n_out)
    """
    if not isinstance(fmt, FloatFormat):
        raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
    matrix = np.asarray(matrix_bits, dtype=np.uint64)
    vectors = np.asarray(vectors_bits, dtype=np.uint64)
    single = vectors.ndim == 1
    vectors = np.atleast_2d(vectors)
    if matrix.ndim != 2 or vectors.ndim != 2 or matrix.shape[1] != vectors.shape[1]:
        raise ValueError(f"matrix {matrix.shape} and vectors {vectors.shape} do not fit: "
                         f"the vectors need matrix.shape[1] elements")
    n_out, n_in = matrix.shape
    parts = chunks(n_in, split)
    results = np.empty((vectors.shape[0], n_out), dtype=pattern_dtype(fmt))
    for b, x in enumerate(vectors):
        products = float_mul(fmt, matrix, x[None, :])
        total = None
        for start, stop in parts:
            partial = streaming_sums(fmt, list(products[:, start:stop]),
                                     adder_stages=adder_stages)
            total = partial if total is None else float_add(fmt, total, partial)
        results[b] = total
    return results[0] if single else results


def _padded(matrix, rows, columns):
    matrix = np.asarray(matrix, dtype=np.uint64)
    if matrix.ndim != 2 or matrix.shape[0] > rows or matrix.shape[1] > columns:
        raise ValueError(f"a matrix of shape {matrix.shape} does not fit {rows} rows of "
                         f"{columns} columns")
    padded = np.zeros((rows, columns), dtype=np.uint64)
    padded[:matrix.shape[0], :matrix.shape[1]] = matrix
    return padded


def pack_weights(matrix_bits, *, chains, chain_length, split=1, rounds=None):
    """The weight stream of one MVM unit: ``(beats, chains)`` words (module docstring).

    ``rounds`` defaults to :func:`rounds_for` the matrix's rows; more rounds pad with
    zero rows. Raises ``ValueError`` if the matrix has more rows than ``rounds`` hold.
    """
    chains, chain_length, split = _geometry(chains, chain_length, split)
    matrix = np.asarray(matrix_bits, dtype=np.uint64)
    n_out, n_in = matrix.shape
    if rounds is None:
        rounds = rounds_for(n_out, chains=chains, chain_length=chain_length, split=split)
    c = chunk_length(n_in, split)
    lanes = chains // split
    per_round = lanes * chain_length
    padded = _padded(matrix, rounds * per_round, split * c)
    # padded[r, k, j, g, t] -> row r*per_round + k*lanes + j, column g*c + t
    blocks = padded.reshape(rounds, chain_length, lanes, split, c)
    # chain g*lanes + j, PE k, address r*c + t
    words = blocks.transpose(1, 0, 4, 3, 2).reshape(chain_length * rounds * c, split * lanes)
    return words


def unpack_weights(words, *, n_out, n_in, chains, chain_length, split=1):
    """The matrix (``n_out`` by ``n_in``) a weight stream carries: the inverse of
    :func:`pack_weights`. Raises ``ValueError`` if the stream's length is not that of
    ``n_out`` by ``n_in`` on this geometry or padding words are not zero."""
    chains, chain_length, split = _geometry(chains, chain_length, split)
    words = np.asarray(words, dtype=np.uint64)
    c = chunk_length(n_in, split)
    lanes = chains // split
    rounds = rounds_for(n_out, chains=chains, chain_length=chain_length, split=split)
    expected = (chain_length * rounds * c, chains)
    if words.shape != expected:
        raise ValueError(f"a weight stream of {words.shape} beats x lanes does not carry "
                         f"{n_out} x {n_in} on {chains} chains of {chain_length} with split "
                         f"{split}: expected {expected}")
    blocks = words.reshape(chain_length, rounds, c, split, lanes).transpose(1, 0, 4, 3, 2)
    padded = blocks.reshape(rounds * lanes * chain_length, split * c)
    mask = np.ones(padded.shape, dtype=bool)
    mask[:n_out, :n_in] = False
    if np.any(padded[mask]):
        raise ValueError("the weight stream has nonzero words in its padding")
    return padded[:n_out, :n_in]


def result_beats(fmt, matrix_bits, vectors_bits, *, chains, chain_length, split=1,
                 adder_stages, rounds=None):
    """The MVM unit's result stream for one run: a list of ``(lanes_tuple, last)`` in
    output order (module docstring), padding rows included (their sums of zero
    products)."""
    chains, chain_length, split = _geometry(chains, chain_length, split)
    matrix = np.asarray(matrix_bits, dtype=np.uint64)
    vectors = np.atleast_2d(np.asarray(vectors_bits, dtype=np.uint64))
    n_out, n_in = matrix.shape
    if rounds is None:
        rounds = rounds_for(n_out, chains=chains, chain_length=chain_length, split=split)
    lanes = chains // split
    per_round = lanes * chain_length
    padded = _padded(matrix, rounds * per_round, n_in)
    sums = mvm(fmt, padded, vectors, adder_stages=adder_stages, split=split)
    beats = []
    for r in range(rounds):
        for b in range(vectors.shape[0]):
            for k in range(chain_length):
                first = r * per_round + k * lanes
                beats.append((tuple(int(v) for v in sums[b, first:first + lanes]),
                              k == chain_length - 1))
    return beats


def load_cycles(n_in, *, rounds, chain_length, split=1):
    """Cycles of a weight load without gaps: one ``RESTART`` cycle, then one beat per
    cycle (``chain_length * words_per_pe`` beats)."""
    return 1 + _int("chain_length", chain_length) * words_per_pe(n_in, rounds=rounds,
                                                                  split=split)


def cycles(n_in, *, rounds, batch=1, chains, chain_length, split=1, adder_stages,
           multiplier_stages):
    """Cycles of one MVM run with neither gaps on the vector input nor backpressure on
    the results: from the first vector element's handshake to the last result beat's,
    both counted.

    A run is ``rounds * batch`` streams (round by round, the batch's vectors back to back
    in each), each of ``c = chunk_length(n_in, split)`` issue cycles. With ``split = 1``
    round 0 is fed straight from the input (stream ``j``'s elements at the cycles of their
    handshakes); with ``split > 1`` the whole batch is stored first (``batch * n_in``
    cycles), the first stream being issued in the next cycle. Stream ``j`` is issued from
    cycle ``I[j]`` and its last beat leaves in ``O[j] = I[j] + K`` with

        K = c + M + E + 2L + 3 + (split - 1) A

    (``M`` multiplier stages, ``A`` adder stages, ``E`` their reduction cycles; the terms:
    two cycles from the issue to PE 0 (buffer or input register, head register), one for
    the weight read, ``c - 1`` elements, ``M``, ``E + 1`` to emit, two to PE 0's output
    register, ``2(L - 1)`` for the tail's sum to reach the head, a fold adder per extra
    group). The next stream is issued at

        I[j + 1] = max(I[j] + c + E, I[j] + 2L, O[j - 1] + 1)

    (the accumulators' reduction gap; a stream's sums leave a chain head one per two
    cycles; at most two streams outstanding). Total ``O[last] + 1`` from cycle 0.

    Returns
    -------
    dict
        ``cycles`` (total), ``mac_cycles`` (issue cycles, ``rounds * batch * c``),
        ``first_issue``, ``stream_period`` (``max(c + E, 2L)``), ``stream_latency``
        (``K``), ``issues`` (the ``I[j]``), ``credit_bound`` (whether the two-stream rule
        delayed any stream).
    """
    rounds = _int("rounds", rounds)
    batch = _int("batch", batch)
    chains, chain_length, split = _geometry(chains, chain_length, split)
    c = chunk_length(n_in, split)
    e = reduction_cycles(adder_stages)
    latency = (c + multiplier_stages + e + 2 * chain_length + 3
               + (split - 1) * adder_stages)
    period = max(c + e, 2 * chain_length)
    issue = 0 if split == 1 else batch * n_in
    issues = [issue]
    bound = False
    for j in range(1, rounds * batch):
        earliest = issues[-1] + period
        if j >= 2 and issues[j - 2] + latency + 1 > earliest:
            earliest, bound = issues[j - 2] + latency + 1, True
        issues.append(earliest)
    return {
        "cycles": issues[-1] + latency + 1,
        "mac_cycles": rounds * batch * c,
        "first_issue": issues[0],
        "stream_period": period,
        "stream_latency": latency,
        "issues": issues,
        "credit_bound": bound,
    }


def paper_cases():
    """The paper's Sec. 5.1.3 examples from :func:`cycles` (1,024 x 1,024, 16 chains,
    default stages A = 4, M = 3): 256 PEs per unit (L = 16), and 768 (L = 48) with split
    1 and 2. Returns ``{name: cycles(...) plus rounds, words_per_pe, paper_mac_cycles}``."""
    cases = {"256 PEs": (16, 1, 4096), "768 PEs": (48, 1, 2048),
             "768 PEs, split 2": (48, 2, 1536)}
    out = {}
    for name, (length, split, paper) in cases.items():
        rounds = rounds_for(1024, chains=16, chain_length=length, split=split)
        result = cycles(1024, rounds=rounds, chains=16, chain_length=length, split=split,
                        adder_stages=4, multiplier_stages=3)
        result.pop("issues")
        out[name] = dict(result, rounds=rounds, chain_length=length, split=split,
                         words_per_pe=words_per_pe(1024, rounds=rounds, split=split),
                         paper_mac_cycles=paper, pes=16 * length)
    return out


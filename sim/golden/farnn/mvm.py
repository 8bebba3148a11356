"""Bit-exact model of one FARNN MVM unit (:class:`nnrtl.hw.farnn.mvm.MVMUnit`): the
products and streaming sums of the FARNN arithmetic contract (:mod:`nnrtl.hw.farnn`),
the plan of rounds and splitting, the weight stream's packing, the order of the result
beats, and the cycle count of a run without gaps or backpressure. The arithmetic itself is
:func:`nnrtl.sim.golden.farnn.rmvm.rmvm`'s (fp32, pinned to the float and accumulator goldens).

Arithmetic (the contract). Row ``j`` of ``R`` times a vector ``x`` of ``n_in`` elements:
the products ``p[e] = float_mul(R[j, e], x[e])`` summed as one stream,
``streaming_sum(p, adder_stages)``. A *split* row (factor ``s``) cuts the elements into
``s`` contiguous chunks, chunk ``g = [g*c, min((g+1)*c, n_in))`` with
``c = ceil(n_in / s)``, sums each as its own stream (``q[g]``) and folds the partials in
group order ``((q[0] + q[1]) + q[2]) + ...`` with ``float_add``. Every chunk must hold at
least one element: ``(s - 1) * c < n_in``.

Which rows are split (:func:`plan`, the paper's Sec. 5.1.3). An MVM unit has
``P = chains * chain_length`` PEs; ``n_out`` rows take ``rounds = ceil(n_out / P)``
rounds. When the hardware's factor ``s > 1``, ``rounds >= 2``, the last round's rows fit
``P / s`` and the chunks are non-empty, the last round is split (``split_last``): its rows,
``(rounds - 1) * P`` onwards, are split rows; every other row is summed whole. Round 0 is
never split, so the vector can be fed as it arrives.

Geometry (decided here; the RTL and the host packer follow it). Chain ``c``'s PE ``k``
computes in a full round ``r`` row ``r * P + k * chains + c``, its weight ``t`` at address
``r * n_in + t``. In a split last round the chains form ``s`` groups of
``lanes = chains // s`` consecutive chains; chain ``g * lanes + j``'s PE ``k`` holds chunk
``g`` of row ``r * P + k * lanes + j``, weight ``t`` of the chunk at ``r * n_in + t``.
Rows past ``n_out`` and columns past ``n_in`` are zeros (the unit computes them; their
results are dropped).

Weight stream (:func:`pack_weights`): beat ``b`` carries one word per chain (lane ``c``
of the ``chains * 32``-bit port feeds chain ``c``); chain ``c``'s words are PE 0's block,
then PE 1's, ..., each block :func:`words_per_pe` words in address order.

Result beats (:func:`result_beats`): for each round, for each vector of the batch,
``chain_length`` beats (PE 0 first, the last marked ``last``) of ``chains`` lanes: lane
``c`` of beat ``k`` is row ``r * P + k * chains + c`` in a full round; in a split round
lanes ``j < lanes`` hold row ``r * P + k * lanes + j`` and the other lanes zero.

Cycle count (:func:`cycles`): see its docstring.
"""

import numpy as np

from nnrtl.hw.farnn.config import chunk_bounds
from nnrtl.hw.farnn.pe import reduction_cycles

from nnrtl.hw.arith.float_format import FP32

from ..float import special_values, to_bits
from .rmvm import rmvm


__all__ = ["chunk_length", "chunks", "plan", "words_per_pe", "row_index",
           "mvm", "mvm_unit", "pack_weights", "unpack_weights", "result_beats", "cycles",
           "load_cycles", "paper_cases", "random_operands"]


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
    chunk_length(n_in, split)
    return chunk_bounds(n_in, split)


def plan(n_out, n_in, *, chains, chain_length, split=1):
    """Rounds and splitting of an ``n_out`` by ``n_in`` matrix (module docstring).

    Returns
    -------
    dict
        ``rounds``; ``split_last`` (bool); ``split_from``, the first split row
        (``n_out`` when none is); ``words_per_pe``; ``pes``.
    """
    chains, chain_length, split = _geometry(chains, chain_length, split)
    n_out = _int("n_out", n_out)
    n_in = _int("n_in", n_in)
    pes = chains * chain_length
    rounds = -(-n_out // pes)
    remainder = n_out - (rounds - 1) * pes
    c = -(-n_in // split)
    split_last = (split > 1 and rounds >= 2 and remainder <= pes // split
                  and (split - 1) * c < n_in)
    return {
        "rounds": rounds,
        "split_last": split_last,
        "split_from": (rounds - 1) * pes if split_last else n_out,
        "words_per_pe": words_per_pe(n_in, rounds=rounds, split=split,
                                     split_last=split_last),
        "pes": pes,
    }


def words_per_pe(n_in, *, rounds, split=1, split_last=False):
    """Weight words each PE stores: ``rounds * n_in``, or ``(rounds - 1) * n_in + c``
    with a split last round."""
    rounds = _int("rounds", rounds)
    if split_last:
        return (rounds - 1) * _int("n_in", n_in) + chunk_length(n_in, split)
    return rounds * _int("n_in", n_in)


def _check_split_last(split, rounds, split_last):
    if split_last and (split == 1 or rounds < 2):
        raise ValueError(f"split_last needs split > 1 and rounds >= 2, not split {split} "
                         f"and rounds {rounds}")


def row_index(round_, pe, lane, *, chains, chain_length, split=1, split_round=False):
    """The matrix row computed in ``round_`` by PE ``pe`` of lane ``lane`` (a chain of a
    full round; ``0 <= lane < chains // split`` of a split round)."""
    chains, chain_length, split = _geometry(chains, chain_length, split)
    width = chains // split if split_round else chains
    return round_ * chains * chain_length + pe * width + lane


def mvm(matrix_bits, vectors_bits, *, adder_stages, split=1, split_from=0):
    """``R x`` for each vector: rows before ``split_from`` summed whole, the others split
    by ``split`` (module docstring), fp32. The arithmetic is :func:`.rmvm.rmvm`'s (the
    multiplier's stages change no bit). For an MVM unit's rows use :func:`mvm_unit`.

    Parameters
    ----------
    matrix_bits : array_like of int, shape (n_out, n_in)
        fp32 patterns.
    vectors_bits : array_like of int, shape (n_in,) or (batch, n_in)
    adder_stages : int
    split : int
    split_from : int
        First split row (``0``: all rows split; ``n_out`` or ``split = 1``: none).

    Returns
    -------
    ndarray of uint32, shape (n_out,) or (batch, n_out)
    """
    matrix = np.asarray(matrix_bits, dtype=np.uint32)
    vectors = np.asarray(vectors_bits, dtype=np.uint32)
    if matrix.ndim != 2 or vectors.ndim not in (1, 2) or matrix.shape[1] != vectors.shape[-1]:
        raise ValueError(f"matrix {matrix.shape} and vectors {vectors.shape} do not fit: "
                         f"the vectors need matrix.shape[1] elements")
    n_out, n_in = matrix.shape
    split_from = min(_int("split_from", split_from, 0), n_out) if split > 1 else n_out
    options = dict(adder_stages=adder_stages, multiplier_stages=0)
    whole = rmvm(matrix[:split_from], vectors, split=1, **options)
    if split_from == n_out:
        return whole
    chunks(n_in, split)   # the chunk rule's error, before rmvm's
    return np.concatenate([whole, rmvm(matrix[split_from:], vectors, split=split, **options)],
                          axis=-1)


def mvm_unit(matrix_bits, vectors_bits, *, chains, chain_length, split=1, adder_stages):
    """``R x`` as an MVM unit of this geometry computes it (:func:`plan` decides the
    split rows)."""
    matrix = np.asarray(matrix_bits, dtype=np.uint64)
    layout = plan(*matrix.shape, chains=chains, chain_length=chain_length, split=split)
    return mvm(matrix, vectors_bits, adder_stages=adder_stages, split=split,
               split_from=layout["split_from"])


def _padded(matrix, rows, columns):
    matrix = np.asarray(matrix, dtype=np.uint64)
    if matrix.ndim != 2 or matrix.shape[0] > rows or matrix.shape[1] > columns:
        raise ValueError(f"a matrix of shape {matrix.shape} does not fit {rows} rows of "
                         f"{columns} columns")
    padded = np.zeros((rows, columns), dtype=np.uint64)
    padded[:matrix.shape[0], :matrix.shape[1]] = matrix
    return padded


def _rounds_and_split(matrix, chains, chain_length, split, rounds, split_last):
    if rounds is None:
        layout = plan(*matrix.shape, chains=chains, chain_length=chain_length, split=split)
        rounds, split_last = layout["rounds"], layout["split_last"]
    _check_split_last(split, rounds, split_last)
    return rounds, bool(split_last)


def pack_weights(matrix_bits, *, chains, chain_length, split=1, rounds=None,
                 split_last=None):
    """The weight stream of one MVM unit: ``(beats, chains)`` words (module docstring).

    ``rounds`` and ``split_last`` default to :func:`plan`'s; more rounds pad with zero
    rows. Raises ``ValueError`` if the matrix has more rows than the rounds hold.
    """
    chains, chain_length, split = _geometry(chains, chain_length, split)
    matrix = np.asarray(matrix_bits, dtype=np.uint64)
    n_out, n_in = matrix.shape
    rounds, split_last = _rounds_and_split(matrix, chains, chain_length, split, rounds,
                                           split_last)
    pes = chains * chain_length
    full = rounds - 1 if split_last else rounds
    lanes = chains // split
    capacity = full * pes + (lanes * chain_length if split_last else 0)
    padded = _padded(matrix, max(capacity, rounds * pes), n_in)
    if np.any(padded[capacity:]):
        raise ValueError(f"a matrix of {n_out} rows does not fit {rounds} rounds "
                         f"(split_last {split_last}) of {chains} chains of {chain_length}")
    blocks = []
    # full rounds: [r, k, c, t] -> chain c, PE k, address r * n_in + t
    fulls = padded[:full * pes].reshape(full, chain_length, chains, n_in)
    blocks.append(fulls.transpose(1, 0, 3, 2).reshape(chain_length, full * n_in, chains))
    if split_last:
        c = chunk_length(n_in, split)
        rows = padded[full * pes:full * pes + lanes * chain_length]
        wide = np.zeros((lanes * chain_length, split * c), dtype=np.uint64)
        wide[:, :n_in] = rows
        # [k, j, g, t] -> chain g * lanes + j, PE k, address full * n_in + t
        last = wide.reshape(chain_length, lanes, split, c).transpose(0, 3, 2, 1)
        blocks.append(last.reshape(chain_length, c, chains))
    return np.concatenate(blocks, axis=1).reshape(-1, chains)


def unpack_weights(words, *, n_out, n_in, chains, chain_length, split=1):
    """The matrix (``n_out`` by ``n_in``) a weight stream carries, with :func:`plan`'s
    rounds: the inverse of :func:`pack_weights`. Raises ``ValueError`` if the stream's
    length is not that of ``n_out`` by ``n_in`` on this geometry or padding words are not
    zero."""
    chains, chain_length, split = _geometry(chains, chain_length, split)
    words = np.asarray(words, dtype=np.uint64)
    layout = plan(n_out, n_in, chains=chains, chain_length=chain_length, split=split)
    expected = (chain_length * layout["words_per_pe"], chains)
    if words.shape != expected:
        raise ValueError(f"a weight stream of {words.shape} beats x lanes does not carry "
                         f"{n_out} x {n_in} on {chains} chains of {chain_length} with split "
                         f"{split}: expected {expected}")
    rounds, split_last = layout["rounds"], layout["split_last"]
    pes = chains * chain_length
    full = rounds - 1 if split_last else rounds
    per_pe = words.reshape(chain_length, layout["words_per_pe"], chains)
    rows = [per_pe[:, :full * n_in].reshape(chain_length, full, n_in, chains)
            .transpose(1, 0, 3, 2).reshape(full * pes, n_in)]
    if split_last:
        lanes = chains // split
        c = chunk_length(n_in, split)
        last = per_pe[:, full * n_in:].reshape(chain_length, c, split, lanes)
        wide = last.transpose(0, 3, 2, 1).reshape(chain_length * lanes, split * c)
        if np.any(wide[:, n_in:]):
            raise ValueError("the weight stream has nonzero words in its padding")
        rows.append(wide[:, :n_in])
    matrix = np.concatenate(rows)
    if np.any(matrix[n_out:]):
        raise ValueError("the weight stream has nonzero words in its padding")
    return matrix[:n_out]


def result_beats(matrix_bits, vectors_bits, *, chains, chain_length, split=1,
                 adder_stages, rounds=None, split_last=None):
    """The MVM unit's result stream for one run: a list of ``(lanes_tuple, last)`` in
    output order (module docstring), padding rows included (their sums of zero
    products). ``rounds`` and ``split_last`` default to :func:`plan`'s."""
    chains, chain_length, split = _geometry(chains, chain_length, split)
    matrix = np.asarray(matrix_bits, dtype=np.uint64)
    vectors = np.atleast_2d(np.asarray(vectors_bits, dtype=np.uint64))
    rounds, split_last = _rounds_and_split(matrix, chains, chain_length, split, rounds,
                                           split_last)
    pes = chains * chain_length
    padded = _padded(matrix, rounds * pes, matrix.shape[1])
    split_from = (rounds - 1) * pes if split_last else rounds * pes
    sums = mvm(padded, vectors, adder_stages=adder_stages, split=split,
               split_from=split_from)
    beats = []
    for r in range(rounds):
        split_round = split_last and r == rounds - 1
        width = chains // split if split_round else chains
        for b in range(vectors.shape[0]):
            for k in range(chain_length):
                first = r * pes + k * width
                lanes = [int(v) for v in sums[b, first:first + width]]
                beats.append((tuple(lanes + [0] * (chains - width)), k == chain_length - 1))
    return beats


def load_cycles(n_in, *, rounds, chain_length, split=1, split_last=False):
    """Cycles of a weight load without gaps: one ``RESTART`` cycle, then one beat per
    cycle (``chain_length * words_per_pe`` beats)."""
    return 1 + _int("chain_length", chain_length) * words_per_pe(
        n_in, rounds=rounds, split=split, split_last=split_last)


def cycles(n_in, *, rounds, batch=1, chains, chain_length, split=1, split_last=False,
           adder_stages, multiplier_stages):
    """Cycles of one MVM run with neither gaps on the vector input nor backpressure on
    the results: from the first vector element's handshake to the last result beat's,
    both counted.

    A run is ``rounds * batch`` streams (round by round, the batch's vectors back to back
    in each); a stream of a full round has ``c = n_in`` issue cycles, one of a split last
    round ``c = ceil(n_in / split)``. Round 0 is fed straight from the input, so stream 0
    is issued from cycle ``I[0] = 0``, the first handshake. Stream ``j`` is issued from
    ``I[j]``, its elements in consecutive cycles, and its last beat leaves in
    ``O[j] = I[j] + K[j]`` with

        K[j] = c[j] + M + E + 2L + 3 + (split - 1) A

    (``M`` multiplier stages, ``A`` adder stages, ``E`` their reduction cycles; the terms:
    two cycles from the issue to PE 0 (input or buffer register, head register), the
    weight read, ``c - 1`` more elements, ``M``, ``E + 1`` to emit, two to PE 0's output
    register, ``2(L - 1)`` for the tail's sum to reach the head, one fold adder per extra
    group of a unit with ``split > 1``, every beat). The next stream is issued at

        I[j + 1] = max(I[j] + c[j] + E, I[j] + 2L, O[j - 1] + 1)

    (the accumulators' reduction gap; a chain head hands out one sum per two cycles; at
    most two streams outstanding). Total: ``O[last] + 1``.

    Returns
    -------
    dict
        ``cycles`` (total), ``mac_cycles`` (issue cycles), ``issues`` (the ``I[j]``),
        ``latencies`` (the ``K[j]``), ``credit_bound`` (whether the two-stream rule
        delayed any stream).
    """
    rounds = _int("rounds", rounds)
    batch = _int("batch", batch)
    chains, chain_length, split = _geometry(chains, chain_length, split)
    _check_split_last(split, rounds, split_last)
    e = reduction_cycles(adder_stages)
    lengths = [chunk_length(n_in, split) if split_last and r == rounds - 1 else n_in
               for r in range(rounds) for _b in range(batch)]
    latencies = [c + multiplier_stages + e + 2 * chain_length + 3
                 + (split - 1) * adder_stages for c in lengths]
    issues = [0]
    bound = False
    for j in range(1, len(lengths)):
        earliest = issues[-1] + max(lengths[j - 1] + e, 2 * chain_length)
        if j >= 2 and issues[j - 2] + latencies[j - 2] + 1 > earliest:
            earliest, bound = issues[j - 2] + latencies[j - 2] + 1, True
        issues.append(earliest)
    return {
        "cycles": issues[-1] + latencies[-1] + 1,
        "mac_cycles": sum(lengths),
        "issues": issues,
        "latencies": latencies,
        "credit_bound": bound,
    }


def paper_cases():
    """The paper's Sec. 5.1.3 examples from :func:`plan` and :func:`cycles` (1,024 x
    1,024, 16 chains, default stages A = 4, M = 3): 256 PEs per unit (L = 16), 768
    (L = 48) unsplit and with split 2. Returns ``{name: {...}}`` with the rounds, the
    weights per PE, the MAC cycles and the total cycles of one vector."""
    cases = {"256 PEs": (16, 1, 4096), "768 PEs": (48, 1, 2048),
             "768 PEs, split 2": (48, 2, 1536)}
    out = {}
    for name, (length, split, paper) in cases.items():
        layout = plan(1024, 1024, chains=16, chain_length=length, split=split)
        result = cycles(1024, rounds=layout["rounds"], chains=16, chain_length=length,
                        split=split, split_last=layout["split_last"], adder_stages=4,
                        multiplier_stages=3)
        out[name] = {
            "pes": 16 * length, "chain_length": length, "split": split,
            "rounds": layout["rounds"], "split_last": layout["split_last"],
            "words_per_pe": layout["words_per_pe"], "mac_cycles": result["mac_cycles"],
            "paper_mac_cycles": paper, "cycles": result["cycles"],
            "credit_bound": result["credit_bound"],
        }
    return out


def random_operands(rng, shape, *, specials=0.0):
    """Test operands, fp32 patterns (``uint32``): normal values of mixed scales (times
    ``2**-6 .. 2**6``), a share ``specials`` replaced by special values (zeros,
    infinities, NaNs, subnormals: :func:`~nnrtl.sim.golden.float.special_values`).

    Parameters
    ----------
    rng : numpy.random.Generator
    shape : tuple of int
    specials : float
        From 0 to 1.
    """
    values = to_bits(FP32, rng.normal(size=shape) * 2.0 ** rng.integers(-6, 7, size=shape))
    values = np.asarray(values, dtype=np.uint32)
    if specials:
        table = np.array(sorted(special_values(FP32).values()), dtype=np.uint32)
        mask = rng.random(shape) < specials
        values[mask] = rng.choice(table, size=int(mask.sum()))
    return values

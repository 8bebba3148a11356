"""Bit-exact model of :class:`nnrtl.hw.arith.accumulator.StreamingAccumulator`.

The sum of one stream of ``n`` values with an adder of latency ``L`` (``adder_stages``),
every addition being :func:`nnrtl.sim.golden.float.float_add`:

1. ``L`` slots start at ``-0``; value ``x[i]`` is added into slot ``i mod L``
   (``slot = float_add(slot, x[i])``, the slot's partial sum as the first operand).
2. The slots are taken in the order they leave the adder after the last value,
   ``Q[j] = slot[(n + j) mod L]``, and visited cyclically (``Q[0], Q[1], ..., Q[L-1],
   Q[0], ...``), one per step. A visited slot that still holds a partial sum is held
   when nothing is held; otherwise it becomes ``float_add(held, Q)`` (the held value
   first) and nothing is held. When the visited slot holds the only partial sum left and
   nothing is held, that is the sum.

The RTL walks the same rule through a schedule computed once per ``L``
(:func:`nnrtl.hw.arith.accumulator.reduction_schedule`); this model applies it directly.
:func:`streaming_sums` evaluates many streams at once, vectorised over streams and slots:
shorter streams are padded with ``-0``, which leaves every slot unchanged
(``float_add(p, -0) == p`` for every value a slot can hold: ``-0``, a canonical NaN, or a
result of the adder, which is never subnormal when subnormals are flushed).
"""

import numpy as np

from nnrtl.hw.arith.float_format import FloatFormat

from .float import float_add, pattern_dtype


__all__ = ["streaming_sum", "streaming_sums", "reduction_order"]


def _check(fmt, adder_stages, flush_subnormals):
    if not isinstance(fmt, FloatFormat):
        raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
    if (not isinstance(adder_stages, int) or isinstance(adder_stages, bool)
            or adder_stages < 1):
        raise TypeError(f"adder_stages must be a positive integer, not {adder_stages!r}")
    if not isinstance(flush_subnormals, bool):
        raise TypeError(f"flush_subnormals must be a bool, not {flush_subnormals!r}")


def _reduce(fmt, queue, add):
    """Reduce the partial sums ``queue`` (a list, in leaving order) by the rule of the
    module docstring, with ``add(held, partial)``; return the sum."""
    slots = list(queue)
    live = [True] * len(slots)
    held = None
    visit = 0
    while True:
        k = visit % len(slots)
        visit += 1
        if not live[k]:
            continue
        if held is None and sum(live) == 1:
            return slots[k]
        if held is None:
            held, live[k] = slots[k], False
        else:
            slots[k], held = add(held, slots[k]), None


def reduction_order(adder_stages):
    """The final reduction as a string, e.g. ``"(Q4 + Q5) + ((Q0 + Q1) + (Q2 + Q3))"``
    for 6 stages (``Q[j]`` as in the module docstring)."""
    def parenthesised(term):
        return f"({term})" if " " in term else term

    names = [f"Q{j}" for j in range(adder_stages)]
    return _reduce(None, names, lambda a, b: f"{parenthesised(a)} + {parenthesised(b)}")


def streaming_sums(fmt, streams, *, adder_stages, flush_subnormals=False):
    """Sums of several streams, as the accumulator computes them.

    Parameters
    ----------
    fmt : FloatFormat
    streams : sequence of sequences of int
        Bit patterns; every stream holds at least one value.
    adder_stages : int
        The adder's latency ``L``.
    flush_subnormals : bool

    Returns
    -------
    ndarray of pattern_dtype(fmt)
        One sum per stream.

    Raises
    ------
    ValueError
        If a stream is empty.
    """
    _check(fmt, adder_stages, flush_subnormals)
    slots = adder_stages
    streams = [np.asarray(s, dtype=np.uint64).ravel() for s in streams]
    count = len(streams)
    if count == 0:
        return np.zeros(0, dtype=pattern_dtype(fmt))
    lengths = np.array([s.size for s in streams], dtype=np.int64)
    if lengths.min() == 0:
        raise ValueError(f"stream {int(np.argmin(lengths))} is empty; every stream holds "
                         f"at least one value")
    rows = -(-int(lengths.max()) // slots)
    padded = np.full((count, rows * slots), fmt.sign_mask, dtype=np.uint64)
    for k, values in enumerate(streams):
        padded[k, :values.size] = values & np.uint64((1 << fmt.width) - 1)
    partials = np.full((count, slots), fmt.sign_mask, dtype=pattern_dtype(fmt))
    for row in range(rows):
        partials = float_add(fmt, partials, padded[:, row * slots:(row + 1) * slots],
                             flush_subnormals=flush_subnormals)
    order = (lengths[:, None] + np.arange(slots)[None, :]) % slots
    leaving = partials[np.arange(count)[:, None], order]
    queue = [leaving[:, j] for j in range(slots)]
    return _reduce(fmt, queue, lambda a, b: float_add(fmt, a, b,
                                                      flush_subnormals=flush_subnormals))


def streaming_sum(fmt, values_bits, *, adder_stages, flush_subnormals=False):
    """The sum of one stream (bit patterns ``values_bits``, at least one) as the
    accumulator with ``adder_stages`` computes it; returns one bit pattern (an int)."""
    return int(streaming_sums(fmt, [values_bits], adder_stages=adder_stages,
                              flush_subnormals=flush_subnormals)[0])

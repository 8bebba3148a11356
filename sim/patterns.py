"""Backpressure patterns for the stream benches, and the cycle budget they imply.

Importable without cocotb (``nnrtl.sim.patterns``): the command line offers
:data:`PATTERNS` as ``--backpressure`` choices, the cocotb benches turn a name into pause
bits with :func:`pause_pattern` and bound every wait with :func:`cycle_budget`.

A pause bit of 1 in cycle ``n`` holds a source's ``tvalid`` low (a gap in the input) or a
sink's ``tready`` low (backpressure on the output) in that cycle.

The patterns
------------
``none``
    Never pause.
``cycle``
    Pause one cycle in four: ``0, 0, 0, 1`` repeated.
``random``
    Pause each cycle with probability 1/2, independently.
``bursty``
    Long stalls: runs of ready cycles alternate with runs of paused cycles, starting
    with a ready run. Ready runs are uniform in ``BURSTY_READY`` = [16, 64] cycles,
    paused runs uniform in ``BURSTY_PAUSE`` = [32, 256] cycles, so a stream is ready
    40 / (40 + 144), about 22%, of the time, and a stall lasts tens to a few hundred
    cycles. On a sink this fills an engine's output FIFO, so the logic that reserves
    room in it before a hand-over is exercised; on a source it starves the engine.

The cycle budget
----------------
A bench waits for an output frame, a status bit or a source to drain until a deadline
set when the work began (a run of the engine, or the whole traffic of a bench)::

    budget = ceil(SLACK[p] * model_cycles) + STALL[p] * output_beats + BUDGET_CONSTANT

``model_cycles`` is what the engine's performance model predicts for the work without
pauses (how ``SLACK``, ``STALL`` and ``BUDGET_CONSTANT`` are sized: Notes of
:func:`cycle_budget`).
"""

import itertools
import math

__all__ = ["PATTERNS", "BURSTY_READY", "BURSTY_PAUSE", "SLACK", "STALL", "BUDGET_CONSTANT",
           "pause_pattern", "cycle_budget"]

#: The backpressure patterns, in order of severity.
PATTERNS = ("none", "cycle", "random", "bursty")

#: Inclusive range of the length of a ready run of ``bursty``, in cycles.
BURSTY_READY = (16, 64)
#: Inclusive range of the length of a paused run of ``bursty``, in cycles.
BURSTY_PAUSE = (32, 256)

#: Factor on the model's cycles per pattern (sized in the Notes of :func:`cycle_budget`).
SLACK = {"none": 2, "cycle": 3, "random": 6, "bursty": 12}
#: Cycles allowed per output beat per pattern: one stall of the sink.
STALL = {"none": 0, "cycle": 1, "random": 16, "bursty": BURSTY_PAUSE[1]}
#: Cycles every budget adds: register traffic, pipeline fill, one stall.
BUDGET_CONSTANT = 2000


def _check_kind(kind):
    if kind not in PATTERNS:
        raise ValueError(f"pause pattern must be one of {', '.join(PATTERNS)}, not {kind!r}")


def pause_pattern(kind, rng):
    """An endless generator of pause bits for cocotbext-axi ``set_pause_generator``.

    Parameters
    ----------
    kind : str
        One of :data:`PATTERNS` (defined in the module docstring).
    rng : random.Random
        Source of randomness for ``random`` and ``bursty`` (unused otherwise).

    Raises
    ------
    ValueError
        If ``kind`` is not one of :data:`PATTERNS`.
    """
    _check_kind(kind)
    return _patterns[kind](rng)


def _none(rng):
    return itertools.repeat(0)


def _cycle(rng):
    return itertools.cycle((0, 0, 0, 1))


def _random(rng):
    while True:
        yield rng.getrandbits(1)


def _bursty(rng):
    while True:
        yield from itertools.repeat(0, rng.randint(*BURSTY_READY))
        yield from itertools.repeat(1, rng.randint(*BURSTY_PAUSE))


_patterns = {"none": _none, "cycle": _cycle, "random": _random, "bursty": _bursty}


def cycle_budget(model_cycles, *, output_beats=0, patterns=("none",)):
    """Cycles a bench waits for work the model predicts to take ``model_cycles``.

    Parameters
    ----------
    model_cycles : int
        The performance model's cycles for the work, without pauses.
    output_beats : int
        Beats the sinks receive during the work.
    patterns : sequence of str
        The patterns of the streams involved; the one with the largest :data:`SLACK`
        counts.

    Returns
    -------
    int
        ``ceil(SLACK[p] * model_cycles) + STALL[p] * output_beats + BUDGET_CONSTANT``.


    Notes
    -----
    ``p`` is the slower of the source and sink patterns (the one with the larger
    ``SLACK``). ``SLACK[p]`` bounds the slow-down of a stream that is ready a fraction of
    the time (4/3 for ``cycle``, 2 on average for ``random``, about 4.6 for ``bursty``)
    with a margin of 2.25x to 3x for the randomness of the runs and for streams that
    compound (the sink's stalls hold up the compute that the sources feed); ``none`` gets
    2, a margin over a model that should be exact.
    ``STALL[p]`` allows, per output beat, one pause run of the sink (an engine that keeps
    one result in flight, such as the demo, waits out a whole stall per result): the
    longest run of ``bursty``, and a run of ``random`` no longer than 16 cycles (one in
    65536). ``BUDGET_CONSTANT`` covers the register writes and reads around a run, the
    pipeline's fill and one stall of any pattern. In the tests every piece of work takes less
    than half of its budget, whatever the pattern (``tests/demo/sim/test_demo_verilator.py``,
    ``tests/sbe/sim/test_sbe_verilator.py``; the demo under ``bursty`` takes about 0.3 of it).
    """
    for kind in patterns:
        _check_kind(kind)
    worst = max(patterns, key=SLACK.__getitem__)
    return math.ceil(SLACK[worst] * model_cycles) + STALL[worst] * output_beats + \
        BUDGET_CONSTANT

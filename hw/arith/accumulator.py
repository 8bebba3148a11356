"""Streaming adder-based floating-point accumulator (η-LSTM, Sec. V-B, Fig. 11).

An accumulator that sums a stream of floats, one input per cycle, with nothing but one
multi-cycle pipelined adder (:class:`~nnrtl.hw.arith.float_add.FloatAdd`): no dedicated
accumulator. The adder's ``L = adder_stages`` pipeline registers hold ``L`` interleaved
partial sums; the partial sum of a slot leaves the adder just when the next input of that
slot arrives and goes straight back in with it. After the stream's ``last`` input the ``L``
partial sums are reduced, still through the same adder, in an order fixed by ``L`` alone.
"""

import enum

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .float_add import FloatAdd, check_shifts
from .float_format import FloatFormat


__all__ = ["ReductionStep", "reduction_schedule", "StreamingAccumulator"]


class ReductionStep(enum.Enum):
    """What the accumulator does with the partial sum leaving the adder in one cycle of
    the final reduction (every step puts one operation into the adder)."""

    #: The slot is spent (``-0``): put ``-0 + -0`` back.
    IDLE = "idle"
    #: Keep the partial sum in the hold register; the slot becomes ``-0``.
    HOLD = "hold"
    #: Add the held value and the partial sum (``held + partial``) into the slot.
    COMBINE = "combine"
    #: The partial sum is the stream's sum: hand it out on ``o``; the slot becomes ``-0``
    #: (or receives the next stream's first input).
    EMIT = "emit"


def reduction_schedule(slots):
    """The fixed schedule that reduces ``slots`` partial sums circulating in the adder.

    Step ``t`` (from 0, the cycle after the stream's last input was taken) sees slot
    ``t mod slots`` (in the order the partial sums leave the adder after the last input)
    at the adder's output. A slot still holding a partial sum is either held (when the
    hold register is empty) or added to the held value (``held + partial``, the result
    going back into the same slot and reappearing ``slots`` steps later); when it is the
    only partial sum left and nothing is held, it is the sum. Spent slots idle.

    Parameters
    ----------
    slots : int
        Number of partial sums, the adder's latency (at least 1).

    Returns
    -------
    tuple of ReductionStep
        One per cycle; the last is :attr:`ReductionStep.EMIT`, and its index is the
        number of cycles the input stalls per stream (``reduction_cycles``).
    """
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        raise TypeError(f"slots must be a positive integer, not {slots!r}")
    live = [True] * slots
    held = False
    steps = []
    while True:
        slot = len(steps) % slots
        if not live[slot]:
            steps.append(ReductionStep.IDLE)
        elif not held and sum(live) == 1:
            steps.append(ReductionStep.EMIT)
            return tuple(steps)
        elif not held:
            steps.append(ReductionStep.HOLD)
            live[slot] = False
            held = True
        else:
            steps.append(ReductionStep.COMBINE)
            held = False


class StreamingAccumulator(wiring.Component):
    """Sum of each stream of floats, one input per cycle, on one pipelined adder.

    See Notes below for the reduction order (fixed by ``adder_stages``,
    independent of input gaps and output backpressure) and how it relates to η-LSTM's
    Fig. 11. A stream is the inputs up to and including one with ``last`` set; it has at
    least one input (an empty stream cannot be expressed). Special values follow from the
    adder: a NaN anywhere, or infinities of both signs, give ``fmt.canonical_nan``; an
    infinity gives that infinity; overflow of a partial sum gives an infinity; a sum of
    zeros is ``-0`` only if every input is ``-0``. Bit-exact model:
    :func:`nnrtl.sim.golden.accumulator.streaming_sum`.

    Parameters
    ----------
    fmt : FloatFormat
    adder_stages : int
        Pipeline registers of the adder, 1 to 8 (default 3; the adder's latency ``L`` and
        the number of interleaved partial sums; η-LSTM's adder has 8). 0, a combinational adder, is not
        accepted: the partial sums live in the adder's registers.
    flush_subnormals : bool
        Passed to the adder: subnormal inputs count as zeros of their sign, subnormal
        results are flushed to zero.
    adder_shifts : str
        The adder's ``shifts``: ``"lut"`` (default) or ``"dsp"``
        (:class:`~nnrtl.hw.arith.float_add.FloatAdd`; the same bits either way).

    Attributes
    ----------
    i : In(stream.Signature(data.StructLayout({"value": fmt.width, "last": 1})))
        The values as bit patterns; ``last`` closes a stream.
    o : Out(stream.Signature(fmt.width))
        One sum per stream, in stream order.
    slots : int
        ``adder_stages``: the number of interleaved partial sums.
    schedule : tuple of ReductionStep
        :func:`reduction_schedule` of ``slots``.
    reduction_cycles : int
        ``E``: cycles the input stalls per stream while the partial sums are reduced
        (``len(schedule) - 1``; 0, 3, 7, 11, 16, 21, 26, 31 for 1 to 8 stages).
    fill_cycles : int
        Cycles after reset during which ``i.ready`` is low while the adder fills with
        ``-0`` (``adder_stages + 1``).

    Throughput: one input per cycle while a stream is summed; a stream of ``n`` inputs
    occupies the unit ``n + reduction_cycles`` cycles (see :meth:`latency`). The sum waits
    on ``o`` (the adder and the input stall) until taken.

    Raises
    ------
    TypeError
        If ``fmt`` is not a :class:`FloatFormat`, ``adder_stages`` is not an integer from 1
        to 8, or ``flush_subnormals`` is not a bool.
    ValueError
        If ``adder_shifts`` is not one the adder takes for ``fmt``.

    Notes
    -----
    How it relates to the paper's Fig. 11 (there with a 2-cycle adder, inputs A to H): the
    paper pairs the first inputs with each other (A+B, C+D), then folds each partial output
    back into the adder together with the next input as soon as it is ready (A+B+E, C+D+F,
    ...), and at the end adds the partial outputs as they come (A+B+E+G + C+D+F+H). Which
    input meets which partial sum there depends on when the inputs arrive, so the rounding
    depends on input gaps. Here the steady state is the same -- every partial sum returns to
    the adder every ``L`` cycles and absorbs one input -- but the pairing is fixed:

    - input number ``n`` of a stream (from 0) goes to slot ``n mod L``; every slot starts a
      stream at ``-0`` (the identity of IEEE addition, so a slot's first add ``-0 + x`` is
      exact: it gives ``x``, a NaN made canonical, or, with ``flush_subnormals``, a subnormal
      flushed), so slot ``k`` holds ``((-0 + x[k]) + x[k+L]) + x[k+2L] + ...``. The pipeline
      advances only when an input is taken, so gaps do not move a partial sum to another slot.
      In the figure's terms: no warm-up pairing (A+B), each partial starts from its first input.
    - after ``last`` the partial sums leave the adder in the order ``Q[j] = slot[(n + j) mod L]``
      (``n`` the stream length) and are reduced by the fixed schedule of
      :func:`reduction_schedule`: the first partial to come out is held in a register, the
      next one is added to it (``held + Q``) and the sum goes back into the pipeline, and so
      on, each new sum meeting the next partial available, until one value is left. For
      ``L = 2``: ``Q0 + Q1``; ``L = 3``: ``Q2 + (Q0 + Q1)``; ``L = 4``: ``(Q0 + Q1) + (Q2 + Q3)``;
      ``L = 6``: ``(Q4 + Q5) + ((Q0 + Q1) + (Q2 + Q3))``. This is the figure's end phase
      ("all the partial accumulated results will be summed up") with a schedule decided once
      for all streams. The reduction waits on nothing but the output handshake, so output
      backpressure cannot change it either: the sum is a function of the values and ``L``
      only, and :func:`nnrtl.sim.golden.accumulator.streaming_sum` reproduces it bit for bit.

    Timing. After reset the unit spends ``L + 1`` cycles filling the adder with ``-0``
    (``i.ready`` is low). Inputs are taken one per cycle. While a stream's partial sums are
    reduced the input stalls: ``E = reduction_cycles`` cycles (``E`` steps of the schedule;
    the next stream's first input is taken in the cycle the sum leaves, going into the slot
    the sum vacates). With neither gaps nor backpressure the sum of an ``n``-input stream is
    handed over ``latency(n) = n + E`` cycles after its first input, and back-to-back streams
    of ``n`` inputs take ``n + E`` cycles each, so the overhead over one input per cycle is
    ``E / n`` for both (measured under Verilator for 1 to 6 stages, in the Amaranth simulator
    for 8 at ``n`` = 1024; equal to the formula). The last column is the paper's own measure
    (docs/engines/omni/spec.md §3.1: its "< 2.87%" is ``(50 - 20) / (1024 + 20)``, its 50-cycle
    accumulator against the 20-cycle Xilinx accumulator IP, i.e. against ``n + 20``):
    ``(latency(1024) - 1044) / 1044``, negative where this accumulator finishes before the IP.

    ======  ==  ======  ======  ======  ======  ======  ===============
    ``L``   E   n=16    n=64    n=256   n=1024  n=4096  vs n+20, n=1024
    ======  ==  ======  ======  ======  ======  ======  ===============
    1       0   0       0       0       0       0       -1.92%
    2       3   18.8%   4.69%   1.17%   0.29%   0.07%   -1.63%
    3       7   43.8%   10.9%   2.73%   0.68%   0.17%   -1.25%
    4       11  68.8%   17.2%   4.30%   1.07%   0.27%   -0.86%
    5       16  100%    25.0%   6.25%   1.56%   0.39%   -0.38%
    6       21  131%    32.8%   8.20%   2.05%   0.51%   0.10%
    7       26  162%    40.6%   10.2%   2.54%   0.63%   0.57%
    8       31  194%    48.4%   12.1%   3.03%   0.76%   1.05%
    ======  ==  ======  ======  ======  ======  ======  ===============

    With the paper's 8-cycle adder (``L = 8``): ``E = 31``, ``latency(1024) = 1055`` cycles,
    1.05% over the IP's ``1024 + 20`` (the paper: 2.87%, its accumulator's latency being 50),
    3.03% over ``n`` itself (under 2.87% from 1081 inputs on). Reduction order for ``L = 8``:
    ``((Q0 + Q1) + (Q2 + Q3)) + ((Q4 + Q5) + (Q6 + Q7))``, a balanced tree.
    """

    def __init__(self, fmt, *, adder_stages=3, flush_subnormals=False, adder_shifts="lut"):
        if not isinstance(fmt, FloatFormat):
            raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
        highest = len(FloatAdd.CUT_PRIORITY)
        if (not isinstance(adder_stages, int) or isinstance(adder_stages, bool)
                or not 1 <= adder_stages <= highest):
            raise TypeError(f"adder_stages must be an integer from 1 to {highest}, "
                            f"not {adder_stages!r}")
        if not isinstance(flush_subnormals, bool):
            raise TypeError(f"flush_subnormals must be a bool, not {flush_subnormals!r}")
        check_shifts(adder_shifts, fmt)
        self._fmt = fmt
        self._adder_stages = adder_stages
        self._flush_subnormals = flush_subnormals
        self._adder_shifts = adder_shifts
        self._schedule = reduction_schedule(adder_stages)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"value": fmt.width, "last": 1}))),
            "o": Out(stream.Signature(fmt.width)),
        })

    @property
    def fmt(self):
        return self._fmt

    @property
    def adder_stages(self):
        return self._adder_stages

    @property
    def flush_subnormals(self):
        return self._flush_subnormals

    @property
    def slots(self):
        return self._adder_stages

    @property
    def schedule(self):
        return self._schedule

    @property
    def reduction_cycles(self):
        return len(self._schedule) - 1

    @property
    def fill_cycles(self):
        return self._adder_stages + 1

    def latency(self, n):
        """Cycles from the handshake of a stream's first input to that of its sum, for a
        stream of ``n`` inputs without gaps and a sum taken at once: ``n +
        reduction_cycles``. Back-to-back streams of ``n`` inputs also start every
        ``n + reduction_cycles`` cycles."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise TypeError(f"n must be a positive integer, not {n!r}")
        return n + self.reduction_cycles

    def overhead(self, n):
        """``(latency(n) - n) / n``: the latency overhead over one input per cycle."""
        return (self.latency(n) - n) / n

    def elaborate(self, platform):
        m = Module()
        fmt = self._fmt
        m.submodules.adder = adder = FloatAdd(fmt, stages=self._adder_stages,
                                              flush_subnormals=self._flush_subnormals,
                                              shifts=self._adder_shifts)
        negative_zero = Const(fmt.sign_mask, fmt.width)
        partial = adder.o.payload  # the partial sum leaving the adder
        held = Signal(fmt.width)

        last_step = self.reduction_cycles
        step = Signal(range(last_step + 2))
        hold_steps = [t for t, s in enumerate(self._schedule) if s is ReductionStep.HOLD]
        combine_steps = [t for t, s in enumerate(self._schedule)
                         if s is ReductionStep.COMBINE]

        accumulate = Signal()  # the slot at the adder's output absorbs the input taken
        take = Signal()        # an input is taken this cycle
        advance = Signal()     # the adder's pipeline moves this cycle
        hold = Signal()
        combine = Signal()

        with m.FSM(name="control"):
            with m.State("Fill the adder with zeros"):
                # The adder moves by itself while its output is not valid: -0 + -0 enters
                # every cycle until all its stages hold one.
                with m.If(adder.o.valid):
                    m.next = "Accumulate the inputs"
            with m.State("Accumulate the inputs"):
                m.d.comb += [
                    accumulate.eq(1),
                    self.i.ready.eq(1),
                    take.eq(self.i.valid),
                    advance.eq(self.i.valid),
                ]
                with m.If(self.i.valid & self.i.payload.last):
                    m.d.sync += step.eq(0)
                    m.next = "Reduce the partial sums"
            with m.State("Reduce the partial sums"):
                with m.If(step == last_step):
                    # The sum is at the adder's output. The slot it leaves is -0 again, so
                    # the next stream's first input can go into it (-0 + x), as into any slot.
                    m.d.comb += [
                        self.o.valid.eq(1),
                        self.i.ready.eq(self.o.ready),
                        take.eq(self.i.valid & self.o.ready),
                        advance.eq(self.o.ready),
                    ]
                    with m.If(self.o.ready):
                        with m.If(self.i.valid & self.i.payload.last):
                            m.d.sync += step.eq(0)
                        with m.Else():
                            m.next = "Accumulate the inputs"
                with m.Else():
                    m.d.comb += [
                        advance.eq(1),
                        hold.eq(step.matches(*hold_steps) if hold_steps else 0),
                        combine.eq(step.matches(*combine_steps) if combine_steps else 0),
                    ]
                    m.d.sync += step.eq(step + 1)

        with m.If(hold):
            m.d.sync += held.eq(partial)

        m.d.comb += [
            # Every cycle the adder moves, one operation enters it: its stages stay full,
            # so it moves exactly when ``advance`` (its o.ready) is high.
            adder.i.valid.eq(1),
            adder.o.ready.eq(advance),
            adder.i.payload.a.eq(Mux(combine, held, Mux(accumulate, partial, negative_zero))),
            adder.i.payload.b.eq(Mux(combine, partial,
                                     Mux(take, self.i.payload.value, negative_zero))),
            adder.i.payload.subtract.eq(0),
            self.o.payload.eq(partial),
        ]
        return m

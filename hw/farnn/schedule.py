# amaranth: UnusedElaboratable=no
"""The FARNN engine's schedule seen from outside (:class:`~nnrtl.hw.farnn.engine.FarnnEngine`):
the order of the cell streams, the GRU bias beats of a FW load and the cycle model of a
run (the Notes of :class:`~nnrtl.hw.farnn.engine.FarnnEngine` state the schedule)."""

import numpy as np

from .activation import BwActivation, FwActivation
from .mvm import result_delay
from .pe import reduction_cycles

__all__ = ["cell_order", "weight_loads", "bias_beats", "run_cycles",
           "serialized_run_cycles", "ResultPath"]


def cell_order(config, batch=None, matrix="recurrent"):
    """``[(b, row), ...]``: the cells of one step of the job running ``matrix`` (one of
    :meth:`FarnnConfig.matrices`) in the order its results leave the serializer: for each
    round, for each vector ``b``, for each PE position, the beat's rows in lane order; a
    gate matrix's rows are cells of all units at once, the projection's (cut over the units
    in blocks) unit by unit; padding rows skipped. The cell streams follow it: FW ``s_imvm``,
    ``m_h``, ``m_saved`` ``recurrent``, ``m_proj`` ``projection``; BW ``s_bw``,
    ``m_deltas`` ``recurrent`` (``projection_t`` with a projection), ``s_dy`` and
    ``m_proj`` ``recurrent_t``."""
    batch = config.batch if batch is None else batch
    return [(b, row) for _r, b, _k, rows in _job_beats(config, config.matrix(matrix), batch)
            for row in rows]


def weight_loads(config, phase):
    """Beats of each load of pass ``phase``'s weight stream, in stream order (units one after
    another; each unit its gate matrix, then with a projection its projection block):
    ``tlast`` closes each (:func:`nnrtl.gen.farnn.host.pack_weights` packs them)."""
    return [config.chain_length * shape.weights_per_pe
            for _ in range(config.units) for shape in config.pass_matrices(phase)]


def bias_beats(config, bias_n):
    """The ``bR_n`` beats a GRU FW load ends with: ``uint32`` array ``ceil(H / chains) x
    chains``, cell ``j`` in lane ``j % chains`` of beat ``j // chains``, zeros after."""
    hidden, chains = config.hidden_size, config.chains
    beats = np.zeros((-(-hidden // chains)) * chains, np.uint32)
    beats[:hidden] = np.asarray(bias_n, np.uint32)
    return beats.reshape(-1, chains)


def run_cycles(config, phase, steps, batch=None):
    """The ``cycles`` counter of a run without gaps on the inputs or backpressure on the
    outputs: :func:`serialized_run_cycles`, or with a projection (``proj_size > 0``: two
    jobs a step) :func:`_projected_run_cycles`.

    The model of :class:`~nnrtl.hw.farnn.engine.FarnnEngine`'s schedule, cycle by cycle, with the START pulse in
    cycle 0 (the counter counts cycles ``1 ..`` the last cell's): ``A``, ``M`` the adder and
    multiplier stages, ``E`` the accumulators' reduction cycles, ``L`` the chain length,
    ``s`` the split factor, ``lat`` the activation unit's latency (BW: plus ``3 A`` for the
    fold).

    * Feed: element ``e`` of vector ``b`` of run step ``j >= 1`` is ready in the cycle after
      the cell ``(b, e)`` of step ``j - 1`` left the activation unit; FW step 0's from
      cycle 1.
    * A unit starts a run in the cycle after it saw the first element valid while Idle;
      it is Idle from two cycles after the previous run's last beat (from the start for
      the first run). Stream ``i`` of a run (rounds, then vectors) starts its issue no
      earlier than ``last_{i-1} + E + 1``, ``first_{i-1} + 2 L`` and ``out_{i-2} + 1``
      (the unit's rules); round 0 issues an element once it is ready, later rounds one per
      cycle.
    * Beat ``k`` of a stream whose last element issued in cycle ``u`` reaches the chain
      heads in ``u + M + E + 6 + 2 k`` without stalls (``cycles`` of
      :mod:`nnrtl.sim.golden.farnn.mvm` at ``k = L - 1``, before the ``(s - 1) A`` fold);
      the serializer, the heads and the fold then hold it as
      :func:`serialized_run_cycles` says; its real rows leave the serializer one per
      cycle from the next cycle and the activation unit ``lat`` cycles later. BW step
      ``T - 1`` has no unit run: the serializer makes its beats from cycle 1, back to back
      (a beat of ``n`` real rows ``max(n, 1)`` cycles).

    Returns
    -------
    int
    """
    if config.proj_size:
        return _projected_run_cycles(config, phase, steps,
                                     config.batch if batch is None else batch)
    return serialized_run_cycles(config, phase, steps, batch)


def _streams(shape, batch, start, ready, e_gap, outs):
    """The streams of one unit run of ``shape`` in issue order (rounds, then vectors), as
    ``(r, b, last)`` with ``last`` the cycle its last element issued, under the unit's rules
    (:func:`run_cycles`): from ``start``, no earlier than ``last_{i-1} + E + 1``,
    ``first_{i-1} + 2 L`` and ``out_{i-2} + 1``; round 0 issues element ``e`` of vector
    ``b`` from ``ready(b, e)``. The caller appends each stream's last beat's cycle to
    ``outs`` before taking the next stream."""
    t, firsts, lasts = start, [], []
    for r in range(shape.slices):
        split = shape.split_last and r == shape.slices - 1
        count = shape.chunk if split else shape.inputs
        for b in range(batch):
            u = t
            if firsts:
                u = max(u, lasts[-1] + e_gap + 1, firsts[-1] + 2 * shape.chain_length)
            if len(outs) >= 2:
                u = max(u, outs[-2] + 1)
            first = None
            for e in range(count):
                if r == 0:
                    u = max(u, ready(b, e))
                if first is None:
                    first = u
                u += 1
            t = u
            firsts.append(first)
            lasts.append(u - 1)
            yield r, b, u - 1


def _job_beats(config, shape, batch):
    """``[(r, b, k, rows)]``: a job's result beats in order, ``rows`` the cells each
    leaves the serializer as (:func:`cell_order`'s grouping by beat)."""
    blocks = config.units if shape.units > 1 else 1
    beats = []
    for r in range(shape.slices):
        split = shape.split_last and r == shape.slices - 1
        width = shape.lanes if split else shape.chains
        for b in range(batch):
            for k in range(shape.chain_length):
                first = r * shape.pes_per_unit + k * width
                rows = []
                for u in range(blocks):
                    offset = u * shape.rows if blocks > 1 else 0
                    end = min(shape.rows, shape.total_rows - offset)
                    rows.extend(offset + row for row in range(first, min(first + width, end)))
                beats.append((r, b, k, rows))
    return beats


def _projected_run_cycles(config, phase, steps, batch):  # noqa: C901 (one schedule)
    """:func:`run_cycles` of an engine with a projection: two jobs a step (FW ``R_k`` then
    ``W_hr``, BW ``R_k^T`` then ``W_hr^T``), the rules of :func:`run_cycles` plus:

    * a job's first element is offered no earlier than two cycles after the serializer
      took the previous job's last beat (the units' configuration settles);
    * the ``R_k`` / ``R_k^T`` job's elements of vector ``b`` are ready in the cycle after
      the last row of vector ``b`` of its source was written (the projection's rows come
      out unit by unit, not in row order), the other job's row by row;
    * a projection beat has up to ``units * chains`` cells: the serializer takes beat
      ``k + 1`` of a unit run at ``max(natural, take_k + max(n_k, 2))`` (``natural`` the
      unstalled cycle, ``n_k`` the cells of beat ``k``), any beat no earlier than the
      previous beat's last cell (``take + max(n, 1)``);
    * the sinks: FW ``R_k`` the activation unit (its latency), ``W_hr`` none (``m_proj``
      at once); BW ``R_k^T`` the fold and ``fa(dv, dy)`` (``units * A``), ``W_hr^T`` the
      BW activation unit;
    * the run ends in the later of the last cell's cycle and the cycle after the
      serializer took the last beat.
    """
    a, mul, length = config.adder_stages, config.multiplier_stages, config.chain_length
    e_gap = reduction_cycles(a)
    stages = dict(adder_stages=a, multiplier_stages=mul)
    bw = phase == "bw"
    shapes = config.pass_matrices(phase)
    latency = ([config.units * a, BwActivation(config.cell, **stages).latency] if bw
               else [FwActivation(config.cell, **stages).latency, 0])
    delay = result_delay(a, mul, config.split_factor)
    state = dict(free=1, last_take=None, idle_from=None, end=0)
    sources = {}                 # job -> {(b, row): cycle its cell was written}

    def unit_run(job, ready, full):
        shape = shapes[job]
        beats = _job_beats(config, shape, batch)
        gate = 1 if state["last_take"] is None else state["last_take"] + 2

        def element_ready(b, e):
            return max(gate, ready(b, None if full else e))
        first_valid = element_ready(0, 0)
        idle = state["idle_from"]
        t = (first_valid if idle is None else max(idle, first_valid)) + 1
        outs, written = [], {}
        previous = None                         # (take, cells) of this run's last beat
        index = 0
        for _r, b, last in _streams(shape, batch, t, element_ready, e_gap, outs):
            for k in range(length):
                _r, _b, _k, rows = beats[index]
                index += 1
                take = max(last + delay + 2 * k, state["free"])
                if previous is not None:
                    take = max(take, previous[0] + max(previous[1], 2))
                for c, row in enumerate(rows):
                    written[b, row] = take + 1 + c + latency[job]
                state["free"] = take + max(len(rows), 1)
                previous = (take, len(rows))
            outs.append(previous[0])
        state["idle_from"] = outs[-1] + 2
        state["last_take"] = outs[-1]
        return written

    def zero_run():
        written = {}
        take = 1
        for _r, b, _k, rows in _job_beats(config, shapes[0], batch):
            for c, row in enumerate(rows):
                written[b, row] = take + 1 + c + latency[0]
            state["last_take"] = take
            take += max(len(rows), 1)
        state["free"] = take
        return written

    def from_source(job):
        cells = sources[job]
        done = {}
        for (b, _row), cycle in cells.items():
            done[b] = max(done.get(b, 0), cycle)

        def ready(b, e):
            return done[b] + 1 if e is None else cells[b, e] + 1
        return ready

    for j in range(steps):
        if bw and j == 0:
            sources[0] = zero_run()
        else:
            ready = (lambda b, e: 1) if (j == 0 and not bw) else from_source(1)
            sources[0] = unit_run(0, ready, full=True)
        sources[1] = unit_run(1, from_source(0), full=False)
        state["end"] = max(state["end"], max(sources[0].values()), max(sources[1].values()))
    return max(state["end"], state["last_take"] + 1)


class ResultPath:
    """The units' result path into the top's serializer, beat by beat, without
    backpressure after the serializer (:func:`serialized_run_cycles`' rules; also
    :mod:`nnrtl.gen.farnn.perf`'s).

    * A chain head hands out a beat no earlier than two cycles after it handed out the
      beat before (its output register reloads only when empty).
    * The fold (split factor ``s > 1``) is ``folds = s - 1`` :class:`~nnrtl.hw.arith.FloatAdd`
      in a row, ``stages`` each (every beat passes all of them). Each adder moves as a
      whole, ``i.ready = ~o.valid | o.ready``: adder ``g`` holds (bubbles included, and
      takes no beat) exactly while a beat waits on its ``o`` that the next adder (the
      serializer for the last) does not take; an adder whose ``o`` is empty moves on
      while the one after it holds. A beat is on adder ``g``'s ``o`` after ``stages``
      cycles in which adder ``g`` moved, counted from the one it entered in. The front
      adders keep moving (filling their bubbles) while the last one waits on the
      serializer, so the ``(s - 1) A`` stages are not one pipeline holding as a whole
      (they are only for ``s = 2``).
    * The serializer takes a beat once it is on the fold's ``o`` (the heads' with ``s =
      1``) and ``free`` has come; it is then busy ``max(rows, 1)`` cycles.

    A beat's progress depends only on the beats before it (the path keeps order), so one
    pass over the beats in order is exact.

    Parameters
    ----------
    folds : int
        Fold adders, ``s - 1``.
    stages : int
        Pipeline stages of each fold adder (the adder stages ``A``).
    free : int or None
        First cycle the serializer is free; ``None``: from the first beat's arrival.
    """

    def __init__(self, folds, stages, free=None):
        self.folds, self.stages, self.free, self.head = folds, stages, free, None
        self.holds = [[] for _ in range(folds)]     # per adder: [(start, end)) it holds

    def _moving(self, g, cycle):
        """The first cycle from ``cycle`` on in which fold adder ``g`` moves."""
        for start, end in self.holds[g]:
            if start <= cycle < end:
                cycle = end
        return cycle

    def take(self, natural, rows):
        """The cycle the serializer takes a beat of ``rows`` real rows whose chain-head
        cycle without stalls is ``natural`` (beats in order)."""
        head = natural if self.head is None else max(natural, self.head + 2)
        free = head if self.free is None else self.free
        if not self.folds:
            taken = self.head = max(head, free)
        else:
            enter = self.head = self._moving(0, head)
            for g in range(self.folds):
                at = enter
                for _ in range(self.stages):      # the cycles in which adder g moves
                    at = self._moving(g, at) + 1
                handed = (self._moving(g + 1, at) if g + 1 < self.folds
                          else max(at, free))
                self.holds[g] = [(s, e) for s, e in self.holds[g] if e > enter]
                if handed > at:
                    self.holds[g].append((at, handed))
                enter = handed
            taken = enter
        self.free = taken + max(rows, 1)
        return taken


def serialized_run_cycles(config, phase, steps, batch=None):  # noqa: C901 (one schedule)
    """:func:`run_cycles` with the serializer holding the units' result streams (``chains >
    2``). The rules of :func:`run_cycles`, and on the result path, beat by beat (``n_k =
    last + M + E + 6 + 2 k``: beat ``k``'s cycle at the chain heads without stalls):

    * a chain head hands out beat ``k`` at the later of ``n_k`` and two cycles after it
      handed out the beat before (its output register reloads only when empty: one word
      every two cycles, streams back to back);
    * with a split factor ``s > 1`` every beat passes the fold, ``s - 1`` adders of ``A``
      stages in a row, each moving as a whole and holding (taking no beat) only while a
      beat waits on its own ``o`` (:class:`ResultPath`; not the ``(s - 1) A`` stages as
      one pipeline);
    * the serializer takes a beat once it is on ``o`` and the beat before has gone, which
      is ``max(n, 1)`` cycles after that beat was taken (``n`` its real rows); the rows
      leave one per cycle from the next cycle;
    * a stream's last beat taken on ``o`` frees its credit (the issue rule
      ``out_{i-2} + 1``), and the run's last one makes the unit Idle two cycles later.

    It holds for any ``chains``: with two or fewer the serializer never holds a stream, and
    the chain heads delay a short (split) stream whose first beat would reach a head
    before the stream before it has left (``E + c < 2 L`` for its ``c`` elements: e.g. one
    adder stage, ``E = 0``; measured: ``tests/farnn/hw/test_farnn_schedule.py``,
    ``HEAD_CLASH``).
    """
    batch = config.batch if batch is None else batch
    shape = config.matrix("recurrent")
    a, mul, length = config.adder_stages, config.multiplier_stages, config.chain_length
    e_gap = reduction_cycles(a)
    stages = dict(adder_stages=a, multiplier_stages=mul)
    bw = phase == "bw"
    lat = (BwActivation(config.cell, **stages).latency + 3 * a if bw
           else FwActivation(config.cell, **stages).latency)
    pes, hidden = shape.pes_per_unit, config.hidden_size

    def beat_rows(r, k):
        split = shape.split_last and r == shape.slices - 1
        width = shape.lanes if split else config.chains
        first = r * pes + k * width
        return list(range(first, min(first + width, hidden)))

    path = ResultPath(config.split_factor - 1, a, free=1)

    def serialize(taken, b, rows):
        for c, row in enumerate(rows):
            now[b, row] = taken + 1 + c + lat

    fired = {}                                   # (b, row) -> cycle it left the unit
    last_fire = 0
    idle_from = None
    for j in range(steps):
        now = {}
        if bw and j == 0:                        # no unit run: zero beats back to back
            for r in range(shape.slices):
                for b in range(batch):
                    for k in range(length):
                        rows = beat_rows(r, k)
                        serialize(path.free, b, rows)
                        path.free += max(len(rows), 1)
        else:
            def ready(b, e):
                return 1 if (j == 0 and not bw) else fired[b, e] + 1
            first_valid = ready(0, 0)
            t = (first_valid if idle_from is None else max(idle_from, first_valid)) + 1
            outs = []
            for r, b, last in _streams(shape, batch, t, ready, e_gap, outs):
                for k in range(length):
                    rows = beat_rows(r, k)
                    taken = path.take(last + mul + e_gap + 6 + 2 * k, len(rows))
                    serialize(taken, b, rows)
                outs.append(taken)
            idle_from = outs[-1] + 2
        fired = now
        last_fire = max(last_fire, max(now.values()))
    return last_fire

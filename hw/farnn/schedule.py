# amaranth: UnusedElaboratable=no
"""The FARNN engine's schedule seen from outside (:class:`~nnrtl.hw.farnn.engine.FarnnEngine`):
the order of the cell streams, the GRU bias beats of a FW load and the cycle model of a
run (the module docstring of :mod:`nnrtl.hw.farnn.engine` states the schedule)."""

import numpy as np

from .activation import BwActivation, FwActivation
from .pe import reduction_cycles

__all__ = ["cell_order", "bias_beats", "run_cycles", "serialized_run_cycles"]


def cell_order(config, batch=None):
    """``[(b, row), ...]``: the cells of one step in the order of the cell streams: for
    each round, for each vector ``b``, the round's rows in increasing order (padding rows
    past ``hidden_size`` skipped)."""
    batch = config.batch if batch is None else batch
    shape = config.matrix("recurrent")
    order = []
    for r in range(shape.slices):
        split = shape.split_last and r == shape.slices - 1
        width = shape.lanes if split else shape.chains
        first = r * shape.pes_per_unit
        rows = range(first, min(first + width * shape.chain_length, shape.rows))
        for b in range(batch):
            order.extend((b, row) for row in rows)
    return order


def bias_beats(config, bias_n):
    """The ``bR_n`` beats a GRU FW load ends with: ``uint32`` array ``ceil(H / chains) x
    chains``, cell ``j`` in lane ``j % chains`` of beat ``j // chains``, zeros after."""
    hidden, chains = config.hidden_size, config.chains
    beats = np.zeros((-(-hidden // chains)) * chains, np.uint32)
    beats[:hidden] = np.asarray(bias_n, np.uint32)
    return beats.reshape(-1, chains)


def run_cycles(config, phase, steps, batch=None):  # noqa: C901 (one schedule, in order)
    """The ``cycles`` counter of a run without gaps on the inputs or backpressure on the
    outputs. With ``chains <= 2`` the serializer never holds a unit's result stream (the
    rule below); with more chains a beat's cells take longer than a chain head's two
    cycles per beat and the serializer holds the streams back:
    :func:`serialized_run_cycles` (the same rules plus the stalls).

    The model of the module docstring's schedule, cycle by cycle, with the START pulse in
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
    * Beat ``k`` of a stream whose last element issued in cycle ``u`` leaves the unit in
      ``u + M + E + 6 + 2 k + (s - 1) A`` (``cycles`` of :mod:`nnrtl.sim.golden.farnn.mvm`
      at ``k = L - 1``); its real rows leave the serializer one per cycle from the next
      cycle and the activation unit ``lat`` cycles later. BW step ``T - 1`` has no unit
      run: the serializer makes its beats from cycle 1, back to back (a beat of ``n`` real
      rows ``max(n, 1)`` cycles).

    Returns
    -------
    int
    """
    if config.chains > 2:
        return serialized_run_cycles(config, phase, steps, batch)
    batch = config.batch if batch is None else batch
    shape = config.matrix("recurrent")
    a, mul, length = config.adder_stages, config.multiplier_stages, config.chain_length
    e_gap = reduction_cycles(a)
    stages = dict(adder_stages=a, multiplier_stages=mul)
    bw = phase == "bw"
    lat = (BwActivation(config.cell, **stages).latency + 3 * a if bw
           else FwActivation(config.cell, **stages).latency)
    fold = (config.split_factor - 1) * a
    pes, hidden = shape.pes_per_unit, config.hidden_size

    def beat_rows(r, k):
        split = shape.split_last and r == shape.slices - 1
        width = shape.lanes if split else config.chains
        first = r * pes + k * width
        return list(range(first, min(first + width, hidden)))

    fired = {}                                   # (b, row) -> cycle it left the unit
    last_fire = 0
    idle_from = None
    for j in range(steps):
        now = {}
        if bw and j == 0:                        # no unit run: zero beats back to back
            take = 1
            for r in range(shape.slices):
                for b in range(batch):
                    for k in range(length):
                        rows = beat_rows(r, k)
                        for c, row in enumerate(rows):
                            now[b, row] = take + 1 + c + lat
                        take += max(len(rows), 1)
        else:
            def ready(b, e):
                return 1 if (j == 0 and not bw) else fired[b, e] + 1
            first_valid = ready(0, 0)
            t = (first_valid if idle_from is None else max(idle_from, first_valid)) + 1
            firsts, lasts, outs = [], [], []
            for r in range(shape.slices):
                split = shape.split_last and r == shape.slices - 1
                count = shape.chunk if split else shape.inputs
                for b in range(batch):
                    start = t
                    if firsts:
                        start = max(start, lasts[-1] + e_gap + 1, firsts[-1] + 2 * length)
                    if len(outs) >= 2:
                        start = max(start, outs[-2] + 1)
                    u = start
                    for e in range(count):
                        if r == 0:
                            u = max(u, ready(b, e))
                        if e == 0:
                            first = u
                        u += 1
                    last = u - 1
                    t = u
                    firsts.append(first)
                    lasts.append(last)
                    for k in range(length):
                        beat = last + mul + e_gap + 6 + 2 * k + fold
                        for c, row in enumerate(beat_rows(r, k)):
                            now[b, row] = beat + 1 + c + lat
                    outs.append(last + mul + e_gap + 6 + 2 * (length - 1) + fold)
            idle_from = outs[-1] + 2
        fired = now
        last_fire = max(last_fire, max(now.values()))
    return last_fire


def serialized_run_cycles(config, phase, steps, batch=None):  # noqa: C901 (one schedule)
    """:func:`run_cycles` with the serializer holding the units' result streams (``chains >
    2``). The rules of :func:`run_cycles`, and on the result path, beat by beat (``n_k =
    last + M + E + 6 + 2 k``: beat ``k``'s cycle at the chain heads without stalls):

    * a chain head hands out beat ``k`` at the later of ``n_k`` and two cycles after it
      handed out the beat before (its output register reloads only when empty: one word
      every two cycles, streams back to back);
    * with a split factor ``s > 1`` every beat passes the ``(s - 1) A``-stage fold, a
      pipeline that holds as a whole while its last stage waits on the serializer (and
      takes no beat then): a beat is on ``o`` after ``(s - 1) A`` cycles in which the fold
      moved;
    * the serializer takes a beat once it is on ``o`` and the beat before has gone, which
      is ``max(n, 1)`` cycles after that beat was taken (``n`` its real rows); the rows
      leave one per cycle from the next cycle;
    * a stream's last beat taken on ``o`` frees its credit (the issue rule
      ``out_{i-2} + 1``), and the run's last one makes the unit Idle two cycles later.

    It holds for any ``chains``: with two or fewer it equals :func:`run_cycles`' own rule
    except where a short (split) stream's first beat would reach a chain head before the
    stream before it has left (``E + c < 2 L`` for its ``c`` elements: e.g. one adder
    stage, ``E = 0``): the head's two cycles then delay it, which only this function
    models (measured: ``tests/hw/test_farnn_schedule.py``, ``HEAD_CLASH``).
    """
    batch = config.batch if batch is None else batch
    shape = config.matrix("recurrent")
    a, mul, length = config.adder_stages, config.multiplier_stages, config.chain_length
    e_gap = reduction_cycles(a)
    stages = dict(adder_stages=a, multiplier_stages=mul)
    bw = phase == "bw"
    lat = (BwActivation(config.cell, **stages).latency + 3 * a if bw
           else FwActivation(config.cell, **stages).latency)
    depth = (config.split_factor - 1) * a
    pes, hidden = shape.pes_per_unit, config.hidden_size

    def beat_rows(r, k):
        split = shape.split_last and r == shape.slices - 1
        width = shape.lanes if split else config.chains
        first = r * pes + k * width
        return list(range(first, min(first + width, hidden)))

    state = {"free": 1, "head": None, "stalls": []}   # serializer, chain head, fold holds

    def hold_free(cycle):
        """The first cycle from ``cycle`` on in which the fold moves."""
        for start, end in state["stalls"]:
            if start <= cycle < end:
                cycle = end
        return cycle

    def pass_beat(natural):
        """Cycle a beat whose chain-head cycle without stalls is ``natural`` is taken."""
        head = natural if state["head"] is None else max(natural, state["head"] + 2)
        if depth:
            enter = hold_free(head)
            at, moved = enter, 0
            while moved < depth:              # count the cycles in which the fold moves
                at = hold_free(at)
                at += 1
                moved += 1
            taken = max(at, state["free"])
            state["stalls"] = [(s, e) for s, e in state["stalls"] if e > enter]
            if taken > at:
                state["stalls"].append((at, taken))
            state["head"] = enter
        else:
            taken = max(head, state["free"])
            state["head"] = taken
        return taken

    def serialize(taken, b, rows):
        for c, row in enumerate(rows):
            now[b, row] = taken + 1 + c + lat
        state["free"] = taken + max(len(rows), 1)

    fired = {}                                   # (b, row) -> cycle it left the unit
    last_fire = 0
    idle_from = None
    for j in range(steps):
        now = {}
        if bw and j == 0:                        # no unit run: zero beats back to back
            for r in range(shape.slices):
                for b in range(batch):
                    for k in range(length):
                        serialize(state["free"], b, beat_rows(r, k))
        else:
            def ready(b, e):
                return 1 if (j == 0 and not bw) else fired[b, e] + 1
            first_valid = ready(0, 0)
            t = (first_valid if idle_from is None else max(idle_from, first_valid)) + 1
            firsts, lasts, outs = [], [], []
            for r in range(shape.slices):
                split = shape.split_last and r == shape.slices - 1
                count = shape.chunk if split else shape.inputs
                for b in range(batch):
                    start = t
                    if firsts:
                        start = max(start, lasts[-1] + e_gap + 1, firsts[-1] + 2 * length)
                    if len(outs) >= 2:
                        start = max(start, outs[-2] + 1)
                    u = start
                    for e in range(count):
                        if r == 0:
                            u = max(u, ready(b, e))
                        if e == 0:
                            first = u
                        u += 1
                    last = u - 1
                    t = u
                    firsts.append(first)
                    lasts.append(last)
                    for k in range(length):
                        taken = pass_beat(last + mul + e_gap + 6 + 2 * k)
                        serialize(taken, b, beat_rows(r, k))
                    outs.append(taken)
            idle_from = outs[-1] + 2
        fired = now
        last_fire = max(last_fire, max(now.values()))
    return last_fire

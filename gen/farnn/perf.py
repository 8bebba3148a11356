# amaranth: UnusedElaboratable=no
"""Cycle model of the FARNN engine: a layer pass (FW or BW) and a training step.

Built from named components and calibrated against the engine top
(:class:`~nnrtl.hw.farnn.engine.FarnnEngine`): its cycles are those of
:func:`nnrtl.hw.farnn.schedule.serialized_run_cycles`, the top's schedule beat by beat
and element by element, itself equal to the simulated engine's ``cycles`` counter on
every gapless run measured (``tests/farnn/hw/test_farnn_schedule.py``). This model takes the
same terms per stream and per step, so a 1,600-step pass of 1,024 cells costs
milliseconds; ``tests/farnn/gen/test_farnn_perf.py`` holds it within 3 % of the schedule on
drawn engines (exactness: the Notes of :func:`pass_cycles`).

Utilization ``U = useful MACs / (P_total x cycles incl. weight load)``; GFLOP/s = ``2 x
useful MACs x clock / cycles`` at :data:`CLOCK_HZ` (the paper's 400 MHz).
"""

import dataclasses
import functools

from ...hw.arith.float import FP32
from ...hw.arith.float_add import FloatAdd
from ...hw.farnn.activation import BwActivation, FwActivation
from ...hw.farnn.config import FarnnConfig
from ...hw.farnn.pe import reduction_cycles
from ...hw.farnn.schedule import ResultPath
from ...sim.golden.farnn.mvm import cycles as mvm_cycles
from ...sim.golden.farnn.mvm import load_cycles as mvm_load_cycles
from ..errors import UsageError

__all__ = ["CLOCK_HZ", "PCIE_GBPS", "HANDOFF", "MVM_TURNAROUND", "SCHEDULES", "PassCycles",
           "TrainingStep", "handoff_delay", "load_cycles", "transfer_cycles", "pass_cycles",
           "training_step", "predict", "f9_table", "f9_markdown"]

#: The paper's clock on UltraScale+ (Sec. 5.1.2).
CLOCK_HZ = 400e6
#: Host-to-FPGA weight bandwidth in GB/s (10**9 B/s) assumed by default: PCIe Gen3 x16
#: (15.75 GB/s raw after 128b/130b coding) at ~80% DMA efficiency, the 12-13 GB/s usable the
#: spec quotes (spec §4 "Sanity derivations"). A parameter everywhere.
PCIE_GBPS = 12.5
#: Cycles from a cell leaving the activation unit (or a result entering the vector
#: buffer) until it can be fed: the buffer's write, then its synchronous read. To calibrate
#: against the top.
HANDOFF = 2
#: Cycles the MVM unit takes from a run's last result beat to accepting the next run's
#: first element (its "Wait for the sums" and "Idle" states), measured by
#: ``tests/farnn/gen/test_farnn_perf.py`` in the Amaranth simulator.
MVM_TURNAROUND = 2
#: The top's first issue of a FW run: the START pulse in cycle 0, the zeros valid from
#: cycle 1, the idle unit's run from cycle 2 (:func:`nnrtl.hw.farnn.schedule.run_cycles`).
FIRST_ISSUE = 2
#: ``"mvm"``: the engine as built (the MVM unit waits for its last sum); ``"overlap"``:
#: a unit that issues the next run by its issue rule (not built).
SCHEDULES = ("mvm", "overlap")


@functools.cache
def _latencies(cell, adder_stages, multiplier_stages):
    kwargs = {"adder_stages": adder_stages, "multiplier_stages": multiplier_stages}
    return (FwActivation(cell, **kwargs).latency, BwActivation(cell, **kwargs).latency,
            FloatAdd(FP32, stages=adder_stages).latency)


def handoff_delay(config, name):
    """Cycles from a result cell of matrix ``name`` entering the top's serializer to the
    element it makes being usable by the next run: FW ``recurrent``: the FW activation's
    latency; BW ``recurrent_t``: the fold of the units' partials (``units - 1`` adds; one
    more for the GRU's direct term) and, without a projection, the BW activation;
    ``projection_t``: the BW activation; ``projection``: none; plus :data:`HANDOFF`."""
    fw, bw, add = _latencies(config.cell, config.adder_stages, config.multiplier_stages)
    fold = (config.units - 1 + (config.cell == "gru")) * add
    delay = {"recurrent": fw, "projection": 0, "projection_t": bw,
             "recurrent_t": fold + (0 if config.proj_size else bw)}[name]
    return delay + HANDOFF


def _run(config, shape, free=None):
    """The MVM unit's gapless run of ``shape`` for the batch as the top takes its results
    (Notes of :func:`pass_cycles`, *run*): golden ``cycles``' issue rule and latencies, each stream's
    beats taken by the serializer (``beats``: per stream ``[(cycle taken, real rows)]``),
    the credit and ``cycles`` from the last beats taken. ``free``: the cycle (from the
    run's first issue) from which the serializer is free (BW's first run, behind the zero
    step)."""
    golden = mvm_cycles(shape.inputs, rounds=shape.slices, batch=config.batch,
                        chains=shape.chains, chain_length=shape.chain_length,
                        split=shape.split, split_last=shape.split_last,
                        adder_stages=config.adder_stages,
                        multiplier_stages=config.multiplier_stages)
    length, pes = shape.chain_length, shape.pes_per_unit
    e_gap = reduction_cycles(config.adder_stages)
    depth = (shape.split - 1) * config.adder_stages
    lengths = _lengths(shape, config.batch)
    issues, outs, beats = [], [], []
    path = ResultPath(shape.split - 1, config.adder_stages, free)
    for j, (count, latency) in enumerate(zip(lengths, golden["latencies"])):
        if j == 0:
            issue = 0
        else:
            issue = issues[-1] + max(lengths[j - 1] + e_gap, 2 * length)
            if j >= 2:
                issue = max(issue, outs[j - 2] + 1)
        r = j // config.batch
        split_round = shape.split_last and r == shape.slices - 1
        width = shape.lanes if split_round else shape.chains
        stream = []
        for k in range(length):
            rows = max(0, min(width, shape.rows - r * pes - k * width))
            taken = path.take(issue + latency - 2 * (length - 1 - k) - depth, rows)
            stream.append((taken, rows))
        issues.append(issue)
        outs.append(taken)
        beats.append(stream)
    return {"issues": issues, "latencies": [o - i for o, i in zip(outs, issues)],
            "cycles": outs[-1] + 1, "mac_cycles": golden["mac_cycles"], "beats": beats}


def _stream_gap(config, length):
    """Issue cycles the MVM unit leaves from the start of a stream of ``length`` elements
    to the next stream's start: the second issue of a two-stream golden run."""
    return mvm_cycles(length, rounds=2, chains=config.chains,
                      chain_length=config.chain_length, adder_stages=config.adder_stages,
                      multiplier_stages=config.multiplier_stages)["issues"][1]


def _rows(config, shape, beats):
    """``[(cycle, vector, row), ...]``: each real row of ``beats`` (per stream ``[(cycle
    taken, rows)]``) leaving the serializer, one per cycle in beat order."""
    out, free = [], None
    for j, stream in enumerate(beats):
        r, b = divmod(j, config.batch)
        split_round = shape.split_last and r == shape.slices - 1
        width = shape.lanes if split_round else shape.chains
        for k, (taken, rows) in enumerate(stream):
            for c in range(rows):
                free = taken + c if free is None else max(taken + c, free + 1)
                out.append((free, b, r * shape.pes_per_unit + k * width + c))
    return out


def _ready(config, shape, run, delay, consumer):
    """When (from the run's first issue) the next run, ``consumer`` (:func:`_run`), may
    start for its round 0 to run without a gap (Notes of :func:`pass_cycles`, *data*), and when the
    run's last cell is usable."""
    rows = _rows(config, shape, run["beats"])
    last = max(cycle for cycle, _, _ in rows) + delay
    if shape.units != 1:      # a projection's output: the whole vector first (barrier)
        return last, last
    # element e of vector b is fed I[b] + e after the next run's start
    bound = max(cycle + delay - consumer["issues"][b] - row for cycle, b, row in rows)
    return bound, last


def _zero_step(config, shape, delay, consumer):
    """BW's first step (``T - 1``, no unit run): the serializer's zero beats back to back
    from the first cycle, ``max(rows, 1)`` cycles each; returns the first run's first
    issue (from its gapless round 0 or the idle unit's start after its first element,
    whichever is later), the step's last cell usable and the cycle the serializer is free,
    in the top's cycles (the START pulse in cycle 0, the zero beats from cycle 1)."""
    beats, cycle = [], 1
    for r in range(shape.slices):
        split_round = shape.split_last and r == shape.slices - 1
        width = shape.lanes if split_round else shape.chains
        for _b in range(config.batch):
            stream = []
            for k in range(shape.chain_length):
                rows = max(0, min(width, shape.rows - r * shape.pes_per_unit - k * width))
                stream.append((cycle, rows))
                cycle += max(rows, 1)
            beats.append(stream)
    rows = _rows(config, shape, beats)
    bound = max(cycle + delay - consumer["issues"][b] - row for cycle, b, row in rows)
    first = min(cycle for cycle, b, row in rows if b == 0 and row == 0) + delay + 1
    return max(bound, first), max(cycle for cycle, _, _ in rows) + delay, cycle


@dataclasses.dataclass(frozen=True)
class PassCycles:
    """Cycles of one layer's pass and their components (Notes of :func:`pass_cycles`).

    Attributes
    ----------
    phase : str
        ``"fw"`` or ``"bw"``.
    steps : int
    runs : int
        MVM runs: ``steps`` in FW, ``steps - 1`` in BW (step ``T - 1`` has ``dh = 0``).
    load, load_stream, load_pcie : int
        Weight load: ``max(load_stream, load_pcie)``; the port's own cycles and the PCIe
        bound.
    mac, gaps, stream_gap, exposed : int
        Per step: MAC (issue) cycles, idle issue cycles inside the runs, the unit's wait
        at the step boundary, the data wait beyond it (the exposed latency).
    period : int
        Cycles per step in steady state: ``mac + gaps + stream_gap + exposed +
        transfer``.
    span : int
        The last step's cycles to its last issue (``period - stream_gap - exposed``).
    drain : int
        From the last issue to the last cell usable.
    fill : int
        Before the first run's first issue beyond the top's start (FW: 0; BW: the zero
        step, :func:`_zero_step`; without a run, the whole pass).
    useful_macs : int
    credit_risk : bool
        Whether the previous step's streams could still hold the unit's two-stream credit
        at the next step's second stream (``schedule="overlap"`` only; the model assumes
        not).
    transfer : int
        Per step, the wait for the step's host transfers beyond the rest
        (:func:`transfer_cycles`; 0 unless PCIe is slower than the step).
    """

    phase: str
    steps: int
    runs: int
    load: int
    load_stream: int
    load_pcie: int
    mac: int
    gaps: int
    stream_gap: int
    exposed: int
    period: int
    span: int
    drain: int
    fill: int
    useful_macs: int
    credit_risk: bool
    transfer: int = 0

    @property
    def compute(self):
        """Cycles after the load: ``fill + (runs - 1) period + span + drain`` (``fill``
        alone without a run)."""
        if not self.runs:
            return self.fill
        return self.fill + (self.runs - 1) * self.period + self.span + self.drain

    @property
    def cycles(self):
        """``load + compute``."""
        return self.load + self.compute

    def components(self):
        """``{name: cycles}`` of the whole pass, summing to :attr:`cycles`."""
        t = self.runs
        if not t:
            return {"load": self.load, "fill": self.fill, "mac": 0, "gaps": 0,
                    "stream_gap": 0, "exposed": 0, "transfer": 0, "drain": 0}
        return {"load": self.load, "fill": self.fill, "mac": t * self.mac,
                "gaps": t * self.gaps, "stream_gap": (t - 1) * self.stream_gap,
                "exposed": (t - 1) * self.exposed, "transfer": (t - 1) * self.transfer,
                "drain": self.drain}


def load_cycles(config, phase, *, pcie_gbps=PCIE_GBPS, clock_hz=CLOCK_HZ):
    """``(port cycles, PCIe cycles)`` of pass ``phase``'s weight load."""
    port = config.units * sum(
        mvm_load_cycles(shape.inputs, rounds=shape.slices, chain_length=shape.chain_length,
                        split=shape.split, split_last=shape.split_last)
        for shape in config.pass_matrices(phase))
    nbytes = 4 * config.weight_stream_words(phase)
    pcie = -(-int(round(nbytes * clock_hz)) // int(round(pcie_gbps * 1e9)))
    return port, pcie


def transfer_cycles(config, phase, *, pcie_gbps=PCIE_GBPS, clock_hz=CLOCK_HZ):
    """Cycles the host link needs per step of pass ``phase`` (PCIe is full duplex: the
    larger direction). FW: in the input MVM's results (``units x H``), out ``h_t`` (the
    recurrent vector); BW: in ``dy_t`` (the recurrent vector), out the gate deltas
    (``units x H``); fp32, times ``batch``. The saved gates travel to and from the FPGA's
    own DRAM, not counted here."""
    gates = config.units * config.hidden_size
    words = max(gates, config.recurrent_size) * config.batch
    return -(-int(round(4 * words * clock_hz)) // int(round(pcie_gbps * 1e9)))


def _check(config, phase, schedule, pcie_gbps, steps):
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool)
                              or steps <= 0):
        raise UsageError(f"steps must be a positive integer, not {steps!r}")
    if not isinstance(config, FarnnConfig):
        raise UsageError(f"config must be a FarnnConfig, not {config!r}")
    if phase not in ("fw", "bw"):
        raise UsageError(f"phase must be fw or bw, not {phase!r}")
    if schedule not in SCHEDULES:
        raise UsageError(f"schedule must be one of {', '.join(SCHEDULES)}, not {schedule!r}")
    if isinstance(pcie_gbps, bool) or not isinstance(pcie_gbps, (int, float)) \
            or pcie_gbps <= 0:
        raise UsageError(f"pcie_gbps must be a positive number of GB/s, not {pcie_gbps!r}")


def pass_cycles(config, phase, *, steps=None, schedule="mvm", pcie_gbps=PCIE_GBPS,
                clock_hz=CLOCK_HZ, delays=None):
    """:class:`PassCycles` of one layer's pass ``phase`` over ``steps`` time steps
    (default ``config.seq_len``). ``delays`` (``{matrix name: cycles}``) overrides
    :func:`handoff_delay` (the test's emulated top; calibration).

    Notes
    -----
    A pass of one layer:

    ``load + fill + (R - 1) period + span + drain`` over ``R`` MVM runs (FW ``T``, BW ``T -
    1``: step ``T - 1`` has ``dh = 0`` and runs no MVM) with

    * **load**: the pass's matrices through the weight port, units one after another, one
      load per unit and matrix (:mod:`nnrtl.gen.farnn.host`): the MVM unit takes
      :func:`~nnrtl.sim.golden.farnn.mvm.load_cycles` each (a restart cycle, then one beat of
      ``chains`` words per cycle, the paper's 16 words a cycle at 16 chains). The port is fed
      over PCIe: ``bytes / pcie_gbps`` at the clock, when that is longer (the spec's ``C_wload
      = max(n / 16, 4 n f / BW)``). The compute cannot start before the weights are in; the
      double-buffered variant (:func:`training_step`) loads the next pass's weights behind
      the current pass.
    * **run** (:func:`_run`): the MVM unit's issue rule (golden
      :func:`~nnrtl.sim.golden.farnn.mvm.cycles`: slices, split, the accumulators' ``E``
      idle cycles ``gaps``, the ``2 L`` stream spacing, the two-stream credit) with each
      stream's ``L`` result beats taken by the top's serializer
      (:class:`~nnrtl.hw.farnn.schedule.ResultPath`): a chain head hands out a beat two
      cycles after the last at the earliest, each of the fold's ``s - 1`` adders of ``A``
      stages holds as a whole while a beat waits on its output, and the serializer takes a
      beat ``max(rows, 1)`` cycles after the one before (one cell a cycle into the
      activation). With more than two chains a beat holds more rows than the head's two
      cycles: the serializer holds the streams back, and the credit follows the beats taken.
      Its issue cycles are ``mac``.
    * **boundary** (where a step joins the next): the next run's first element is issued at
      the later of

      - *unit*: ``schedule="mvm"`` (the engine as built, the default): the MVM unit waits
        for its last beat to be taken, goes Idle two cycles later and issues one cycle after
        that (``O[last] + 1 + MVM_TURNAROUND``); at 16 chains of 16 PEs the last stream's
        beats of 16 rows take 256 cycles in the serializer, so a step loses some 262 cycles
        (``stream_gap``). ``schedule="overlap"`` (not built: a unit that issues the next run
        while the sums drain): by the issue rule, as if the run went on;
      - *data*: element ``e`` of vector ``b`` of the next step is fed once row ``e`` of the
        vector has left the activation (each row: its serializer cycle plus the producer's
        :func:`handoff_delay`: the activation latency, BW's fold of the units' partials,
        :data:`HANDOFF`). The run starts so that round 0 runs without a gap. With ``S >= 2``
        the last slice's rows are needed ``(S - 1) P`` elements into round 0, so their
        activation hides behind it (the paper's latency hiding); with ``S = 1`` it is exposed
        unless the unit's own wait is longer. A projection's output is taken as a barrier (the
        whole vector, then the next run).

      What the boundary adds beyond the last stream's issue is ``stream_gap`` (the unit) and
      ``exposed`` (the data beyond it).
    * **transfer**: a step takes at least its host transfers over PCIe
      (:func:`transfer_cycles`); what that adds is ``transfer`` (0 at the paper's sizes).
    * **drain**: after the last run's last issue, until its last cell has left the
      activation (the last streams' serialization and the activation latency).
    * **fill**: FW 0 (``h_{-1} = 0`` is on chip: the first run issues in the top's cycle 2,
      :data:`FIRST_ISSUE`). BW: the zero step ``T - 1``: the serializer hands out its zero
      beats from cycle 1 and the first run starts once its round 0 can run (and, if the zero
      beats still hold the serializer, its beats wait: the first period's excess is in
      ``fill``).

    Exactness. Every steady step is the same, so a pass is the sum above. Against the top's
    schedule the model is exact when the unit or round 0's first element binds the next
    run's start. Where they differ, and why:

    * when a *later* element of round 0 binds (layers of a few cells, where the activation
      outlasts the last slice's lead), the top feeds round 0 with gaps and starts earlier
      than the model's gapless start: an upper bound, up to 7 % on layers under 10 cells;
    * the next run's round 0 in the model is gapless, while the top's may start before the
      data bound and wait within it; a cycle or two per step on layers of 10-40 cells with
      one-stage adders (at most 2.2 % in sweeps of 900 drawn engines).

    Under ``schedule="overlap"`` the two-stream credit of the previous step is not carried
    into the next step's streams (:attr:`PassCycles.credit_risk` says when it could bind).
    """
    _check(config, phase, schedule, pcie_gbps, steps)
    steps = config.seq_len if steps is None else steps
    shapes = config.pass_matrices(phase)
    runs = [_run(config, shape) for shape in shapes]
    delays = {s.name: handoff_delay(config, s.name) for s in shapes} | dict(delays or {})
    step = _step(config, shapes, runs, runs, delays, schedule)
    period, span = step["period"], step["span"]
    transfer = max(0, transfer_cycles(config, phase, pcie_gbps=pcie_gbps,
                                      clock_hz=clock_hz) - period)
    port, pcie = load_cycles(config, phase, pcie_gbps=pcie_gbps, clock_hz=clock_hz)
    count, fill, drain = steps, 0, step["drain"]
    if phase == "bw":                   # step T - 1 runs no MVM: the zero step first
        count = steps - 1
        first, zero_last, free = _zero_step(config, shapes[0], delays[shapes[0].name],
                                            runs[0])
        fill = first - FIRST_ISSUE if count else zero_last - 1
        # the first run's beats wait for the zero step's serializer
        held = [_run(config, shapes[0], free=free - first)] + runs[1:]
        lead = _step(config, shapes, held, runs, delays, schedule)
        if count >= 2:
            fill += lead["period"] - period
        elif count == 1:
            fill += lead["span"] + lead["drain"] - span - drain
    return PassCycles(
        phase=phase, steps=steps, runs=count, load=max(port, pcie), load_stream=port,
        load_pcie=pcie, mac=step["mac"], gaps=step["gaps"], stream_gap=step["unit_at"] - span,
        exposed=period - step["unit_at"], transfer=transfer, period=period + transfer,
        span=span, drain=drain, fill=fill,
        useful_macs=count * config.useful_macs_per_step(phase),
        credit_risk=step["credit_risk"])


def _step(config, shapes, runs, consumers, delays, schedule):
    """One step's runs chained (times from the step's first issue, Notes of :func:`pass_cycles`): MAC
    and gap cycles, the unit's and the data's bound on the next step's first issue
    (``unit_at``; ``period``, their join), the last issue's end (``span``) and ``drain``.
    ``consumers``: the next step's runs."""
    # chain the runs of a step; times from the step's first issue
    unit_at = data_at = prev_end = drain_end = 0
    mac = gaps = 0
    credit_risk = False
    for m, (shape, run) in enumerate(zip(shapes, runs)):
        start = 0 if m == 0 else _join(unit_at, data_at, schedule)
        lengths = _lengths(shape, config.batch)
        mac += run["mac_cycles"]
        gaps += run["issues"][-1] + lengths[-1] - run["mac_cycles"]
        if m > 0:
            gaps += start - prev_end
        consumer = consumers[0] if m + 1 == len(runs) else runs[m + 1]
        bound, last = _ready(config, shape, run, delays[shape.name], consumer)
        last_issue = start + run["issues"][-1]
        if schedule == "overlap":
            unit_at = last_issue + _stream_gap(config, lengths[-1])
            o_last = last_issue + run["latencies"][-1]
            credit_risk |= o_last + 1 > unit_at + _stream_gap(config, shape.inputs)
        else:
            unit_at = start + run["cycles"] + MVM_TURNAROUND
        data_at = start + bound
        prev_end = last_issue + lengths[-1]
        drain_end = start + last
    span = prev_end
    return {"mac": mac, "gaps": gaps, "unit_at": unit_at, "span": span,
            "period": _join(unit_at, data_at, schedule), "credit_risk": credit_risk,
            "drain": max(0, drain_end + 1 - span)}


def _join(unit_at, data_at, schedule):
    """The next run's first issue: the unit's and the data's bound; the MVM unit on main,
    idle when the data come last, takes one cycle to enter its run state."""
    if data_at > unit_at:
        return data_at + (schedule == "mvm")
    return unit_at


def _lengths(shape, batch):
    return [shape.chunk if shape.split_last and r == shape.slices - 1 else shape.inputs
            for r in range(shape.slices) for _ in range(batch)]


@dataclasses.dataclass(frozen=True)
class TrainingStep:
    """The FPGA part of one training step: FW of layers ``1 .. layers``, then BW of
    ``layers .. 1``, one layer's weights on chip at a time.

    Attributes
    ----------
    fw, bw : PassCycles
        Every layer's passes are the same (the recurrent matrices are ``H x H`` in every
        layer; the input MVM is the host's).
    layers : int
    cycles : int
        Weight loads exposed: ``layers * (fw.cycles + bw.cycles)``.
    cycles_double_buffered : int
        The next pass's weights loaded behind the current pass (a second weight buffer):
        the first load, then each pass's compute or the next load, whichever is longer.
    double_buffer_fits : bool
        Whether a second weight buffer fits the PEs' memories (``2 x`` the busiest PE's
        words within ``weight_depth``); otherwise the variant needs a second memory per PE.
    useful_macs : int
    pes : int
    clock_hz : float
    """

    fw: PassCycles
    bw: PassCycles
    layers: int
    cycles: int
    cycles_double_buffered: int
    double_buffer_fits: bool
    useful_macs: int
    pes: int
    clock_hz: float

    @property
    def utilization(self):
        """Useful MACs / (PEs x cycles), weight loads included."""
        return self.useful_macs / (self.pes * self.cycles)

    @property
    def utilization_double_buffered(self):
        return self.useful_macs / (self.pes * self.cycles_double_buffered)

    @property
    def gflops(self):
        """``2 x useful MACs x clock / cycles`` in GFLOP/s."""
        return 2 * self.useful_macs * self.clock_hz / self.cycles / 1e9

    @property
    def seconds(self):
        return self.cycles / self.clock_hz


def training_step(config, *, schedule="mvm", pcie_gbps=PCIE_GBPS, clock_hz=CLOCK_HZ,
                  steps=None):
    """The :class:`TrainingStep` of ``config`` (its ``layers``, ``seq_len`` or ``steps``,
    ``batch``)."""
    kwargs = {"schedule": schedule, "pcie_gbps": pcie_gbps, "clock_hz": clock_hz,
              "steps": steps}
    fw, bw = pass_cycles(config, "fw", **kwargs), pass_cycles(config, "bw", **kwargs)
    passes = [fw] * config.layers + [bw] * config.layers
    buffered = passes[0].load
    for k, p in enumerate(passes):
        following = passes[k + 1].load if k + 1 < len(passes) else 0
        buffered += max(p.compute, following)
    return TrainingStep(fw=fw, bw=bw, layers=config.layers,
                        cycles=config.layers * (fw.cycles + bw.cycles),
                        cycles_double_buffered=buffered,
                        double_buffer_fits=2 * config.max_weights_per_pe <= config.weight_depth,
                        useful_macs=config.layers * (fw.useful_macs + bw.useful_macs),
                        pes=config.pes, clock_hz=clock_hz)


def predict(config, workload):
    """The engine hook: ``workload`` may hold ``steps`` (default ``config.seq_len``),
    ``schedule``, ``pcie_gbps``, ``clock_hz``. Returns ``cycles``, ``useful_macs``,
    ``utilization``, the double-buffered ones and the passes' components."""
    step = training_step(config, steps=workload.get("steps"),
                         schedule=workload.get("schedule", "mvm"),
                         pcie_gbps=workload.get("pcie_gbps", PCIE_GBPS),
                         clock_hz=workload.get("clock_hz", CLOCK_HZ))
    return {"cycles": step.cycles, "useful_macs": step.useful_macs,
            "utilization": step.utilization, "gflops": step.gflops,
            "cycles_double_buffered": step.cycles_double_buffered,
            "utilization_double_buffered": step.utilization_double_buffered,
            "double_buffer_fits": step.double_buffer_fits,
            "fw": step.fw.components(), "bw": step.bw.components()}


def f9_table(config, *, batches=(1, 2, 4), pcie_gbps=PCIE_GBPS, schedule="mvm"):
    """The paper's Fig. 9 utilization (5 layers x 1,024 LSTM cells, T = 1,600) for
    ``config`` at each batch: rows ``{batch, paper, utilization, double_buffered,
    seconds}``."""
    paper = {1: 0.828, 2: 0.880, 4: 0.925}
    rows = []
    for batch in batches:
        step = training_step(dataclasses.replace(config, batch=batch), schedule=schedule,
                             pcie_gbps=pcie_gbps)
        rows.append({"batch": batch, "paper": paper.get(batch),
                     "utilization": step.utilization,
                     "double_buffered": step.utilization_double_buffered,
                     "double_buffer_fits": step.double_buffer_fits,
                     "seconds": step.seconds, "cycles": step.cycles})
    return rows


def f9_markdown(rows):
    """:func:`f9_table`'s rows as a markdown table beside the paper's figures."""
    lines = ["| batch | paper | U | U, double-buffered | ms per training step |",
             "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['batch']} | {r['paper']:.1%} | {r['utilization']:.1%} | "
              f"{r['double_buffered']:.1%}{'' if r['double_buffer_fits'] else ' (2nd memory)'}"
              f" | {r['seconds'] * 1e3:.1f} |" for r in rows]
    return "\n".join(lines)

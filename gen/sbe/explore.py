"""Design-space exploration of the SBE: the fastest configuration of a model on a board.

For a model (``input_size``, ``hidden_size``, ``layers``, and ``hidden_sizes`` when the
layers differ: each runs padded to the largest) and a sequence length, every
configuration of

* ``pes``: multiples of 4 that divide ``4 * hidden_size`` or multiples of it, and the
  powers of two from 4 (the model's sizes padded to fit them), up to the board's DSP
  slices plus the LUT multipliers allowed (the paper's ZC706 design builds a few
  multipliers from LUTs),
* ``bus_weights``: powers of two dividing ``pes`` whose bandwidth
  ``bus_weights * operand_width / 8 * clock`` the board's off-chip memory delivers,
* ``batch``: powers of two up to ``seq_len``, ``seq_len`` itself and ``pes / bus_weights``
  (eq. 1),
* ``blocks``: every number from 1 to :data:`MAX_ANY_BLOCKS` (the columns padded to a
  whole number of blocks), and the divisors of every layer's columns beyond,

sizes that do not divide being padded with zeros (:attr:`~nnrtl.hw.sbe.SbeConfig.padded`):
the padding's cost is in the predicted cycles, the utilization counts the model's MACs,

is checked against a budget (:class:`~nnrtl.gen.dse.Budget`) of the board's DSP slices and
36 Kb block RAMs (:func:`~nnrtl.gen.sbe.resources.resource_estimate`: one DSP per PE,
those of the post-processing units, the double buffers, the BB-FIFOs unless in LUTRAM; the
PEs beyond the DSPs the budget leaves the post-processing units multiply in LUTs) and its
LUTs for LUTRAM and LUT multipliers (by default all DSPs and BRAM36 and
:data:`~nnrtl.gen.engines.LUT_SHARE` of the LUTs: the rule ``nnrtl generate`` checks,
:func:`~nnrtl.gen.engines.budget`), and an optional cap on the PEs. Parameters given in
``pinned`` take that value only. The feasible ones are ranked by
:func:`~nnrtl.gen.sbe.perf.model_cycles`, ties broken by fewer DSPs, then fewer BRAMs, then
a narrower bus and a smaller batch; the objective (:mod:`nnrtl.gen.dse`) chooses the
fastest or, with ``per-dsp``, the fewest cycles x DSPs among those within a tolerance of
the fastest. Exact cycles are computed in order of a cheap lower bound until the best
``top`` (and every configuration the tolerance admits) are certain. Every feasible
configuration is kept (:attr:`Exploration.points`) with its lower bound and, if it was
ranked, its exact cycles: predicting them all would take minutes (tens of milliseconds
each, tens of thousands of configurations for a large model), the search seconds.
"""

import dataclasses
import math
import time

from ...boards import get_board
from ...hw.bus import MAX_BUS_BITS
from ...hw.sbe.config import SbeConfig
from ..dse import Budget, check_objective, choose, describe_objective, tightest, within
from ..engines import LUT_SHARE
from ..errors import UsageError
from ..models import ModelSpec
from ..progress import Progress
from .perf import lower_bound_cycles, predict
from .resources import (ResourceEstimate, lut_multiplier_luts, post_unit_dsp,
                        resource_estimate)

__all__ = ["Candidate", "Point", "Exploration", "explore", "format_table", "check_seq_len",
           "VARIED"]

#: The parameters the exploration varies; the others are ``base``'s.
VARIED = ("pes", "batch", "blocks", "bus_weights", "post_units", "lut_multipliers")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One feasible configuration with its predicted performance.

    Attributes
    ----------
    config : SbeConfig
    cycles : int
        :func:`~nnrtl.gen.sbe.perf.model_cycles` for ``seq_len`` steps.
    utilization : float
    gops : float
        At the exploration's clock.
    resources : ResourceEstimate
    """

    config: SbeConfig
    cycles: int
    utilization: float
    gops: float
    resources: ResourceEstimate

    def rank_key(self):
        """Sort key: fewer cycles, then fewer DSPs, BRAMs, bus words, batch."""
        c = self.config
        return (self.cycles, self.resources.dsp, self.resources.bram36, c.bus_weights,
                c.batch, c.blocks, c.pes)


@dataclasses.dataclass(frozen=True)
class Point:
    """One feasible configuration, ranked or not.

    Attributes
    ----------
    config : SbeConfig
    resources : ResourceEstimate
    lower_bound : int
        :func:`~nnrtl.gen.sbe.perf.lower_bound_cycles` for ``seq_len`` steps: no
        configuration takes fewer cycles, most take more (it leaves out the pipeline's
        latency, the h stalls and the exposed loads).
    cycles : int or None
        :func:`~nnrtl.gen.sbe.perf.model_cycles` if the configuration was ranked exactly,
        ``None`` if its bound showed it could not be among the best ``top``.
    """

    config: SbeConfig
    resources: ResourceEstimate
    lower_bound: int
    cycles: int | None


@dataclasses.dataclass(frozen=True)
class Exploration:
    """What :func:`explore` returns.

    Attributes
    ----------
    model : ModelSpec
    board : str
    clock_hz : float
    seq_len : int
    candidates : tuple of Candidate
        The best ``top`` feasible configurations, fastest first.
    feasible : int
        Configurations within the budget.
    considered : int
        Configurations enumerated.
    points : tuple of Point
        Every feasible configuration, in order of its lower bound (then fewer DSPs, BRAMs).
    chosen : Candidate
        The objective's choice.
    chosen_rank : int
        Its rank by cycles (1: the fastest); above ``len(candidates)`` when the objective
        chose a slower design than the ``top`` listed.
    budget : Budget
    limits : dict
        The budget on this board: ``dsp``, ``bram36``, ``lut``.
    objective : str
    tolerance : float
    pinned : dict
        The parameters given a fixed value.
    """

    model: ModelSpec
    board: str
    clock_hz: float
    seq_len: int
    candidates: tuple
    feasible: int
    considered: int
    points: tuple
    chosen: Candidate = None
    chosen_rank: int = 1
    budget: Budget = Budget()
    limits: dict = dataclasses.field(default_factory=dict)
    objective: str = "fastest"
    tolerance: float = 0.0
    pinned: dict = dataclasses.field(default_factory=dict)

    @property
    def best(self):
        """The chosen :class:`Candidate` (the objective's; with ``fastest``, the
        fastest)."""
        return self.candidates[0] if self.chosen is None else self.chosen

    @property
    def fastest(self):
        """The fastest feasible :class:`Candidate`."""
        return self.candidates[0]

    @property
    def listed(self):
        """``[(rank, candidate)]``: the ``top`` candidates and the chosen one when it is
        not among them."""
        rows = list(enumerate(self.candidates, 1))
        if self.chosen_rank > len(self.candidates):
            rows.append((self.chosen_rank, self.chosen))
        return rows

    def limit(self, candidate):
        """``(name, share)``: the budget ``candidate`` is nearest to
        (:func:`~nnrtl.gen.dse.tightest`): ``dsp``, ``bram36``, ``lut`` or ``pes``."""
        return tightest(candidate.resources.needs(), self.limits,
                        pes=candidate.config.pes, max_pes=self.budget.max_pes)


#: Block numbers up to this one are all considered, whether or not they divide the
#: columns; beyond it only the divisors (every number would multiply the search).
MAX_ANY_BLOCKS = 64


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _powers_of_two(limit):
    return [1 << k for k in range(limit.bit_length()) if 1 << k <= limit]


def check_seq_len(seq_len, *, name="seq_len", base=None):
    """:class:`UsageError` unless ``seq_len`` is a positive integer of steps one run of the
    engine holds: its ``steps`` register has :attr:`SbeConfig.step_bits` bits (of ``base``,
    default ``SbeConfig()``). The exploration's cost does not depend on it (the
    performance model is in closed form past the first batches)."""
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len <= 0:
        raise UsageError(f"{name} must be a positive integer, not {seq_len!r}")
    bits = (SbeConfig() if base is None else base).step_bits
    if seq_len >= 1 << bits:
        raise UsageError(f"{name} ({seq_len}) is longer than one run of the SBE: its steps "
                         f"register has {bits} bits (SbeConfig.step_bits), so at most "
                         f"{(1 << bits) - 1} steps")


def _board(board):
    if isinstance(board, str):
        try:
            return get_board(board)
        except (TypeError, ValueError) as error:
            raise UsageError(str(error)) from None
    return board


def explore(model, board, *, seq_len, clock_hz=None, base=None, post_units=4,
            dram_efficiency=1.0, lut_share=LUT_SHARE, top=10, log=None, budget=None,
            pinned=None, objective="fastest", tolerance=None):
    """Enumerate, check and rank SBE configurations of ``model`` on ``board``.

    Parameters
    ----------
    model : ModelSpec or (input_size, hidden_size, layers)
    board : str or platform class
        A board name of :func:`nnrtl.boards.get_board` or its platform class.
    seq_len : int
        Steps per sequence to optimise for.
    clock_hz : float, optional
        Engine clock (default: the board's default clock).
    base : SbeConfig, optional
        Source of the other fields (widths, fraction bits, ``batch_norm``).
    post_units : int
        Post-processing units wanted; the largest power of two dividing the units per pass
        and not above it is used.
    dram_efficiency : float
        Share of the board's peak off-chip bandwidth the DMA may count on.
    lut_share : float
        Share of the board's LUTs that LUTRAM BB-FIFOs and LUT multipliers may take, the
        rest left for the logic the resource model does not count: the rule ``nnrtl
        generate`` checks (:func:`~nnrtl.gen.engines.check_fit`), with its default
        (:data:`~nnrtl.gen.engines.LUT_SHARE`, where the value is argued); without
        ``budget``.
    top : int
        Candidates ranked exactly and returned.
    budget : Budget, optional
        Shares of the board's resources and a PE cap (default: all DSPs and BRAM36,
        ``lut_share`` of the LUTs, no cap).
    pinned : dict, optional
        Values of :data:`VARIED` parameters to keep (``post_units`` then exactly, not the
        largest power of two that divides; ``lut_multipliers`` as given); the others are
        explored.
    objective : str
        ``"fastest"`` or ``"per-dsp"`` (:func:`~nnrtl.gen.dse.choose`).
    tolerance : float, optional
        Of ``per-dsp`` (default :data:`~nnrtl.gen.dse.DEFAULT_TOLERANCE`).
    log : callable, optional
        Progress (:class:`~nnrtl.gen.progress.Progress`: a bar when ``log`` is
        :data:`~nnrtl.gen.progress.progress` on a terminal, lines every few seconds
        otherwise) while the configurations are checked against the board and while they
        are ranked, a line when they are checked and one at the end. (The cost of the
        ranking does not depend on ``seq_len``: :func:`~.perf.predict` is in closed form
        past the first batches.)

    Returns
    -------
    Exploration

    Raises
    ------
    UsageError
        Unknown board, ``seq_len`` or ``top`` not a positive integer, a bad budget or
        objective, a pinned bus wider than the board's off-chip bandwidth, or no
        configuration fits the budget (naming the smallest design's needs).
    """
    started = time.monotonic()
    check_seq_len(seq_len, base=base)
    if not isinstance(top, int) or isinstance(top, bool) or top <= 0:
        raise UsageError(f"top must be a positive integer, not {top!r}")
    spec = model if isinstance(model, ModelSpec) else ModelSpec(*model)
    budget = Budget(lut_share=lut_share) if budget is None else budget
    objective, tolerance = check_objective(objective, tolerance)
    pinned = dict(pinned or {})
    unknown = sorted(set(pinned) - set(VARIED))
    if unknown:
        raise UsageError(f"{unknown[0]} is not a parameter the exploration varies; "
                         f"those are {', '.join(VARIED)}")
    platform = _board(board)
    capacity = platform.capacity
    if clock_hz is None:
        from ..engines import board_clock_hz
        clock_hz = board_clock_hz(platform)
    base = SbeConfig() if base is None else base
    hidden, rows = spec.hidden_size, 4 * spec.hidden_size
    ow = base.operand_width
    widths = {spec.input_size + hidden} | ({2 * hidden} if spec.layers > 1 else set())
    columns = math.gcd(*widths)
    limits = budget.limits(capacity)
    limits = {resource: limits[resource] for resource in ("dsp", "bram36", "lut")}
    family = capacity.yosys_family
    post_dsp = post_unit_dsp(base, family)           # DSPs of one post-processing unit
    max_pes = limits["dsp"] + int(limits["lut"] // lut_multiplier_luts(ow))
    if budget.max_pes is not None:
        max_pes = min(max_pes, budget.max_pes)
    if "pes" in pinned:
        pes_options = [pinned["pes"]]
        if budget.max_pes is not None and pinned["pes"] > budget.max_pes:
            raise UsageError(f"pes={pinned['pes']} is above the PE cap (--max-pes "
                             f"{budget.max_pes})")
    else:
        pes_options = {p for p in range(4, min(rows, max_pes) + 1, 4) if rows % p == 0}
        pes_options |= {rows * m for m in range(2, max_pes // rows + 1)}
        pes_options |= {p for p in _powers_of_two(max_pes) if p >= 4}
        pes_options = sorted(pes_options)
    bus_options = _bus_options(pinned, ow, clock_hz, platform, dram_efficiency)
    shapes = []                                     # (pes, post_units, bus, batch)
    for pes in pes_options:
        units = pes // 4                 # with the hidden units padded to fill a pass
        pp = pinned.get("post_units") or max(
            d for d in _powers_of_two(max(1, post_units)) if units % d == 0)
        for bus in bus_options:
            if pes % bus:
                continue
            batches = set(_powers_of_two(seq_len)) | {seq_len}
            if pes % bus == 0 and pes // bus <= seq_len:
                batches.add(pes // bus)
            if "batch" in pinned:
                batches = {pinned["batch"]}
            shapes += [(pes, pp, bus, batch) for batch in sorted(batches)]
    blockings = sorted(set(range(1, min(max(widths), MAX_ANY_BLOCKS) + 1))
                       | set(_divisors(columns)))
    if "blocks" in pinned:
        blockings = [pinned["blocks"]]
    with Progress(f"explore, checking against {platform.name}",
                  total=len(shapes) * len(blockings), unit="configurations", log=log) as bar:
        considered, feasible, smallest = _check(shapes, blockings, spec, base, seq_len,
                                                post_dsp, limits, family, pinned, bar)
    if not feasible:
        need = (f"the smallest needs {smallest[0]} BRAM36 and {smallest[1]} DSP"
                if smallest else "no configuration is valid")
        raise UsageError(f"no SBE configuration of LSTM {spec.input_size}x{hidden}x"
                         f"{spec.layers}{_pins_text(pinned)} fits {platform.name} "
                         f"({limits['bram36']} BRAM36, {limits['dsp']} DSP): {need}")
    feasible.sort(key=lambda item: (item[0], item[2].dsp, item[2].bram36))
    if log:
        log(f"explore: {len(feasible)} of {considered} configurations fit {platform.name}; "
            f"ranking them by predicted cycles")
    ranked, exact = [], {}
    with Progress("explore, ranking by predicted cycles", unit="ranked", log=log) as bar:
        for index, (bound, config, estimate) in enumerate(feasible):
            if len(ranked) >= top and bound > ranked[top - 1].cycles and \
                    not within(bound, ranked[0].cycles, tolerance):
                break
            prediction = predict(config, seq_len=seq_len)
            exact[index] = prediction.cycles
            ranked.append(Candidate(config, prediction.cycles, prediction.utilization,
                                    prediction.gops(clock_hz), estimate))
            ranked.sort(key=Candidate.rank_key)
            bar.advance(status=f"the best so far takes {ranked[0].cycles:,} cycles")
    if log:
        log(f"explore: {len(exact)} ranked by exact cycles (the others cannot beat the best "
            f"{min(top, len(exact))}) in {time.monotonic() - started:.1f} s")
    points = tuple(Point(config, estimate, bound, exact.get(index))
                   for index, (bound, config, estimate) in enumerate(feasible))
    chosen = choose(ranked, objective, tolerance, cycles=lambda c: c.cycles,
                    dsp=lambda c: c.resources.dsp)
    return Exploration(model=spec, board=platform.name, clock_hz=clock_hz, seq_len=seq_len,
                       candidates=tuple(ranked[:top]), feasible=len(feasible),
                       considered=considered, points=points, chosen=chosen,
                       chosen_rank=ranked.index(chosen) + 1, budget=budget, limits=limits,
                       objective=objective, tolerance=tolerance, pinned=pinned)


def _pins_text(pinned):
    return (" with " + ", ".join(f"{name}={value}" for name, value in pinned.items())
            if pinned else "")


def _bus_options(pinned, ow, clock_hz, platform, dram_efficiency):
    """The weight bus widths (words a cycle) the board's off-chip memory delivers at
    ``clock_hz``; the pinned one alone, refused when it does not."""
    capacity = platform.capacity
    bandwidth = dram_efficiency * capacity.offchip_gbps * 1e9
    bus_options = [n for n in _powers_of_two(MAX_BUS_BITS // ow)
                   if n * ow / 8 * clock_hz <= bandwidth]
    if "bus_weights" in pinned:
        bus = pinned["bus_weights"]
        if bus * ow / 8 * clock_hz > bandwidth:
            raise UsageError(f"bus_weights={bus}: {bus} {ow}-bit weights a cycle at "
                             f"{clock_hz / 1e6:g} MHz need {bus * ow / 8 * clock_hz / 1e9:g} "
                             f"GB/s, more than {platform.name}'s off-chip "
                             f"{capacity.offchip_gbps} GB/s")
        return [bus]
    if not bus_options:
        raise UsageError(f"{platform.name}'s off-chip bandwidth "
                         f"({capacity.offchip_gbps} GB/s) cannot deliver one "
                         f"{ow}-bit weight per cycle at {clock_hz / 1e6:g} MHz")
    return bus_options


def _check(shapes, blockings, spec, base, seq_len, post_dsp, limits, family, pinned, bar):
    """Every configuration of ``shapes`` x ``blockings`` checked against the budget
    ``limits``: ``(considered, [(lower bound, config, estimate) of the feasible ones],
    smallest)``, ``smallest`` the ``(bram36, dsp, config)`` of the least BRAM-hungry valid
    one. The PEs beyond the DSPs the budget leaves multiply in LUTs unless ``pinned``
    sets ``lut_multipliers``."""
    considered, feasible, smallest = 0, [], None
    for pes, pp, bus, batch in shapes:
        block_sizes, least_hidden = set(), None
        for blocks in blockings:
            considered += 1
            try:
                config = dataclasses.replace(
                    base, input_size=spec.input_size, hidden_size=spec.hidden_size,
                    hidden_sizes=spec.hidden_sizes, layers=spec.layers, seq_len=seq_len,
                    pes=pes, batch=batch,
                    blocks=blocks, bus_weights=bus, post_units=pp,
                    lut_multipliers=pinned.get("lut_multipliers", min(pes, max(
                        0, pes - (limits["dsp"] - pp * post_dsp)))))
            except ValueError:
                continue
            # A block number that pads the hidden units beyond what the PE array needs
            # (blocks = 1) costs whole rows; more blocks of a padded size a smaller
            # number already gives only add zero columns: both are left out.
            size = tuple(shape.block_columns for shape in config.layer_shapes)
            if least_hidden is None:
                least_hidden = config.padded_hidden_size
            if config.padded_hidden_size > least_hidden or size in block_sizes:
                continue
            block_sizes.add(size)
            estimate = resource_estimate(config, family)
            if smallest is None or (estimate.bram36, estimate.dsp) < smallest[:2]:
                smallest = (estimate.bram36, estimate.dsp, config)
            if all(amount <= limits[resource]
                   for resource, amount in estimate.needs().items()):
                feasible.append((lower_bound_cycles(config), config, estimate))
        bar.advance(len(blockings))
    return considered, feasible, smallest


def format_table(exploration):
    """The ranked candidates of an :class:`Exploration` as a text table: a line on the
    model and board, one on the objective, one on the budget (and the pinned parameters),
    then the ``top`` candidates by cycles and the chosen one when it is not among them,
    marked ``*`` after its rank. ``+fastest`` is a candidate's cycles beyond the fastest's;
    ``limit`` the budget it is nearest to and its share of it
    (:meth:`Exploration.limit`)."""
    e = exploration
    hidden = "/".join(map(str, e.model.hidden_sizes)) or e.model.hidden_size
    capacity = _board(e.board).capacity
    lines = [f"SBE on {e.board} at {e.clock_hz / 1e6:g} MHz: LSTM {e.model.input_size} inputs, "
             f"{hidden} hidden, {e.model.layers} layer(s), seq_len {e.seq_len}; "
             f"{e.feasible} of {e.considered} configurations fit",
             describe_objective(e.objective, e.tolerance),
             e.budget.describe(capacity) + (f"; pinned: {_pins_text(e.pinned)[6:]}"
                                            if e.pinned else ""),
             f"{'#':>3} {'pes':>5} {'batch':>5} {'blocks':>6} {'bus':>4} {'case':>4} "
             f"{'cycles':>11} {'+fastest':>8} {'util':>6} {'GOPS':>7} {'DSP':>5} "
             f"{'BRAM36':>6} {'eq.7':>6} {'LUTs':>7} {'limit':>11}"]
    fastest = e.fastest.cycles
    for rank, candidate in e.listed:
        c, r = candidate.config, candidate.resources
        if rank > len(e.candidates):
            lines.append(f"{'...':>3}")
        mark = "*" if rank == e.chosen_rank else " "
        name, share = e.limit(candidate)
        lines.append(f"{rank:>3}{mark}{c.pes:>5} {c.batch:>5} {c.blocks:>6} {c.bus_weights:>4} "
                     f"{max(c.cases):>4} {candidate.cycles:>11,} "
                     f"{candidate.cycles / fastest - 1:>+8.1%} {candidate.utilization:>6.1%} "
                     f"{candidate.gops:>7.1f} {r.dsp:>5} {r.bram36:>6} {r.bram_eq7:>6.0f} "
                     f"{r.luts:>7,} {name:>6} {share:>4.0%}")
    return "\n".join(lines)

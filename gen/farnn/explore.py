"""Design-space exploration of FARNN: ``chain_length``, ``weight_depth`` and ``split`` for a
workload on a board.

For a workload (``cell``, ``input_size``, ``hidden_size``, ``proj_size``, ``layers``,
``seq_len``, ``batch``) every configuration of

* ``weight_depth``: 4096 and 8192 words per PE (:data:`~nnrtl.hw.farnn.WEIGHT_DEPTHS`),
* ``chain_length``: 1 up to the longest whose engine the board's DSPs, LUTs and memories
  hold,
* ``split``: every divisor of ``chains`` (the configuration's default ``chains``, 16: the
  512-bit weight port),

whose weights fit its PEs' memories (:attr:`~nnrtl.hw.farnn.FarnnConfig.fits`, FW and BW)
is checked against a budget (:class:`~nnrtl.gen.dse.Budget`; by default all DSPs, URAMs
and BRAM36 and :data:`~nnrtl.gen.engines.LUT_SHARE` of the LUTs: the rule ``nnrtl
generate`` checks) by :func:`~nnrtl.gen.farnn.resources.resource_estimate` and an
optional cap on the PEs, and ranked by the cycle model's training step
(:func:`~nnrtl.gen.farnn.perf.training_step`: FW and BW of every layer, weight loads
exposed), ties broken by fewer PEs, fewer LUTs, the smaller depth, the smaller split. A
split that changes nothing (no partial last round) ties with ``split = 1`` and loses. The
objective (:mod:`nnrtl.gen.dse`) chooses the fastest or, with ``per-dsp``, the fewest
cycles x DSPs among those within a tolerance of the fastest. Every feasible point is kept
(:attr:`Exploration.points`) for the report's plot.
"""

import dataclasses
import itertools

from ...hw.farnn.config import WEIGHT_DEPTHS, FarnnConfig
from ..dse import Budget, check_objective, choose, describe_objective, tightest
from ..engines import LUT_SHARE, budget, get_board_or_usage_error
from ..errors import UsageError
from .perf import CLOCK_HZ, PCIE_GBPS, training_step
from .resources import resource_estimate

__all__ = ["Candidate", "Exploration", "explore", "explore_request", "fits", "table2",
           "WORKLOAD", "VARIED", "PAPER_WORKLOADS"]

#: The workload's parameters (the model and how it is trained).
WORKLOAD = ("cell", "input_size", "hidden_size", "proj_size", "layers", "seq_len", "batch")
#: The parameters the exploration chooses.
VARIED = ("chain_length", "weight_depth", "split", "dsp_usage")
#: The hardware parameters ``--param`` may fix.
HARDWARE = ("chain_length", "chains", "weight_depth", "split", "adder_stages",
            "multiplier_stages", "dsp_usage")
#: The DSP-usage levels the exploration tries (:attr:`FarnnConfig.dsp_usage`), preferred
#: first on a tie: ``"max"`` where it buys a faster design (fewer LUTs a PE, so more
#: PEs), ``"none"`` where nothing else fits the DSP slices.
DSP_USAGES = ("some", "max", "none")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One feasible configuration with its predicted training step.

    Attributes
    ----------
    config : FarnnConfig
    cycles : int
        FPGA cycles of a training step, weight loads exposed.
    cycles_double_buffered : int
    utilization : float
        Useful MACs / (PEs x cycles).
    seconds : float
        At the exploration's clock.
    needs : dict
        ``dsp``, ``lut``, ``uram``, ``bram36``.
    """

    config: FarnnConfig
    cycles: int
    cycles_double_buffered: int
    utilization: float
    seconds: float
    needs: dict

    @property
    def utilization_double_buffered(self):
        """The utilization with the next pass's weights loaded behind the current one."""
        return self.utilization * self.cycles / self.cycles_double_buffered

    def rank_key(self):
        c = self.config
        # more DSP usage (or none) only where it buys a faster design
        return (self.cycles, c.pes, DSP_USAGES.index(c.dsp_usage), self.needs["lut"],
                c.weight_depth, c.split)


@dataclasses.dataclass(frozen=True)
class Exploration:
    """What :func:`explore` returns: :meth:`table` and :meth:`as_json` (the engine's
    ``explore`` hook).

    Attributes
    ----------
    workload : FarnnConfig
        The configuration the workload came in (its hardware fields are not used).
    board : str
    clock_hz, pcie_gbps : float
    limits : dict
        The budgets applied.
    considered : int
        Configurations within the DSP and LUT budgets whose weights fit their PEs (those
        the URAM or BRAM36 then refuse included).
    points : tuple of Candidate
        Every feasible configuration, fastest first.
    top : int
    budget : Budget
    objective : str
    tolerance : float
    pinned : tuple of str
        The hardware parameters given a fixed value.
    """

    workload: FarnnConfig
    board: str
    clock_hz: float
    pcie_gbps: float
    limits: dict
    considered: int
    points: tuple
    top: int = 10
    budget: Budget = Budget()
    objective: str = "fastest"
    tolerance: float = 0.0
    pinned: tuple = ()

    @property
    def candidates(self):
        """The best ``top`` points."""
        return self.points[:self.top]

    @property
    def fastest(self):
        """The fastest feasible :class:`Candidate`."""
        return self.points[0]

    @property
    def best(self):
        """The chosen :class:`Candidate` (the objective's; with ``fastest``, the
        fastest)."""
        return choose(self.points, self.objective, self.tolerance,
                      cycles=lambda c: c.cycles, dsp=lambda c: c.needs["dsp"])

    @property
    def chosen_rank(self):
        """The chosen candidate's rank by cycles (1: the fastest)."""
        return self.points.index(self.best) + 1

    @property
    def listed(self):
        """``[(rank, candidate)]``: the ``top`` candidates and the chosen one when it is
        not among them."""
        rows = list(enumerate(self.candidates, 1))
        if self.chosen_rank > self.top:
            rows.append((self.chosen_rank, self.best))
        return rows

    def limit(self, candidate):
        """``(name, share)``: the budget ``candidate`` is nearest to
        (:func:`~nnrtl.gen.dse.tightest`)."""
        return tightest(candidate.needs, self.limits, pes=candidate.config.pes,
                        max_pes=self.budget.max_pes)

    def table(self):
        """The best ``top`` candidates as a text table after a line on the workload, one
        on the objective and one on the budget; the chosen one marked ``*`` (and listed
        after them when it is not among them); ``limit``: the budget a candidate is
        nearest to, and its share of it."""
        w = self.workload
        proj = f", projection {w.proj_size}" if w.proj_size else ""
        lines = [f"FARNN on {self.board} at {self.clock_hz / 1e6:g} MHz, PCIe "
                 f"{self.pcie_gbps:g} GB/s: {w.cell.upper()} {w.input_size} inputs, "
                 f"{w.hidden_size} cells{proj}, {w.layers} layer(s), seq_len {w.seq_len}, "
                 f"batch {w.batch}; {len(self.points)} of {self.considered} configurations "
                 f"fit",
                 describe_objective(self.objective, self.tolerance),
                 self.budget.describe(_board(self.board).capacity)
                 + (f"; pinned: {', '.join(f'{n}={getattr(w, n)}' for n in self.pinned)}"
                    if self.pinned else ""),
                 f"{'#':>3} {'L':>4} {'PEs':>5} {'depth':>5} {'split':>5} {'S fw':>4} "
                 f"{'cycles':>12} {'+fastest':>8} {'util':>6} {'util db':>7} {'ms':>8} "
                 f"{'DSP':>5} {'LUT':>9} {'URAM':>5} {'BRAM36':>6} {'limit':>11}"]
        chosen, fastest = self.chosen_rank, self.fastest.cycles
        for rank, c in self.listed:
            cfg, n = c.config, c.needs
            if rank > self.top:
                lines.append(f"{'...':>3}")
            mark = "*" if rank == chosen else " "
            name, share = self.limit(c)
            lines.append(
                f"{rank:>3}{mark}{cfg.chain_length:>3} {cfg.pes:>5} {cfg.weight_depth:>5} "
                f"{cfg.split:>5} {cfg.slices('fw'):>4} {c.cycles:>12,} "
                f"{c.cycles / fastest - 1:>+8.1%} {c.utilization:>6.1%} "
                f"{c.utilization_double_buffered:>7.1%} "
                f"{c.seconds * 1e3:>8.2f} {n['dsp']:>5} {n['lut']:>9,} {n['uram']:>5} "
                f"{n['bram36']:>6} {name:>6} {share:>4.0%}")
        lines += ["", f"* chosen: chain_length={self.best.config.chain_length} "
                      f"weight_depth={self.best.config.weight_depth} "
                      f"split={self.best.config.split}"]
        return "\n".join(lines)

    def as_json(self):
        """JSON: the workload, the objective, the budget (``budget``; ``limits``, its
        amounts), ``chosen`` (the configuration's fields), the ranked ``candidates`` (the
        chosen one ``"chosen": true``, each with the budget it is nearest to, ``limit``)
        and every feasible point (``feasible_points``, for the plot)."""
        chosen = self.chosen_rank

        def point(c, rank=None):
            extra = {}
            if rank:
                name, share = self.limit(c)
                extra = {"rank": rank, "chosen": rank == chosen,
                         "vs_fastest": c.cycles / self.fastest.cycles - 1,
                         "limit": {"budget": name, "share": share}}
            return {**extra, **{name: getattr(c.config, name) for name in VARIED},
                    "pes": c.config.pes, "cycles": c.cycles,
                    "cycles_double_buffered": c.cycles_double_buffered,
                    "utilization": c.utilization, "seconds": c.seconds, **c.needs}
        return {
            "engine": "farnn", "board": self.board, "clock_hz": self.clock_hz,
            "pcie_gbps": self.pcie_gbps, "limits": self.limits,
            "objective": {"name": self.objective, "tolerance": self.tolerance,
                          "chosen_rank": chosen},
            "budget": self.budget.as_json(_board(self.board).capacity),
            "pinned": {name: getattr(self.workload, name) for name in self.pinned},
            "workload": {name: getattr(self.workload, name) for name in WORKLOAD},
            "considered": self.considered, "feasible": len(self.points),
            "chosen": dataclasses.asdict(self.best.config),
            "candidates": [point(c, rank) for rank, c in self.listed],
            "feasible_points": [point(c) for c in self.points],
        }


def _board(board):
    """The platform class of ``board``, a name or the class itself."""
    return get_board_or_usage_error(board) if isinstance(board, str) else board


def fits(config, board, *, lut_share=LUT_SHARE):
    """``(fits, needs, limits)`` of ``config`` on ``board`` under the fit rule
    (:func:`~nnrtl.gen.engines.budget`)."""
    capacity = _board(board).capacity
    needs = resource_estimate(config, capacity.yosys_family).needs()
    limits = {key: budget(capacity, key, lut_share=lut_share) for key in needs}
    return all(needs[key] <= limits[key] for key in needs), needs, limits


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _nothing_fits(workload, platform, depths, splits, dsp_usages, limits, cap=None):
    """The error text: the shortest chains whose weights fit, and what they need (with the
    fewest LUTs)."""
    w, family = workload, platform.capacity.yosys_family
    found = []
    for depth in depths:
        for split in splits:
            for length in range(1, 4097):
                config = dataclasses.replace(w, weight_depth=depth, split=split,
                                             chain_length=length)
                if config.fits:
                    for level in dsp_usages:
                        config = dataclasses.replace(config, dsp_usage=level)
                        found.append((config.pes, resource_estimate(config, family).needs(),
                                      length, depth, split, level))
                    break
    head = (f"no FARNN configuration of {w.cell.upper()} {w.hidden_size} cells (proj_size "
            f"{w.proj_size}) fits {platform.name} (budgets {limits}"
            + ("" if cap is None else f", at most {cap} PEs") + ")")
    if not found:
        return f"{head}: no chain length holds its weights"
    pes, needs, length, depth, split, level = min(found,
                                                  key=lambda item: (item[0], item[1]["lut"]))
    over = ", ".join([f"{key} {needs[key]} > {limits[key]}" for key in needs
                      if needs[key] > limits[key]]
                     + ([f"{pes} PEs > {cap}"] if cap is not None and pes > cap else []))
    return (f"{head}: its weights need at least chain_length {length} (weight_depth {depth}, "
            f"split {split}, dsp_usage {level}, {pes} PEs), which needs {over}")


def core_clock_hz(platform):
    """The engine's clock on ``platform`` (a board class): the paper's 400 MHz
    (:data:`~.perf.CLOCK_HZ`) on UltraScale+, where nearest-neighbour wiring is its stated
    reason for that clock (Sec. 5.1.2); on 7-series the board's default clock (the paper
    gives no figure there)."""
    if platform.capacity.yosys_family == "xcup":
        return CLOCK_HZ
    from ..engines import board_clock_hz
    return board_clock_hz(platform)


def explore(workload, board, *, depths=WEIGHT_DEPTHS, splits=None, lengths=None,
            dsp_usages=DSP_USAGES, pcie_gbps=PCIE_GBPS, clock_hz=None, lut_share=LUT_SHARE, top=10,
            budget=None, objective="fastest", tolerance=None, pinned=()):
    """Enumerate, check and rank FARNN configurations for ``workload`` (a
    :class:`FarnnConfig` whose :data:`WORKLOAD` fields are used) on ``board``.

    ``depths``, ``splits``, ``lengths`` and ``dsp_usages`` restrict the search (default:
    both depths, every divisor of ``chains``, every chain length, every DSP-usage level;
    a level other than ``"some"`` is chosen only where it gives a faster design). ``budget`` (a :class:`~nnrtl.gen.dse.
    Budget`; default ``lut_share`` of the LUTs and all of the rest, no PE cap), ``objective``
    and ``tolerance`` (:func:`~nnrtl.gen.dse.choose`) choose the design; ``pinned`` names
    the hardware parameters the caller fixed (for the report). Raises :class:`UsageError`
    when nothing fits, naming the smallest design's needs and the budget."""
    if not isinstance(workload, FarnnConfig):
        raise UsageError(f"workload must be a FarnnConfig, not {workload!r}")
    if not isinstance(top, int) or isinstance(top, bool) or top <= 0:
        raise UsageError(f"top must be a positive integer, not {top!r}")
    budget = Budget(lut_share=lut_share) if budget is None else budget
    objective, tolerance = check_objective(objective, tolerance)
    platform = _board(board)
    clock_hz = core_clock_hz(platform) if clock_hz is None else clock_hz
    capacity = platform.capacity
    family = capacity.yosys_family
    limits = budget.limits(capacity)
    limits = {key: limits[key] for key in ("dsp", "lut", "uram", "bram36")}
    cap = budget.max_pes
    splits = _divisors(workload.chains) if splits is None else list(splits)
    points, considered = [], 0
    for depth, split, level in itertools.product(depths, splits, dsp_usages):
        length = 0
        while True:
            length += 1
            if lengths is not None and length > max(lengths):
                break
            config = dataclasses.replace(workload, weight_depth=depth, split=split,
                                         chain_length=length, dsp_usage=level)
            needs = resource_estimate(config, family).needs()
            if any(needs[key] > limits[key] for key in ("dsp", "lut")) or \
                    (cap is not None and config.pes > cap):
                break               # longer chains need more still
            if lengths is not None and length not in lengths:
                continue
            if not config.fits:
                continue
            considered += 1
            if any(needs[key] > limits[key] for key in needs):
                continue
            step = training_step(config, pcie_gbps=pcie_gbps, clock_hz=clock_hz)
            points.append(Candidate(config, step.cycles, step.cycles_double_buffered,
                                    step.utilization, step.seconds, needs))
    if not points:
        raise UsageError(_nothing_fits(workload, platform, depths, splits, dsp_usages, limits,
                                       cap))
    points.sort(key=Candidate.rank_key)
    return Exploration(workload=workload, board=platform.name, clock_hz=clock_hz,
                       pcie_gbps=pcie_gbps, limits=limits, considered=considered,
                       points=tuple(points), top=top, budget=budget, objective=objective,
                       tolerance=tolerance, pinned=tuple(pinned))


def explore_request(request):
    """The engine's ``explore`` hook: the workload from ``--model`` (an LSTM or GRU
    network file: its cell, sizes and layers) or from ``--param`` (``cell``,
    ``input_size``, ``hidden_size``, ``proj_size``, ``layers``, ``batch``), ``--seq-len``
    for ``seq_len``; hardware parameters given with ``--param`` (with or without a model
    file) are kept fixed (``chain_length``, ``weight_depth`` and ``split`` restrict the
    search; ``chains`` and the pipeline depths are the workload's); the request's budget
    and objective."""
    from ..params import parse_params
    from .trainer import _workload_sizes

    budget_ = Budget.of(request)          # bad shares before reading anything
    given = {item.partition("=")[0].strip() for item in request.params}
    base = FarnnConfig(chain_length=1, split=1)
    if request.model is not None:
        from ..models import load_network
        network = load_network(request.model)
        cell, inputs, hidden, proj = _workload_sizes(network)
        for name in sorted(given & {"cell", "input_size", "hidden_size", "proj_size",
                                    "layers"}):
            raise UsageError(f"parameter {name} comes from the model; do not give it with "
                             f"--model")
        base = dataclasses.replace(base, cell=cell, input_size=inputs, hidden_size=hidden,
                                   proj_size=proj,
                                   layers=len(network.layers))
    elif not {"input_size", "hidden_size"} <= given:
        raise UsageError("explore farnn needs --model FILE, or --param input_size=N "
                         "--param hidden_size=N [--param cell=lstm|gru --param layers=N "
                         "--param batch=N]")
    workload = parse_params(FarnnConfig, request.params, base=base)
    if request.seq_len is not None:
        workload = dataclasses.replace(workload, seq_len=request.seq_len)
    return explore(workload, request.board,
                   depths=(workload.weight_depth,) if "weight_depth" in given
                   else WEIGHT_DEPTHS,
                   splits=(workload.split,) if "split" in given else None,
                   lengths=(workload.chain_length,) if "chain_length" in given else None,
                   dsp_usages=((workload.dsp_usage,) if "dsp_usage" in given
                               else DSP_USAGES),
                   top=request.top, budget=budget_, objective=request.objective,
                   tolerance=request.tolerance,
                   pinned=[name for name in HARDWARE if name in given])


#: The paper's Fig. 7-9 workloads: 5 layers, T = 1,600, batch 1.
PAPER_WORKLOADS = {"lstm": FarnnConfig(cell="lstm", input_size=1024, hidden_size=1024),
                   "gru": FarnnConfig(cell="gru", input_size=1280, hidden_size=1280)}


def table2(boards=("vu9p", "vcu128")):
    """The paper's Table 2 analogue: the exploration's design for each of
    :data:`PAPER_WORKLOADS` on each board. Returns ``(rows, markdown)``."""
    rows = []
    for board in boards:
        for cell, workload in PAPER_WORKLOADS.items():
            best = explore(workload, board).best
            c = best.config
            rows.append({"board": board, "cell": cell, "cells": c.hidden_size,
                         "chain_length": c.chain_length, "pes": c.pes,
                         "weight_depth": c.weight_depth, "split": c.split,
                         "slices_fw": c.slices("fw"), "cycles": best.cycles,
                         "utilization": best.utilization, **best.needs})
    lines = ["| board | cell | cells | L | PEs | depth | split | S | U | DSP | LUT | URAM "
             "| BRAM36 |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['board']} | {r['cell']} | {r['cells']} | {r['chain_length']} | "
              f"{r['pes']} | {r['weight_depth']} | {r['split']} | {r['slices_fw']} | "
              f"{r['utilization']:.1%} | {r['dsp']} | {r['lut']:,} | {r['uram']} | "
              f"{r['bram36']} |" for r in rows]
    return rows, "\n".join(lines)

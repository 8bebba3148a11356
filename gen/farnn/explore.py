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
is checked against the board by :func:`~nnrtl.gen.farnn.resources.resource_estimate` under
:func:`~nnrtl.gen.engines.budget` (all DSPs, URAMs and BRAM36, :data:`~nnrtl.gen.engines.
LUT_SHARE` of the LUTs: the rule ``nnrtl generate`` checks) and ranked by the cycle model's
training step (:func:`~nnrtl.gen.farnn.perf.training_step`: FW and BW of every layer, weight
loads exposed), ties broken by fewer PEs, fewer LUTs, the smaller depth, the smaller split.
A split that changes nothing (no partial last round) ties with ``split = 1`` and loses.
Every feasible point is kept (:attr:`Exploration.points`) for the report's plot.
"""

import dataclasses

from ...hw.farnn.config import WEIGHT_DEPTHS, FarnnConfig
from ..engines import LUT_SHARE, budget, get_board_or_usage_error
from ..errors import UsageError
from .perf import CLOCK_HZ, PCIE_GBPS, training_step
from .resources import resource_estimate

__all__ = ["Candidate", "Exploration", "explore", "explore_request", "fits", "table2",
           "WORKLOAD", "VARIED", "PAPER_WORKLOADS"]

#: The workload's parameters (the model and how it is trained).
WORKLOAD = ("cell", "input_size", "hidden_size", "proj_size", "layers", "seq_len", "batch")
#: The parameters the exploration chooses.
VARIED = ("chain_length", "weight_depth", "split")


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
        return (self.cycles, c.pes, self.needs["lut"], c.weight_depth, c.split)


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
        Every feasible configuration, best first.
    top : int
    """

    workload: FarnnConfig
    board: str
    clock_hz: float
    pcie_gbps: float
    limits: dict
    considered: int
    points: tuple
    top: int = 10

    @property
    def candidates(self):
        """The best ``top`` points."""
        return self.points[:self.top]

    @property
    def best(self):
        """The fastest feasible :class:`Candidate`."""
        return self.points[0]

    def table(self):
        """The best ``top`` candidates as a text table, the chosen one marked ``*``."""
        w = self.workload
        proj = f", projection {w.proj_size}" if w.proj_size else ""
        lines = [f"FARNN on {self.board} at {self.clock_hz / 1e6:g} MHz, PCIe "
                 f"{self.pcie_gbps:g} GB/s: {w.cell.upper()} {w.input_size} inputs, "
                 f"{w.hidden_size} cells{proj}, {w.layers} layer(s), seq_len {w.seq_len}, "
                 f"batch {w.batch}; {len(self.points)} of {self.considered} configurations "
                 f"fit",
                 f"{'#':>3} {'L':>4} {'PEs':>5} {'depth':>5} {'split':>5} {'S fw':>4} "
                 f"{'cycles':>12} {'util':>6} {'util db':>7} {'ms':>8} {'DSP':>5} "
                 f"{'LUT':>9} {'URAM':>5} {'BRAM36':>6}"]
        for rank, c in enumerate(self.candidates, 1):
            cfg, n = c.config, c.needs
            mark = "*" if rank == 1 else " "
            lines.append(
                f"{rank:>3}{mark}{cfg.chain_length:>3} {cfg.pes:>5} {cfg.weight_depth:>5} "
                f"{cfg.split:>5} {cfg.slices('fw'):>4} {c.cycles:>12,} {c.utilization:>6.1%} "
                f"{c.utilization_double_buffered:>7.1%} "
                f"{c.seconds * 1e3:>8.2f} {n['dsp']:>5} {n['lut']:>9,} {n['uram']:>5} "
                f"{n['bram36']:>6}")
        lines += ["", f"* chosen: chain_length={self.best.config.chain_length} "
                      f"weight_depth={self.best.config.weight_depth} "
                      f"split={self.best.config.split}"]
        return "\n".join(lines)

    def as_json(self):
        """JSON: the workload, budgets, ``chosen`` (the configuration's fields), the ranked
        ``candidates`` and every feasible point (``feasible_points``, for the plot)."""
        def point(c, rank=None):
            return {**({"rank": rank} if rank else {}),
                    **{name: getattr(c.config, name) for name in VARIED},
                    "pes": c.config.pes, "cycles": c.cycles,
                    "cycles_double_buffered": c.cycles_double_buffered,
                    "utilization": c.utilization, "seconds": c.seconds, **c.needs}
        return {
            "engine": "farnn", "board": self.board, "clock_hz": self.clock_hz,
            "pcie_gbps": self.pcie_gbps, "limits": self.limits,
            "workload": {name: getattr(self.workload, name) for name in WORKLOAD},
            "considered": self.considered, "feasible": len(self.points),
            "chosen": dataclasses.asdict(self.best.config),
            "candidates": [point(c, rank) for rank, c in enumerate(self.candidates, 1)],
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


def _nothing_fits(workload, platform, depths, splits, limits):
    """The error text: the shortest chains whose weights fit, and what they need."""
    w, family = workload, platform.capacity.yosys_family
    found = []
    for depth in depths:
        for split in splits:
            for length in range(1, 4097):
                config = dataclasses.replace(w, weight_depth=depth, split=split,
                                             chain_length=length)
                if config.fits:
                    found.append((config.pes, length, depth, split,
                                  resource_estimate(config, family).needs()))
                    break
    head = (f"no FARNN configuration of {w.cell.upper()} {w.hidden_size} cells (proj_size "
            f"{w.proj_size}) fits {platform.name} (budgets {limits})")
    if not found:
        return f"{head}: no chain length holds its weights"
    pes, length, depth, split, needs = min(found, key=lambda item: item[0])
    over = ", ".join(f"{key} {needs[key]} > {limits[key]}" for key in needs
                     if needs[key] > limits[key])
    return (f"{head}: its weights need at least chain_length {length} (weight_depth {depth}, "
            f"split {split}, {pes} PEs), which needs {over}")


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
            pcie_gbps=PCIE_GBPS, clock_hz=None, lut_share=LUT_SHARE, top=10):
    """Enumerate, check and rank FARNN configurations for ``workload`` (a
    :class:`FarnnConfig` whose :data:`WORKLOAD` fields are used) on ``board``.

    ``depths``, ``splits`` and ``lengths`` restrict the search (default: both depths, every
    divisor of ``chains``, every chain length). Raises :class:`UsageError` when nothing
    fits, naming the smallest design's needs and the board's budgets."""
    if not isinstance(workload, FarnnConfig):
        raise UsageError(f"workload must be a FarnnConfig, not {workload!r}")
    if not isinstance(top, int) or isinstance(top, bool) or top <= 0:
        raise UsageError(f"top must be a positive integer, not {top!r}")
    platform = _board(board)
    clock_hz = core_clock_hz(platform) if clock_hz is None else clock_hz
    capacity = platform.capacity
    family = capacity.yosys_family
    limits = {key: budget(capacity, key, lut_share=lut_share)
              for key in ("dsp", "lut", "uram", "bram36")}
    splits = _divisors(workload.chains) if splits is None else list(splits)
    points, considered = [], 0
    for depth in depths:
        for split in splits:
            length = 0
            while True:
                length += 1
                if lengths is not None and length > max(lengths):
                    break
                config = dataclasses.replace(workload, weight_depth=depth, split=split,
                                             chain_length=length)
                needs = resource_estimate(config, family).needs()
                if any(needs[key] > limits[key] for key in ("dsp", "lut")):
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
        raise UsageError(_nothing_fits(workload, platform, depths, splits, limits))
    points.sort(key=Candidate.rank_key)
    return Exploration(workload=workload, board=platform.name, clock_hz=clock_hz,
                       pcie_gbps=pcie_gbps, limits=limits, considered=considered,
                       points=tuple(points), top=top)


def explore_request(request):
    """The engine's ``explore`` hook: the workload from ``--model`` (an LSTM or GRU
    network file: its cell, sizes and layers) or from ``--param`` (``cell``,
    ``input_size``, ``hidden_size``, ``proj_size``, ``layers``, ``batch``; hardware
    parameters given are kept fixed: ``weight_depth`` and ``split`` restrict the search),
    ``--seq-len`` for ``seq_len``."""
    from ..params import parse_params
    from .trainer import _workload_sizes

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
                   top=request.top)


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

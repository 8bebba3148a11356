"""The two-phase partition of the layer chain over ``N`` FPGAs (spec §2.3, §2.11 steps 2-3).

* :func:`coarse_partition`: contiguous groups of whole layers minimizing the largest
  group's work, by the exact linear-partition dynamic programme (``O(N · L²)``).
* :func:`fine_partition`: the work laid out as channel units (one input channel of a layer
  under ICP, one output channel under OCP, spec §2.5 rule :func:`unit_mode`), cut at the
  unit boundaries nearest ``i · W_tot / N``, then a local search moving one unit across a
  cut while the heaviest node's work decreases.
* :func:`variance`: eq. 5, ``V = Σ_i (Op_i − Op_min) / Op_min`` (``inf`` when a node has no
  work).

Works are in MACs per sample (:attr:`ChainLayer.work`); nodes are homogeneous (one board
for the chain), so ``Op_i / Perf_i`` orders as ``Op_i``.
"""

import dataclasses
import math

import numpy as np

from ..errors import UsageError

__all__ = ["OCP_MIN_IC", "unit_mode", "coarse_partition", "variance", "UnitLine",
           "fine_partition"]

#: Spec §2.5: a layer split across nodes is cut by output channels (OCP) when it has
#: fewer input channels than this (AlexNet conv1, VGG conv1_1: IC 3), else by input
#: channels (ICP, the paper's default).
OCP_MIN_IC = 16


def unit_mode(layer, ocp_min_ic=OCP_MIN_IC):
    """``"OCP"`` when ``layer`` has fewer than ``ocp_min_ic`` input channels, else
    ``"ICP"``."""
    return "OCP" if layer.ic < ocp_min_ic else "ICP"


def variance(works):
    """Eq. 5 of the paper over the node works ``works``."""
    works = [float(w) for w in works]
    least = min(works)
    if least <= 0:
        return math.inf
    return sum((w - least) / least for w in works)


def coarse_partition(works, nodes):
    """Cut the layer works ``works`` into ``nodes`` contiguous groups (none empty, unless
    there are fewer layers than nodes) minimizing the largest group's sum.

    Returns
    -------
    list of (int, int)
        ``(first, end)`` layer index range of each group.
    """
    L = len(works)
    prefix = np.concatenate([[0], np.cumsum(np.asarray(works, dtype=np.float64))])
    # best[j][i]: least max over j groups covering layers [0, i)
    best = np.full((nodes + 1, L + 1), math.inf)
    cut = np.zeros((nodes + 1, L + 1), dtype=np.int64)
    best[0][0] = 0.0
    gap = 1 if L >= nodes else 0          # groups non-empty when there are layers enough
    for j in range(1, nodes + 1):
        for i in range(L + 1):
            cost = np.maximum(best[j - 1][:i + 1], prefix[i] - prefix[:i + 1])
            if gap:
                cost[max(0, i - gap + 1):] = math.inf
            k = int(np.argmin(cost))
            best[j][i], cut[j][i] = cost[k], k
    groups, end = [], L
    for j in range(nodes, 0, -1):
        start = int(cut[j][end])
        groups.append((start, end))
        end = start
    return groups[::-1]


@dataclasses.dataclass(frozen=True)
class UnitLine:
    """The channel units of the chain in order: for unit ``u``, ``layer[u]`` (index into the
    chain), ``channel[u]`` (the input or output channel), ``work[u]`` (MACs per sample);
    ``modes[l]`` the unit kind of layer ``l`` (ICP, OCP), ``first[l]`` its first unit."""

    layer: np.ndarray
    channel: np.ndarray
    work: np.ndarray
    modes: tuple
    first: tuple


    @classmethod
    def of(cls, chain, ocp_min_ic=OCP_MIN_IC):
        layers, channels, works, modes = [], [], [], []
        for index, layer in enumerate(chain.layers):
            mode = unit_mode(layer, ocp_min_ic)
            count = layer.oc if mode == "OCP" else layer.ic
            modes.append(mode)
            layers.append(np.full(count, index))
            channels.append(np.arange(count))
            works.append(np.full(count, layer.work / count))
        first = tuple(int(f) for f in np.cumsum([0] + [len(c) for c in channels])[:-1])
        return cls(np.concatenate(layers), np.concatenate(channels),
                   np.concatenate(works), tuple(modes), first)

    def __len__(self):
        return len(self.work)


def _loads(prefix, cuts):
    bounds = np.concatenate([[0], cuts, [len(prefix) - 1]])
    return prefix[bounds[1:]] - prefix[bounds[:-1]]


def fine_partition(line, nodes, capacity=None):
    """Cut ``line`` (a :class:`UnitLine`) into ``nodes`` contiguous, non-empty ranges.

    ``capacity``: relative performance of each node (default equal). Returns the cut
    positions (unit indices, ``nodes - 1`` of them, strictly increasing) and the number of
    local-search moves made.
    """
    total_units = len(line)
    if nodes > total_units:
        raise UsageError(f"--fpgas {nodes}: the network has only {total_units} channel units "
                         f"(input channels under ICP, output channels under OCP) to share; "
                         f"give at most {total_units} FPGAs")
    capacity = np.ones(nodes) if capacity is None else np.asarray(capacity, dtype=float)
    prefix = np.concatenate([[0.0], np.cumsum(line.work)])
    targets = np.cumsum(capacity)[:-1] / capacity.sum() * prefix[-1]
    cuts = np.searchsorted(prefix, targets)
    # snap to the nearer boundary, then keep every node non-empty
    lower = np.maximum(cuts - 1, 0)
    nearer = np.where(np.abs(prefix[lower] - targets) <= np.abs(prefix[cuts] - targets),
                      lower, cuts)
    cuts = nearer.astype(np.int64)
    for i in range(len(cuts)):
        cuts[i] = min(max(cuts[i], (cuts[i - 1] if i else 0) + 1), total_units - (nodes - 1 - i))
    moves = 0
    while True:
        loads = _loads(prefix, cuts) / capacity
        worst = int(np.argmax(loads))
        improved = False
        for side in (-1, 1):       # give a unit to the left / right neighbour
            neighbour = worst + side
            if not 0 <= neighbour < nodes:
                continue
            trial = cuts.copy()
            c = worst - 1 if side < 0 else worst
            trial[c] += 1 if side < 0 else -1
            bounds = np.concatenate([[0], trial, [total_units]])
            if np.any(np.diff(bounds) < 1):
                continue
            new = _loads(prefix, trial) / capacity
            if max(new[worst], new[neighbour]) < loads[worst] - 1e-9 * loads[worst]:
                cuts, improved = trial, True
                moves += 1
                break
        if not improved:
            return cuts, moves


def node_works(line, cuts):
    """MACs per sample of each node for the cuts."""
    prefix = np.concatenate([[0.0], np.cumsum(line.work)])
    return _loads(prefix, np.asarray(cuts))



def _greedy(total_units, nodes, fits, period):
    """Cuts packing each node, left to right, with as many units as fit ``period``; ``None``
    when the units do not fit ``nodes`` nodes."""
    cuts, start = [], 0
    for node in range(nodes - 1):
        if start >= total_units - (nodes - 1 - node) or not fits(start, start + 1, period):
            return None
        low, high = start + 1, total_units - (nodes - 1 - node)     # low fits
        while high > low:
            middle = (low + high + 1) // 2
            if fits(start, middle, period):
                low = middle
            else:
                high = middle - 1
        cuts.append(low)
        start = low
    if not fits(start, total_units, period):
        return None
    return cuts


def min_period_cuts(total_units, nodes, fits, low, high, preferred):
    """The least period ``T`` (or any parameter that ``fits`` accepts more of as it grows,
    e.g. the MAC units of a node) in ``(low, high]`` at which the unit line splits into
    ``nodes`` contiguous ranges that each ``fits(start, end, T)`` — exact, since a range's
    shortest period grows with its end and falls with its start (binary search on ``T``,
    greedy packing for each) — and cuts for it: from the left, each cut as near its
    ``preferred`` position (the work-balanced cuts) as lets this node fit and the rest fit
    the nodes after it (the packing from the right).

    Returns ``(period, cuts)``, or ``None`` when even ``high`` does not fit.
    """
    if _greedy(total_units, nodes, fits, high) is None:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if _greedy(total_units, nodes, fits, middle) is not None:
            high = middle
        else:
            low = middle
    mirrored = _greedy(total_units, nodes,
                       lambda a, b, t: fits(total_units - b, total_units - a, t), high)
    right = [total_units - c for c in reversed(mirrored)]
    cuts, start = [], 0
    for i, want in enumerate(preferred):
        # the suffix fits from right[i] on; this node fits [start, end) up to the largest end
        low, top = max(right[i], start + 1), total_units - (nodes - 1 - i)
        while top > low and not fits(start, top, high):
            step_low, step_high = low, top          # largest end that fits, by bisection
            while step_high - step_low > 1:
                middle = (step_low + step_high) // 2
                if fits(start, middle, high):
                    step_low = middle
                else:
                    step_high = middle
            top = step_low
        cuts.append(min(max(int(want), low), top))
        start = cuts[-1]
    return high, cuts

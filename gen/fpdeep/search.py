"""The mapping ``nnrtl map fpdeep`` returns: the options the user pinned kept, the free
ones chosen, the fastest mapping whose every buffer fits.

The free choices of :func:`~.mapper.map_network`: ``fc_batch`` (samples per FC weight
pass), ``balance`` (parameter balancing) and ``act_ram`` (where Act-RAMs wait,
:mod:`.placement`: ``"overflow"``, in DDR only where block RAM cannot hold them, which is
``"chip"`` wherever that fits, or ``"ddr"``, every Act-RAM off the FC node in DDR); the
partition is the mapper's (the least period's cuts). A larger ``fc_batch`` shortens the FC
weights' DDR period and lengthens every residency, so for each placement and balancing the
batches are tried on a ladder up to twice the least the DDR needs at the compute rate
(beyond it the FC weights bound nothing), the search stopping at the first feasible batch
whose period the FC weights do not set, then refined by bisection above the best (up to
the next batch tried, which did not fit) and below it (the least batch as fast); the
fastest feasible mapping wins, ties to the smaller batch, ``"overflow"``, balancing on.
:attr:`~.mapper.Mapping.chosen` says what was chosen and why; when the FC weights' DDR
bounds the chosen mapping and the next batch does not fit,
:attr:`~.mapper.Mapping.storage_limit` names the buffer (the bound is then a buffer's).

When nothing fits, :func:`choose_mapping` raises :class:`UsageError` naming the node, the
resource (need and have) and the changes that fit, each found by trying it
(:mod:`.remedy`): a pinned value freed, the least FPGA count, another board, fixed16.
"""

import dataclasses
import functools
import math

from ..errors import UsageError
from .mapper import map_network
from .placement import ACT_RAM_PLACEMENTS

__all__ = ["choose_mapping", "overflows", "binding", "node_ranges", "FREE_PLACEMENTS"]

#: The placements tried when ``act_ram`` is free (``"chip"`` is ``"overflow"`` wherever
#: it fits).
FREE_PLACEMENTS = ("overflow", "ddr")


def overflows(mapping):
    """``[(node, BRAM36 needed, largest storage kind, its words), ...]`` of the nodes
    whose storage exceeds the board's BRAM36."""
    found = []
    for node in mapping.nodes:
        if node.bram36 > mapping.bram36:
            kind, words = max(node.storage, key=lambda kv: kv[1])
            found.append((node.node, node.bram36, kind, words))
    return found


def binding(mapping):
    """What does not fit in an infeasible ``mapping``, as text: the node of the largest
    block-RAM need (need, have, its largest buffer), else the first other reason."""
    rows = overflows(mapping)
    if not rows:
        return mapping.infeasible[0]
    node, need, kind, words = max(rows, key=lambda row: row[1])
    more = f" (and {len(rows) - 1} other node(s))" if len(rows) > 1 else ""
    return (f"node {node} needs {need:,} BRAM36, {need - mapping.bram36:,} over "
            f"{mapping.board}'s {mapping.bram36:,}; its largest buffer is {kind} "
            f"({words:,} words){more}")


def _ladder(high):
    found, value = set(), 1
    while value < high:
        found.add(value)
        value = max(value + 1, math.ceil(value * 1.25))
    return sorted(found | {high})


def _better(a, b):
    """``a`` is preferred over ``b`` (either may be ``None``)."""
    if b is None:
        return a is not None
    if a is None:
        return False
    key = lambda m: (m.period, m.fc_batch, ACT_RAM_PLACEMENTS.index(m.act_ram),
                     not m.balance)
    return key(a) < key(b)


def _search_batches(run, batches):
    """The best feasible mapping of ``run(batch)`` over ``batches`` (module docstring)."""
    best, tried = None, {}

    def attempt(batch):
        if batch not in tried:
            tried[batch] = run(batch)
        return tried[batch]

    for batch in batches:
        mapping = attempt(batch)
        if mapping.infeasible:
            continue
        if _better(mapping, best):
            best = mapping
        if mapping.bound != "ddr":
            break
    if best is not None:                       # up to the next batch tried, which failed
        low = best.fc_batch
        high = min([b for b in tried if b > low and tried[b].infeasible], default=low)
        while high - low > 1:
            middle = (low + high) // 2
            mapping = attempt(middle)
            if mapping.infeasible:
                high = middle
            else:
                low = middle
                if _better(mapping, best):
                    best = mapping
    if best is not None and len(batches) > 1:
        lower = max([b for b in batches if b < best.fc_batch], default=0)
        low, high = lower, best.fc_batch           # refine in (low, high]
        while high - low > 1:
            middle = (low + high) // 2
            mapping = attempt(middle)
            if not mapping.infeasible and mapping.period <= best.period:
                best, high = mapping, middle
            else:
                low = middle
    return best


def choose_mapping(chain, fpgas, board, *, fc_batch=None, balance=None, act_ram=None,
                   **options):
    """The fastest mapping of ``chain`` on ``fpgas`` boards whose every buffer fits, with
    ``fc_batch``, ``balance`` and ``act_ram`` chosen where ``None`` and kept where given
    (pinned); ``options`` go to :func:`~.mapper.map_network` as they are.

    Raises
    ------
    UsageError
        From :func:`~.mapper.map_network` (bad values, a node whose MAC units do not fit);
        no mapping with the pinned values fits (naming the node, the resource, need and
        have, and the changes that fit: :func:`.remedy.refusal`).
    """
    has_fc = any(layer.kind == "fc" for layer in chain.layers)
    balances = (True, False) if balance is None else (bool(balance),)
    placements = FREE_PLACEMENTS if act_ram is None else (act_ram,)
    best, need = None, 1

    def run_with(batch, place, on):
        return map_network(chain, fpgas, board, fc_batch=batch, balance=on, act_ram=place,
                           check_storage=False, **options)

    for place in placements:
        for on in balances:
            run = functools.partial(run_with, place=place, on=on)
            if fc_batch is not None or not has_fc:
                found = run(fc_batch)
                found = None if found.infeasible else found
            else:
                need = run(None).fc_batch          # the least the DDR needs at compute rate
                found = _search_batches(run, _ladder(2 * need))
            if _better(found, best):
                best = found
    if best is None:
        from .remedy import refusal
        raise UsageError(refusal(chain, fpgas, board, fc_batch=fc_batch, balance=balance,
                                 act_ram=act_ram, options=options))
    chosen = {}
    if balance is None:
        chosen["balance"] = ("on" if best.balance else "off") + (
            " (moves banks only off a node that overflows)" if best.balance else
            " (as fast as on, no banks moved)")
    if act_ram is None:
        in_ddr = [n.node for n in best.nodes if n.act_ram_ddr_words]
        chosen["act_ram"] = (f"{best.act_ram}: " + (
            f"in DDR on node(s) {node_ranges(in_ddr)}" if in_ddr else "all on chip"))
    limit = None
    if fc_batch is None and has_fc:
        chosen["fc_batch"] = (f"{best.fc_batch} (the fastest that fits; the DDR needs "
                              f"{need} at the compute rate)")
        if best.bound == "ddr":               # what holds a larger batch back: a buffer
            larger = run_with(best.fc_batch + 1, best.act_ram, best.balance)
            if larger.infeasible:
                limit = f"storage at fc_batch={best.fc_batch + 1}: {binding(larger)}"
    return dataclasses.replace(best, chosen=tuple(chosen.items()), storage_limit=limit)


def node_ranges(numbers):
    """``[1, 2, 3, 8]`` as ``"1-3, 8"``."""
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(f"{start}" if start == n else f"{start}-{n}")
            start = None
    return ", ".join(parts)

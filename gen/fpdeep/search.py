"""The mapping ``nnrtl map fpdeep`` returns: the options the user pinned kept, the free
ones chosen.

The free choices of :func:`~.mapper.map_network` are ``fc_batch`` (samples per FC weight
pass) and ``balance`` (parameter balancing). Balancing only moves banks off a node that
overflows, so with it on the feasible mappings are a superset and, where both fit, the
same: it is on unless pinned. A larger ``fc_batch`` shortens the DDR's period and lengthens
every Act-RAM residency, so the fastest mapping whose every buffer fits is the one of the
largest ``fc_batch`` that fits, up to the least batch the DDR bandwidth needs at the
compute rate (beyond it the period no longer shrinks); it is found by bisection.
:func:`choose_mapping` returns it with :attr:`~.mapper.Mapping.chosen` naming the values
chosen and why, or raises :class:`UsageError` naming the node, the buffer, the overflow and
the options (with values) that change it.
"""

import dataclasses

from ..errors import UsageError
from .mapper import map_network

__all__ = ["choose_mapping", "overflows"]


def overflows(mapping):
    """``[(node, BRAM36 needed, largest storage kind, its words), ...]`` of the nodes
    whose storage exceeds the board's BRAM36."""
    found = []
    for node in mapping.nodes:
        if node.bram36 > mapping.bram36:
            kind, words = max(node.storage, key=lambda kv: kv[1])
            found.append((node.node, node.bram36, kind, words))
    return found


def _overflow_text(mapping):
    rows = overflows(mapping)
    node, need, kind, words = max(rows, key=lambda row: row[1])
    more = f" (and {len(rows) - 1} other node(s))" if len(rows) > 1 else ""
    return (f"node {node} needs {need:,} BRAM36, {need - mapping.bram36:,} over "
            f"{mapping.board}'s {mapping.bram36:,}; its largest buffer is {kind} "
            f"({words:,} words){more}")


def choose_mapping(chain, fpgas, board, *, fc_batch=None, balance=None, **options):
    """The fastest mapping of ``chain`` on ``fpgas`` boards whose every buffer fits, with
    ``fc_batch`` and ``balance`` chosen where ``None`` and kept where given (pinned);
    ``options`` go to :func:`~.mapper.map_network` as they are.

    Raises
    ------
    UsageError
        From :func:`~.mapper.map_network` (bad values, a node whose MAC units do not fit);
        a pinned value whose mapping does not fit (naming it and the value that fits); no
        choice that fits (naming the node, its largest buffer, the overflow and the options
        that would fit).
    """
    chosen = {}
    on = True if balance is None else bool(balance)
    if balance is None:
        chosen["balance"] = "on (moves banks only off a node that overflows)"

    def run(batch):
        return map_network(chain, fpgas, board, fc_batch=batch, balance=on,
                           check_storage=False, **options)

    if fc_batch is not None:
        mapping = run(fc_batch)
        if mapping.infeasible:
            raise UsageError(f"--param fc_batch={fc_batch} (pinned): "
                             f"{_overflow_text(mapping)}; " + _remedies(run, mapping, on, options,
                                                                     chain, fpgas, board,
                                                                     pinned=fc_batch))
        return _with(mapping, chosen, on)
    top = run(None)
    has_fc = any(layer.kind == "fc" for layer in chain.layers)
    if not has_fc:
        if top.infeasible:
            raise UsageError(f"{_overflow_text(top)}; " + _remedies(run, top, on, options,
                                                                   chain, fpgas, board))
        return _with(top, chosen, on)
    if not top.infeasible:
        chosen["fc_batch"] = (f"{top.fc_batch} (the least the DDR bandwidth needs at the "
                              f"compute rate)")
        return _with(top, chosen, on)
    best = _largest(run, top.fc_batch - 1)
    if best is None:
        first = run(1)
        raise UsageError(f"no fc_batch fits: at fc_batch=1 {_overflow_text(first)}; "
                         + _remedies(run, first, on, options, chain, fpgas, board))
    over = run(best.fc_batch + 1)
    chosen["fc_batch"] = (f"{best.fc_batch} (the largest whose buffers fit: at "
                          f"{best.fc_batch + 1} {_overflow_text(over)})")
    return _with(best, chosen, on, limit=f"storage at fc_batch={best.fc_batch + 1}")


def _largest(run, high):
    """The mapping of the largest ``fc_batch`` in ``[1, high]`` that fits, or ``None``
    (bisection: a larger batch only lengthens residencies)."""
    best, low = None, 1
    while low <= high:
        middle = (low + high) // 2
        mapping = run(middle)
        if mapping.infeasible:
            high = middle - 1
        else:
            best, low = mapping, middle + 1
    return best


def _with(mapping, chosen, balance, limit=None):
    return dataclasses.replace(mapping, chosen=tuple(chosen.items()), balance=balance,
                               storage_limit=limit)


def _remedies(run, mapping, balance, options, chain, fpgas, board, pinned=None):
    """The options, with values, under which the mapping fits (a few tried)."""
    found = []
    if pinned is not None:
        fits = _largest(run, pinned - 1)
        if fits is not None:
            found.append(f"--param fc_batch={fits.fc_batch} (or any smaller)")
    if not balance:
        trial = map_network(chain, fpgas, board, fc_batch=mapping.fc_batch, balance=True,
                            check_storage=False, **options)
        if not trial.infeasible:
            found.append("--param balance=1")
    if options.get("precision", "fixed16") != "fixed16":
        trial = map_network(chain, fpgas, board, **dict(options, precision="fixed16"),
                            fc_batch=1, balance=True, check_storage=False)
        if not trial.infeasible:
            found.append("--precision fixed16")
    trial = map_network(chain, 2 * fpgas, board, fc_batch=pinned, balance=True,
                        check_storage=False, **options)
    if not trial.infeasible:
        found.append(f"--fpgas {2 * fpgas}" + (f" (fc_batch {trial.fc_batch})"
                                               if pinned is None else ""))
    if not found:
        return (f"neither fc_batch 1 nor parameter balancing nor --fpgas {2 * fpgas} fits "
                f"(a smaller --image-size or a board with more BRAM36 shortens the buffers)")
    return "it fits with " + " or ".join(found)

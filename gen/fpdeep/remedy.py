"""What ``nnrtl map fpdeep`` says when no mapping fits: the binding resource on its node
(need and have) under the most storage-saving free choices, and the smallest changes that
fit, each found by trying it.

:func:`fits` tries the free choices that save the most storage (``fc_batch`` 1, parameter
balancing on, every Act-RAM off the FC node in DDR, :mod:`.placement`), the pinned ones as
given;
:func:`refusal` lists, in this order, the pinned values (and ``word_bits``) whose freeing
fits, the least
FPGA count that fits (tried upward by doubling steps, then bisected), the other boards of
:data:`nnrtl.boards.BOARDS` that fit at the same count, and ``--precision fixed16`` for an
fp32 request.
"""

from ...boards import BOARDS
from ..errors import UsageError
from .mapper import map_network
from .search import binding

__all__ = ["fits", "least_fpgas", "refusal", "MAX_FPGAS"]

#: The largest FPGA count :func:`least_fpgas` tries.
MAX_FPGAS = 1024


def _attempts(chain, fpgas, board, fc_batch=None, balance=None, act_ram=None, options=None):
    options = options or {}
    for place in ("ddr",) if act_ram is None else (act_ram,):
        try:
            yield map_network(chain, fpgas, board, fc_batch=fc_batch or 1,
                              balance=True if balance is None else bool(balance),
                              act_ram=place, check_storage=False, **options)
        except UsageError as error:             # MAC units that do not fit, too many FPGAs
            yield error


def fits(chain, fpgas, board, *, fc_batch=None, balance=None, act_ram=None, options=None):
    """Whether some mapping with the pinned values (the others free) fits."""
    return any(not isinstance(m, UsageError) and not m.infeasible
               for m in _attempts(chain, fpgas, board, fc_batch, balance, act_ram,
                                  options or {}))


def least_fpgas(chain, fpgas, board, pins, options):
    """The least count above ``fpgas`` that :func:`fits`, or ``None`` up to
    :data:`MAX_FPGAS` or once a doubling of the step no longer shrinks the largest node's
    block-RAM need."""
    low, step, last = fpgas, 1, None
    while True:
        high = min(fpgas + step, MAX_FPGAS)
        tried = [m for m in _attempts(chain, high, board, options=options, **pins)
                 if not isinstance(m, UsageError)]
        if any(not m.infeasible for m in tried):
            break
        need = min((max(n.bram36 for n in m.nodes) for m in tried), default=None)
        if high == MAX_FPGAS or need is None or (last is not None and need >= last):
            return None                 # more FPGAs no longer shrink the largest need
        low, step, last = high, 2 * step, need
    while high - low > 1:
        middle = (low + high) // 2
        if fits(chain, middle, board, options=options, **pins):
            high = middle
        else:
            low = middle
    return high


def refusal(chain, fpgas, board, *, fc_batch, balance, act_ram, options):
    """The text of the :class:`UsageError` when no mapping fits (module docstring)."""
    pins = {"fc_batch": fc_batch, "balance": balance, "act_ram": act_ram}
    tried = [m for m in _attempts(chain, fpgas, board, fc_batch, balance, act_ram, options)]
    mappings = [m for m in tried if not isinstance(m, UsageError)]
    if not mappings:
        raise tried[0]
    closest = min(mappings, key=lambda m: max(n.bram36 for n in m.nodes))
    given = [f"--param {k}={int(v) if k == 'balance' else v}" for k, v in pins.items()
             if v is not None]
    head = (f"{chain.name} does not fit {fpgas} x {board.name} in "
            f"{options.get('precision', 'fixed16')}"
            + (f" ({options['word_bits']}-bit words)" if options.get("word_bits") else "")
            + (f" with {', '.join(given)} (pinned)" if given else "")
            + f": {binding(closest)}, with the free choices at their most storage-saving "
            f"(" + ", ".join(
                part for part, free in (("fc_batch 1", fc_batch is None),
                                        ("balancing on", balance is None),
                                        ("Act-RAMs in DDR", act_ram is None)) if free)
            + ")")
    head = head.replace(" ()", "")
    found = []
    for name, value in pins.items():
        if value is not None and fits(chain, fpgas, board, options=options,
                                      **dict(pins, **{name: None})):
            found.append(f"{name} unpinned")
    if options.get("word_bits") is not None and fits(
            chain, fpgas, board, options=dict(options, word_bits=None), **pins):
        found.append("word_bits unpinned")
    more = least_fpgas(chain, fpgas, board, pins, options)
    if more is not None:
        found.append(f"--fpgas {more}")
    for name, other in BOARDS.items():
        if other is not board and fits(chain, fpgas, other, options=options, **pins):
            found.append(f"--board {name}")
    if options.get("precision", "fixed16") != "fixed16":
        trial = dict(options, precision="fixed16", multiplier_shifts=None,
                     adder_shifts=None)
        if fits(chain, fpgas, board, options=trial, **pins):
            found.append("--precision fixed16")
    if not found:
        return head + (f"; nothing tried fits (up to --fpgas {MAX_FPGAS}, every board, "
                       f"fixed16)")
    return head + "; it fits with " + " or ".join(found)

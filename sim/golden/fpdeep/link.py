"""Golden model of the FPDeep neighbour link (:mod:`nnrtl.hw.fpdeep.link`): the flits a link
module sends for given typed traffic under its arbitration rule, and the receiver's decoding
of flits back into typed beats and credits. Every size comes from the
:class:`~nnrtl.hw.fpdeep.link_config.LinkConfig`.

The arbitration rule (the RTL's, :class:`nnrtl.hw.fpdeep.link.LinkModule`): round robin over
the sources ``tx_paths[0], tx_paths[1], tx_paths[2], credit``, starting after the source
granted last (after reset: the credit source, so ``tx_paths[0]`` comes first); a data path
is eligible with a beat waiting and a credit, the credit source with a beat of some receive
path freed and not yet returned. A grant sends one packet of ``min(waiting, credits,
max_beats)`` beats, or one credit flit (the credit paths in their own round robin).

:func:`flits` is the case the RTL reproduces word for word: all the traffic waiting in
the transmit FIFOs before the first grant, credits that never run out, nothing received
(so no credit flit).
"""

from nnrtl.hw.fpdeep.link_config import CREDIT, KIND_BITS, PATHS

__all__ = ["header", "credit_flit", "beat_words", "packets", "flits", "decode"]


def header(cfg, path, length):
    """The header word of a packet of ``length`` beats of ``path``."""
    return PATHS.index(path) | length << KIND_BITS


def credit_flit(cfg, path, count):
    """The credit flit returning ``count`` beats of ``path``."""
    return CREDIT | PATHS.index(path) << KIND_BITS | count << (2 * KIND_BITS)


def beat_words(cfg, path, beat):
    """The link words of one beat (an integer of ``beat_bits(path)`` bits), low word first."""
    mask = (1 << cfg.link_bits) - 1
    return [(beat >> (n * cfg.link_bits)) & mask for n in range(cfg.words_per_beat(path))]


def packets(cfg, traffic):
    """``[(path, beats), ...]``: the packets for ``traffic`` (``{path: [beat, ...]}`` of
    ``cfg.tx_paths``), all waiting before the first grant, credits unlimited."""
    queues = {path: list(traffic.get(path, ())) for path in cfg.tx_paths}
    unknown = set(traffic) - set(cfg.tx_paths)
    if unknown:
        raise ValueError(f"traffic paths {sorted(unknown)} are not sent by a "
                         f"{cfg.side!r} side ({', '.join(cfg.tx_paths)})")
    sources = len(cfg.tx_paths) + 1
    last = sources - 1
    result = []
    while any(queues.values()):
        for step in range(1, sources + 1):
            index = (last + step) % sources
            if index < len(cfg.tx_paths) and queues[cfg.tx_paths[index]]:
                break
        path = cfg.tx_paths[index]
        length = min(len(queues[path]), cfg.max_beats)
        result.append((path, queues[path][:length]))
        del queues[path][:length]
        last = index
    return result


def flits(cfg, traffic):
    """``[(word, last), ...]``: the link words of :func:`packets` in order."""
    words = []
    for path, beats in packets(cfg, traffic):
        body = [w for beat in beats for w in beat_words(cfg, path, beat)]
        words.append((header(cfg, path, len(beats)), 0))
        words += [(w, int(n == len(body) - 1)) for n, w in enumerate(body)]
    return words


def decode(cfg, words):
    """The receiver's view of the words ``[(word, last), ...]`` a ``cfg.partner()`` side
    sent: ``({path: [beat, ...]}, {path: credits returned})``; raises ``ValueError`` on a
    malformed flit (unknown kind, a packet cut short, ``last`` misplaced)."""
    beats = {path: [] for path in cfg.rx_paths}
    credits = {path: 0 for path in cfg.partner().rx_paths}
    kind_mask = (1 << KIND_BITS) - 1
    n = 0
    while n < len(words):
        word, last = words[n]
        kind = word & kind_mask
        if kind == CREDIT:
            path = PATHS[(word >> KIND_BITS) & kind_mask]
            if path not in credits or not last:
                raise ValueError(f"word {n}: a credit flit for {path!r} (last={last})")
            credits[path] += word >> (2 * KIND_BITS)
            n += 1
            continue
        if kind >= len(PATHS) or PATHS[kind] not in beats:
            raise ValueError(f"word {n}: header kind {kind} is not a path received here")
        path = PATHS[kind]
        length = word >> KIND_BITS
        per = cfg.words_per_beat(path)
        body = words[n + 1:n + 1 + length * per]
        if length == 0 or len(body) != length * per or last or not body[-1][1] or any(
                b[1] for b in body[:-1]):
            raise ValueError(f"word {n}: a {path!r} packet of {length} beats is malformed")
        mask = (1 << cfg.beat_bits(path)) - 1
        for b in range(length):
            value = sum(w << (k * cfg.link_bits) for k, (w, _) in
                        enumerate(body[b * per:(b + 1) * per]))
            beats[path].append(value & mask)
        n += 1 + length * per
    return beats, credits

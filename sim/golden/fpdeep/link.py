"""Golden model of the FPDeep neighbour link (:mod:`nnrtl.hw.fpdeep.link`): the flits a link
module sends for given typed traffic under its arbitration rule, and the receiver's decoding
of flits back into typed beats and credits. Every size comes from the
:class:`~nnrtl.hw.fpdeep.link_config.LinkConfig`.

The arbitration rule (the RTL's, :class:`nnrtl.hw.fpdeep.link.LinkModule`), per slot: round
robin over the sources ``tx_paths`` of the slot, then ``credit``, starting after the source
granted last (after reset: the credit source, so ``tx_paths[0]`` comes first); a data path
is eligible with a beat waiting and a credit, the credit source with a beat of some receive
path freed and not yet returned. A grant sends one packet of ``min(waiting, credits,
max_beats)`` beats, or one credit flit (the credit paths in their own round robin).

:func:`flits` is the case the RTL reproduces word for word: all the traffic waiting in
the transmit FIFOs before the first grant, credits that never run out, nothing received
(so no credit flit).
"""

from nnrtl.hw.fpdeep.link_config import CREDIT, IDLE, KIND_BITS, PATHS

__all__ = ["header", "credit_flit", "beat_words", "packets", "flits", "decode"]


def header(cfg, path, length):
    """The header word of a packet of ``length`` beats of ``path``."""
    return PATHS.index(path) | length << KIND_BITS


def credit_flit(cfg, path, count):
    """The credit flit returning ``count`` beats of ``path``."""
    return CREDIT | PATHS.index(path) << KIND_BITS | count << (2 * KIND_BITS)


def beat_words(cfg, path, beat):
    """The slot words of one beat (an integer of ``beat_bits(path)`` bits), low word
    first."""
    mask = (1 << cfg.slot_bits) - 1
    return [(beat >> (n * cfg.slot_bits)) & mask for n in range(cfg.words_per_beat(path))]


def packets(cfg, traffic, slot=0):
    """``[(path, beats), ...]``: the packets of slot ``slot`` for ``traffic`` (``{path:
    [beat, ...]}`` of ``cfg.tx_paths``), all waiting before the first grant, credits
    unlimited."""
    unknown = set(traffic) - set(cfg.tx_paths)
    if unknown:
        raise ValueError(f"traffic paths {sorted(unknown)} are not sent by a "
                         f"{cfg.side!r} side ({', '.join(cfg.tx_paths)})")
    paths = [p for p in cfg.tx_paths if cfg.slot(p) == slot]
    queues = {path: list(traffic.get(path, ())) for path in paths}
    sources = len(paths) + 1
    last = sources - 1
    result = []
    while any(queues.values()):
        for step in range(1, sources + 1):
            index = (last + step) % sources
            if index < len(paths) and queues[paths[index]]:
                break
        path = paths[index]
        length = min(len(queues[path]), cfg.max_beats)
        result.append((path, queues[path][:length]))
        del queues[path][:length]
        last = index
    return result


def _slot_flits(cfg, traffic, slot):
    words = []
    for path, beats in packets(cfg, traffic, slot):
        body = [w for beat in beats for w in beat_words(cfg, path, beat)]
        words.append((header(cfg, path, len(beats)), 0))
        words += [(w, int(n == len(body) - 1)) for n, w in enumerate(body)]
    return words


def flits(cfg, traffic):
    """``[(word, last), ...]``: the link words of the slots' :func:`packets` side by side
    (slot ``s`` in bits ``s · slot_bits`` up; :data:`IDLE` in a slot that has finished;
    ``last`` the packet's end without slots, 1 with)."""
    slots = [_slot_flits(cfg, traffic, s) for s in range(cfg.slots)]
    if cfg.slots == 1:
        return slots[0]
    return [(sum((seq[n][0] if n < len(seq) else IDLE) << (s * cfg.slot_bits)
                 for s, seq in enumerate(slots)), 1)
            for n in range(max(map(len, slots)))]


def decode(cfg, words):
    """The receiver's view of the words ``[(word, last), ...]`` a ``cfg.partner()`` side
    sent: ``({path: [beat, ...]}, {path: credits returned})``; raises ``ValueError`` on a
    malformed flit (unknown kind, a packet cut short, ``last`` misplaced)."""
    beats = {path: [] for path in cfg.rx_paths}
    credits = {path: 0 for path in cfg.partner().rx_paths}
    mask = (1 << cfg.slot_bits) - 1
    for slot in range(cfg.slots):
        seq = [((w >> (slot * cfg.slot_bits)) & mask, last if cfg.slots == 1 else None)
               for w, last in words]
        _decode_slot(cfg, seq, beats, credits, slot)
    return beats, credits


def _decode_slot(cfg, words, beats, credits, slot):
    kind_mask = (1 << KIND_BITS) - 1
    at = f"slot {slot} word" if cfg.slots > 1 else "word"
    n = 0
    while n < len(words):
        word, last = words[n]
        kind = word & kind_mask
        if kind == IDLE and cfg.slots > 1:
            n += 1
            continue
        if kind == CREDIT:
            path = PATHS[(word >> KIND_BITS) & kind_mask]
            if path not in credits or last == 0:
                raise ValueError(f"{at} {n}: a credit flit for {path!r} (last={last})")
            credits[path] += word >> (2 * KIND_BITS)
            n += 1
            continue
        if kind >= len(PATHS) or PATHS[kind] not in beats:
            raise ValueError(f"{at} {n}: header kind {kind} is not a path received here")
        path = PATHS[kind]
        length = word >> KIND_BITS
        per = cfg.words_per_beat(path)
        body = words[n + 1:n + 1 + length * per]
        lasts = [b[1] for b in body]
        if length == 0 or len(body) != length * per or (last is not None and (
                last or not lasts[-1] or any(lasts[:-1]))):
            raise ValueError(f"{at} {n}: a {path!r} packet of {length} beats is malformed")
        beat_mask = (1 << cfg.beat_bits(path)) - 1
        for b in range(length):
            value = sum(w << (k * cfg.slot_bits) for k, (w, _) in
                        enumerate(body[b * per:(b + 1) * per]))
            beats[path].append(value & beat_mask)
        n += 1 + length * per

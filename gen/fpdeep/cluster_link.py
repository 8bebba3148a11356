"""The cluster simulator's links and modules as max-plus servers (spec §3.2, §3.7).

Every event time of the simulator is the solution of one recurrence: a server that takes
requests in order, request ``i`` ready at ``r_i`` and busy ``s_i`` cycles, starts it at
``start_i = max(finish_{i-1}, r_i)``. With ``S_i = s_0 + ... + s_i``,
``finish_i = S_i + max(free, max_{j<=i} (r_j - S_{j-1}))``: a cumulative maximum, so a
whole sample's pixels go through a module or a link in a few numpy operations, and the times
are exactly those of an event-by-event simulation of the same servers.

* :func:`serve`: a convolution module (FP, EB or PG of a segment): ``c`` cycles per output
  pixel (``⌈n_out/P⌉ · ⌈n_in/Q⌉``), pixels in raster order;
* :class:`Link`: one direction of a neighbour link: typed flits (the streams of spec §3.2:
  activation, partial, param, error, delta, gradient), one message per pixel of a stream,
  ``words · word_bits / Gb/s`` cycles on the wire, then ``latency`` cycles of flight. The
  streams are merged in order of readiness (ties: the stream order of the boundary, a fixed
  priority), one sample after the other ([U] decision: a flit of sample ``s + 1`` waits
  behind sample ``s``'s on the same link, which keeps each link's order independent of how
  the chain is cut into MPI ranks).
"""

import dataclasses

import numpy as np

__all__ = ["serve", "Link", "LinkStats"]


def serve(ready, cycles, free):
    """Start and finish times of pixels ``ready`` (non-decreasing or not) through a module
    of ``cycles`` per pixel that is free from ``free`` on."""
    ready = np.asarray(ready, dtype=np.float64)
    offset = np.arange(ready.size, dtype=np.float64) * cycles
    start = np.maximum(np.maximum.accumulate(ready - offset), free) + offset
    return start, start + cycles


@dataclasses.dataclass
class LinkStats:
    """What one link direction carried: words, messages, and busy cycles."""

    words: float = 0.0
    messages: int = 0
    busy: float = 0.0


class Link:
    """One direction of the link between two neighbours, owned by the sending node.

    Parameters
    ----------
    cycles_per_word : float
        ``word_bits · f_clk / (Gb/s · 1e9)``; 0 for an unlimited link.
    latency : int
        Cycles from a message's last word leaving to its arrival.
    """

    def __init__(self, cycles_per_word, latency):
        self.cycles_per_word = float(cycles_per_word)
        self.latency = float(latency)
        self.free = 0.0
        self.stats = LinkStats()

    def send(self, streams):
        """Arrival times of ``streams``: ``[(ready, words per message), ...]`` (ready: an
        array of times, words a number or an array), in the boundary's stream order."""
        if not streams:
            return []
        sizes = [np.broadcast_to(np.asarray(w, dtype=np.float64), r.shape)
                 for r, w in streams]
        ready = np.concatenate([r for r, _ in streams])
        words = np.concatenate(sizes)
        priority = np.concatenate([np.full(r.size, k) for k, (r, _) in enumerate(streams)])
        order = np.lexsort((np.arange(ready.size), priority, ready))
        busy = words[order] * self.cycles_per_word
        total = np.cumsum(busy)
        before = total - busy
        finish = total + np.maximum(self.free, np.maximum.accumulate(ready[order] - before))
        self.free = float(finish[-1])
        self.stats.words += float(words.sum())
        self.stats.messages += int(ready.size)
        self.stats.busy += float(total[-1])
        arrival = np.empty_like(ready)
        arrival[order] = finish + self.latency
        result, at = [], 0
        for r, _ in streams:
            result.append(arrival[at:at + r.size])
            at += r.size
        return result

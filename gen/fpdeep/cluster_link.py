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
  ``words · word_bits / Gb/s`` cycles of the link on the wire (see :class:`Link` for the
  arbitration), then ``latency`` cycles of flight;
* :class:`LinkFraming`: the RTL link's flits (:mod:`nnrtl.hw.fpdeep.link`): with it a
  :class:`Link` charges a message the link words the RTL sends for it, header flits of full
  packets included, instead of its raw words.
"""

import dataclasses

import numpy as np

__all__ = ["serve", "Link", "LinkStats", "LinkFraming"]


def serve(ready, cycles, free):
    """Start and finish times of pixels ``ready`` (non-decreasing or not) through a module
    of ``cycles`` per pixel that is free from ``free`` on."""
    ready = np.asarray(ready, dtype=np.float64)
    offset = np.arange(ready.size, dtype=np.float64) * cycles
    start = np.maximum(np.maximum.accumulate(ready - offset), free) + offset
    return start, start + cycles


@dataclasses.dataclass(frozen=True)
class LinkFraming:
    """The RTL link's flit accounting for one path (:mod:`nnrtl.hw.fpdeep.link_config`):
    a beat of ``p`` words of ``word_bits`` takes ``words_per_beat`` words of its slot, each
    sent in one cycle of the ``link_bits`` link, and a full packet of ``max_beats`` beats
    one header word more (a saturated link sends full packets; an idle one shorter
    packets, with bandwidth to spare). A link striped into slots is one :class:`Link`
    per slot (its streams share the slot, not the link).

    Attributes
    ----------
    link_bits, p, word_bits, max_beats : int
    words_per_beat : int
    """

    link_bits: int
    p: int
    word_bits: int
    max_beats: int
    words_per_beat: int

    @classmethod
    def from_config(cls, cfg, path):
        """The framing of ``path`` on the link ``cfg`` (a
        :class:`~nnrtl.hw.fpdeep.link_config.LinkConfig`)."""
        return cls(cfg.link_bits, cfg.p, cfg.bits(path), cfg.max_beats,
                   cfg.words_per_beat(path))

    def link_words(self, words):
        """Link words (headers included, as a mean over full packets) for ``words`` words
        of payload: ``beats · (words_per_beat + 1 / max_beats)``, ``beats = words / p``
        (fractional: the simulator's messages are means per pixel)."""
        return words / self.p * (self.words_per_beat + 1 / self.max_beats)


@dataclasses.dataclass
class LinkStats:
    """What one link direction carried: words, messages, and busy cycles."""

    words: float = 0.0
    messages: int = 0
    busy: float = 0.0


class Link:
    """One direction of the link between two neighbours, owned by the sending node.

    [U] arbitration: weighted round robin of the boundary's streams (virtual channels),
    each with the share of the bandwidth its words per sample are of the link's, a FIFO of
    its own across samples. Each stream is then a server of its own (:func:`serve` with
    the message's words over its share), a link whose streams' shares add to its
    bandwidth carries one sample per ``Σ words · word_bits / Gb/s`` exactly, and no stream
    waits for another sample's flits on another stream (which a single FIFO served one
    sample after the other does: it idles at the end of a sample while the next sample's
    flits wait, and loses ~1% of a link-bound throughput). The cost: a stream's message
    takes its share's time, e.g. a one-message stream the whole link-sample time.

    Parameters
    ----------
    cycles_per_word : float
        ``word_bits · f_clk / (Gb/s · 1e9)``; 0 for an unlimited link.
    latency : int
        Cycles from a message's last word leaving to its arrival.
    framing : LinkFraming or None
        With it, a message of ``words`` takes ``framing.link_words(words)`` link words of
        ``framing.link_bits`` (``cycles_per_word · link_bits / word_bits`` cycles each);
        without, its raw words.
    """

    def __init__(self, cycles_per_word, latency, framing=None):
        self.framing = framing
        self.cycles_per_word = float(cycles_per_word)
        self.latency = float(latency)
        self.free = {}
        self.stats = LinkStats()

    def send(self, streams):
        """Arrival times of ``streams``: ``[(ready, words per message), ...]`` (ready: an
        array of times, words a number), in the boundary's stream order."""
        per_sample = [float(w) * r.size for r, w in streams]
        total = sum(per_sample)
        result = []
        for k, ((ready, words), share) in enumerate(zip(streams, per_sample)):
            if ready.size == 0:
                result.append(ready.copy())
                continue
            cycles = self._wire(words) * (total / share if share else 0.0)
            _, finish = serve(ready, cycles, self.free.get(k, 0.0))
            self.free[k] = float(finish[-1])
            result.append(finish + self.latency)
            self.stats.words += share
            self.stats.messages += int(ready.size)
            self.stats.busy += self._wire(share)
        return result

    def _wire(self, words):
        """Cycles on the wire of ``words`` payload words."""
        if self.framing is None:
            return float(words) * self.cycles_per_word
        per_link_word = self.cycles_per_word * self.framing.link_bits / self.framing.word_bits
        return self.framing.link_words(float(words)) * per_link_word

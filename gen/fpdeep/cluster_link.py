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
  packets included, instead of its raw words; :func:`boundary_link` is the link of a
  boundary the simulator and the mapper (:mod:`.links`) both charge.
"""

import dataclasses

import numpy as np

from ...hw.fpdeep.config import PARTIAL_BITS
from ...hw.fpdeep.link_config import LANE_BITS, PATHS, LinkConfig, lanes_for

__all__ = ["serve", "Link", "LinkStats", "LinkFraming", "boundary_link", "STREAM_PATHS",
           "MAX_BEATS"]

#: Longest packet of a boundary's link (the paper-size link of :mod:`nnrtl.hw.fpdeep.link`'s
#: 150 Gb/s measurement: headers of 32-beat packets).
MAX_BEATS = 32

#: The link path (:data:`~nnrtl.hw.fpdeep.link_config.PATHS`) of each simulator stream kind.
STREAM_PATHS = {"bypass": "act", "act": "act", "partial": "partial", "param": "param",
                "delta": "delta", "errors": "error", "err": "error", "grad": "grad"}


def boundary_link(word_bits, gbps, clock_hz):
    """The :class:`~nnrtl.hw.fpdeep.link_config.LinkConfig` of a boundary of a mapping of
    ``word_bits`` words (32: fp32, 16: fixed16) at ``gbps`` per direction and ``clock_hz``: ``lanes_for(gbps)`` Aurora lanes (``link_bits``), one slot,
    packets of up to :data:`MAX_BEATS` beats, a beat one link word of activations
    (``P = link_bits / word_bits``), partial and gradient words ``PARTIAL_BITS[precision]``
    wide (fixed16's 48-bit DSP sums; the LGB word of a 2¹⁶-pixel layer at most).

    [U] decisions, assumed for full-size boundaries (the RTL chain's adapters,
    :mod:`nnrtl.hw.fpdeep.chain_link`, are checked against :mod:`.cluster_chain` on small
    chains, not at this width): the adapter packs words into link-wide beats, so a beat wastes no slot
    bits and the framing costs ``1 / MAX_BEATS`` headers per beat on a saturated link; one
    slot, the streams sharing the whole word in weighted round robin (:class:`Link`): a
    path pinned to one of three slots would get a third of the link whatever its load."""
    precision = {32: "fp32", 16: "fixed16"}.get(word_bits)
    if precision is None:
        raise ValueError(f"word_bits must be 32 (fp32) or 16 (fixed16), not {word_bits!r}")
    link_bits = LANE_BITS * lanes_for(gbps, clock_hz)
    return LinkConfig(side="down", p=link_bits // word_bits, word_bits=word_bits,
                      partial_bits=PARTIAL_BITS[precision], grad_bits=PARTIAL_BITS[precision],
                      link_bits=link_bits, max_beats=MAX_BEATS, tx_depth=2 * MAX_BEATS,
                      rx_depth=2 * MAX_BEATS)


def serve(ready, cycles, free):
    """Start and finish times of pixels ``ready`` (non-decreasing or not) through a module
    of ``cycles`` per pixel that is free from ``free`` on."""
    ready = np.asarray(ready, dtype=np.float64)
    offset = np.arange(ready.size, dtype=np.float64) * cycles
    start = np.maximum(np.maximum.accumulate(ready - offset), free) + offset
    return start, start + cycles


@dataclasses.dataclass(frozen=True, kw_only=True)
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
    whole_beats : bool
        A message is whole beats (``⌈words / p⌉``, a pixel's words end a beat: the FP
        module's ``G`` beats of ``P`` words a pixel, the link fed without an adapter);
        else words are packed across messages (fractional beats).
    """

    link_bits: int
    p: int
    word_bits: int
    max_beats: int
    words_per_beat: int
    whole_beats: bool = False

    @classmethod
    def from_config(cls, cfg, path, whole_beats=False):
        """The framing of ``path`` on the link ``cfg`` (a
        :class:`~nnrtl.hw.fpdeep.link_config.LinkConfig`)."""
        return cls(link_bits=cfg.link_bits, p=cfg.p, word_bits=cfg.bits(path),
                   max_beats=cfg.max_beats, words_per_beat=cfg.words_per_beat(path),
                   whole_beats=whole_beats)

    def link_words(self, words):
        """Link words (headers included, as a mean over full packets) for a message of
        ``words`` words of payload: ``beats · (words_per_beat + 1 / max_beats)``, ``beats =
        words / p`` (fractional: the simulator's messages are means per pixel) or, with
        :attr:`whole_beats`, ``⌈words / p⌉``."""
        beats = -(-words // self.p) if self.whole_beats else words / self.p
        return beats * (self.words_per_beat + 1 / self.max_beats)

    def wire_bits(self, words):
        """Bits on the wire (link words of ``link_bits``) for ``words`` words of payload."""
        return self.link_words(words) * self.link_bits

    @classmethod
    def of_link(cls, cfg, whole_beats=False):
        """``{path: LinkFraming}`` of every path of ``cfg``."""
        return {path: cls.from_config(cfg, path, whole_beats) for path in PATHS}


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
    framing : LinkFraming, dict or None
        With it, a message of ``words`` takes ``framing.link_words(words)`` link words of
        ``framing.link_bits`` (``cycles_per_word · link_bits / word_bits`` cycles each,
        ``word_bits`` the framing's); a dict ``{path: LinkFraming}``
        (:meth:`LinkFraming.of_link`) frames each stream by its path (``send``'s
        ``paths``), ``cycles_per_word`` then per word of the first path's width;
        without, its raw words.
    """

    def __init__(self, cycles_per_word, latency, framing=None):
        self.framing = framing
        self.cycles_per_word = float(cycles_per_word)
        self.latency = float(latency)
        self.free = {}
        self.stats = LinkStats()

    def send(self, streams, paths=None, paced=None):
        """Arrival times of ``streams``: ``[(ready, words per message), ...]`` (ready: an
        array of times, words a number), in the boundary's stream order; ``paths``: each
        stream's link path (with a dict ``framing``); ``paced``: per stream the cycles its
        producer spends on a message, its beats leaving evenly over them, the last at
        ``ready`` (with :attr:`LinkFraming.whole_beats`; default 0, all at ``ready``)."""
        paths = paths or [None] * len(streams)
        paced = paced or [0.0] * len(streams)
        per_sample = [float(w) * r.size for r, w in streams]
        wire = [self._wire(w, path) * r.size for (r, w), path in zip(streams, paths)]
        total = sum(wire)
        result = []
        for k, ((ready, words), share, path) in enumerate(zip(streams, per_sample, paths)):
            if ready.size == 0:
                result.append(ready.copy())
                continue
            framing = self.framing.get(path) if isinstance(self.framing, dict) else None
            if framing is not None and framing.whole_beats:
                finish = self._packets(ready, words, framing, k, paced[k])
            else:
                cycles = self._wire(words, path) * (total / wire[k] if wire[k] else 0.0)
                _, finish = serve(ready, cycles, self.free.get(k, 0.0))
            self.free[k] = float(finish[-1])
            result.append(finish + self.latency)
            self.stats.words += share
            self.stats.messages += int(ready.size)
            self.stats.busy += wire[k]
        return result

    def _packets(self, ready, words, framing, k, paced):
        """Finish times of messages ``ready`` of ``words`` each as the RTL link sends them
        (:mod:`nnrtl.hw.fpdeep.link`), the stream alone in its slot: a grant when the
        link is idle costs a cycle; a packet is a header and ``min(beats waiting,
        max_beats)`` beats (the beats in the transmit FIFO at the grant), the next granted
        as the last word goes. A message's ``⌈words / p⌉`` beats are ready ``paced /
        beats`` cycles apart, the last with the message (the FP module's groups)."""
        first = next(iter(self.framing.values()))
        per_word = self.cycles_per_word * framing.link_bits / first.word_bits
        count = -(-int(round(words)) // framing.p)
        lag = (np.arange(count)[::-1] * (paced / count)) if count else np.zeros(0)
        beats = (np.asarray(ready, dtype=np.float64)[:, None] - lag[None, :]).ravel()
        done = np.empty(beats.size)
        t, i, idle = self.free.get(k, 0.0), 0, True
        while i < beats.size:
            if beats[i] > t or idle:
                t, idle = max(t, beats[i]) + per_word, False          # the grant
            j = min(int(np.searchsorted(beats, t, "right")), i + framing.max_beats)
            j = max(j, i + 1)
            t += per_word                                              # the header
            steps = np.arange(1, j - i + 1) * framing.words_per_beat * per_word
            done[i:j] = t + steps
            t = float(done[j - 1])
            i = j
            if i < beats.size and beats[i] > t:
                idle = True
        return done[count - 1::count]

    def _wire(self, words, path=None):
        """Cycles on the wire of ``words`` payload words of ``path``."""
        if self.framing is None:
            return float(words) * self.cycles_per_word
        if isinstance(self.framing, dict):
            first = next(iter(self.framing.values()))
            per_bit = self.cycles_per_word / first.word_bits
            return self.framing[path].wire_bits(float(words)) * per_bit
        per_link_word = self.cycles_per_word * self.framing.link_bits / self.framing.word_bits
        return self.framing.link_words(float(words)) * per_link_word

"""The neighbour link's configuration: one frozen :class:`LinkConfig` per node side, derived
from the segment's :class:`~.config.FpConfig` by :meth:`LinkConfig.from_fp`. The RTL
(:mod:`.link`), the golden flit model (:mod:`nnrtl.sim.golden.fpdeep.link`), the bench
(:mod:`nnrtl.sim.tb.fpdeep.link`) and the cluster simulator's link accounting
(:class:`nnrtl.gen.fpdeep.cluster_link.LinkFraming`) take every width, depth and flit size
from it.

The six datapaths (spec §3.1, §3.2)
-----------------------------------
Each is a typed stream of ``P``-word beats; its code is its datapath number − 1 and is the
``kind`` field of its header flit:

====  =========  ==========================================  ========  ===========
code  name       datapath                                    pair      word
====  =========  ==========================================  ========  ===========
0     ``act``    DP1: activations (distributed and bypassed)  forward   word_bits
1     ``partial``  DP2: partial sums, added and forwarded    forward   partial_bits
2     ``delta``  DP3: δ of layer t+1 relayed upstream        backward  word_bits
3     ``error``  DP4: EB errors of the downstream channels   backward  word_bits
4     ``param``  DP5: hosted weights (parameter balancing)   forward   word_bits
5     ``grad``   DP6: their gradients back to the host       backward  grad_bits
====  =========  ==========================================  ========  ===========

The forward (upper) pair carries DP1, DP2 and DP5 from node ``m`` to ``m + 1``, the
backward (bottom) pair DP3, DP4 and DP6 from ``m + 1`` to ``m`` (spec §3.2). A node's
``"down"`` side sends the forward paths and receives the backward ones; its ``"up"`` side
the reverse; node ``m``'s down side and node ``m + 1``'s up side form one link.
"""

import dataclasses
import math

from .config import FpConfig
from .pg import lgb_bits

__all__ = ["PATHS", "FORWARD", "BACKWARD", "SIDES", "CREDIT", "IDLE", "LANE_BITS",
           "LinkConfig", "lanes_for"]

#: The six datapaths in code order (code = datapath number − 1).
PATHS = ("act", "partial", "delta", "error", "param", "grad")
#: Paths of the forward (upper) pair and of the backward (bottom) pair.
FORWARD = ("act", "partial", "param")
BACKWARD = ("delta", "error", "grad")
#: A node's two sides: ``"down"`` sends FORWARD, ``"up"`` sends BACKWARD.
SIDES = ("down", "up")
#: ``kind`` of a credit flit.
CREDIT = 7
#: ``kind`` of an idle slot word (a link word where another slot has a flit).
IDLE = 6
#: Bits of ``kind`` and of a credit flit's path field.
KIND_BITS = 3
#: One Aurora 64B/66B lane's user word.
LANE_BITS = 64


def lanes_for(gbps, clock_hz=200e6):
    """Aurora lanes (64-bit words per node cycle) a link of ``gbps`` needs at ``clock_hz``."""
    if isinstance(gbps, bool) or not isinstance(gbps, (int, float)) or not gbps > 0:
        raise ValueError(f"gbps must be a positive number, not {gbps!r}")
    return math.ceil(gbps * 1e9 / (LANE_BITS * clock_hz))


def _check_int(name, value, least):
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if value < least:
        raise ValueError(f"{name} must be an integer of at least {least}, not {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LinkConfig:
    """One node side's link module.

    Attributes
    ----------
    side : str
        ``"down"`` (toward node ``m + 1``) or ``"up"`` (toward ``m − 1``).
    p : int
        Words per beat on every path (the segment's ``P``).
    word_bits, partial_bits, grad_bits : int
        Word widths: activations, δ, errors and weights; partial sums; gradients.
    link_bits : int
        Width of a link word, a multiple of :data:`LANE_BITS`.
    tx_depth, rx_depth : int
        Beats per path of the transmit and receive FIFOs (``rx_depth`` is also the
        sender's initial credit: both ends of a link must agree on it).
    max_beats : int
        Longest packet, in beats.
    slots : int
        Slots the link word is striped into, 1 to 3: slot ``s`` carries the paths of
        index ``s, s + slots, ...`` in ``tx_paths`` (and ``rx_paths``), their credits and
        flits, ``link_bits / slots`` bits wide, independently of the other slots (an idle
        slot sends :data:`IDLE`).

    Notes
    -----
    **Flits (decisions, [U] in the spec)**

    * **Link word**: ``link_bits`` wide, a multiple of 64: one Aurora 64B/66B lane's user
      word is 64 bits, and a VC709 GTH lane at 13.1 Gb/s runs that user interface at
      13.1 GHz / 66 ≈ 198 MHz, i.e. one 64-bit word per cycle of the ≈200 MHz node clock
      (12.8 Gb/s). ``link_bits = 64 · lanes`` bonds lanes: the paper's 150 Gb/s per link and
      direction at 200 MHz is 750 bits per cycle, 12 lanes (:func:`lanes_for`); its 250 Gb/s
      20 lanes. The fast tests use 64 to 256.
    * **Slots**: the link word is striped into ``slots`` (1-3) independent flit streams,
      each path pinned to one, since a slot moves at most one beat per cycle (the paper's
      link in fp32, ``P`` = 8: 768 bits in 3 slots of 256, one 256-bit beat per slot word;
      see :mod:`.link`).
    * **Packet** = one header flit (a whole slot word: ``kind`` in bits 0-2, the beat count
      ``length`` in the bits above) and ``length`` beats, each beat ``⌈P · word / slot_bits⌉``
      slot words (its bits from the low word up; the last word's spare bits zero). A beat
      starts a slot word: no packing of several beats in one word (a slot wider than a beat
      wastes the rest; :attr:`LinkConfig.efficiency`). Without slots ``tlast`` marks a
      packet's last word.
    * **Credit flit**: one word, ``kind`` 7, the path's code in bits 3-5 and a beat count
      above: the receiver returns that many beats of its receive FIFO of that path to the
      sender (credit-based flow control per path, initial credit ``rx_depth``).
    * **Packet length**: ``min(beats waiting, credits, max_beats)``, known when the header
      goes (the beats are in the transmit FIFO already), so a packet never waits for its
      producer mid-way.
    """

    side: str
    p: int
    word_bits: int
    partial_bits: int
    grad_bits: int
    link_bits: int = LANE_BITS
    tx_depth: int = 16
    rx_depth: int = 16
    max_beats: int = 16
    slots: int = 1

    def __post_init__(self):
        if self.side not in SIDES:
            raise ValueError(f"side must be one of 'down', 'up', not {self.side!r}")
        for name in ("p", "word_bits", "partial_bits", "grad_bits", "link_bits", "tx_depth",
                     "rx_depth", "max_beats", "slots"):
            _check_int(name, getattr(self, name), 1)
        if self.link_bits % LANE_BITS:
            raise ValueError(f"link_bits must be a positive multiple of {LANE_BITS} (Aurora "
                             f"lanes), not {self.link_bits}")
        if self.slots > len(FORWARD) or (self.link_bits // LANE_BITS) % self.slots:
            raise ValueError(f"slots must be 1, 2 or 3 and divide the link's "
                             f"{self.link_bits // LANE_BITS} lanes, not {self.slots}")
        if self.header_bits > self.slot_bits:
            raise ValueError(f"a slot of {self.slot_bits} bits must hold a header of "
                             f"{self.header_bits} bits")

    @classmethod
    def from_fp(cls, fp, side, *, batch=1, **options):
        """The link of ``side`` for the segment ``fp`` (an :class:`~.config.FpConfig`):
        ``P``, the word and partial widths are the segment's, the gradient words the PG
        module's LGB words for ``batch`` samples (:func:`~.pg.lgb_bits`; DP6 carries
        per-sample gradients into the host's BGB, ``batch`` = 1); ``options``:
        ``link_bits``, FIFO depths, ``max_beats``."""
        if not isinstance(fp, FpConfig):
            raise TypeError(f"fp must be an FpConfig, not {fp!r}")
        return cls(side=side, p=fp.p, word_bits=fp.word_bits, partial_bits=fp.partial_bits,
                   grad_bits=lgb_bits(fp, batch), **options)

    def partner(self):
        """The configuration of the other end of the link."""
        return dataclasses.replace(self, side="up" if self.side == "down" else "down")

    # -- paths -------------------------------------------------------------------------
    @property
    def tx_paths(self):
        return FORWARD if self.side == "down" else BACKWARD

    @property
    def rx_paths(self):
        return BACKWARD if self.side == "down" else FORWARD

    def bits(self, path):
        """Word width of ``path``."""
        return {"partial": self.partial_bits, "grad": self.grad_bits}.get(path, self.word_bits)

    def beat_bits(self, path):
        return self.p * self.bits(path)

    @property
    def slot_bits(self):
        return self.link_bits // self.slots

    def slot(self, path):
        """The slot of ``path``."""
        paths = self.tx_paths if path in self.tx_paths else self.rx_paths
        return paths.index(path) % self.slots

    def words_per_beat(self, path):
        """Slot words (link words without slots) a beat of ``path`` takes."""
        return -(-self.beat_bits(path) // self.slot_bits)

    def efficiency(self, path):
        """Payload bits per bit of its slot of a full packet of ``path``."""
        return (self.max_beats * self.beat_bits(path)
                / ((1 + self.max_beats * self.words_per_beat(path)) * self.slot_bits))

    # -- flit fields -------------------------------------------------------------------
    @property
    def length_bits(self):
        return self.max_beats.bit_length()

    @property
    def count_bits(self):
        """Bits of a credit flit's beat count."""
        return self.rx_depth.bit_length()

    @property
    def header_bits(self):
        return max(KIND_BITS + self.length_bits, 2 * KIND_BITS + self.count_bits)

    def packet_words(self, path, beats):
        """Slot words of a packet of ``beats`` beats (header included)."""
        return 1 + beats * self.words_per_beat(path)

    def transfer_words(self, path, beats):
        """Slot words (link cycles, the path alone in its slot) of ``beats`` beats sent
        as full packets (the saturated link)."""
        return -(-beats // self.max_beats) + beats * self.words_per_beat(path)

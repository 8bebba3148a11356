"""Where a node's Act-RAM waits: in block RAM, or in the node's second DDR channel (spec
§2.9's Act-RAM as a FIFO in DDR), and what that costs in the period.

A segment whose Act-RAM is in DDR keeps on chip a staging buffer of two rows of its input
(``2 · n_in · W_in`` words: FP writes one while PG reads the other), and moves every input
word through the DDR twice a sample (written by FP, read back by PG):
``2 · n_in · W_in²`` words. Its depth in DDR is the on-chip Act-RAM's (residency times the
sample's input words), checked against the channel's size.

The DDR channels of a board (:data:`DDR_CHANNELS`, from the board files' ``offchip_kind``):
on a node with Act-RAM in DDR and two or more channels, the Act-RAM takes one channel and
the FC weights (:mod:`.mapper`) the others; on a one-channel board they share it.

Placements (:data:`ACT_RAM_PLACEMENTS`): ``"chip"`` every Act-RAM in block RAM;
``"overflow"`` in DDR on a node whose block RAM cannot hold its storage (the fewest input
words moved through the DDR: a segment whose Act-RAM alone covers the overflow, the one of
least traffic, else the one saving the most words per word of traffic, repeated);
``"ddr"`` every segment's Act-RAM in DDR (frees block RAM for parameter balancing).
"""

import math

__all__ = ["ACT_RAM_PLACEMENTS", "DDR_CHANNELS", "ddr_channels", "staging_words",
           "traffic_words", "choose_spills", "ddr_cycles"]

ACT_RAM_PLACEMENTS = ("chip", "overflow", "ddr")

#: ``board name -> (channels, bytes per channel)``, as the board files' ``offchip_kind``
#: states them: VC709 two 4 GB DDR3 SODIMMs (UG887), ZC706 one 1 GB PL-side SODIMM
#: (UG954), VU9P (VCU118) two DDR4 component interfaces of 4 GB (UG1224), VCU128 two HBM2
#: stacks of 4 GB.
DDR_CHANNELS = {
    "vc709": (2, 4 << 30),
    "zc706": (1, 1 << 30),
    "vu9p": (2, 4 << 30),
    "vcu128": (2, 4 << 30),
}


def ddr_channels(board_name):
    """``(channels, bytes per channel)`` of a board; one channel of 1 GB for a board not in
    :data:`DDR_CHANNELS` (the least any listed board has)."""
    return DDR_CHANNELS.get(board_name, (1, 1 << 30))


def staging_words(n_in, w_in):
    """On-chip words of an Act-RAM held in DDR: two input rows of its channels."""
    return 2 * n_in * w_in


def traffic_words(n_in, w_in):
    """DDR words a sample moves for an Act-RAM held in DDR (written once, read once)."""
    return 2 * n_in * w_in ** 2


def choose_spills(candidates, over, everything=False):
    """The indices of ``candidates`` (``[(saving words, traffic words), ...]``) whose Act-RAM
    goes to DDR: all of them with ``everything``, else greedily until the savings cover
    ``over`` words (module docstring), or all of them if they cannot."""
    if everything:
        return [i for i, (saving, _) in enumerate(candidates) if saving > 0]
    chosen, left = [], {i for i, (saving, _) in enumerate(candidates) if saving > 0}
    while over > 0 and left:
        covering = [i for i in left if candidates[i][0] >= over]
        if covering:
            pick = min(covering, key=lambda i: (candidates[i][1], i))
        else:
            pick = max(left, key=lambda i: (candidates[i][0] / max(1, candidates[i][1]), -i))
        chosen.append(pick)
        left.discard(pick)
        over -= candidates[pick][0]
    return sorted(chosen)


def ddr_cycles(fc_bytes, act_bytes, gbytes_per_s, channels, clock_hz):
    """``(FC cycles, Act-RAM cycles)`` a sample of a node's DDR traffic takes: ``fc_bytes``
    of FC weights and ``act_bytes`` of Act-RAM, on ``channels`` channels sharing
    ``gbytes_per_s`` GB/s (module docstring)."""
    def cycles(nbytes, share):
        return math.ceil(nbytes / (gbytes_per_s * share * 1e9) * clock_hz)
    if act_bytes and channels >= 2:
        return (cycles(fc_bytes, (channels - 1) / channels),
                cycles(act_bytes, 1 / channels))
    if act_bytes:
        both = cycles(fc_bytes + act_bytes, 1)
        return both, both
    return cycles(fc_bytes, 1), 0

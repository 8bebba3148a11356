"""A node's storage (spec §2.9) for :mod:`.mapper`: words per kind of each segment
(:func:`segment_storage`), what moves to DDR with its Act-RAM (:func:`in_ddr`,
:mod:`.placement`), its weight banks (:func:`weight_banks`) and parameter balancing
(:func:`balance_banks`, spec §2.6)."""

import math

import numpy as np

from .cost import line_buffer_words
from .config import STORAGE_KINDS, HostedBanks, pab_pixels
from .placement import staging_words, traffic_words

__all__ = ["segment_storage", "in_ddr", "weight_banks", "balance_banks"]


def segment_storage(chain, segment, shape, residency, word_bits, line_pixels=1):
    """Words of a segment by kind (spec §2.9), and its off-chip words; its FP and PG line
    buffers take ``line_pixels`` pixels a cycle (:func:`.cost.line_buffer_words`)."""
    index, mode, lo, hi, completes = segment
    layer = chain.layers[index]
    pixels, n_out, n_in, k, modules = shape
    weights = n_out * n_in * k * k
    words = dict.fromkeys(STORAGE_KINDS, 0)
    offchip = 0
    if layer.kind == "fc":
        offchip = 2 * weights                    # weights and gradients in DDR
    else:
        words["lpram"] = words["lgb"] = weights
    words["bias"] = n_out if completes else 0
    words["act_ram"] = math.ceil(residency * n_in * layer.w_in ** 2)
    if layer.kind == "conv":
        fp = line_buffer_words(n_in, k, layer.w_in, line_pixels)
        eb = n_out * ((k - 1) * layer.w_out + k) if modules == 3 else 0
        words["line_buffers"] = 2 * fp + eb          # FP and PG windows, EB on δ maps
        words["pab"] = n_out * pab_pixels("conv", pixels)    # one row of partial sums
        words["error_buffer"] = n_in * layer.w_in if modules == 3 else 0
        if completes:
            outs = n_out * pixels
            bits = outs if layer.relu else 0
            if layer.pool is not None:
                bits += n_out * layer.w_pooled ** 2 * math.ceil(math.log2(layer.pool[0] ** 2))
            words["sfu_masks"] = math.ceil(residency * bits / word_bits)
    else:
        words["pab"] = n_out * pab_pixels("fc", pixels)
        words["error_buffer"] = n_in if modules == 3 else 0
    return words, offchip


def in_ddr(layer, n_in, words, residency):
    """A segment's Act-RAM and SFU masks held in DDR (:mod:`.placement`): ``{"saving":
    {kind: on-chip words freed}, "traffic": DDR words a sample, "words": DDR words, "act":
    the Act-RAM's of them}``. The
    masks travel with the Act-RAM (written by FP, read by EB as the activations by PG),
    two output rows of them staged on chip."""
    masks = words["sfu_masks"]
    per_sample = math.ceil(masks / residency) if masks else 0
    mask_stage = min(masks, math.ceil(2 * per_sample / layer.w_out)) if masks else 0
    act = words["act_ram"]
    return {"saving": {"act_ram": max(0, act - staging_words(n_in, layer.w_in)),
                       "sfu_masks": masks - mask_stage},
            "traffic": traffic_words(n_in, layer.w_in) + 2 * per_sample,
            "words": act + masks, "act": act}


def weight_banks(chain, segment, shape):
    """``(banks, words per bank)`` a segment's weights split into (one per channel of its
    range), none for FC (off chip)."""
    index, mode, lo, hi, _ = segment
    if chain.layers[index].kind == "fc":
        return 0, 0
    _, n_out, n_in, k, _ = shape
    return hi - lo, (n_out if mode == "ICP" else n_in) * k * k


def balance_banks(stores, banks, capacity_words):
    """Spec §2.11 step 5: move whole parameter banks of the most over-full node to the
    upstream node with the most free memory until all fit or no move helps. Updates
    ``stores`` (``bpram``/``bgb`` on the host, ``lpram``/``lgb`` off the consumer) and
    returns the :class:`HostedBanks`."""
    hosted = {}
    left = [[list(b) for b in node] for node in banks]
    while True:
        over = [sum(s.values()) - capacity_words for s in stores]
        worst = int(np.argmax(over))
        if over[worst] <= 0:
            break
        free = [capacity_words - sum(s.values()) for s in stores[:worst]]
        moved = False
        for host in sorted(range(worst), key=lambda h: -free[h]):
            for entry in sorted(left[worst], key=lambda e: -e[2]):
                name, count, size = entry
                if not count or 2 * size > free[host]:
                    continue
                n = min(count, math.ceil(over[worst] / (2 * size)), free[host] // (2 * size))
                entry[1] -= n
                for kind, sign, node in (("lpram", -1, worst), ("lgb", -1, worst),
                                         ("bpram", 1, host), ("bgb", 1, host)):
                    stores[node][kind] += sign * n * size
                key = (host + 1, worst + 1, name)
                hosted[key] = [hosted.get(key, [0, 0])[0] + n,
                               hosted.get(key, [0, 0])[1] + n * size]
                moved = True
                break
            if moved:
                break
        if not moved:
            break
    return [HostedBanks(host=host, consumer=consumer, layer=name, banks=count, words=words)
            for (host, consumer, name), (count, words) in sorted(hosted.items())]

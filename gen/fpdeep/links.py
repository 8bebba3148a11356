"""Link traffic between neighbouring nodes (spec §2.10, datapaths 1-6) and the two link-budget
conventions.

For the boundary between node ``m`` and ``m + 1`` (words per sample; times the word width
for bits):

* exactly between layers ``l`` and ``l + 1``: the complete input of ``l + 1``
  (``IC · W_in²``, pooled and flattened as it is read) each way (activations forward,
  errors backward);
* inside an ICP layer with a fraction ``f`` of its input channels upstream: forward
  ``(1 − f) · IC · W_in²`` (DP1, inputs bypassed to downstream nodes) ``+ OC · W_out²``
  (DP2, partial sums); backward ``OC · W_out²`` (DP3, δ relayed upstream) ``+ (1 − f) · IC ·
  W_in²`` (DP4, the downstream nodes' input errors);
* inside an OCP layer with a fraction ``f`` of its output channels upstream: forward
  ``IC · W_in²`` (every input to every node) ``+ f · OC · W_out²`` (the upstream outputs);
  backward ``IC · W_in²`` (the EB partial-error reduction) ``+ f · OC · W_out²`` (the δ of
  the upstream nodes' output channels) — the spec's "δ for downstream output channels"
  read as the δ the upstream nodes' channels need, which must cross the boundary;
* inside the network's first layer, no error term backward (neither DP4's relayed input
  errors under ICP nor the EB partial-error reduction under OCP): the first layer has no
  EB module, the image needs no δ (spec §2.8), so only the δ of its outputs (DP3) goes
  upstream, for PG;
* hosted parameters (spec §2.6, weight-pass order, ``R_bal`` = 1): every boundary between
  host and consumer carries the hosted words forward (DP5) and their gradients backward
  (DP6), once per sample.

On the wire (:func:`wire_bits`): the RTL link's framing of the boundary link
(:func:`.cluster_link.boundary_link`, the one the cluster simulator charges): a word of a
path takes ``(words_per_beat + 1 / max_beats) · link_bits / P`` bits, ``1 + 1/32`` of its
width on a link a whole number of words wide (fixed16 partial sums and gradients: 48-bit
words); :func:`link_period` charges that, :func:`link_gbps` and the words above are the
payload in words of ``word_bits``.

Conventions (spec §2.10): ``"link"`` (default): ``--link-gbps`` per neighbour link per
direction; ``"fpga"``: per FPGA, the sum of what it sends (and of what it receives) over
both its links.
"""

import math

from ...hw.fpdeep.link_config import BACKWARD, FORWARD
from .cluster_link import LinkFraming, boundary_link

__all__ = ["CONVENTIONS", "boundary_words", "link_period", "link_gbps", "wire_bits",
           "Boundary"]

#: Link-budget conventions.
CONVENTIONS = ("link", "fpga")


class Boundary(tuple):
    """``(forward, backward, where)`` words per sample of one boundary; :attr:`paths`
    splits them by link path (:data:`~nnrtl.hw.fpdeep.link_config.PATHS`), as the link
    frames them (partials and gradients in words of their own width)."""

    paths: dict

    def __new__(cls, forward, backward, where, paths):
        row = super().__new__(cls, (forward, backward, where))
        row.paths = paths
        return row


def boundary_words(chain, line, cuts, hosted=()):
    """``[(forward, backward, where), ...]`` (:class:`Boundary`) words per sample for each
    of the ``len(cuts)`` boundaries, and a description of where each falls."""
    first_unit = {}
    for u, layer in enumerate(line.layer):
        first_unit.setdefault(int(layer), u)
    result = []
    for b, c in enumerate(cuts):
        c = int(c)
        index = int(line.layer[c])
        layer = chain.layers[index]
        if c == first_unit[index]:
            words = float(layer.in_words)
            result.append([f"between {chain.layers[index - 1].name} and {layer.name}"
                           if index else f"before {layer.name}",
                           {"act": words, "error": words}])
            continue
        count = layer.oc if line.modes[index] == "OCP" else layer.ic
        f = (c - first_unit[index]) / count
        outs = layer.oc * layer.w_out ** 2
        eb = layer.modules == 3             # the first layer has no EB: no input errors
        if line.modes[index] == "ICP":
            paths = {"act": (1 - f) * layer.in_words, "partial": float(outs),
                     "delta": float(outs), "error": (1 - f) * layer.in_words if eb else 0.0}
        else:
            paths = {"act": float(layer.in_words), "partial": f * outs, "delta": f * outs,
                     "error": float(layer.in_words) if eb else 0.0}
        result.append([f"inside {layer.name} ({line.modes[index]}, "
                       f"{c - first_unit[index]} of {count} channels upstream)", paths])
    for bank in hosted:
        for b in range(bank.host - 1, bank.consumer - 1):     # nodes are numbered from 1
            paths = result[b][1]
            paths["param"] = paths.get("param", 0.0) + bank.words
            paths["grad"] = paths.get("grad", 0.0) + bank.words
    return [Boundary(sum(paths.get(p, 0.0) for p in FORWARD),
                     sum(paths.get(p, 0.0) for p in BACKWARD), where, paths)
            for where, paths in result]


def link_loads(words, convention):
    """Words per sample each budgeted channel carries: per boundary
    ``max(forward, backward)`` (``"link"``), or per node the larger of what it sends and
    what it receives (``"fpga"``)."""
    if convention == "link":
        return [max(fwd, bwd) for fwd, bwd, _ in words]
    nodes = len(words) + 1
    loads = []
    for m in range(nodes):
        tx = (words[m][0] if m < nodes - 1 else 0) + (words[m - 1][1] if m else 0)
        rx = (words[m - 1][0] if m else 0) + (words[m][1] if m < nodes - 1 else 0)
        loads.append(max(tx, rx))
    return loads


def wire_bits(words, word_bits, gbps, clock_hz):
    """``[(forward, backward, where), ...]``: the bits per sample each boundary of
    ``words`` takes on the wire of the boundary link at ``gbps`` (headers of full packets
    included; per path with :class:`Boundary` rows, else all as activations)."""
    framing = LinkFraming.of_link(boundary_link(word_bits, gbps, clock_hz))
    result = []
    for row in words:
        paths = getattr(row, "paths", None)
        if paths is None:
            paths = {"act": row[0]}, {"act": row[1]}
        else:
            paths = ({p: w for p, w in paths.items() if p in FORWARD},
                     {p: w for p, w in paths.items() if p in BACKWARD})
        result.append(tuple(sum(framing["act" if p not in framing else p].wire_bits(w)
                                for p, w in side.items()) for side in paths) + (row[2],))
    return result


def link_period(words, word_bits, clock_hz, gbps, convention):
    """The shortest period (cycles per sample) the links allow, framing included; 0
    without a limit."""
    if gbps is None or not words:
        return 0
    busiest = max(link_loads(wire_bits(words, word_bits, gbps, clock_hz), convention))
    return math.ceil(busiest / (gbps * 1e9) * clock_hz)


def link_gbps(words, word_bits, clock_hz, period):
    """``[(forward, backward), ...]`` Gb/s each boundary needs at ``period``."""
    rate = clock_hz / period
    return [(fwd * word_bits * rate / 1e9, bwd * word_bits * rate / 1e9)
            for fwd, bwd, _ in words]

"""The cluster simulator's prediction for the RTL chain bench (issue 14: "the cluster
simulator agrees with the RTL chain within 2%").

:func:`chain_plan` builds, from the :class:`~nnrtl.hw.fpdeep.config.FpConfig` of each node
of an ICP-split layer (:func:`nnrtl.sim.tb.fpdeep_chain.icp_chain`), the
:class:`~.cluster_node.ClusterPlan` of the same chain: one layer, one segment per node with
the FP module's ``P``, ``Q``, channels and map, the node's inputs from the host
(``host_inputs``: the bench delivers each node's channels, DP1 is not on the links).
:func:`predict` runs its :class:`~.cluster_node.NodeModel` forward passes with the bench's
links (:class:`~.cluster_link.Link` with the :class:`~.cluster_link.LinkFraming` of the
same :class:`~nnrtl.hw.fpdeep.link_config.LinkConfig`, one link word per cycle) and the
node timing of the RTL (:func:`rtl_timing`), and returns the cycle each image's output is
complete, as :func:`nnrtl.sim.tb.fpdeep_chain.run` reports ``image_cycles``.
"""

import numpy as np

from ...hw.fpdeep.conv import ce_latency
from ...hw.fpdeep.link_config import LinkConfig
from .cluster_link import LinkFraming
from .cluster_node import ClusterPlan, NodeModel, NodeTiming
from .config import FpdeepNodeConfig, SegmentConfig

__all__ = ["chain_plan", "rtl_timing", "link_latency", "predict", "compare"]


def chain_plan(configs):
    """The :class:`ClusterPlan` of the chain of FP modules ``configs`` (one layer split
    over the nodes at contiguous input channels)."""
    first = configs[0]
    n_in = sum(cfg.n_in for cfg in configs)
    layer = {"name": "conv", "kind": "conv", "ic": n_in, "oc": first.n_out, "k": first.k,
             "stride": first.stride, "pad": first.pad, "w_in": first.w_in,
             "w_out": first.w_out, "pool": configs[-1].pool, "relu": configs[-1].relu,
             "first": True}
    nodes, lo = [], 0
    for m, cfg in enumerate(configs, 1):
        units = 2 * cfg.macs
        seg = SegmentConfig(
            "conv", 0, "conv", "ICP", lo, lo + cfg.n_in, cfg.n_in, cfg.n_out, cfg.k,
            cfg.pixels, cfg.p, cfg.q, 2, units, units, 0, cfg.cycles,
            2 * cfg.pixels * cfg.n_out * cfg.n_in * cfg.taps, cfg.completes, 1.0,
            stride=cfg.stride, pad=cfg.pad, w_in=cfg.w_in,
            pool=cfg.pool if cfg.completes else None, relu=cfg.relu)
        lo += cfg.n_in
        nodes.append(FpdeepNodeConfig(m, (seg,), units, units, 0, (), 0, (), 0,
                                      cfg.word_bits).as_json())
    return ClusterPlan({
        "network": {"name": "rtl-chain", "layers": [layer],
                    "work_macs_per_sample": sum(s["segments"][0]["work"] for s in nodes)},
        "nodes": nodes,
        "cost_model": {"word_bits": first.word_bits, "precision": first.precision,
                       "clock_hz": 200e6},
        "options": {"link_gbps": None, "link_convention": "link", "host_inputs": True},
        "summary": {"period_cycles": max(cfg.cycles for cfg in configs),
                    "ddr_period_cycles": 0},
        "boundaries": []}, where="the RTL chain")


def rtl_timing(cfg):
    """The :class:`NodeTiming` of the FP module ``cfg`` (:mod:`nnrtl.hw.fpdeep.fp`'s
    registers; the simulator's module starts a pixel the cycle its window is valid at the
    line buffer's output):

    * ``fp_latency``: the feed register (1), the CE array
      (:func:`~nnrtl.hw.fpdeep.conv.ce_latency`), the pass accumulator (1 with
      ``passes > 1``); ``part_out`` is combinational from there;
    * ``add_latency``: the chained partial add, one register (fixed16) or the adder's
      stages (fp32);
    * ``sfu_latency``: the bias add (fixed16: the add and the rescale, 2; fp32 the adder's
      stages), ReLU combinational, and with a pool its line buffer (the take, the issue,
      the output register: 2) and the pool's output register (1);
    * ``loss_latency`` 1: the bench counts an image done the cycle after its last output
      beat is taken."""
    add = 1 if cfg.precision == "fixed16" else cfg.adder_stages
    bias = 2 if cfg.precision == "fixed16" else cfg.adder_stages
    fp = 1 + ce_latency(cfg, cfg.q, cfg.taps) + int(cfg.passes > 1)
    return NodeTiming(fp_latency=fp, add_latency=add,
                      sfu_latency=bias + (3 if cfg.pool is not None else 0),
                      relay_latency=0, loss_latency=1)


def link_latency(link):
    """Cycles from a beat's last word on the wire to its ``rx_<path>`` valid, beyond the
    grant (1 cycle when the link is idle) and the packet's words that the
    :class:`~.cluster_link.Link` charges: the receive FIFO's write and buffered read (2).
    Measured on the link pair alone (:class:`~nnrtl.sim.tb.fpdeep_link.LinkPair`, one
    beat offered to an idle link, no pauses): ``rx`` valid 5 cycles after the offer on
    a 192-bit link (a header and one word), 7 on a 64-bit one (a header and three words),
    i.e. ``1 + 1 + words_per_beat + 2``, for every ``link`` (a parameter for the
    interface, one constant)."""
    return 2


def predict(configs, images, link_options=None, start=0.0):
    """Per image the cycle its last output beat leaves the chain's last node, the images
    offered from cycle ``start`` on (the bench's ``start_cycle``)."""
    plan = chain_plan(configs)
    nodes = []
    for m, cfg in enumerate(configs, 1):
        link = LinkConfig.from_fp(cfg, "down", **(link_options or {}))
        framing = LinkFraming.of_link(link, whole_beats=True)
        # one link word (of link_bits) a cycle: the bench's link output is always ready
        nodes.append(NodeModel(plan, m, rtl_timing(cfg), cfg.word_bits / link.link_bits,
                               link_latency(link), 0, framing))
    done = []
    for s in range(images):
        incoming = {}
        for node in nodes:
            incoming = node.forward(s, incoming, start)
        done.append(nodes[-1].losses[-1])
    return np.asarray(done)


def compare(configs, report, link_options=None):
    """The RTL chain bench's ``report`` (:func:`nnrtl.sim.tb.fpdeep_chain.run` under the
    ``none`` pattern) beside the simulator's prediction for the same chain: the first
    image's latency (from ``start_cycle``) and the steady-state period (the mean spacing
    of the done cycles over the second half of the images, as :mod:`.cluster` measures
    it), each with its relative error."""
    measured = np.asarray(report["image_cycles"], dtype=np.float64)
    k = measured.size
    if k < 3:
        raise ValueError(f"report must hold at least 3 images for a period, not {k}")
    start = float(report["start_cycle"])
    model = predict(configs, k, link_options, start)
    a, b = k // 2, k - 1
    figures = {}
    for name, rtl, sim in (("first", measured[0] - start, model[0] - start),
                           ("period", (measured[b] - measured[a]) / (b - a),
                            (model[b] - model[a]) / (b - a))):
        figures[f"{name}_rtl"] = float(rtl)
        figures[f"{name}_model"] = float(sim)
        figures[f"{name}_error"] = float(sim / rtl - 1)
    figures["within_2pct"] = all(abs(figures[f"{n}_error"]) <= 0.02
                                 for n in ("first", "period"))
    return figures

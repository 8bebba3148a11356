"""The ``rtl`` backend of ``nnrtl train fpdeep``: each training step's mini-batch through
the chain of node tops joined by link modules (:class:`~nnrtl.sim.tb.fpdeep.chain_train.ChainTrainTop`,
the node-to-link adapter :mod:`nnrtl.hw.fpdeep.chain_link`), in the Amaranth simulator.
"""

import dataclasses
import time

import numpy as np

from ..errors import CheckFailed, UsageError

__all__ = ["chain_config", "lr_word", "RtlChain"]


def lr_word(precision, lr, batch):
    """The ``lr`` register of the nodes: ``η/B`` as fixed16 Q0.16 (rounded, at least 1) or
    fp32 bits; ``UsageError`` when it does not fit."""
    rate = lr / batch
    if precision == "fp32":
        return int(np.array(rate, np.float32).view(np.uint32))
    word = int(round(rate * (1 << 16)))
    if not 1 <= word < 1 << 16:
        raise UsageError(f"--lr {lr} over batch {batch}: the fixed16 nodes' rate register "
                         f"holds eta/B in Q0.16, from 2^-16 to below 1")
    return word


def chain_config(layers, mapping, precision, frac_bits, batch, lr):
    """The :class:`~nnrtl.hw.fpdeep.chain_config.ChainConfig` of the conv ``layers``
    (:func:`.chain.conv_segments`) of ``mapping``, ``lag`` = ``batch``; ``UsageError`` for
    a mapping the RTL chain does not run (module docstring). fp32 nodes build the MAC
    variant of the mapping's cost model (its ``multiplier_shifts`` / ``adder_shifts``)."""
    from nnrtl.hw.fpdeep.chain_config import ChainConfig
    from nnrtl.hw.fpdeep.node import FpdeepConfig

    order = {index: t for t, index in enumerate(sorted(layers))}
    for node in mapping.nodes:
        if not any(s.kind == "conv" for s in node.segments):
            raise UsageError(f"--backend rtl: node {node.node} holds no conv segment (its "
                             f"layers run on the host); the node chain needs one a node")
        wide = [s for s in node.segments if s.line_pixels > 1]
        if wide:
            raise UsageError(f"--backend rtl: node {node.node}'s {wide[0].layer} takes "
                             f"line_pixels {wide[0].line_pixels} input pixels a cycle; the RTL "
                             f"line buffer takes 1 (the wider one is modelled, not built): "
                             f"map on fewer FPGAs")
    p = min(s.cfg.p for segments in layers.values() for s in segments)
    word = lr_word(precision, lr, batch)
    model = mapping.model
    shifts = ({"multiplier_shifts": model.multiplier_shifts, "adder_shifts": model.adder_shifts}
              if precision == "fp32" and model.multiplier_shifts else {})
    nodes, chain_layers = [], []
    for node in mapping.nodes:
        config = FpdeepConfig.from_node(node, precision, batch=batch, lr=word,
                                        reshape=lambda cfg: dataclasses.replace(cfg, p=p),
                                        frac_bits=frac_bits, **shifts)
        nodes.append(dataclasses.replace(config, act_images=max(config.act_images,
                                                                batch + 1)))
        chain_layers += [order[s.index] for s in node.segments if s.kind == "conv"]
    try:
        return ChainConfig(tuple(nodes), lag=batch, layers=tuple(chain_layers))
    except ValueError as error:
        raise UsageError(f"--backend rtl: {error}") from None


class RtlChain:
    """Steps of the conv layers on the RTL chain (what the chain runs: Notes below).

    Parameters
    ----------
    config : ChainConfig
    segments : list of Segment
        The conv layers' segments in node order, one a node (:func:`.chain.conv_segments`).
    codec : Codec
    pattern : str
    seed : int
    simulator : str
        ``"amaranth"`` or ``"verilator"`` (:func:`nnrtl.sim.tb.fpdeep.chain_verilator.chain_runner`).

    Attributes
    ----------
    record : dict or None
        The last step's: ``bit_exact``, ``pattern``, ``cycles``, ``link_words``,
        ``seconds``, ``mismatches``.

    Notes
    -----
    **What the chain runs (decisions)**

    * **The mappings it takes**: a CNN's convolution layers (Flatten/Linear on the host,
      :mod:`.trainer`) as a layer pipeline: the first conv layer split by output channels
      (OCP) or by input channels (ICP: DP2 partial sums downstream, the completing node's δ
      relayed back up) over one or more nodes, each later conv layer likewise (OCP: its EB's
      partial errors summed up the chain; ICP: each node's EB errors of its channel range
      gathered by the layer's first node), a node holding the end of one layer and the start
      of the next (a node of several segments: the mapper's usual cut); the nodes joined by
      their links, each segment by its adapter (:mod:`nnrtl.hw.fpdeep.chain_link`:
      activations downstream as the next layer's input, a layer's EB output upstream as the
      errors of the layer before). :func:`chain_config` refuses (``UsageError``, exit 2) a
      node without a conv segment, and what :class:`~nnrtl.hw.fpdeep.chain_config.ChainConfig`
      refuses (a segment the chain's rules do not place), naming the node and the rule.
      Every node's ``P`` is the smallest of the mapper's (the link's beat is one ``P``;
      ``P`` changes the parallelism, not a bit of the results).
    * **A step on the RTL**: the nodes are loaded with the step's weights (the host's master
      weights as words, as the golden backend does), the mini-batch's ``B`` images go in with
      ``lag`` = ``B`` (every image's FP before any error: FP on the step's weights, i.e.
      ``--pipeline flush``, the only rule a chain reloaded every step can run; ``stale`` is
      refused), then the host's errors; each node's PG and weight update run in the RTL
      (``lr`` register ``η/B``: fixed16 Q0.16, fp32 bits). Then the same ``B`` images go in
      again without errors (probes): the last of them runs FP on the weights the nodes'
      updates wrote (the rule of ``lag`` = ``B``, :mod:`nnrtl.hw.fpdeep.chain_link`), so the
      check reads the updated weights through the datapath.
    * **The check**: every segment's activations and EB output (the step's images and the
      probes) bit-exact against its golden model, the models composed along the chain
      (:func:`nnrtl.sim.tb.fpdeep.chain_train.compose`: a layer's input is the previous
      layer's output, a layer's error the next layer's EB output;
      :func:`nnrtl.sim.tb.fpdeep.node.expected`, the update
      :func:`nnrtl.sim.golden.fpdeep.update.update_segment`), and the step's last-layer
      activations equal to the golden chain's (:class:`.chain.ConvChain`, the words the
      host's FC layers got): ``bit_exact``. A step that is not raises
      :class:`~nnrtl.gen.errors.CheckFailed` (exit 1). The gradients the interface's SGD step
      uses are the golden chain's PG words, which the RTL's data equal when ``bit_exact``
      holds (the host runs the step's forward before the errors exist; the RTL run replays it
      with the errors, the order a host attached to the chain would use).
    * **Backpressure**: ``--backpressure`` pauses every link channel, the host's streams
      (gaps) and its sink (stalls) with one of :data:`~nnrtl.sim.patterns.PATTERNS`.
    """

    def __init__(self, config, segments, codec, *, pattern="none", seed=1,
                 simulator="amaranth"):
        self.config, self.segments, self.codec = config, segments, codec
        self.pattern, self.seed, self.simulator = pattern, seed, simulator
        self.record = None

    def _decode(self, beats, node):
        """Node ``node``'s block of an image (host beats) as ``(side, side, n_out)`` words."""
        cfg, bits = self.config.segment(node), self.config.word_bits
        words = np.array([[(b >> (k * bits)) & ((1 << bits) - 1) for k in range(cfg.p)]
                          for b in beats], np.int64)
        if self.codec.precision == "fixed16":
            words = np.where(words >= 1 << 15, words - (1 << 16), words)
        side = cfg.pool_out
        return words.reshape(side, side, -1)[..., :cfg.n_out]

    def step(self, images, weights, errors, outputs):
        """Run a mini-batch: ``images`` per sample ``(H, W, C)`` words, ``weights``
        ``{chain layer index: (W, bias)}`` words, ``errors`` per sample the host's error of
        the last conv layer's output ``(side, side, OC)`` words, ``outputs`` the golden
        chain's activations of it per sample (the same shape). Returns :attr:`record`;
        raises CheckFailed."""
        from nnrtl.sim.tb.fpdeep.chain_verilator import chain_runner
        run_cases = chain_runner(self.simulator)

        start = time.monotonic()
        config, count = self.config, 2 * len(images)
        acts = np.stack([np.asarray(i, np.int64) for i in images] * 2)
        cases = []
        for n, s in enumerate(self.segments):
            w, b = weights[s.seg.index]
            cfg = s.cfg
            if config.layers[n] == config.layers[-1] and cfg.completes:
                err = [np.asarray(e[..., s.out_range], np.int64) for e in errors]
                err = np.stack(err + [np.zeros_like(err[0])] * len(err))
            else:           # the next layer's EB output or δ (the chain's composition)
                side = cfg.pool_out if cfg.completes else cfg.w_out
                err = np.zeros((count, side, side, cfg.n_out), np.int64)
            cases.append({
                "act": acts[..., s.in_range] if config.layers[n] == 0 else np.zeros(
                    (count, cfg.w_in, cfg.w_in, cfg.n_in), np.int64),
                "weights": np.asarray(w[s.out_range][:, s.in_range], np.int64),
                "bias": np.asarray(b[s.out_range], np.int64), "partial_in": None,
                "err": err})
        report = run_cases(config, cases, self.pattern, probes=len(images), seed=self.seed)
        wrong = list(report["mismatches"])
        for k, received in enumerate(report["received"][:len(images)]):
            for n in config.completing(config.layers[-1]):
                s, up = self.segments[n], config.upstream_beats(n)
                block = received[up:up + config.block_beats(n)]
                if len(block) == config.block_beats(n) and not np.array_equal(
                        self._decode(block, n), np.asarray(outputs[k])[..., s.out_range]):
                    wrong.append(f"image {k}: node {s.node}'s activations differ from the "
                                 f"golden chain's")
        self.record = {"bit_exact": report["bit_exact"] and not wrong,
                       "pattern": self.pattern, "cycles": report["cycles"],
                       "link_words": report["link_words"], "mismatches": wrong[:4],
                       "seconds": round(time.monotonic() - start, 3)}
        if not self.record["bit_exact"]:
            reason = report["timed_out"] or ("a link fault" if report["fault"] else
                                             "; ".join(wrong[:4]))
            raise CheckFailed(f"the RTL chain's mini-batch is not bit-exact against the "
                              f"golden models ({self.pattern} backpressure): {reason}")
        return self.record

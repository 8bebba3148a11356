"""The FPDeep training step behind the platform's training interface
(:mod:`nnrtl.gen.train`): ``nnrtl train fpdeep --model cnn.pt --fpgas 3 --backend golden``.

The CNN is mapped onto ``--fpgas`` boards by the engine's mapper (:func:`.mapper.map_network`,
the same mapping ``nnrtl map fpdeep`` prints); its conv layers run segment by segment on the
nodes holding them (:class:`.chain.ConvChain`): FP with the ICP partial chain and OCP output
ranges, the completing node's bias, ReLU and max-pool, the SFU backward step, PG over the
mini-batch and EB for every layer but the first, each through a node runner (the golden
models: :class:`.chain.GoldenRunner`). With ``--backend rtl`` each step's mini-batch also
runs through the chain of node tops and link modules, checked bit-exact
(:mod:`.chain_rtl`: a layer pipeline, the first conv layer split by output or input
channels, each later conv layer on one node or split by output channels, a node holding
one or two layers' segments).
"""

import dataclasses
import math

import numpy as np

from nnrtl.hw.fpdeep.config import PRECISIONS
from nnrtl.sim.patterns import PATTERNS

from ..errors import UsageError
from .chain import Codec, ConvChain, GoldenRunner, conv_segments, rtl_limits
from .fc_stage import FcStage, fc_tail
from .hooks import _options as map_options

__all__ = ["FpdeepTrainConfig", "FpdeepTrainer", "train_hook", "parse_options",
           "GRADIENT_BOUND", "DEFAULT_FRAC_BITS", "PIPELINES"]

#: ``--frac-bits`` of fixed16 training.
DEFAULT_FRAC_BITS = 13
#: ``--pipeline``: the pipeline's stale-weight rule, or a flush per mini-batch.
PIPELINES = ("stale", "flush")
#: Gradient bound per precision (Notes of :class:`FpdeepTrainer`); fixed16's at f = 13.
GRADIENT_BOUND = {"fp32": 1e-4, "fixed16": 5e-2}

_USAGE = ("--fpgas N (required), --precision fp32|fixed16, --frac-bits F (fixed16, 1 .. 15), "
          "--pipeline stale|flush, --backpressure none|cycle|random|bursty and --simulator "
          "amaranth|verilator (--backend rtl)")


@dataclasses.dataclass(frozen=True)
class FpdeepTrainConfig:
    """What ``nnrtl train fpdeep`` trains with (written to ``train.json``).

    Attributes
    ----------
    fpgas : int
    precision : str
    frac_bits : int
        Fraction bits of fixed16 words (ignored in fp32).
    pipeline : str
        ``"stale"`` or ``"flush"`` (Notes of :class:`FpdeepTrainer`).
    image_size : int
    board : str
    backpressure : str
        The pause pattern on the RTL chain's links and host streams (``--backend rtl``,
        :mod:`.chain_rtl`).
    simulator : str
        What runs the RTL chain (``--backend rtl``): ``"amaranth"`` (Amaranth's simulator)
        or ``"verilator"`` (:mod:`nnrtl.sim.tb.fpdeep.chain_verilator`; same checks and
        cycles, a build of minutes for fixed16, impractical for fp32).
    """

    fpgas: int
    precision: str = "fp32"
    frac_bits: int = DEFAULT_FRAC_BITS
    pipeline: str = "stale"
    image_size: int = 1
    board: str = ""
    backpressure: str = "none"
    simulator: str = "amaranth"

    def __post_init__(self):
        from nnrtl.sim.tb.fpdeep.chain_train import SIMULATORS
        for name, least in (("fpgas", 1), ("image_size", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise UsageError(f"--{name.replace('_', '-')} must be a positive integer, "
                                 f"not {value!r}")
        for name, choices in (("precision", PRECISIONS), ("pipeline", PIPELINES),
                              ("backpressure", PATTERNS), ("simulator", SIMULATORS)):
            if getattr(self, name) not in choices:
                raise UsageError(f"--{name} must be one of {', '.join(choices)}, not "
                                 f"{getattr(self, name)!r}")
        if not isinstance(self.frac_bits, int) or not 1 <= self.frac_bits <= 15:
            raise UsageError(f"--frac-bits must be an integer from 1 to 15, not "
                             f"{self.frac_bits!r}")

    @property
    def gradient_bound(self):
        if self.precision == "fp32":
            return GRADIENT_BOUND["fp32"]
        return GRADIENT_BOUND["fixed16"] * 2.0 ** (DEFAULT_FRAC_BITS - self.frac_bits)


def _optional(add):
    """``add`` with no option required (:func:`parse_options` names a missing one)."""
    def relaxed(group):
        add(group)
        for action in group._actions:
            action.required = False
    return relaxed


def train_options(group):
    """Add ``nnrtl train fpdeep``'s own options to the argument group ``group``
    (:attr:`Engine.options <nnrtl.gen.engines.Engine.options>`)."""
    from ...sim.patterns import PATTERNS

    group.add_argument("--fpgas", type=int, required=True, metavar="N",
                       help="boards in the chain the CNN is mapped onto")
    group.add_argument("--precision", metavar="P", help="fp32 or fixed16 (default "
                       f"{FpdeepTrainConfig.precision})")
    group.add_argument("--frac-bits", type=int, metavar="F", help="fixed16: fraction bits, "
                       f"1 to 15 (default {FpdeepTrainConfig.frac_bits})")
    group.add_argument("--pipeline", metavar="stale|flush", help="stale: the pipeline's "
                       "stale-weight rule, applied to the reference too; flush: each step's "
                       "weights for the whole mini-batch (the default, and the only one with "
                       "--backend rtl)")
    group.add_argument("--backpressure", metavar="|".join(PATTERNS), help="--backend rtl: "
                       "pauses on the links and the host's streams (default none)")
    group.add_argument("--simulator", metavar="amaranth|verilator", help="--backend "
                       "rtl: the chain in the Amaranth simulator (default) or under Verilator")


def parse_options(options):
    """``{name: value}`` of the engine options given (``request.options``: by dest, or
    command-line tokens, :func:`~nnrtl.gen.engines.option_values`; the ones left ``None``
    dropped). Raises :class:`UsageError` without ``fpgas`` or for a name that is no
    option."""
    from ..engines import option_values

    known = {"fpgas", "precision", "frac_bits", "pipeline", "backpressure", "simulator"}
    given = option_values(_optional(train_options), options, prog="nnrtl train fpdeep")
    found = {key: value for key, value in given.items() if value is not None}
    unknown = sorted(set(found) - known)
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r}: the fpdeep engine takes {_USAGE}")
    if "fpgas" not in found:
        raise UsageError(f"--fpgas is required: the fpdeep engine takes {_USAGE}")
    return found


def _host_start(network):
    """Index of the first host layer (Flatten or Linear), ``len(layers)`` if none."""
    from ..models import Flatten, Linear
    for index, layer in enumerate(network.layers):
        if isinstance(layer, (Flatten, Linear)):
            return index
    return len(network.layers)


def _weighted(network):
    """Network indices of the weighted layers: the mapper's chain order."""
    from ..models import Conv2d, Linear
    return [n for n, layer in enumerate(network.layers) if isinstance(layer, (Conv2d, Linear))]


class FpdeepTrainer:
    """The training step of :mod:`nnrtl.gen.train` on an FPDeep chain.

    Parameters
    ----------
    config : FpdeepTrainConfig
    mapping : Mapping
        The mapper's (:func:`.mapper.map_network`) of the network at ``config``.
    runner : NodeRunner, optional
        The nodes' modules (default :class:`.chain.GoldenRunner`).
    rtl : RtlChain, optional
        The ``rtl`` backend (:mod:`.chain_rtl`): each step's mini-batch also runs through
        the RTL chain, checked bit-exact against the golden models (CheckFailed if not).

    Attributes
    ----------
    gradient_bound : float
        :data:`GRADIENT_BOUND` of the precision (Notes below).

    Notes
    -----
    **Decisions (the paper leaves them open)**

    * **Fully connected layers on the FC engine** (spec §3.9, :mod:`.fc_stage`): a tail
      ``Flatten, Linear, (ReLU, Linear)*`` runs on the last node's FC engine
      (:mod:`nnrtl.hw.fpdeep.fc`, its golden model; with ``--backend rtl`` also its RTL,
      checked bit-exact), in the nodes' words: the host keeps only the loss. Another tail
      (a Dropout, a final ReLU) runs on the host in PyTorch float32, the last conv layer's
      SFU output decoded to floats and the error of it encoded.
    * **Words**: fp32 bit patterns (``hw/arith`` RNE); fixed16 16-bit codes with
      ``--frac-bits`` fraction bits (default :data:`DEFAULT_FRAC_BITS` = 13, Q2.13) for
      activations, weights *and* errors (one format per node, FpConfig's). 13 keeps the
      activations of a small CNN with inputs in [-1, 1] below the ±4 the format holds
      (saturation beyond), and resolves the errors of a mean loss (order 1e-3 .. 1e-1) to
      2^-14 ≈ 6e-5; Q8.8 rounds most such errors to zero, and at 12 bits the test CNN's
      conv1 gradients already err by 1e-2 (a max-pool tie after rounding) against 4e-4 at
      13. Host floats → words: fp32 float32 rounding, fixed16 ``x·2^f`` rounded half up,
      saturated. Gradients come back exact (PG's LGB sums).
    * **Master weights on the host**: the interface's SGD step (``torch.optim.SGD``) updates
      float64 weights; each step loads them into the nodes as words.
    * **Mini-batch and stale weights** (spec §3.8), ``--pipeline stale`` (default): the chain
      streams one sample per period ``T``; a segment's weights are updated as soon as its PG
      has consumed the last sample of mini-batch ``M``, which happens ``D_s`` cycles after
      that sample's FP there (``R_s = D_s / T``, the segment's Act-RAM residency, the
      mapper's). Number the samples ``g = M·B + j`` (mini-batch ``M`` from 0, sample ``j``
      in it, batch ``B``); sample ``g`` reaches the segment's FP at ``g·T`` and the update
      after mini-batch ``u`` lands at ``((u + 1)·B − 1)·T + D_s``. The FP of sample ``g``
      therefore uses the weights after the ``k = max(0, ⌊(g + 1 − R_s) / B⌋)`` updates that
      landed before it (at most ``M``: :meth:`FpdeepTrainer.weight_version`), and EB and PG use
      the weights current at EB time, i.e. mini-batch ``M``'s (no weight stashing: EB reads
      LPRAM after the update). With ``R_s ≤ B + 1`` that is: the first ``⌈R_s⌉ − 1``
      samples of each mini-batch after the first run FP with the previous mini-batch's
      weights (the paper's "first 5 samples"); a deeper pipeline (small maps, small batches)
      reaches further back. The FC layers run the mini-batch's forward and backward passes
      on the step's weights: never stale. :meth:`FpdeepTrainer.forward_networks` gives the interface
      each sample's forward weights, and its float64 reference applies the same rule
      (:func:`nnrtl.gen.train.reference_step`). ``--pipeline flush`` drains the pipeline
      between mini-batches (GPipe's flush): plain SGD.

    **Gradient bound (:data:`GRADIENT_BOUND`)**

    fp32: a gradient element of a conv layer is the PG sum of ``n = B·W_out²`` rounded
    products ``δ·A`` (``δ`` and ``A`` themselves after ``m`` rounded operations: the FP sums of
    ``S_IC·K²`` products and the partial adds, the EB sums of ``OC·K²`` products, the host's
    float32 FC); the classic bound is ``|error| ≤ (n + m)·u·Σ|δ·A|`` with ``u = 2^-24``. For
    the interface's CNNs (maps up to 32×32, batch up to 8, ``n + m ≤ 9000``) and gradients
    ``Σ|δ·A| ≤ 1`` (mean losses) that is ``≤ 5.4e-4`` worst case and ``√(n+m)·u ≈ 6e-6``
    typical; :data:`GRADIENT_BOUND` ``fp32`` = 1e-4 (the FARNN engine's) holds with the
    measured errors (``tests/fpdeep/gen/test_fpdeep_trainer.py``: 1e-8 .. 3e-8 on the 3×11×11 CNN,
    at most 7e-7 on the 3×32×32 one) two orders below it.
    fixed16: words are rounded to ``q = 2^-f``; a PG sum of ``n = B·W_out²`` products
    ``δ·A``, both rounded (``|e| ≤ q/2`` each, plus what FP and EB carry forward, a few ``q``
    per layer: ``c·q``), errs by up to ``n·(|A|max + |δ|max)·c·q``: with ``n = 242`` (11×11
    maps, batch 2), ``|A| ≤ 1.5``, ``c = 2``, ``q = 2^-13`` that is 0.09 worst case and
    ``√n`` times less (6e-3) typical. And a max-pool window whose values tie after rounding
    routes its δ to the first maximum where PyTorch float64 (no tie) routes it to another
    pixel, moving a gradient by up to ``|δ|·|A|`` (≈ 1e-2 measured at f = 12). ``fixed16``
    = 5e-2 at f = 13 covers one such tie and the typical rounding: a coarse, documented
    bound (the strong fixed16 check is that the chain's split does not change a bit,
    ``tests/fpdeep/gen/test_fpdeep_trainer.py``). Measured largest gradient errors at f = 13: 3e-4 ..
    5e-4 on the 3×11×11 test CNN (batch 1 and 2), 7e-3 .. 1.1e-2 on the slow test's 3×32×32
    CNN (batch 4, ``n = 4096``), i.e. 5 times below the bound there. Another ``--frac-bits``
    scales it by ``2^(13 − f)``.
    """

    def __init__(self, config, mapping, runner=None, rtl=None, lr=None):
        if not isinstance(config, FpdeepTrainConfig):
            raise TypeError(f"config must be an FpdeepTrainConfig, not {config!r}")
        self.config = config
        self.mapping = mapping
        self.gradient_bound = config.gradient_bound
        self.codec = Codec(config.precision, config.frac_bits)
        self.layers = conv_segments(mapping, config.precision, config.frac_bits)
        if not self.layers:
            raise UsageError(f"{mapping.chain.name}: no Conv2d layer; the fpdeep chain trains "
                             f"convolution layers (fully connected ones run on the host)")
        self.chain = ConvChain(self.layers, mapping.chain, self.codec,
                               runner or GoldenRunner())
        self.rtl = rtl
        self.lr = lr
        self._fc = None
        self._network = self._last = None
        self._history = []          # the networks of the last mini-batches, oldest first
        self._step = -1
        self._batch = 0

    def weight_version(self, step, sample, segment):
        """The mini-batch whose weights the FP of ``sample`` of mini-batch ``step`` uses on
        ``segment``: ``min(step, max(0, ⌊(step·B + sample + 1 − R_s) / B⌋))`` (module
        docstring); ``step`` with ``flush``."""
        if self.config.pipeline == "flush":
            return step
        batch = self._batch
        return min(step, max(0, math.floor((step * batch + sample + 1
                                            - segment.seg.residency) / batch)))

    def _version(self, sample, segment):
        """Index into the kept networks of ``sample``'s FP weights on ``segment``."""
        step = self._step
        return len(self._history) - 1 - step + self.weight_version(step, sample, segment)

    def _words(self, network, index):
        layer = network.layers[_weighted(network)[index]]
        bias = layer.bias if layer.bias is not None else np.zeros(layer.weight.shape[0])
        return self.codec.encode(layer.weight), self.codec.encode(bias)

    def forward(self, network, inputs):
        """The network's outputs ``batch x classes`` float64 for ``inputs`` ``batch x C x
        H x W``: the conv layers on the chain, the rest on the host."""
        import torch

        from ..models import to_torch
        x = np.asarray(inputs, np.float64)
        side = self.config.image_size
        if x.ndim != 4 or x.shape[2:] != (side, side):
            raise UsageError(f"the inputs must be batch x C x {side} x {side}, the size the "
                             f"network was mapped for, not {x.shape}")
        if self._step >= 0 and x.shape[0] != self._batch:
            raise UsageError(f"the mini-batches must have one size: {self._batch}, then "
                             f"{x.shape[0]}")
        if network is not self._network:
            self._step += 1
            self._history = (self._history + [network])[-self._depth(x.shape[0]):]
        self._network, self._batch = network, x.shape[0]
        words = [{i: self._words(n, i) for i in self.layers} for n in self._history]
        self._current = words[-1]
        self.chain.clear()
        self.chain.saturated += sum(self.codec.saturated(array)
                                    for pair in self._current.values() for array in pair)
        outs, self._images, self._outputs = [], [], []
        for sample in range(x.shape[0]):
            def weights(index, segment, sample=sample):
                return words[self._version(sample, segment)][index]
            image = self.codec.encode(x[sample].transpose(1, 2, 0))
            self.chain.saturated += self.codec.saturated(image)
            out = self.chain.forward(image, weights)
            self._images.append(image)
            self._outputs.append(out)
            outs.append(self.codec.decode(out).transpose(2, 0, 1))
        start = _host_start(network)
        tail = fc_tail(network, start)
        if tail is not None:
            from .chain_rtl import lr_word
            pattern = self.config.backpressure if self.rtl is not None else None
            # the engine's own SGD step is checked with --backend rtl only (the host's
            # master weights are the step's): the nodes' rate register there, else 0
            word = 0 if pattern is None else lr_word(
                self.config.precision, 0.5 if self.lr is None else self.lr, x.shape[0])
            self._fc = FcStage(tail, self._outputs[0].shape, self.codec, word, rtl=pattern)
            self._last = None
            return self._fc.forward(network, self._outputs)
        self._fc = None
        self._module = to_torch(network, torch.float32)
        self._conv_out = torch.tensor(np.stack(outs), dtype=torch.float32,
                                      requires_grad=True)
        self._last = self._module[start:](self._conv_out)
        return self._last.detach().double().numpy()

    def backward(self, grad_outputs):
        """``{(layer index, field): float64 array}`` for every tensor of the network."""
        import torch

        from ..models import torch_parameter
        network = self._network
        weighted = _weighted(network)
        if self._fc is not None:
            gradients, errors = self._fc.backward(grad_outputs)
            self.chain.saturated += self._fc.saturated
        else:
            self._module.zero_grad()
            self._last.backward(torch.as_tensor(np.asarray(grad_outputs),
                                                dtype=torch.float32))
            start = _host_start(network)
            gradients = {}
            for index in weighted:
                if index >= start:
                    for field in network.layers[index].tensor_fields():
                        param = torch_parameter(network, self._module, index, field)
                        gradients[(index, field)] = param.grad.double().numpy()
            errors = [self.codec.encode(e.transpose(1, 2, 0))
                      for e in self._conv_out.grad.double().numpy()]
        self.chain.saturated += sum(map(self.codec.saturated, errors))
        found = self.chain.backward(errors, lambda index, segment: self._current[index])
        if self.rtl is not None:
            self.rtl.step(self._images, self._current, errors, self._outputs)
        for index, (dw, db) in found.items():
            layer = network.layers[weighted[index]]
            gradients[(weighted[index], "weight")] = self._gradient(dw, 2)
            if layer.bias is not None:
                gradients[(weighted[index], "bias")] = self._gradient(db, 1)
        return gradients

    def _gradient(self, words, scale):
        """Gradient words as float64: fp32 patterns; fixed16 sums with ``scale·f``
        fraction bits."""
        if self.config.precision == "fp32":
            return self.codec.decode(words)
        return np.asarray(words, np.float64) / 2.0 ** (scale * self.config.frac_bits)

    def forward_networks(self):
        """Per sample of the last :meth:`forward`, the weights its forward pass used
        (stale segments the previous mini-batch's), or None when every sample used the
        step's: the interface's reference applies them (:mod:`nnrtl.gen.train`)."""
        versions = [[self._version(sample, s) for segs in self.layers.values()
                     for s in segs] for sample in range(self._batch)]
        if all(v == len(self._history) - 1 for row in versions for v in row):
            return None
        weighted = _weighted(self._network)
        networks = []
        for sample in range(self._batch):
            layers = list(self._network.layers)
            for index, segments in self.layers.items():
                n = weighted[index]
                new = layers[n]
                weight = np.array(new.weight, np.float64)
                bias = None if new.bias is None else np.array(new.bias, np.float64)
                for s in segments:
                    old = self._history[self._version(sample, s)].layers[n]
                    if old is not new:
                        weight[s.out_range, s.in_range] = old.weight[s.out_range,
                                                                     s.in_range]
                        if bias is not None and s.cfg.completes:
                            bias[s.out_range] = old.bias[s.out_range]
                layers[n] = dataclasses.replace(new, weight=weight, bias=bias)
            networks.append(dataclasses.replace(self._network, layers=tuple(layers)))
        return networks

    def _depth(self, batch):
        """Networks to keep: the oldest weights a sample's FP can still use."""
        deepest = max((s.seg.residency for segs in self.layers.values() for s in segs),
                      default=0)
        return 2 + math.ceil(deepest / batch)

    def counters(self):
        """``useful_macs`` of the conv chain (FP, PG, EB of every segment, every sample)
        and of the FC engine (``fc_engine``: its layers; FC layers on the host not counted;
        ``fc_rtl``: each layer's RTL run with ``--backend rtl``), ``cycles`` and ``utilization`` None (the
        golden model has no cycles), the stale samples per segment and the segments the
        node RTL cannot run yet (:func:`.chain.rtl_limits`), and ``saturated_words``:
        fixed16 words of the step at a 16-bit limit (inputs, the step's weights, the
        completing nodes' ``z``, the errors from the host and from EB), where the format
        clipped and the gradient bound does not hold."""
        macs, stale = 0, []
        for index, segments in self.layers.items():
            for s in segments:
                modules = 2 if index == 0 else 3
                macs += modules * s.cfg.pixels * s.cfg.n_out * s.cfg.n_in * s.cfg.taps
                stale.append({"layer": s.seg.layer, "node": s.node, "mode": s.seg.mode,
                              "channels": [s.seg.lo, s.seg.hi],
                              "residency": s.seg.residency,
                              "fp_weights_of_step": [
                                  self.weight_version(self._step, j, s)
                                  for j in range(self._batch)]})
        found = {"cycles": None, "useful_macs": macs * self._batch, "utilization": None,
                 "segments": stale, "saturated_words": self.chain.saturated,
                 "rtl_limits": [" ".join(map(str, item)) for item in rtl_limits(self.layers)]}
        if self._fc is not None:
            found["useful_macs"] += sum(cfg.macs for cfg in self._fc.configs)
            found["fc_engine"] = [{"layer": index, "n_in": cfg.n_in, "n_out": cfg.n_out,
                                   "input_relu": cfg.input_relu}
                                  for (index, _), cfg in zip(self._fc.tail,
                                                             self._fc.configs)]
        if self.rtl is not None:
            found["rtl"] = self.rtl.record
            found["cycles"] = self.rtl.record["cycles"]
            if self._fc is not None:
                found["fc_rtl"] = self._fc.record
        return found


def train_hook(request, network):
    """The engine's ``train`` hook (:class:`nnrtl.gen.train.TrainRequest`): the network
    mapped onto ``--fpgas`` boards of ``request.board`` (``--param``: the mapping options
    of ``nnrtl map fpdeep``, :data:`.hooks.OPTIONS`, e.g. ``ocp_min_ic``), an
    :class:`FpdeepTrainer`."""
    from ..models import load_array
    from .mapper import map_network
    from .network import from_network

    options = parse_options(request.options)
    mapping_options = map_options(request.params)
    if request.backend == "rtl":
        if options.get("pipeline", "flush") != "flush":
            raise UsageError("--pipeline stale with --backend rtl: the RTL chain is loaded "
                             "with each step's weights and runs the mini-batch on them "
                             "(--pipeline flush, the default with --backend rtl)")
        options["pipeline"] = "flush"
    if network.is_rnn:
        raise UsageError(f"{network.source or 'the model'}: the fpdeep engine trains CNNs, "
                         f"not recurrent layers")
    inputs = load_array(request.inputs, what="--inputs")
    if inputs.ndim != 4 or inputs.shape[2] != inputs.shape[3]:
        raise UsageError(f"--inputs must be batch x C x H x W with square images (H = W) for "
                         f"the fpdeep engine, not {inputs.shape}")
    config = FpdeepTrainConfig(image_size=int(inputs.shape[2]), board=request.board.name,
                               **options)
    for name in ("backpressure", "simulator"):
        if request.backend != "rtl" and name in options:
            raise UsageError(f"--{name} applies to --backend rtl (the RTL chain)")
    chain = from_network(network, config.image_size, network.source or "model")
    mapping = map_network(
        chain, config.fpgas, request.board, precision=config.precision,
        convention=mapping_options["convention"], dsp_cap=mapping_options["dsp_cap"],
        ocp_min_ic=mapping_options["ocp_min_ic"], fc_batch=mapping_options["fc_batch"],
        balance=mapping_options["balance"] != 0, check_storage=True,
        word_bits=mapping_options["word_bits"])
    if request.log is not None:
        for node in mapping.nodes:
            request.log("train: node {}: {}".format(node.node, ", ".join(
                f"{s.layer} {s.mode} [{s.lo}, {s.hi})" for s in node.segments)))
    trainer = FpdeepTrainer(config, mapping, lr=request.lr)
    if request.backend == "rtl":
        from .chain_rtl import RtlChain, chain_config
        rtl_config = chain_config(trainer.layers, mapping, config.precision, config.frac_bits,
                                  inputs.shape[0], request.lr)
        segments = [s for index in sorted(trainer.layers) for s in trainer.layers[index]]
        trainer.rtl = RtlChain(rtl_config, segments, trainer.codec,
                               pattern=config.backpressure, simulator=config.simulator)
    return trainer

"""The η-LSTM training step behind the platform's training interface
(:mod:`nnrtl.gen.train`, ``nnrtl train omni``): :class:`OmniTrainer` runs every LSTM
layer's FW and BP cells on a channel -- the bit-exact golden model of its cell programs
(:mod:`nnrtl.sim.golden.omni.channel`, backend ``golden``) or the Channel RTL under
Verilator (backend ``rtl``, :mod:`.train_rtl`) -- in the order :mod:`.channel_passes`
gives; the host does the rest as :mod:`nnrtl.gen.train` has it (the loss and its
gradient, PyTorch's SGD step), plus MS1's pruning and compression (the DMA's contract,
:mod:`.compress`) and MS2's skip plan and scaling (:mod:`.skipping`).

Directions: a ``reverse`` layer runs the same programs over the steps last first (the host
streams them so and puts the outputs back in time order); a ``bidirectional`` one is two
such passes, each with its own weights, their outputs concatenated and their input deltas
summed on the host (one fp32 addition). Each pass is a "layer" of the channel's
configuration (:attr:`OmniTrainConfig.channels`) and of MS2's skip plan. The top
(:data:`TOP_PARAMS`) chains forward layers only.

Engine options (``request.options``, after ``nnrtl train omni ...``)
    ``--ms1``: BP-EW-P1 moved into FW, pruned at ``--prune-threshold θ`` (default
    :class:`~.training.MsConfig`'s, 0.05) and stored compressed; BP decodes it.
    ``--ms2``: BP-cell skipping with eq. 4's predictor, eq. 5 and the convergence-aware
    scaling, ``--skip-threshold F`` (default MsConfig's, 0.002: a fraction of epoch 1's
    largest predicted δW_Mag, :mod:`.skipping`). The loss type is the interface's: ``mse`` is a
    loss at every timestamp (``per-timestamp``), ``cross-entropy`` one at the last
    (``single``). One training step is one epoch of MS2 (the request's batch is the whole
    data set): step 1 measures the per-cell magnitudes, skipping starts at step 4 (eq. 5
    needs three losses). θ = 0 and a skip threshold of 0 give the baseline's gradients
    bit for bit (tests/omni/gen/test_omni_trainer.py).

``--param``: the :class:`~nnrtl.hw.omni.channel_config.ChannelConfig` fields other than
the sizes (which come from the model): ``pes_per_channel`` (default 32), ``adder_stages``,
``multiplier_stages``, ``segment_bits``, queue depths ...; every layer runs on a channel
of these parameters, one build for all layers (``max_length`` the longest job of any).
A top parameter (:data:`TOP_PARAMS`: ``channels``, ``swing_channels``, ``max_tasks``,
``hbm_ports``) selects the whole top instead: the ``--param``s are then
:class:`~nnrtl.hw.omni.top_config.OmniConfig` fields (sizes from the model and the data,
``max_tasks`` by default the FW run's tasks up to 64, ``hbm_ports`` by default 1) and backend ``rtl`` runs each step's
FW and BP through :class:`~nnrtl.hw.omni.top.OmniTop` (:mod:`.train_top`: the R2A
dispatching the step's task graph, MS1's records through the DMA); backend ``golden`` runs
the same cell programs on the golden model (the top's values, bit for bit).
"""

import dataclasses

import numpy as np

from nnrtl.hw.omni.channel_config import ChannelConfig

from ..errors import UsageError
from ..params import parse_params
from ..train import BACKENDS
from . import channel_passes as passes
from .compress import check_threshold, compress, decompress
from .skipping import SkipController
from .train_bound import FP32_TABLE_ERRORS, gradient_bound
from .training import MsConfig

__all__ = ["OmniTrainConfig", "OmniTrainer", "parse_options", "config_for",
           "gradient_bound", "train_hook", "LOSS_TYPES", "TOP_PARAMS"]

#: The ``--param``s that only the top has: giving one trains through the top.
TOP_PARAMS = ("channels", "swing_channels", "max_tasks", "hbm_ports")

#: The MS2 loss type of each of the interface's losses.
LOSS_TYPES = {"mse": "per-timestamp", "cross-entropy": "single"}
_VALUES = {"--prune-threshold": ("ms1", "prune_threshold"),
           "--skip-threshold": ("ms2", "skip_threshold")}


@dataclasses.dataclass(frozen=True)
class OmniTrainConfig:
    """A training run on the channel.

    Attributes
    ----------
    channels : tuple of ChannelConfig
        One per layer pass (a bidirectional layer has two; its ``input_size``,
        ``hidden_size``), every other parameter the same, ``max_length`` the longest job of
        any layer (one RTL build for all).
    seq_len, batch : int
        LL and B of the data.
    memory : MsConfig
        MS1 and MS2 and their thresholds, the loss type.
    top : OmniConfig or None
        The top the step runs on (its ``layer_channel`` are ``channels``), or ``None``:
        the layer passes on one channel.
    """

    channels: tuple
    seq_len: int
    batch: int
    memory: MsConfig = MsConfig()
    top: object = None

    def __post_init__(self):
        if not self.channels or not all(isinstance(c, ChannelConfig) for c in self.channels):
            raise TypeError(f"channels must be a non-empty tuple of ChannelConfig, not "
                            f"{self.channels!r}")
        for name in ("seq_len", "batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if not isinstance(self.memory, MsConfig):
            raise TypeError(f"memory must be an MsConfig, not {self.memory!r}")

    @property
    def layers(self):
        return len(self.channels)

    @property
    def useful_macs(self):
        """MACs of one step with every cell's BP run: per layer ``LL B`` FW cells of
        ``4H(I+H)`` and as many BP cells of twice that (:func:`.channel_passes.cell_macs`)."""
        return self.seq_len * self.batch * sum(sum(passes.cell_macs(c))
                                               for c in self.channels)


def train_options(group):
    """Add ``nnrtl train omni``'s own options to the argument group ``group``
    (:attr:`Engine.options <nnrtl.gen.engines.Engine.options>`; module docstring)."""
    group.add_argument("--ms1", action="store_true", help="MS1: BP-EW-P1 moved into FW, "
                       "pruned and stored compressed")
    group.add_argument("--ms2", action="store_true", help="MS2: BP-cell skipping with the "
                       "paper's predictor and convergence-aware scaling")
    group.add_argument("--prune-threshold", type=float, metavar="THETA", help="with --ms1: "
                       f"the pruning threshold (default {MsConfig.prune_threshold:g})")
    group.add_argument("--skip-threshold", type=float, metavar="F", help="with --ms2: the "
                       "skipping threshold, a fraction of epoch 1's largest predicted "
                       f"magnitude, from 0 to below 1 (default {MsConfig.skip_threshold:g})")


def parse_options(options, loss="mse"):
    """An :class:`MsConfig` from the engine options (``request.options``, by dest: ``ms1``,
    ``ms2``, ``prune_threshold``, ``skip_threshold``; module docstring); a
    :class:`UsageError` naming the option, its value and the rule otherwise. Command-line
    tokens (``("--ms1",)``) are parsed as the command line parses them
    (:func:`~nnrtl.gen.engines.option_values`)."""
    from ..engines import option_values

    options = option_values(train_options, options, prog="nnrtl train omni")
    unknown = sorted(set(options) - {"ms1", "ms2", *(field for _, field in _VALUES.values())})
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r} for the omni engine: its train "
                         f"options are --ms1, --ms2, --prune-threshold THETA, "
                         f"--skip-threshold F")
    fields = {}
    for option, (switch, field) in _VALUES.items():
        number = options.get(field)
        if number is None:
            continue
        if not options.get(switch):
            raise UsageError(f"{option} applies to --{switch}: give --{switch} too")
        if field == "prune_threshold":
            check_threshold(number, option)
        elif not 0 <= number < 1:
            raise UsageError(f"{option} must be a number from 0 to below 1, not {number:g}")
        fields[field] = float(number)
    if loss not in LOSS_TYPES:
        raise UsageError(f"--loss must be one of {', '.join(LOSS_TYPES)}, not {loss!r}")
    return MsConfig(ms1=bool(options.get("ms1")), ms2=bool(options.get("ms2")),
                    loss_type=LOSS_TYPES[loss], **fields)


def _flip(values, reverse):
    """``values`` (time first) reversed in time when ``reverse``: a copy with positive
    strides."""
    return values[::-1].copy() if reverse else values


def _check_network(network):
    """The network's LSTM layers; a UsageError naming the layer and the rule it breaks."""
    from nnrtl.gen.models import LSTM, refuse_extensions

    source = network.source or "the model"
    if not network.is_rnn:
        raise UsageError(f"the omni engine trains LSTM layers; {source} is a CNN")
    for index, layer in enumerate(network.layers):
        if not isinstance(layer, LSTM):
            raise UsageError(f"layer {index} of {source} is {type(layer).__name__}; the "
                             f"omni engine trains LSTM layers")
        refuse_extensions(layer, f"layer {index} of {source}", "the omni engine")
        if layer.proj_size:
            raise UsageError(f"layer {index} of {source} has proj_size {layer.proj_size}; "
                             f"the omni engine trains LSTM layers without projection")
    return network.layers


def config_for(network, seq_len, batch, params=(), memory=MsConfig()):
    """The :class:`OmniTrainConfig` of ``network`` for ``seq_len`` x ``batch`` data:
    the layer sizes from the model, the channel ``params`` (``--param`` strings)."""
    layers = _check_network(network)
    first = layers[0]
    given = {item.partition("=")[0].strip() for item in params}
    sizes = {"input_size": first.input_size, "hidden_size": first.hidden_size}
    if given & set(TOP_PARAMS):
        return _top_config(layers, seq_len, batch, params, memory, given)
    for name in sorted(given & set(sizes)):
        raise UsageError(f"parameter {name} comes from the model ({sizes[name]}); do not "
                         f"give it with --model")
    template = parse_params(ChannelConfig, params, base=ChannelConfig(**sizes))
    shapes = [(layer.input_size, layer.hidden_size) for layer in layers
              for _ in range(layer.num_directions)]
    longest = max(dataclasses.replace(template, input_size=i, hidden_size=h,
                                      max_length=None).longest_job for i, h in shapes)
    if template.max_length is not None and "max_length" in given:
        if template.max_length < longest:
            raise UsageError(f"parameter max_length ({template.max_length}) cannot be less "
                             f"than the longest job of the layers ({longest})")
        longest = template.max_length
    channels = tuple(dataclasses.replace(template, input_size=i, hidden_size=h,
                                         max_length=longest) for i, h in shapes)
    return OmniTrainConfig(channels, seq_len, batch, memory)


def _top_config(layers, seq_len, batch, params, memory, given):
    """:func:`config_for` with a top parameter given (module docstring)."""
    from nnrtl.hw.omni.top_config import OmniConfig

    first = layers[0]
    sizes = {"input_size": first.input_size, "hidden_size": first.hidden_size,
             "layers": len(layers), "seq_len": seq_len, "batch": batch}
    for name in sorted(given & set(sizes)):
        raise UsageError(f"parameter {name} comes from the model and the data "
                         f"({sizes[name]}); do not give it with --model")
    for index, layer in enumerate(layers):
        if layer.direction != "forward":
            raise UsageError(f"layer {index} runs {layer.direction}: the top's task graph "
                             f"chains forward layers (give no top parameter "
                             f"{', '.join(TOP_PARAMS)} to train it on one channel)")
        if layer.hidden_size != first.hidden_size:
            raise UsageError(f"layer {index} has hidden size {layer.hidden_size}, layer 0 "
                             f"{first.hidden_size}: the top's channels run one hidden size "
                             f"(give no top parameter {', '.join(TOP_PARAMS)} to train on "
                             f"one channel)")
    # one HBM port unless given: the simulated run's DMAs (each port a DMA and an AXI4
    # memory model); train.json's memory term names the bound at the ports built
    top = parse_params(OmniConfig, params, base=OmniConfig(
        **sizes, prune_threshold=memory.prune_threshold, hbm_ports=1))
    if "max_tasks" not in given:     # the FW run's tasks: two per tile of every cell
        fw_tasks = 2 * min(top.channels, first.hidden_size) * len(layers) * seq_len * batch
        top = dataclasses.replace(top, max_tasks=min(64, fw_tasks))
    channels = tuple(top.layer_channel(l) for l in range(top.layers))
    return OmniTrainConfig(channels, seq_len, batch, memory, top)


class OmniTrainer:
    """The training step of :mod:`nnrtl.gen.train` with the LSTM cells on a channel.

    Parameters
    ----------
    config : OmniTrainConfig
    backend : str
        ``"golden"`` or ``"rtl"`` (every layer pass one run of the Verilator bench).
    loss_of : callable, optional
        ``outputs -> loss`` (float), the loss of the step's outputs. MS2's predictor needs
        each step's loss: from ``loss_of`` after :meth:`forward`, or given by
        :meth:`observe_loss` (as :func:`nnrtl.gen.train.train` does, with the whole
        model's loss, a host-side head included).
    seed : int
        The bench's seed (``rtl``).
    log : callable, optional
        Progress lines (``rtl``).

    Attributes
    ----------
    gradient_bound : float
        :func:`gradient_bound` of the configuration.
    rtl_top : RtlTop or None
        Backend ``rtl`` with a top: the runs' driver (:class:`.train_top.RtlTop`: its
        records, its R2A allocation).
    approximation : str or None
        What MS1 / MS2 changed in the last step's gradients (``None`` when nothing was
        pruned or skipped); the interface then reports the update's difference from SGD
        without bounding it (:class:`nnrtl.gen.train.Trainer`).
    """

    def __init__(self, config, backend="golden", *, loss_of=None, seed=1, log=None):
        if not isinstance(config, OmniTrainConfig):
            raise TypeError(f"config must be an OmniTrainConfig, not {config!r}")
        if backend not in BACKENDS:
            raise UsageError(f"--backend must be one of {', '.join(BACKENDS)} for the omni "
                             f"engine, not {backend!r}")
        memory = config.memory
        self.config = config
        self.backend = backend
        self.gradient_bound = gradient_bound(config)
        self._loss_of = loss_of
        self._rtl = None
        self._golden = {}
        self._top = None
        if backend == "rtl" and config.top is not None:
            from .train_top import RtlTop
            self._top = RtlTop(config, seed=seed, log=log)
        elif backend == "rtl":
            from .train_rtl import RtlCells
            self._rtl = RtlCells(config, seed=seed, log=log)
        self.rtl_top = self._top
        self._skip = SkipController(config.layers, config.seq_len, memory.loss_type,
                                    memory.skip_threshold if memory.ms2 else 0.0,
                                    scaling=memory.scaling)
        self._epoch = 0
        self._layers = []
        self._input_gradient = None
        self._plan = None
        self._loss = None
        self._stats = {}

    def _run(self, index, phase, **arrays):
        """Layer ``index``'s pass ``phase`` (``"fw"``: :func:`.channel_passes.fw_pass`,
        ``"bp"``: :func:`~.channel_passes.bp_pass`, with ``arrays``) on the backend."""
        if self._rtl is not None:
            return self._rtl.run(index, phase, arrays)
        if index not in self._golden:
            self._golden[index] = passes.run_golden(self.config.channels[index])
        channel = self.config.channels[index]
        return passes.drive(passes.PASSES[phase](channel, **arrays), self._golden[index])

    def _bits(self, index, values):
        from nnrtl.sim.golden.float import to_bits
        return np.asarray(to_bits(self.config.channels[index].fmt, values), np.uint64)

    def _floats(self, index, bits):
        from nnrtl.sim.golden.float import from_bits
        return from_bits(self.config.channels[index].fmt, bits)

    def _store_ms1(self, index, fw):
        """MS1's compression of each kept cell's P1 vectors (the DMA's contract): the
        decoded vectors BP reads, and the bytes stored."""
        import torch

        threshold = self.config.memory.prune_threshold
        stacked = np.stack([fw[name] for name in passes.PART1_VECTORS], axis=2)  # TxBx6xH
        values = self._floats(index, stacked).astype(np.float32)
        decoded = np.zeros_like(values)
        kept = self._plan[0][index]
        for t in np.flatnonzero(kept):
            record = compress(torch.from_numpy(values[t]), threshold)
            decoded[t] = decompress(record).numpy()
            self._stats["intermediates"] += record.nbytes
            self._stats["p1_survivors"] += record.survivors
            self._stats["p1_values"] += values[t].size
        bits = self._bits(index, decoded.astype(np.float64))
        return {name: bits[:, :, k] for k, name in enumerate(passes.PART1_VECTORS)}

    def forward(self, network, inputs):
        """The last layer's outputs at every step, ``T x B x H`` float64, for time-first
        ``inputs`` (``T x B x input_size``)."""
        layers = _check_network(network)
        config = self.config
        shapes = [(c.input_size, c.hidden_size) for c in config.channels]
        if [(layer.input_size, layer.hidden_size) for layer in layers
                for _ in range(layer.num_directions)] != shapes:
            raise UsageError(f"the network's layer sizes are not those of the engine's "
                             f"configuration ({shapes})")
        x = np.asarray(inputs, dtype=np.float64)
        if x.shape[:2] != (config.seq_len, config.batch):
            raise UsageError(f"the inputs are {x.shape[0]} steps of batch {x.shape[1]}, the "
                             f"configuration's {config.seq_len} of {config.batch}")
        self._epoch += 1
        self._plan = self._skip.plan(self._epoch)
        kept = self._plan[0]
        memory = config.memory
        self._stats = dict(activations=0, intermediates=0, p1_values=0, p1_survivors=0)
        for backend in (self._rtl, self._top):
            if backend is not None:
                backend.clear()
        self._layers = []
        self._input_gradient = None
        xs = self._bits(0, x)
        views = [(index, suffix, view, reverse) for index, layer in enumerate(layers)
                 for suffix, view, reverse in layer.passes()]
        all_weights = []
        for number, (_, _, view, _) in enumerate(views):
            channel = config.channels[number]
            bias = sum(b for b in (view.bias_ih, view.bias_hh) if b is not None)
            bias = np.zeros(4 * channel.hidden_size) if np.isscalar(bias) else bias
            all_weights.append(passes.weights_vector(channel, view.weight_ih,
                                                     view.weight_hh, bias))
        on_top = None
        if self._top is not None:
            on_top = self._top.run("fw", {"weights": all_weights, "xs": xs}, kept,
                                   memory.ms1)
            dma = self._top.dma
            self._stats.update(intermediates=dma.get("bytes_written", 0),
                               p1_values=dma.get("values_kept", 0)
                               + dma.get("values_pruned", 0),
                               p1_survivors=dma.get("values_kept", 0))
        outputs = []
        for number, (index, suffix, view, reverse) in enumerate(views):
            channel = config.channels[number]
            weights = all_weights[number]
            if suffix == "" and number:             # a new layer: its input, bit for bit
                xs = outputs[0] if len(outputs) == 1 else np.concatenate(outputs, axis=2)
                outputs = []
            pass_xs = _flip(xs, reverse)
            fw = on_top[number] if on_top is not None else self._run(
                number, "fw", weights=weights, xs=pass_xs, ms1=memory.ms1,
                kept=kept[number])
            cells = int(kept[number].sum()) * config.batch
            self._stats["activations"] += 4 * cells * (channel.input_size
                                                       + channel.hidden_size)
            if memory.ms1 and on_top is not None:      # decoded by the DMA
                stored = {name: fw[name] for name in passes.PART1_VECTORS}
            elif memory.ms1:
                stored = self._store_ms1(number, fw)
            else:
                stored = {name: fw[name] for name in passes.SAVED}
                self._stats["intermediates"] += 4 * 5 * cells * channel.hidden_size
            self._layers.append(dict(layer=view, index=index, suffix=suffix,
                                     reverse=reverse, weights=weights, xs=pass_xs,
                                     hs=fw["h"], stored=stored))
            outputs.append(_flip(fw["h"], reverse))
        xs = outputs[0] if len(outputs) == 1 else np.concatenate(outputs, axis=2)
        outputs = self._floats(len(views) - 1, xs)
        self._loss = None if self._loss_of is None else float(self._loss_of(outputs))
        return outputs

    def observe_loss(self, loss):
        """The loss of the last :meth:`forward`'s outputs (float), for MS2's predictor."""
        self._loss = float(loss)

    def _magnitudes(self, index, dgates, xs, hs):
        """MS2's measured per-cell magnitude ``sum |δW_t| + sum |δU_t|`` of a layer
        (LL), float64 on the host from the channel's δgates."""
        dg = self._floats(index, dgates)
        h_prev = np.concatenate([np.zeros_like(hs[:1]), hs[:-1]])
        z = np.concatenate([self._floats(index, xs), self._floats(index, h_prev)], axis=2)
        return np.abs(np.einsum("tbr,tbc->trc", dg, z)).sum(axis=(1, 2))

    def backward(self, grad_outputs):
        """The gradients of every tensor of the last :meth:`forward`'s network,
        ``{(layer index, field): float64 array}``, given the loss gradient at its outputs
        (``T x B x H``)."""
        config = self.config
        if config.memory.ms2 and config.memory.skip_threshold > 0 and self._loss is None:
            raise ValueError("MS2 needs each step's loss (for eq. 5): give loss_of, or "
                             "observe_loss before backward")
        kept, factors, _predicted = self._plan
        measure = self._skip.wants_measurements(self._epoch)
        magnitudes = np.zeros(kept.shape)
        dys = self._bits(len(self._layers) - 1, np.asarray(grad_outputs, np.float64))
        gradients = {}
        on_top = None
        if self._top is not None:
            on_top = self._top.run("bp", {
                name: [saved[key] for saved in self._layers] for name, key in (
                    ("weights", "weights"), ("xs", "xs"), ("hs", "hs"),
                    ("stored", "stored"))} | {"dys": dys}, kept, config.memory.ms1)
        below = None
        for number in reversed(range(len(self._layers))):
            saved, channel = self._layers[number], config.channels[number]
            width = channel.hidden_size
            part = 1 if saved["suffix"] else 0
            pass_dys = _flip(dys[:, :, part * width:(part + 1) * width], saved["reverse"])
            bp = on_top[number] if on_top is not None else self._run(
                number, "bp", weights=saved["weights"], xs=saved["xs"], hs=saved["hs"],
                stored=saved["stored"], dys=pass_dys, kept=kept[number],
                ms1=config.memory.ms1)
            dw = self._floats(number, bp["dw"]) * float(factors[number])
            db = self._floats(number, bp["db"]) * float(factors[number])
            fields = {"weight_ih": dw[:, :channel.input_size],
                      "weight_hh": dw[:, channel.input_size:], "bias_ih": db,
                      "bias_hh": db.copy()}
            for field in saved["layer"].tensor_fields():
                gradients[(saved["index"], field + saved["suffix"])] = fields[field]
            if measure:
                magnitudes[number] = self._magnitudes(number, bp["dgates"], saved["xs"],
                                                      saved["hs"])
            dx = _flip(bp["dx"], saved["reverse"])
            # the directions' input deltas meet on the host: one fp32 sum
            below = dx if below is None else self._bits(number, self._floats(
                number, below).astype(np.float32) + self._floats(number, dx).astype(
                np.float32))
            if part == 0:                           # the layer's first pass: all of it
                dys, below = below, None
        self._input_gradient = dys
        if config.memory.ms2:
            if measure:
                self._skip.observe(magnitudes, self._loss)
            self._skip.end_epoch(self._loss if self._loss is not None else 0.0)
        return gradients

    def input_gradient(self):
        """The gradient of the loss at the last :meth:`forward`'s inputs, ``T x B x
        input_size`` float64: layer 0's ``dx`` (its BP cells' ``W_ih^T δgates``, on the
        channel) of the last :meth:`backward`, not scaled by MS2's factors (as the layers
        below a layer receive it). It passes through the cells a weight gradient does
        (the module's derivation): within :attr:`gradient_bound`.

        Raises
        ------
        ValueError
            No :meth:`backward` since the last :meth:`forward`.
        """
        if self._input_gradient is None:
            raise ValueError("input_gradient comes from backward: call forward and backward "
                             "first")
        return np.asarray(self._floats(0, self._input_gradient), dtype=np.float64)

    @property
    def approximation(self):
        """What MS1 and MS2 changed in the last step (``None``: the baseline's gradients,
        as with both off, thresholds 0, or MS2 before it skips)."""
        parts, stats = [], self._stats
        if stats.get("p1_values") and stats["p1_survivors"] < stats["p1_values"]:
            parts.append(f"MS1 pruned {1 - stats['p1_survivors'] / stats['p1_values']:.1%} "
                         f"of the BP-EW-P1 values (θ = {self.config.memory.prune_threshold:g})")
        skipped = 0 if self._plan is None else int((~self._plan[0]).sum())
        if skipped:
            parts.append(f"MS2 skipped {skipped} BP cells and scaled the gradients")
        return "; ".join(parts) or None

    def counters(self):
        """The last step's channel work: ``cycles`` and ``utilization`` (backend ``rtl``:
        the RTL's, summed over the passes; ``golden``: None), ``useful_macs`` (of the cells
        run: FW of every cell, BP of the kept ones), ``skipped_cells`` (MS2),
        ``stored_bytes`` (kept between FW and BP: x_t and h_{t-1}, and the gates and
        states or MS1's compressed P1 records) and ``p1_density`` (MS1: survivors per
        P1 value)."""
        config = self.config
        kept = self._plan[0] if self._plan is not None else np.ones(
            (config.layers, config.seq_len), bool)
        useful = 0
        for index, channel in enumerate(config.channels):
            fw, bp = passes.cell_macs(channel)
            useful += config.batch * (config.seq_len * fw + int(kept[index].sum()) * bp)
        stats = self._stats
        record = {"cycles": None, "useful_macs": useful, "utilization": None,
                  "skipped_cells": int((~kept).sum()),
                  "stored_bytes": stats.get("activations", 0) + stats.get(
                      "intermediates", 0),
                  "p1_density": stats["p1_survivors"] / stats["p1_values"]
                  if stats.get("p1_values") else None}
        if self._rtl is not None:
            record.update(self._rtl.counters(useful))
        if self._top is not None:
            record.update(self._top.counters(useful))
        return record


def train_hook(request, network):
    """The engine's ``train`` hook (:class:`nnrtl.gen.train.TrainRequest`): an
    :class:`OmniTrainer` for ``network`` sized by the request's inputs (its
    ``input_shape``, else its ``inputs`` file), with the ``--param``s and the engine
    options (module docstring). Each step's loss reaches MS2 through
    :meth:`OmniTrainer.observe_loss`."""
    from nnrtl.gen.models import load_array

    memory = parse_options(request.options, request.loss)
    _check_network(network)
    if request.input_shape is not None:
        steps, size = request.input_shape[:2]
    else:
        inputs = load_array(request.inputs, what="--inputs")
        steps, size = (inputs.shape[1], inputs.shape[0]) if inputs.ndim == 3 else (
            inputs.shape[0], 1)
    config = config_for(network, steps, size, request.params, memory)
    return OmniTrainer(config, request.backend, seed=request.seed, log=request.log)

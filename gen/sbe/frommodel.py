"""From a trained LSTM to an SBE configuration: the paper's automatic hardware mapping
("Framework of Automatic hardware Mapping", Fig. 12).

:func:`load_model` reads a model file through :mod:`nnrtl.gen.models` (any format it reads)
and checks it is an LSTM the SBE runs; :func:`config_from_model` explores the design space of the
model on a board (:func:`~.explore.explore`) with the number formats of the quantized model
(:func:`quantized_base`) and takes the fastest configuration that fits. The result is the
one :class:`~nnrtl.hw.sbe.SbeConfig` the RTL, the golden model and the testbench derive
from, with the :class:`QuantizedLSTM` whose codes the engine loads.

Without calibration inputs the activation ranges come from a synthetic calibration set
(:func:`synthetic_calibration`): :data:`CALIBRATION_SEQUENCES` sequences of ``seq_len``
steps (at most :data:`CALIBRATION_MAX_STEPS`), every input drawn uniformly from [-1, 1] by
``numpy.random.default_rng`` (:data:`CALIBRATION_SEED`). It suits inputs normalised to that range; give real inputs
when they are not.
"""

import dataclasses

import numpy as np

from ...hw.sbe.config import GATES, SbeConfig
from ..errors import UsageError
from ..models import LSTM, MODEL_FORMATS, load_array, load_network, refuse_extensions
from ..models.quantize import quantize, to_fixed
from .explore import explore

__all__ = ["MODEL_FORMATS", "CALIBRATION_SEED", "CALIBRATION_SEQUENCES",
           "CALIBRATION_MAX_STEPS", "load_model",
           "check_model", "QuantizedLayer", "QuantizedLSTM", "quantize_model",
           "synthetic_calibration", "calibration_used", "quantized_base", "config_from_model",
           "model_config", "WIDTHS",
           "load_inputs", "write_engine_inputs"]

#: Seed and number of sequences of :func:`synthetic_calibration`.
CALIBRATION_SEED = 0
CALIBRATION_SEQUENCES = 8

#: The longest synthetic calibration sequence. Random inputs reach the states' ranges within
#: a few hundred steps; a longer sequence only costs memory (8 sequences of 10^5 steps of
#: an 8 x 4 LSTM: 720 MB), so a longer ``seq_len`` is calibrated on this many steps.
CALIBRATION_MAX_STEPS = 4096

#: SbeConfig fields :func:`config_from_model` chooses, and who chooses them.
_CHOSEN = {
    **dict.fromkeys(("input_size", "hidden_size", "hidden_sizes", "layers"),
                    "comes from the model"),
    "seq_len": "is the seq_len argument",
    **dict.fromkeys(("pes", "batch", "blocks", "bus_weights", "lut_multipliers"),
                    "is chosen by the design-space exploration"),
    **dict.fromkeys(("weight_frac", "act_frac", "cell_frac"), "is chosen by the quantization"),
}
#: What :func:`config_from_model` lets the caller set: SbeConfig fields, and
#: :func:`~.explore.explore` arguments.
_CONFIG_OVERRIDES = ("batch_norm", "operand_width", "acc_width")
_EXPLORE_OVERRIDES = ("post_units", "dram_efficiency", "lut_share")
#: SbeConfig fields the quantization depends on (:func:`quantized_base`).
WIDTHS = ("operand_width", "acc_width")


def check_model(network):
    """``network`` if the SBE runs it: LSTM layers without projections (of any hidden
    sizes: the engine is sized for the largest, ``SbeConfig.hidden_sizes``), all forward or
    all reverse (a reverse stack is the forward stack on the reversed sequence, its outputs
    reversed back: :mod:`.host_layers`); otherwise :class:`UsageError` naming the layer and
    the rule."""
    label = network.source or "model"
    direction = getattr(network.layers[0], "direction", "forward")
    for n, layer in enumerate(network.layers):
        where = f"{label}: layer {n}"
        if not isinstance(layer, LSTM):
            raise UsageError(f"{where} is a {type(layer).__name__}; the SBE runs LSTM layers "
                             f"only")
        if layer.proj_size:
            raise UsageError(f"{where} has a projection (proj_size {layer.proj_size}); the "
                             f"SBE runs LSTMs without projections")
        if layer.direction == "bidirectional":
            raise UsageError(f"{where} is bidirectional; the SBE runs stacks whose layers "
                             f"all run forward, or all in reverse")
        if layer.direction != direction:
            raise UsageError(f"{where} runs in direction {layer.direction!r}, layer 0 "
                             f"{direction!r}; the SBE runs stacks whose layers all run "
                             f"forward, or all in reverse")
        refuse_extensions(layer, where, "the SBE")
    return network


def load_model(path, weights=None, *, prefix=None, ignore_trailing=False):
    """Read an LSTM model file the SBE runs, whatever its format.

    Parameters
    ----------
    path : path
        Any file of :data:`MODEL_FORMATS` (:func:`nnrtl.gen.models.load_network`): a
        PyTorch state_dict, an ONNX model, a Keras model JSON (then ``weights`` is its
        HDF5 weights file), a whole Keras model in HDF5 or a ``.keras`` archive.
    weights : path, optional
        The HDF5 weights of a Keras model JSON.
    ignore_trailing : bool
        Accept Keras layers after the last LSTM.
    prefix : str, optional
        The key prefix of the RNN in a state_dict holding several (``--prefix``).

    Returns
    -------
    Network
        Forward LSTM layers (:func:`check_model`).

    Raises
    ------
    UsageError
        The errors of :func:`~nnrtl.gen.models.load_network`, and a GRU, CNN, projection,
        reverse or bidirectional layer.
    """
    return check_model(load_network(path, weights, prefix=prefix,
                                    ignore_trailing=ignore_trailing))


#: The SBE's gate blocks (:data:`~nnrtl.hw.sbe.GATES`: i, u, f, o) from the canonical
#: (PyTorch's i, f, g, o; u is g).
_SBE_ORDER = [("i", "f", "u", "o").index(gate) for gate in GATES]


def _sbe_blocks(codes):
    blocks = np.split(codes, 4, axis=0)
    return np.concatenate([blocks[b] for b in _SBE_ORDER], axis=0)


@dataclasses.dataclass(frozen=True, eq=False)
class QuantizedLayer:
    """One layer's codes in the SBE's form: gate blocks in :data:`~nnrtl.hw.sbe.GATES`
    order, one bias (``bias_ih + bias_hh``) at the accumulator format.

    Attributes
    ----------
    w_x, w_h : ndarray of int64
        Weight codes with ``w_x_frac`` and ``w_h_frac`` fraction bits.
    bias : ndarray of int64
        Bias codes, ``w_x_frac + act_frac`` fraction bits.
    w_x_frac, w_h_frac : int
    """

    w_x: np.ndarray
    w_h: np.ndarray
    bias: np.ndarray
    w_x_frac: int
    w_h_frac: int


@dataclasses.dataclass(frozen=True, eq=False)
class QuantizedLSTM:
    """What :func:`quantize_model` returns: the shared quantization
    (:class:`~nnrtl.gen.models.quantize.QuantizedNetwork`) in the SBE's form.

    Attributes
    ----------
    layers : tuple of QuantizedLayer
    network : QuantizedNetwork
    source : dict, optional
        Where the model came from (``nnrtl generate --model``'s manifest): ``path``,
        ``weights``, ``format`` and the ``calibration`` (:func:`calibration_used`).
    host : HostLayers, optional
        The layers the host runs around the stack (:mod:`.host_layers`).
    act_frac, cell_frac, width, acc_width, rounding, ranges, saturated
        As the shared quantization's.
    """

    layers: tuple
    network: object
    source: dict | None = None
    host: object = None

    @property
    def act_frac(self):
        """Fraction bits of x and h."""
        return self.network.act_frac

    @property
    def cell_frac(self):
        """Fraction bits of the element-wise format."""
        return self.network.cell_frac

    @property
    def width(self):
        """Operand bits."""
        return self.network.width

    @property
    def acc_width(self):
        """Accumulator bits."""
        return self.network.acc_width

    @property
    def rounding(self):
        """The rounding mode."""
        return self.network.rounding

    @property
    def ranges(self):
        """Largest magnitudes seen (weights and calibration)."""
        return self.network.ranges

    @property
    def saturated(self):
        """Weight and bias codes clamped."""
        return self.network.saturated

    @property
    def weight_frac(self):
        """The one weight format of every tensor; ``ValueError`` if they differ."""
        fracs = {f for layer in self.layers for f in (layer.w_x_frac, layer.w_h_frac)}
        if len(fracs) != 1:
            raise ValueError(f"the weights have several formats ({sorted(fracs)}); an "
                             f"SbeConfig holds one: quantize with granularity='model'")
        return fracs.pop()

    def apply(self, config):
        """``config`` with these widths and fraction bits (``dataclasses.replace``)."""
        return dataclasses.replace(config, operand_width=self.width, acc_width=self.acc_width,
                                   weight_frac=self.weight_frac, act_frac=self.act_frac,
                                   cell_frac=self.cell_frac)

    def dequantized(self):
        """The float :class:`~nnrtl.gen.models.Network` these codes stand for."""
        return self.network.dequantized()

    def interleaved(self, index):
        """Layer ``index``'s codes as the SBE's interleaved matrix and bias (row ``4 * j +
        g`` = unit ``j`` of gate ``g``); needs one format for ``w_x`` and ``w_h``."""
        layer = self.layers[index]
        if layer.w_x_frac != layer.w_h_frac:
            raise ValueError(f"layer {index}: w_x and w_h have different formats "
                             f"({layer.w_x_frac} and {layer.w_h_frac} fraction bits)")
        hidden = layer.w_h.shape[1]
        matrix = np.concatenate([layer.w_x, layer.w_h], axis=1)
        matrix = matrix.reshape(4, hidden, -1).transpose(1, 0, 2).reshape(4 * hidden, -1)
        return matrix, layer.bias.reshape(4, hidden).T.reshape(-1)


def quantize_model(model, calibration, **options):
    """Quantize an SBE model (:func:`check_model`) with
    :func:`nnrtl.gen.models.quantize.quantize` (same ``options``: ``width``,
    ``acc_width``, ``granularity``, ``rounding``, ``margin_bits``) and put the codes in the
    SBE's form.

    Returns
    -------
    QuantizedLSTM
    """
    shared = quantize(check_model(model), calibration, **options)
    layers = []
    for layer in shared.layers:
        hidden = layer.layer.hidden_size
        bias = layer.codes.get("bias_ih", np.zeros(4 * hidden, dtype=np.int64))
        layers.append(QuantizedLayer(
            w_x=_sbe_blocks(layer.codes["weight_ih"]),
            w_h=_sbe_blocks(layer.codes["weight_hh"]),
            bias=_sbe_blocks(bias), w_x_frac=layer.fracs["weight_ih"],
            w_h_frac=layer.fracs["weight_hh"]))
    return QuantizedLSTM(tuple(layers), shared)


def synthetic_calibration(input_size, seq_len, *, sequences=CALIBRATION_SEQUENCES,
                          seed=CALIBRATION_SEED):
    """Calibration inputs for a model without real ones: ``min(seq_len,
    CALIBRATION_MAX_STEPS) x sequences x input_size`` values drawn uniformly from [-1, 1]
    with ``numpy.random.default_rng(seed)``."""
    steps = min(seq_len, CALIBRATION_MAX_STEPS)
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=(steps, sequences,
                                                                 input_size))


def calibration_used(seq_len, inputs=None):
    """What the quantization of :func:`quantized_base` calibrates on (JSON-able): the
    user's ``inputs`` (an array), else :func:`synthetic_calibration` of ``seq_len`` steps."""
    if inputs is not None:
        return {"data": "--inputs", "sequences": 1, "steps": int(len(inputs))}
    return {"data": "synthetic", "distribution": "uniform in [-1, 1]",
            "sequences": CALIBRATION_SEQUENCES, "steps": min(seq_len, CALIBRATION_MAX_STEPS),
            "seed": CALIBRATION_SEED}


def quantized_base(model, *, seq_len, calibration=None, **fields):
    """Quantize ``model`` and set the number formats of an SBE configuration to match.

    Parameters
    ----------
    model : Network
    seq_len : int
        Steps of the synthetic calibration sequences.
    calibration : array or list of arrays, optional
        Input sequences (``T x I`` or ``T x N x I``); by default
        :func:`synthetic_calibration` of ``seq_len`` steps.
    **fields
        SbeConfig fields other than the fraction bits, e.g. ``operand_width``.

    Returns
    -------
    (SbeConfig, QuantizedLSTM)
        ``SbeConfig()`` with ``fields`` and the quantized model's ``weight_frac``,
        ``act_frac`` and ``cell_frac`` (:meth:`QuantizedLSTM.apply`): the
        ``base`` of :func:`~.explore.explore`, whose other fields the exploration replaces.

    Raises
    ------
    UsageError
        Field values the configuration rejects, ``seq_len`` not a positive integer.
    """
    try:        # fraction bits 0 until the quantization sets them: any width is valid
        widths = dataclasses.replace(SbeConfig(), weight_frac=0, act_frac=0, cell_frac=0,
                                     **fields)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None
    if calibration is None:
        if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len <= 0:
            raise UsageError(f"seq_len must be a positive integer, not {seq_len!r}")
        calibration = synthetic_calibration(model.spec.input_size, seq_len)
    quantized = quantize_model(model, calibration, width=widths.operand_width,
                               acc_width=widths.acc_width)
    return quantized.apply(widths), quantized


def config_from_model(model, board, *, seq_len, calibration=None, clock_hz=None,
                      **overrides):
    """The fastest SBE configuration of ``model`` on ``board``, with its number formats.

    Parameters
    ----------
    model : Network
        From :func:`load_model`.
    board : str or platform class
        A board name of :func:`nnrtl.boards.get_board` or its platform class.
    seq_len : int
        Steps per sequence to optimise for.
    calibration : array or list of arrays, optional
        Input sequences the activation ranges come from (``T x I`` or ``T x N x I``). By
        default :data:`CALIBRATION_SEQUENCES` synthetic sequences of ``seq_len`` steps,
        inputs uniform in [-1, 1], seed :data:`CALIBRATION_SEED`
        (:func:`synthetic_calibration`).
    clock_hz : float, optional
        Engine clock (default: the board's default clock).
    **overrides
        ``batch_norm``, ``operand_width``, ``acc_width`` (SbeConfig fields the exploration
        keeps) and ``post_units``, ``dram_efficiency``, ``lut_share`` (arguments of
        :func:`~.explore.explore`). The other fields are chosen here.

    Returns
    -------
    (SbeConfig, QuantizedLSTM)

    Raises
    ------
    UsageError
        An override of a field chosen here or unknown, override values the configuration
        rejects, and the errors of :func:`~.explore.explore` (unknown board, nothing fits).
    """
    for name in overrides:
        if name in _CHOSEN:
            raise UsageError(f"{name} {_CHOSEN[name]}; it cannot be overridden")
        if name not in _CONFIG_OVERRIDES + _EXPLORE_OVERRIDES:
            raise UsageError(f"unknown parameter {name!r}; the ones to override are "
                             f"{', '.join(_CONFIG_OVERRIDES + _EXPLORE_OVERRIDES)}")
    fields = {name: value for name, value in overrides.items() if name in _CONFIG_OVERRIDES}
    knobs = {name: value for name, value in overrides.items() if name in _EXPLORE_OVERRIDES}
    base, quantized = quantized_base(model, seq_len=seq_len, calibration=calibration,
                                     **fields)
    exploration = explore(model.spec, board, seq_len=seq_len, clock_hz=clock_hz, base=base,
                          top=1, **knobs)
    return exploration.best.config, quantized


def model_config(model, board, params=(), *, seq_len, calibration=None, lut_share=None):
    """The configuration of ``model`` for ``nnrtl generate/sim sbe --model``: the
    completion ``nnrtl explore sbe --model`` makes
    (:func:`~.exploration.explore_pinned`). The hardware parameters given in ``params``
    (``name=value`` strings of :class:`~nnrtl.hw.sbe.SbeConfig`, e.g. ``pes=64``) are
    kept; the others the design-space exploration chooses, the fastest within the board's
    budget (all DSPs and BRAM36, ``lut_share`` of the LUTs, by default
    :data:`~nnrtl.gen.engines.LUT_SHARE`: without ``params``, for a real model, a large
    engine, slow to simulate). The model's
    sizes, ``seq_len`` and the quantization's fraction bits are set here and cannot be
    given.

    Returns
    -------
    (SbeConfig, QuantizedLSTM)

    Raises
    ------
    UsageError
        A parameter set here, pinned values that conflict, nothing fits the board.
    """
    from ..dse import Budget
    from .exploration import explore_pinned, pins

    values = pins(params, model=True)
    if "seq_len" in values:
        raise UsageError("seq_len is --seq-len (or the length of --inputs); it cannot be "
                         "given with --model")
    base, quantized = quantized_base(model, seq_len=seq_len, calibration=calibration,
                                     **{name: values[name] for name in WIDTHS
                                        if name in values})
    budget = Budget() if lut_share is None else Budget(lut_share=lut_share)
    exploration = explore_pinned(model.spec, board, values, seq_len=seq_len, base=base,
                                 top=1, budget=budget)
    return exploration.best.config, quantized


def load_inputs(path, input_size):
    """Input vectors of a model from a ``.npy`` file: ``seq_len x input_size`` numbers,
    read by :func:`nnrtl.gen.models.load_array`; :class:`UsageError` naming the file and
    the shape it must have."""
    xs = load_array(path, what="inputs")
    if xs.ndim != 2 or xs.shape[1] != input_size:
        raise UsageError(f"{path}: the inputs must be an array of shape (seq_len, "
                         f"{input_size}), not {xs.shape}")
    return xs


def write_engine_inputs(path, config, quantized, xs):
    """Write what :mod:`nnrtl.sim.tb.sbe.engine` loads for a model run (``.npz``): every layer's
    interleaved weight and bias codes and the inputs ``xs`` (floats) as codes of the vector
    format (round half to even, saturated); returns the codes of ``xs``."""
    arrays = {}
    for index in range(config.layers):
        matrix, bias = quantized.interleaved(index)
        arrays[f"matrix{index}"], arrays[f"bias{index}"] = matrix, bias
    codes, _ = to_fixed(xs, config.act_frac, config.operand_width)
    arrays["xs"] = codes
    np.savez(path, **arrays)
    return codes

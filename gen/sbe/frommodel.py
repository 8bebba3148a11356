"""From a trained LSTM to an SBE configuration: the paper's automatic hardware mapping
("Framework of Automatic hardware Mapping", Fig. 12).

:func:`load_model` reads a model file of any format the importers know (found from its
content, then its extension); :func:`config_from_model` explores the design space of the
model on a board (:func:`~.explore.explore`) with the number formats of the quantized model
(:func:`quantized_base`) and takes the fastest configuration that fits. The result is the
one :class:`~nnrtl.hw.sbe.SBEConfig` the RTL, the golden model and the testbench derive
from, with the :class:`~.quantize.QuantizedLSTM` whose codes the engine loads.

Without calibration inputs the activation ranges come from a synthetic calibration set
(:func:`synthetic_calibration`): :data:`CALIBRATION_SEQUENCES` sequences of ``seq_len``
steps, every input drawn uniformly from [-1, 1] by ``numpy.random.default_rng``
(:data:`CALIBRATION_SEED`). It suits inputs normalised to that range; give real inputs
when they are not.
"""

import dataclasses
import os
import zipfile

import numpy as np

from ...hw.sbe.config import SBEConfig
from ..errors import UsageError
from .explore import explore
from .importers import load_keras, load_torch
from .quantize import quantize_model

__all__ = ["MODEL_FORMATS", "CALIBRATION_SEED", "CALIBRATION_SEQUENCES", "load_model",
           "synthetic_calibration", "quantized_base", "config_from_model", "model_config",
           "load_inputs", "write_engine_inputs"]

#: What :func:`load_model` reads, for error messages and help texts.
MODEL_FORMATS = ("a Keras model JSON (model.to_json()) with its HDF5 weights, a whole Keras "
                 "model in HDF5 (model.save), a Keras 3 .keras archive, or a PyTorch state_dict saved with torch.save (.pt, .pth)")

#: Seed and number of sequences of :func:`synthetic_calibration`.
CALIBRATION_SEED = 0
CALIBRATION_SEQUENCES = 8

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

#: SBEConfig fields :func:`config_from_model` chooses, and who chooses them.
_CHOSEN = {
    **dict.fromkeys(("input_size", "hidden_size", "layers"), "comes from the model"),
    "seq_len": "is the seq_len argument",
    **dict.fromkeys(("pes", "batch", "blocks", "bus_weights", "lut_multipliers"),
                    "is chosen by the design-space exploration"),
    **dict.fromkeys(("weight_frac", "act_frac", "cell_frac"), "is chosen by the quantization"),
}
#: What :func:`config_from_model` lets the caller set: SBEConfig fields, and
#: :func:`~.explore.explore` arguments.
_CONFIG_OVERRIDES = ("batch_norm", "operand_width", "acc_width")
_EXPLORE_OVERRIDES = ("post_units", "dram_efficiency", "lut_share")


def _model_format(path):
    """``"json"``, ``"hdf5"``, ``"keras"`` (archive), ``"torch"`` or ``None``."""
    try:
        with open(path, "rb") as file:
            head = file.read(8)
    except OSError as error:
        raise UsageError(f"{path}: cannot read: {error.strerror}") from None
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile:
            return None
        if "config.json" in names:
            return "keras"
        if any(name.endswith("data.pkl") for name in names):
            return "torch"
        return None
    if head == _HDF5_SIGNATURE:
        return "hdf5"
    if head.lstrip()[:1] in (b"{", b"["):
        return "json"
    if os.path.splitext(path)[1].lower() in (".pt", ".pth"):
        return "torch"          # torch.save's legacy (non-zip) format
    return None


def load_model(path, weights=None, *, ignore_trailing=False):
    """Read an LSTM model file, whatever its format.

    Parameters
    ----------
    path : path
        A Keras model JSON (then ``weights`` is its HDF5 weights file), a whole Keras
        model in HDF5 (``model.save``), a Keras 3 ``.keras`` archive, or a PyTorch ``state_dict`` written by ``torch.save``. The
        format is found from the content (zip archive, HDF5 or JSON), then the extension.
    weights : path, optional
        The HDF5 weights of a Keras model JSON (``save_weights`` or ``save``).
    ignore_trailing : bool
        Accept Keras layers after the last LSTM (:func:`~.importers.load_keras`).

    Returns
    -------
    LSTMModel

    Raises
    ------
    UsageError
        A missing or unreadable file, a format it does not read (naming the file and the
        formats it reads), a JSON without weights or weights with a file that is not a
        JSON, and every error of :func:`~.importers.load_keras` and
        :func:`~.importers.load_torch`.
    """
    path = os.fspath(path)
    for name in (path, weights):
        if name is not None and not os.path.exists(name):
            raise UsageError(f"{os.fspath(name)}: no such file")
    kind = _model_format(path)
    if weights is not None:
        if kind != "json":
            raise UsageError(f"{path}: a weights file goes with a Keras model JSON, and this "
                             f"is not one")
        return load_keras(path, weights, ignore_trailing=ignore_trailing)
    if kind == "json":
        raise UsageError(f"{path}: a Keras model JSON needs its HDF5 weights file too "
                         f"(--weights)")
    if kind in ("keras", "hdf5"):
        return load_keras(path, ignore_trailing=ignore_trailing)
    if kind == "torch":
        return load_torch(path)
    raise UsageError(f"{path}: not a model file nnrtl reads; it reads {MODEL_FORMATS}")


def synthetic_calibration(input_size, seq_len, *, sequences=CALIBRATION_SEQUENCES,
                          seed=CALIBRATION_SEED):
    """Calibration inputs for a model without real ones: ``seq_len x sequences x
    input_size`` values drawn uniformly from [-1, 1] with ``numpy.random.default_rng(seed)``."""
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=(seq_len, sequences,
                                                                 input_size))


def quantized_base(model, *, seq_len, calibration=None, **fields):
    """Quantize ``model`` and set the number formats of an SBE configuration to match.

    Parameters
    ----------
    model : LSTMModel
    seq_len : int
        Steps of the synthetic calibration sequences.
    calibration : array or list of arrays, optional
        Input sequences (``T x I`` or ``T x N x I``); by default
        :func:`synthetic_calibration` of ``seq_len`` steps.
    **fields
        SBEConfig fields other than the fraction bits, e.g. ``operand_width``.

    Returns
    -------
    (SBEConfig, QuantizedLSTM)
        ``SBEConfig()`` with ``fields`` and the quantized model's ``weight_frac``,
        ``act_frac`` and ``cell_frac`` (:meth:`~.quantize.QuantizedLSTM.apply`): the
        ``base`` of :func:`~.explore.explore`, whose other fields the exploration replaces.

    Raises
    ------
    UsageError
        Field values the configuration rejects, ``seq_len`` not a positive integer.
    """
    try:        # fraction bits 0 until the quantization sets them: any width is valid
        widths = dataclasses.replace(SBEConfig(), weight_frac=0, act_frac=0, cell_frac=0,
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
    model : LSTMModel
        From :func:`load_model`, :func:`~.importers.load_keras` or
        :func:`~.importers.load_torch`.
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
        ``batch_norm``, ``operand_width``, ``acc_width`` (SBEConfig fields the exploration
        keeps) and ``post_units``, ``dram_efficiency``, ``lut_share`` (arguments of
        :func:`~.explore.explore`). The other fields are chosen here.

    Returns
    -------
    (SBEConfig, QuantizedLSTM)

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


def model_config(model, board, params=(), *, seq_len, calibration=None):
    """The configuration of ``model`` for ``nnrtl generate/sim sbe --model``.

    Without ``params`` the design-space exploration chooses it (:func:`config_from_model`:
    for a real model a large engine, slow to simulate). With ``params`` (``name=value``
    strings of :class:`~nnrtl.hw.sbe.SBEConfig`, e.g. ``pes=64``) they set the hardware and
    no exploration runs; the model's sizes, ``seq_len`` and the quantization's fraction bits
    are set here and cannot be given.

    Returns
    -------
    (SBEConfig, QuantizedLSTM)
    """
    from ..params import parse_params

    if not params:
        return config_from_model(model, board, seq_len=seq_len, calibration=calibration)
    base, quantized = quantized_base(model, seq_len=seq_len, calibration=calibration)
    spec = model.spec
    fixed = {"input_size": spec.input_size, "hidden_size": spec.hidden_size,
             "layers": spec.layers, "seq_len": seq_len, "weight_frac": base.weight_frac,
             "act_frac": base.act_frac, "cell_frac": base.cell_frac}
    for item in params:
        name = item.partition("=")[0].strip()
        if name in fixed:
            raise UsageError(f"{name} {_CHOSEN[name]}; it cannot be given with --model")
    items = [*params, *(f"{name}={value}" for name, value in fixed.items())]
    return parse_params(SBEConfig, items, base=base), quantized


def load_inputs(path, input_size):
    """Input vectors of a model from a ``.npy`` file: ``seq_len x input_size`` floats;
    :class:`UsageError` naming the file and the shape it must have."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    try:
        xs = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise UsageError(f"{path}: not a .npy array ({error})") from None
    if xs.ndim != 2 or xs.shape[1] != input_size or xs.shape[0] == 0:
        raise UsageError(f"{path}: the inputs must be an array of shape (seq_len, "
                         f"{input_size}), not {xs.shape}")
    if not np.issubdtype(xs.dtype, np.number) or not np.all(np.isfinite(xs)):
        raise UsageError(f"{path}: the inputs must be finite numbers")
    return xs.astype(np.float64)


def write_engine_inputs(path, config, quantized, xs):
    """Write what :mod:`nnrtl.sim.tb.sbe` loads for a model run (``.npz``): every layer's
    interleaved weight and bias codes and the inputs ``xs`` (floats) as codes of the vector
    format (round half to even, saturated); returns the codes of ``xs``."""
    from .quantize import to_fixed

    arrays = {}
    for index in range(config.layers):
        matrix, bias = quantized.interleaved(index)
        arrays[f"matrix{index}"], arrays[f"bias{index}"] = matrix, bias
    codes, _ = to_fixed(xs, config.act_frac, config.operand_width)
    arrays["xs"] = codes
    np.savez(path, **arrays)
    return codes

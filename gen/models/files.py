"""Reading any model file nnrtl knows (:func:`load_network`, the format found from the
content, then the extension) and writing a network back in its source's format
(:func:`save_network`)."""

import os
import zipfile

from ..errors import UsageError
from .keras_io import load_keras, save_keras
from .onnx_io import load_onnx, save_onnx
from .torch_io import load_export, load_state_dict, save_export, save_state_dict
from .torchscript import load_torchscript, save_torchscript

__all__ = ["MODEL_FORMATS", "model_format", "load_network", "save_network", "check_finite"]

#: What :func:`load_network` reads, for error messages and help texts.
MODEL_FORMATS = ("a PyTorch state_dict of an nn.LSTM/nn.GRU saved with torch.save (.pt, "
                 ".pth), a TorchScript archive (torch.jit.save) or torch.export archive "
                 "(.pt2) of a CNN, an ONNX model (.onnx), a Keras model JSON "
                 "(model.to_json()) with its HDF5 weights, a whole Keras model in HDF5 "
                 "(model.save) or a Keras 3 .keras archive")

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def model_format(path):
    """``"json"``, ``"hdf5"``, ``"keras"`` (archive), ``"state_dict"``, ``"torchscript"``,
    ``"export"``, ``"onnx"`` or ``None``."""
    try:
        with open(path, "rb") as file:
            head = file.read(8)
    except OSError as error:
        raise UsageError(f"{path}: cannot read: {error.strerror}") from None
    extension = os.path.splitext(path)[1].lower()
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile:
            return None
        if "config.json" in names:
            return "keras"
        if any(name.endswith("/archive_format") for name in names) \
                or any("/models/" in name and name.endswith(".json") for name in names):
            return "export"
        if any("/code/__torch__/" in name for name in names):
            return "torchscript"
        if any(name.endswith("data.pkl") for name in names):
            return "state_dict"
        return None
    if head == _HDF5_SIGNATURE:
        return "hdf5"
    if head.lstrip()[:1] in (b"{", b"["):
        return "json"
    if head[:1] == b"\x08" or extension == ".onnx":      # ModelProto field 1, ir_version
        return "onnx"
    if extension in (".pt", ".pth"):
        return "state_dict"          # torch.save's legacy (non-zip) format
    return None


def load_network(path, weights=None, *, prefix=None, ignore_trailing=False):
    """Read a model file, whatever its format.

    Parameters
    ----------
    path : path
        Any of :data:`MODEL_FORMATS`.
    weights : path, optional
        The HDF5 weights of a Keras model JSON.
    prefix : str, optional
        The key prefix of the RNN in a state_dict holding several.
    ignore_trailing : bool
        Accept Keras layers after the last LSTM.

    Returns
    -------
    Network

    Raises
    ------
    UsageError
        A missing or unreadable file, a format nnrtl does not read (naming the formats it
        reads), and every error of the format's reader.
    """
    path = os.fspath(path)
    for name in (path, weights):
        if name is not None and not os.path.exists(name):
            raise UsageError(f"{os.fspath(name)}: no such file")
    kind = model_format(path)
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
    if kind == "state_dict":
        return load_state_dict(path, prefix=prefix)
    if kind == "torchscript":
        return load_torchscript(path)
    if kind == "export":
        return load_export(path)
    if kind == "onnx":
        return load_onnx(path)
    raise UsageError(f"{path}: not a model file nnrtl reads; it reads {MODEL_FORMATS}")


_SAVERS = {"state_dict": save_state_dict, "torchscript": save_torchscript,
           "export": save_export, "onnx": save_onnx, "keras": save_keras}


def save_network(network, path):
    """Write ``network`` in its source's format: a state_dict with the same keys
    (``torch.save``), the TorchScript archive with its parameters replaced
    (``torch.jit.save``), the ``.pt2`` archive with its weights replaced, the ONNX model
    with its initializers replaced (``onnx.save``), or a copy of the Keras file with its
    datasets overwritten (for a JSON + weights pair, ``path`` is the new weights file).

    Raises
    ------
    UsageError
        A network built by hand (no source format), NaN or infinite weights; nothing is
        written then.
    """
    if network.format not in _SAVERS:
        raise UsageError("the network was not read from a file; save_network writes the "
                         "format of the file a network was read from")
    check_finite(network)
    _SAVERS[network.format](network, path)


def check_finite(network):
    """:class:`UsageError` naming a parameter of ``network`` with NaN or infinite values
    (nothing is written then)."""
    for name, value in network.parameters().items():
        if not (value == value).all() or abs(value).max(initial=0) == float("inf"):
            raise UsageError(f"{network.source}: parameter {name} has NaN or infinite "
                             f"values; nothing written")

"""The shared model layer: every engine reads models through it.

* :mod:`.layers`, :mod:`.network`: framework-neutral layers (float64, PyTorch's layout) and
  the :class:`Network` holding them with its source file's tensor names.
* :mod:`.reference`: the float64 numpy forward; :mod:`.torch_module`: the equivalent
  PyTorch module (:func:`to_torch`, :func:`from_torch`).
* :mod:`.files`: :func:`load_network` (PyTorch state_dict / TorchScript / torch.export,
  ONNX, Keras) and :func:`save_network` (the source's format), built on
  :mod:`.torch_io`, :mod:`.torchscript`, :mod:`.onnx_io`, :mod:`.keras_io`.
* :mod:`.arrays`: :func:`load_array` for ``.npy`` inputs; :mod:`.quantize`: the shared
  16-bit quantizer.
"""

from .arrays import load_array
from .files import MODEL_FORMATS, load_network, model_format, save_network
from .keras_io import load_keras
from .layers import (DIRECTIONS, GRU, LSTM, Conv2d, Dropout, Flatten, Linear,
                     LocalResponseNorm, MaxPool2d, ReLU, Sigmoid, Softmax, Tanh,
                     refuse_extensions)
from .network import Entry, ModelSpec, Network
from .onnx_io import load_onnx
from .reference import forward
from .torch_io import load_export, load_state_dict
from .torchscript import load_torchscript
from .torch_module import from_torch, to_torch, torch_parameter

__all__ = [
    "load_array", "MODEL_FORMATS", "load_network", "model_format", "save_network",
    "load_keras", "DIRECTIONS", "GRU", "LSTM", "Conv2d", "Dropout", "Flatten", "Linear",
    "LocalResponseNorm", "MaxPool2d", "ReLU", "Sigmoid", "Softmax", "Tanh", "refuse_extensions", "Entry", "ModelSpec", "Network", "load_onnx", "forward", "load_export",
    "load_state_dict", "load_torchscript", "from_torch", "to_torch", "torch_parameter",
]

"""The framework-neutral layers: frozen dataclasses holding float64 weights in PyTorch's
layout, each checking its shapes.

Recurrent layers (time first, as ``nn.LSTM``/``nn.GRU`` with ``batch_first=False``):

* :class:`LSTM`: gate blocks i, f, g, o; ``weight_ih`` ``4H x I``, ``weight_hh`` ``4H x H``
  (``4H x P`` with a projection), ``weight_hr`` ``P x H``, ``bias_ih`` and ``bias_hh``
  ``4H`` kept apart (or both ``None``).
* :class:`GRU`: gate blocks r, z, n; ``weight_ih`` ``3H x I``, ``weight_hh`` ``3H x H``,
  biases ``3H`` kept apart (PyTorch applies ``b_hn`` inside ``r * (...)``).

Two forms ONNX has and PyTorch does not (:meth:`_RNN.extensions`; the engines that do
not run them refuse such a layer): an LSTM's peepholes (``weight_peep``, ``3H``: blocks
i, f, o, each multiplying the cell elementwise into its gate) and a GRU with
``linear_before_reset=False`` (the reset gate applied to ``h`` before ``W_hn``).

``direction`` is ``"forward"``, ``"reverse"`` (ONNX: the sequence read from its last step,
outputs at their own steps) or ``"bidirectional"``; a bidirectional layer also has the
``*_reverse`` tensors, as PyTorch's state_dict.

Convolutional layers (``N x C x H x W``): :class:`Conv2d` (grouped too), :class:`ReLU`,
:class:`MaxPool2d` (its end padding may differ from its start's, as ONNX's ``pads``),
:class:`LocalResponseNorm` (ONNX's ``LRN``), :class:`Dropout`, :class:`Flatten` (from
dimension 1), :class:`Linear`, and the activations :class:`Tanh`, :class:`Sigmoid`,
:class:`Softmax` (over the last dimension, the features).
"""

import dataclasses

import numpy as np

__all__ = ["DIRECTIONS", "LSTM", "GRU", "Conv2d", "ReLU", "MaxPool2d", "Linear", "Flatten",
           "LocalResponseNorm", "Dropout", "Softmax", "Tanh", "Sigmoid", "RNN_LAYERS",
           "refuse_extensions"]

#: RNN directions, ONNX's names.
DIRECTIONS = ("forward", "reverse", "bidirectional")


def _array(layer, name):
    value = getattr(layer, name)
    if value is not None:
        value = np.array(value, dtype=np.float64)
        value.flags.writeable = False
        object.__setattr__(layer, name, value)
    return value


def _shape_error(layer, name, value, shape, rule):
    return ValueError(f"{type(layer).__name__}.{name} must have shape {shape} ({rule}), not "
                      f"{np.shape(value)}")


def _check(layer, name, shape, rule):
    value = getattr(layer, name)
    if value is None or value.shape != shape:
        raise _shape_error(layer, name, value, shape, rule)


def _pair(layer, name, minimum):
    value = getattr(layer, name)
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    value = tuple(value) if isinstance(value, (tuple, list)) else value
    if not (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                    for v in value)):
        raise TypeError(f"{type(layer).__name__}.{name} must be an integer or a pair of "
                        f"integers of at least {minimum}, not {getattr(layer, name)!r}")
    object.__setattr__(layer, name, value)


def _repr(layer):
    """Shapes instead of values."""
    parts = []
    for field in dataclasses.fields(layer):
        value = getattr(layer, field.name)
        if isinstance(value, np.ndarray):
            parts.append(f"{field.name}=<{'x'.join(map(str, value.shape))}>")
        elif value is not None:
            parts.append(f"{field.name}={value!r}")
    return f"{type(layer).__name__}({', '.join(parts)})"


class _RNN:
    """What LSTM and GRU share: shape checks over both directions."""

    __repr__ = _repr

    GATES = 0
    #: Tensor fields of one direction, in PyTorch's order.
    FIELDS = ()
    #: Tensor fields of one direction that PyTorch's layer does not have (ONNX's).
    ONNX_FIELDS = ()

    def _check_rnn(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"{type(self).__name__}.direction must be one of "
                             f"{', '.join(DIRECTIONS)}, not {self.direction!r}")
        for field in self.FIELDS + self.ONNX_FIELDS:
            _array(self, field)
            _array(self, field + "_reverse")
        if self.weight_ih is None or self.weight_ih.ndim != 2 or self.weight_hh is None \
                or self.weight_hh.ndim != 2 or not self.weight_hh.size \
                or self.weight_hh.shape[0] % self.GATES:
            raise ValueError(f"{type(self).__name__}.weight_ih and weight_hh must be 2-D with "
                             f"{self.GATES} * hidden_size rows, not {np.shape(self.weight_ih)} "
                             f"and {np.shape(self.weight_hh)}")
        rows = self.weight_hh.shape[0]
        hidden, inputs = rows // self.GATES, self.weight_ih.shape[1]
        recurrent = hidden
        if "weight_hr" in self.FIELDS and self.weight_hr is not None:
            recurrent = self.weight_hr.shape[0] if self.weight_hr.ndim == 2 else -1
            if not 0 < recurrent < hidden:
                raise _shape_error(self, "weight_hr", self.weight_hr, "(P, H)",
                                   f"0 < P < hidden_size {hidden}")
        shapes = {"weight_ih": (rows, inputs), "weight_hh": (rows, recurrent),
                  "bias_ih": (rows,), "bias_hh": (rows,), "weight_hr": (recurrent, hidden),
                  "weight_peep": (3 * hidden,)}
        rules = {"weight_ih": "gates * hidden_size, input_size",
                 "weight_hh": "gates * hidden_size, proj_size or hidden_size",
                 "bias_ih": "gates * hidden_size", "bias_hh": "gates * hidden_size",
                 "weight_hr": "proj_size, hidden_size",
                 "weight_peep": "3 * hidden_size: i, f, o"}
        if (self.bias_ih is None) != (self.bias_hh is None):
            raise ValueError(f"{type(self).__name__}.bias_ih and bias_hh must both be given "
                             f"or both be None")
        bidirectional = self.direction == "bidirectional"
        for field in self.FIELDS + self.ONNX_FIELDS:
            forward = getattr(self, field)
            reverse = getattr(self, field + "_reverse")
            if forward is not None:
                _check(self, field, shapes[field], rules[field])
            if bidirectional and (reverse is None) != (forward is None):
                raise ValueError(f"{type(self).__name__}.{field}_reverse must be given exactly "
                                 f"when {field} is, for a bidirectional layer")
            if not bidirectional and reverse is not None:
                raise ValueError(f"{type(self).__name__}.{field}_reverse is given, but the "
                                 f"direction is {self.direction!r}")
            if reverse is not None:
                _check(self, field + "_reverse", shapes[field], rules[field])

    @property
    def input_size(self):
        return self.weight_ih.shape[1]

    @property
    def hidden_size(self):
        return self.weight_hh.shape[0] // self.GATES

    @property
    def num_directions(self):
        return 2 if self.direction == "bidirectional" else 1

    @property
    def output_size(self):
        """Features of each step's output: directions times (proj_size or hidden_size)."""
        return self.num_directions * self.weight_hh.shape[1]

    @property
    def has_bias(self):
        return self.bias_ih is not None

    def extensions(self):
        """The ONNX forms beyond PyTorch's equations this layer uses: ``"peepholes"``,
        ``"linear_before_reset=0"`` (none for a layer PyTorch can compute)."""
        found = []
        if getattr(self, "weight_peep", None) is not None:
            found.append("peepholes")
        if not getattr(self, "linear_before_reset", True):
            found.append("linear_before_reset=0")
        return tuple(found)

    def passes(self):
        """``[(field suffix, forward layer, reversed in time)]``: each direction as a
        forward layer over the sequence in its own time order (reversed for a reverse
        direction), the tensors of a bidirectional layer's second direction its
        ``_reverse`` ones. An engine that runs forward layers runs each in turn."""
        fields = self.FIELDS + self.ONNX_FIELDS
        if self.direction == "forward":
            return [("", self, False)]
        if self.direction == "reverse":
            return [("", dataclasses.replace(self, direction="forward"), True)]
        cleared = {field + "_reverse": None for field in fields}
        forward = dataclasses.replace(self, direction="forward", **cleared)
        backward = dataclasses.replace(self, direction="forward", **cleared,
                                       **{field: getattr(self, field + "_reverse")
                                          for field in fields})
        return [("", forward, False), ("_reverse", backward, True)]

    def tensor_fields(self):
        """Names of the tensors this layer holds (PyTorch's, without ``_l{k}``; an LSTM's
        peepholes ``weight_peep``)."""
        suffixes = ("", "_reverse") if self.direction == "bidirectional" else ("",)
        return tuple(field + suffix for suffix in suffixes
                     for field in self.FIELDS + self.ONNX_FIELDS
                     if getattr(self, field + suffix) is not None)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LSTM(_RNN):
    """An LSTM layer, ``nn.LSTM(input_size, hidden_size, proj_size=...)``'s equations.

    Attributes
    ----------
    weight_ih, weight_hh, bias_ih, bias_hh, weight_hr : ndarray
        Gate blocks i, f, g, o (see the module); biases and ``weight_hr`` may be ``None``.
    weight_peep : ndarray
        Peepholes (ONNX's ``P``), blocks i, f, o of ``hidden_size`` each, or ``None``.
    direction : str
    weight_ih_reverse, ... : ndarray
        The reverse direction's tensors, for ``"bidirectional"`` only.
    """

    GATES = 4
    FIELDS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
    ONNX_FIELDS = ("weight_peep",)

    weight_ih: np.ndarray
    weight_hh: np.ndarray
    bias_ih: np.ndarray = None
    bias_hh: np.ndarray = None
    weight_hr: np.ndarray = None
    direction: str = "forward"
    weight_ih_reverse: np.ndarray = None
    weight_hh_reverse: np.ndarray = None
    bias_ih_reverse: np.ndarray = None
    bias_hh_reverse: np.ndarray = None
    weight_hr_reverse: np.ndarray = None
    weight_peep: np.ndarray = None
    weight_peep_reverse: np.ndarray = None

    def __post_init__(self):
        self._check_rnn()

    @property
    def proj_size(self):
        """0 without a projection, as ``nn.LSTM``."""
        return 0 if self.weight_hr is None else self.weight_hr.shape[0]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GRU(_RNN):
    """A GRU layer, ``nn.GRU``'s equations (ONNX's with ``linear_before_reset=1``), or
    ONNX's default form.

    Attributes
    ----------
    weight_ih, weight_hh, bias_ih, bias_hh : ndarray
        Gate blocks r, z, n; biases may be ``None``.
    linear_before_reset : bool
        True (default, PyTorch's): ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``;
        False (ONNX's default): ``n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)``.
    direction : str
    weight_ih_reverse, ... : ndarray
        The reverse direction's tensors, for ``"bidirectional"`` only.
    """

    GATES = 3
    FIELDS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")

    weight_ih: np.ndarray
    weight_hh: np.ndarray
    bias_ih: np.ndarray = None
    bias_hh: np.ndarray = None
    direction: str = "forward"
    weight_ih_reverse: np.ndarray = None
    weight_hh_reverse: np.ndarray = None
    bias_ih_reverse: np.ndarray = None
    bias_hh_reverse: np.ndarray = None
    linear_before_reset: bool = True

    def __post_init__(self):
        if not isinstance(self.linear_before_reset, bool):
            raise TypeError(f"GRU.linear_before_reset must be a bool, not "
                            f"{self.linear_before_reset!r}")
        self._check_rnn()

    proj_size = 0


RNN_LAYERS = (LSTM, GRU)


def refuse_extensions(layer, where, runner):
    """Raise :class:`~nnrtl.gen.errors.UsageError` if ``layer`` uses an ONNX form
    (:meth:`_RNN.extensions`) that ``runner`` (e.g. ``"the SBE"``) does not compute;
    ``where`` names the layer."""
    found = layer.extensions()
    if found:
        from ..errors import UsageError
        raise UsageError(f"{where} uses {' and '.join(found)} (ONNX forms PyTorch's LSTM "
                         f"and GRU do not have); {runner} does not run them")


class _Weighted:
    FIELDS = ("weight", "bias")
    __repr__ = _repr

    def tensor_fields(self):
        return tuple(f for f in self.FIELDS if getattr(self, f) is not None)


class _Stateless:
    """A layer without tensors."""

    FIELDS = ()

    def tensor_fields(self):
        return ()


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Conv2d(_Weighted):
    """``nn.Conv2d`` with zero padding.

    Attributes
    ----------
    weight : ndarray, shape (out_channels, in_channels / groups, kernel_h, kernel_w)
    bias : ndarray, shape (out_channels,), or None
    stride, padding, dilation : (int, int)
    groups : int
        Output channel group ``j`` of ``groups`` reads input channel group ``j`` only.
    """

    weight: np.ndarray
    bias: np.ndarray = None
    stride: tuple = (1, 1)
    padding: tuple = (0, 0)
    dilation: tuple = (1, 1)
    groups: int = 1

    def __post_init__(self):
        weight = _array(self, "weight")
        if weight.ndim != 4 or not weight.size:
            raise _shape_error(self, "weight", weight, "(O, C, kH, kW)", "4-D, not empty")
        if _array(self, "bias") is not None:
            _check(self, "bias", weight.shape[:1], "out_channels")
        _pair(self, "stride", 1)
        _pair(self, "padding", 0)
        _pair(self, "dilation", 1)
        if not isinstance(self.groups, int) or isinstance(self.groups, bool) \
                or self.groups < 1 or weight.shape[0] % self.groups:
            raise ValueError(f"Conv2d.groups must be a positive integer dividing "
                             f"out_channels {weight.shape[0]}, not {self.groups!r}")

    @property
    def in_channels(self):
        return self.weight.shape[1] * self.groups

    @property
    def out_channels(self):
        return self.weight.shape[0]

    @property
    def kernel_size(self):
        return self.weight.shape[2:]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Linear(_Weighted):
    """``nn.Linear``: ``y = x weight^T + bias``.

    Attributes
    ----------
    weight : ndarray, shape (out_features, in_features)
    bias : ndarray, shape (out_features,), or None
    """

    weight: np.ndarray
    bias: np.ndarray = None

    def __post_init__(self):
        weight = _array(self, "weight")
        if weight.ndim != 2 or not weight.size:
            raise _shape_error(self, "weight", weight, "(out_features, in_features)",
                               "2-D, not empty")
        if _array(self, "bias") is not None:
            _check(self, "bias", weight.shape[:1], "out_features")

    @property
    def in_features(self):
        return self.weight.shape[1]

    @property
    def out_features(self):
        return self.weight.shape[0]


@dataclasses.dataclass(frozen=True, eq=False)
class MaxPool2d(_Stateless):
    """``nn.MaxPool2d`` (``ceil_mode=False``, dilation 1); ``stride`` defaults to
    ``kernel_size``; padding with -inf, at most half the kernel, as PyTorch's rule;
    ``padding_end`` (bottom, right) defaults to ``padding`` (top, left): ONNX's ``pads``
    may differ (a Caffe model's ``ceil_mode`` pooling, converted)."""

    kernel_size: tuple
    stride: tuple = None
    padding: tuple = (0, 0)
    padding_end: tuple = None

    def __post_init__(self):
        _pair(self, "kernel_size", 1)
        if self.stride is None:
            object.__setattr__(self, "stride", self.kernel_size)
        _pair(self, "stride", 1)
        _pair(self, "padding", 0)
        if self.padding_end is None:
            object.__setattr__(self, "padding_end", self.padding)
        _pair(self, "padding_end", 0)
        if any(2 * p > k for p, k in zip(self.padding + self.padding_end,
                                         self.kernel_size * 2)):
            end = "" if self.padding_end == self.padding else \
                f" and padding_end {self.padding_end}"
            raise ValueError(f"MaxPool2d.padding {self.padding}{end} must be at most half the "
                             f"kernel_size {self.kernel_size}")


@dataclasses.dataclass(frozen=True, eq=False)
class ReLU(_Stateless):
    """``nn.ReLU``."""


@dataclasses.dataclass(frozen=True, eq=False)
class Flatten(_Stateless):
    """``nn.Flatten()``: every dimension after the batch's into one."""


@dataclasses.dataclass(frozen=True, eq=False)
class LocalResponseNorm(_Stateless):
    """ONNX's ``LRN`` over the channels: ``y_c = x_c / (k + alpha / size * sum of x_j²)
    ** beta``, ``j`` from ``c - floor((size - 1) / 2)`` to ``c + ceil((size - 1) / 2)``
    (``nn.LocalResponseNorm`` for an odd ``size``; PyTorch centres an even window one
    channel earlier)."""

    size: int
    alpha: float = 1e-4
    beta: float = 0.75
    k: float = 1.0

    def __post_init__(self):
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 1:
            raise ValueError(f"LocalResponseNorm.size must be a positive integer, not "
                             f"{self.size!r}")
        for name in ("alpha", "beta", "k"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not np.isfinite(value):
                raise ValueError(f"LocalResponseNorm.{name} must be a finite number, not "
                                 f"{value!r}")
            object.__setattr__(self, name, float(value))


@dataclasses.dataclass(frozen=True, eq=False)
class Dropout(_Stateless):
    """``nn.Dropout(p)``: at inference (the reference forward) the identity; in training
    a random mask of each sample's values, the survivors scaled by ``1 / (1 - p)``."""

    p: float = 0.5

    def __post_init__(self):
        if not isinstance(self.p, (int, float)) or not 0 <= self.p < 1:
            raise ValueError(f"Dropout.p must be from 0 to below 1, not {self.p!r}")
        object.__setattr__(self, "p", float(self.p))


@dataclasses.dataclass(frozen=True, eq=False)
class Softmax(_Stateless):
    """``nn.Softmax(dim=-1)``: the class probabilities over the last dimension (the
    features of an ``N x F`` or ``T x N x F`` output)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Tanh(_Stateless):
    """``nn.Tanh``."""


@dataclasses.dataclass(frozen=True, eq=False)
class Sigmoid(_Stateless):
    """``nn.Sigmoid``."""

"""The layer chain FPDeep maps (spec §2.11 step 1): the weighted layers of a CNN in order,
each with its shapes and its training work.

A :class:`ChainLayer` is one convolution or fully connected layer with what follows it
folded in (ReLU, max-pool: they run in the SFU of the node that completes the layer and
cost no MACs). Square feature maps and kernels only (the paper's networks and nnrtl's
model layer). Built in: :func:`alexnet`, :func:`vgg16`, :func:`vgg19` (spec §4.2, standard
shapes, 224 x 224 inputs; AlexNet without groups or LRN, conv1 3 -> 96 11 x 11 / 4 pad 2,
which gives the spec's 55 x 55 output as 227 x 227 without padding does). Any small CNN of
the model layer (:func:`from_network`): the input image side is a parameter, since a
state_dict has none.

Work per sample (spec §0, §2.8): ``MAC_l = W_out² · OC · IC · K²`` for a convolution,
``IC · OC`` for a fully connected layer; training runs FP, EB and PG on it (3 modules),
except the first layer, which needs no EB (no error with respect to the image, spec
§2.8): 2 modules. :attr:`ChainLayer.work` is ``modules · MAC_l`` MACs, the ops ``2 ·
work`` (the paper's ``Op_l = 3 · 2 · MAC_l`` for every other layer).
"""

import dataclasses

from ..errors import UsageError

__all__ = ["ChainLayer", "Chain", "alexnet", "vgg16", "vgg19", "BUILTIN", "from_network",
           "builtin"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChainLayer:
    """One weighted layer of the chain.

    Attributes
    ----------
    name : str
        ``conv1_2``, ``fc6``... (built in) or ``layers[n]`` (from a model file).
    kind : str
        ``"conv"`` or ``"fc"`` (a fully connected layer is a 1 x 1 convolution on a 1 x 1
        map: ``k`` 1, ``w_in`` = ``w_out`` = 1).
    ic, oc : int
        Input and output channels (features).
    k, stride, pad : int
        Kernel side, stride, zero padding.
    w_in, w_out : int
        Input and output feature-map side.
    pool : tuple of int or None
        ``(kernel, stride, padding)`` of the max-pool after the layer.
    relu : bool
        A ReLU follows (before the pool).
    first : bool
        The network's first weighted layer (no EB module).
    groups : int
        A grouped convolution: each output channel reads ``ic / groups`` input channels.
    pool_end : int or None
        The pool's padding at the bottom and right when it differs from its top and left
        (ONNX's ``pads``; ``None``: the same).
    lrn : tuple or None
        ``(size, alpha, beta, k)`` of a local response normalisation after the layer
        (the SFU's, no MACs).
    dropout : float
        The drop probability of a dropout after the layer (a mask in the SFU, no MACs).
    """

    name: str
    kind: str
    ic: int
    oc: int
    k: int = 1
    stride: int = 1
    pad: int = 0
    w_in: int = 1
    w_out: int = 1
    pool: tuple | None = None
    relu: bool = True
    first: bool = False
    groups: int = 1
    pool_end: int | None = None
    lrn: tuple | None = None
    dropout: float = 0.0

    @property
    def fan_in(self):
        """Input channels each output channel reads (``ic / groups``)."""
        return self.ic // self.groups

    @property
    def macs(self):
        """MACs of one pass (FP) per sample."""
        return self.w_out ** 2 * self.oc * self.fan_in * self.k ** 2

    @property
    def modules(self):
        """Modules doing ``macs`` each per sample: FP, EB, PG; no EB on the first layer."""
        return 2 if self.first else 3

    @property
    def work(self):
        """Training MACs per sample."""
        return self.modules * self.macs

    @property
    def params(self):
        """Weights (bias not counted)."""
        return self.oc * self.fan_in * self.k ** 2

    @property
    def w_pooled(self):
        """Side of the map the next layer reads (after the pool)."""
        if self.pool is None:
            return self.w_out
        k, s, p = self.pool
        return (self.w_out + p + (p if self.pool_end is None else self.pool_end) - k) // s + 1

    @property
    def out_words(self):
        """Words of the output the next layer reads, per sample (after the pool)."""
        return self.oc * self.w_pooled ** 2

    @property
    def in_words(self):
        """Words of this layer's input per sample."""
        return self.ic * self.w_in ** 2


@dataclasses.dataclass(frozen=True)
class Chain:
    """A network as FPDeep maps it: its name and weighted layers in order."""

    name: str
    layers: tuple

    def __post_init__(self):
        if not self.layers:
            raise UsageError(f"network {self.name}: no convolution or linear layer to map")

    @property
    def work(self):
        """Training MACs per sample, all layers."""
        return sum(layer.work for layer in self.layers)

    def as_json(self):
        return [dict(dataclasses.asdict(layer), macs=layer.macs, work=layer.work)
                for layer in self.layers]


def _conv_out(side, k, stride, pad, where):
    out = (side + 2 * pad - k) // stride + 1
    if out < 1:
        raise UsageError(f"{where}: a {k} x {k} kernel (stride {stride}, padding {pad}) does "
                         f"not fit a {side} x {side} input; give a larger --image-size")
    return out


def _build(name, spec, image_size, in_channels=3):
    """Layers from ``spec``: ``("conv", name, oc, k, stride, pad)``, ``("pool", k, s, p)``,
    ``("fc", name, out)``."""
    layers, channels, side, flat = [], in_channels, image_size, None
    for item in spec:
        if item[0] == "conv":
            _, lname, oc, k, stride, pad = item
            out = _conv_out(side, k, stride, pad, f"{name} {lname}")
            layers.append(ChainLayer(name=lname, kind="conv", ic=channels, oc=oc, k=k,
                                     stride=stride, pad=pad, w_in=side, w_out=out,
                                     first=not layers))
            channels, side = oc, out
        elif item[0] == "pool":
            _, k, s, p = item
            last = layers[-1]
            layers[-1] = dataclasses.replace(last, pool=(k, s, p))
            side = layers[-1].w_pooled
            if side < 1:
                raise UsageError(f"{name}: the pool after {last.name} leaves no output at "
                                 f"--image-size {image_size}")
        else:
            _, lname, out = item
            features = channels * side * side if flat is None else flat
            layers.append(ChainLayer(name=lname, kind="fc", ic=features, oc=out,
                                     relu=item is not spec[-1], first=not layers))
            flat = out
    return Chain(name, tuple(layers))


def _vgg(blocks):
    spec = []
    for block, (count, channels) in enumerate(blocks, 1):
        for n in range(1, count + 1):
            spec.append(("conv", f"conv{block}_{n}", channels, 3, 1, 1))
        spec.append(("pool", 2, 2, 0))
    return spec + [("fc", "fc6", 4096), ("fc", "fc7", 4096), ("fc", "fc8", 1000)]


_SPECS = {
    "alexnet": [("conv", "conv1", 96, 11, 4, 2), ("pool", 3, 2, 0),
                ("conv", "conv2", 256, 5, 1, 2), ("pool", 3, 2, 0),
                ("conv", "conv3", 384, 3, 1, 1), ("conv", "conv4", 384, 3, 1, 1),
                ("conv", "conv5", 256, 3, 1, 1), ("pool", 3, 2, 0),
                ("fc", "fc6", 4096), ("fc", "fc7", 4096), ("fc", "fc8", 1000)],
    "vgg16": _vgg([(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)]),
    "vgg19": _vgg([(2, 64), (2, 128), (4, 256), (4, 512), (4, 512)]),
}

#: The built-in networks.
BUILTIN = tuple(_SPECS)


def builtin(name, image_size=224):
    """The built-in network ``name`` (one of :data:`BUILTIN`) for ``image_size`` inputs."""
    if name not in _SPECS:
        raise UsageError(f"unknown network {name!r}; built in: {', '.join(BUILTIN)}")
    _check_size(image_size)
    return _build(name, _SPECS[name], image_size)


def alexnet(image_size=224):
    """AlexNet (spec §4.2): conv 1.077 GMAC, FC 58.6 M MAC at 224 x 224."""
    return builtin("alexnet", image_size)


def vgg16(image_size=224):
    """VGG-16 (spec §4.2): conv 15.35 GMAC."""
    return builtin("vgg16", image_size)


def vgg19(image_size=224):
    """VGG-19 (spec §4.2): conv 19.51 GMAC."""
    return builtin("vgg19", image_size)


def _check_size(image_size):
    if not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 1:
        raise UsageError(f"--image-size must be a positive integer, not {image_size!r}")


def _square(layer, field, where):
    value = getattr(layer, field)
    if value[0] != value[1]:
        raise UsageError(f"{where}: {field} {tuple(value)} is not square; FPDeep maps square "
                         f"kernels, strides and paddings only")
    return value[0]


def from_network(network, image_size, name=None, *, mapping=False):
    """The chain of a CNN of the model layer (:class:`nnrtl.gen.models.Network`: Conv2d,
    ReLU, MaxPool2d, Flatten, Linear; with ``mapping``, also grouped convolutions,
    LocalResponseNorm and Dropout, which the mapper costs and the chain's golden model and
    RTL do not run yet, a pool with more padding at its end, and a last Softmax, the
    loss's) for ``image_size`` x ``image_size`` inputs.

    Raises
    ------
    UsageError
        An RNN, a layer FPDeep cannot map (non-square kernel, dilation, a pool not after a
        convolution), without ``mapping`` a layer only the mapper takes (naming it and
        ``nnrtl map fpdeep``), shapes that do not chain at ``image_size``.
    """
    from ..models import (Conv2d, Dropout, Flatten, Linear, LocalResponseNorm, MaxPool2d,
                          ReLU, Softmax)
    _check_size(image_size)
    source = name or network.source or "network"
    if network.is_rnn:
        raise UsageError(f"{source}: FPDeep maps CNNs (Conv2d, ReLU, MaxPool2d, Flatten, "
                         f"Linear), not recurrent layers")

    def mapped_only(where, what):
        if not mapping:
            raise UsageError(f"{where}: {what}: nnrtl map fpdeep maps it, but the fpdeep "
                             f"chain's golden model and RTL do not run it")

    layers, side, flat, channels = [], image_size, None, None
    count = len(network.layers)
    for n, layer in enumerate(network.layers):
        where = f"{source} layers[{n}]"
        if isinstance(layer, Conv2d):
            if flat is not None:
                raise UsageError(f"{where}: a Conv2d after Flatten/Linear cannot be mapped")
            if _square(layer, "dilation", where) != 1:
                raise UsageError(f"{where}: dilation {layer.dilation} is not supported")
            if layer.groups != 1:
                mapped_only(where, f"a grouped convolution (groups {layer.groups})")
            k = _square(layer, "kernel_size", where)
            stride, pad = _square(layer, "stride", where), _square(layer, "padding", where)
            out = _conv_out(side, k, stride, pad, where)
            layers.append(ChainLayer(name=f"layers[{n}]", kind="conv", ic=layer.in_channels,
                                     oc=layer.out_channels, k=k, stride=stride, pad=pad,
                                     w_in=side, w_out=out, relu=False, first=not layers,
                                     groups=layer.groups))
            side, channels = out, layer.out_channels
        elif isinstance(layer, ReLU):
            if not layers:
                raise UsageError(f"{where}: a ReLU before any weighted layer cannot be mapped")
            layers[-1] = dataclasses.replace(layers[-1], relu=True)
        elif isinstance(layer, (LocalResponseNorm, Dropout)):
            what = "a LocalResponseNorm" if isinstance(layer, LocalResponseNorm) else \
                "a Dropout"
            mapped_only(where, what)
            if not layers or layers[-1].pool is not None or (
                    layers[-1].lrn if isinstance(layer, LocalResponseNorm)
                    else layers[-1].dropout):
                raise UsageError(f"{where}: FPDeep maps {what} only after a weighted layer "
                                 f"(and its ReLU), before its pool")
            layers[-1] = dataclasses.replace(layers[-1], **(
                {"lrn": (layer.size, layer.alpha, layer.beta, layer.k)}
                if isinstance(layer, LocalResponseNorm) else {"dropout": layer.p}))
        elif isinstance(layer, MaxPool2d):
            if not layers or layers[-1].kind != "conv" or layers[-1].pool is not None:
                raise UsageError(f"{where}: FPDeep maps a MaxPool2d only right after a "
                                 f"Conv2d (and its ReLU)")
            k = _square(layer, "kernel_size", where)
            pad = _square(layer, "padding", where)
            end = _square(layer, "padding_end", where)
            if end != pad:
                mapped_only(where, f"a pool padded {end} at its end and {pad} at its start")
            layers[-1] = dataclasses.replace(layers[-1], pool=(
                k, _square(layer, "stride", where), pad), pool_end=None if end == pad else end)
            side = layers[-1].w_pooled
            if side < 1:
                raise UsageError(f"{where}: the pool leaves no output at --image-size "
                                 f"{image_size}")
        elif isinstance(layer, Flatten):
            flat = (channels or 0) * side * side if flat is None else flat
        elif isinstance(layer, Linear):
            features = flat if flat is not None else (
                channels * side * side if channels else None)
            if features is None:
                features = layer.in_features     # a network of Linear layers only
            if layer.in_features != features:
                raise UsageError(
                    f"{where}: Linear takes {layer.in_features} features, but at --image-size "
                    f"{image_size} the layers before it give {features}; give the image size "
                    f"the network was trained for")
            layers.append(ChainLayer(name=f"layers[{n}]", kind="fc", ic=features,
                                     oc=layer.out_features, relu=False, first=not layers))
            flat = layer.out_features
        elif isinstance(layer, Softmax) and n == count - 1:
            mapped_only(where, "a Softmax (the loss's; train fpdeep takes the logits)")
        else:
            raise UsageError(f"{where}: {type(layer).__name__} cannot be mapped")
    return Chain(source, tuple(layers))


def describe(chain):
    """One line per layer: shapes and work (for logs and the table)."""
    lines = []
    for layer in chain.layers:
        shape = (f"{layer.ic}x{layer.w_in}x{layer.w_in} -> {layer.oc}x{layer.w_out}x"
                 f"{layer.w_out} k{layer.k}/{layer.stride}"
                 f"{f' g{layer.groups}' if layer.groups > 1 else ''}" if layer.kind == "conv"
                 else f"{layer.ic} -> {layer.oc}")
        lines.append(f"{layer.name:<10} {layer.kind:<4} {shape:<34} "
                     f"{layer.macs / 1e6:>9.1f} M MAC")
    return lines


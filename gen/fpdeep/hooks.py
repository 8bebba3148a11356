"""The FPDeep engine's ``map`` hook (``nnrtl map fpdeep ...``) and ``cluster`` hook
(``nnrtl cluster fpdeep ...``), ready for the engine's registration (``Engine(...,
map=map_hook, cluster=cluster_hook)``) once its RTL top exists.

Defaults: precision ``fixed16`` (the paper's cost model, :mod:`.cost`), links 150 Gb/s
per link and direction (the paper's inter-board constraint, Fig. 15), 224 x 224 images
for the built-in networks; a model file's image side is its stated input's (an ONNX graph
input of static square dimensions), else inferred as the smallest that makes its first
Linear layer's input match, unless ``--image-size`` gives it (required for a network
without either).

``--param`` options: ``fc_batch`` (samples per FC weight pass), ``dsp_cap`` (share of the
DSP slices for MAC units, default 0.85), ``convention`` (``link`` or ``fpga``, spec §2.10),
``ocp_min_ic`` (default 16), ``balance`` (parameter balancing, 0 or 1), ``word_bits`` (16
or 32: the width of buffer and link words instead of the precision's; 32 with ``fixed16``
is the paper's own setting, fp32 words with 1 DSP per MAC), ``multiplier_shifts`` and
``adder_shifts`` (fp32: ``lut`` or ``dsp``, the MAC variant, :data:`.cost.FP32_VARIANTS`;
default the one with the most MAC units on the board), ``act_ram`` (where Act-RAMs wait:
``chip``, ``overflow`` or ``ddr``, :mod:`.placement`), ``fc_model`` (``segments``, the
default, or ``engine``: the FC engine's cycles and DDR traffic,
:func:`~.mapper.map_network`). A given option is pinned;
``fc_batch``, ``balance`` and ``act_ram``, when not given, are chosen by
:func:`~.search.choose_mapping` (the fastest mapping whose every buffer fits).
"""

from ..errors import UsageError
from .cost import DSP_CAP
from .search import choose_mapping
from .network import BUILTIN, builtin, from_network
from .partition import OCP_MIN_IC

__all__ = ["map_hook", "cluster_hook", "DEFAULT_IMAGES", "DEFAULT_PRECISION", "DEFAULT_LINK_GBPS", "DEFAULT_IMAGE_SIZE",
           "OPTIONS"]

DEFAULT_PRECISION = "fixed16"
DEFAULT_LINK_GBPS = 150.0
DEFAULT_IMAGE_SIZE = 224
#: Samples ``nnrtl cluster`` simulates without ``--images``.
DEFAULT_IMAGES = 8
#: Largest image side tried when inferring a model file's.
MAX_INFERRED_SIZE = 1024

#: ``--param`` options: name -> (parser, default, rule).
OPTIONS = {
    "fc_batch": (int, None, "a positive integer"),
    "dsp_cap": (float, DSP_CAP, "a number in (0, 1]"),
    "convention": (str, "link", "link or fpga"),
    "ocp_min_ic": (int, OCP_MIN_IC, "a positive integer"),
    "balance": (int, None, "0 or 1"),
    "word_bits": (int, None, "16 or 32"),
    "multiplier_shifts": (str, None, "lut or dsp"),
    "adder_shifts": (str, None, "lut or dsp"),
    "act_ram": (str, None, "chip, overflow or ddr"),
    "fc_model": (str, "segments", "segments or engine"),
}


def _options(params):
    found = {name: default for name, (_, default, _) in OPTIONS.items()}
    for text in params:
        name, sep, value = text.partition("=")
        if not sep or name not in OPTIONS:
            raise UsageError(f"--param {text!r}: FPDeep's mapping options are "
                             f"{', '.join(f'{k}=...' for k in OPTIONS)}")
        parse, _, rule = OPTIONS[name]
        try:
            found[name] = parse(value)
        except ValueError:
            raise UsageError(f"--param {name} must be {rule}, not {value!r}") from None
    if found["balance"] not in (None, 0, 1):
        raise UsageError(f"--param balance must be 0 or 1, not {found['balance']}")
    if found["act_ram"] not in (None, "chip", "overflow", "ddr"):
        raise UsageError(f"--param act_ram must be chip, overflow or ddr, not "
                         f"{found['act_ram']!r}")
    if found["fc_model"] not in ("segments", "engine"):
        raise UsageError(f"--param fc_model must be segments or engine, not "
                         f"{found['fc_model']!r}")
    if found["ocp_min_ic"] < 1:
        raise UsageError(f"--param ocp_min_ic must be a positive integer, not "
                         f"{found['ocp_min_ic']}")
    return found


def _chain(request):
    if request.network is not None:
        if request.network not in BUILTIN:
            raise UsageError(f"--network {request.network!r}: FPDeep has {', '.join(BUILTIN)} "
                             f"built in; give another network with --model FILE")
        return builtin(request.network, request.image_size or DEFAULT_IMAGE_SIZE)
    from ..models import load_network
    network = load_network(request.model)
    name = request.model.name
    if request.image_size is not None or network.is_rnn:
        return from_network(network, request.image_size or DEFAULT_IMAGE_SIZE, name,
                            mapping=True)
    shape = network.input_shape or ()
    if len(shape) == 4 and shape[2] is not None and shape[2] == shape[3]:
        if request.log:
            request.log(f"map: {name}: image size {shape[2]} x {shape[3]}, the model's "
                        f"input (give --image-size to choose another)")
        return from_network(network, shape[2], name, mapping=True)
    if not any(type(layer).__name__ == "Linear" for layer in network.layers):
        raise UsageError(f"{name}: no Linear layer fixes the input size; give --image-size")
    for size in range(1, MAX_INFERRED_SIZE + 1):
        try:
            chain = from_network(network, size, name, mapping=True)
        except UsageError:
            continue
        if request.log:
            request.log(f"map: {name}: image size {size} x {size} inferred (the smallest its "
                        f"Linear layer's input allows); give --image-size to choose")
        return chain
    raise UsageError(f"{name}: no image size up to {MAX_INFERRED_SIZE} fits its layers; give "
                     f"--image-size")


def map_hook(request):
    """``nnrtl map``: :func:`~.search.choose_mapping` for a
    :class:`nnrtl.gen.engines.MapRequest` (the ``--param`` options pinned, the free ones
    chosen and logged); refuses (:class:`UsageError`) a mapping that does not fit, naming
    the node, the buffer and the options that fit."""
    options = _options(request.params)
    chain = _chain(request)
    mapping = choose_mapping(
        chain, request.fpgas, request.board,
        precision=request.precision or DEFAULT_PRECISION,
        link_gbps=DEFAULT_LINK_GBPS if request.link_gbps is None else request.link_gbps,
        convention=options["convention"], dsp_cap=options["dsp_cap"],
        ocp_min_ic=options["ocp_min_ic"], fc_batch=options["fc_batch"],
        balance=None if options["balance"] is None else bool(options["balance"]),
        word_bits=options["word_bits"], multiplier_shifts=options["multiplier_shifts"],
        adder_shifts=options["adder_shifts"], act_ram=options["act_ram"],
        fc_model=options["fc_model"])
    if request.log and mapping.chosen:
        request.log("map: chose " + "; ".join(f"{name} {why}"
                                              for name, why in mapping.chosen))
    return mapping


def cluster_hook(request):
    """``nnrtl cluster``: :func:`~.cluster.run_cluster` for a
    :class:`nnrtl.gen.engines.ClusterRequest`; ``--param`` takes the options of
    :data:`.cluster.OPTIONS` (``link_gbps``, ``link_latency``, ``inflight``, ``minibatch``,
    ``timing.<field>`` of :class:`~.cluster_node.NodeTiming`)."""
    from .cluster import config_from_params, run_cluster
    from .cluster_report import ClusterRun

    config = config_from_params(request.images or DEFAULT_IMAGES, request.params)
    result, seconds = run_cluster(request.mapping, config, request.ranks, request.log)
    return ClusterRun(result, request.ranks, seconds)

"""The FPDeep engine registered with the platform (:mod:`nnrtl.gen.engines`): one node of
the chain (:class:`~nnrtl.hw.fpdeep.node.FpdeepNode`) and its hooks.

``top``
    :class:`~nnrtl.hw.fpdeep.node.FpdeepNode` of a
    :class:`~nnrtl.hw.fpdeep.node.FpdeepConfig` (the mapper's per-node configuration through
    :meth:`FpdeepConfig.from_node`).
``resources``
    :func:`.resources.resources` (DSP, LUT from the cost model; BRAM36 from every memory).
``predict``
    ``workload["images"]`` (default one mini-batch) at the node's steady state, the slowest
    module's cycles per image (:func:`~nnrtl.hw.fpdeep.node.module_cycles`: FP
    :attr:`FpConfig.cycles <nnrtl.hw.fpdeep.config.FpConfig.cycles>`, EB and PG at one
    window per cycle), plus per mini-batch the PG drain and the update (6 cycles a row:
    2 of the drain, 4 of the fp32 update, :mod:`nnrtl.hw.fpdeep.update`; they take turns).
``simulate``
    :mod:`nnrtl.sim.tb.fpdeep.node` under Verilator: ``--steps`` mini-batches (default 2)
    of random images through FP → EB/PG → update under the ``--backpressure`` pattern, the
    activations and errors out bit-exact against the golden models (the updated weights
    through them), the counters read over AXI4-Lite; every segment of the node at once,
    its partial errors and δ out where it has them. Its ``cycles`` are the bench's (its
    phases, an image's activations and then its errors, do not overlap FP and BP as a
    chain does; it loads the weights first and stops at the last output beat, before the
    last update); ``model_cycles`` are :func:`.node_cycles.bench_cycles`' for the same
    run, exact under backpressure ``none`` (``model_exact: true``) for every
    configuration; :func:`predict` is the pipelined steady state of a node in a chain
    (the cluster simulator models the chain).
commands ``map``, ``cluster``
    :data:`.commands.COMMANDS`: :func:`.hooks.map_hook`, :func:`.hooks.cluster_hook`.
``bench``
    :func:`.studies.bench.bench` (``make bench``: Table 6, scaling, cluster points, plots).
``train``
    :func:`.trainer.train_hook` (``nnrtl train fpdeep --fpgas N ...``): a small CNN mapped
    onto a chain, every conv segment through the golden models of its node, the FC layers
    on the host.
"""

import dataclasses
import functools

from ...hw.fpdeep.node import FpdeepNode, FpdeepConfig
from ...hw.fpdeep.update import row_cycles
from ...hw.presets import Preset
from ..engines import Engine
from .commands import COMMANDS
from .space import draw

__all__ = ["ENGINE", "PRESETS", "simulate", "predict", "vc709_alexnet_node",
           "DEFAULT_BATCHES"]

#: Mini-batches ``nnrtl sim fpdeep`` runs without ``--steps``.
DEFAULT_BATCHES = 2

#: The AlexNet node of the VC709 preset: node 11 of 15 (conv4, input channels 112-237).
ALEXNET_NODE = 11
#: The FC batch of the VC709 preset's mapping (:func:`vc709_alexnet_node` says why).
ALEXNET_FC_BATCH = 23


@functools.lru_cache(maxsize=2)
def vc709_alexnet_node(single_pass=False):
    """The VC709 preset: node :data:`ALEXNET_NODE` of AlexNet's 15-VC709 mapping (fixed16,
    the mapper's defaults but an FC batch of :data:`ALEXNET_FC_BATCH`, storage not checked),
    conv4's ICP segment of 126 input channels, not completing, in the mapper's shape
    ``P = 3, Q = 21`` (6 passes); ``single_pass`` gives the ``P = 1, Q = S_IC = 126`` shape
    instead (kept for comparison: the bench's resources).

    Decision (FC batch and Act-RAM): the node is the mapper's shape at FC batch 23, its
    Act-RAM the most images the VC709's BRAM36 leaves beside the rest of the node (27).
    The mapper's Act-RAM residency counts the FC layers' forward and backward passes, so a
    whole chain at FC batch 23 asks this node for more images than that: the preset is the
    synthesis reference of the node at the paper's scale, not one node of a mapping that
    fits; ``nnrtl map fpdeep --network alexnet --fpgas 15 --board vc709`` chooses the FC
    batch at which every node fits (:mod:`.search`).

    Decision (shape), on ``nnrtl synth`` (per module, :mod:`.resources`' table): both
    shapes give the same chain throughput (the DDR's period, 136,591 cycles, is above
    either node's 129,792 and 64,896 cycles per image) and both fit; the mapper's
    ``P = 3, Q = 21`` takes 1,707 DSP48E1 (47 %; 1,701 MACs), 260,662 LUT (60 %), 135,888
    FF and 1,464 BRAM36 (99.6 %, the model's), the single-pass shape 3,404 DSP48E1 (95 %,
    above the mapper's 0.85 cap), 344,115 LUT (79 %, above the 70 % LUT budget of
    :func:`~nnrtl.gen.engines.check_fit`), 201,578 FF and 1,459 BRAM36. Half the DSPs and a
    quarter fewer LUTs for the same images per second: the preset is the mapper's shape.
    The price: the node computes for 95 % of the chain's period (48 % single-pass), so a
    faster DDR would be the single-pass shape's to use (and a larger FC batch needs BRAM
    neither shape has)."""
    from ...boards import get_board
    from .mapper import map_network
    from .network import builtin
    from .resources import resources

    board = get_board("vc709")
    mapping = map_network(builtin("alexnet"), 15, board, check_storage=False,
                          fc_batch=ALEXNET_FC_BATCH)
    node = next(n for n in mapping.nodes if n.node == ALEXNET_NODE)
    reshape = (lambda cfg: dataclasses.replace(cfg, p=1, q=None)) if single_pass else None
    config = FpdeepConfig.from_node(node, "fixed16", reshape=reshape)
    fits = [images for images in range(1, config.act_images + 1)
            if resources(dataclasses.replace(config, act_images=images))["bram36"]
            <= board.capacity.bram36]
    return dataclasses.replace(config, act_images=max(fits))


class _Presets(dict):
    """Presets by name, a preset's configuration built on first use (the VC709 one maps
    AlexNet, about a second: not at every command's start)."""

    def __getitem__(self, name):
        value = super().__getitem__(name)
        if callable(value):
            value = value()
            self[name] = value
        return value

    def values(self):
        return [self[name] for name in self]

    def items(self):
        return [(name, self[name]) for name in self]


PRESETS = _Presets({
    "small": Preset(
        FpdeepConfig(), board="vc709",
        source="a small completing node for tests: fixed16, 3×3 conv (pad 1) over 4×4 "
               "maps, 2 → 3 channels on P = 2, ReLU and a 2×2 pool, EB, mini-batch 2"),
    "vc709-alexnet": lambda: Preset(
        vc709_alexnet_node(), board="vc709",
        source="AlexNet on 15 VC709s (the paper's Table 6 setting), fixed16 (1 DSP48E1 per "
               "MAC, spec §3.9), node 11: conv4 channels 112-237 in the mapper's shape "
               "P = 3, Q = 21, FC batch 23 (engine.vc709_alexnet_node says why)",
        clock_hz=200e6),
})


def _update_cycles(config):
    """Cycles of one mini-batch's drain and update: the slowest segment's (each segment
    updates its own LPRAM, concurrently)."""
    return max((s.banks + s.completes) * s.rows * row_cycles(s) for s in config.segments)


def predict(config, workload):
    """The engine hook (module docstring): ``cycles``, ``useful_macs``, ``utilization``."""
    images = workload.get("images", config.batch)
    cycles = images * config.cycles + images // config.batch * _update_cycles(config)
    useful = images * sum(s.pixels * s.n_out * s.n_in * s.taps * (2 + e)
                          for s, e in zip(config.segments, config.eb))
    return {"cycles": cycles, "useful_macs": useful,
            "utilization": useful / (cycles * config.macs)}


def simulate(request):
    """One node's training of ``request.steps`` mini-batches under Verilator (module
    docstring); the result JSON with ``model_cycles`` (:func:`.node_cycles.bench_cycles`
    of the run, exact under backpressure ``none``: ``model_exact: true``).

    Raises
    ------
    UsageError
        ``request.model`` given (the bench runs random weights and images)."""
    from ...sim.runner import simulate as run
    from ...sim.tb.fpdeep.node import node_fields
    from ..errors import UsageError
    from .node_cycles import bench_cycles, bench_lag

    config = request.config
    if request.model is not None:
        raise UsageError("fpdeep sim takes no --model: it runs random weights and images "
                         "(map a model with nnrtl map fpdeep)")
    batches = DEFAULT_BATCHES if request.steps is None else request.steps
    lag = bench_lag(config)
    result = run(ENGINE.verilog(config), test_module="nnrtl.sim.tb.fpdeep.node",
                 params={"config": node_fields(config), "batches": batches, "lag": lag,
                         "patterns": [request.backpressure]},
                 seed=request.seed, waves=request.waves, name="nnrtl_fpdeep", log=request.log)
    run_ = result["patterns"][request.backpressure]
    useful = predict(config, {"images": batches * config.batch})["useful_macs"]
    result.update(cycles=run_["cycles"], model_cycles=bench_cycles(config, batches, lag),
                  model_exact=True, useful_macs=useful,
                  utilization=useful / (run_["cycles"] * config.macs))
    return result


def _resources(config, family):
    from .resources import resources
    return resources(config, family)


def _bench(out):
    from .studies.bench import bench
    return bench(out)


def _train(request, network):
    from .trainer import train_hook
    return train_hook(request, network)


def _train_options(group):
    from .trainer import train_options
    train_options(group)


ENGINE = Engine(
    name="fpdeep",
    summary="FPDeep CNN training on a 1-D chain of FPGAs: one node (FP, EB, PG, update)",
    config_class=FpdeepConfig,
    top=FpdeepNode,
    resources=_resources,
    predict=predict,
    simulate=simulate,
    presets=PRESETS,
    bench=_bench,
    commands=COMMANDS,
    train=_train,
    draw=draw,
    options={"train": _train_options},
    steps_help="mini-batches to train (default 2)",
)

"""The FARNN engine registered with the platform (:mod:`nnrtl.gen.engines`): its hooks.

``top``
    :class:`~nnrtl.hw.farnn.engine.FarnnEngine`: one layer pass (FW or BW) per run.
``resources``, ``predict``
    The resource model (:mod:`.resources`) and the cycle model of one training step's FPGA
    part (:mod:`.perf`).
``simulate``
    One run of :mod:`nnrtl.sim.tb.farnn.engine` under Verilator: one layer's FW pass then
    its BW pass over ``steps`` steps (default ``config.seq_len``), random weights, inputs
    and ``dy`` drawn from the seed, every output checked against
    :mod:`nnrtl.sim.golden.farnn.layer`.
``explore``
    :func:`.explore.explore_request`.
``train``
    :func:`.trainer.train_hook`.
``clock``
    :func:`.explore.core_clock_hz`: the paper's 400 MHz on UltraScale+ boards, which the
    cycle model, ``explore`` and ``nnrtl sim``'s ``gops`` assume; on 7-series boards the
    board's clock. The generated board top clocks the
    engine from the board's oscillator (no MMCM is generated), and the 400 MHz is a target
    that only vendor timing closure can confirm.
``bench``
    :func:`.studies.bench.bench_farnn` (``make bench``).
"""

import dataclasses

from ...hw.farnn import FarnnConfig
from ...hw.farnn.engine import FarnnEngine
from ...hw.farnn.presets import PRESETS
from ..engines import Engine
from .space import draw

__all__ = ["ENGINE", "simulate"]


def simulate(request):
    """One FW + BW layer pass of ``request.config`` through the Verilator bench
    (:mod:`nnrtl.sim.tb.farnn.engine`); its result JSON with the board's throughput."""
    from ...sim.runner import simulate as run
    from ..errors import UsageError

    config = request.config
    if request.model is not None:
        raise UsageError("farnn sim takes no --model: it runs random weights (use "
                         "nnrtl train farnn for a network)")
    steps = config.seq_len if request.steps is None else request.steps
    if steps < 1:
        raise UsageError(f"--steps ({steps}) must be at least 1")
    params = {
        "config": dataclasses.asdict(config),
        "steps": steps,
        "source_pauses": request.backpressure,
        "sink_pauses": request.backpressure,
        "weight_load": request.options.get("weight_load", "stream"),
    }
    result = run(ENGINE.verilog(config), test_module="nnrtl.sim.tb.farnn.engine", params=params,
                 seed=request.seed, waves=request.waves, name="nnrtl_farnn",
                 log=request.log)
    return result


def _sim_options(group):
    group.add_argument("--weight-load", default="stream", choices=["stream", "backdoor"],
                       help="stream: the weights through the engine's weight port, as on "
                       "the board (default); backdoor: written into the PEs' weight "
                       "memories by the simulator in no simulated time (full-size runs)")


def _resources(config, family):
    from .resources import resources
    return resources(config, family)


def _predict(config, workload):
    from .perf import predict
    return predict(config, workload)


def _explore(request):
    from .explore import explore_request
    return explore_request(request)


def _clock(config, board):
    from .explore import core_clock_hz
    return core_clock_hz(board)


def _bench(out):
    from .studies.bench import bench_farnn
    from .studies.bench_markdown import markdown_farnn
    result = bench_farnn(out)
    return result, markdown_farnn(result)


def _train(request, network):
    from .trainer import train_hook
    return train_hook(request, network)


ENGINE = Engine(
    name="farnn",
    summary="FPGA RNN training (FW and BW passes of LSTM/GRU layers), weights in PEs",
    config_class=FarnnConfig,
    top=FarnnEngine,
    resources=_resources,
    predict=_predict,
    simulate=simulate,
    presets=PRESETS,
    explore=_explore,
    train=_train,
    clock=_clock,
    bench=_bench,
    draw=draw,
    options={"sim": _sim_options},
    steps_help="time steps of the layer's FW and BW passes (default: seq_len)",
)

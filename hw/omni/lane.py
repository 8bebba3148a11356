"""The datapath of an Omni-PE (:mod:`.pe`), driven by a PE control (:mod:`.pe_control`):
the multiplier, the adder, the storage of the Input1, Input2, Partial Output and Output
queues, the held register and the operand, feedback and result MUXes.

Everything here depends on data; nothing decides. Decisions for fewer LUTs (Yosys,
:mod:`nnrtl.gen.omni.resources`), every result bit and cycle the same:

- *The outer product's operand.* The paper broadcasts Input1's one element of an outer
  product over the row; it stays at the head of the Input1 queue, read by every
  product, and leaves with the row's last (the control's read strobe), where a
  broadcast register and a MUX in front of the multiplier cost 20 LUTs and 32 FFs a
  lane. The queue then holds one entry less of the next job while the row runs, which
  never delays it: the row's own Input2 elements fill the other queue first.
- *Queue storage.* A 32-bit entry is two LUT-RAM primitives of 14 bits and 4 bits over;
  those 4 bits of the 4-deep queues are flip-flops with a 4:1 read MUX
  (:meth:`~.config.OmniPEConfig.queue_register_bits`: 9 LUTs a lane fewer, 48 FFs more).
- *The adder* is :class:`~nnrtl.hw.arith.float_add.FloatAdd` with ``shifts="dsp"``
  (310 LUTs where its first ``"dsp"`` form took 369 and 13 shift-register LUTs).
- *The multiplier* is :class:`~nnrtl.hw.arith.float_mul.FloatMul` with the config's
  ``multiplier_shifts`` (default ``"dsp"``: its one-bit normalising shift on a sixth
  DSP slice of the lane, 104 LUTs where the shift in LUTs takes 132).
- *DSP48E2 Instances.* With the config's ``dsp_primitives`` the adder's alignment product
  and sum and the multiplier's significand product are ``DSP48E2`` Instances (or their
  behaviour in Amaranth), the slices the tool would infer, fewer LUTs around them.

Each cycle the control's word
(:attr:`~.config.OmniPEConfig.lane_control_layout`) says which queue entries are written
and read, whether the multiplier's and the adder's pipelines move, and what every MUX
selects. An :class:`~.pe.OmniPE` is one control and one lane; a
:class:`~.channel.Channel` is one control and ``pes_per_channel`` lanes in lockstep.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib.memory import Memory

from ..arith.float_add import FloatAdd
from ..arith.float_mul import FloatMul
from .config import ConfiguredComponent, OmniPEConfig, OperandA, OperandB

__all__ = ["OmniLane"]


def _storage(m, config, name, control, data):
    """A queue's memory: written at ``<name>_waddr`` on ``<name>_write``, read
    (combinationally, as :class:`~amaranth.lib.fifo.SyncFIFO` does) at
    ``<name>_raddr``; returns the read data. The top
    :meth:`~.config.OmniPEConfig.queue_register_bits` bits of each entry are rows of
    flip-flops written on the control's ``<name>_rows`` strobes, the rest LUT-RAM."""
    width = config.fmt.width
    depth = config.queue_depths[name]
    low = width - config.queue_register_bits(depth)
    raddr = getattr(control, f"{name}_raddr")
    memory = m.submodules[f"{name}_storage"] = Memory(shape=low, depth=depth, init=[])
    write = memory.write_port()
    read = memory.read_port(domain="comb")
    m.d.comb += [
        write.addr.eq(getattr(control, f"{name}_waddr")),
        write.data.eq(data[:low]),
        write.en.eq(getattr(control, f"{name}_write")),
        read.addr.eq(raddr),
    ]
    if low == width:
        return read.data
    strobes = getattr(control, f"{name}_rows")
    rows = Array(Signal(width - low, name=f"{name}_row_{row}") for row in range(depth))
    for row in range(depth):
        with m.If(strobes[row]):
            m.d.sync += rows[row].eq(data[low:])
    return Cat(read.data, rows[raddr])


class OmniLane(ConfiguredComponent):
    """One lane of Omni-PEs in lockstep: an Omni-PE's datapath (module docstring).

    Parameters
    ----------
    config : OmniPEConfig

    Attributes
    ----------
    i_control : In(config.lane_control_layout)
        The PE control's word of this cycle.
    i_input1, i_input2 : In(fmt.width)
        The operand written into the Input1 / Input2 queue when the control says so.
    i_shared_a : In(fmt.width)
        The adder's operand ``a`` when the control selects :attr:`OperandA.ZERO`:
        ``-0`` (its reset value; an :class:`~.pe.OmniPE` leaves it so), or a word every
        lane shares (a :class:`~.channel.Channel`'s broadcast Input1 words).
    o_data : Out(fmt.width)
        The head of the Output Queue (valid when the control's ``o.valid`` is).

    Latency and throughput are the PE's (:class:`~.pe.OmniPE`): the multiplier's
    ``multiplier_stages`` and the adder's ``adder_stages`` registers move on the control's
    ``multiply`` / ``add`` enables; one element pair per cycle.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`OmniPEConfig`.
    """

    CONFIG = OmniPEConfig
    MEMBERS = "lane_members"

    def elaborate(self, platform):
        m = Module()
        config = self._config
        fmt = config.fmt
        width = fmt.width
        control = self.i_control
        negative_zero = Const(fmt.sign_mask, width)

        m.submodules.multiplier = multiplier = FloatMul(
            fmt, stages=config.multiplier_stages, flush_subnormals=config.flush_subnormals,
            shifts=config.multiplier_shifts, dsp_primitives=config.dsp_primitives)
        m.submodules.adder = adder = FloatAdd(fmt, stages=config.adder_stages,
                                              flush_subnormals=config.flush_subnormals,
                                              shifts=config.adder_shifts,
                                              dsp_primitives=config.dsp_primitives)
        input1 = _storage(m, config, "input1", control, self.i_input1)
        input2 = _storage(m, config, "input2", control, self.i_input2)

        held = Signal(width)
        # The units' pipelines run with a constant input valid: their valid bits are all
        # set after the first `stages` cycles from reset (their enable is high until
        # then), so from there each moves exactly on the control's enable, whose own
        # model of the valid bits says which entries are real.
        # What leaves the adder is written to the Partial Output Queue, held and fed back
        # as it is: an entry of the ring that is not a partial sum of the MVM job under
        # way is a filler or a spent slot (`-0 + -0`, so `-0`) or an EW-add result, and
        # the control reads only the ring's partial sums and fillers during an MVM job (the
        # ring holds no result then), so no MUX to `-0` is needed (32 LUTs a lane).
        leaving = adder.o.payload
        product = multiplier.o.payload
        with m.If(control.load_held):
            m.d.sync += held.eq(leaving)
        m.d.comb += [
            multiplier.i.valid.eq(1),
            # an outer product's one Input1 element stays at the queue's head for the
            # row (the control reads it with the job's last product): no broadcast
            # register and no MUX in front of the multiplier (32 LUTs, 32 FFs a lane)
            multiplier.i.payload.a.eq(input1),
            multiplier.i.payload.b.eq(input2),
            multiplier.o.ready.eq(control.multiply),
            adder.i.valid.eq(1),
            adder.o.ready.eq(control.add),
            adder.i.payload.subtract.eq(control.subtract),
        ]
        operands = (
            (adder.i.payload.a, control.a, {OperandA.ZERO: self.i_shared_a,
                                            OperandA.LEAVING: leaving,
                                            OperandA.INPUT1: input1, OperandA.HELD: held}),
            (adder.i.payload.b, control.b, {OperandB.ZERO: negative_zero,
                                            OperandB.PRODUCT: product,
                                            OperandB.INPUT2: input2,
                                            OperandB.LEAVING: leaving}))
        for operand, select, choices in operands:
            with m.Switch(select):
                for choice, value in choices.items():
                    with m.Case(choice):
                        m.d.comb += operand.eq(value)

        partial_head = _storage(m, config, "partial", control, leaving)
        m.d.comb += self.o_data.eq(_storage(
            m, config, "output", control,
            Mux(control.output_from_partial, partial_head, product)))
        return m

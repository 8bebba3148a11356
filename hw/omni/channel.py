"""η-LSTM's channel (ISCA 2021, Sec. V-D, Fig. 13b; spec §3.3): ``P`` =
``pes_per_channel`` Omni-PEs in SIMT, the channel controller with its broadcasting queue,
one shared sigmoid and one shared tanh unit, and the scratchpad port.

The controller runs :class:`~.channel_config.ChannelInstruction` commands from
``i_command`` in order. Each is one Omni-PE job given to lanes ``0 .. lanes - 1`` at once
(the *command issue*: in the cycle every active PE takes a command). The *distributor*
then gives the job's operands, element by element, to every active lane in the same
cycle: operand 1 from that lane's word of a beat of ``i_input1`` or (EW add) from the
broadcasting queue (``i_broadcast``), operand 2 likewise from ``i_input2`` or the queue
(outer products take operand 1 once per job). The *collector* takes the results in instruction
order: an instruction without activation leaves as one beat per result index (every
active lane's result in the same cycle); one with an activation sends the active lanes'
results one by one, lane 0 first, through the shared sigmoid or tanh unit and gathers
them back into a beat. Unused lanes of a beat on ``o`` are 0. The programs of an LSTM FW
and BP cell are :mod:`.channel_program`'s; the bit-exact model is
:mod:`nnrtl.sim.golden.omni.channel`.

Throughput: ``P`` MACs (MVM), products (EW multiply, outer product) or sums (EW add) per
cycle; one activation per cycle. Cycles of a program: the cycle model
:meth:`~.channel_config.ChannelConfig.program_cycles` (:mod:`.channel_timing`), exact
against this RTL.
"""

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory

from ..hierarchy import shared
from .activation import SharedActivation
from .channel_config import Activation, ChannelConfig, Source
from .config import ConfiguredComponent, OmniMode, OperandA
from .lane import OmniLane
from .pe_control import OmniPEControl

__all__ = ["Channel"]


class Channel(ConfiguredComponent):
    """One channel: Omni-PEs, controller, broadcasting queue, sigmoid and tanh units.

    Parameters
    ----------
    config : ChannelConfig

    Attributes
    ----------
    i_command : In(stream.Signature(config.command_layout))
        Instructions (:meth:`ChannelConfig.command_word`).
    i_input1, i_input2 : In(stream.Signature(config.beat_layout))
        Per-lane operands, one beat per element of the instructions whose ``source1`` /
        ``source2`` is :attr:`Source.LANES`, in instruction order.
    i_broadcast : In(stream.Signature(fmt.width))
        The broadcasting queue's words, in instruction order.
    o : Out(stream.Signature(config.beat_layout))
        Results, one beat per result index of each instruction, in instruction order.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`ChannelConfig`.

    Notes
    -----
    **Decisions the paper leaves open ([U] of spec §3.3)**

    - *Activation units.* ``hw/arith`` has one floating-point form,
      :class:`~nnrtl.hw.arith.activation.FloatActivation` (a table of ``y0`` and slope per
      segment, linear interpolation on the float units): one for sigmoid and one for tanh,
      with the format's default tables (fp32: 64 segments per binade, 1668 / 1540 entries,
      max error 4.9e-6 / 9.7e-6; saturation from ``|x| >= 32`` / ``16``). The fixed-point
      PWL units of ``hw/arith/pwl.py`` do not take fp32. Latency ``2 * 3 + 3`` = 9 cycles
      (``activation_adder_stages``, ``activation_multiplier_stages``), one word per cycle.
      Because the channel feeds one unit at a time (below), the two are one datapath
      holding both tables (:class:`~.activation.SharedActivation`, its adders' shifts
      ``adder_shifts``): the results and cycles of two units, the LUTs of one.
    - *Activation rate.* One word per cycle for the channel: the controller feeds one unit
      at a time, so results leave in instruction order without a reorder buffer; a change of
      unit or from a unit to the direct path waits until the unit is empty (its latency).
      Per FW cell that is ``5H`` activation words against ``4H (I + H + 1) / P`` MAC cycles
      (the spec's rate check: the units keep up for ``H`` >= about 12 at ``P`` = 32).
    - *σ' and tanh'* are formed on the PEs from the saved outputs (``1 - x`` an EW add with
      ``subtract`` and a broadcast 1.0, then EW multiplies; spec §1.2 [D]): the channel has
      exactly one sigmoid and one tanh unit, as the paper says, and no derivative unit.
    - *Broadcasting queue.* A FIFO of ``broadcast_depth`` words (default 4: one word per
      cycle with slack for the scratchpad's read latency); the scratchpad streams the
      broadcast vector again for every round of rows, so the queue does not hold a vector.
    - *A broadcast operand 1* is taken by EW adds only (``1 - x``; the multipliers take
      Input1 from the lanes, :class:`~.channel_config.ChannelInstruction`): its words go to
      one *Input1 broadcast store* beside the lanes' Input1 queues (written and read at
      their addresses, with a bit per entry saying it holds a broadcast word), and every
      lane's adder takes it through its ``i_shared_a`` (the ``-0`` operand otherwise), so
      no lane has a MUX in front of its Input1 queue (32 LUTs a lane).
    - *Scratchpad port.* Two operand streams of one word per lane (``P`` x 32 bits each: an
      MVM or outer product takes one beat per cycle, ``P`` MACs or products per cycle; an EW
      operation takes both), one broadcast word stream, and one result stream of ``P``
      words behind a queue of ``result_depth`` beats.
    - *SIMT with one PE control.* Lanes are in lockstep: a command is given to every lane
      in the same cycle, and an element only when the lanes' queues have room. Everything
      an Omni-PE decides depends on its commands and handshakes only, never on data, so the
      ``P`` lanes share **one** PE control (:class:`~.pe_control.OmniPEControl`: job queue,
      counters, queue pointers and levels, the pipelines' sidebands, the accumulate /
      reduce sequence, the output MUX's job tracking) and each lane is a datapath
      (:class:`~.lane.OmniLane`: multiplier, adder, queue storage, MUXes), where the paper's
      Fig. 12 draws a controller in every PE. The inactive lanes of a round of fewer than
      ``P`` rows run the same job on don't-care operands (the operand beat's unused words)
      and the collector ignores their results (a beat's unused words are 0); the cycles are
      those of PEs with their own controllers (the cycle model is exact against both). A
      beat of results leaves the lanes' Output Queues in one cycle: when it is taken whole,
      or, through an activation unit, once its last active lane's word is fed. The LUTs
      this saves are the resource model's (:mod:`nnrtl.gen.omni.resources`).
    """

    CONFIG = ChannelConfig

    def elaborate(self, platform):
        m = Module()
        config = self._config
        lanes_count = config.pes_per_channel
        width = config.fmt.width
        layout = config.command_layout
        # one PE control for the lanes in lockstep (see the class Notes)
        m.submodules.pe_control = control = OmniPEControl(config.pe)
        # the lanes' control word: the PE control's, with operand `a` of an EW add whose
        # Input1 entry is a broadcast word taken from the lanes' shared operand
        word = Signal(config.pe.lane_control_layout)
        shared_a = Signal(width)
        lanes = []
        for index in range(lanes_count):
            lane = OmniLane(config.pe)
            # one module, an instance per lane: Verilator and Yosys take the lane once
            m.submodules[f"lane_{index}"] = shared(lane, key=config.pe)
            m.d.comb += [lane.i_control.eq(word), lane.i_shared_a.eq(shared_a)]
            lanes.append(lane)

        m.submodules.broadcast_queue = broadcast = SyncFIFO(width=width,
                                                            depth=config.broadcast_depth)
        wiring.connect(m, wiring.flipped(self.i_broadcast), broadcast.w_stream)
        m.submodules.distribute_queue = distribute = SyncFIFO(width=layout.size,
                                                          depth=config.instruction_depth)
        m.submodules.collect_queue = collect = SyncFIFO(width=layout.size,
                                                          depth=config.instruction_depth)

        # -- command issue: one job to every active lane in the same cycle ---------------
        command = self.i_command.payload
        issue_ready = control.i_command.ready & distribute.w_rdy & collect.w_rdy
        take = self.i_command.valid & issue_ready
        m.d.comb += [
            self.i_command.ready.eq(issue_ready),
            distribute.w_en.eq(take),
            distribute.w_data.eq(command.as_value()),
            collect.w_en.eq(take),
            collect.w_data.eq(command.as_value()),
        ]
        m.d.comb += [
            control.i_command.valid.eq(take),
            control.i_command.payload.mode.eq(command.mode),
            control.i_command.payload.length.eq(command.length),
            control.i_command.payload.subtract.eq(command.subtract),
        ]

        # -- distributor: an element to every active lane in the same cycle -------------
        job = data.View(layout, distribute.r_data)
        element = Signal(range(config.pe.max_length + 1))
        length = Mux(job.length == 0, 1, job.length)
        need1 = (job.mode != OmniMode.OUTER) | (element == 0)
        broadcast1 = job.source1 == Source.BROADCAST
        broadcast2 = job.source2 == Source.BROADCAST
        operand1_valid = Mux(broadcast1, broadcast.r_rdy, self.i_input1.valid)
        operand2_valid = Mux(broadcast2, broadcast.r_rdy, self.i_input2.valid)
        lanes_ready = (~need1 | control.i_input1.ready) & control.i_input2.ready
        give = Signal()
        last_element = element == length - 1
        m.d.comb += [
            give.eq(distribute.r_rdy & (~need1 | operand1_valid) & operand2_valid
                    & lanes_ready),
            self.i_input1.ready.eq(give & need1 & ~broadcast1),
            self.i_input2.ready.eq(give & ~broadcast2),
            broadcast.r_en.eq(give & ((need1 & broadcast1) | broadcast2)),
            distribute.r_en.eq(give & last_element),
        ]
        with m.If(give):
            m.d.sync += element.eq(Mux(last_element, 0, element + 1))
        m.d.comb += [
            control.i_input1.valid.eq(give & need1),
            control.i_input2.valid.eq(give),
        ]
        for index, lane in enumerate(lanes):
            m.d.comb += [
                # a broadcast operand 1 (EW add only) goes to the Input1 broadcast store:
                # the lanes' Input1 entries then hold a don't-care
                lane.i_input1.eq(self.i_input1.payload[index]),
                lane.i_input2.eq(Mux(broadcast2, broadcast.r_data,
                                     self.i_input2.payload[index])),
            ]
        # -- the Input1 broadcast store: beside the lanes' Input1 queues, at their
        # addresses, the broadcast word and whether the entry is one
        pe_word = control.o_control
        depth = config.pe.queue_depths["input1"]
        m.submodules.input1_broadcast = store = Memory(shape=width, depth=depth, init=[])
        store_write = store.write_port()
        store_read = store.read_port(domain="comb")
        from_broadcast = Signal(depth)
        m.d.comb += [
            store_write.addr.eq(pe_word.input1_waddr),
            store_write.data.eq(broadcast.r_data),
            store_write.en.eq(pe_word.input1_write),
            store_read.addr.eq(pe_word.input1_raddr),
        ]
        with m.If(pe_word.input1_write):
            m.d.sync += from_broadcast.bit_select(pe_word.input1_waddr, 1).eq(broadcast1)
        take_stored = ((pe_word.a == OperandA.INPUT1)
                       & from_broadcast.bit_select(pe_word.input1_raddr, 1))
        m.d.comb += [
            word.eq(pe_word),
            shared_a.eq(Mux(take_stored, store_read.data, config.fmt.sign_mask)),
        ]
        with m.If(take_stored):
            m.d.comb += word.a.eq(OperandA.ZERO)

        # -- collector: results in instruction order -------------------------------------
        beat_shape = config.beat_layout
        m.submodules.result_queue = results = SyncFIFO(width=beat_shape.size,
                                                       depth=config.result_depth)
        m.d.comb += [
            self.o.valid.eq(results.r_rdy),
            self.o.payload.eq(results.r_data),
            results.r_en.eq(self.o.ready),
        ]
        # the sigmoid and the tanh unit on one datapath: the collector feeds one function
        # at a time and changes function only when the unit is empty
        m.submodules.activation = activation = SharedActivation(
            (config.table("sigmoid"), config.table("tanh")),
            adder_stages=config.activation_adder_stages,
            multiplier_stages=config.activation_multiplier_stages,
            flush_subnormals=config.flush_subnormals, shifts=config.adder_shifts)
        # one entry per word inside an activation unit: whether it ends its beat
        m.submodules.activation_sideband = sideband = SyncFIFO(
            width=1, depth=config.activation_slots)

        head = data.View(layout, collect.r_data)
        result_index = Signal(range(config.pe.max_length + 1))
        serial_lane = Signal(range(lanes_count))
        head_results = Mux(head.mode == OmniMode.MVM, 1,
                           Mux(head.length == 0, 1, head.length))
        last_result = result_index == head_results - 1
        direct = head.activation == Activation.NONE
        want_tanh = head.activation == Activation.TANH
        unit_tanh = Signal()          # the unit fed last
        gather = Signal(beat_shape)
        gather_fill = Signal(range(lanes_count))
        gather_full = Signal()
        units_idle = (sideband.level == 0) & ~gather_full

        # the direct path: every active lane's result in one beat
        take_beat = Signal()
        beat = Signal(beat_shape)
        m.d.comb += take_beat.eq(collect.r_rdy & direct & control.o.valid & units_idle
                                 & results.w_rdy)
        for index, lane in enumerate(lanes):
            m.d.comb += beat[index].eq(Mux(head.lanes > index, lane.o_data, 0))

        # the activation path: lane by lane into the sigmoid or the tanh unit
        serial_data = Array(lane.o_data for lane in lanes)[serial_lane]
        offer = (collect.r_rdy & ~direct & control.o.valid & sideband.w_rdy
                 & (units_idle | (unit_tanh == want_tanh)))
        feed = Signal()
        end_of_beat = serial_lane == head.lanes - 1
        m.d.comb += [
            activation.i.valid.eq(offer),
            activation.i.payload.x.eq(serial_data),
            activation.i.payload.function.eq(want_tanh),
            feed.eq(offer & activation.i.ready),
            sideband.w_en.eq(feed),
            sideband.w_data.eq(end_of_beat),
        ]
        with m.If(feed):
            m.d.sync += [
                unit_tanh.eq(want_tanh),
                serial_lane.eq(Mux(end_of_beat, 0, serial_lane + 1)),
            ]
        # a beat of results leaves the lanes' Output Queues at once: taken whole, or
        # when the activation path has fed its last active lane
        m.d.comb += control.o.ready.eq(take_beat | (feed & end_of_beat))

        next_result = take_beat | (feed & end_of_beat)
        m.d.comb += collect.r_en.eq(next_result & last_result)
        with m.If(next_result):
            m.d.sync += result_index.eq(Mux(last_result, 0, result_index + 1))

        # gathering the activation unit's words back into a beat
        unit_data = activation.o.payload
        gathered = activation.o.valid & ~gather_full
        m.d.comb += [
            activation.o.ready.eq(~gather_full),
            sideband.r_en.eq(gathered),
        ]
        with m.If(gathered):
            m.d.sync += gather[gather_fill].eq(unit_data)
            with m.If(sideband.r_data):
                m.d.sync += [gather_full.eq(1), gather_fill.eq(0)]
            with m.Else():
                m.d.sync += gather_fill.eq(gather_fill + 1)
        emit_gather = gather_full & results.w_rdy
        with m.If(emit_gather):
            m.d.sync += [gather_full.eq(0), gather.eq(0)]
        m.d.comb += [
            results.w_en.eq(take_beat | emit_gather),
            results.w_data.eq(Mux(take_beat, beat, gather)),
        ]
        return m

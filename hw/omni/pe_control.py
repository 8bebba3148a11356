"""The control of an Omni-PE (:mod:`.pe`): everything that depends on commands and
handshakes only, never on data. It drives one or more lanes (:class:`~.lane.OmniLane`)
with a word per cycle (:attr:`~.config.OmniPEConfig.lane_control_layout`).

It holds the job queue and the job's counters, the queues' pointers and levels (their
storage is in the lanes), a model of the multiplier's and the adder's valid bits (the
lanes' units move on its enables), the sidebands of the two pipelines (where a product
goes, an MVM job's last product, what each entry of the adder's ring is), the adder's
accumulate / reduce sequence, and the output MUX's job tracking with the Output Queue's
``last`` bits. The behaviour is the Omni-PE's, as :mod:`.pe` describes it.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory

from ..arith.accumulator import ReductionStep, reduction_schedule
from .config import ConfiguredComponent, OmniMode, OmniPEConfig, OperandA, OperandB

__all__ = ["OmniPEControl", "RingEntry"]


#: What an entry of the adder's pipeline is (a 2-bit sideband).
class RingEntry:
    #: A filler (``-0 + -0``) or a spent partial sum: dropped when it leaves.
    NONE = 0
    #: A partial sum of the MVM job under way.
    PARTIAL = 1
    #: An EW-add result: goes to the Partial Output Queue when it leaves.
    RESULT = 2


def _delay(m, value, stages, enable, name):
    """``value`` through ``stages`` registers that load on ``enable``: the sideband of a
    float unit's pipeline."""
    current = value
    for stage in range(stages):
        register = Signal.like(value, name=f"{name}_{stage}")
        with m.If(enable):
            m.d.sync += register.eq(current)
        current = register
    return current


def _pipeline(m, valid, ready, stages, name):
    """The valid bits of a float unit's pipeline (:class:`~nnrtl.hw.arith.float_pipeline.
    FloatPipeline`: every register loads on ``~o.valid | o.ready``); returns
    ``(o_valid, enable)``, ``enable`` being the unit's ``i.ready``."""
    if not stages:
        return valid, ready
    enable = Signal(name=f"{name}_enable")
    last = _delay(m, valid, stages, enable, f"{name}_valid")
    m.d.comb += enable.eq(~last | ready)
    return last, enable


class _Pointers:
    """A queue's pointers and level, as :class:`~amaranth.lib.fifo.SyncFIFO` keeps them,
    its storage elsewhere: ``w_en`` / ``r_en`` in, ``w_rdy`` / ``r_rdy`` out,
    ``write`` / ``produce`` / ``consume`` for the storage."""

    def __init__(self, m, depth, name):
        self.w_en = Signal(name=f"{name}_w_en")
        self.r_en = Signal(name=f"{name}_r_en")
        self.w_rdy = Signal(name=f"{name}_w_rdy")
        self.r_rdy = Signal(name=f"{name}_r_rdy")
        self.write = Signal(name=f"{name}_write")
        self.produce = Signal(range(depth), name=f"{name}_produce")
        self.consume = Signal(range(depth), name=f"{name}_consume")
        level = Signal(range(depth + 1), name=f"{name}_level")
        read = self.r_rdy & self.r_en
        m.d.comb += [
            self.w_rdy.eq(level != depth),
            self.r_rdy.eq(level != 0),
            self.write.eq(self.w_en & self.w_rdy),
        ]
        with m.If(self.write):
            m.d.sync += self.produce.eq(_increment(self.produce, depth))
        with m.If(read):
            m.d.sync += self.consume.eq(_increment(self.consume, depth))
        with m.If(self.write & ~read):
            m.d.sync += level.eq(level + 1)
        with m.If(read & ~self.write):
            m.d.sync += level.eq(level - 1)

    def drive(self, m, control, name):
        m.d.comb += [
            getattr(control, f"{name}_write").eq(self.write),
            getattr(control, f"{name}_waddr").eq(self.produce),
            getattr(control, f"{name}_raddr").eq(self.consume),
        ]
        if hasattr(control, f"{name}_rows"):
            # the one-hot row strobes of the entries' bits in flip-flops (once here,
            # not in every lane)
            rows = getattr(control, f"{name}_rows")
            m.d.comb += rows.eq(Cat(*(self.write & (self.produce == row)
                                      for row in range(len(rows)))))


def _increment(pointer, depth):
    if depth == 1 << len(pointer):
        return pointer + 1
    return Mux(pointer == depth - 1, 0, pointer + 1)


class OmniPEControl(ConfiguredComponent):
    """The control of Omni-PE lanes in lockstep (module docstring).

    Parameters
    ----------
    config : OmniPEConfig

    Attributes
    ----------
    i_command : In(stream.Signature(config.command_layout))
        Jobs, as :class:`~.pe.OmniPE`'s.
    i_input1, i_input2 : In(stream.Signature(0))
        The operand handshakes (the data go to the lanes).
    o : Out(stream.Signature(1))
        The result handshake; the payload is the result's ``last`` bit (the data are the
        lanes' ``o_data``).
    o_control : Out(config.lane_control_layout)
        The lanes' control word.

    Latency and throughput are the PE's (:class:`~.pe.OmniPE`).

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`OmniPEConfig`.
    """

    CONFIG = OmniPEConfig
    MEMBERS = "control_members"

    def elaborate(self, platform):
        m = Module()
        config = self._config
        stages = config.adder_stages
        control = self.o_control

        # -- queues: pointers here, storage in the lanes ----------------------------------
        queue1 = _Pointers(m, config.input_depth, "input1")
        queue2 = _Pointers(m, config.input_depth, "input2")
        partial_queue = _Pointers(m, config.partial_depth, "partial")
        output_queue = _Pointers(m, config.output_depth, "output")
        for name, queue in (("input1", queue1), ("input2", queue2),
                            ("partial", partial_queue), ("output", output_queue)):
            queue.drive(m, control, name)
        job_shape = data.StructLayout({"adder": 1, "count": range(config.max_length + 1)})
        m.submodules.job_queue = job_queue = SyncFIFO(width=job_shape.size,
                                                      depth=config.job_depth)
        m.d.comb += [
            queue1.w_en.eq(self.i_input1.valid),
            self.i_input1.ready.eq(queue1.w_rdy),
            queue2.w_en.eq(self.i_input2.valid),
            self.i_input2.ready.eq(queue2.w_rdy),
            self.o.valid.eq(output_queue.r_rdy),
            output_queue.r_en.eq(self.o.ready),
        ]
        # the Output Queue's `last` bits
        m.submodules.last_storage = last_storage = Memory(shape=1, depth=config.output_depth,
                                                          init=[])
        last_write = last_storage.write_port()
        last_read = last_storage.read_port(domain="comb")
        m.d.comb += [
            last_write.addr.eq(output_queue.produce),
            last_write.en.eq(output_queue.write),
            last_read.addr.eq(output_queue.consume),
            self.o.payload.eq(last_read.data),
        ]

        # -- the issue side --------------------------------------------------------------
        active = Signal()
        mode = Signal(OmniMode)
        remaining = Signal(range(config.max_length + 1))
        subtract = Signal()
        mvm_pending = Signal(range(config.job_depth + 2))  # MVM jobs taken, sum not yet out

        issue = Signal()            # an element (pair) is issued this cycle
        issue_add = Signal()        # ... into the adder (EW add)
        add_ok = Signal()           # the adder takes an EW-add operation this cycle
        emit = Signal()             # an MVM sum goes into the Partial Output Queue
        last_issue = issue & (remaining == 1)

        command = self.i_command.payload
        take_command = Signal()
        m.d.comb += [
            self.i_command.ready.eq((~active | last_issue) & job_queue.w_rdy),
            take_command.eq(self.i_command.valid & self.i_command.ready),
            job_queue.w_en.eq(take_command),
        ]
        is_adder_job = (command.mode == OmniMode.MVM) | (command.mode == OmniMode.EW_ADD)
        length = Mux(command.length == 0, 1, command.length)
        job_word = Signal(job_shape)
        m.d.comb += [
            job_word.adder.eq(is_adder_job),
            job_word.count.eq(Mux(command.mode == OmniMode.MVM, 1, length)),
            job_queue.w_data.eq(job_word.as_value()),
        ]
        with m.If(take_command):
            m.d.sync += [
                active.eq(1),
                mode.eq(command.mode),
                remaining.eq(length),
                subtract.eq(command.subtract & (command.mode == OmniMode.EW_ADD)),
            ]
        with m.Elif(last_issue):
            m.d.sync += active.eq(0)
        with m.If(issue & ~last_issue):
            m.d.sync += remaining.eq(remaining - 1)

        mvm_started = take_command & (command.mode == OmniMode.MVM)
        with m.If(mvm_started & ~emit):
            m.d.sync += mvm_pending.eq(mvm_pending + 1)
        with m.Elif(emit & ~mvm_started):
            m.d.sync += mvm_pending.eq(mvm_pending - 1)

        uses_multiplier = active & (mode != OmniMode.EW_ADD)
        outer = mode == OmniMode.OUTER
        pair_ready = queue1.r_rdy & queue2.r_rdy
        multiplier_valid = uses_multiplier & pair_ready
        multiplier_ready = Signal()
        product_ready = Signal()    # the multiplier's o.ready
        product_out, multiplier_enable = _pipeline(
            m, multiplier_valid, product_ready, config.multiplier_stages, "multiplier")
        m.d.comb += multiplier_ready.eq(multiplier_enable)
        # An EW-add job right behind a multiplier job waits at the issue when the
        # multiplier is deeper than the adder's path to the output (M > L + 1): its
        # results would otherwise wait in the Partial Output Queue behind the products.
        behind = max(0, config.multiplier_stages - stages - 1)
        add_hold = 0
        if behind:
            add_hold = Signal(range(behind + 1))
            with m.If(multiplier_valid & multiplier_ready):
                m.d.sync += add_hold.eq(behind)
            with m.Elif(add_hold != 0):
                m.d.sync += add_hold.eq(add_hold - 1)
        m.d.comb += [
            control.multiply.eq(multiplier_ready),
            issue_add.eq(active & (mode == OmniMode.EW_ADD) & pair_ready & add_ok
                         & (add_hold == 0)),
            issue.eq((multiplier_valid & multiplier_ready) | issue_add),
            # OUTER: Input1's one element stays at the queue's head, read by every
            # product of the row, and leaves with the job's last issue
            queue1.r_en.eq(issue & (~outer | last_issue)),
            queue2.r_en.eq(issue),
        ]

        # the multiplier's sideband: where the product goes, and an MVM job's last one
        to_adder = _delay(m, mode == OmniMode.MVM, config.multiplier_stages,
                          multiplier_ready, "product_to_adder")
        product_last = _delay(m, remaining == 1, config.multiplier_stages,
                              multiplier_ready, "product_last")
        product_valid = product_out & to_adder
        take_product = Signal()     # the adder takes the product at the multiplier output
        take_result = Signal()      # the output MUX takes the product

        # -- the adder: accumulator ring and EW adder -------------------------------------
        schedule = reduction_schedule(stages)
        last_step = len(schedule) - 1
        step = Signal(range(last_step + 1))
        taken = Signal(range(stages + 1))      # products of the MVM job in the ring, up to L
        results = Signal(range(stages + 1))    # EW-add results in the ring
        advance = Signal()
        entry_in = Signal(2)
        adder_valid, adder_enable = _pipeline(m, Const(1, 1), advance, stages, "adder")
        leaving_entry = _delay(m, entry_in, stages, adder_enable, "ring_entry")
        leaving_result = leaving_entry == RingEntry.RESULT
        leave_ok = ~leaving_result | partial_queue.w_rdy
        # an MVM job's first product enters only when the ring holds no result but the
        # one leaving now
        drained = results == leaving_result
        m.d.comb += [
            control.a.eq(OperandA.ZERO),
            control.b.eq(OperandB.ZERO),
            entry_in.eq(RingEntry.NONE),
        ]

        def start_product(first):
            """Take the product into the ring (``first``: the job's first product)."""
            m.d.comb += [
                take_product.eq(1),
                control.b.eq(OperandB.PRODUCT),
                entry_in.eq(RingEntry.PARTIAL),
            ]
            if not first:
                m.d.comb += control.a.eq(Mux(taken == stages, OperandA.LEAVING,
                                             OperandA.ZERO))
            with m.If(product_last):
                m.d.sync += [taken.eq(0), step.eq(0)]
                m.next = "Reduce the partial sums"
            with m.Else():
                m.d.sync += taken.eq(Mux(taken == stages, stages, taken + 1) if not first
                                     else 1)
                m.next = "Accumulate"

        with m.FSM(name="adder_control"):
            with m.State("Fill the adder"):
                with m.If(adder_valid):
                    m.next = "Accumulate"
            with m.State("Accumulate"):
                m.d.comb += add_ok.eq((taken == 0) & (mvm_pending == 0) & leave_ok)
                with m.If(product_valid & leave_ok & ((taken != 0) | drained)):
                    m.d.comb += advance.eq(1)
                    with m.If(taken == 0):
                        start_product(first=True)
                    with m.Else():
                        start_product(first=False)
                with m.Elif(issue_add):
                    m.d.comb += [
                        advance.eq(1),
                        control.a.eq(OperandA.INPUT1),
                        control.b.eq(OperandB.INPUT2),
                        entry_in.eq(RingEntry.RESULT),
                    ]
                with m.Elif((taken == 0) & (results != 0) & leave_ok):
                    m.d.comb += advance.eq(1)  # drain the results with fillers
            with m.State("Reduce the partial sums"):
                with m.If(step == last_step):
                    m.d.comb += [
                        emit.eq(partial_queue.w_rdy),
                        advance.eq(partial_queue.w_rdy),
                    ]
                    with m.If(partial_queue.w_rdy):
                        with m.If(product_valid):
                            start_product(first=True)
                        with m.Else():
                            m.next = "Accumulate"
                with m.Else():
                    m.d.comb += advance.eq(1)
                    m.d.sync += step.eq(step + 1)
                    hold = [t for t, s in enumerate(schedule) if s is ReductionStep.HOLD]
                    combine = [t for t, s in enumerate(schedule) if s is ReductionStep.COMBINE]
                    if hold:
                        m.d.comb += control.load_held.eq(step.matches(*hold))
                    if combine:
                        with m.If(step.matches(*combine)):
                            m.d.comb += [
                                control.a.eq(OperandA.HELD),
                                control.b.eq(OperandB.LEAVING),
                                entry_in.eq(RingEntry.PARTIAL),
                            ]

        entering_result = advance & (entry_in == RingEntry.RESULT)
        leaving_taken = advance & leaving_result & adder_valid
        with m.If(entering_result & ~leaving_taken):
            m.d.sync += results.eq(results + 1)
        with m.Elif(leaving_taken & ~entering_result):
            m.d.sync += results.eq(results - 1)

        m.d.comb += [
            control.add.eq(advance),
            control.subtract.eq(issue_add & subtract),
            partial_queue.w_en.eq(emit | leaving_taken),
        ]

        # -- output MUX: the head job's source, in job order ------------------------------
        head = job_shape(job_queue.r_data)
        emitted = Signal(range(config.max_length + 1))
        move = Signal()
        last = emitted == head.count - 1
        from_adder = job_queue.r_rdy & head.adder
        from_multiplier = job_queue.r_rdy & ~head.adder
        m.d.comb += [
            take_result.eq(from_multiplier & product_out & ~to_adder & output_queue.w_rdy),
            partial_queue.r_en.eq(from_adder & output_queue.w_rdy),
            move.eq(take_result | (partial_queue.r_en & partial_queue.r_rdy)),
            control.output_from_partial.eq(head.adder),
            last_write.data.eq(last),
            output_queue.w_en.eq(move),
            job_queue.r_en.eq(move & last),
            product_ready.eq(Mux(to_adder, take_product, take_result)),
        ]
        with m.If(move):
            m.d.sync += emitted.eq(Mux(last, 0, emitted + 1))
        return m

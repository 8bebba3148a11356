"""η-LSTM's Omni-PE (ISCA 2021, Sec. V-B, Fig. 12; spec omni.md §3.2).

One fp32 multiplier (:class:`~nnrtl.hw.arith.float_mul.FloatMul`), one fp32 adder
(:class:`~nnrtl.hw.arith.float_add.FloatAdd`) that is also the streaming accumulator of
Fig. 11, the Input1 and Input2 queues, the Partial Output Queue, the Output Queue, a
controller and the MUXes between them. Parameters: :class:`~.config.OmniPEConfig`.

Jobs. A command ``(mode, length, subtract)`` (:class:`~.config.OmniJob`) on ``i_command``
starts a job; jobs run in command order, back to back (the next command is taken in the
cycle the current job issues its last element). Per mode (``n`` = ``length``):

- ``MVM``: ``n`` pairs ``input1[k] * input2[k]`` through the multiplier into the adder,
  accumulated as :class:`~nnrtl.hw.arith.accumulator.StreamingAccumulator` does (one MAC per
  cycle), then reduced (``E`` = ``reduction_cycles`` cycles); one result, the sum.
- ``EW_MUL``: ``input1[k] * input2[k]``; ``OUTER``: ``input1[0] * input2[k]`` (Input1 gives
  one element per job, held in a register and broadcast over the row); multiplier only,
  one result per cycle.
- ``EW_ADD``: ``input1[k] + input2[k]`` (``- input2[k]`` with ``subtract``); adder only,
  one result per cycle.

Results leave on ``o`` in job order, ``last`` set on each job's last result.

Decisions the paper leaves open ([U] of spec §3.2, §6.6)
--------------------------------------------------------
- *How a partial output is fed back.* The adder's ``L`` pipeline registers hold the ``L``
  interleaved partial sums of an MVM job (StreamingAccumulator's ring): the partial sum
  leaving the adder goes straight back into operand ``a`` with the next product on
  operand ``b`` (the feedback MUX the paper does not list). The ring *is* the queue of
  partials the figure draws: a separate queue in the loop would make the number of slots,
  hence the summation order, depend on its fill. The reduction after the last product
  follows StreamingAccumulator's schedule (:func:`~nnrtl.hw.arith.accumulator.
  reduction_schedule`), so the sum is bit for bit
  :func:`~nnrtl.sim.golden.accumulator.streaming_sum` of the products, independent of
  input gaps and output backpressure.
- *Partial Output Queue* (depth ``partial_depth`` >= ``adder_stages``): what leaves the
  adder for good, EW-add results and MVM sums; the output MUX reads it. EW-add results
  move through the same ring, tagged as results (a sideband of the adder's pipeline says
  of each entry: none, an MVM partial, or a result). Before an MVM job's first product
  enters the adder every result must have left it (``L`` cycles at most, the adder moves
  every cycle while it holds results and no MVM job is under way): the job's slots then
  start from ``-0`` as in the accumulator. A queue of ``L`` entries takes the whole drain.
- *Left MUXes that "flip per cycle".* Not needed: IEEE addition is commutative bit for
  bit (NaNs are canonical), so operand ``a`` is always the partial (or Input1) and ``b``
  the new value (product or Input2).
- *Subtraction* (``1 - x``): EW add with ``subtract`` (the adder's own sign flip of
  operand 2: no extra logic).
- *Mode switch*: no bubble between jobs, except what ordering and the shared adder
  impose (:meth:`~.config.OmniPEConfig.switch_cycles`): an EW-add job waits for the sum of
  an MVM job before it (the adder is busy reducing); an MVM job's first product waits for
  the adder to drain earlier EW-add results; a multiplier job's results wait for the
  results of adder jobs before it (the output is in job order; the multiplier holds);
  with a multiplier deeper than the adder plus one (``M > L + 1``), an EW-add job's
  first issue waits ``M - L - 1`` cycles behind a multiplier job's last (so its results
  never queue behind the products and every wait shows at the issue).
- *Rounding*: IEEE round to nearest even everywhere; subnormals exact unless
  ``flush_subnormals``; NaNs canonical.
- *Queue depths*: :class:`~.config.OmniPEConfig` (Input/Output queues 2 or more for one
  element per cycle, default 4; a job queue of :attr:`~.config.OmniPEConfig.job_depth`
  entries tells the output MUX each job's source and result count).
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO

from ..arith.accumulator import ReductionStep, reduction_schedule
from ..arith.float_add import FloatAdd
from ..arith.float_mul import FloatMul
from .config import ConfiguredComponent, OmniMode, OmniPEConfig

__all__ = ["OmniPE", "RingEntry"]


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
    float unit's pipeline (its ``i.ready`` is the pipeline's enable)."""
    current = value
    for stage in range(stages):
        register = Signal.like(value, name=f"{name}_{stage}")
        with m.If(enable):
            m.d.sync += register.eq(current)
        current = register
    return current


class OmniPE(ConfiguredComponent):
    """One Omni-PE: multiplier, adder-accumulator, queues, controller (module docstring).

    Parameters
    ----------
    config : OmniPEConfig

    Attributes
    ----------
    i_command : In(stream.Signature(config.command_layout))
        Jobs: ``mode``, ``length`` (1 to ``max_length``; 0 is taken as 1), ``subtract``.
    i_input1, i_input2 : In(stream.Signature(fmt.width))
        The operands, as bit patterns, in job order (Input1: one element per job for
        ``OUTER``, ``length`` otherwise; Input2: ``length``).
    o : Out(stream.Signature(config.output_layout))
        The results in job order, ``last`` on each job's last.

    Throughput: one element pair per cycle in every mode (one MAC per cycle for MVM);
    an MVM job occupies the adder ``length + reduction_cycles`` cycles. Cycle counts:
    :meth:`OmniPEConfig.run_cycles`.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`OmniPEConfig`.
    """

    CONFIG = OmniPEConfig

    def elaborate(self, platform):
        m = Module()
        config = self._config
        fmt = config.fmt
        width = fmt.width
        stages = config.adder_stages
        negative_zero = Const(fmt.sign_mask, width)

        # -- queues ------------------------------------------------------------------
        m.submodules.input1_queue = queue1 = SyncFIFO(width=width, depth=config.input_depth)
        m.submodules.input2_queue = queue2 = SyncFIFO(width=width, depth=config.input_depth)
        m.submodules.partial_queue = partial_queue = SyncFIFO(width=width,
                                                              depth=config.partial_depth)
        output_shape = config.output_layout
        m.submodules.output_queue = output_queue = SyncFIFO(width=output_shape.size,
                                                            depth=config.output_depth)
        job_shape = data.StructLayout({"adder": 1, "count": range(config.max_length + 1)})
        m.submodules.job_queue = job_queue = SyncFIFO(width=job_shape.size,
                                                      depth=config.job_depth)
        wiring.connect(m, wiring.flipped(self.i_input1), queue1.w_stream)
        wiring.connect(m, wiring.flipped(self.i_input2), queue2.w_stream)
        m.d.comb += [
            self.o.valid.eq(output_queue.r_rdy),
            self.o.payload.eq(output_queue.r_data),
            output_queue.r_en.eq(self.o.ready),
        ]

        m.submodules.multiplier = multiplier = FloatMul(
            fmt, stages=config.multiplier_stages, flush_subnormals=config.flush_subnormals)
        m.submodules.adder = adder = FloatAdd(fmt, stages=stages,
                                              flush_subnormals=config.flush_subnormals,
                                              shifts=config.adder_shifts)

        # -- controller: the issue side --------------------------------------------------
        active = Signal()
        mode = Signal(OmniMode)
        remaining = Signal(range(config.max_length + 1))
        subtract = Signal()
        loaded = Signal()           # OUTER: the broadcast operand is held
        broadcast = Signal(width)
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
                loaded.eq(0),
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
        operand1_ready = Mux(outer & loaded, 1, queue1.r_rdy)
        operand1 = Mux(outer & loaded, broadcast, queue1.r_data)
        pair_ready = operand1_ready & queue2.r_rdy
        # An EW-add job right behind a multiplier job waits at the issue when the
        # multiplier is deeper than the adder's path to the output (M > L + 1): its
        # results would otherwise wait in the Partial Output Queue behind the products.
        behind = max(0, config.multiplier_stages - stages - 1)
        add_hold = Const(0)
        if behind:
            add_hold = Signal(range(behind + 1))
            with m.If(multiplier.i.valid & multiplier.i.ready):
                m.d.sync += add_hold.eq(behind)
            with m.Elif(add_hold != 0):
                m.d.sync += add_hold.eq(add_hold - 1)
        m.d.comb += [
            multiplier.i.valid.eq(uses_multiplier & pair_ready),
            multiplier.i.payload.a.eq(operand1),
            multiplier.i.payload.b.eq(queue2.r_data),
            issue_add.eq(active & (mode == OmniMode.EW_ADD) & pair_ready & add_ok
                         & (add_hold == 0)),
            issue.eq((multiplier.i.valid & multiplier.i.ready) | issue_add),
            queue1.r_en.eq(issue & ~(outer & loaded)),
            queue2.r_en.eq(issue),
        ]
        with m.If(issue & outer & ~loaded & ~last_issue):
            m.d.sync += [loaded.eq(1), broadcast.eq(queue1.r_data)]

        # the multiplier's sideband: where the product goes, and an MVM job's last one
        to_adder = _delay(m, mode == OmniMode.MVM, config.multiplier_stages,
                          multiplier.i.ready, "product_to_adder")
        product_last = _delay(m, remaining == 1, config.multiplier_stages,
                              multiplier.i.ready, "product_last")
        product_valid = multiplier.o.valid & to_adder
        product = multiplier.o.payload
        take_product = Signal()     # the adder takes the product at the multiplier output
        take_result = Signal()      # the output MUX takes the product

        # -- the adder: accumulator ring and EW adder ---------------------------------
        schedule = reduction_schedule(stages)
        last_step = len(schedule) - 1
        step = Signal(range(last_step + 1))
        held = Signal(width)
        taken = Signal(range(stages + 1))      # products of the MVM job in the ring, up to L
        results = Signal(range(stages + 1))    # EW-add results in the ring
        advance = Signal()
        entry_in = Signal(2)
        leaving = adder.o.payload
        leaving_entry = _delay(m, entry_in, stages, adder.i.ready, "ring_entry")
        leaving_result = leaving_entry == RingEntry.RESULT
        partial = Mux(leaving_entry == RingEntry.PARTIAL, leaving, negative_zero)
        leave_ok = ~leaving_result | partial_queue.w_rdy
        # an MVM job's first product enters only when the ring holds no result but the
        # one leaving now
        drained = results == leaving_result
        a = Signal(width)
        b = Signal(width)
        m.d.comb += [
            a.eq(negative_zero),
            b.eq(negative_zero),
            entry_in.eq(RingEntry.NONE),
        ]

        def start_product(first):
            """Take the product into the ring (``first``: the job's first product)."""
            m.d.comb += [
                take_product.eq(1),
                b.eq(product),
                entry_in.eq(RingEntry.PARTIAL),
            ]
            if not first:
                m.d.comb += a.eq(Mux(taken == stages, leaving, negative_zero))
            with m.If(product_last):
                m.d.sync += [taken.eq(0), step.eq(0)]
                m.next = "Reduce the partial sums"
            with m.Else():
                m.d.sync += taken.eq(Mux(taken == stages, stages, taken + 1) if not first
                                     else 1)
                m.next = "Accumulate"

        with m.FSM(name="adder_control"):
            with m.State("Fill the adder"):
                with m.If(adder.o.valid):
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
                        a.eq(queue1.r_data),
                        b.eq(queue2.r_data),
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
                        with m.If(step.matches(*hold)):
                            m.d.sync += held.eq(partial)
                    if combine:
                        with m.If(step.matches(*combine)):
                            m.d.comb += [
                                a.eq(held),
                                b.eq(partial),
                                entry_in.eq(RingEntry.PARTIAL),
                            ]

        entering_result = advance & (entry_in == RingEntry.RESULT)
        leaving_taken = advance & leaving_result & adder.o.valid
        with m.If(entering_result & ~leaving_taken):
            m.d.sync += results.eq(results + 1)
        with m.Elif(leaving_taken & ~entering_result):
            m.d.sync += results.eq(results - 1)

        m.d.comb += [
            adder.i.valid.eq(1),
            adder.o.ready.eq(advance),
            adder.i.payload.a.eq(a),
            adder.i.payload.b.eq(b),
            adder.i.payload.subtract.eq(issue_add & subtract),
            partial_queue.w_en.eq(emit | leaving_taken),
            partial_queue.w_data.eq(Mux(emit, partial, leaving)),
        ]

        # -- output MUX: the head job's source, in job order ----------------------------
        head = job_shape(job_queue.r_data)
        emitted = Signal(range(config.max_length + 1))
        move = Signal()
        result = Signal(output_shape)
        from_adder = job_queue.r_rdy & head.adder
        from_multiplier = job_queue.r_rdy & ~head.adder
        m.d.comb += [
            take_result.eq(from_multiplier & multiplier.o.valid & ~to_adder
                           & output_queue.w_rdy),
            partial_queue.r_en.eq(from_adder & output_queue.w_rdy),
            move.eq(take_result | (partial_queue.r_en & partial_queue.r_rdy)),
            result.data.eq(Mux(head.adder, partial_queue.r_data, product)),
            result.last.eq(emitted == head.count - 1),
            output_queue.w_en.eq(move),
            output_queue.w_data.eq(result.as_value()),
            job_queue.r_en.eq(move & result.last),
            multiplier.o.ready.eq(Mux(to_adder, take_product, take_result)),
        ]
        with m.If(move):
            m.d.sync += emitted.eq(Mux(result.last, 0, emitted + 1))
        return m

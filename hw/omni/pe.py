"""η-LSTM's Omni-PE (ISCA 2021, Sec. V-B, Fig. 12; spec §3.2).

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
  one element per job, which stays at the head of the Input1 queue for the row and
  leaves with the job's last product); multiplier only, one result per cycle.
- ``EW_ADD``: ``input1[k] + input2[k]`` (``- input2[k]`` with ``subtract``); adder only,
  one result per cycle.

Results leave on ``o`` in job order, ``last`` set on each job's last result.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring

from .config import ConfiguredComponent, OmniPEConfig
from .lane import OmniLane
from .pe_control import OmniPEControl, RingEntry

__all__ = ["OmniPE", "RingEntry"]


class OmniPE(ConfiguredComponent):
    """One Omni-PE: multiplier, adder-accumulator, queues, controller (jobs: the module
    docstring; decisions: Notes below).

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

    Notes
    -----
    **Decisions the paper leaves open ([U] of spec §3.2, §6.6)**

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
    - *A control and a lane* (the paper's Fig. 12 draws one controller per PE). The PE is
      built as a PE control (:class:`~.pe_control.OmniPEControl`: the job queue and
      counters, the queues' pointers and levels, the sidebands of the multiplier's and the
      adder's pipelines, the accumulate / reduce sequence, the output MUX's job tracking)
      and a lane (:class:`~.lane.OmniLane`: the multiplier, the adder, the queues' storage,
      the broadcast and held registers and the MUXes), the control driving the lane with a
      word of selects, enables and write strobes each cycle. Nothing the control decides
      depends on data, so a channel's lanes, which run in lockstep, share one control
      (:mod:`.channel`); an ``OmniPE`` is one of each, with the same ports and cycles as a
      PE with its own controller.
    - *Queue depths*: :class:`~.config.OmniPEConfig` (Input/Output queues 2 or more for one
      element per cycle, default 4; a job queue of :attr:`~.config.OmniPEConfig.job_depth`
      entries tells the output MUX each job's source and result count).
    """

    CONFIG = OmniPEConfig

    def elaborate(self, platform):
        m = Module()
        m.submodules.control = control = OmniPEControl(self._config)
        m.submodules.lane = lane = OmniLane(self._config)
        m.d.comb += [
            lane.i_control.eq(control.o_control),
            lane.i_input1.eq(self.i_input1.payload),
            lane.i_input2.eq(self.i_input2.payload),
            control.i_input1.valid.eq(self.i_input1.valid),
            self.i_input1.ready.eq(control.i_input1.ready),
            control.i_input2.valid.eq(self.i_input2.valid),
            self.i_input2.ready.eq(control.i_input2.ready),
            self.o.valid.eq(control.o.valid),
            self.o.payload.data.eq(lane.o_data),
            self.o.payload.last.eq(control.o.payload),
            control.o.ready.eq(self.o.ready),
        ]
        wiring.connect(m, wiring.flipped(self.i_command), control.i_command)
        return m

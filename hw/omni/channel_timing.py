"""The channel's cycle model: :func:`program_cycles` of a program on a
:class:`~.channel.Channel` fed by the bench's scratchpad (``sim/tb/omni/channel.py``),
cycle for cycle.

It is a cycle-level model of the control of the RTL, without the data: every queue is
a count, every pipeline a row of valid bits (and the sideband the RTL carries with it),
every handshake the RTL's expression. What it models, per cycle:

- *the scratchpad* (the bench): the next command is always offered; a step's operand
  words are offered once every earlier step writing a vector the step reads has put
  its last result beat on ``o`` (read after write; the beat taken in cycle ``c``
  releases the reader in ``c + 1``); one word per port and cycle; ``o`` always ready;
- *command issue*: one command to every active lane in the cycle each of those PEs
  takes it (a PE holds one job: it takes the next in the cycle its job issues its last
  element) and the distribute and collect queues have room;
- *the distributor*: an element to every active lane when its operands are there and
  every active lane's Input queues have room (outer products take operand 1 once);
- *every active lane's Omni-PE* (:mod:`.pe`): the Input queues, the issue (the
  multiplier's stall, the adder's ring: the first product of an MVM job waits for the
  adder to be drained of EW-add results, an EW-add job for the sums of earlier MVM
  jobs, the reduction schedule of ``reduction_cycles`` after the last product, the
  ``M > L + 1`` hold), the Partial Output, Output and job queues and the output MUX;
- *the collector*: a direct beat when every active lane has a result and the
  activation units are empty; activation words lane by lane into the sigmoid or tanh
  unit (each a chain of three pipelines that move as a whole: subtract, multiply,
  add), the sideband queue of :attr:`~.channel_config.ChannelConfig.activation_slots`,
  the gather register (full for a cycle per beat), the result queue.

Every latency comes from the :class:`~.channel_config.ChannelConfig` (and its
:attr:`~.channel_config.ChannelConfig.pe`). The model is exact against the RTL in the
Amaranth simulator and under Verilator with pattern ``none`` (tests:
``tests/omni/hw/test_omni_channel_timing.py``). Lanes never active in the program are left
out (they take no part in any handshake); in a program without activations, lanes
active in the same steps get the same handshakes in every cycle, so one lane stands for
each such group (the lanes from ``first`` to the next step's lane count). Cost: about
6 microseconds of Python per cycle and modelled lane.
"""

from collections import deque

from ..arith.accumulator import reduction_schedule
from .channel_config import Activation, Source
from .config import OmniMode

__all__ = ["program_cycles", "raw_order"]

_MVM, _OUTER, _EW_ADD = OmniMode.MVM, OmniMode.OUTER, OmniMode.EW_ADD
# ring entries of the adder (hw/omni/pe.py's RingEntry)
_NONE, _PARTIAL, _RESULT = 0, 1, 2
_FILL, _ACCUMULATE, _REDUCE = 0, 1, 2


def raw_order(program):
    """Per step, the index of the last earlier step writing a vector it reads (``-1``:
    none): the scratchpad offers the step's operands once that step's results are all
    out. Plain instructions (no :class:`~.channel_program.Step`) read nothing."""
    writers, after = {}, []
    for index, step in enumerate(program):
        reads = [getattr(step, name).name for name in ("operand1", "operand2")
                 if hasattr(step, name)]
        after.append(max((writers[r] for r in reads if r in writers), default=-1))
        if hasattr(step, "result"):
            writers[step.result.name] = index
    return after


class _Pipe:
    """A pipeline that moves as a whole (``i.ready = ~o.valid | o.ready``): valid bits
    and a sideband per stage; ``stages = 0`` is a wire."""

    __slots__ = ("stages", "regs")

    def __init__(self, stages, empty=None):
        self.stages = stages
        self.regs = deque([empty] * stages, maxlen=stages) if stages else None

    def out(self, comb_in=None):
        return self.regs[-1] if self.stages else comb_in

    def ready(self, o_ready, out):
        return o_ready if not self.stages else (out is None or o_ready)

    def shift(self, value):
        self.regs.appendleft(value)


class _Lane:
    """One Omni-PE's control (hw/omni/pe.py), see the module docstring."""

    def __init__(self, pe):
        self.pe = pe
        self.q1 = self.q2 = self.pq = self.oq = 0
        self.jobs = deque()          # (adder, count) of the job queue
        self.emitted = 0
        self.active = False
        self.mode, self.remaining, self.loaded = _MVM, 0, False
        self.mvm_pending = 0
        self.add_hold = 0
        self.mul = _Pipe(pe.multiplier_stages)        # entries (to_adder, last) or None
        self.ring = deque([None] * pe.adder_stages)   # entries or None (not yet filled)
        self.state, self.taken, self.step, self.results = _FILL, 0, 0, 0
        self.schedule_last = len(reduction_schedule(pe.adder_stages)) - 1

    def comb(self):
        """The PE's handshakes this cycle that depend on its state only."""
        pe = self.pe
        outer = self.mode is _OUTER
        pair_ready = (self.loaded and outer or self.q1 > 0) and self.q2 > 0
        mul_ivalid = self.active and self.mode is not _EW_ADD and pair_ready
        if self.mul.stages:
            mul_out = self.mul.regs[-1]
        else:
            mul_out = (self.mode is _MVM, self.remaining == 1) if mul_ivalid else None
        to_adder = mul_out is not None and mul_out[0]
        leaving = self.ring[-1]
        adder_valid = leaving is not None
        leaving_result = leaving == _RESULT
        leave_ok = not leaving_result or self.pq < pe.partial_depth
        # output MUX
        head = self.jobs[0] if self.jobs else None
        oq_room = self.oq < pe.output_depth
        take_result = (head is not None and not head[0] and mul_out is not None
                       and not to_adder and oq_room)
        pq_read = head is not None and head[0] and oq_room and self.pq > 0
        # adder FSM
        add_ok = (self.state == _ACCUMULATE and self.taken == 0 and self.mvm_pending == 0
                  and leave_ok)
        issue_add = (self.active and self.mode is _EW_ADD and pair_ready and add_ok
                     and self.add_hold == 0)
        product_valid = to_adder
        advance = take_product = emit = False
        entry_in = _NONE
        product_last = to_adder and mul_out[1]
        if self.state == _ACCUMULATE:
            if product_valid and leave_ok and (self.taken != 0 or
                                               self.results == leaving_result):
                advance = take_product = True
                entry_in = _PARTIAL
            elif issue_add:
                advance, entry_in = True, _RESULT
            elif self.taken == 0 and self.results != 0 and leave_ok:
                advance = True
        elif self.state == _REDUCE:
            if self.step == self.schedule_last:
                emit = advance = self.pq < pe.partial_depth
                if emit and product_valid:
                    take_product, entry_in = True, _PARTIAL
            else:
                advance = True
        mul_oready = take_product if to_adder else take_result
        mul_iready = self.mul.ready(mul_oready, mul_out)
        issue = (mul_ivalid and mul_iready) or issue_add
        last_issue = issue and self.remaining == 1
        self.c = (mul_ivalid, mul_iready, mul_out, issue, issue_add,
                  last_issue, advance, take_product, product_last, entry_in, emit,
                  leaving_result and advance and adder_valid, take_result, pq_read,
                  adder_valid)
        self.cmd_ready = (not self.active or last_issue) and len(self.jobs) < pe.job_depth
        self.in1_room = self.q1 < pe.input_depth
        self.in2_room = self.q2 < pe.input_depth
        self.o_valid = self.oq > 0

    def tick(self, command, give1, give2, o_ready):
        pe = self.pe
        (mul_ivalid, mul_iready, mul_out, issue, issue_add, last_issue,
         advance, take_product, product_last, entry_in, emit, leaving_taken, take_result,
         pq_read, adder_valid) = self.c
        outer = self.mode is _OUTER
        # the input queues
        if issue:
            if not (outer and self.loaded):
                self.q1 -= 1
            self.q2 -= 1
        self.q1 += give1
        self.q2 += give2
        # the multiplier's pipeline and its sideband
        if self.mul.stages and mul_iready:
            self.mul.shift((self.mode is _MVM, self.remaining == 1) if mul_ivalid else None)
        if pe.multiplier_stages > pe.adder_stages + 1:
            if mul_ivalid and mul_iready:
                self.add_hold = pe.multiplier_stages - pe.adder_stages - 1
            elif self.add_hold:
                self.add_hold -= 1
        # the issue side
        if issue and outer and not self.loaded and not last_issue:
            self.loaded = True
        if issue and not last_issue:
            self.remaining -= 1
        mvm_started = command is not None and command is _MVM
        if mvm_started and not emit:
            self.mvm_pending += 1
        elif emit and not mvm_started:
            self.mvm_pending -= 1
        if command is not None:
            self.active, self.mode, self.loaded = True, command, False
            self.remaining = self.next_length
            self.jobs.append((command in (_MVM, _EW_ADD),
                              1 if command is _MVM else self.next_length))
        elif last_issue:
            self.active = False
        # the adder: its ring moves on ~o.valid | advance
        if not adder_valid or advance:
            self.ring.pop()
            self.ring.appendleft(entry_in)
        if entry_in == _RESULT and not leaving_taken:
            self.results += 1
        elif leaving_taken and entry_in != _RESULT:
            self.results -= 1
        if self.state == _FILL:
            if adder_valid:
                self.state = _ACCUMULATE
        elif self.state == _ACCUMULATE:
            if take_product:
                if product_last:
                    self.taken, self.step, self.state = 0, 0, _REDUCE
                else:
                    self.taken = (min(self.taken + 1, pe.adder_stages) if self.taken
                                  else 1)
        elif self.state == _REDUCE:
            if self.step == self.schedule_last:
                if emit:
                    if take_product:
                        if product_last:
                            self.taken, self.step = 0, 0
                        else:
                            self.taken, self.state = 1, _ACCUMULATE
                    else:
                        self.state = _ACCUMULATE
            else:
                self.step += 1
        # the Partial Output Queue, the output MUX, the Output Queue
        self.pq += bool(emit or leaving_taken) - pq_read
        move = take_result or pq_read
        if o_ready and self.oq:
            self.oq -= 1
        self.oq += move
        if move:
            count = self.jobs[0][1]
            if self.emitted == count - 1:
                self.jobs.popleft()
                self.emitted = 0
            else:
                self.emitted += 1


def _chain(config):
    """A shared activation unit: subtract, multiply, add pipelines."""
    return [_Pipe(config.activation_adder_stages), _Pipe(config.activation_multiplier_stages),
            _Pipe(config.activation_adder_stages)]


def _chain_ready(chain, o_ready):
    """Each pipeline's ``i.ready`` of a unit whose ``o.ready`` is ``o_ready``, from the
    last back (a pipeline of no stages passes its ``o.ready`` on)"""
    readies, ready = [], o_ready
    for pipe in reversed(chain):
        out = pipe.regs[-1] if pipe.stages else None
        ready = pipe.ready(ready, out) if pipe.stages else ready
        readies.append(ready)
    readies.reverse()
    return readies


def program_cycles(config, program, *, operand_port=False):
    """Cycles of ``program`` (instructions or :class:`~.channel_program.Step`) on a channel
    of ``config``, counted as the bench counts them: from the first cycle a command is
    offered (the PEs have had ``adder_stages + 2`` cycles out of reset) to the cycle the
    last result beat is taken, inclusive, with no input gaps and ``o`` always ready.

    ``operand_port``: the channel inside the η-LSTM top (:class:`~.top.OmniTop`): its
    lane operands come through the top's one operand port, one beat a cycle in step,
    element, Input1-before-Input2 order (the top bench's merge), each into a register
    per input (``i_input1`` / ``i_input2``) that takes a beat when empty or being read."""
    instructions = [getattr(item, "instruction", item) for item in program]
    if not instructions:
        return 0
    for instruction in instructions:
        config.check_instruction(instruction)
    after = raw_order(program)
    pe = config.pe
    width = max(instruction.lanes for instruction in instructions)
    if any(instruction.activation is not Activation.NONE for instruction in instructions):
        firsts = range(width)          # the activation path reads the lanes one by one
    else:                              # lanes active in the same steps move alike
        firsts = sorted({0} | {i.lanes for i in instructions if i.lanes < width})
    lanes = {first: _Lane(pe) for first in firsts}
    ports = {"i_input1": deque(), "i_input2": deque(), "i_broadcast": deque()}
    merged = []                                # the top's operand port: (step, k, which)
    for index, instruction in enumerate(instructions):
        for which, source, count in ((1, instruction.source1, instruction.job.inputs1),
                                     (2, instruction.source2, instruction.job.inputs2)):
            port = "i_broadcast" if source is Source.BROADCAST else f"i_input{which}"
            ports[port].extend([index] * count)
            if operand_port and source is not Source.BROADCAST:
                merged.extend((index, k, which) for k in range(count))
    merged = deque(sorted(merged))
    held = {1: False, 2: False}                # the top's operand registers
    total_beats = sum(instruction.out_beats for instruction in instructions)
    sent_commands = 0
    distribute, collect = deque(), deque()     # step indices
    broadcast = 0                              # words in the broadcasting queue
    element = 0
    result_index = serial_lane = 0
    unit_tanh = False
    gather_full = False
    sideband = deque()                         # end-of-beat flags in the units
    units = {False: _chain(config), True: _chain(config)}
    results = 0
    completed = beats = beat = 0
    cycle = 0
    pre_roll = config.adder_stages + 2
    while beats < total_beats:
        counting = cycle >= pre_roll
        for lane in lanes.values():
            lane.comb()
        # -- command issue
        command = None
        depth = config.instruction_depth
        if counting and sent_commands < len(instructions) and len(distribute) < depth \
                and len(collect) < depth:
            candidate = instructions[sent_commands]
            if all(lane.cmd_ready for first, lane in lanes.items()
                   if first < candidate.lanes):
                command = candidate
        # -- the scratchpad's offers
        offer = {}
        for name, queue in ports.items():
            offer[name] = counting and bool(queue) and after[queue[0]] < completed
        # -- distributor
        give = need1 = False
        job = instructions[distribute[0]] if distribute else None
        broadcast_read = False
        if job is not None:
            need1 = job.job.mode is not _OUTER or element == 0
            b1, b2 = job.source1 is Source.BROADCAST, job.source2 is Source.BROADCAST
            valid1 = broadcast > 0 if b1 else (held[1] if operand_port else offer["i_input1"])
            valid2 = broadcast > 0 if b2 else (held[2] if operand_port else offer["i_input2"])
            ready = all((not need1 or lane.in1_room) and lane.in2_room
                        for first, lane in lanes.items() if first < job.lanes)
            give = (not need1 or valid1) and valid2 and ready
            if give:
                if need1 and not b1:
                    ports["i_input1"].popleft()
                if not b2:
                    ports["i_input2"].popleft()
                broadcast_read = (need1 and b1) or b2
        if operand_port:
            # a register is read by the distributor, and takes the port's beat when empty
            # or read in the same cycle
            read = {1: give and need1 and not b1, 2: give and not b2}
            if counting and merged and after[merged[0][0]] < completed:
                which = merged[0][2]
                if not held[which] or read[which]:
                    merged.popleft()
                    held[which], read[which] = True, False
            for which in (1, 2):
                held[which] = held[which] and not read[which]
        broadcast_write = offer["i_broadcast"] and broadcast < config.broadcast_depth
        if broadcast_write:
            ports["i_broadcast"].popleft()
        # -- collector
        head = instructions[collect[0]] if collect else None
        units_idle = not sideband and not gather_full
        take_beat = feed = False
        result_room = results < config.result_depth
        want_tanh = False
        chain_readies = {}
        for tanh in (False, True):
            chain = units[tanh]
            o_ready = not gather_full and unit_tanh == tanh
            chain_readies[tanh] = _chain_ready(chain, o_ready)
        if head is not None:
            if head.activation is Activation.NONE:
                take_beat = (all(lane.o_valid for first, lane in lanes.items()
                                 if first < head.lanes)
                             and units_idle and result_room)
            else:
                want_tanh = head.activation is Activation.TANH
                offer_word = (lanes[serial_lane].o_valid
                              and len(sideband) < config.activation_slots
                              and (units_idle or unit_tanh == want_tanh))
                feed = offer_word and chain_readies[want_tanh][0]
        # the units' outputs
        unit_out = units[unit_tanh][-1]
        unit_valid = (unit_out.regs[-1] is not None) if unit_out.stages else False
        gathered = unit_valid and not gather_full
        end_flag = sideband[0] if gathered else False
        emit_gather = gather_full and result_room
        # -- tick: lanes
        for index, lane in lanes.items():
            active_job = job is not None and index < job.lanes
            o_ready = ((take_beat and index < head.lanes)
                       or (feed and serial_lane == index))
            if command is not None and index < command.lanes:
                lane.next_length = command.job.length
                lane_command = command.job.mode
            else:
                lane_command = None
            lane.tick(lane_command, int(give and need1 and active_job),
                      int(give and active_job), o_ready)
        # -- tick: channel
        if command is not None:
            distribute.append(sent_commands)
            collect.append(sent_commands)
            sent_commands += 1
        broadcast += broadcast_write - broadcast_read
        if give:
            if element == job.job.length - 1:
                element = 0
                distribute.popleft()
            else:
                element += 1
        for tanh in (False, True):
            chain, readies = units[tanh], chain_readies[tanh]
            valid = feed and want_tanh == tanh
            for pipe, ready in zip(chain, readies):
                out = pipe.regs[-1] if pipe.stages else None
                if pipe.stages:
                    if ready:
                        pipe.shift(True if valid else None)
                    valid = out is not None
        if gathered:
            sideband.popleft()
        if feed:
            sideband.append(serial_lane == head.lanes - 1)
            unit_tanh = want_tanh
            serial_lane = 0 if serial_lane == head.lanes - 1 else serial_lane + 1
        next_result = take_beat or (feed and serial_lane == 0)
        if next_result:
            count = 1 if head.job.mode is _MVM else head.job.length
            if result_index == count - 1:
                result_index = 0
                collect.popleft()
            else:
                result_index += 1
        if emit_gather:
            gather_full = False
        if gathered and end_flag:
            gather_full = True
        # -- the result queue and the scratchpad taking o
        out_valid = results > 0
        results += (take_beat or emit_gather) - out_valid
        cycle += 1
        if out_valid and counting:
            beats += 1
            beat += 1
            if beat == instructions[completed].out_beats:
                completed += 1
                beat = 0
    return cycle - pre_roll

"""FARNN MVM unit (Cho et al., TPDS 2022, Sec. 5.1, Figs. 3-5): ``chains`` PE chains
sharing one vector feed, their own weight lanes and one result stream.

Geometry, weight stream and result order: :mod:`nnrtl.sim.golden.farnn.mvm` (the bit-exact
model and the host packer's reference). A run (one time step) takes ``batch`` vectors of
``n_in`` elements on ``x`` and computes ``rounds`` rounds (vector slices), each feeding the
batch's vectors back to back: one accumulator stream per vector and round, vector by
vector (so a PE needs one accumulator and the weights of a round serve the whole batch).

- A *full* round feeds every chain the same element, one per cycle: ``n_in`` cycles per
  vector, ``chains * chain_length`` rows (chain ``c``'s PE ``k``: row
  ``round * P + k * chains + c``, weight ``t`` at address ``round * n_in + t``).
- Cell splitting (Sec. 5.1.3), as the paper does it: with ``split_last`` set (and
  ``rounds >= 2``) the *last* round is split by the unit's factor ``s``: the chains form
  ``s`` groups of ``lanes = chains // s`` consecutive chains, group ``g`` is fed chunk ``g``
  of the vector (contiguous chunks of ``c = ceil(n_in / s)`` elements, all groups in the
  same cycles, ``c`` cycles per vector) and a row's ``s`` partial sums are folded at the
  chain heads, ``((q0 + q1) + q2) + ...``, by ``s - 1`` rows of
  :class:`~nnrtl.hw.arith.FloatAdd`. The round computes ``lanes * chain_length`` rows. For
  1,024 rows on 768 PEs: 1,024 + 512 MAC cycles instead of 2 x 1,024.

In Verilog (:mod:`nnrtl.hw.hierarchy`) the chains are instances of one chain module (and
its two PE modules), so the Verilog grows with the number of distinct modules, not of PEs.

Round 0 is always full and fed straight from ``x`` as the elements arrive (gaps on ``x``
become gaps in the feed); the elements are stored for the later rounds in ``split`` vector
buffers (one per group, each holding the batch: ``vector_depth`` words, one read and one
write port), so a split round reads ``s`` elements per cycle. Results leave on ``o``: one
beat per PE position and stream, PE 0's first, ``last`` on the tail's; a beat carries
``chains`` lanes (chain ``c``'s sum in lane ``c``), in a split round the ``lanes`` folded
sums in lanes ``0 .. lanes - 1`` and zeros above. Every beat passes the fold adders (a
full round's sums plus ``-0``, which changes no value), so all beats have one latency.

Backpressure on ``o`` never loses data: the feeder keeps the two rules of
:class:`~nnrtl.hw.farnn.pe.FarnnPE` -- ``E`` idle cycles after each stream (and at least
``2 * chain_length`` cycles between the starts of two streams, the time a chain head takes
to hand out one stream's sums) and at most two streams outstanding (a *credit*: a stream
stops being outstanding when its last beat is taken on ``o``). Without gaps and
backpressure the run's cycle count is :func:`nnrtl.sim.golden.farnn.mvm.cycles`, exactly.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..arith.dsp_usage import adder_options, check_dsp_usage
from ..arith.float_add import FloatAdd
from ..arith.float_format import FloatFormat
from ..hierarchy import shared
from .chain import PEChain
from .pe import ChainWordKind, Latencies, _check_int, _check_stages, sideband, sum_delay


__all__ = ["MVMUnit", "result_delay"]


def result_delay(adder_stages, multiplier_stages, split):
    """Cycles from a stream's last element issued on ``x`` to its first result beat on
    ``o`` without stalls: two to the chain heads (``s1``, head register), the PEs'
    :func:`~nnrtl.hw.farnn.pe.sum_delay` and the fold's ``(split - 1) * adder_stages``
    (every beat passes it). Beat ``k`` of the stream follows ``2 k`` cycles later."""
    return 2 + sum_delay(adder_stages, multiplier_stages) + (split - 1) * adder_stages


class MVMUnit(Latencies, wiring.Component):
    """``chains`` PE chains, their vector feed, weight loader, fold and counters.

    Parameters
    ----------
    fmt : FloatFormat
    chains : int (keyword-only)
        Chains (``W``, default 16: a 512-bit weight port of fp32 lanes).
    chain_length : int (keyword-only)
        PEs per chain (``L``).
    weight_depth : int (keyword-only)
        Words per PE.
    adder_stages, multiplier_stages : int (keyword-only)
        Of the PEs' units and the fold adders (default 4 and 3).
    dsp_usage : str (keyword-only)
        Of the PEs (:class:`~nnrtl.hw.farnn.pe.FarnnPE`) and the fold adders:
        ``"some"`` (default), ``"max"`` or ``"none"`` (:mod:`~nnrtl.hw.arith.dsp_usage`).
    split : int (keyword-only)
        Cell splitting factor ``s`` of a split last round, dividing ``chains`` (default
        1: no splitting).
    vector_depth : int (keyword-only)
        Words of each vector buffer (``batch * n_in`` at most); default ``weight_depth``.
    counter_width : int (keyword-only)
        Bits of the cycle counters (default 32; they wrap).

    Attributes
    ----------
    w : In(stream.Signature({"data": ArrayLayout(fmt.width, chains), "last": 1}))
        The weight port; lane ``c`` feeds chain ``c``.
    x : In(stream.Signature({"data": fmt.width, "last": 1}))
        Vector elements, ``last`` on each vector's final element (else ``vector_error``).
    o : Out(stream.Signature({"data": ArrayLayout(fmt.width, chains), "last": 1}))
        Result beats (see the module docstring).
    n_in, rounds, batch, split_last : In
        Run configuration.
    base : In(range(weight_depth))
        Weight base address: the load writes and the run reads addresses ``base + a``
        (a PE holds a second matrix, the projection, from ``base``).
    busy : Out(1)
        A load or run is under way (or the accumulators fill after reset).
    load_error, vector_error : Out(1)
        Sticky: a weight stream of the wrong length; a misplaced ``x.last``.
    mac_cycles : Out(counter_width)
        Cycles in which elements were fed to the chains.
    load_cycles : Out(counter_width)
        Cycles spent loading weights (the restart cycle included).
    stall_cycles : Out(counter_width)
        Cycles in which a result beat waited on ``o`` (backpressure).
    pes : int
        ``chains * chain_length``: the rows of a full round.
    lanes : int
        ``chains // split``: the sums per beat of a split round.
    reduction_cycles, sum_delay : int
        Of its PEs (:class:`~nnrtl.hw.farnn.pe.Latencies`).
    result_delay : int
        :func:`result_delay`.

    Raises
    ------
    TypeError
        If a parameter is of the wrong type or out of range.
    ValueError
        If ``split`` does not divide ``chains``.

    Notes
    -----
    Weight load: a ``w`` beat while idle starts it. One cycle sends ``RESTART`` down every
    chain; then one beat per cycle, lane ``c`` feeding chain ``c`` (PE 0's block first), the
    addresses counted here and each block's last word marked. ``w.last`` must come on the
    block end of PE ``chain_length - 1`` exactly (block: ``rounds * n_in`` words, or
    ``(rounds - 1) * n_in + c`` with ``split_last``); otherwise ``load_error`` is set (sticky)
    and the load ends there.

    ``n_in``, ``rounds``, ``batch``, ``split_last`` and ``base`` are configuration inputs,
    read continuously: they must be stable from two cycles before a load or run until it
    ends. The host keeps the weights of a PE within ``weight_depth`` (from ``base``),
    ``batch * n_in <= vector_depth`` and, with ``split_last``, ``rounds >= 2`` and no chunk
    empty (``(s - 1) * c < n_in``): :func:`nnrtl.sim.golden.farnn.mvm.plan` chooses all of it.
    """

    def __init__(self, fmt, *, chains=16, chain_length, weight_depth, adder_stages=4,
                 multiplier_stages=3, split=1, vector_depth=None, counter_width=32,
                 dsp_usage="some"):
        if not isinstance(fmt, FloatFormat):
            raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
        _check_int("chains", chains, 1)
        _check_int("chain_length", chain_length, 1)
        _check_int("weight_depth", weight_depth, 1)
        _check_int("split", split, 1)
        if chains % split:
            raise ValueError(f"split ({split}) must divide chains ({chains})")
        if vector_depth is None:
            vector_depth = weight_depth
        _check_int("vector_depth", vector_depth, 1)
        _check_int("counter_width", counter_width, 1)
        _check_stages(adder_stages, multiplier_stages)
        self._fmt = fmt
        self._chains = chains
        self._chain_length = chain_length
        self._weight_depth = weight_depth
        self._adder_stages = adder_stages
        self._multiplier_stages = multiplier_stages
        check_dsp_usage(dsp_usage)
        self._dsp_usage = dsp_usage
        self._split = split
        self._vector_depth = vector_depth
        super().__init__({
            "w": In(stream.Signature(data.StructLayout({
                "data": data.ArrayLayout(fmt.width, chains), "last": 1}))),
            "x": In(stream.Signature(data.StructLayout({"data": fmt.width, "last": 1}))),
            "o": Out(stream.Signature(data.StructLayout({
                "data": data.ArrayLayout(fmt.width, chains), "last": 1}))),
            "n_in": In(range(vector_depth + 1)),
            "rounds": In(range(weight_depth + 1)),
            "batch": In(range(vector_depth + 1)),
            "split_last": In(1),
            "base": In(range(weight_depth)),
            "busy": Out(1),
            "load_error": Out(1),
            "vector_error": Out(1),
            "mac_cycles": Out(counter_width),
            "load_cycles": Out(counter_width),
            "stall_cycles": Out(counter_width),
        })

    fmt = property(lambda self: self._fmt)
    chains = property(lambda self: self._chains)
    chain_length = property(lambda self: self._chain_length)
    weight_depth = property(lambda self: self._weight_depth)
    adder_stages = property(lambda self: self._adder_stages)
    multiplier_stages = property(lambda self: self._multiplier_stages)
    dsp_usage = property(lambda self: self._dsp_usage)
    split = property(lambda self: self._split)
    vector_depth = property(lambda self: self._vector_depth)
    pes = property(lambda self: self._chains * self._chain_length)
    lanes = property(lambda self: self._chains // self._split)
    result_delay = property(lambda self: result_delay(self._adder_stages,
                                                      self._multiplier_stages, self._split))

    def elaborate(self, platform):
        m = Module()
        fmt, s, lanes = self._fmt, self._split, self.lanes
        length = self._chain_length
        e = self.reduction_cycles
        chains = [PEChain(fmt, chain_length=length, weight_depth=self._weight_depth,
                          adder_stages=self._adder_stages,
                          multiplier_stages=self._multiplier_stages,
                          dsp_usage=self._dsp_usage)
                  for _ in range(self._chains)]
        key = (fmt, length, self._weight_depth, self._adder_stages, self._multiplier_stages,
               self._dsp_usage)
        for c, chain in enumerate(chains):
            # one chain module for all (nnrtl.hw.hierarchy); only its ports are used here
            m.submodules[f"chain{c}"] = shared(chain, key=key)

        # -- configuration, registered (quasi-static) -----------------------------------
        chunk = Signal(range(self._vector_depth + 1))
        last_chunk = Signal.like(chunk)      # elements of the last group's chunk
        words = Signal(range(self._weight_depth * (self._vector_depth + 1) + 1))
        offsets = [Signal(range(self._vector_depth + 1), name=f"offset{g}") for g in range(s)]
        m.d.sync += [
            chunk.eq(self.n_in if s == 1 else (self.n_in + s - 1) // s),
            last_chunk.eq(self.n_in - (s - 1) * chunk),
            words.eq(self.rounds * self.n_in
                     - Mux(self.split_last & (self.rounds > 1), self.n_in - chunk, 0)),
        ]
        m.d.sync += [offsets[g].eq(g * chunk) for g in range(s)]

        # -- chain heads -----------------------------------------------------------------
        head_valid = [Signal(name=f"head_valid{g}") for g in range(s)]
        head_last = [Signal(name=f"head_last{g}") for g in range(s)]
        head_kind = Signal(ChainWordKind)
        head_addr = Signal(range(self._weight_depth))
        head_data = [Signal(fmt.width, name=f"head_data{c}") for c in range(self._chains)]
        for c, chain in enumerate(chains):
            g = c // lanes
            m.d.comb += [
                chain.i.valid.eq(head_valid[g]),
                chain.i.payload.kind.eq(head_kind),
                chain.i.payload.last.eq(head_last[g]),
                chain.i.payload.addr.eq(head_addr),
                chain.i.payload.data.eq(head_data[c]),
            ]
        m.d.sync += [v.eq(0) for v in head_valid]

        # -- vector buffers and the element pipeline (issue -> s1 -> head) -----------------
        buffers = []
        for g in range(s):
            memory = Memory(shape=fmt.width, depth=self._vector_depth, init=[])
            m.submodules[f"vectors{g}"] = memory
            buffers.append((memory.write_port(), memory.read_port()))
        issue = Signal()
        t = Signal.like(chunk)               # element of the stream
        r = Signal(range(self._weight_depth + 1))
        b = Signal(range(self._vector_depth + 1))
        vector_base = Signal(range(self._vector_depth + 1))
        round_base = Signal(range(self._weight_depth + 1))
        through = Signal()                   # round 0: the element comes from x
        split_round = Signal()
        stream_length = Signal.like(chunk)
        m.d.comb += [
            through.eq(r == 0),
            split_round.eq(self.split_last & (r != 0) & (r == self.rounds - 1)
                           if s > 1 else 0),
            stream_length.eq(Mux(split_round, chunk, self.n_in)),
        ]
        s1_valid = Signal()
        s1_through = Signal()
        s1_data = Signal(fmt.width)
        s1_addr = Signal.like(head_addr)
        s1_group_valid = [Signal(name=f"s1_group_valid{g}") for g in range(s)]
        s1_group_last = [Signal(name=f"s1_group_last{g}") for g in range(s)]
        m.d.sync += [
            s1_valid.eq(issue),
            s1_through.eq(through),
            s1_data.eq(self.x.payload.data),
            s1_addr.eq(self.base + round_base + t),
        ]
        for g in range(s):
            size = chunk if g < s - 1 else last_chunk
            m.d.sync += [
                s1_group_valid[g].eq(~split_round | (t < size)),
                s1_group_last[g].eq(Mux(split_round, t == size - 1, t == self.n_in - 1)),
            ]
            m.d.comb += [
                buffers[g][1].addr.eq(vector_base + Mux(split_round, offsets[g], 0) + t),
                buffers[g][1].en.eq(1),
            ]
        with m.If(s1_valid):
            m.d.sync += [
                head_kind.eq(ChainWordKind.ELEMENT),
                head_addr.eq(s1_addr),
            ]
            m.d.sync += [head_valid[g].eq(s1_group_valid[g]) for g in range(s)]
            m.d.sync += [head_last[g].eq(s1_group_last[g]) for g in range(s)]
            m.d.sync += [head_data[c].eq(Mux(s1_through, s1_data,
                                             buffers[c // lanes][1].data))
                         for c in range(self._chains)]

        # -- issue rules: reduction gap, stream spacing, two-stream credit ---------------
        quiet = Signal(range(e + 2), init=e + 1)       # cycles since a stream's last issue
        since = Signal(range(2 * length + 1), init=2 * length)  # since its first issue
        outstanding = Signal(range(3))
        may_start = (quiet == e + 1) & (since == 2 * length) & (outstanding < 2)
        may_issue = Signal()
        m.d.comb += may_issue.eq((t != 0) | may_start)
        first = issue & (t == 0)
        final = issue & (t == stream_length - 1)
        done = self.o.valid & self.o.ready & self.o.payload.last
        m.d.sync += outstanding.eq(outstanding + first - done)
        with m.If(final):
            m.d.sync += quiet.eq(1)
        with m.Elif(quiet != e + 1):
            m.d.sync += quiet.eq(quiet + 1)
        with m.If(first):
            m.d.sync += since.eq(1)
        with m.Elif(since != 2 * length):
            m.d.sync += since.eq(since + 1)

        # -- control ---------------------------------------------------------------------
        block = Signal(range(length))
        address = Signal.like(words)
        warmup = Signal(range(self._adder_stages + 3), init=self._adder_stages + 2)
        loading = Signal()
        vector_last_wrong = Signal()

        with m.FSM(name="control"):
            with m.State("Wait for the accumulators to fill"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += warmup.eq(warmup - 1)
                with m.If(warmup == 0):
                    m.next = "Idle"
            with m.State("Idle"):
                m.d.sync += [t.eq(0), b.eq(0), r.eq(0), vector_base.eq(0),
                             round_base.eq(0), block.eq(0), address.eq(0)]
                with m.If(self.w.valid):
                    m.next = "Restart the load"
                with m.Elif(self.x.valid):
                    m.next = "Run the rounds"
            with m.State("Restart the load"):
                m.d.comb += [self.busy.eq(1), loading.eq(1)]
                m.d.sync += [v.eq(1) for v in head_valid]
                m.d.sync += head_kind.eq(ChainWordKind.RESTART)
                m.next = "Load the weights"
            with m.State("Load the weights"):
                m.d.comb += [self.busy.eq(1), loading.eq(1), self.w.ready.eq(1)]
                block_end = address == words - 1
                final_beat = block_end & (block == length - 1)
                with m.If(self.w.valid):
                    m.d.sync += [v.eq(1) for v in head_valid]
                    m.d.sync += [last.eq(block_end) for last in head_last]
                    m.d.sync += [head_kind.eq(ChainWordKind.WEIGHT),
                                 head_addr.eq(self.base + address)]
                    m.d.sync += [head_data[c].eq(self.w.payload.data[c])
                                 for c in range(self._chains)]
                    with m.If(block_end):
                        m.d.sync += [address.eq(0), block.eq(block + 1)]
                    with m.Else():
                        m.d.sync += address.eq(address + 1)
                    with m.If(self.w.payload.last | final_beat):
                        with m.If(~(self.w.payload.last & final_beat)):
                            m.d.sync += self.load_error.eq(1)
                        m.next = "Idle"
            with m.State("Run the rounds"):
                m.d.comb += self.busy.eq(1)
                with m.If(through):
                    m.d.comb += [self.x.ready.eq(may_issue),
                                 issue.eq(may_issue & self.x.valid)]
                    with m.If(issue):
                        m.d.comb += vector_last_wrong.eq(self.x.payload.last != final)
                        for write, _read in buffers:
                            m.d.comb += [write.en.eq(1), write.addr.eq(vector_base + t),
                                         write.data.eq(self.x.payload.data)]
                with m.Else():
                    m.d.comb += issue.eq(may_issue)
                with m.If(final):
                    m.d.sync += t.eq(0)
                    with m.If(b == self.batch - 1):
                        m.d.sync += [b.eq(0), vector_base.eq(0), r.eq(r + 1),
                                     round_base.eq(round_base + self.n_in)]
                        with m.If(r == self.rounds - 1):
                            m.next = "Wait for the sums"
                    with m.Else():
                        m.d.sync += [b.eq(b + 1), vector_base.eq(vector_base + self.n_in)]
                with m.Elif(issue):
                    m.d.sync += t.eq(t + 1)
            with m.State("Wait for the sums"):
                m.d.comb += self.busy.eq(1)
                with m.If((outstanding == 0) & ~s1_valid):
                    m.next = "Idle"
        with m.If(vector_last_wrong):
            m.d.sync += self.vector_error.eq(1)

        # -- results: join the chain heads, fold the groups ------------------------------
        heads = [chain.o for chain in chains]
        joined = 1
        for head in heads:
            joined = joined & head.valid
        if s == 1:
            m.d.comb += [
                self.o.valid.eq(joined),
                self.o.payload.last.eq(heads[0].payload.last),
            ]
            for c, head in enumerate(heads):
                m.d.comb += [
                    self.o.payload.data[c].eq(head.payload.data),
                    head.ready.eq(self.o.ready & joined),
                ]
        else:
            # Every beat enters the fold at once; the split flag, the upper groups' sums
            # and ``last`` travel beside the adders (sideband registers on their enable).
            # The flag of the beat entering: its stream's, queued from the stream's first
            # issue until its last beat enters (at most two streams are outstanding).
            queued = Signal(range(3))
            queue = [Signal(name=f"split_queue{k}") for k in range(2)]
            beat_split = queue[0]
            entered = Signal()               # the last beat of a stream enters the fold
            with m.If(first & entered):
                with m.If(queued == 1):
                    m.d.sync += queue[0].eq(split_round)
                with m.Else():
                    m.d.sync += [queue[0].eq(queue[1]), queue[1].eq(split_round)]
            with m.Elif(first):
                m.d.sync += queued.eq(queued + 1)
                with m.If(queued == 0):
                    m.d.sync += queue[0].eq(split_round)
                with m.Else():
                    m.d.sync += queue[1].eq(split_round)
            with m.Elif(entered):
                m.d.sync += [queued.eq(queued - 1), queue[0].eq(queue[1])]
            valid = joined
            sums = [head.payload.data for head in heads[:lanes]]
            upper = [head.payload.data for head in heads[lanes:]]
            flag = beat_split
            last = heads[0].payload.last
            readies = [head.ready for head in heads]
            negative_zero = 1 << (fmt.width - 1)
            for g in range(1, s):
                adders = [FloatAdd(fmt, stages=self._adder_stages,
                                   **adder_options(self._dsp_usage))
                          for _ in range(lanes)]
                for j, adder in enumerate(adders):
                    m.submodules[f"fold{g}_{j}"] = adder
                    m.d.comb += [
                        adder.i.valid.eq(valid),
                        adder.i.payload.a.eq(sums[j]),
                        adder.i.payload.b.eq(Mux(flag, upper[(g - 1) * lanes + j],
                                                 negative_zero)),
                        adder.i.payload.subtract.eq(0),
                    ]
                for ready in readies:
                    m.d.comb += ready.eq(adders[0].i.ready & valid)
                if g == 1:
                    m.d.comb += entered.eq(valid & adders[0].i.ready & last)
                upper = [sideband(m, adders[0], value, f"fold{g}_upper{k}")
                         for k, value in enumerate(upper)]
                flag = sideband(m, adders[0], flag, f"fold{g}_split")
                last = sideband(m, adders[0], last, f"fold{g}_last")
                valid = adders[0].o.valid
                sums = [adder.o.payload for adder in adders]
                readies = [adder.o.ready for adder in adders]
            m.d.comb += [
                self.o.valid.eq(valid),
                self.o.payload.last.eq(last),
            ]
            for c in range(self._chains):
                value = sums[c] if c < lanes else Mux(flag, 0, upper[c - lanes])
                m.d.comb += self.o.payload.data[c].eq(value)
            for ready in readies:
                m.d.comb += ready.eq(self.o.ready)

        # -- counters --------------------------------------------------------------------
        with m.If(issue):
            m.d.sync += self.mac_cycles.eq(self.mac_cycles + 1)
        with m.If(loading):
            m.d.sync += self.load_cycles.eq(self.load_cycles + 1)
        with m.If(self.o.valid & ~self.o.ready):
            m.d.sync += self.stall_cycles.eq(self.stall_cycles + 1)
        return m

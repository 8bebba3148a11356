"""Performance model of the SBE engine (its resources: :mod:`.resources`).

Two layers:

* The paper's closed forms ("Performance Model", eqs. 1-6; "Resource Modelling", eq. 7),
  as functions of the paper's symbols, and :func:`paper_performance` applying them to an
  :class:`~nnrtl.hw.sbe.SbeConfig`. ``P`` is in multiply-accumulates per cycle (the
  paper's ``M_op`` counts the matrix's multiply-accumulates); throughput is ``2 P f``.
* :func:`predict` / :func:`model_cycles`: a timeline of the schedule the RTL follows,
  exact in cycles under its assumptions, which adds what the closed forms leave out -- the
  pipeline latency before a step's h can be used (the "about 10% longer" final block of
  case 1), the post-processing drain, row passes when ``pes < 4 * hidden_size``, several
  columns per cycle when ``pes > 4 * hidden_size``, the exposed first load, a last partial
  batch and several layers. Without latency it reduces to the closed forms
  (:func:`steady_state_performance`). The schedule and its assumptions: the Notes of
  :func:`predict`.
"""

import bisect
import dataclasses
import math

import numpy as np

from ...boards.capacity import BRAM36_BITS
from ...hw.sbe.config import SbeConfig

__all__ = [
    "balanced_batch", "case1_performance", "case2_performance", "case3_performance",
    "bram_eq7", "paper_performance", "steady_state_performance", "Prediction", "predict",
    "model_cycles", "run_cycles", "lower_bound_cycles", "gops",
]


# -- The paper's equations ---------------------------------------------------------------

def balanced_batch(pes, bus_weights):
    """Eq. 1, the batch at which computing a block takes as long as loading it.

    ``M_op B / (N_b N_pe) >= M_op / (N_b N_t)  =>  B >= N_pe / N_t``
    """
    return pes / bus_weights


def case1_performance(pes, bus_weights, batch):
    """Eqs. 2 and 3, case 1 (the hidden weights in one block), in MACs per cycle.

    ``P = M_op B / (M_op B / N_pe) = N_pe``  when ``B >= N_pe / N_t``  (2)

    ``P = M_op B / (M_op / N_t) = B N_t``  when ``B < N_pe / N_t``  (3)
    """
    return pes if batch >= balanced_batch(pes, bus_weights) else batch * bus_weights


def case2_performance(pes, blocks):
    """Eq. 4, case 2 (the hidden weights in two blocks) at ``B = N_pe / N_t``.

    ``P = M_op B / (M_op B / N_pe + 2 M_op B / (N_b N_pe)) = N_pe N_b / (N_b + 2)``
    """
    return pes * blocks / (blocks + 2)


def case3_performance(pes, bus_weights, batch, alpha):
    """Eqs. 5 and 6, case 3 (the hidden weights in more than two blocks); ``alpha`` is the
    share of the weights reused by the whole batch.

    ``p = N_pe N_t / (alpha N_t + (1 - alpha) N_pe)``  when ``B >= N_pe / N_t``  (5)

    ``p = B N_t / (alpha + (1 - alpha) B)``  when ``B <= N_pe / N_t``  (6)
    """
    if batch >= balanced_batch(pes, bus_weights):
        return pes * bus_weights / (alpha * bus_weights + (1 - alpha) * pes)
    return batch * bus_weights / (alpha + (1 - alpha) * batch)


def bram_eq7(input_size, hidden_size, batch, blocks, pes, *, data_width=16,
             bram_bits=BRAM36_BITS, bb_fifo=True):
    """Eq. 7, block RAMs of the double buffers and BB-FIFOs.

    ``BRAM_Num = ((L_x + L_h) (4 L_h + B) DW 2 / N_b + B N_pe DW) / BRAM_size``

    ``bb_fifo=False`` drops the ``B N_pe DW`` term, as the paper does for BB-FIFOs in LUTRAM.
    """
    bits = (input_size + hidden_size) * (4 * hidden_size + batch) * data_width * 2 / blocks
    if bb_fifo:
        bits += batch * pes * data_width
    return bits / bram_bits


def paper_performance(config, layer=0):
    """The paper's ``P`` (MACs per cycle) for one layer of ``config``: eq. 2/3, 4 or 5/6 by
    its case (eq. 4 as the paper states it, whatever ``B``), with ``N_pe = pes``,
    ``N_t = bus_weights``, ``B = batch``, ``N_b = blocks`` and ``alpha`` of
    :class:`~nnrtl.hw.sbe.LayerShape`."""
    shape = config.layer(layer)
    if shape.case == 1:
        return case1_performance(config.pes, config.bus_weights, config.batch)
    if shape.case == 2:
        return case2_performance(config.pes, config.blocks)
    return case3_performance(config.pes, config.bus_weights, config.batch, shape.alpha)


def steady_state_performance(config, layer=0):
    """MACs per cycle of one full batch of the schedule in steady state, without pipeline
    latency or drain. It equals eqs. 2, 3, 5 and 6 in their regimes and eq. 4 at ``B =
    N_pe / N_t``; for case 2 at other batches it follows the same timeline: the x blocks
    pipelined, then both h blocks loaded (two exposed loads) and used. (The timeline of
    :func:`predict`, like the RTL, starts the first h block's first pass while the second
    block loads: in case 2 it is up to ``block_columns / columns_per_cycle`` cycles a
    batch faster than this, 0.09% for the ZC706 design.)
    """
    shape = config.layer(layer)
    steps = config.passes * shape.block_columns // config.columns_per_cycle
    compute = config.batch * steps          # one block for the whole batch
    load = math.ceil(config.rows * shape.block_columns / config.bus_weights)
    x_blocks, h_blocks = shape.first_hidden_block, shape.hidden_blocks
    if config.weights_resident:
        cycles = config.blocks * compute
    elif shape.case == 1:
        cycles = config.blocks * max(compute, load)
    elif shape.case == 2:
        cycles = x_blocks * max(compute, load) + 2 * load + 2 * compute
    else:
        cycles = x_blocks * max(compute, load) + config.batch * h_blocks * max(load, steps)
    return config.batch * config.rows * shape.columns / cycles


def gops(macs, cycles, clock_hz):
    """Throughput in GOPS, ``2 * macs * clock_hz / cycles / 1e9``."""
    return 2 * macs * clock_hz / cycles / 1e9


# -- The schedule's timeline -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Prediction:
    """What :func:`predict` returns.

    Attributes
    ----------
    cycles : int
        From the first load request to the last hidden element of the last layer.
    useful_macs : int
        ``seq_len * config.macs_per_step``: the model's, padding not counted.
    padding_macs : int
        ``seq_len * config.padding_macs_per_step``: what the engine issues for the zero
        rows and columns padding adds (:attr:`~nnrtl.hw.sbe.SbeConfig.padded`); its cost
        is in ``cycles``.
    busy_cycles : int
        Cycles the PE array issues a column step.
    weight_words : int
        Weights moved by the DMA.
    utilization : float
        ``useful_macs / (pes * cycles)``.
    """

    cycles: int
    useful_macs: int
    padding_macs: int
    busy_cycles: int
    weight_words: int
    utilization: float

    def gops(self, clock_hz):
        """Throughput at ``clock_hz``: ``2 * useful_macs * clock_hz / cycles``, in GOPS."""
        return gops(self.useful_macs, self.cycles, clock_hz)


_PAST = -(1 << 40)    # "long ago": the ready time of h_{-1} = 0

#: Whether the timeline skips ahead once it repeats itself (the tests switch it off to
#: compare the closed form with the plain step-by-step timeline).
_EXTRAPOLATE = True


class _Timeline:
    """Times of the DMA, the two weight buffers, the PE array and the post-processing.

    Everything that happens is a ``max`` of these times plus constants, and only the PE
    array's time is compared with the inputs' and the h's, so two states that agree
    relative to the PE array's time (:meth:`key`) have the same future, shifted. A run
    repeats itself after a few batches (and steps inside a batch): :func:`_run_layer` and
    :func:`_run_steps` find the repetition and jump over every whole repetition left.
    """

    _HELD = 1 << 62               # a buffer half in use has no release time yet

    def __init__(self, config, latency):
        self.config = config
        self.latency = latency
        self.dma = 0                  # cycle the DMA is next free
        self.buffers = [0, 0]         # cycle each buffer half is next free
        self.next_buffer = 0
        self.engine = 0               # cycle the PE array is next free
        self.handover = _PAST         # cycle of the last hand-over to post-processing
        self.busy = 0
        self.words = 0
        # DMA and buffer times more than two of the longest loads before the PE array's
        # time cannot delay it any more (see key).
        self.horizon = 2 * max(math.ceil(config.rows * shape.block_columns
                                         / config.bus_weights)
                               for shape in config.layer_shapes)

    def load(self, words):
        """Load a block into the next buffer half; returns the half and the cycle the
        load ends."""
        half = self.next_buffer
        self.next_buffer ^= 1
        start = max(self.dma, self.buffers[half])
        self.dma = start + math.ceil(words / self.config.bus_weights)
        self.buffers[half] = self._HELD
        self.words += words
        return half, self.dma

    def release(self, half):
        self.buffers[half] = self.engine

    def key(self, ready, dma=True):
        """The state relative to the PE array's time ``now`` (with or without the DMA and
        the buffers): from equal keys, equal futures, shifted by the difference of their
        ``now``. Times that can no longer matter are clamped: an h ready before ``now``
        (every use is a ``max`` with a later PE array time), a hand-over more than a drain
        before it, and DMA and free-buffer times more than :attr:`horizon` before it (a
        load starts at the later of the two, the PE array waits for its end, and only the
        next two loads can start before a buffer half is released at or after ``now``:
        each ends at or before ``now`` either way, as does the DMA after them)."""
        now = self.engine
        key = (max(self.handover - now, -self.config.drain_cycles),
               np.maximum(ready - now, 0).tobytes())
        if dma:
            floor = -self.horizon
            key += (max(self.dma - now, floor), self.next_buffer,
                    tuple(None if b == self._HELD else max(b - now, floor)
                          for b in self.buffers))
        return key

    def marks(self):
        return self.engine, self.busy, self.words

    def repeat(self, marks, times, dma=True):
        """Repeat ``times`` more times what happened since ``marks``; returns the cycles
        it took once."""
        period = self.engine - marks[0]
        self.busy += (self.busy - marks[1]) * times
        self.words += (self.words - marks[2]) * times
        self.engine += period * times
        self.handover += period * times
        if dma:
            self.dma += period * times
            self.buffers = [b + period * times if b != self._HELD else b
                            for b in self.buffers]
        return period


class _Sequence:
    """Integers stored as runs: a run of values given one by one, or ``values`` repeated
    ``times`` times, ``period`` added at each repetition."""

    def __init__(self):
        self._starts, self._runs = [], []     # first index, (values, period or None, times)
        self.length = 0
        self.max = _PAST

    def append(self, value):
        if not self._runs or self._runs[-1][1] is not None:
            self._starts.append(self.length)
            self._runs.append(([], None, 1))
        self._runs[-1][0].append(value)
        self.length += 1
        self.max = max(self.max, value)

    def repeat(self, values, period, times):
        if times:
            self._starts.append(self.length)
            self._runs.append((list(values), period, times))
            self.length += len(values) * times
            self.max = max(self.max, max(values) + max(period, 0) * (times - 1))

    def __getitem__(self, index):
        if not 0 <= index < self.length:
            raise IndexError(index)
        run = bisect.bisect_right(self._starts, index) - 1
        values, period, _ = self._runs[run]
        repetition, offset = divmod(index - self._starts[run], len(values))
        return values[offset] + (period or 0) * repetition

    @property
    def last(self):
        return self[self.length - 1]


class _Layer:
    """Column-step offsets of the h columns of one layer's h blocks."""

    def __init__(self, config, shape):
        self.shape = shape
        k = config.columns_per_cycle
        self.block_steps = shape.block_columns // k
        region = shape.x_columns_in_hidden_blocks + np.arange(shape.hidden_size)
        self.block_of = region // shape.block_columns          # h block of each h column
        self.step_in_block = (region % shape.block_columns) // k
        units = config.units_per_pass
        unit = np.arange(shape.hidden_size)
        self.group = unit // units                             # pass yielding each h unit
        self.offset = (unit % units) // config.post_units      # its place in the drain
        self.block_words = config.rows * shape.block_columns
        self.merged = shape.hidden_blocks <= 2


def _run_pass(tl, lay, first, count, ready, next_ready, p, final, loaded=()):
    """One pass of one step over ``count`` h blocks from h block ``first``, starting when
    the PE array is free; sets the ready times of the pass's h units if ``final``.
    ``loaded`` is the cycle each of the ``count`` blocks is loaded, if a column step may
    be issued before it (merged blocks: a pass starts on the first block while the
    second is still loading)."""
    steps = count * lay.block_steps
    mask = (lay.block_of >= first) & (lay.block_of < first + count)
    end = tl.engine + steps
    for index, cycle in enumerate(loaded):
        end = max(end, cycle + steps - index * lay.block_steps)
    if mask.any():
        position = (lay.block_of[mask] - first) * lay.block_steps + lay.step_in_block[mask]
        end = max(end, int((ready[mask] + steps - position).max()))
    if final:
        end = max(end, tl.handover + tl.config.drain_cycles)
        tl.handover = end
        units = lay.group == p
        next_ready[units] = end + tl.latency + lay.offset[units]
    tl.busy += steps
    tl.engine = end


def _run_step(tl, lay, ready, loaded=()):
    """One time step over the h blocks; returns the ready times of its h. ``loaded``: the
    cycles the merged h blocks are loaded."""
    config, shape = tl.config, lay.shape
    next_ready = ready.copy()
    if lay.merged:
        for p in range(config.passes):
            _run_pass(tl, lay, 0, shape.hidden_blocks, ready, next_ready, p, True, loaded)
        return next_ready
    for block in range(shape.hidden_blocks):
        half, loaded = tl.load(lay.block_words)
        tl.engine = max(tl.engine, loaded)
        final = block == shape.hidden_blocks - 1
        for p in range(config.passes):
            _run_pass(tl, lay, block, 1, ready, next_ready, p, final)
        tl.release(half)
    return next_ready


def _run_steps(tl, lay, steps, ready, loaded):
    """``steps`` time steps over the h blocks; returns the h ready times of the last.
    Once the state relative to the PE array (:meth:`_Timeline.key`) repeats one it had
    ``c`` steps before, every whole run of ``c`` steps left repeats those ``c``."""
    dma = not lay.merged                  # case 3 loads blocks inside every step
    seen = {} if _EXTRAPOLATE else None
    step = 0
    while step < steps:
        if seen is not None:
            key = tl.key(ready, dma)
            if key in seen:
                first, marks = seen.pop(key)
                cycle = step - first
                times = (steps - step) // cycle
                period = tl.repeat(marks, times, dma)
                ready = ready + period * times
                step += cycle * times
                seen = None               # fewer than ``cycle`` steps are left
                continue
            seen[key] = (step, tl.marks())
        ready = _run_step(tl, lay, ready, loaded)
        step += 1
    return ready


def _run_batch(tl, lay, steps, ready, inputs_ready, resident):
    """One batch of ``steps`` steps; returns the h ready times of its last step.
    ``resident`` is the cycle each block's load ended if the weights are resident, else
    ``None``."""
    config, shape = tl.config, lay.shape
    tl.engine = max(tl.engine, inputs_ready)
    work = steps * config.passes * lay.block_steps
    for block in range(shape.first_hidden_block):
        half = None
        if resident:
            tl.engine = max(tl.engine, resident[block])
        else:
            half, loaded = tl.load(lay.block_words)
            tl.engine = max(tl.engine, loaded)
        tl.engine += work
        tl.busy += work
        if half is not None:
            tl.release(half)
    halves, loaded = [], []
    if resident:
        loaded = resident[shape.first_hidden_block:]
    elif lay.merged:
        for _ in range(shape.hidden_blocks):
            half, end = tl.load(lay.block_words)
            halves.append(half)
            loaded.append(end)
    ready = _run_steps(tl, lay, steps, ready, loaded)
    for half in halves:
        tl.release(half)
    return ready


def predict(config, *, pipeline_latency=None, seq_len=None):
    """Cycles and utilisation of ``seq_len`` steps through every layer.

    Parameters
    ----------
    config : SbeConfig
    pipeline_latency : int, optional
        Cycles from a pass's last column step to its first hidden unit being usable
        (default ``config.pipeline_latency``); 0 gives the paper's stall-free timing.
    seq_len : int, optional
        Steps to model (default ``config.seq_len``); the last batch may be partial.

    Returns
    -------
    Prediction

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`SbeConfig` or a keyword is not a non-negative
        (``seq_len``: positive) integer.

    Notes
    -----
    The schedule, per layer and batch of ``n <= batch`` consecutive steps:

    1. Blocks holding only x columns (``0 .. first_hidden_block - 1``), in order: each is
       loaded (``ceil(4 H c / Nt)`` cycles, ``c`` its columns) into the free half of the double
       buffer, then used for the ``n`` steps, step after step, pass after pass, ``c / k``
       column steps each (``k`` = columns per cycle). Loads run ahead as far as the two
       buffers allow.
    2. Blocks holding h columns. One or two (cases 1, 2): both are loaded (the second while
       the first is used: a column step waits only for its own block), then each step runs,
       pass by pass, over their columns -- x columns first, then h columns, which wait for the
       previous step's h. More than two (case 3): for each step, every such block is loaded and
       used for that step only.
    3. Pass ``p``'s last column step in the final block hands hidden units ``p * U .. (p + 1)
       * U - 1`` (``U = rows_per_pass / 4``) to the ``post_units`` units, which take
       ``ceil(U / post_units)`` cycles (the next hand-over waits for them); unit ``p * U + u``
       is usable by a column step issued ``latency + u // post_units`` cycles after the cycle
       that follows the hand-over step. Column ``j`` of the h part needs unit ``j`` of the
       previous step.

    Weights are resident (loaded once per layer) when ``blocks <= 2``. The x inputs, h outputs
    and biases travel on their own streams and are assumed never to stall the engine (the one
    case where the RTL, with gapless streams, runs over :func:`run_cycles`: a batch's x --
    ``n * columns / columns_per_cycle`` beats per x block -- taking longer to stream than the
    weights before them; the engine counts those cycles in ``input_wait_cycles`` and runs over
    the model by at most that many, ``tests/sbe/hw/test_sbe_engine.py``); layers
    run one after another, a batch of layer ``l > 0`` starting once the h of its steps in layer
    ``l - 1`` are all usable. ``tests/sbe/gen/test_sbe_perf.py`` checks the timeline against an
    independent cycle-by-cycle simulation of these rules.

    The cost does not depend on the sequence length. Every time in the timeline is a ``max``
    of others plus constants, so once the state at a batch's start, taken relative to the PE
    array's time, repeats the state ``c`` batches before, every later stretch of ``c`` full
    batches repeats that one, shifted by the cycles it took: the timeline runs the first
    batches until that happens (a few, independent of the length), adds the whole repetitions
    left in closed form, and runs the rest and the last, partial batch; steps inside a batch
    likewise. The result is exactly that of the step-by-step timeline, which the tests keep
    (``_EXTRAPOLATE = False``) and compare with it.
    """
    if not isinstance(config, SbeConfig):
        raise TypeError(f"config must be an SbeConfig, not {config!r}")
    latency = config.pipeline_latency if pipeline_latency is None else pipeline_latency
    if not isinstance(latency, int) or isinstance(latency, bool) or latency < 0:
        raise TypeError(f"pipeline_latency must be a non-negative integer, not {latency!r}")
    seq_len = config.seq_len if seq_len is None else seq_len
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len <= 0:
        raise TypeError(f"seq_len must be a positive integer, not {seq_len!r}")

    tl = _Timeline(config, latency)
    done = None                           # the cycle each batch's x are all ready
    for shape in config.layer_shapes:
        done = _run_layer(tl, config, shape, seq_len, done)
    cycles = done.last
    macs = seq_len * config.macs_per_step
    return Prediction(cycles=cycles, useful_macs=macs,
                      padding_macs=seq_len * config.padding_macs_per_step, busy_cycles=tl.busy,
                      weight_words=tl.words, utilization=macs / (config.pes * cycles))


def _run_layer(tl, config, shape, steps, inputs):
    """One layer over ``steps`` steps in batches on timeline ``tl``; ``inputs`` is the
    :class:`_Sequence` of the cycles each batch's x are ready (``None``: at once).
    Returns the :class:`_Sequence` of the cycles each batch's last h is usable.

    The full batches run until the state at a batch's start, relative to the PE array
    (:meth:`_Timeline.key`), repeats one ``c`` batches before and every input is ready;
    then every whole run of ``c`` batches left repeats those ``c``, shifted by the
    cycles they took. The batches left over and the last, partial batch run as usual.
    The cost is independent of ``steps``."""
    lay = _Layer(config, shape)
    halves = [tl.load(lay.block_words) for _ in range(config.blocks)] \
        if config.weights_resident else []
    resident = [loaded for _, loaded in halves] or None
    ready = np.full(shape.hidden_size, _PAST, dtype=np.int64)
    full, rest = divmod(steps, config.batch)
    done = _Sequence()
    seen = {} if _EXTRAPOLATE else None
    index = 0
    while index < full:
        if seen is not None and (inputs is None or tl.engine >= inputs.max):
            key = tl.key(ready)
            if key in seen:
                first, marks = seen.pop(key)
                cycle = index - first
                times = (full - index) // cycle
                period = tl.repeat(marks, times)
                ready = ready + period * times
                done.repeat([done[i] + period for i in range(first, index)], period, times)
                index += cycle * times
                seen = None               # fewer than ``cycle`` full batches are left
                continue
            seen[key] = (index, tl.marks())
        ready = _run_batch(tl, lay, config.batch, ready,
                           0 if inputs is None else inputs[index], resident)
        done.append(int(ready.max()))
        index += 1
    if rest:
        ready = _run_batch(tl, lay, rest, ready, 0 if inputs is None else inputs[full],
                           resident)
        done.append(int(ready.max()))
    for half, _ in halves:
        tl.release(half)
    return done


def run_cycles(config, layer, steps):
    """Predicted cycles of one run of the engine (:class:`~nnrtl.hw.sbe.SbeEngine`): layer
    ``layer`` over ``steps`` steps from an idle engine, the header of the run (one beat per
    hidden unit and field) on the weight stream before the first block, from the start
    command to the last hidden value. Equal to the RTL's ``cycles`` counter with gapless
    streams, unless the x stream falls behind (see the module's docstring). The cost is
    independent of ``steps``."""
    if not isinstance(config, SbeConfig):
        raise TypeError(f"config must be an SbeConfig, not {config!r}")
    shape = config.layer(layer)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps <= 0:
        raise TypeError(f"steps must be a positive integer, not {steps!r}")
    tl = _Timeline(config, config.pipeline_latency)
    tl.dma = config.header_beats
    return _run_layer(tl, config, shape, steps, None).last + RUN_OVERHEAD


#: Cycles a run adds to the schedule: the start command reaches the loaders and the
#: controller one cycle after it is written, and the count ends with the last push.
RUN_OVERHEAD = 1


def model_cycles(config, *, pipeline_latency=None, seq_len=None):
    """Predicted cycles of ``seq_len`` steps over all layers (see :func:`predict`)."""
    return predict(config, pipeline_latency=pipeline_latency, seq_len=seq_len).cycles


def lower_bound_cycles(config, *, seq_len=None):
    """A cheap lower bound of :func:`model_cycles`: the larger of the PE array's column
    steps and the DMA's load cycles (the blocks of
    :meth:`~nnrtl.hw.sbe.SbeConfig.block_schedule`, counted without listing them), which
    each run one at a time."""
    seq_len = config.seq_len if seq_len is None else seq_len
    batches = -(-seq_len // config.batch)
    compute = load = 0
    for shape in config.layer_shapes:
        compute += seq_len * config.passes * shape.columns // config.columns_per_cycle
        block = math.ceil(config.rows * shape.block_columns / config.bus_weights)
        if config.weights_resident:
            count = config.blocks
        else:
            count = batches * shape.first_hidden_block + shape.hidden_blocks * (
                batches if shape.case < 3 else seq_len)
        load += block * count
    return max(compute, load)

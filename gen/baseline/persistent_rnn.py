"""A persistent RNN layer on a GPU (Diamos et al., "Persistent RNNs: Stashing Recurrent
Weights On-Chip", ICML 2016): the recurrent weights are loaded into the threads' registers
once and stay there for every time step; a grid-wide barrier separates the steps.

The forward pass of an LSTM (gate blocks i, f, g, o) or GRU (r, z, n, PyTorch's form)
layer, fp32, written with numba-cuda (the backward pass: :mod:`.persistent_backward`). The input projection of all steps,
``x_t W_ih^T + b``, is one matrix product before the kernel (:func:`input_projection`);
the kernel does the recurrent part:

* **Partition.** Block ``j`` owns ``units`` hidden units (the last block fewer); a unit's
  ``G`` weight rows (``G`` gates) are cut into ``slices`` runs of ``K = ceil(H /
  slices)`` columns, one per thread: thread ``(u, s)`` holds ``R[g H + unit, s K : (s +
  1) K]`` for every gate ``g`` in a local array of ``G K`` floats (registers where the
  compiler keeps them there). :func:`plan` chooses ``units`` and ``slices``.
* **A step.** The batch is taken ``chunk`` elements a pass (all of it when its partial
  sums fit shared memory). Every thread forms its ``G x chunk`` partial dot products
  with ``h_{t-1}`` (read from global memory, where the previous step wrote it), writes
  them to shared memory; after the block's barrier, thread ``(u, s)`` sums the slices of
  its unit for the pass's elements ``s``, ``s + slices``, ..., adds the input
  projection, applies the cell and writes ``h_t`` (and keeps ``c_t``); after the last
  pass, the grid's barrier
  (``cuda.cg.this_grid().sync()``, a cooperative launch). ``h`` is double-buffered by
  the step's parity, so no block reads a value being overwritten.

numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) runs the same kernel on the CPU but
one block at a time, so a grid barrier between several blocks cannot be simulated: there
the grid is one block (:func:`plan` with ``simulator=True``), and the partition of rows
over several blocks is checked by :func:`schedule_model`, a numpy model of the same
schedule (the same slices, the same order of the sums).
"""

import dataclasses
import functools
import math
import time

import numpy as np

__all__ = ["GATES", "Plan", "plan", "input_projection", "schedule_model", "forward",
           "torch_module", "torch_forward", "layer_flops"]

#: Gate blocks per cell.
GATES = {"lstm": 4, "gru": 3}

#: The most floats a thread keeps of the weights (registers: 255 32-bit registers a
#: thread, the rest for the loop).
MAX_WEIGHTS_PER_THREAD = 160

#: Threads a block may have.
MAX_THREADS = 1024

#: Floats of a block's shared memory for the partial sums (48 KB, the static limit).
MAX_SHARED_FLOATS = 12288


@dataclasses.dataclass(frozen=True)
class Plan:
    """How the layer's rows are spread: ``blocks`` blocks of ``units`` hidden units, each
    unit's rows cut into ``slices`` runs of ``columns`` columns (one thread each), the
    batch taken ``chunk`` elements a pass through shared memory."""

    cell: str
    hidden_size: int
    batch: int
    units: int
    slices: int
    chunk: int = 0

    def __post_init__(self):
        if not self.chunk:
            object.__setattr__(self, "chunk", self.batch)

    @property
    def passes(self):
        """Passes through shared memory a step."""
        return -(-self.batch // self.chunk)

    @property
    def gates(self):
        return GATES[self.cell]

    @property
    def columns(self):
        return -(-self.hidden_size // self.slices)

    @property
    def blocks(self):
        return -(-self.hidden_size // self.units)

    @property
    def threads(self):
        return self.units * self.slices

    @property
    def weights_per_thread(self):
        return self.gates * self.columns


def plan(cell, hidden_size, batch, *, blocks=None, simulator=False,
         shared_floats=MAX_SHARED_FLOATS):
    """The :class:`Plan` of a layer: each thread keeps at most
    :data:`MAX_WEIGHTS_PER_THREAD` weights, a block has at most :data:`MAX_THREADS`
    threads and ``shared_floats`` partial sums. A unit has ``batch`` slices (one thread
    a batch element for the cell) where they fit, else as few as its weights need, and
    then the batch goes through shared memory in the fewest passes of equal ``chunk``
    elements. ``blocks`` puts ``ceil(hidden_size / blocks)`` units in a block (their
    shared memory may then take the batch in more passes); by default a block has as many
    units as fit at the fewest passes. With ``simulator`` the grid is one block (see the
    module).

    Raises
    ------
    ValueError
        If the sizes are not positive integers, the cell is unknown, or the layer cannot
        be spread within those limits (one block with ``simulator``).
    """
    if cell not in GATES:
        raise ValueError(f"cell must be one of {', '.join(GATES)}, not {cell!r}")
    for name, value in (("hidden_size", hidden_size), ("batch", batch),
                        ("shared_floats", shared_floats)):
        _check(value, name)
    gates = GATES[cell]
    # a thread keeps G runs of ceil(H / slices) columns: at most the weights a thread keeps
    need = -(-hidden_size // (MAX_WEIGHTS_PER_THREAD // gates))
    if need > MAX_THREADS:
        raise ValueError(f"hidden_size {hidden_size} needs {need} threads a unit for its "
                         f"weights, more than a block's {MAX_THREADS}")
    if simulator:
        given = hidden_size
    else:
        given = None if blocks is None else min(hidden_size, -(-hidden_size // blocks))
    units = 1 if given is None else given

    def fits(slices, chunk):
        return units * slices <= MAX_THREADS and units * slices * gates * chunk <= shared_floats

    slices, chunk = max(batch, need), batch
    if not fits(slices, chunk):
        slices = need
        widest = shared_floats // (units * slices * gates)
        if widest < 1 or not fits(slices, 1):
            where = "the simulator runs one block, and " if simulator else ""
            raise ValueError(f"{where}{units} units of hidden_size {hidden_size} need "
                             f"{units * slices} threads and {units * slices * gates} partial "
                             f"sums a batch element, more than a block's {MAX_THREADS} "
                             f"threads and {shared_floats} floats of shared memory")
        chunk = -(-batch // -(-batch // widest))
    if given is not None:
        return Plan(cell, hidden_size, batch, units, slices, chunk)
    # as many units as the threads and the partial sums (units x slices x gates x chunk)
    # let a block have
    most = min(MAX_THREADS // slices, shared_floats // (slices * gates * chunk))
    return Plan(cell, hidden_size, batch, min(most, hidden_size), slices, chunk)


def input_projection(x, w_ih, b_ih, b_hh, cell):
    """``x_t W_ih^T + b`` of every step (``T x B x G H``, float32): ``b`` is
    ``b_ih + b_hh`` but a GRU's candidate keeps ``b_hn`` apart (it is inside ``r * (...)``).
    """
    bias = np.asarray(b_ih, np.float32).copy()
    hidden = w_ih.shape[0] // GATES[cell]
    b_hh = np.asarray(b_hh, np.float32)
    if cell == "lstm":
        bias += b_hh
    else:
        bias[:2 * hidden] += b_hh[:2 * hidden]
    return (np.asarray(x, np.float32) @ np.asarray(w_ih, np.float32).T + bias).astype(np.float32)


def _sigmoid(z):
    return np.float32(1) / (np.float32(1) + np.exp(-z))


def schedule_model(p, xw, w_hh, b_hh, h0, c0=None):
    """The kernel's schedule in numpy, float32, any number of blocks: each unit's
    pre-activations summed slice by slice in slice order, as the kernel's threads do.
    Returns ``(y, h_n, c_n)`` (``c_n`` None for a GRU)."""
    hidden, gates = p.hidden_size, p.gates
    w = np.asarray(w_hh, np.float32)
    h = np.asarray(h0, np.float32).copy()
    c = None if c0 is None else np.asarray(c0, np.float32).copy()
    b_hn = np.asarray(b_hh, np.float32)[2 * hidden:] if p.cell == "gru" else None
    ys = []
    for xw_t in np.asarray(xw, np.float32):
        z = np.zeros((h.shape[0], gates * hidden), np.float32)
        for s in range(p.slices):
            cols = slice(s * p.columns, min((s + 1) * p.columns, hidden))
            z += h[:, cols] @ w[:, cols].T
        h, c = _cell(p.cell, xw_t, z, h, c, b_hn)
        ys.append(h)
    return np.stack(ys), h, c


def _cell(cell, xw_t, z, h, c, b_hn):
    hidden = h.shape[1]
    if cell == "lstm":
        pre = xw_t + z
        i, f, g, o = (pre[:, k * hidden:(k + 1) * hidden] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        return (_sigmoid(o) * np.tanh(c)).astype(np.float32), c.astype(np.float32)
    r = _sigmoid(xw_t[:, :hidden] + z[:, :hidden])
    u = _sigmoid(xw_t[:, hidden:2 * hidden] + z[:, hidden:2 * hidden])
    n = np.tanh(xw_t[:, 2 * hidden:] + r * (z[:, 2 * hidden:] + b_hn))
    return ((1 - u) * n + u * h).astype(np.float32), None


@functools.cache
def _kernel(cell, units, slices, columns, batch, chunk):
    """The compiled kernel for one plan's constants (:mod:`.persistent_kernel`)."""
    from .persistent_kernel import build
    return build(GATES[cell], units, slices, columns, batch, chunk)


@functools.cache
def backward_kernel(p):
    """The backward kernel of plan ``p`` (:func:`.persistent_kernel.build_backward`):
    ``W_hh``'s ``G H`` rows cut into ``p.slices`` runs."""
    from .persistent_kernel import build_backward
    return build_backward(p.gates, p.units, p.slices, -(-p.gates * p.hidden_size // p.slices),
                          p.batch, p.chunk)


def launch(kernel, p, args):
    """Launch ``kernel`` on ``args`` with plan ``p``'s grid, synchronised; returns its
    seconds. On a GPU the grid is first checked to be co-resident (a cooperative launch).

    Raises
    ------
    ValueError
        If the GPU cannot hold the plan's blocks at once, naming both counts.
    """
    from numba import config, cuda

    if not config.ENABLE_CUDASIM:
        types = tuple(kernel.typeof_pyval(a) for a in args)
        resident = kernel.compile(types).max_cooperative_grid_blocks(p.threads)
        if p.blocks > resident:
            raise ValueError(f"{p.blocks} blocks of {p.threads} threads: this GPU holds "
                             f"{resident} of this kernel at once, and a grid barrier "
                             f"needs all of them resident (fewer units a block, or a "
                             f"smaller layer)")
    start = time.perf_counter()
    kernel[p.blocks, p.threads](*args)
    cuda.synchronize()
    return time.perf_counter() - start


def forward(p, xw, w_hh, b_hh, h0, c0=None):
    """Run the kernel of plan ``p`` (one cooperative launch); returns ``(y, h_n, c_n,
    saved, seconds)``: ``saved`` what the backward pass reads (the gates' activations and
    an LSTM's cells, or a GRU's ``W_hn h + b_hn``: :func:`.persistent_kernel.build`),
    ``seconds`` the kernel's time alone (synchronised). Needs numba-cuda and a GPU, or
    ``NUMBA_ENABLE_CUDASIM=1`` and a one-block plan."""
    from numba import cuda

    steps, batch = xw.shape[:2]
    hidden = p.hidden_size
    h_buf = np.zeros((2, batch, hidden), np.float32)
    h_buf[0] = h0
    c = np.zeros((batch, hidden), np.float32) if c0 is None else np.array(c0, np.float32)
    b_hn = (np.asarray(b_hh, np.float32)[2 * hidden:] if p.cell == "gru"
            else np.zeros(hidden, np.float32))
    device = {name: cuda.to_device(np.ascontiguousarray(value, np.float32)) for name, value in
              (("xw", xw), ("w_hh", w_hh), ("b_hn", b_hn), ("h_buf", h_buf), ("c", c),
               ("y", np.zeros((steps, batch, hidden), np.float32)),
               ("saved", np.zeros((steps, batch, (p.gates + 1) * hidden),
                                  np.float32)))}
    kernel = _kernel(p.cell, p.units, p.slices, p.columns, batch, p.chunk)
    seconds = launch(kernel, p, [device[name] for name in
                                 ("xw", "w_hh", "b_hn", "h_buf", "c", "y", "saved")])
    y = device["y"].copy_to_host()
    h_n = device["h_buf"].copy_to_host()[steps % 2]
    c_n = device["c"].copy_to_host() if p.cell == "lstm" else None
    return y, h_n, c_n, device["saved"].copy_to_host(), seconds


def torch_module(cell, weights, dtype=None):
    """PyTorch's ``nn.LSTM`` / ``nn.GRU`` (``dtype``, default float64) holding
    ``weights`` ``(w_ih, w_hh, b_ih, b_hh)``."""
    import torch

    dtype = torch.float64 if dtype is None else dtype
    w_ih, w_hh, b_ih, b_hh = weights
    kind = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
    module = kind(w_ih.shape[1], w_hh.shape[1], dtype=dtype)
    module.load_state_dict({name: torch.tensor(np.asarray(value), dtype=dtype) for name, value
                            in (("weight_ih_l0", w_ih), ("weight_hh_l0", w_hh),
                                ("bias_ih_l0", b_ih), ("bias_hh_l0", b_hh))})
    return module


def torch_forward(cell, weights, x, h0, c0=None):
    """PyTorch's ``nn.LSTM`` / ``nn.GRU`` in float64 on the same weights: ``(y, h_n,
    c_n)`` as numpy arrays."""
    import torch

    module = torch_module(cell, weights)
    h = torch.tensor(np.asarray(h0, np.float64))[None]
    with torch.no_grad():
        if cell == "lstm":
            y, (h_n, c_n) = module(torch.tensor(np.asarray(x, np.float64)),
                                   (h, torch.tensor(np.asarray(c0, np.float64))[None]))
            return y.numpy(), h_n[0].numpy(), c_n[0].numpy()
        y, h_n = module(torch.tensor(np.asarray(x, np.float64)), h)
        return y.numpy(), h_n[0].numpy(), None


def layer_flops(cell, input_size, hidden_size, batch, steps):
    """Floating-point operations of the layer's forward pass: the two matrix products'
    multiply-adds (2 per weight and batch element and step); the cell's few element-wise
    operations are left out, as the paper counts."""
    gates = GATES[cell]
    return 2 * gates * hidden_size * (input_size + hidden_size) * batch * steps


def _check(value, name):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return value


def run(cell, input_size, hidden_size, batch, steps, *, device="simulator", seed=0,
        backward=False, blocks=None):
    """One layer through the kernel against PyTorch float64 on the same random weights
    and inputs (uniform in ``±1/sqrt(hidden_size)``, as PyTorch initialises them).

    Returns
    -------
    dict
        ``device``, ``cell``, the sizes, ``blocks``, ``threads_per_block``,
        ``max_abs_error_vs_torch`` (outputs and final states), ``seconds`` (the kernel)
        and ``tflops`` (:func:`layer_flops` over ``seconds``). With ``backward``, the
        backward pass through time of ``sum(y * dy)`` (``dy`` random) too:
        ``backward_max_abs_error_vs_torch`` (every gradient against PyTorch's autograd),
        ``backward_seconds`` (the kernel and the gradient products, numpy on the host),
        ``backward_tflops``. ``blocks``, ``chunk`` and ``passes`` are the plan's
        (:func:`plan`; ``blocks`` given spreads the units over that many).
    """
    for name, value in (("input_size", input_size), ("batch", batch), ("seq_len", steps)):
        _check(value, name)
    p = plan(cell, hidden_size, batch, simulator=device == "simulator", blocks=blocks)
    rng = np.random.default_rng(seed)
    scale = 1 / math.sqrt(hidden_size)
    gates = GATES[cell]
    w_ih, w_hh = (rng.uniform(-scale, scale, (gates * hidden_size, n)).astype(np.float32)
                  for n in (input_size, hidden_size))
    b_ih, b_hh = (rng.uniform(-scale, scale, gates * hidden_size).astype(np.float32)
                  for _ in range(2))
    x = rng.uniform(-1, 1, (steps, batch, input_size)).astype(np.float32)
    h0 = rng.uniform(-0.5, 0.5, (batch, hidden_size)).astype(np.float32)
    c0 = rng.uniform(-0.5, 0.5, (batch, hidden_size)).astype(np.float32) \
        if cell == "lstm" else None
    xw = input_projection(x, w_ih, b_ih, b_hh, cell)
    y, h_n, c_n, saved, seconds = forward(p, xw, w_hh, b_hh, h0, c0)
    want = torch_forward(cell, (w_ih, w_hh, b_ih, b_hh), x, h0, c0)
    error = max(float(np.max(np.abs(got - ref))) for got, ref in zip((y, h_n, c_n), want)
                if ref is not None)
    flops = layer_flops(cell, input_size, hidden_size, batch, steps)
    result = {"device": device, "cell": cell, "input_size": input_size,
              "hidden_size": hidden_size, "batch": batch, "seq_len": steps,
              "blocks": p.blocks, "threads_per_block": p.threads, "chunk": p.chunk,
              "passes": p.passes,
              "max_abs_error_vs_torch": error, "seconds": seconds,
              "tflops": flops / seconds / 1e12}
    if backward:
        from .persistent_backward import (backward as run_backward, backward_flops,
                                          torch_gradients, weight_gradients)
        dy = rng.uniform(-1, 1, y.shape).astype(np.float32)
        start = time.perf_counter()
        dz_x, dz_h, dh0, dc0, _ = run_backward(p, dy, saved, y, h0, c0, w_hh)
        grads = weight_gradients(x, y, h0, dz_x, dz_h, w_ih)
        seconds_back = time.perf_counter() - start
        grads.update(h0=dh0, c0=dc0)
        want = torch_gradients(cell, (w_ih, w_hh, b_ih, b_hh), x, h0, c0, dy)
        result.update(
            backward_max_abs_error_vs_torch=max(float(np.max(np.abs(grads[name] - ref)))
                                                for name, ref in want.items()),
            backward_seconds=seconds_back,
            backward_tflops=backward_flops(cell, input_size, hidden_size, batch, steps)
            / seconds_back / 1e12)
    if device == "cuda":
        torch_seconds = torch_cuda_seconds(cell, (w_ih, w_hh, b_ih, b_hh), x, h0, c0)
        result.update(torch_seconds=torch_seconds, torch_tflops=flops / torch_seconds / 1e12)
    return result


def torch_cuda_seconds(cell, weights, x, h0, c0=None, *, repeats=5):
    """The fastest of ``repeats`` runs of PyTorch's ``nn.LSTM`` / ``nn.GRU`` (cuDNN) in
    float32 on the GPU, the same weights and inputs, each run synchronised
    (:func:`~.gpu_model.best_seconds`)."""
    import torch

    from .gpu_model import best_seconds

    module = torch_module(cell, weights, torch.float32).cuda()
    xs = torch.tensor(x).cuda()
    state = torch.tensor(h0).cuda()[None]
    if cell == "lstm":
        state = (state, torch.tensor(c0).cuda()[None])
    with torch.no_grad():
        return best_seconds(lambda: module(xs, state), "cuda", repeats)

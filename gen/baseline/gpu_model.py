"""An RNN layer stack's training step on a GPU, modelled: a roofline of each task
(``max(flops / peak, bytes / bandwidth)`` plus a kernel launch) on a :class:`Gpu` described
by its published figures, every result labelled *modelled* by its callers.

Tasks of one layer (:func:`gpu_tasks`): the input MVMs (I-MVM, FW ``X W_ih^T``, BW ``dZ
W_ih``), the gradient computation (GC, ``dZ^T X`` and ``dZ^T H``) and the weight update
(WU). The whole step on the GPU alone (:func:`gpu_only_seconds`): ``cudnn_std`` runs each
step's recurrent product as its own kernels, reading ``W_hh`` from memory every step;
``cudnn_pd`` (persistent, :mod:`.persistent_rnn`) keeps ``W_hh`` on chip when it fits the
register file (at :data:`REGISTER_SHARE` of it, as the persistent kernel's plan does) and
pays a grid barrier a step, else it streams the weights as the standard algorithm does,
without the per-step launches. The engines' system models (a GPU beside an FPGA) build
on these. Where a GPU is present, :func:`measure_tasks` and :func:`measure_gpu_only` time
the same tasks and the whole step in PyTorch on it instead (*measured*).
"""

import dataclasses

from .persistent_rnn import MAX_WEIGHTS_PER_THREAD

__all__ = ["Gpu", "P100", "V100", "Workload", "gpu_tasks", "gpu_only_seconds",
           "measure_tasks", "measure_gpu_only", "best_seconds", "REGISTER_SHARE"]

#: The share of a register file a persistent kernel keeps weights in
#: (:data:`~nnrtl.gen.baseline.persistent_rnn.MAX_WEIGHTS_PER_THREAD` of 255 registers).
REGISTER_SHARE = MAX_WEIGHTS_PER_THREAD / 255


@dataclasses.dataclass(frozen=True)
class Gpu:
    """A GPU as the roofline sees it.

    Attributes
    ----------
    name : str
    peak_tflops : float
        fp32 peak.
    memory_gbps : float
        Memory bandwidth, GB/s.
    register_bytes : int
        All multiprocessors' register files.
    launch_seconds, barrier_seconds : float
        A kernel launch; a grid barrier.
    source : str
        Where each figure comes from (published, measured or assumed).
    """

    name: str
    peak_tflops: float
    memory_gbps: float
    register_bytes: int
    launch_seconds: float
    barrier_seconds: float
    source: str

    def task(self, flops, nbytes):
        """Seconds of one kernel: its roofline bound plus a launch."""
        return max(flops / (self.peak_tflops * 1e12), nbytes / (self.memory_gbps * 1e9)) \
            + self.launch_seconds


#: The paper's GPU (Sec. 6.1), NVIDIA Tesla P100 (PCIe, 16 GB), from NVIDIA's published
#: figures: 9.3 TFLOP/s fp32, 732 GB/s HBM2, 56 multiprocessors of 256 KB of registers.
#: Launch (5 us) and barrier (2 us) latencies are assumptions.
P100 = Gpu(name="NVIDIA Tesla P100 (PCIe)", peak_tflops=9.3, memory_gbps=732.0,
           register_bytes=56 * 256 * 1024, launch_seconds=5e-6, barrier_seconds=2e-6,
           source="published (NVIDIA P100 datasheet: fp32 peak, HBM2 bandwidth, register "
                  "file); launch 5 us and grid barrier 2 us assumed")


#: NVIDIA Tesla V100 (SXM2, 16 GB), from NVIDIA's published figures: 15.7 TFLOP/s fp32,
#: 900 GB/s HBM2, 80 multiprocessors of 256 KB of registers. Launch (5 us) and barrier
#: (2 us) latencies are assumptions.
V100 = Gpu(name="NVIDIA Tesla V100 (SXM2)", peak_tflops=15.7, memory_gbps=900.0,
           register_bytes=80 * 256 * 1024, launch_seconds=5e-6, barrier_seconds=2e-6,
           source="published (NVIDIA V100 datasheet: fp32 peak, HBM2 bandwidth, register "
                  "file); launch 5 us and grid barrier 2 us assumed")


@dataclasses.dataclass(frozen=True)
class Workload:
    """An RNN stack: ``layers`` layers of ``hidden`` cells (inputs ``hidden`` wide, as the
    paper's synthetic benchmarks), ``seq_len`` steps, ``batch`` sequences."""

    cell: str
    hidden: int
    layers: int
    seq_len: int
    batch: int

    @property
    def gates(self):
        return {"lstm": 4, "gru": 3}[self.cell]

    @property
    def rows(self):
        return self.gates * self.hidden


def gpu_tasks(work, gpu):
    """Seconds of one layer's GPU tasks (module docstring): ``imvm_fw``, ``imvm_bw``,
    ``gc``, ``wu``."""
    t, b, n, rows = work.seq_len, work.batch, work.hidden, work.rows
    words = 4
    gemm = 2 * t * b * n * rows
    imvm_bytes = words * (t * b * n + n * rows + t * b * rows)
    params = rows * 2 * n + 2 * rows
    return {"imvm_fw": gpu.task(gemm, imvm_bytes),
            "imvm_bw": gpu.task(gemm, imvm_bytes),
            "gc": gpu.task(2 * gemm, words * (t * b * (rows + 2 * n) + 2 * n * rows)),
            "wu": gpu.task(2 * params, 3 * words * params)}


def gpu_only_seconds(work, gpu, *, algorithm="cudnn_std"):
    """One training step of ``work`` on ``gpu`` alone (module docstring): ``{seconds, fw,
    bw_gc_wu, weights_on_chip}``.

    Raises
    ------
    ValueError
        An unknown ``algorithm``.
    """
    if algorithm not in ("cudnn_std", "cudnn_pd"):
        raise ValueError(f"algorithm must be cudnn_std or cudnn_pd, not {algorithm!r}")
    g = gpu_tasks(work, gpu)
    t, b, n, rows = work.seq_len, work.batch, work.hidden, work.rows
    flops, weight_bytes = 2 * b * rows * n, 4 * rows * n
    on_chip = algorithm == "cudnn_pd" and weight_bytes <= REGISTER_SHARE * gpu.register_bytes
    compute = flops / (gpu.peak_tflops * 1e12)
    stream = weight_bytes / (gpu.memory_gbps * 1e9)
    if on_chip:
        step = max(compute, gpu.barrier_seconds)
        fw_steps = bw_steps = t * step + gpu.launch_seconds
    elif algorithm == "cudnn_pd":
        fw_steps = bw_steps = t * max(compute, stream) + gpu.launch_seconds
    else:
        # a step: the recurrent product and the cell's element-wise kernel
        fw_steps = bw_steps = t * (max(compute, stream) + 2 * gpu.launch_seconds)
    fw = work.layers * (g["imvm_fw"] + fw_steps)
    # the first layer's input gradient is not computed (nothing before the stack takes it)
    bw = work.layers * (bw_steps + g["gc"] + g["wu"]) + (work.layers - 1) * g["imvm_bw"]
    return {"seconds": fw + bw, "fw": fw, "bw_gc_wu": bw, "weights_on_chip": on_chip}



def best_seconds(run, device, repeats):
    """The fastest of ``repeats`` runs of ``run()`` after a warm-up one, each synchronised
    on ``device`` (a PyTorch device) when it is a GPU, in seconds."""
    import time

    import torch

    def sync():
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()

    run()
    best = float("inf")
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        run()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def measure_tasks(work, device="cuda", *, repeats=3):
    """:func:`gpu_tasks` measured: each task of one layer run in PyTorch float32 on
    ``device`` (the I-MVMs and GC as ``torch.matmul``, WU as ``torch.optim.SGD``'s update
    of the layer's parameters), :func:`best_seconds` of ``repeats``."""
    import torch

    t, b, n, rows = work.seq_len, work.batch, work.hidden, work.rows
    generator = torch.Generator().manual_seed(0)

    def tensor(*shape):
        return torch.rand(*shape, generator=generator).to(device)

    x, w, dz = tensor(t * b, n), tensor(rows, n), tensor(t * b, rows)
    params = [torch.nn.Parameter(tensor(rows, 2 * n)), torch.nn.Parameter(tensor(2 * rows))]
    for p in params:
        p.grad = torch.ones_like(p)
    optimizer = torch.optim.SGD(params, lr=1e-3)
    tasks = {"imvm_fw": lambda: x @ w.T, "imvm_bw": lambda: dz @ w,
             "gc": lambda: (dz.T @ x, dz.T @ x), "wu": optimizer.step}
    with torch.no_grad():
        return {name: best_seconds(task, device, repeats) for name, task in tasks.items()}


def measure_gpu_only(work, device="cuda", *, repeats=2):
    """One training step of ``work`` on ``device`` in PyTorch (``nn.LSTM`` / ``nn.GRU``
    on cuDNN's own algorithm choice on a GPU: forward, the loss's backward, SGD),
    :func:`best_seconds` of ``repeats``: ``{"seconds": s}``."""
    import torch

    kind = torch.nn.LSTM if work.cell == "lstm" else torch.nn.GRU
    module = kind(work.hidden, work.hidden, num_layers=work.layers).to(device)
    optimizer = torch.optim.SGD(module.parameters(), lr=1e-3)
    inputs = torch.randn(work.seq_len, work.batch, work.hidden, device=device)

    def step():
        optimizer.zero_grad()
        module(inputs)[0].square().mean().backward()
        optimizer.step()

    return {"seconds": best_seconds(step, device, repeats)}

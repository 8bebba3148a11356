"""FARNN as a system: one training step of an RNN stack on a GPU and the FPGA engine
together (Cho et al., TPDS 2022, Sec. 5.3 and Fig. 6), beside the GPU alone.

The FPGA part is the engine's cycle model (:func:`~.perf.pass_cycles`: each layer's
recurrent weights over PCIe, then the R-MVM and activation tasks, the per-step vector
transfers included). The GPU part is a roofline of each task on a :class:`Gpu`, labelled
*modelled* (``max(flops / peak, bytes / bandwidth)`` plus a kernel launch): the input
MVMs (I-MVM, FW ``X W_ih^T``, BW ``dZ W_ih``), the gradient computation (GC, ``dZ^T X``
and ``dZ^T H``) and the weight update (WU). :data:`P100` is the paper's GPU from its
published figures; where a GPU was measured, its figures replace them.

Schedules (:data:`STRATEGIES`, the paper's Fig. 10):

* ``farnn``: Fig. 6. FW, per layer: the I-MVM on the GPU beside the weight load, then the
  FPGA pass. BW, from the last layer: the FPGA pass of layer ``l`` runs beside the GPU's GC
  and WU of layer ``l + 1``; the BW I-MVM of layer ``l + 1`` (the next pass's input) runs
  beside layer ``l``'s weight load; GC and WU of layer 1 end the step.
* ``no_overlap``: every transfer and task one after another.
* ``all_fpga``: the I-MVMs on the FPGA too (their MACs at the R-MVM pass's utilization,
  ``W_ih`` over PCIe as well); GC and WU stay on the GPU, overlapped as in ``farnn``.

The GPU alone (modelled the same way): ``cudnn_std`` runs each step's recurrent product as
its own kernels, reading ``W_hh`` from memory every step; ``cudnn_pd`` (persistent) keeps
``W_hh`` on chip when it fits the register file (at :data:`REGISTER_SHARE` of it, as the
persistent kernel's plan does) and pays a grid barrier a step, else it streams the weights
as the standard algorithm does, without the per-step launches.
"""

import dataclasses

from .perf import CLOCK_HZ, PCIE_GBPS, pass_cycles

__all__ = ["Gpu", "P100", "Workload", "STRATEGIES", "gpu_tasks", "farnn_seconds",
           "gpu_only_seconds", "fpga_config", "REGISTER_SHARE"]

#: FARNN's schedules (module docstring).
STRATEGIES = ("farnn", "no_overlap", "all_fpga")

#: The share of a register file a persistent kernel keeps weights in
#: (:data:`~nnrtl.gen.baseline.persistent_rnn.MAX_WEIGHTS_PER_THREAD` of 255 registers).
REGISTER_SHARE = 160 / 255


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


def fpga_config(work, base):
    """``base`` (a :class:`~nnrtl.hw.farnn.FarnnConfig`) sized for ``work``, or ``None`` if
    one layer's recurrent weights do not fit its PEs' memories."""
    config = dataclasses.replace(base, cell=work.cell, input_size=work.hidden,
                                 hidden_size=work.hidden, layers=work.layers,
                                 seq_len=work.seq_len, batch=work.batch)
    return config if config.max_weights_per_pe <= config.weight_depth else None


def _fpga(config, clock_hz, pcie_gbps):
    """``{phase: (load seconds, compute seconds, useful MACs)}`` of one layer's passes."""
    found = {}
    for phase in ("fw", "bw"):
        p = pass_cycles(config, phase, schedule="overlap", pcie_gbps=pcie_gbps)
        found[phase] = (p.load / clock_hz, p.compute / clock_hz, p.useful_macs)
    return found


def farnn_seconds(work, config, gpu, *, strategy="farnn", clock_hz=CLOCK_HZ,
                  pcie_gbps=PCIE_GBPS):
    """One training step of ``work`` on ``gpu`` and the engine ``config``
    (:func:`fpga_config`) under ``strategy``.

    Returns
    -------
    dict
        ``seconds`` and its groups ``fw`` and ``bw_gc_wu`` (the paper's bars), and the
        busy time of each resource: ``fpga`` (compute), ``pcie`` (weight loads),
        ``gpu``; ``bound``: the busiest of the three.

    Raises
    ------
    ValueError
        An unknown ``strategy``.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    g = gpu_tasks(work, gpu)
    f = _fpga(config, clock_hz, pcie_gbps)
    (load_fw, fpga_fw, macs_fw), (load_bw, fpga_bw, macs_bw) = f["fw"], f["bw"]
    imvm_fw, imvm_bw = g["imvm_fw"], g["imvm_bw"]
    if strategy == "all_fpga":
        # the input MVM's MACs on the PEs at the FW pass's utilization; W_ih over PCIe
        rate = macs_fw / fpga_fw
        imvm_macs = work.seq_len * work.batch * work.hidden * work.rows
        fpga_fw += imvm_macs / rate
        fpga_bw += imvm_macs / rate
        load_fw, load_bw = 2 * load_fw, 2 * load_bw
        imvm_fw = imvm_bw = 0.0
    layers, gc_wu = work.layers, g["gc"] + g["wu"]
    if strategy == "no_overlap":
        fw = layers * (imvm_fw + load_fw + fpga_fw)
        bw = layers * (load_bw + fpga_bw + imvm_bw + gc_wu)
    else:
        fw = layers * (max(imvm_fw, load_fw) + fpga_fw)
        bw = load_bw + fpga_bw                                   # the last layer
        bw += (layers - 1) * (max(imvm_bw, load_bw) + max(fpga_bw, gc_wu))
        bw += gc_wu                                              # layer 1's GC and WU
    busy = {"fpga": layers * (fpga_fw + fpga_bw), "pcie": layers * (load_fw + load_bw),
            "gpu": layers * (imvm_fw + imvm_bw + gc_wu)}
    return {"seconds": fw + bw, "fw": fw, "bw_gc_wu": bw, **busy,
            "bound": max(busy, key=busy.get)}


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
    bw = work.layers * (bw_steps + g["imvm_bw"] + g["gc"] + g["wu"])
    return {"seconds": fw + bw, "fw": fw, "bw_gc_wu": bw, "weights_on_chip": on_chip}


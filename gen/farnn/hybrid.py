"""FARNN as a system: one training step of an RNN stack on a GPU and the FPGA engine
together (Cho et al., TPDS 2022, Sec. 5.3 and Fig. 6), beside the GPU alone.

The FPGA part is the engine's cycle model (:func:`~.perf.pass_cycles`: each layer's
recurrent weights over PCIe, then the R-MVM and activation tasks, the per-step vector
transfers included); the GPU part is :mod:`nnrtl.gen.baseline.gpu_model`'s roofline of
each task (I-MVM, GC, WU) on a :class:`~nnrtl.gen.baseline.gpu_model.Gpu`, labelled
*modelled*; the GPU alone is that module's :func:`~nnrtl.gen.baseline.gpu_model.gpu_only_seconds`.

Schedules (:data:`STRATEGIES`, the paper's Fig. 10):

* ``farnn``: Fig. 6. FW, per layer: the I-MVM on the GPU beside the weight load, then the
  FPGA pass. BW, from the last layer: the FPGA pass of layer ``l`` runs beside the GPU's GC
  and WU of layer ``l + 1``; the BW I-MVM of layer ``l + 1`` (the next pass's input) runs
  beside layer ``l``'s weight load; GC and WU of layer 1 end the step. Layer 1's input
  gradient is not computed (nothing before the stack takes it), in every schedule.
* ``no_overlap``: every transfer and task one after another.
* ``all_fpga``: the I-MVMs on the FPGA too (their MACs at the R-MVM pass's utilization,
  ``W_ih`` over PCIe as well); GC and WU stay on the GPU, overlapped as in ``farnn``.
"""

import dataclasses

from ..baseline.gpu_model import gpu_tasks
from .perf import CLOCK_HZ, PCIE_GBPS, pass_cycles

__all__ = ["STRATEGIES", "farnn_seconds", "fpga_config"]

#: FARNN's schedules (module docstring).
STRATEGIES = ("farnn", "no_overlap", "all_fpga")


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
                  pcie_gbps=PCIE_GBPS, tasks=None):
    """One training step of ``work`` on ``gpu`` and the engine ``config``
    (:func:`fpga_config`) under ``strategy``; ``tasks`` the GPU tasks' seconds when
    measured (:func:`~nnrtl.gen.baseline.gpu_model.measure_tasks`), else modelled.

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
    g = gpu_tasks(work, gpu) if tasks is None else tasks
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
    # the BW I-MVM of layer l gives layer l - 1 its output gradient: layers 2 .. L
    if strategy == "no_overlap":
        fw = layers * (imvm_fw + load_fw + fpga_fw)
        bw = layers * (load_bw + fpga_bw + gc_wu) + (layers - 1) * imvm_bw
    else:
        fw = layers * (max(imvm_fw, load_fw) + fpga_fw)
        bw = load_bw + fpga_bw                                   # the last layer
        bw += (layers - 1) * (max(imvm_bw, load_bw) + max(fpga_bw, gc_wu))
        bw += gc_wu                                              # layer 1's GC and WU
    busy = {"fpga": layers * (fpga_fw + fpga_bw), "pcie": layers * (load_fw + load_bw),
            "gpu": layers * (imvm_fw + gc_wu) + (layers - 1) * imvm_bw}
    return {"seconds": fw + bw, "fw": fw, "bw_gc_wu": bw, **busy,
            "bound": max(busy, key=busy.get)}

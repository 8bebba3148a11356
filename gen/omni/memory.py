"""The HBM bandwidth term of the η-LSTM top's cycle model: the bytes a training step moves
between HBM and the chip, the bandwidth of the top's HBM ports, and the step's time as
the larger of its compute and memory cycles, with the bound named.

Bytes of a step (:func:`step_bytes`) [U, the paper gives no formula; decided here]
    :func:`.accounting.data_movement`'s categories, with every BP cell fetching all its
    weight rows (``rows=1``: the top's BP tasks run whole tiles), plus the step's edges:
    ``weights`` (W, U, b read by every FW timestamp once for the batch and by every kept
    BP cell), ``weight_gradients`` (δW, δU, δb read and written by every kept BP cell),
    ``activations`` (``x_t``, ``h_{t-1}`` of every kept cell written in FW, read in BP),
    ``intermediates`` (the five gate and state vectors, or MS1's compressed P1 records,
    written in FW, read in BP), ``inputs`` (layer 0's ``x`` read in FW, the loss gradient
    ``δY`` read in BP) and ``outputs`` (the last layer's ``h`` written in FW, layer 0's
    ``δX`` written in BP). Nothing stays on chip from one cell to the next but the BP
    cell gradients (δH, δS, δX of the layers above), as :mod:`.accounting` has it.
Bandwidth (:func:`hbm_bandwidth`)
    ``ports`` AXI4 ports of :data:`~nnrtl.hw.omni.top_config.HBM_DATA_WIDTH` bits, one
    beat a cycle at the top's clock, capped at the device's peak (the board's
    ``offchip_gbps``: the VCU128's two HBM2 stacks, 460.8 GB/s, PG276's 32 pseudo-channels).
    The top RTL has ``hbm_ports`` (:class:`~nnrtl.hw.omni.top_config.OmniConfig`), by
    default the paper's 224 GB/s (§VI-A), which :func:`ports_for` turns into 14 ports at
    500 MHz. No refresh, page or turnaround loss: the bound is optimistic for memory.
Step time (:func:`step_time`)
    ``max(compute, memory)``: the DMA runs beside the channels (double-buffered through the
    scratchpad), so the slower of the two sets the step; ``bound`` names it.
"""

import math

from ...hw.omni.top_config import HBM_DATA_WIDTH, HBM_PSEUDO_CHANNELS
from ..errors import UsageError
from .accounting import data_movement

__all__ = ["PAPER_HBM_GBPS", "PAPER_CLOCK_HZ", "HBM_PSEUDO_CHANNELS",
           "device_hbm_gbps", "ports_for", "hbm_bandwidth", "step_bytes", "memory_cycles",
           "step_time"]

#: The HBM bandwidth the paper sets for its VCU128 evaluation, GB/s (§VI-A: "set the HBM
#: bandwidth as 224GB/s", a quarter of the V100's).
PAPER_HBM_GBPS = 224.0
#: The paper's clock, Hz (§VI-A: "operated at 500MHz").
PAPER_CLOCK_HZ = 500e6


def device_hbm_gbps():
    """The VCU128's peak HBM bandwidth in GB/s (its board record's ``offchip_gbps``)."""
    from ...boards.vcu128 import VCU128Platform
    return VCU128Platform.capacity.offchip_gbps


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise UsageError(f"{name} must be a positive number, not {value!r}")


def ports_for(gbps, clock_hz=PAPER_CLOCK_HZ, width_bits=HBM_DATA_WIDTH):
    """The fewest ports of ``width_bits`` bits at ``clock_hz`` that carry ``gbps`` GB/s
    (``ceil(gbps * 1e9 / (width_bits / 8 * clock_hz))``).

    Raises
    ------
    UsageError
        A bandwidth or clock that is not a positive number, or more ports than the
        device's :data:`HBM_PSEUDO_CHANNELS`.
    """
    _check_positive("gbps", gbps)
    _check_positive("clock_hz", clock_hz)
    ports = math.ceil(gbps * 1e9 / (width_bits / 8 * clock_hz) - 1e-9)
    if ports > HBM_PSEUDO_CHANNELS:
        raise UsageError(f"gbps ({gbps}) needs {ports} ports of {width_bits} bits at "
                         f"{clock_hz / 1e6:g} MHz; the HBM has {HBM_PSEUDO_CHANNELS} "
                         f"pseudo-channels")
    return ports


def hbm_bandwidth(ports, clock_hz=PAPER_CLOCK_HZ, width_bits=HBM_DATA_WIDTH):
    """Bytes a second the top's HBM ports move: ``ports * width_bits / 8 * clock_hz``,
    capped at :func:`device_hbm_gbps`.

    Returns
    -------
    dict
        ``bytes_per_s``, ``bytes_per_cycle`` (at ``clock_hz``), ``ports``,
        ``capped`` (the device's peak set it).

    Raises
    ------
    UsageError
        ``ports`` not an integer from 1 to :data:`HBM_PSEUDO_CHANNELS`, or a clock that
        is not a positive number.
    """
    if isinstance(ports, bool) or not isinstance(ports, int) or not (
            1 <= ports <= HBM_PSEUDO_CHANNELS):
        raise UsageError(f"hbm_ports must be an integer from 1 to {HBM_PSEUDO_CHANNELS} "
                         f"(the HBM's pseudo-channels), not {ports!r}")
    _check_positive("clock_hz", clock_hz)
    raw = ports * width_bits / 8 * clock_hz
    peak = device_hbm_gbps() * 1e9
    rate = min(raw, peak)
    return {"bytes_per_s": rate, "bytes_per_cycle": rate / clock_hz, "ports": ports,
            "capped": raw > peak}


def step_bytes(workload, *, density=None, kept=None):
    """Bytes one training step of ``workload`` moves between HBM and the chip (module
    docstring), by category, and ``total``.

    Parameters
    ----------
    workload : Workload
    density : float, optional
        MS1 on: the share of BP-EW-P1 values that survive the pruning (``None``: off).
    kept : LN x LL bool array, optional
        MS2's kept cells (``None``: all).
    """
    moved = data_movement(workload, density, kept, rows=1.0)
    batch, length = workload.batch, workload.length
    inputs = 4 * length * batch * (workload.input_size + workload.hidden_size)
    outputs = 4 * length * batch * (workload.hidden_size + workload.input_size)
    result = {key: float(moved[key]) for key in ("weights", "weight_gradients",
                                                 "activations", "intermediates")}
    result.update(inputs=float(inputs), outputs=float(outputs))
    result["total"] = sum(result.values())
    return result


def memory_cycles(total_bytes, bandwidth):
    """Cycles the ports need for ``total_bytes`` at ``bandwidth`` (:func:`hbm_bandwidth`'s
    dict): ``ceil(total_bytes / bytes_per_cycle)``."""
    return math.ceil(total_bytes / bandwidth["bytes_per_cycle"] - 1e-9)


def step_time(compute_cycles, memory):
    """The step's cycles as the larger of ``compute_cycles`` and ``memory`` (memory
    cycles): ``{"cycles", "compute_cycles", "memory_cycles", "bound"}``, ``bound``
    ``"compute"`` or ``"memory"`` (compute on a tie)."""
    bound = "memory" if memory > compute_cycles else "compute"
    return {"cycles": max(compute_cycles, memory), "compute_cycles": compute_cycles,
            "memory_cycles": memory, "bound": bound}

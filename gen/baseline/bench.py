"""The ``persistent_rnn`` bench (``make bench``): the Persistent RNN paper's Fig. 1 analogue,
TFLOP/s of an LSTM layer against the mini-batch at 1,152 and 2,048 hidden units, the
persistent kernel (:mod:`.persistent_rnn`) beside PyTorch's ``nn.LSTM`` (cuDNN) on the same
GPU, each run checked against PyTorch float64. Writes ``persistent_rnn.png``.

On a machine without a CUDA device nothing is measured: the result says so
(``measured: false`` and the reason), a labelled absence, not a figure. The GPU's fp32 peak
is its SMs x FP32 lanes per SM (by compute capability, :data:`FP32_LANES`) x 2 x its clock.
"""

from pathlib import Path

__all__ = ["bench", "bench_persistent_rnn", "markdown", "FP32_LANES", "PAPER"]

#: FP32 lanes a streaming multiprocessor has, by compute capability (NVIDIA's CUDA C++
#: programming guide, "Arithmetic Instructions" throughput table).
FP32_LANES = {(6, 0): 64, (6, 1): 128, (7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128,
              (8, 9): 128, (9, 0): 128, (10, 0): 128, (12, 0): 128}

#: The paper's own figures (Diamos et al., Sec. 1): a TitanX, mini-batch 4, 1,152 units.
PAPER = {"device": "TitanX (Maxwell)", "layer": "a plain RNN layer (one gate)",
         "tflops_at_batch_4_1152_units": 2.8, "fraction_of_peak": 0.45}

#: The sweep: hidden sizes, mini-batches, time steps.
HIDDEN_SIZES = (1152, 2048)
BATCHES = (1, 2, 4, 8, 16, 32, 64)
STEPS = 256


def _gpu():
    """``(name, fp32 peak TFLOP/s or None, why not)`` of CUDA device 0."""
    from numba import cuda
    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    lanes = FP32_LANES.get(tuple(device.compute_capability))
    if lanes is None:
        return name, None, f"compute capability {device.compute_capability} not in the table"
    clock_khz = device.CLOCK_RATE
    return name, device.MULTIPROCESSOR_COUNT * lanes * 2 * clock_khz * 1e3 / 1e12, None


def bench_persistent_rnn(out, *, device=None, hidden_sizes=HIDDEN_SIZES, batches=BATCHES,
                         steps=STEPS, input_size=None):
    """Run the sweep on ``device`` (default: ``"cuda"`` where numba finds one, else
    nothing is measured); ``input_size`` defaults to the hidden size. Returns the result
    (JSON-able): ``measured``, ``device``, ``gpu``, ``peak_tflops``, ``rows`` (one per
    hidden size and batch: the kernel's and PyTorch's TFLOP/s, the error, or ``refused``
    with the plan's reason) and ``paper``."""
    from ..progress import progress
    from .persistent_rnn import run

    if device is None:
        from numba import config, cuda
        # numba's simulator says a device is available: it is not a GPU
        device = "cuda" if cuda.is_available() and not config.ENABLE_CUDASIM else None
    result = {"paper": PAPER, "steps": steps, "rows": []}
    if device is None:
        result.update(measured=False, reason="no CUDA device on this machine: the sweep "
                      "needs a GPU (nnrtl baseline persistent-rnn --device simulator checks "
                      "the kernel at small sizes)")
        return result
    result.update(measured=True, device=device)
    if device == "cuda":
        result["gpu"], result["peak_tflops"], why = _gpu()
        if why:
            result["peak_note"] = why
    for hidden in hidden_sizes:
        for batch in batches:
            progress(f"persistent_rnn bench: {hidden} units, batch {batch}")
            row = {"hidden_size": hidden, "batch": batch}
            found = None
            # the plan's own spread first; where the GPU cannot hold its grid at once,
            # one block a multiprocessor
            for blocks in (None, _multiprocessors(device)):
                try:
                    found = run("lstm", input_size or hidden, hidden, batch, steps,
                                device=device, blocks=blocks)
                    break
                except ValueError as error:
                    row["refused"] = str(error)
                    if blocks is None and device == "cuda":
                        continue
                    break
            if found is not None:
                row.pop("refused", None)
                row.update({key: found[key] for key in
                            ("tflops", "seconds", "max_abs_error_vs_torch", "blocks",
                             "threads_per_block", "chunk", "passes", "torch_tflops",
                             "torch_seconds")
                            if key in found})
            result["rows"].append(row)
    _plot(result, out)
    return result


def _multiprocessors(device):
    """The GPU's multiprocessors (``None`` off a GPU)."""
    if device != "cuda":
        return None
    from numba import cuda
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def _plot(result, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for hidden in sorted({row["hidden_size"] for row in result["rows"]}):
        rows = [row for row in result["rows"] if row["hidden_size"] == hidden and
                "tflops" in row]
        axes.plot([r["batch"] for r in rows], [r["tflops"] for r in rows], "o-",
                  label=f"persistent, {hidden} units")
        torch_rows = [r for r in rows if "torch_tflops" in r]
        if torch_rows:
            axes.plot([r["batch"] for r in torch_rows], [r["torch_tflops"] for r in torch_rows],
                      "s--", label=f"PyTorch (cuDNN), {hidden} units")
    if result.get("peak_tflops"):
        axes.axhline(result["peak_tflops"], color="grey", lw=0.8, label="fp32 peak")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("mini-batch")
    axes.set_ylabel("TFLOP/s")
    axes.set_title(f"LSTM layer, {result['steps']} steps, {result.get('gpu', result['device'])}")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(Path(out) / "persistent_rnn.png", dpi=120)
    plt.close(figure)


def markdown(result):
    """The bench's markdown."""
    lines = ["# Persistent RNN (Diamos et al., Fig. 1 analogue)", ""]
    paper = result["paper"]
    lines.append(f"The paper's: {paper['tflops_at_batch_4_1152_units']} TFLOP/s at batch 4 and "
                 f"1,152 units on a {paper['device']} ({paper['fraction_of_peak']:.0%} of "
                 f"peak), {paper['layer']}; here an LSTM layer.")
    lines.append("")
    if not result["measured"]:
        lines.append(f"Not measured: {result['reason']}.")
        return "\n".join(lines) + "\n"
    peak = result.get("peak_tflops")
    lines.append(f"Device: {result.get('gpu', result['device'])}, fp32 peak "
                 f"{'%.1f TFLOP/s' % peak if peak else 'unknown'}; LSTM, "
                 f"{result['steps']} steps.")
    lines += ["", "| units | batch | persistent TFLOP/s | of peak | PyTorch TFLOP/s | "
              "max abs error vs float64 |", "|---:|---:|---:|---:|---:|---:|"]
    for row in result["rows"]:
        if "refused" in row:
            lines.append(f"| {row['hidden_size']:,} | {row['batch']} | refused: "
                         f"{row['refused']} | | | |")
            continue
        share = f"{row['tflops'] / peak:.1%}" if peak else ""
        torch = f"{row['torch_tflops']:.3f}" if "torch_tflops" in row else ""
        lines.append(f"| {row['hidden_size']:,} | {row['batch']} | {row['tflops']:.3f} | "
                     f"{share} | {torch} | {row['max_abs_error_vs_torch']:.1e} |")
    lines += ["", "Plot: `persistent_rnn.png`"]
    return "\n".join(lines) + "\n"


def bench(out):
    """The bench hook: ``(result, markdown)``."""
    result = bench_persistent_rnn(out)
    return result, markdown(result)


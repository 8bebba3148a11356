"""FARNN bench, the GPU baseline (:mod:`.bench`): the training step of the same layers
(``nn.LSTM`` / ``nn.GRU``, FW + BW + ``torch.optim.SGD``) in PyTorch on CUDA when present
(cuDNN), else on the CPU, at each batch, timed over a few repeats after a warm-up.

The paper's baseline is cuDNN on a P100 (Figs. 7-9); a different device is "the same
experiment, different GPU (or CPU)", never the paper's number. On the CPU a 5 x 1,024
LSTM step at T = 1,600 takes minutes, so the sequence is scaled (``seq_len``, 32 by
default on the CPU) and the JSON says so: ``scaled_to`` gives the measured time scaled
linearly to the workload's T (a step is T sequential cell updates; the weight update is
per step and small), labelled as an extrapolation.
"""

import time

__all__ = ["gpu_baseline", "CPU_SEQ_LEN"]

#: Sequence length the CPU measures (the workload's T on CUDA).
CPU_SEQ_LEN = 32


def _step(module, optimizer, inputs):
    optimizer.zero_grad()
    output, _ = module(inputs)
    output.square().mean().backward()
    optimizer.step()


def gpu_baseline(*, cell="lstm", hidden=1024, layers=5, seq_len=1600, batches=(1, 2, 4),
                 repeats=2, measured_seq_len=None, device=None, seed=1):
    """Time one training step per batch; returns ``{device, device_name, torch,
    cell, hidden_size, layers, seq_len, measured_seq_len, scaled, repeats, rows}`` with
    rows ``{batch, seconds (best of the repeats), seconds_all, at_seq_len (scaled to
    seq_len when the measurement was shorter)}``."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if measured_seq_len is None:
        measured_seq_len = seq_len if device == "cuda" else min(seq_len, CPU_SEQ_LEN)
    torch.manual_seed(seed)
    rnn = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cell]
    module = rnn(hidden, hidden, num_layers=layers).to(device)
    optimizer = torch.optim.SGD(module.parameters(), lr=1e-3)
    rows = []
    for batch in batches:
        inputs = torch.randn(measured_seq_len, batch, hidden, device=device)
        _step(module, optimizer, inputs)                     # warm-up (cuDNN plans)
        times = []
        for _ in range(repeats):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            _step(module, optimizer, inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        best = min(times)
        rows.append({"batch": batch, "seconds": best, "seconds_all": times,
                     "at_seq_len": best * seq_len / measured_seq_len})
    name = torch.cuda.get_device_name(0) if device == "cuda" else _cpu_name()
    return {"device": device, "device_name": name, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "cell": cell, "hidden_size": hidden,
            "layers": layers, "seq_len": seq_len, "measured_seq_len": measured_seq_len,
            "scaled": measured_seq_len != seq_len, "repeats": repeats, "rows": rows}


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "cpu"

"""FARNN bench (``python -m nnrtl.gen.bench --only farnn``, the engine's ``bench`` hook):
the paper's figures beside ours, JSON and markdown (:func:`bench_farnn`).

Parts (default: about three minutes, plus the Verilator build of two small engines and
Yosys of a PE and a chain when not cached: some five more)
-----------------------------------------------------------------------------------------
``slices``
    The paper's slice arithmetic (Sec. 5.1.3, 1,024 x 1,024): from the configuration's
    matrix shape (:func:`.bench_model.slice_rows`); in RTL cycles with
    ``NNRTL_BENCH_FARNN=slices256`` / ``slices768`` (one MVM unit of 16 chains at full
    size under Verilator, :func:`run_shape`: a build of some 25 min for 256 PEs, about
    three times that for 768, and a run of about 10 min each). Words of
    ``NNRTL_BENCH_FARNN`` are comma-separated.
``engine``
    The scaled engine top under Verilator (:mod:`nnrtl.sim.tb.farnn.engine`, bit-exact
    against the golden model): its FW and BW ``cycles`` beside the top's schedule
    (:func:`~nnrtl.hw.farnn.schedule.serialized_run_cycles`) and the cycle model's pass
    (:func:`nnrtl.gen.farnn.perf.pass_cycles`), on :data:`ENGINE_CONFIGS` (two chains,
    and four, where the serializer holds the units).
``f9``
    Fig. 9's utilization (5 x 1,024 LSTM cells, T = 1,600, batch 1/2/4) beside the
    paper's 82.8 / 88.0 / 92.5 %, with and without double-buffered weights, for the
    paper's 1,024-PE design, its 768-PE 8K design and the presets: the engine as built
    and with a unit that overlaps runs (:func:`.bench_model.f9_rows`).
``time``
    The FPGA part's time per training step against cells and against sequence length
    (Figs. 7-8's shapes; PNG plots), :func:`.bench_model.time_rows`.
``table2``
    PEs per board and resources per PE and per chain, VU9P and VCU128, LSTM 1,024 and GRU
    1,280 (:func:`.bench_model.table2_rows`, the Yosys figures of
    :mod:`nnrtl.gen.farnn.resources`), and Yosys run on a PE and a chain of two, with logic
    levels (:func:`.bench_model.yosys_rows`: some 90 s, then cached).
``hybrid``
    Figs. 7, 8 and 10 as a system, the paper's GPU modelled beside the engine's cycle
    model, each row with its bound (:mod:`.bench_hybrid`; ``farnn_hybrid.png``); with a
    CUDA GPU also ``hybrid_measured``, the GPU's part measured there.
``gpu``
    The same LSTM layers' training step in PyTorch at batch 1/2/4 (:mod:`.bench_gpu`; on
    the CPU the sequence is scaled, which the JSON says).
"""

import json
import os
import time
from pathlib import Path

from nnrtl.hw.arith.float_format import FP32

__all__ = ["PAPER_SHAPES", "ENGINE_CONFIGS", "run_shape", "bench_slices",
           "engine_rows", "bench_farnn", "markdown_farnn"]

#: name: (MVMUnit parameters, split_last of the run, the paper's MAC cycles).
PAPER_SHAPES = {
    "256 PEs": (dict(chains=16, chain_length=16, weight_depth=4096, split=1), False, 4096),
    "768 PEs": (dict(chains=16, chain_length=48, weight_depth=8192, split=2), False, 2048),
    "768 PEs, split 2": (dict(chains=16, chain_length=48, weight_depth=8192, split=2), True,
                         1536),
}

#: The matrix of the paper's example.
ROWS = COLUMNS = 1024


def run_shape(name, *, seed=1, log=None):
    """Simulate one MVM pass of :data:`PAPER_SHAPES` ``[name]``; returns its row (module
    docstring). Raises :class:`~nnrtl.sim.runner.SimulationError` on a protocol failure
    of the bench; a wrong value is ``bit_exact: False`` in the row."""
    from nnrtl.sim.runner import simulate
    from nnrtl.sim.tb.farnn.tops import MVMUnitTop

    unit, split_last, paper = PAPER_SHAPES[name]
    top = f"farnn_mvm_L{unit['chain_length']}_s{unit['split']}_d{unit['weight_depth']}"
    result = simulate(MVMUnitTop(FP32, **unit), test_module="nnrtl.sim.tb.farnn.mvm",
                      params={"unit": unit, "n_out": ROWS, "n_in": COLUMNS, "batch": 1,
                              "steps": 1, "split_last": split_last},
                      seed=seed, name=top, log=log)
    run = result["runs"][0]
    return {
        "shape": name, "pes": unit["chains"] * unit["chain_length"],
        "chain_length": unit["chain_length"], "split": 2 if split_last else 1,
        "weight_depth": unit["weight_depth"], "rounds": result["rounds"],
        "words_per_pe": result["words_per_pe"], "bit_exact": result["bit_exact"],
        "mac_cycles": run["mac_cycles"], "paper_mac_cycles": paper,
        "cycles": run["cycles"], "model_cycles": run["model_cycles"],
        "load_cycles": result["load_cycles"],
        "build_seconds": result["build_seconds"], "build_cached": result["build_cached"],
        "run_seconds": result["run_seconds"],
    }


def markdown(rows):
    """The bench table of :func:`bench_slices`' rows."""
    lines = ["## FARNN slice arithmetic in RTL cycles (1,024 x 1,024, one MVM unit of 16 "
             "chains, Verilator)", "",
             "| PEs | L | split | rounds | words/PE | RTL MAC cycles | paper | RTL cycles "
             "| model cycles | load cycles | bit-exact | build s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['pes']} | {row['chain_length']} | {row['split']} | "
                     f"{row['rounds']} | {row['words_per_pe']:,} | {row['mac_cycles']:,} | "
                     f"{row['paper_mac_cycles']:,} | {row['cycles']:,} | "
                     f"{row['model_cycles']:,} | {row['load_cycles']:,} | "
                     f"{'yes' if row['bit_exact'] else 'NO'} | "
                     f"{row['build_seconds']:.0f}{' (cached)' if row['build_cached'] else ''} |")
    lines += ["", "RTL cycles: from the first vector element's handshake to the last result "
              "beat's; MAC cycles: the unit's counter. The 768-PE rows run on one unit built "
              "with split 2 (the unsplit run's beats pass its fold adders too)."]
    return "\n".join(lines) + "\n"


def bench_slices(out, *, names=None, log=None):
    """Run the shapes ``names`` (default every one) of :data:`PAPER_SHAPES`; write
    ``out/farnn_slices.json`` and ``.md``; return ``(rows, markdown)``."""
    rows = [run_shape(name, log=log) for name in (names or PAPER_SHAPES)]
    text = markdown(rows)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "farnn_slices.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "farnn_slices.md").write_text(text)
    return rows, text


#: The scaled engines of the ``engine`` part: name: FarnnConfig fields (the first is
#: ``tests/farnn/sim/test_farnn_verilator.py``'s, whose Verilator build is usually cached).
ENGINE_CONFIGS = {
    "gru-s2-split-b2": dict(cell="gru", input_size=3, hidden_size=5, seq_len=3, batch=2,
                            chains=2, chain_length=2, split=2, layers=1),
    "lstm-c4-split-b2": dict(cell="lstm", input_size=3, hidden_size=9, seq_len=3, batch=2,
                             chains=4, chain_length=2, split=2, layers=1),
}

#: ``NNRTL_BENCH_FARNN`` words: the full-size MVM runs they add.
SLOW_SLICES = {"slices256": "256 PEs", "slices768": ("768 PEs", "768 PEs, split 2")}


def engine_rows(names=None, *, log=None):
    """Simulate each engine of :data:`ENGINE_CONFIGS` (gapless, one FW and one BW pass);
    rows of its measured cycles beside the schedule's and the model's."""
    from ....boards import get_board
    from ....hw.farnn import FarnnConfig
    from ....hw.farnn.schedule import serialized_run_cycles
    from ...engines import SimRequest
    from ..engine import simulate
    from ..perf import pass_cycles

    rows = []
    for name in names or ENGINE_CONFIGS:
        config = FarnnConfig(**ENGINE_CONFIGS[name])
        start = time.monotonic()
        result = simulate(SimRequest(config, get_board("vu9p"), seed=1,
                                     backpressure="none", log=log))
        seconds = time.monotonic() - start
        for phase in result["phases"]:
            rows.append({
                "engine": name, "chains": config.chains, "phase": phase["phase"],
                "bit_exact": result["bit_exact"], "cycles": phase["cycles"],
                "schedule_cycles": serialized_run_cycles(config, phase["phase"],
                                                         config.seq_len),
                "model_cycles": pass_cycles(config, phase["phase"]).compute,
                "seconds": round(seconds, 1)})
    return rows


def _slow_words():
    words = [w for w in os.environ.get("NNRTL_BENCH_FARNN", "").split(",") if w]
    unknown = sorted(set(words) - set(SLOW_SLICES))
    if unknown:
        from ...errors import UsageError
        raise UsageError(f"NNRTL_BENCH_FARNN ({','.join(unknown)}) must name parts of "
                         f"{', '.join(SLOW_SLICES)}")
    names = []
    for word in words:
        value = SLOW_SLICES[word]
        names += [value] if isinstance(value, str) else list(value)
    return names


def _cuda():
    import torch
    return torch.cuda.is_available()


def bench_farnn(out, *, engines=None, gpu=True, gpu_options=None, slow=None, yosys=True,
                log=None):
    """Every part of the module docstring; writes the plots under ``out``; returns the
    result dict (:func:`markdown_farnn` renders it). ``engines``: names of
    :data:`ENGINE_CONFIGS` (``()``: none); ``gpu_options``: :func:`.bench_gpu.gpu_baseline`
    keywords; ``slow``: :data:`PAPER_SHAPES` names to run in RTL (default from
    ``NNRTL_BENCH_FARNN``); ``yosys``: whether to run Yosys on a PE and a chain."""
    from .bench_gpu import gpu_baseline
    from .bench_hybrid import hybrid_rows, plot_hybrid
    from .bench_model import (f9_rows, plot_times, slice_rows, table2_rows, time_rows,
                              yosys_rows)

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"slices": slice_rows(), "f9": f9_rows(), "time": time_rows(),
              "table2": table2_rows()}
    result["plots"] = plot_times(result["time"], out)
    result["hybrid"] = hybrid_rows()
    result["plots"].append(plot_hybrid(result["hybrid"], out))
    if gpu and _cuda():
        result["hybrid_measured"] = hybrid_rows(device="cuda")
        result["plots"].append(plot_hybrid(result["hybrid_measured"], out,
                                           "farnn_hybrid_measured.png"))
    slow = _slow_words() if slow is None else list(slow)
    result["slices_rtl"] = bench_slices(out, names=slow, log=log)[0] if slow else []
    result["engine"] = engine_rows(engines, log=log) if engines != () else []
    result["yosys"] = yosys_rows(log=log) if yosys else []
    if gpu:
        result["gpu"] = gpu_baseline(**(gpu_options or {}))
        fpga = {r["batch"]: r for r in result["f9"]
                if r["design"] == "paper 1,024 PEs (L = 16, 4K)"}
        for row in result["gpu"]["rows"]:
            match = fpga.get(row["batch"])
            row["fpga_ms"] = match["ms"] if match else None
    return result

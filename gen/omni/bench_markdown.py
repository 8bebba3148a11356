"""η-LSTM bench: the markdown of :func:`nnrtl.gen.omni.bench.bench_omni`'s result, each figure
beside the paper's, and its two plots (matplotlib, Agg)."""

__all__ = ["markdown_omni", "plot_utilization", "plot_memory"]

OPTIONS = ("baseline", "ms1", "ms2", "ms1+ms2")


def _utilization(result):
    lines = ["## PE utilization: dynamic (R2A) against static allocation", "",
             "Every task timed by the channel cycle model (exact against the Channel RTL); "
             "static: the workload-estimate split, static TREC-10: TREC-10's split on "
             "every shape (Static-Arch). The paper gives no utilization figures.", "",
             "| shape | scale | options | EW channels | static | static TREC-10 | dynamic "
             "| gain | swings | dynamic cycles |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in result["utilization"]:
        lines.append(f"| {row['shape']} | {row['scale']} | {row['options']} | "
                     f"{row['ew_channels']} | {100 * row['static']:.1f}% | "
                     f"{100 * row['static_trec10']:.1f}% | {100 * row['dynamic']:.1f}% | "
                     f"{row['gain']:.3f}x | {row['swings']} | {row['dynamic_cycles']:,} |")
    return lines + [""]


def _memory(result):
    memory = result["memory"]
    average = memory["rows"]["average"]
    lines = ["## Memory footprint and data movement (average of the six Table I shapes)",
             "", "| | footprint | paper | weights moved | paper | activations moved | "
             "paper | intermediates moved | paper |", "|---|---:|---:|---:|---:|---:|---:|"
             "---:|---:|"]
    for label in ("ms1", "ms2", "ms1+ms2"):
        mine, paper = average[label], memory["paper_data_movement"][label]
        lines.append(f"| {label} | {mine['footprint']:.1f}% | "
                     f"{memory['paper_footprint'][label]:.1f}% | "
                     f"{mine['weight_matrices']:.1f}% | {paper[0]:.1f}% | "
                     f"{mine['activations']:.1f}% | {paper[1]:.1f}% | "
                     f"{mine['intermediates']:.1f}% | {paper[2]:.1f}% |")
    lines += ["", "Per shape (footprint reduction with MS1 / MS2 / both; skipped cells):",
              "", "| shape | MS1 | MS2 | both | skipped |", "|---|---:|---:|---:|---:|"]
    for name, row in memory["rows"].items():
        if name == "average":
            continue
        lines.append(f"| {name} | {row['ms1']['footprint']:.1f}% | "
                     f"{row['ms2']['footprint']:.1f}% | {row['ms1+ms2']['footprint']:.1f}% "
                     f"| {100 * row['skipped']:.1f}% |")
    return lines + [""]


def _accumulator(result):
    acc = result["accumulator"]
    return ["## Streaming accumulator (8-stage fp32 adder)", "",
            f"{acc['inputs']} inputs: latency {acc['latency']} cycles (reduction "
            f"{acc['reduction_cycles']}); overhead {acc['overhead_vs_ip']:.2f}% over the "
            f"Xilinx IP's {acc['inputs']} + 20 (paper: < {acc['paper_overhead_below']}%), "
            f"{acc['overhead_vs_inputs']:.2f}% over {acc['inputs']}. Channel cycle model: "
            f"one row of {acc['inputs']} on one PE {acc['channel_one_row_cycles']} cycles "
            f"(queues included), back-to-back rows every {acc['channel_row_period']}.", ""]


def _resources(result):
    if "resources" not in result:
        return ["## Yosys resources", "", "Not run in the quick set.", ""]
    resources = result["resources"]
    paper = resources["paper_accumulator"]
    lines = ["## Yosys resources (synth_xilinx, UltraScale+)", "",
             "| unit | LUT | FF | DSP | BRAM36 | logic levels | hierarchy | seconds | "
             "paper (Table III) |", "|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for key in ("accumulator", "pe", "channel"):
        row = resources[key]
        beside = f"{paper['lut']} LUT / {paper['ff']} FF" if key == "accumulator" else "-"
        if "error" in row:
            lines.append(f"| {key} | failed: {row['error']} | | | | | | | {beside} |")
            continue
        lines.append(f"| {key} | {row['lut']:g} | {row['ff']:g} | {row['dsp']:g} | "
                     f"{row['bram36']:g} | {row['logic_levels']} | {row['hierarchy']} | "
                     f"{row['seconds']} | {beside} |")
    return lines + [""]


def markdown_omni(result):
    """The bench's markdown."""
    lines = [f"# η-LSTM (Omni-PE) bench{' (quick set)' if result['quick'] else ''}", "",
             f"{result['seconds']} s.", ""]
    lines += _utilization(result) + _memory(result) + _accumulator(result)
    lines += _resources(result)
    lines += ["Plots: " + ", ".join(f"`{name}`" for name in result["plots"]), ""]
    return "\n".join(lines)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_utilization(result, path):
    """Static and dynamic utilization per shape (baseline options), scaled and full."""
    plt = _pyplot()
    rows = [r for r in result["utilization"] if r["options"] == "baseline"]
    labels = [f"{r['shape']}\n({r['scale']})" for r in rows]
    figure, axes = plt.subplots(figsize=(8, 4))
    positions = range(len(rows))
    axes.bar([p - 0.2 for p in positions], [100 * r["static"] for r in rows], 0.4,
             label="static")
    axes.bar([p + 0.2 for p in positions], [100 * r["dynamic"] for r in rows], 0.4,
             label="dynamic (R2A)")
    axes.set_xticks(list(positions), labels, fontsize=8)
    axes.set_ylabel("PE utilization (%)")
    axes.set_title("η-LSTM PE utilization (channel cycle model)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def plot_memory(result, path):
    """Average reductions (footprint, data movement by category) beside the paper's."""
    plt = _pyplot()
    memory = result["memory"]
    average = memory["rows"]["average"]
    labels, mine, paper = [], [], []
    for label in ("ms1", "ms2", "ms1+ms2"):
        values = average[label]
        labels += [f"{label}\nfootprint", f"{label}\nweights", f"{label}\nactivations",
                   f"{label}\nintermediates"]
        mine += [values["footprint"], values["weight_matrices"], values["activations"],
                 values["intermediates"]]
        paper += [memory["paper_footprint"][label], *memory["paper_data_movement"][label]]
    figure, axes = plt.subplots(figsize=(10, 4))
    positions = range(len(labels))
    axes.bar([p - 0.2 for p in positions], mine, 0.4, label="model")
    axes.bar([p + 0.2 for p in positions], paper, 0.4, label="paper")
    axes.set_xticks(list(positions), labels, fontsize=6)
    axes.set_ylabel("reduction (%)")
    axes.set_title("MS1 / MS2 memory footprint and data movement reductions")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path

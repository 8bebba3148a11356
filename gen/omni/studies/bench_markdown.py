"""η-LSTM bench: the markdown of :func:`nnrtl.gen.omni.studies.bench.bench_omni`'s result, each figure
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


def _accuracy(result):
    from .accuracy_report import markdown_tables
    accuracy = result.get("accuracy")
    title = "Accuracy against PyTorch (MS1 / MS2; issue 13: within 1 %)"
    if accuracy is None:
        return [f"## {title}", "", "Not run in the quick set (NNRTL_BENCH_OMNI_ACCURACY "
                "names recorded sweeps; figures and commands: `nnrtl.gen.omni.studies.accuracy`).",
                ""]
    if accuracy["source"] == "recorded":
        note = (f"Recorded sweeps ({accuracy['runs']} runs): "
                + ", ".join(f"`{path}`" for path in accuracy["paths"]) + ".")
    else:
        note = ("The tiny tasks (`quick_sweep`; the full-size figures: "
                "`nnrtl.gen.omni.studies.accuracy`).")
    tables = markdown_tables(accuracy["rows"], title).splitlines()
    return tables[:2] + [note, ""] + tables[2:] + [""]


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
    lines += _accuracy(result)
    lines += _resources(result)
    if "rtl_allocation" in result:
        from .r2a_rtl import markdown
        lines += [markdown(result["rtl_allocation"])]
    if "bandwidth" in result:
        from .bandwidth import markdown as bandwidth_table
        lines += ["## HBM bandwidth: what bounds a full-size iteration", "",
                  "Table I at full size, baseline, 40 x 32 PEs at 500 MHz: the compute "
                  "cycles of the R2A model beside the memory cycles of the step's bytes "
                  "at each port count (`python -m nnrtl.gen.omni.studies.bandwidth`).", "",
                  bandwidth_table(result["bandwidth"])]
    lines += ["Plots: " + ", ".join(f"`{name}`" for name in result["plots"]), ""]
    return "\n".join(lines)


def _bars(path, labels, series, ylabel, title, width=8.0):
    """A grouped bar chart: ``series`` is ``[(name, values)]``, one bar per label each
    (:func:`nnrtl.gen.report.new_figure`)."""
    from ...report import new_figure
    figure = new_figure(width, 4.0)
    axes = figure.add_subplot()
    bar = 0.8 / len(series)
    for index, (name, values) in enumerate(series):
        offset = (index - (len(series) - 1) / 2) * bar
        axes.bar([p + offset for p in range(len(labels))], values, bar, label=name)
    axes.set_xticks(list(range(len(labels))), labels, fontsize=8 if width < 9 else 6)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize=8)
    figure.savefig(path)
    return path


def plot_utilization(result, path):
    """Static and dynamic utilization per shape (baseline options), scaled and full."""
    rows = [r for r in result["utilization"] if r["options"] == "baseline"]
    return _bars(path, [f"{r['shape']}\n({r['scale']})" for r in rows],
                 [("static", [100 * r["static"] for r in rows]),
                  ("dynamic (R2A)", [100 * r["dynamic"] for r in rows])],
                 "PE utilization (%)", "η-LSTM PE utilization (channel cycle model)")


def plot_memory(result, path):
    """Average reductions (footprint, data movement by category) beside the paper's."""
    memory = result["memory"]
    labels, mine, paper = [], [], []
    for label in ("ms1", "ms2", "ms1+ms2"):
        values = memory["rows"]["average"][label]
        labels += [f"{label}\n{kind}" for kind in ("footprint", "weights", "activations",
                                                   "intermediates")]
        mine += [values[key] for key in ("footprint", "weight_matrices", "activations",
                                         "intermediates")]
        paper += [memory["paper_footprint"][label], *memory["paper_data_movement"][label]]
    return _bars(path, labels, [("model", mine), ("paper", paper)], "reduction (%)",
                 "MS1 / MS2 memory footprint and data movement reductions", width=10.0)

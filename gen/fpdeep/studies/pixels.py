"""The FPDeep bench's line-buffer sweep: what ``nnrtl map fpdeep --network NAME --fpgas N
--board vc709`` returns (fixed16, 150 Gb/s links, every free option chosen, every buffer
checked: :func:`~nnrtl.gen.fpdeep.search.choose_mapping`) at the FPGA counts of the paper's
scaling claims (:data:`SWEEP_FPGAS`), each mapping also run through the cluster simulator.

Per network and count: the period and its bound, GOPS in all and per FPGA, the idle share,
the widest line buffer of each layer that takes more than one pixel a cycle
(``line_pixels``, :func:`~nnrtl.gen.fpdeep.cost.line_pixels_for`), the idlest node (its idle
share, its layers and their whole cycles per output pixel), the simulated period
and its ratio to the mapper's; beside it the paper's claim (labelled as the paper's): Table
6's GOPS per FPGA times the count while the count is within its 150 Gb/s knee (Sec. 6.3.3:
"linearity up to 83, 56, and 70 FPGAs"), and idle stages under 5%.

The bench runs it as its ``pixels`` part (:mod:`.bench`); alone, ``python -m
nnrtl.gen.fpdeep.studies.pixels --out DIR [--networks alexnet,vgg16] [--fpgas 15,40]``
writes ``pixels.json``, ``pixels.md`` and ``fpdeep_pixels.png`` (all three networks at
:data:`SWEEP_FPGAS`, 6 images a simulation: minutes).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["SWEEP_FPGAS", "pixels_rows", "pixels_markdown", "plot_pixels", "main"]

#: The FPGA counts of the sweep: Table 6's 15, the paper's three knees at 150 Gb/s and
#: counts between.
SWEEP_FPGAS = (15, 25, 30, 40, 56, 70, 83)


def _simulated(mapping, images):
    from ..cluster import ClusterConfig, load_plan, simulate

    with tempfile.TemporaryDirectory(prefix="nnrtl-fpdeep-pixels-") as scratch:
        path = Path(scratch) / "mapping.json"
        path.write_text(json.dumps(mapping.as_json(), default=str))
        return simulate(load_plan(path), ClusterConfig(images=images))


def pixels_rows(networks, fpgas, board, paper, link_gbps=150.0, images=4, log=None):
    """One row per network and FPGA count (module docstring); ``paper`` is the bench's
    :data:`~.bench.PAPER`."""
    from ...errors import UsageError
    from ..network import builtin
    from ..search import choose_mapping

    rows = []
    for name in networks:
        knee = paper["knees"]["150"].get(name)
        per_fpga = paper["table6"]["gops_per_fpga"].get(name)
        for n in fpgas:
            began = time.monotonic()
            row = {"network": name, "fpgas": n, "link_gbps": link_gbps,
                   "precision": "fixed16",
                   "paper_gops_total": (per_fpga * n if knee is not None and n <= knee
                                        else None),
                   "paper_idle_below": paper["idle"]["below"]}
            try:
                mapping = choose_mapping(builtin(name), n, board, precision="fixed16",
                                         link_gbps=link_gbps)
            except UsageError as error:
                row["refused"] = str(error).splitlines()[0]
                rows.append(row)
                continue
            widths = {}
            for node in mapping.nodes:
                for c in node.segments:
                    if c.line_pixels > 1:
                        widths[c.layer] = max(widths.get(c.layer, 1), c.line_pixels)
            idlest = max(mapping.nodes, key=mapping.node_idle)
            found = _simulated(mapping, images)
            row.update({
                "refused": None, "period_cycles": mapping.period, "bound": mapping.bound,
                "compute_period_cycles": mapping.compute_period,
                "link_period_cycles": mapping.link_period,
                "line_period_cycles": mapping.line_period,
                "gops_per_fpga": mapping.gops_per_fpga,
                "gops_total": mapping.gops_per_fpga * n, "idle_share": mapping.idle,
                "line_pixels": widths, "images": images,
                "idlest_node": {"node": idlest.node, "idle_share": mapping.node_idle(idlest),
                                "segments": [[c.layer, c.cycles // c.pixels]
                                             for c in idlest.segments]},
                "simulated_period_cycles": found["period_cycles"],
                "simulated_over_mapper": found["period_cycles"] / mapping.period,
                "simulated_idle_share": found["idle_share"],
                "buffers_within_depth": bool(found["act_ram_within_depth"]
                                             and found["pab_within_depth"]),
                "seconds": round(time.monotonic() - began, 1)})
            rows.append(row)
            if log is not None:
                log(f"pixels: {name} N={n}: {row['gops_total'] / 1e3:.1f} TOPS, "
                    f"{mapping.bound}-bound, idle {100 * mapping.idle:.2f}%, line pixels "
                    f"{widths or 1}, simulated/mapper {row['simulated_over_mapper']:.4f}")
    return rows


def pixels_markdown(rows):
    """The sweep's markdown section."""
    lines = ["## Scaling with each line buffer as wide as its DSP share needs "
             "(storage checked, fixed16, 150 Gb/s)", "",
             "What `nnrtl map fpdeep --network NAME --fpgas N --board vc709 --link-gbps 150` "
             "returns, and the cluster simulator on that mapping. `line pixels`: the widest "
             "line buffer of each layer taking more than one input pixel a cycle (modelled; "
             "the RTL line buffer takes one). Paper: Table 6's GOPS/FPGA x N up to its "
             "150 Gb/s knee (Sec. 6.3.3, its claim of linear scaling), idle stages < 5%.", "",
             "| network | FPGAs | TOPS (paper's claim) | GOPS/FPGA | bound | idle | line "
             "pixels | idlest node: idle, layer (cycles a pixel) | simulated / mapper period "
             "| buffers within depth |",
             "|---|---:|---:|---:|---|---:|---|---|---:|---|"]
    for r in rows:
        claim = "-" if r["paper_gops_total"] is None else f"{r['paper_gops_total'] / 1e3:.1f}"
        if r["refused"]:
            lines.append(f"| {r['network']} | {r['fpgas']} | refused ({claim}) | - | - | - | "
                         f"- | - | - | {r['refused']} |")
            continue
        widths = ", ".join(f"{k} {v}" for k, v in r["line_pixels"].items()) or "1"
        node = r["idlest_node"]
        idlest = (f"node {node['node']}: {100 * node['idle_share']:.1f}%, "
                  + ", ".join(f"{layer} ({cycles})" for layer, cycles in node["segments"]))
        lines.append(
            f"| {r['network']} | {r['fpgas']} | {r['gops_total'] / 1e3:.1f} ({claim}) | "
            f"{r['gops_per_fpga']:,.0f} | {r['bound']} | {100 * r['idle_share']:.2f}% | "
            f"{widths} | {idlest} | {r['simulated_over_mapper']:.4f} | "
            f"{'yes' if r['buffers_within_depth'] else 'NO'} |")
    return lines + [""]


def plot_pixels(rows, path):
    """TOPS against FPGA count per network, the paper's claimed points beside."""
    from .bench_markdown import _pyplot

    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for name, colour in zip(dict.fromkeys(r["network"] for r in rows),
                            ("tab:blue", "tab:orange", "tab:green")):
        mine = [r for r in rows if r["network"] == name and not r["refused"]]
        axes.plot([r["fpgas"] for r in mine], [r["gops_total"] / 1e3 for r in mine],
                  marker="o", color=colour, label=f"{name} (mapper, storage checked)")
        claim = [r for r in rows if r["network"] == name and r["paper_gops_total"]]
        axes.scatter([r["fpgas"] for r in claim], [r["paper_gops_total"] / 1e3 for r in claim],
                     marker="x", color=colour, label=f"{name}: the paper's claim")
    axes.set_xlabel("FPGAs (VC709)")
    axes.set_ylabel("TOPS (training, fixed16)")
    axes.set_title("FPDeep scaling at 150 Gb/s: mapper beside the paper's claim")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main(argv=None):
    """The sweep alone (module docstring)."""
    from ....boards import get_board
    from .bench import PAPER

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--networks", default="alexnet,vgg16,vgg19")
    parser.add_argument("--fpgas", default=",".join(map(str, SWEEP_FPGAS)))
    parser.add_argument("--images", type=int, default=6)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = pixels_rows(args.networks.split(","), [int(n) for n in args.fpgas.split(",")],
                       get_board("vc709"), PAPER, images=args.images,
                       log=lambda line: print(line, file=sys.stderr, flush=True))
    (args.out / "pixels.json").write_text(json.dumps(rows, indent=1))
    (args.out / "pixels.md").write_text("\n".join(pixels_markdown(rows)))
    plot_pixels(rows, args.out / "fpdeep_pixels.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""FPDeep bench beside the paper: ``python -m nnrtl.gen.bench --only fpdeep`` (the part is
found through the ``nnrtl.benches`` entry point), or ``python -m nnrtl.gen.fpdeep.studies.bench --out DIR
[--quick]``. Writes ``fpdeep.json``/``fpdeep.md`` (through the driver) and two PNG plots
in the output directory. ``NNRTL_BENCH_FPDEEP=quick`` (or ``quick=True``) runs
:data:`QUICK`, the set the test uses; the default is :data:`FULL`. The parts:
:func:`bench_fpdeep`.
"""

import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from ...errors import UsageError
from .checked import SETTINGS, checked_rows
from .pixels import SWEEP_FPGAS, pixels_rows, plot_pixels

__all__ = ["PAPER", "BenchSet", "FULL", "QUICK", "table6_rows", "scaling_rows", "knees",
           "cluster_rows", "resource_rows", "bench_fpdeep", "bench", "main"]

#: The paper's figures, once (Wang et al., FPDeep).
PAPER = {
    "source": ("Wang et al., FPDeep: Scalable Acceleration of CNN Training on "
               "Deeply-Pipelined FPGA Clusters"),
    "table6": {
        "where": "Table 6 (Sec. 6.3.2): FPDeep on 15 XC7VX690T (VC709), fp32",
        "gops_per_fpga": {"alexnet": 1157, "vgg16": 1197, "vgg19": 1220},
        "hours_per_epoch": {"alexnet": 0.17, "vgg16": 2.19, "vgg19": 2.76},
    },
    "dsp_use": {"where": "Sec. 6.3.1, Fig. 14(C)(F)(I): 'roughly 80%' on every FPGA",
                "value": 0.80},
    "max_link_gbps": {"where": "Sec. 6.3.1: highest link need among the 15 FPGAs, over the "
                               "three networks", "fpgas": 15, "value": 18.6},
    "idle": {"where": "Sec. 6.3.3, Fig. 15(B)(D)(F): 5 to 85 FPGAs 'always under 5%'; "
                      "'more than 30 FPGAs ... stable with fluctuation between 0.5% to 1%'",
             "fpgas": [5, 85], "below": 0.05, "beyond": 30, "band": [0.005, 0.01]},
    "knees": {"where": "Sec. 6.3.3, Fig. 15(A)(C)(E): 'with 150 Gbps ... linearity up to "
                       "83, 56, and 70 FPGAs'; abstract, Sec. 1, Sec. 7: 'with 250 Gb/s "
                       "bidirectional bandwidth per FPGA ... linearity up to 100 FPGAs'",
              "150": {"alexnet": 83, "vgg16": 56, "vgg19": 70},
              "250": {"alexnet": 100, "vgg16": 100, "vgg19": 100}},
}

#: Training images per epoch (ImageNet; [U] in the paper, spec §4.4).
EPOCH_IMAGES = 1_281_167
BOARD = "vc709"
#: The paper's setting: its cost model with 32-bit words (spec §4.8).
PAPER_PRECISION, PAPER_WORD_BITS = "fixed16", 32
CONVENTIONS = ("link", "fpga")


@dataclasses.dataclass(frozen=True)
class BenchSet:
    """What the bench runs.

    Attributes
    ----------
    networks : tuple of str
        Built-in networks (224 x 224 images).
    table_fpgas : int
        FPGAs of the Table 6 rows.
    fpgas : tuple of int
        FPGA counts of the scaling and idle rows, increasing.
    gbps : tuple of float
        Link budgets (Gb/s per link and direction).
    cluster_images, cluster_ranks : int
        Samples and MPI ranks of each cluster-simulator point.
    checked : tuple
        Settings of the storage-checked Table 6 (:data:`.checked.SETTINGS`).
    sweep_fpgas : tuple of int
        FPGA counts of the line-buffer sweep (:mod:`.pixels`).
    """

    networks: tuple
    table_fpgas: int
    fpgas: tuple
    gbps: tuple
    cluster_images: int
    cluster_ranks: int
    checked: tuple = SETTINGS
    sweep_fpgas: tuple = SWEEP_FPGAS

    def __post_init__(self):
        from ..network import BUILTIN
        for name in self.networks:
            if name not in BUILTIN:
                raise ValueError(f"networks must be built-in ({', '.join(BUILTIN)}), not "
                                 f"{name!r}")
        for name, value in (("table_fpgas", self.table_fpgas),
                            ("cluster_images", self.cluster_images),
                            ("cluster_ranks", self.cluster_ranks), *(("fpgas", n)
                                                                      for n in self.fpgas)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if not self.fpgas or list(self.fpgas) != sorted(set(self.fpgas)):
            raise ValueError(f"fpgas must be increasing, not {self.fpgas!r}")
        for g in self.gbps:
            if not isinstance(g, (int, float)) or isinstance(g, bool) or not g > 0:
                raise TypeError(f"gbps must be positive numbers, not {g!r}")


FULL = BenchSet(("alexnet", "vgg16", "vgg19"), 15, tuple(range(5, 101)), (150.0, 250.0), 6, 2)
QUICK = BenchSet(("alexnet",), 15, (5, 6, 7), (150.0, 250.0), 3, 2, SETTINGS[:2], (25,))


def _board():
    from ....boards import get_board
    return get_board(BOARD)


def _map(name, fpgas, precision=PAPER_PRECISION, link_gbps=None, check_storage=False,
         balance=True):
    from ..mapper import map_network
    from ..network import builtin
    return map_network(builtin(name), fpgas, _board(), precision=precision,
                       link_gbps=link_gbps, check_storage=check_storage,
                       word_bits=PAPER_WORD_BITS, balance=balance)


def _figures(mapping):
    dsp = [node.dsp / mapping.dsp for node in mapping.nodes]
    bram = [node.bram36 for node in mapping.nodes]
    gbps = mapping.boundary_gbps()
    return {
        "period_cycles": mapping.period, "bound": mapping.bound,
        "images_per_second": mapping.images_per_second,
        "gops_per_fpga": mapping.gops_per_fpga,
        "hours_per_epoch": EPOCH_IMAGES / mapping.images_per_second / 3600,
        "idle_share": mapping.idle,
        "dsp_use": {"min": min(dsp), "mean": sum(dsp) / len(dsp), "max": max(dsp)},
        "dsp_per_node": [node.dsp for node in mapping.nodes],
        "mac_units": sum(node.mac_units for node in mapping.nodes),
        "unit_budget": mapping.unit_budget, "budget_limited_by": mapping.budget_resource,
        "max_link_gbps": max((max(g) for g in gbps), default=0.0),
        "bram36_max": max(bram), "bram36_board": mapping.bram36,
        "storage_fits": not mapping.infeasible,
        "storage_refusals": len(mapping.infeasible),
        "first_refusal": mapping.infeasible[0] if mapping.infeasible else None,
        "fc_batch": mapping.fc_batch,
        "hosted_banks": sum(len(node.hosted) for node in mapping.nodes),
    }


def table6_rows(bench_set, link_gbps=150.0, log=None):
    """Table 6 (module docstring): one row per network and precision."""
    rows = []
    for name in bench_set.networks:
        for precision in ("fixed16", "fp32"):
            row = {"network": name, "fpgas": bench_set.table_fpgas,
                   "model": "paper" if precision == "fixed16" else "fp32",
                   "precision": precision, "word_bits": PAPER_WORD_BITS,
                   "link_gbps": link_gbps, "work_macs_per_sample": None}
            try:
                _map(name, bench_set.table_fpgas, precision, link_gbps, check_storage=True)
                row["refused"] = None
            except UsageError as error:
                row["refused"] = str(error)
            mapping = _map(name, bench_set.table_fpgas, precision, link_gbps)
            row["work_macs_per_sample"] = mapping.work
            row.update(_figures(mapping))
            row["paper_gops_per_fpga"] = PAPER["table6"]["gops_per_fpga"].get(name)
            row["paper_hours_per_epoch"] = PAPER["table6"]["hours_per_epoch"].get(name)
            row["gops_ratio_to_paper"] = row["gops_per_fpga"] / row["paper_gops_per_fpga"]
            rows.append(row)
            if log is not None:
                log(f"table6: {name} {precision}: {row['gops_per_fpga']:.0f} GOPS per FPGA"
                    + (" (refused: storage)" if row["refused"] else ""))
    return rows


def scaling_rows(bench_set, log=None):
    """The scaling and idle rows (module docstring): one per network and FPGA count."""
    from .. import links

    rows = []
    for name in bench_set.networks:
        began = time.monotonic()
        for n in bench_set.fpgas:
            mapping = _map(name, n, balance=False)
            bits, clock = mapping.model.word_bits, mapping.model.clock_hz
            roof = mapping.period
            row = {"network": name, "fpgas": n, "roof_period_cycles": roof,
                   "compute_period_cycles": mapping.compute_period,
                   "ddr_period_cycles": mapping.ddr_period,
                   "line_period_cycles": mapping.line_period,
                   "idle_share": mapping.idle,
                   "roof_gops_per_fpga": mapping.gops_per_fpga,
                   "roof_max_link_gbps": max((max(g) for g in mapping.boundary_gbps()),
                                             default=0.0),
                   "budgets": {}}
            for g in bench_set.gbps:
                entry = {}
                for convention in CONVENTIONS:
                    link = links.link_period(mapping.boundaries, bits, clock, g, convention)
                    period = max(roof, link)
                    entry[convention] = {
                        "link_period_cycles": link, "period_cycles": period,
                        "images_per_second": clock / period,
                        "gops_total": 2 * mapping.work * clock / period / 1e9,
                        "linear": link <= roof}
                row["budgets"][f"{g:g}"] = entry
            rows.append(row)
        if log is not None:
            log(f"scaling: {name}, {len(bench_set.fpgas)} FPGA counts "
                f"({time.monotonic() - began:.1f} s)")
    return rows


def knees(rows, gbps):
    """``{network: {budget: {convention: {"knee", "first_break", "linear_past_knee"}}}}``:
    the last count before the first link-bound one (``knee`` = the largest count when
    none is), the first link-bound count (``None``), and the counts past the knee that are
    linear again (the cuts move with the count)."""
    found = {}
    for row in rows:
        for g in gbps:
            for convention in CONVENTIONS:
                entry = found.setdefault(row["network"], {}).setdefault(f"{g:g}", {}) \
                    .setdefault(convention, {"knee": None, "first_break": None,
                                             "linear_past_knee": []})
                linear = row["budgets"][f"{g:g}"][convention]["linear"]
                if entry["first_break"] is None:
                    if linear:
                        entry["knee"] = row["fpgas"]
                    else:
                        entry["first_break"] = row["fpgas"]
                elif linear:
                    entry["linear_past_knee"].append(row["fpgas"])
    return found


def cluster_rows(bench_set, found, log=None):
    """The cluster-simulator points (module docstring) on ``bench_set.cluster_ranks``
    ranks, each beside the mapper's period and idle share at that budget."""
    from ..cluster import ClusterConfig, load_plan, run_cluster, simulate

    points = []
    for name in bench_set.networks:
        points.append((name, bench_set.table_fpgas, bench_set.gbps[0]))
        for g in bench_set.gbps:
            entry = found[name][f"{g:g}"]["link"]
            points += [(name, n, g) for n in (entry["knee"], entry["first_break"],
                                              bench_set.fpgas[-1]) if n is not None]
    points = list(dict.fromkeys(points))
    rows, roofs = [], {}
    with tempfile.TemporaryDirectory(prefix="nnrtl-fpdeep-bench-") as scratch:
        for name, n, g in points:
            mapping = _map(name, n, link_gbps=g)
            path = Path(scratch) / f"{name}_{n}_{g:g}.json"
            path.write_text(json.dumps(mapping.as_json(), default=str))
            ranks = min(bench_set.cluster_ranks, n)
            result, seconds = run_cluster(path, ClusterConfig(images=bench_set.cluster_images),
                                          ranks)
            if (name, n) not in roofs:
                # the roof as simulated: the mapping with links unlimited (the mapper's
                # compute roof, its segments sized for it), in this process (a result is
                # the same on any rank count), the RTL line buffer's refill included
                roof_path = Path(scratch) / f"{name}_{n}_roof.json"
                roof_path.write_text(json.dumps(_map(name, n).as_json(), default=str))
                roofs[name, n] = simulate(load_plan(roof_path), ClusterConfig(
                    images=bench_set.cluster_images))["period_cycles"]
            rows.append({
                "network": name, "fpgas": n, "link_gbps": g, "ranks": ranks,
                "images": bench_set.cluster_images,
                "period_cycles": result["period_cycles"],
                "mapper_period_cycles": mapping.period,
                "roof_period_cycles": max(mapping.compute_period, mapping.ddr_period,
                                          mapping.line_period),
                "mapper_bound": mapping.bound,
                "hosted_banks": sum(len(node.hosted) for node in mapping.nodes),
                "roof_simulated_period_cycles": roofs[name, n],
                "linear": result["period_cycles"] <= roofs[name, n] * (1 + 1e-9),
                "images_per_second": result["images_per_second"],
                "gops_per_fpga": result["gops_per_fpga"],
                "idle_share": result["idle_share"], "mapper_idle_share": mapping.idle,
                "max_link_gbps": result["max_link_gbps"],
                "fill_latency_cycles": result["fill_latency_cycles"],
                "seconds": round(seconds, 2)})
            if log is not None:
                log(f"cluster: {name} N={n} {g:g} Gb/s, {ranks} ranks: period "
                    f"{result['period_cycles']:,.1f} (mapper {mapping.period:,}), "
                    f"{seconds:.1f} s")
    return rows


def resource_rows():
    """The ``resources`` part (module docstring): one row per node shape."""
    from ..engine import vc709_alexnet_node
    from ..resources import SYNTH_FIGURES, resources

    capacity = _board().capacity
    rows = []
    for shape, single_pass in (("preset", False), ("single-pass", True)):
        config = vc709_alexnet_node(single_pass=single_pass)
        segment = config.segments[0]
        rows.append({
            "node": "vc709-alexnet", "shape": shape, "p": segment.p, "q": segment.q,
            "passes": segment.passes, "cycles_per_image": config.cycles,
            "model": resources(config),
            "yosys": SYNTH_FIGURES.get(f"vc709-alexnet/{shape}"),
            "board": {"lut": capacity.lut, "ff": capacity.ff, "dsp": capacity.dsp,
                      "bram36": capacity.bram36}})
    return rows


def _idle_summary(rows, networks):
    band = PAPER["idle"]
    lo, hi = band["fpgas"]
    summary = {}
    for name in networks:
        mine = [r for r in rows if r["network"] == name and lo <= r["fpgas"] <= hi]
        beyond = [r for r in mine if r["fpgas"] > band["beyond"]]
        summary[name] = {
            "fpgas": [min((r["fpgas"] for r in mine), default=None),
                      max((r["fpgas"] for r in mine), default=None)],
            "max_idle": max((r["idle_share"] for r in mine), default=None),
            "beyond_min": min((r["idle_share"] for r in beyond), default=None),
            "beyond_max": max((r["idle_share"] for r in beyond), default=None),
            "max_idle_all": max(r["idle_share"] for r in rows if r["network"] == name)}
    return summary


def bench_fpdeep(out, bench_set=FULL, log=None):
    """Run every part on ``bench_set``; writes the plots under ``out``; returns the
    result (JSON-able).

    Notes
    -----
    The parts:

    ``checked``
        Table 6 storage checked (:mod:`.checked`): what ``nnrtl map fpdeep`` returns with
        no option for each network in fixed16, fp32 and the paper's 32-bit words, its bound
        and where its Act-RAMs wait; a refusal with the least FPGA count that fits.
    ``table6``
        Model only (storage not required). AlexNet, VGG-16, VGG-19 on 15 VC709s (Table 6, Fig. 14): GOPS per FPGA, DSP use per
        FPGA, idle stages, busiest link, hours per epoch, storage, under the paper's
        assumptions (cost model ``fixed16``: 1 DSP48E1 per MAC at 200 MHz, with the paper's
        32-bit words in the buffers and on the links, spec §3.9/§4.8) and in fp32 (this
        project's fp32 MAC, :data:`~nnrtl.gen.fpdeep.cost.COST_MODELS`, 32-bit words): a
        mapping the storage refuses
        is reported with the mapper's reason, and beside it the figures the same mapping would
        give were the storage there (``check_storage=False``), marked as such.
    ``scaling``
        Every FPGA count of the set (default 5..100), the paper's setting at 150 Gb/s,
        250 Gb/s and unlimited links: the period the compute (and the FC weights' DDR) allows
        (the roof), the period each link budget allows (:mod:`nnrtl.gen.fpdeep.links`),
        throughput, idle stages at the roof (spec §2.8: ``1 − work / (MAC units · T)``),
        busiest link. One mapping per count (links unlimited): the link budget changes no cut,
        only the period. The scan maps without parameter balancing (``balance=False``, a third
        of the time): in the paper's setting every node's storage overflows (the Act-RAMs hold
        the FC batch's samples, see Table 6's refusals), so no node has room to host banks and
        balancing moves nothing; the Table 6 and cluster rows map with it and report
        ``hosted_banks`` (0).
        The knee at a budget is the last count before the first one whose links set the period
        (the paper's "linear up to"), under the link convention of spec §2.10 (``link``: per
        link and direction, the default) and, for comparison, ``fpga`` (one FPGA's links
        summed).
    ``cluster``
        A few points simulated by the cluster simulator (:mod:`nnrtl.gen.fpdeep.cluster`) on 2
        MPI ranks: per network the Table 6 count at the first budget, and at each budget the
        knee, the first count past it and the largest count; its period and idle stages beside
        the mapper's; ``linear``: the simulated period is the simulated roof's (the mapping of
        that count with links unlimited, simulated: the mapper's compute roof plus the line
        buffers' refill at their mapped pixels a cycle, :mod:`nnrtl.gen.fpdeep.cluster_node`).
    ``pixels``
        The line-buffer sweep (:mod:`.pixels`): what ``nnrtl map`` returns in fixed16 at
        150 Gb/s for each count of ``sweep_fpgas`` (each line buffer as many pixels a cycle
        as its DSP share needs, storage checked), the cluster simulator's period beside the
        mapper's, the paper's claimed points beside.
    ``resources``
        The ``vc709-alexnet`` node in its preset shape (the mapper's, ``P = 3, Q = 21``) and
        single-pass (``P = 1, Q = S_IC``): the resource model's DSP, LUT and BRAM36
        (:func:`nnrtl.gen.fpdeep.resources.resources`, computed here) beside Yosys' counts of
        ``nnrtl synth`` (:data:`nnrtl.gen.fpdeep.resources.SYNTH_FIGURES`: recorded, an hour of
        Yosys is no bench part), and the VC709's capacity.
    ``plots``
        ``fpdeep_idle.png`` (idle stages against FPGA count) and ``fpdeep_scaling.png``
        (throughput against FPGA count, the paper's knees marked), ``fpdeep_pixels.png``
        (the sweep's TOPS against FPGA count, the paper's claimed points beside), matplotlib
        with Agg.

    [U] decisions: idle stages are reported at the roof (the pipeline's balance, what the paper
    plots for 5-85 FPGAs), not at a link-bound period, where idle grows with the link's share;
    the epoch is ImageNet's 1,281,167 training images (the paper does not name its data set,
    spec §4.4), an image's work the training MACs of
    :attr:`~nnrtl.gen.fpdeep.network.Chain.work`.
    """
    from .bench_markdown import plot_idle, plot_scaling

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    result = {"set": dataclasses.asdict(bench_set), "board": BOARD,
              "paper_setting": {"precision": PAPER_PRECISION, "word_bits": PAPER_WORD_BITS,
                                "link_convention": "link (per link and direction)",
                                "epoch_images": EPOCH_IMAGES},
              "paper": PAPER}
    result["table6"] = table6_rows(bench_set, log=log)
    result["checked"] = checked_rows(bench_set.networks, bench_set.table_fpgas, _board(),
                                     150.0, bench_set.checked,
                                     PAPER["table6"]["gops_per_fpga"],
                                     bench_set.cluster_images, log=log)
    result["scaling"] = scaling_rows(bench_set, log=log)
    result["knees"] = knees(result["scaling"], bench_set.gbps)
    result["idle"] = _idle_summary(result["scaling"], bench_set.networks)
    result["cluster"] = cluster_rows(bench_set, result["knees"], log=log)
    result["pixels"] = pixels_rows(bench_set.networks, bench_set.sweep_fpgas, _board(), PAPER,
                                   images=bench_set.cluster_images, log=log)
    result["resources"] = resource_rows()
    result["plots"] = [plot_idle(result, out / "fpdeep_idle.png").name,
                       plot_scaling(result, out / "fpdeep_scaling.png").name,
                       plot_pixels(result["pixels"], out / "fpdeep_pixels.png").name]
    result["part_seconds"] = round(time.monotonic() - began, 1)
    return result


def bench(out, *, quick=None):
    """The bench hook: ``(result, markdown)``; ``quick`` (default: ``NNRTL_BENCH_FPDEEP``
    is ``quick``) runs :data:`QUICK`."""
    from ...progress import progress
    from .bench_markdown import markdown_fpdeep

    if quick is None:
        quick = os.environ.get("NNRTL_BENCH_FPDEEP", "") == "quick"
    result = bench_fpdeep(out, QUICK if quick else FULL, log=progress)
    return result, markdown_fpdeep(result)


def main(argv=None):
    from ...bench import part_main
    return part_main("fpdeep", bench, argv, description="The FPDeep bench beside the paper.")


if __name__ == "__main__":
    sys.exit(main())

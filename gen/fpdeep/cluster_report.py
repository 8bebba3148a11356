"""What the cluster simulator (:mod:`.cluster`) reports: the terminal summary,
:class:`ClusterRun` (what the ``cluster`` hook returns), and the rows the bench uses:
throughput against FPGA count (Fig. 15, :func:`scaling_rows`, :func:`knees`) and the
simulator's own wall time at 100 FPGAs (:func:`wall_rows`)."""

import dataclasses
import json
import tempfile
import time
from pathlib import Path

from ..errors import CheckFailed
from .cluster import ClusterConfig, failures, run_cluster, simulate
from .cluster_node import ClusterPlan

__all__ = ["format_summary", "ClusterRun", "scaling_rows", "knees", "wall_rows"]


def format_summary(result):
    """A few lines for a terminal."""
    lines = [f"{result['network']} on {result['fpgas']} FPGAs, {result['images']} images, "
             f"links {result['link_gbps'] or 'unlimited'} Gb/s, latency "
             f"{result['link_latency_cycles']} cycles"]
    if result["period_cycles"] is not None:
        lines.append(f"period {result['period_cycles']:,.1f} cycles/sample (mapper "
                     f"{result['mapper_period_cycles']:,}), {result['images_per_second']:,.1f} "
                     f"images/s, {result['gops_per_fpga']:,.1f} GOPS per FPGA, idle "
                     f"{100 * result['idle_share']:.2f}%")
    lines.append(f"fill latency {result['fill_latency_cycles']:,.0f} cycles, busiest link "
                 f"{result['max_link_gbps']:.1f} Gb/s, Act-RAM within depth: "
                 f"{result['act_ram_within_depth']}, PAB within depth: "
                 f"{result['pab_within_depth']}, stale samples per mini-batch: "
                 f"{result['max_stale_samples']}")
    found = failures(result)
    tolerance = result.get("period_tolerance")
    if found:
        lines.append("checks failed: " + "; ".join(found))
    elif tolerance is not None:
        lines.append(f"checks: buffers within their depths, period within {tolerance:.0%} "
                     f"of the mapping's")
    else:
        lines.append("checks: buffers within their depths (period not checked: the run "
                     "overrides the mapping's links, buffers or timing)")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class ClusterRun:
    """A finished simulation: the deterministic ``result`` (:meth:`as_json`), and how it
    ran (``ranks``, wall ``seconds``), which only :meth:`table` shows."""

    result: dict
    ranks: int
    seconds: float

    def as_json(self):
        return self.result

    def check(self):
        """Raise :class:`~nnrtl.gen.errors.CheckFailed` naming what
        :func:`~.cluster.failures` found (a buffer over its depth, a period off the
        mapping's); ``nnrtl cluster`` calls it once the result is printed."""
        found = failures(self.result)
        if found:
            raise CheckFailed("; ".join(found))

    def table(self):
        """The summary, then a line per node and per link."""
        r = self.result
        lines = [format_summary(r), f"simulated on {self.ranks} rank(s) in "
                 f"{self.seconds:.1f} s", "",
                 f"{'node':>4} {'idle %':>7} {'Act-RAM peak/depth':>22} "
                 f"{'PAB peak/depth':>18} {'stale':>5}  layers"]
        for n in r["nodes"]:
            idle = "" if n["idle_share"] is None else f"{100 * n['idle_share']:.2f}"
            lines.append(f"{n['node']:>4} {idle:>7} "
                         f"{n['act_ram_peak_words']:>10,}/{n['act_ram_depth_words']:<11,}"
                         f"{n['pab_peak_words']:>8,}/{n['pab_depth_words']:<9,} "
                         f"{n['stale_samples']:>5}  {', '.join(n['layers'])}")
        if r["links"]:
            lines += ["", f"{'link':>9} {'fwd Gb/s':>9} {'bwd Gb/s':>9}"]
            for link in r["links"]:
                a, b = link["between"]
                lines.append(f"{f'{a}-{b}':>9} {link['forward_gbps'] or 0:>9.2f} "
                             f"{link['backward_gbps'] or 0:>9.2f}")
        return "\n".join(lines)


def scaling_rows(network, fpgas, gbps=(150.0, 250.0), images=6, board="vc709",
                 precision="fixed16", word_bits=32, log=None):
    """Throughput against FPGA count (Fig. 15): one row per ``(N, Gb/s)`` with the
    simulated period and images/s beside the mapper's compute period (the linear roof);
    ``linear`` is whether the chain still runs at its compute period. For the bench.
    Defaults: the paper's setting (spec §4.8): its cost model (1 DSP per MAC, 200 MHz)
    with 32-bit words on the links, the bandwidth per link and direction."""
    from ...boards import get_board
    from .mapper import map_network
    from .network import builtin

    rows = []
    chain = builtin(network, 224)
    for n in fpgas:
        for g in gbps:
            mapping = map_network(chain, n, get_board(board), precision=precision,
                                  link_gbps=g, check_storage=False, word_bits=word_bits)
            plan = ClusterPlan(json.loads(json.dumps(mapping.as_json(), default=str)))
            began = time.monotonic()
            found = simulate(plan, ClusterConfig(images=images))
            rows.append({
                "network": network, "fpgas": n, "link_gbps": g, "word_bits": word_bits,
                "period_cycles": found["period_cycles"],
                "compute_period_cycles": mapping.compute_period,
                "mapper_period_cycles": mapping.period,
                "images_per_second": found["images_per_second"],
                "gops_per_fpga": found["gops_per_fpga"],
                "max_link_gbps": found["max_link_gbps"],
                "linear": found["period_cycles"] <= mapping.compute_period * 1.001,
                "seconds": time.monotonic() - began})
            if log is not None:
                log(f"scaling: {network} N={n} {g:g} Gb/s: {found['images_per_second']:.1f} "
                    f"images/s ({rows[-1]['seconds']:.1f} s)")
    return rows


def knees(rows):
    """``{(network, Gb/s): N}``: the most FPGAs up to which every simulated point of
    :func:`scaling_rows` still runs at its compute period (the paper's "linear up to")."""
    found = {}
    for row in sorted(rows, key=lambda r: r["fpgas"]):
        key = (row["network"], row["link_gbps"])
        if found.get(key, (0, True))[1]:
            found[key] = (row["fpgas"], True) if row["linear"] else (found.get(key, (0,))[0],
                                                                     False)
    return {key: n for key, (n, _) in found.items()}


def wall_rows(network, fpgas=100, images=8, ranks=(1, 2), board="vc709", precision="fixed16",
              link_gbps=150.0, log=None):
    """The simulator's wall time for ``images`` samples of ``network`` mapped on ``fpgas``
    boards, once per rank count (MPI above 1): ``[{"ranks", "seconds", "period_cycles",
    ...}, ...]``; the results must agree whatever the ranks."""
    from ...boards import get_board
    from .mapper import map_network
    from .network import builtin

    mapping = map_network(builtin(network, 224), fpgas, get_board(board), precision=precision,
                          link_gbps=link_gbps, check_storage=False)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nnrtl-cluster-bench-") as scratch:
        path = Path(scratch) / "mapping.json"
        path.write_text(json.dumps(mapping.as_json(), default=str))
        for r in ranks:
            result, seconds = run_cluster(path, ClusterConfig(images=images), r, log)
            rows.append({"network": network, "fpgas": fpgas, "images": images, "ranks": r,
                         "seconds": seconds, "period_cycles": result["period_cycles"],
                         "mapper_period_cycles": mapping.period,
                         "images_per_second": result["images_per_second"],
                         "gops_per_fpga": result["gops_per_fpga"],
                         "fill_latency_cycles": result["fill_latency_cycles"]})
            if log is not None:
                log(f"wall: {network} on {fpgas} FPGAs, {images} images, {r} rank(s): "
                    f"{seconds:.1f} s")
    return rows

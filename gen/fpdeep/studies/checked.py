"""The FPDeep bench's storage-checked Table 6: what ``nnrtl map fpdeep --network NAME --fpgas
15 --board vc709 [--precision P]`` returns (:func:`~nnrtl.gen.fpdeep.search.choose_mapping`,
every free option chosen, every buffer checked), beside the paper's Table 6.

Per network and setting (:data:`SETTINGS`): the mapping's GOPS per FPGA, what bounds its
period, where the Act-RAMs wait (the nodes whose Act-RAMs are in DDR), the FC batch, the
largest node's BRAM36; or the refusal, with the least FPGA count that fits
(:func:`~nnrtl.gen.fpdeep.remedy.least_fpgas`) and that mapping's figures. Each mapping is
also run through the cluster simulator (:mod:`nnrtl.gen.fpdeep.cluster`): its period and
whether every Act-RAM (on chip or in DDR) and PAB stayed within the mapping's depth.
"""

__all__ = ["SETTINGS", "checked_rows", "checked_markdown"]

#: ``(label, precision, word_bits)``: the project's two precisions at their own word widths,
#: and the paper's setting (its cost model with 32-bit words).
SETTINGS = (("fixed16", "fixed16", None), ("fp32", "fp32", None),
            ("paper words", "fixed16", 32))


def _simulated(mapping, images):
    """The cluster simulator on ``mapping`` (one rank): its period and buffer checks."""
    import json
    import tempfile
    from pathlib import Path

    from ..cluster import ClusterConfig, load_plan, simulate

    with tempfile.TemporaryDirectory(prefix="nnrtl-fpdeep-checked-") as scratch:
        path = Path(scratch) / "mapping.json"
        path.write_text(json.dumps(mapping.as_json(), default=str))
        found = simulate(load_plan(path), ClusterConfig(images=images))
    return {"period_cycles": found["period_cycles"],
            "act_ram_within_depth": found["act_ram_within_depth"],
            "pab_within_depth": found["pab_within_depth"]}


def _figures(mapping, images):
    in_ddr = [node.node for node in mapping.nodes if node.act_ram_ddr_words]
    return {
        "gops_per_fpga": mapping.gops_per_fpga, "bound": mapping.bound,
        "period_cycles": mapping.period, "compute_period_cycles": mapping.compute_period,
        "link_period_cycles": mapping.link_period, "ddr_period_cycles": mapping.ddr_period,
        "act_ddr_period_cycles": mapping.act_ddr_period,
        "line_period_cycles": mapping.line_period,
        "fc_batch": mapping.fc_batch, "balance": mapping.balance,
        "act_ram": mapping.act_ram, "act_ram_ddr_nodes": in_ddr,
        "bram36_max": max(node.bram36 for node in mapping.nodes),
        "bram36_board": mapping.bram36, "storage_fits": not mapping.infeasible,
        "storage_limit": mapping.storage_limit,
        "simulated": _simulated(mapping, images) if images else None,
    }


def checked_rows(networks, fpgas, board, link_gbps, settings=SETTINGS, paper=None,
                 images=8, log=None):
    """One row per network and setting (module docstring); each mapping simulated for
    ``images`` samples by the cluster simulator (0: not simulated)."""
    from ...errors import UsageError
    from ..network import builtin
    from ..remedy import least_fpgas
    from ..search import choose_mapping

    rows = []
    for name in networks:
        chain = builtin(name)
        for label, precision, word_bits in settings:
            options = {"precision": precision, "link_gbps": link_gbps,
                       "word_bits": word_bits}
            row = {"network": name, "setting": label, "precision": precision,
                   "word_bits": word_bits, "fpgas": fpgas, "link_gbps": link_gbps,
                   "paper_gops_per_fpga": (paper or {}).get(name), "refused": None,
                   "fits_at": None}
            try:
                row.update(_figures(choose_mapping(chain, fpgas, board, **options), images))
            except UsageError as error:
                row["refused"] = str(error)
                pins = {"fc_batch": None, "balance": None, "act_ram": None}
                more = least_fpgas(chain, fpgas, board, pins, options)
                if more is not None:
                    row["fits_at"] = dict(_figures(choose_mapping(chain, more, board,
                                                                  **options), images),
                                          fpgas=more)
            rows.append(row)
            if log is not None:
                log(f"checked: {name} {label}: " + (
                    f"{row['gops_per_fpga']:.0f} GOPS per FPGA, {row['bound']}-bound"
                    if row["refused"] is None else "refused"))
    return rows


def _sim(row):
    found = row["simulated"]
    if found is None:
        return "not simulated"
    ok = found["act_ram_within_depth"] and found["pab_within_depth"]
    return (f"{found['period_cycles'] / row['period_cycles']:.4f}, "
            + ("within depth" if ok else "OVER DEPTH"))


def _bound(row):
    return row["bound"] + (" (a buffer holds fc_batch)" if row["storage_limit"] else "")


def _where(row):
    from ..search import node_ranges
    nodes = row["act_ram_ddr_nodes"]
    return f"DDR on node(s) {node_ranges(nodes)}" if nodes else "on chip"


def checked_markdown(rows):
    """The rows as a markdown section."""
    if not rows:
        return []
    first = rows[0]
    lines = [f"## Table 6, storage checked: {first['fpgas']} VC709s, links "
             f"{first['link_gbps']:g} Gb/s", "",
             "What `nnrtl map fpdeep` returns with no option: fc_batch, balancing and the "
             "Act-RAM placement chosen, every buffer within the board (the paper's GOPS are "
             "its Table 6, fp32). Settings: `fixed16` 1 DSP per MAC, 16-bit words; `fp32` "
             "this project's fp32 MAC, 32-bit words; `paper words` 1 DSP per MAC with the "
             "paper's 32-bit words.", "",
             "| network | setting | GOPS/FPGA (paper) | bound | Act-RAMs wait | fc_batch | "
             "max BRAM36/node | simulated period / mapper's, buffers |",
             "|---|---|---:|---|---|---:|---:|---|"]
    refused = []
    for r in rows:
        paper = f" ({r['paper_gops_per_fpga']:,})" if r["paper_gops_per_fpga"] else ""
        if r["refused"] is None:
            lines.append(f"| {r['network']} | {r['setting']} | {r['gops_per_fpga']:,.0f}"
                         f"{paper} | {_bound(r)} | {_where(r)} | {r['fc_batch']} | "
                         f"{r['bram36_max']:,}/{r['bram36_board']:,} | {_sim(r)} |")
            continue
        refused.append(r)
        at = r["fits_at"]
        lines.append(f"| {r['network']} | {r['setting']} | refused{paper} | - | - | - | - | - |"
                     if at is None else
                     f"| {r['network']} | {r['setting']} | refused; on {at['fpgas']}: "
                     f"{at['gops_per_fpga']:,.0f}{paper} | {_bound(at)} | {_where(at)} "
                     f"| {at['fc_batch']} | {at['bram36_max']:,}/{at['bram36_board']:,} | "
                     f"{_sim(at)} |")
    if refused:
        lines += ["", "Refused (the least FPGA count that fits is mapped in the row):", ""]
        lines += [f"- {r['network']}, {r['setting']}: {r['refused']}" for r in refused]
    return lines + [""]

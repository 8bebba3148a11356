"""The per-node table of a mapping: layers and channels, DSPs, BRAM, link Gb/s, idle share."""

__all__ = ["format_table"]


def _segment_text(segment):
    whole = segment.mode == "ICP" and segment.lo == 0 and segment.hi == segment.n_in \
        and segment.completes
    if whole:
        return segment.layer
    what = "in" if segment.mode == "ICP" else "out"
    return f"{segment.layer}[{what} {segment.lo}:{segment.hi}]"


def format_table(mapping):
    """The mapping as text: a header with the cluster figures, one row per node (its
    segments with their channel ranges, P x Q, DSPs and their share, BRAM36 and their
    share, the Gb/s it sends downstream and upstream, its idle share; a segment whose Act-RAM
    waits in DDR marked, and one whose line buffers take more than one pixel a cycle), the
    boundaries' Gb/s
    and what does not fit."""
    m = mapping
    model = m.model
    summary = m.as_json()["summary"]
    lines = [
        f"FPDeep: {m.chain.name} on {m.fpgas} x {m.board}, precision {model.precision} "
        f"({model.name} cost model: {model.dsp_per_mac} DSP"
        + (f" + {model.lut_per_mac:,} LUT" if model.lut_per_mac else "")
        + f" per MAC, {model.word_bits}-bit words, {model.clock_hz / 1e6:g} MHz)",
        f"  period {m.period:,} cycles ({m.bound}-bound"
        + (f", fc_batch held back by {m.storage_limit}" if m.storage_limit else "")
        + f"; compute {m.compute_period:,}, links "
        f"{m.link_period:,}, FC weights from DDR {m.ddr_period:,}"
        + (f", line buffers {m.line_period:,}" if m.line_period else "")
        + (f", Act-RAMs in DDR {m.act_ddr_period:,}" if m.act_ddr_period else "") + "), "
        f"{m.images_per_second:,.1f} images/s, {m.gops_per_fpga:,.1f} GOPS per FPGA, "
        f"idle {m.idle:.2%}, V coarse {_v(m.v_coarse)} -> fine {_v(m.v_fine)} (mapped "
        f"{_v(m.v_mapped)})",
        f"  MAC units per node at most {m.unit_budget:,} ({m.budget_resource}-limited, DSP cap "
        f"{m.dsp_cap:g}); FC weights off chip, {m.fc_batch} samples per weight pass, "
        f"{m.offchip_gbps:.2f} GB/s of DDR; links "
        + (f"{m.link_gbps:g} Gb/s per {'link and direction' if m.convention == 'link' else 'FPGA'}"
           if m.link_gbps else "unlimited"),
        *([f"  chosen: " + "; ".join(f"{name} {why}" for name, why in m.chosen)]
          if m.chosen else []),
        "",
        f"{'node':>4}  {'DSP':>6} {'DSP%':>6} {'BRAM36':>7} {'BRAM%':>6} {'down Gb/s':>10} "
        f"{'up Gb/s':>8} {'idle':>6}  layers (channels) P x Q",
    ]
    gbps = m.boundary_gbps()
    for node in m.nodes:
        n = node.node - 1
        down = gbps[n][0] if n < len(gbps) else 0.0
        up = gbps[n - 1][1] if n else 0.0
        segments = ", ".join(f"{_segment_text(s)} {s.p}x{s.q}"
                             + (f" ({s.line_pixels} px/cycle)" if s.line_pixels > 1 else "")
                             + (" (Act-RAM in DDR)" if s.act_ram_in_ddr else "")
                             for s in node.segments)
        hosted = sum(h.words for h in node.hosted)
        lines.append(
            f"{node.node:>4}  {node.dsp:>6,} {m.dsp_use(node):>6.1%} {node.bram36:>7,} "
            f"{node.bram36 / m.bram36:>6.0%} {down:>10.2f} {up:>8.2f} {m.node_idle(node):>6.2%}"
            f"  {segments}" + (f"; hosts {hosted:,} weights" if hosted else ""))
    lines.append(f"  max link {summary['max_link_gbps']:.2f} Gb/s")
    if m.infeasible:
        lines += ["", "does not fit:"] + [f"  {reason}" for reason in m.infeasible]
    return "\n".join(lines)


def _v(value):
    return "inf" if value == float("inf") else f"{value:.3f}"

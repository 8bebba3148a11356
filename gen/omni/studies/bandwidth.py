"""The paper's Table I shapes at full size through the η-LSTM cycle model with its HBM term:
which of compute and memory bounds a training iteration, at one HBM port, at the paper's
224 GB/s (the default ``hbm_ports``, 14) and at the device's peak.

``python -m nnrtl.gen.omni.studies.bandwidth --out DIR [--shapes TREC-10 PTB ...]`` writes
``omni_bandwidth.json`` and ``omni_bandwidth.md`` (some minutes on one core: the six
full-size graphs through the channel cycle model and the R2A model).

Per shape (baseline: MS1 and MS2 off; 40 channels of 32 PEs, :data:`~..r2a.FULL_CONFIG`)
    ``compute_cycles``: the dynamic R2A schedule of :func:`~..workload.training_graph`
    (one tile per channel), every task timed by the channel cycle model
    (:func:`~..r2a.channel_durations`), as the bench's utilization part;
    ``bytes``: :func:`~..memory.step_bytes` by category; per port count (1; 14, the
    paper's 224 GB/s at 500 MHz; 32, every pseudo-channel, capped at the device's
    460.8 GB/s) the ``memory_cycles``, the ``bound`` and the iteration's milliseconds at
    500 MHz; ``ports_to_compute_bound``: the fewest ports at which compute bounds (``None``
    when even the device's peak does not suffice).
"""

import argparse
import json
import time
from pathlib import Path

__all__ = ["PORT_OPTIONS", "shape_row", "bandwidth_rows", "markdown", "main"]

#: The port counts each shape is taken through, with what each stands for.
PORT_OPTIONS = {1: "16 GB/s", 14: "the paper's 224 GB/s, default hbm_ports",
                32: "all 32 pseudo-channels, device peak"}


def shape_row(name, workload, config=None):
    """One shape's row (module docstring); ``config`` the R2A configuration (default
    :data:`~..r2a.FULL_CONFIG`)."""
    from ..memory import (HBM_PSEUDO_CHANNELS, PAPER_CLOCK_HZ, hbm_bandwidth,
                          memory_cycles, step_bytes, step_time)
    from ..r2a import FULL_CONFIG, channel_durations, schedule
    from ..workload import training_graph

    config = FULL_CONFIG if config is None else config
    tasks = training_graph(workload, tiles=config.channels)
    durations = channel_durations(tasks, workload, config)
    compute = schedule(tasks, config, dynamic=True, durations=durations).cycles
    moved = step_bytes(workload)
    ports = {}
    for count in PORT_OPTIONS:
        bandwidth = hbm_bandwidth(count)
        timed = step_time(compute, memory_cycles(moved["total"], bandwidth))
        ports[str(count)] = dict(
            gbps=bandwidth["bytes_per_s"] / 1e9, memory_cycles=timed["memory_cycles"],
            bound=timed["bound"], cycles=timed["cycles"],
            milliseconds=1e3 * timed["cycles"] / PAPER_CLOCK_HZ)
    needed = next((count for count in range(1, HBM_PSEUDO_CHANNELS + 1)
                   if memory_cycles(moved["total"], hbm_bandwidth(count)) <= compute), None)
    return dict(shape=name, channels=config.channels, pes_per_channel=config.pes_per_channel,
                tasks=len(tasks), compute_cycles=compute, bytes=moved, ports=ports,
                ports_to_compute_bound=needed,
                bytes_per_compute_cycle=moved["total"] / compute)


def bandwidth_rows(shapes=None, log=None):
    """:func:`shape_row` for ``shapes`` (names of :data:`~..accounting.TABLE_I`, default
    all six)."""
    from ..accounting import TABLE_I
    rows = []
    for name in shapes or TABLE_I:
        start = time.monotonic()
        rows.append(shape_row(name, TABLE_I[name]))
        rows[-1]["seconds"] = round(time.monotonic() - start, 1)
        if log:
            log(f"{name}: {rows[-1]['seconds']} s")
    return rows


def markdown(rows):
    """The rows as a markdown table: per shape the compute cycles, the GB moved, and per
    port option the memory cycles with the bound and the iteration's time."""
    head = ["shape", "compute cycles", "GB moved", "B/cycle"]
    head += [f"{count} port{'s' * (count > 1)}: {what}" for count, what in PORT_OPTIONS.items()]
    head += ["ports for compute bound"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["shape"], f"{row['compute_cycles']:,}", f"{row['bytes']['total'] / 1e9:.2f}",
                 f"{row['bytes_per_compute_cycle']:.1f}"]
        for count in PORT_OPTIONS:
            port = row["ports"][str(count)]
            cells.append(f"{port['memory_cycles']:,} ({port['bound']}-bound, "
                         f"{port['milliseconds']:.0f} ms)")
        needed = row["ports_to_compute_bound"]
        cells.append("more than 32" if needed is None else str(needed))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    """The command line (module docstring)."""
    from ..accounting import TABLE_I
    parser = argparse.ArgumentParser(prog="python -m nnrtl.gen.omni.studies.bandwidth",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", nargs="+", choices=list(TABLE_I), default=None)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = bandwidth_rows(args.shapes, log=print)
    (args.out / "omni_bandwidth.json").write_text(json.dumps(rows, indent=1) + "\n")
    (args.out / "omni_bandwidth.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

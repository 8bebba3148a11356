"""The SBE benchmark (``python -m nnrtl.gen.bench --only sbe``): RTL cycles beside the
performance model and the paper's figures.

``trends``
    RTL simulations (Verilator, no stream backpressure) of one scaled-down LSTM on fixed
    hardware while the batch and the block number vary -- the trends of the paper's
    Figs. 9, 13 and 14 across cases 1, 2 and 3: RTL cycles, utilisation, the timeline
    model's cycles and its error, and the paper's closed form (eqs. 2-6) as a utilisation.
``speedup``
    Very large LSTMs (LRCN's 1792 inputs, hidden 1024-4096) on the paper's ZC706 hardware
    (1024 PEs, 16 weights per cycle) and its block RAMs: the fastest blocking-batching
    design against the same hardware without it (batch 1: every weight streamed for every
    vector), by the timeline model (which the RTL matches cycle for cycle in ``trends``).
    The paper: 1.60-5.41x (Fig. 15).
``presets``
    The paper's two designs at full size: Verilog generation time and size, Verilator
    build time, one whole batch simulated bit-exact (cycles, model cycles, simulated cycles
    per second) and the throughput at the paper's clock from the RTL cycles of that batch and
    from the model over 1024 steps (the paper: 356 GOPS on the VC709 at 125 MHz).
``synth``
    The paper's two designs generated (``nnrtl generate sbe --preset``) and synthesised
    (``nnrtl synth``: Yosys ``synth_xilinx``, ``auto`` hierarchy, ``shared`` at this size)
    into ``build/bench/sbe-synth``: LUT, FF, DSP and BRAM36 beside the resource model's DSPs (PEs and post-processing
    units), BRAM36, the paper's eq. 7 and the LUTs it counts (LUT multipliers, LUTRAM).
``toolspeed``
    Generation, Verilator build and Yosys time against the PE count, 64 to 2048
    (:mod:`.toolspeed`).
"""

import dataclasses
import time

from ....boards import get_board
from ....hw.sbe import PRESETS, SbeConfig
from ...engines import SimRequest, board_clock_hz
from ...progress import progress
from ..perf import paper_performance, predict
from ..resources import resource_estimate
from .toolspeed import bench_toolspeed, markdown_toolspeed

__all__ = ["bench_sbe", "markdown_sbe", "TREND_BASE", "speedup_table"]

#: The scaled-down LSTM of ``trends``: 56 inputs, 8 hidden units (32 rows), 32 PEs, 4
#: weights per cycle, so that eq. 1's balanced batch is 32 / 4 = 8 (the ZC706 design's 64
#: at 1/16 scale). 8 blocks: case 1; 16: case 2; 32: case 3.
TREND_BASE = SbeConfig(input_size=56, hidden_size=8, pes=32, bus_weights=4, post_units=4,
                       batch=8, blocks=8, seq_len=16)

TRENDS = (
    [("batch (Fig. 9, case 1)", dict(batch=b)) for b in (1, 2, 4, 8, 16)]
    + [("blocks (Fig. 13)", dict(blocks=nb)) for nb in (2, 4, 16, 32)]
    + [("batch (Fig. 14, case 3)", dict(blocks=32, batch=b)) for b in (2, 4, 16)]
)

#: Very large LSTMs of ``speedup``: LRCN's input width and growing hidden sizes.
LARGE_HIDDEN = (512, 1024, 1536, 2048)

#: Most blocks ``speedup`` tries (more only shrink the buffers further).
MAX_BLOCKS = 128


def bench_trends(simulate):
    rows = []
    for sweep, change in TRENDS:
        config = dataclasses.replace(TREND_BASE, **change)
        result = simulate(SimRequest(config, get_board("zc706"), seed=1, backpressure="none",
                                     log=progress), split=0)
        row = {
            "sweep": sweep, "batch": config.batch, "blocks": config.blocks,
            "case": config.case, "resident": config.weights_resident,
            "bit_exact": result["bit_exact"], "cycles": result["cycles"],
            "model_cycles": result["model_cycles"],
            "model_error": round(result["model_error"], 5),
            "utilization": round(result["utilization"], 4),
            "stall_cycles": result["stall_cycles"],
            "weight_wait_cycles": result["weight_wait_cycles"],
            "paper_utilization": round(paper_performance(config) / config.pes, 4),
            "build_seconds": result["build_seconds"],
        }
        rows.append(row)
        progress(f"trends: {row}")
    return rows


def _best_design(base, *, batch_choices, bram36):
    """The fastest (batch, blocks) of ``base`` whose buffers fit ``bram36`` block RAMs."""
    best = None
    columns = base.input_size + base.hidden_size
    for batch in batch_choices:
        for blocks in (d for d in range(1, MAX_BLOCKS + 1) if columns % d == 0):
            try:
                config = dataclasses.replace(base, batch=batch, blocks=blocks)
            except ValueError:
                continue
            if resource_estimate(config).bram36 > bram36:
                continue
            cycles = predict(config).cycles
            if best is None or cycles < best[0]:
                best = (cycles, config)
    return best


def speedup_table(hidden_sizes=LARGE_HIDDEN, seq_len=1024):
    """``speedup`` rows: the best design with and without blocking-batching."""
    board = get_board("zc706")
    base = PRESETS["zc706-lstm256"].config
    rows = []
    for hidden in hidden_sizes:
        model = dataclasses.replace(base, hidden_size=hidden, seq_len=seq_len, batch=1,
                                    blocks=1)
        sbe = _best_design(model, batch_choices=(8, 16, 32, 64, 128),
                           bram36=board.capacity.bram36)
        plain = _best_design(model, batch_choices=(1,), bram36=board.capacity.bram36)
        if sbe is None or plain is None:
            rows.append({"hidden_size": hidden, "fits": False,
                     "board_bram36": board.capacity.bram36})
            continue
        rows.append({
            "input_size": model.input_size, "hidden_size": hidden, "fits": True,
            "sbe_batch": sbe[1].batch, "sbe_blocks": sbe[1].blocks, "sbe_case": sbe[1].case,
            "sbe_cycles": sbe[0], "plain_blocks": plain[1].blocks, "plain_cycles": plain[0],
            "speedup": round(plain[0] / sbe[0], 3),
            "sbe_bram36": resource_estimate(sbe[1]).bram36,
            "board_bram36": board.capacity.bram36,
        })
        progress(f"speedup: {rows[-1]}")
    return rows


def bench_presets(simulate):
    from ....sim.runner import to_verilog
    from ....hw.sbe import SbeEngine
    rows = []
    for name, preset in PRESETS.items():
        config = preset.config
        start = time.monotonic()
        text = to_verilog(SbeEngine(config), "nnrtl_sbe")
        generation = time.monotonic() - start
        progress(f"presets: {name} generated in {generation:.1f} s ({len(text)} bytes)")
        board = get_board(preset.board)
        result = simulate(SimRequest(config, board, seed=1, backpressure="none",
                                     steps=config.batch, log=progress), split=0)
        clock = preset.clock_hz or board_clock_hz(board)
        model = predict(config, seq_len=1024)
        rows.append({
            "preset": name, "board": preset.board, "pes": config.pes,
            "generation_seconds": round(generation, 1), "verilog_bytes": len(text),
            "build_seconds": result["build_seconds"], "run_seconds": result["run_seconds"],
            "steps": config.batch, "bit_exact": result["bit_exact"],
            "cycles": result["cycles"], "model_cycles": result["model_cycles"],
            "model_error": round(result["model_error"], 5),
            "cycles_per_second": round(result["cycles"] / result["run_seconds"], 1),
            "clock_mhz": clock / 1e6, "clock_from_paper": preset.clock_hz is not None,
            "gops_one_batch_rtl": round(2 * result["useful_macs"] * clock
                                        / result["cycles"] / 1e9, 1),
            "gops_1024_steps_model": round(model.gops(clock), 1),
            "utilization_1024_steps_model": round(model.utilization, 4),
            "paper_gops": preset.paper_gops,
        })
        progress(f"presets: {rows[-1]}")
    return rows


def bench_synthesis(directory):
    from ...emit import generate
    from ...synth import synthesize
    from ..engine import ENGINE
    engine, rows = ENGINE, []
    for name, preset in PRESETS.items():
        board = get_board(preset.board)
        output = f"{directory}/{name}"
        progress(f"synth: generating {name} into {output}")
        generate(engine, preset.config, board, output, force=True)
        report = synthesize(output, log=_progress)
        model = resource_estimate(preset.config, board.capacity.yosys_family)
        rows.append({
            "preset": name, "board": preset.board, "family": report["family"],
            "hierarchy": report["hierarchy"],
            **{key: report[key] for key in ("lut", "lut_logic", "lut_memory", "ff", "dsp",
                                            "bram36", "uram", "logic_levels")},
            "share": report["share"], "yosys_seconds": report["seconds"],
            "model_dsp": model.dsp, "model_dsp_pes": model.dsp_pes,
            "model_dsp_post": model.dsp_post, "model_bram36": model.bram36,
            "model_bram_eq7": round(model.bram_eq7, 1), "model_luts": model.luts,
            "lut_multipliers": preset.config.lut_multipliers,
            "board_dsp": board.capacity.dsp, "board_bram36": board.capacity.bram36,
            "board_lut": board.capacity.lut,
        })
        progress(f"synth: {rows[-1]}")
    return rows


def bench_sbe(parts=("trends", "speedup", "presets", "synth", "toolspeed"), *, out):
    """The parts of the benchmark; ``synth`` writes its designs under ``out/sbe-synth``,
    ``toolspeed`` (:mod:`.toolspeed`) under ``out/sbe-toolspeed``."""
    from ..engine import simulate
    result = {}
    if "trends" in parts:
        result["trends"] = bench_trends(simulate)
    if "speedup" in parts:
        result["speedup"] = speedup_table()
    if "presets" in parts:
        result["presets"] = bench_presets(simulate)
    if "synth" in parts:
        result["synth"] = bench_synthesis(f"{out}/sbe-synth")
    if "toolspeed" in parts:
        result["toolspeed"] = bench_toolspeed(f"{out}/sbe-toolspeed")
    return result


def markdown_sbe(result):
    lines = ["# SBE benchmark", ""]
    if "trends" in result:
        base = TREND_BASE
        lines += [f"## RTL against the model (LSTM {base.input_size}+{base.hidden_size}, "
                  f"{base.pes} PEs, Nt={base.bus_weights}, {base.seq_len} steps, Verilator, "
                  f"no backpressure)", "",
                  "| sweep | B | Nb | case | RTL cycles | model cycles | model error | "
                  "RTL utilization | paper eqs. 2-6 | h stalls | weight waits | bit exact |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|"]
        lines += [f"| {r['sweep']} | {r['batch']} | {r['blocks']} | {r['case']}"
                  f"{' (resident)' if r['resident'] else ''} | {r['cycles']} | "
                  f"{r['model_cycles']} | {r['model_error']:.2%} | {r['utilization']:.3f} | "
                  f"{r['paper_utilization']:.3f} | {r['stall_cycles']} | "
                  f"{r['weight_wait_cycles']} | {r['bit_exact']} |" for r in result["trends"]]
    if "speedup" in result:
        bram36 = result["speedup"][0]["board_bram36"]
        lines += ["", f"## Blocking-batching against batch 1 on very large LSTMs (ZC706 "
                  f"hardware: 1024 PEs, Nt=16, {bram36} BRAM36; model, 1024 steps)", "",
                  "| LSTM | SBE B | SBE Nb | case | SBE cycles | B=1 cycles | speedup | "
                  "paper (Fig. 15) |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['input_size']}+{r['hidden_size']} | {r['sbe_batch']} | "
                  f"{r['sbe_blocks']} | {r['sbe_case']} | {r['sbe_cycles']} | "
                  f"{r['plain_cycles']} | {r['speedup']:.2f}x | 1.60-5.41x |"
                  if r["fits"] else f"| hidden {r['hidden_size']} | does not fit | | | | | | |"
                  for r in result["speedup"]]
    if "presets" in result:
        lines += ["", "## The paper's designs at full size", "",
                  "| preset | PEs | generation s | Verilog MB | Verilator build s | steps | "
                  "RTL cycles | model cycles | model error | sim cycles/s | bit exact | "
                  "clock MHz | GOPS (RTL, one batch) | GOPS (model, 1024 steps) | paper GOPS |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|---:|---:|---:|---:|"]
        lines += [f"| {r['preset']} | {r['pes']} | {r['generation_seconds']} | "
                  f"{r['verilog_bytes'] / 1e6:.1f} | {r['build_seconds']} | {r['steps']} | "
                  f"{r['cycles']} | {r['model_cycles']} | {r['model_error']:.2%} | "
                  f"{r['cycles_per_second']} | {r['bit_exact']} | {r['clock_mhz']:g}"
                  f"{'' if r['clock_from_paper'] else ' (not in the paper)'} | "
                  f"{r['gops_one_batch_rtl']} | {r['gops_1024_steps_model']} | "
                  f"{r['paper_gops'] or '-'} |" for r in result["presets"]]
    if "synth" in result:
        lines += ["", f"## The paper's designs synthesised (Yosys synth_xilinx, hierarchy "
                  f"{result['synth'][0]['hierarchy']}) beside the resource model", "",
                  "| preset | LUT multipliers | DSP (Yosys) | DSP (model: PEs + PPs) | "
                  "BRAM36 (Yosys) | BRAM36 (model) | eq. 7 | LUT (Yosys) | LUT (model: "
                  "LUT multipliers + LUTRAM) | FF | Yosys s |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['preset']} | {r['lut_multipliers']} | {r['dsp']} / "
                  f"{r['board_dsp']} | {r['model_dsp']} ({r['model_dsp_pes']} + "
                  f"{r['model_dsp_post']}) | {r['bram36']:g} / {r['board_bram36']} | "
                  f"{r['model_bram36']} | {r['model_bram_eq7']} | {r['lut']} / "
                  f"{r['board_lut']} | {r['model_luts']} | {r['ff']} | "
                  f"{r['yosys_seconds']} |" for r in result["synth"]]
    if "toolspeed" in result:
        lines.append(markdown_toolspeed(result["toolspeed"]))
    return "\n".join(lines) + "\n"


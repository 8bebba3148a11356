"""FARNN bench: the paper's slice arithmetic (Sec. 5.1.3) in RTL cycles.

One MVM pass of a 1,024 x 1,024 matrix on one :class:`~nnrtl.hw.farnn.MVMUnit` of 16
chains at full size, simulated with Verilator (:mod:`nnrtl.sim.tb.farnn_mvm`, bit-exact
against :mod:`nnrtl.sim.golden.farnn.mvm`, gapless streams):

- 16 chains of 16 PEs (256 PEs, 4,096 words per PE): 4 rounds, the paper's 4 x 1,024 =
  4,096 MAC cycles;
- 16 chains of 48 PEs (768 PEs, the paper's 8K-word configuration): 2 rounds, 2,048 MAC
  cycles unsplit and 1,536 with the last round split by 2. Both runs are on one build,
  a unit with split 2 (a run's ``split_last`` is a run-time input): the unsplit run's
  beats also pass the fold adders, ``adder_stages`` cycles per stream more than a unit
  built without splitting.

Reported per shape: the RTL's MAC cycles (its ``mac_cycles`` counter) beside the paper's,
the RTL's total cycles of the pass (first element in to last sum out) beside
:func:`nnrtl.sim.golden.farnn.mvm.cycles`, the weight load's cycles, and the Verilator
build and run seconds. The lead wires :func:`bench_slices` into ``make bench`` (the
engine's ``bench`` hook).

Cost: the Verilog is small (one module per PE kind and chain), but Verilator still writes
C++ per PE instance, so its build grows with the PE count: the 256-PE unit took 25 min to
build and 11 min to run on 2 cores shared with four other jobs; the 768-PE unit is about
three times that.
"""

import json
from pathlib import Path

from nnrtl.hw.arith.float_format import FP32

__all__ = ["PAPER_SHAPES", "run_shape", "bench_slices"]

#: name: (MVMUnit parameters, split_last of the run, the paper's MAC cycles).
PAPER_SHAPES = {
    "256 PEs": (dict(chains=16, chain_length=16, weight_depth=4096, split=1), False, 4096),
    "768 PEs": (dict(chains=16, chain_length=48, weight_depth=8192, split=2), False, 2048),
    "768 PEs, split 2": (dict(chains=16, chain_length=48, weight_depth=8192, split=2), True,
                         1536),
}

#: The matrix of the paper's example.
ROWS = COLUMNS = 1024


def run_shape(name, *, seed=1, log=None):
    """Simulate one MVM pass of :data:`PAPER_SHAPES` ``[name]``; returns its row (module
    docstring). Raises :class:`~nnrtl.sim.runner.SimulationError` on a protocol failure
    of the bench; a wrong value is ``bit_exact: False`` in the row."""
    from nnrtl.sim.runner import simulate
    from nnrtl.sim.tb.farnn_tops import MVMUnitTop

    unit, split_last, paper = PAPER_SHAPES[name]
    top = f"farnn_mvm_L{unit['chain_length']}_s{unit['split']}_d{unit['weight_depth']}"
    result = simulate(MVMUnitTop(FP32, **unit), test_module="nnrtl.sim.tb.farnn_mvm",
                      params={"unit": unit, "n_out": ROWS, "n_in": COLUMNS, "batch": 1,
                              "steps": 1, "split_last": split_last},
                      seed=seed, name=top, log=log)
    run = result["runs"][0]
    return {
        "shape": name, "pes": unit["chains"] * unit["chain_length"],
        "chain_length": unit["chain_length"], "split": 2 if split_last else 1,
        "weight_depth": unit["weight_depth"], "rounds": result["rounds"],
        "words_per_pe": result["words_per_pe"], "bit_exact": result["bit_exact"],
        "mac_cycles": run["mac_cycles"], "paper_mac_cycles": paper,
        "cycles": run["cycles"], "model_cycles": run["model_cycles"],
        "load_cycles": result["load_cycles"],
        "build_seconds": result["build_seconds"], "build_cached": result["build_cached"],
        "run_seconds": result["run_seconds"],
    }


def markdown(rows):
    """The bench table of :func:`bench_slices`' rows."""
    lines = ["## FARNN slice arithmetic in RTL cycles (1,024 x 1,024, one MVM unit of 16 "
             "chains, Verilator)", "",
             "| PEs | L | split | rounds | words/PE | RTL MAC cycles | paper | RTL cycles "
             "| model cycles | load cycles | bit-exact | build s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['pes']} | {row['chain_length']} | {row['split']} | "
                     f"{row['rounds']} | {row['words_per_pe']:,} | {row['mac_cycles']:,} | "
                     f"{row['paper_mac_cycles']:,} | {row['cycles']:,} | "
                     f"{row['model_cycles']:,} | {row['load_cycles']:,} | "
                     f"{'yes' if row['bit_exact'] else 'NO'} | "
                     f"{row['build_seconds']:.0f}{' (cached)' if row['build_cached'] else ''} |")
    lines += ["", "RTL cycles: from the first vector element's handshake to the last result "
              "beat's; MAC cycles: the unit's counter. The 768-PE rows run on one unit built "
              "with split 2 (the unsplit run's beats pass its fold adders too)."]
    return "\n".join(lines) + "\n"


def bench_slices(out, *, log=None):
    """Run every shape of :data:`PAPER_SHAPES`; write ``out/farnn_slices.json`` and
    ``.md``; return ``(rows, markdown)``."""
    rows = [run_shape(name, log=log) for name in PAPER_SHAPES]
    text = markdown(rows)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "farnn_slices.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "farnn_slices.md").write_text(text)
    return rows, text

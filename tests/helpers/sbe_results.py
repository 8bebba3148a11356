"""What the SBE's report tests (``tests/gen/test_report.py``,
``tests/sbe/gen/test_sbe_report.py``) feed ``nnrtl report``: a real ``nnrtl sim sbe``
result and a ``synth.json``."""

#: The counters of a real run: ``nnrtl sim sbe --board zc706 --seed 1`` (the default
#: SbeConfig, random streams), its JSON line as printed.
SBE_RUN = {
    "engine": "sbe", "board": "zc706", "seed": 1, "backpressure": "random",
    "bit_exact": True, "mismatches": 0, "first_mismatch": None, "fault": None,
    "budget_use": 0.2397, "cycles": 5272, "model_cycles": 2918,
    "useful_macs": 98304, "utilization": 0.291350531107739,
    "stall_cycles": 234, "weight_wait_cycles": 3442, "input_wait_cycles": 0,
    "handover_wait_cycles": 0, "column_steps": 1536, "weight_words": 18432,
    "expected_macs": 98304, "build_seconds": 0.002, "build_cached": True,
    "run_seconds": 2.922, "f_clk_mhz": 200.0, "gops": 7.458573596358118, "seconds": 5.849,
    "runs": [{"cycles": 1843, "stall_cycles": 36, "weight_wait_cycles": 1489,
              "input_wait_cycles": 0, "handover_wait_cycles": 0, "column_steps": 288,
              "useful_macs": 18432, "weight_words": 6144, "layer": 0, "steps": 3,
              "model_cycles": 970},
             {"cycles": 3429, "stall_cycles": 198, "weight_wait_cycles": 1953,
              "input_wait_cycles": 0, "handover_wait_cycles": 0, "column_steps": 1248,
              "useful_macs": 79872, "weight_words": 12288, "layer": 0, "steps": 13,
              "model_cycles": 1948}],
}

#: ``synth.json`` with the keys ``nnrtl synth`` writes (a real run of a demo design gave
#: them); Yosys of the default SBE takes minutes, too long for this test.
SBE_SYNTH = {
    "module": "nnrtl_sbe", "board": "zc706", "family": "xc7", "hierarchy": "flat",
    "lut": 9000, "lut_logic": 8500, "lut_memory": 500, "ff": 12000, "dsp": 100,
    "bram36": 3.0, "uram": 0, "carry": 900,
    "share": {"lut": 9000 / 218600, "ff": 12000 / 437200, "dsp": 100 / 900,
              "bram36": 3 / 545},
    "logic_levels": 20, "seconds": 300.0, "cells": {"DSP48E1": 100},
}

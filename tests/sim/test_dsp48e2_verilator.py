# amaranth: UnusedElaboratable=no
"""The DSP48E2 slice's Instance form under Verilator, with the subset's Verilog model
(``hw/arith/models/dsp48e2_subset.v``) appended, equals its behavioural form under
Amaranth's simulator and the integer reference, cycle by cycle on random vectors (resets
and clock enables included), for every configuration in ``dsp48e2_vectors.CONFIGS`` and
the two-slice cascaded product, all in one build (bench: nnrtl.sim.tb.arith_dsp48e2)."""

import json

import pytest

from nnrtl.hw.arith.dsp48e2 import model_verilog
from nnrtl.sim.runner import SimulationError, simulate, to_verilog

from dsp48e2_vectors import (CONFIGS, SliceBundle, amaranth_run, ports, random_vectors,
                             reference)

pytestmark = pytest.mark.timeout(900)

NAMES = list(CONFIGS) + ["cascade"]
CYCLES = 2000


def run(text, name, vectors, outputs, directory):
    inputs_file = directory / f"{name}-inputs.json"
    inputs_file.write_text(json.dumps(vectors))
    return simulate(text, name=name, test_module="nnrtl.sim.tb.arith_dsp48e2",
                    params={"inputs_file": str(inputs_file), "outputs": outputs})


def test_instance_form_matches_behaviour(tmp_path):
    design = SliceBundle(NAMES, primitive=True)
    vectors = random_vectors(design, CYCLES, seed=7)
    outputs = [name for name, (_, is_input) in ports(design).items() if not is_input]
    result = run(to_verilog(design, "dsp48e2_bundle") + model_verilog(), "dsp48e2_bundle",
                 vectors, outputs, tmp_path)
    assert result["cycles"] == CYCLES
    behaviour = amaranth_run(SliceBundle(NAMES, primitive=False), vectors)
    for name in outputs:
        assert result["outputs"][name] == behaviour[name], name
    for name in NAMES:
        for port, expected in reference(name, vectors).items():
            assert result["outputs"][f"{name}__{port}"] == expected, (name, port)


def test_model_refuses_attributes_outside_the_subset(tmp_path):
    """An attribute the model does not implement stops the simulation."""
    design = SliceBundle(["m"], primitive=True)
    text = to_verilog(design, "dsp48e2_refused") + model_verilog()
    text = text.replace('.USE_SIMD("ONE48")', '.USE_SIMD("FOUR12")')
    assert '"FOUR12"' in text
    with pytest.raises(SimulationError, match="DSP48E2 subset model: unsupported attribute"):
        run(text, "dsp48e2_refused", {"rst": [0, 0], "m__a": [1, 2], "m__b": [3, 4]},
            ["m__p"], tmp_path)

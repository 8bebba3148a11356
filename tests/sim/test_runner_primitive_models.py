# amaranth: UnusedElaboratable=no
"""The runner appends the Verilog model of each vendor primitive a design instantiates
(:func:`nnrtl.sim.runner.with_primitive_models`), once, and only then."""

from nnrtl.hw.arith.dsp48e2 import OPMODE_C_PLUS_M, DSP48E2Slice, model_verilog
from nnrtl.sim.runner import with_primitive_models, to_verilog


def test_a_dsp48e2_instance_gets_the_model_once():
    text = to_verilog(DSP48E2Slice(opmode=OPMODE_C_PLUS_M, primitive=True), "slice_top")
    assert "module DSP48E2" not in text
    built = with_primitive_models(text)
    assert built.startswith(text) and built.endswith(model_verilog())
    assert built.count("module DSP48E2") == 1
    assert with_primitive_models(built) == built     # a model already there is kept


def test_a_design_without_primitives_is_left_as_it_is():
    text = to_verilog(DSP48E2Slice(opmode=OPMODE_C_PLUS_M, primitive=False), "slice_top")
    assert with_primitive_models(text) == text

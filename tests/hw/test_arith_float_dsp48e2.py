# amaranth: UnusedElaboratable=no
"""FloatAdd and FloatMul with their DSP slices as :class:`DSP48E2Slice` s
(``dsp_primitives``): the behavioural form bit-exact with the numpy models (Amaranth
simulator), the Instance form's DSP48E2 cells in the Verilog, and the option's checks.
The Instance form runs under Verilator in ``tests/sim/test_arith_float_verilator.py``
(``test_dsp_primitives_arith_float``, slow)."""

import numpy as np
import pytest

from nnrtl.hw.arith.float import BF16, FP16, FP32, FloatAdd, FloatFormat, FloatMul
from nnrtl.sim.golden.float import random_operands
from nnrtl.sim.runner import to_verilog

from test_arith_float import assert_bit_exact, exponent_gap_pairs, stream_through

CASES = [(op, fmt, stages, flush) for op in ("add", "sub", "mul")
         for fmt, stages, flush in [(FP32, 0, False), (FP32, 6, True), (BF16, 3, False),
                                    (FP16, 1, True)]]


def make(op, fmt, dsp_primitives, **kwargs):
    if op == "mul":
        return FloatMul(fmt, dsp_primitives=dsp_primitives, **kwargs)
    return FloatAdd(fmt, shifts="dsp", dsp_primitives=dsp_primitives, **kwargs)


@pytest.mark.parametrize("op, fmt, stages, flush", CASES, ids=str)
def test_behaviour_bit_exact(op, fmt, stages, flush):
    seed = sum(map(ord, f"{op}{fmt}{stages}{flush}primitives"))
    a, b, _kinds = random_operands(fmt, op, 200, seed)
    dut = make(op, fmt, "behaviour", stages=stages, flush_subnormals=flush)
    got = stream_through(dut, op, a, b, gap=0.3, stall=0.3, seed=seed)
    assert_bit_exact(op, fmt, a, b, got, flush)


@pytest.mark.parametrize("op", ["add", "sub"])
def test_behaviour_at_every_exponent_difference(op):
    """fp32 pairs with exponent differences 0 to 39: both halves of the split alignment
    product on the slice, and its clamp."""
    rng = np.random.default_rng(29)
    count = 240
    a, b = exponent_gap_pairs(rng, count)
    dut = make(op, FP32, "behaviour", stages=0)
    assert_bit_exact(op, FP32, a, b, stream_through(dut, op, a, b), False)


@pytest.mark.parametrize("op, fmt, slices", [("add", FP32, 1), ("mul", FP32, 2),
                                             ("mul", FP16, 1)], ids=str)
def test_instances_in_the_verilog(op, fmt, slices):
    assert to_verilog(make(op, fmt, True), "u").count("DSP48E2 #(") == slices


def test_option_checks():
    with pytest.raises(TypeError, match=r"^dsp_primitives must be False, True or "
                                        r"'behaviour', not 'yes'$"):
        FloatAdd(FP32, shifts="dsp", dsp_primitives="yes")
    with pytest.raises(ValueError, match=r"^dsp_primitives=True needs shifts='dsp', not "
                                         r"shifts='lut'$"):
        FloatAdd(FP32, dsp_primitives=True)
    with pytest.raises(ValueError, match=r"^dsp_primitives=True needs product='dsp' and a "
                                         r"precision of at most 26 bits, not "
                                         r"product='lut' and 24 bits$"):
        FloatMul(FP32, product="lut", dsp_primitives=True)
    with pytest.raises(ValueError, match=r"precision of at most 26 bits, not product='dsp' "
                                         r"and 30 bits$"):
        FloatMul(FloatFormat(8, 29), dsp_primitives=True)
    assert FloatAdd(FP32, shifts="dsp", dsp_primitives=True).dsp_primitives is True
    assert FloatMul(FP32).dsp_primitives is False


#: Yosys ``synth_xilinx -family xcup`` (flattened) of fp32 units: ``(kwargs, LUTs without,
#: LUTs with dsp_primitives=True, DSP48E2 either way)``.
MEASURED = [
    ("add", dict(stages=8, flush_subnormals=True), 310, 269, 3),
    ("add", dict(stages=3), 321, 293, 3),
    ("mul", dict(stages=3), 421, 378, 2),
    ("mul", dict(stages=4, flush_subnormals=True, shifts="dsp"), 104, 82, 3),
]


@pytest.mark.slow
@pytest.mark.parametrize("op, kwargs, luts, primitive_luts, dsp", MEASURED, ids=str)
def test_dsp_primitives_by_yosys(op, kwargs, luts, primitive_luts, dsp):
    from nnrtl.gen.synth import measure_unit
    without = measure_unit(make(op, FP32, False, **kwargs), "xcup")
    with_primitives = measure_unit(make(op, FP32, True, **kwargs), "xcup")
    assert (without["lut"], without["dsp"]) == (luts, dsp)
    assert (with_primitives["lut"], with_primitives["dsp"]) == (primitive_luts, dsp)

# amaranth: UnusedElaboratable=no
"""The DSP48E2 slice's behavioural form (Amaranth simulator) against an integer model of
UG579's equations, on random vectors with resets and clock enables, for every
configuration in ``dsp48e2_vectors.CONFIGS`` and a two-slice cascaded product; its
parameter checks; and the Instance form's attributes."""

import re

import pytest

from nnrtl.hw.arith.dsp48e2 import (ALUMODE_SUBTRACT, OPMODE_C_PLUS_M, OPMODE_M,
                                    OPMODE_P_PLUS_M, OPMODE_PCIN17_PLUS_M, DSP48E2Slice,
                                    model_verilog)
from nnrtl.sim.runner import to_verilog

from dsp48e2_vectors import CONFIGS, SliceBundle, amaranth_run, random_vectors, reference


@pytest.mark.parametrize("seed", [1, 2])
def test_behaviour_matches_the_reference(seed):
    names = list(CONFIGS) + ["cascade"]
    bundle = SliceBundle(names, primitive=False)
    vectors = random_vectors(bundle, 400, seed)
    outputs = amaranth_run(bundle, vectors)
    for name in names:
        for port, expected in reference(name, vectors).items():
            assert outputs[f"{name}__{port}"] == expected, (name, port)


def test_cascade_extremes():
    """The cascaded 27 x 35 product at the corners of its range."""
    bundle = SliceBundle(["cascade"], primitive=False)
    pairs = [(-2 ** 26, -2 ** 34), (-2 ** 26, 2 ** 34 - 1), (2 ** 26 - 1, -2 ** 34),
             (2 ** 26 - 1, 2 ** 34 - 1), (-1, -1), (0, -2 ** 34), (12345, 2 ** 17 - 1)]
    vectors = {"rst": [0] * len(pairs),
               "cascade__a": [a % 2 ** 27 for a, _ in pairs],
               "cascade__b": [b % 2 ** 35 for _, b in pairs]}
    outputs = amaranth_run(bundle, vectors)["cascade__p"]
    assert outputs == [(a * b) % 2 ** 62 for a, b in pairs]
    assert outputs[0] == 2 ** 60


def test_ports_and_latency():
    slice_ = DSP48E2Slice(opmode=OPMODE_C_PLUS_M, areg=2, breg=1, creg=1, mreg=1, preg=1)
    members = set(slice_.signature.members)
    assert members == {"a", "b", "c", "ce_a", "ce_b", "ce_c", "ce_m", "ce_p", "p", "pcout"}
    assert (slice_.a_latency, slice_.b_latency, slice_.c_latency, slice_.pcin_latency) \
        == (4, 3, 2, 1)
    combinational = DSP48E2Slice(opmode=OPMODE_PCIN17_PLUS_M)
    assert set(combinational.signature.members) == {"a", "b", "pcin", "p", "pcout"}
    assert combinational.a_latency == 0


def test_instance_attributes():
    text = to_verilog(DSP48E2Slice(opmode=OPMODE_PCIN17_PLUS_M, areg=1, breg=2, mreg=1,
                                   preg=1, primitive=True), "top")
    assert text.count("DSP48E2 #(") == 1
    for attribute, value in [("AREG", "32'd1"), ("ACASCREG", "32'd1"), ("BREG", "32'd2"),
                             ("MREG", "32'd1"), ("PREG", "32'd1"), ("CREG", "32'd0"),
                             ("OPMODEREG", "32'd0"), ("USE_MULT", '"MULTIPLY"')]:
        assert f".{attribute}({value})" in text
    assert ".OPMODE(9'h055)" in text
    assert re.search(r"\.CEA1\(1'h0\)", text) and re.search(r"\.CEB1\(ce_b\)", text)
    assert "module DSP48E2" in model_verilog()


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(opmode=2 ** 9), TypeError, r"^opmode must be a 9-bit integer, not 512$"),
    (dict(opmode=0b000000001), ValueError,
     r"^opmode 0b000000001 is outside the supported subset: X/Y must be 00/00 or 01/01"),
    (dict(opmode=0b001000101), ValueError, r"^opmode 0b001000101 is outside the supported"),
    (dict(opmode=0b100000101), ValueError, r"^opmode 0b100000101 is outside the supported"),
    (dict(opmode=OPMODE_M, alumode=0b0001), ValueError,
     r"^alumode must be 0b0000 \(add\) or 0b0011 \(subtract\), not 1$"),
    (dict(opmode=OPMODE_M, areg=3), TypeError, r"^areg must be one of 0, 1, 2, not 3$"),
    (dict(opmode=OPMODE_M, preg=2), TypeError, r"^preg must be one of 0, 1, not 2$"),
    (dict(opmode=OPMODE_M, primitive=1), TypeError, r"^primitive must be a bool, not 1$"),
    (dict(opmode=OPMODE_P_PLUS_M), ValueError,
     r"^opmode 0b000100101 feeds P back, which needs preg=1, not preg=0$"),
])
def test_parameter_checks(kwargs, error, message):
    with pytest.raises(error, match=message):
        DSP48E2Slice(**kwargs)


def test_subtract_is_z_minus_the_rest():
    bundle = SliceBundle(["c_minus_m"], primitive=False)
    assert CONFIGS["c_minus_m"]["alumode"] == ALUMODE_SUBTRACT
    vectors = {"rst": [0, 0], "c_minus_m__a": [3, 3], "c_minus_m__b": [5, 5],
               "c_minus_m__c": [100, 100], "c_minus_m__ce_c": [1, 1]}
    # C is registered: cycle 0 sees C = 0, so 0 - 15; cycle 1 sees 100 - 15
    assert amaranth_run(bundle, vectors)["c_minus_m__p"] == [2 ** 48 - 15, 85]
    assert OPMODE_M == 0b000000101


def test_yosys_counts_the_instances_as_dsp_only():
    """``measure_unit`` of the Instance form: the DSP48E2 cells, no LUT or flip-flop for
    them (registers included: they are the slice's own)."""
    from nnrtl.gen.synth import measure_unit
    counts = measure_unit(SliceBundle(["c_plus_m_regs", "cascade"], primitive=True), "xcup")
    assert counts == {"lut": 0, "lut_memory": 0, "ff": 0, "dsp": 3, "bram36": 0.0}

# amaranth: UnusedElaboratable=no
"""The arithmetic bench (nnrtl.gen.bench): its stage sweep covers every variant of the fp32
adder and multiplier at every pipeline depth, and a deeper pipeline leaves fewer logic
levels (Yosys on two depths)."""

import tempfile

from nnrtl.gen import bench
from nnrtl.gen.progress import Progress
from nnrtl.hw.arith import FP32, FloatAdd, FloatMul


def test_stage_sweep_covers_every_variant_at_every_depth():
    sweep = bench._stage_sweep()
    assert {(unit, variant) for unit, variant, _ in sweep} == {
        ("fp32 add", "shifts lut"), ("fp32 add", "shifts dsp"),
        ("fp32 multiply", "normalize operand"), ("fp32 multiply", "normalize product"),
        ("fp32 multiply", "shifts dsp"), ("fp32 multiply", "normal operands"),
        ("fp32 multiply", "normal operands, shifts dsp")}
    for (unit, variant, stages), (kind, kwargs) in sweep.items():
        built = kind(FP32, **kwargs)
        assert built.stages == stages
        assert kind is (FloatAdd if unit == "fp32 add" else FloatMul)
        if unit == "fp32 add":
            assert variant == f"shifts {built.shifts}"
        else:
            assert ("normal operands" in variant) == (built.operands == "normal")
            assert ("shifts dsp" in variant) == (built.shifts == "dsp")
            assert variant != "normalize product" or built.normalize == "product"
    depths = {stages for unit, _, stages in sweep if unit == "fp32 multiply"}
    assert depths == set(range(1, len(FloatMul.CUT_PRIORITY) + 1))


def test_deeper_multiplier_has_fewer_logic_levels():
    sweep = bench._stage_sweep()
    units = bench._builds({key: sweep[key] for key in [
        ("fp32 multiply", "normalize operand", 1), ("fp32 multiply", "normalize operand", 6)]})
    with tempfile.TemporaryDirectory() as scratch, \
            Progress("test", total=2, unit="Yosys runs") as bar:
        rows = list(bench._synthesize(units, ("xc7",), scratch, bar))
    (_, _, shallow), (_, _, deep) = rows
    assert deep["logic_levels"] < shallow["logic_levels"]
    assert deep["ff"] > shallow["ff"] and deep["dsp"] == shallow["dsp"] == 2
    lines = bench._markdown_sweep([{"unit": key[0], "variant": key[1], "stages": key[2],
                                    "family": family, **counts}
                                   for key, family, counts in rows])
    assert lines[-1].startswith("| fp32 multiply | normalize operand | 6 | ")

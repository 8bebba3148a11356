# amaranth: UnusedElaboratable=no
"""FloatAdd / FloatMul under Verilator against the numpy models (bench in
nnrtl.sim.tb.arith_float).

``make test`` streams a reduced count per operation and format; the full count, 10**6
operand pairs per operation per format (the default units) and for fp32's other
variants (the adder's shifts on DSP slices; the multiplier normalising the product, its
right shift on a DSP slice, its operands in the normal form, and both; the Omni lane's
flushing pair with their shifts on DSP slices), is
marked ``slow`` and selected by ``make verify-arith`` (``pytest -m slow -k arith``). To keep Verilator builds few, an adder and a
multiplier sit side by side in one :class:`StreamUnitBundle` (ports ``i_add__payload``,
``o_mul__valid``, ...): one build per format serves add, sub and mul.
"""

import pytest

from nnrtl.hw.arith.float import BF16, FP16, FP32, FloatAdd, FloatFormat, FloatMul
from nnrtl.hw.arith.dsp48e2 import model_verilog
from nnrtl.sim.runner import simulate, to_verilog
from nnrtl.sim.tb.bundle import StreamUnitBundle


#: A Verilator build takes minutes on a busy machine; a hang must not stall CI.
pytestmark = pytest.mark.timeout(900)


FORMATS = [FP32, BF16, FP16]
OPS = ["add", "sub", "mul"]
#: Pause patterns of the backpressure run, over which its operand pairs are split.
PATTERNS = ["cycle", "random", "bursty"]
REDUCED_COUNT = 20_000
FULL_COUNT = 1_000_000


#: The multiplier's variants: keyword arguments of FloatMul.
MULTIPLIER_VARIANTS = {
    "product": {"normalize": "product"},
    "operand": {"normalize": "operand"},
    "dsp": {"shifts": "dsp"},
    "normal": {"operands": "normal"},
    "normal_dsp": {"operands": "normal", "shifts": "dsp"},
    "lut_product": {"product": "lut"},
    "dsp_primitives": {"dsp_primitives": True},
}
#: The adder's variants besides its ``shifts``: keyword arguments of FloatAdd.
ADDER_VARIANTS = {"dsp_primitives": {"shifts": "dsp", "dsp_primitives": True}}


def spec(fmt, *, stages=3, flush_subnormals=False, variant=None):
    """A unit: ``variant`` is the adder's ``shifts`` or a key of
    :data:`MULTIPLIER_VARIANTS` (None: the unit's default)."""
    return {"exponent_bits": fmt.exponent_bits, "mantissa_bits": fmt.mantissa_bits,
            "stages": stages, "flush_subnormals": flush_subnormals, "variant": variant}


def build_unit(spec):
    mul = spec["unit"] == "mul"
    extra = {} if spec["variant"] is None else (
        MULTIPLIER_VARIANTS[spec["variant"]] if mul else
        ADDER_VARIANTS.get(spec["variant"], {"shifts": spec["variant"]}))
    return (FloatMul if mul else FloatAdd)(
        FloatFormat(spec["exponent_bits"], spec["mantissa_bits"]), stages=spec["stages"],
        flush_subnormals=spec["flush_subnormals"], **extra)


def bundle(adder, multiplier):
    """An adder and a multiplier (``spec`` dicts), named ``add`` and ``mul``."""
    specs = {"add": dict(adder, unit="add"), "mul": dict(multiplier, unit="mul")}
    name = "float_" + "_".join(
        f"{key}_{FloatFormat(s['exponent_bits'], s['mantissa_bits']).name}_s{s['stages']}"
        + ("_ftz" if s["flush_subnormals"] else "")
        + (f"_{s['variant']}" if s["variant"] else "") for key, s in specs.items())
    return StreamUnitBundle(specs, build_unit), name


def run_bench(design, op, *, count, backpressure_count, seed=1):
    top, name = design
    key = "mul" if op == "mul" else "add"
    unit = build_unit(top.specs[key])
    fmt = unit.fmt
    fields = ["a", "b"] if op == "mul" else ["a", "b", "subtract"]
    verilog = to_verilog(top, name)
    if "DSP48E2 #(" in verilog:     # Instances of DSP48E2Slice: Verilator needs the model
        verilog += model_verilog()
    result = simulate(verilog, test_module="nnrtl.sim.tb.arith_float", name=name, seed=seed,
                      params={
                          "ports": {"i": f"i_{key}", "o": f"o_{key}"},
                          "op": op,
                          "exponent_bits": fmt.exponent_bits,
                          "mantissa_bits": fmt.mantissa_bits,
                          "flush_subnormals": unit.flush_subnormals,
                          "operands": unit.operands if op == "mul" else "ieee",
                          "latency": unit.latency,
                          "offsets": {field: unit.payload_layout[field].offset
                                      for field in fields},
                          "count": count,
                          "backpressure_count": backpressure_count,
                          "patterns": PATTERNS,
                      })
    print(op, fmt, f"stages={unit.stages}", f"flush={unit.flush_subnormals}", result)
    assert result["vectors"] == count
    assert result["mismatches"] == 0, result["examples"]
    assert result["cycles"] == count + unit.latency
    assert result["first_latency"] == unit.latency
    if backpressure_count:
        assert result["backpressure_vectors"] == backpressure_count
        assert result["backpressure_mismatches"] == 0, result["backpressure_examples"]
        assert list(result["backpressure_patterns"]) == PATTERNS
    return result


def default_bundle(fmt):
    return bundle(spec(fmt), spec(fmt))


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_reduced_count(op, fmt):
    run_bench(default_bundle(fmt), op, count=REDUCED_COUNT, backpressure_count=2_000)


# the shallowest and deepest pipelines, with and without flushing, in two more builds
VARIANTS = {
    "fp32_ftz": (spec(FP32, stages=6, flush_subnormals=True),
                 spec(FP32, stages=1, flush_subnormals=True)),
    # with the other variant of each unit: the adder's shifts on DSP slices, the
    # multiplier normalising the product
    "fp16_bf16": (spec(FP16, stages=1, variant="dsp"),
                  spec(BF16, stages=6, variant="product")),
    # the FARNN PE's multiplier (normal-form operands, its right shift on a DSP slice)
    "fp32_normal": (spec(FP32, stages=2, variant="dsp"),
                    spec(FP32, stages=3, variant="normal_dsp")),
}
#: fp32's other variants, at the full count only (``make verify-arith``).
FP32_OTHER_VARIANTS = (spec(FP32, variant="dsp"), spec(FP32, variant="product"))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("op", OPS)
def test_pipeline_depths_and_flush(op, variant):
    run_bench(bundle(*VARIANTS[variant]), op, count=5_000, backpressure_count=1_000, seed=2)


@pytest.mark.slow
@pytest.mark.timeout(5400)
@pytest.mark.parametrize("fmt", FORMATS, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_full_count_arith_float(op, fmt):
    run_bench(default_bundle(fmt), op, count=FULL_COUNT, backpressure_count=100_000, seed=3)


@pytest.mark.slow
@pytest.mark.timeout(5400)
@pytest.mark.parametrize("op", OPS)
def test_full_count_arith_float_other_variants(op):
    """fp32's other variant of each unit (adder shifts on DSP slices, the multiplier
    normalising the product) at the full count."""
    run_bench(bundle(*FP32_OTHER_VARIANTS), op, count=FULL_COUNT,
              backpressure_count=100_000, seed=4)


@pytest.mark.slow
@pytest.mark.timeout(5400)
@pytest.mark.parametrize("variant", ["dsp", "normal", "normal_dsp", "lut_product"])
def test_full_count_arith_float_multiplier_variants(variant):
    """fp32's multiplier with its right shift on a DSP slice, with normal-form operands,
    both (the FARNN PE's), and with its significands' product in LUTs (DSP usage
    ``none``), at the full count."""
    run_bench(bundle(spec(FP32), spec(FP32, variant=variant)), "mul", count=FULL_COUNT,
              backpressure_count=100_000, seed=5)


@pytest.mark.slow
@pytest.mark.timeout(5400)
@pytest.mark.parametrize("op", OPS)
def test_dsp_primitives_arith_float(op):
    """fp32's adder (shifts on DSP slices, 8 stages, flushing: the Omni lane's) and
    multiplier (3 stages) with their DSP slices as DSP48E2 Instances
    (``dsp_primitives=True``), simulated with the subset's Verilog model: bit-exact with
    the numpy models, as the other variants, on 10**5 operand pairs."""
    run_bench(bundle(spec(FP32, stages=8, flush_subnormals=True, variant="dsp_primitives"),
                     spec(FP32, variant="dsp_primitives")),
              op, count=100_000, backpressure_count=10_000, seed=8)


#: The Omni lane's units: the 8-stage flushing adder and the 4-stage flushing multiplier,
#: both with their shifts on DSP slices.
OMNI_LANE = (spec(FP32, stages=8, flush_subnormals=True, variant="dsp"),
             spec(FP32, stages=4, flush_subnormals=True, variant="dsp"))


@pytest.mark.slow
@pytest.mark.timeout(5400)
@pytest.mark.parametrize("op", OPS)
def test_full_count_arith_float_omni_lane(op):
    """The Omni lane's adder and multiplier (flushing, shifts on DSP slices: the adder's
    8-stage rounding register, the multiplier's one-bit normalisation as a product) at
    the full count."""
    run_bench(bundle(*OMNI_LANE), op, count=FULL_COUNT, backpressure_count=100_000, seed=6)

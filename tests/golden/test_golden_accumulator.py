"""Golden model of the streaming accumulator: order, semantics, accuracy.

The model (:mod:`nnrtl.sim.golden.accumulator`) is checked against an independent
evaluation of the documented order in numpy ``float32`` / ``float16`` arithmetic (IEEE,
round to nearest even), on directed cases, and against exact sums (``math.fsum``)
within the bound of a recursive summation of that depth.
"""

import math

import numpy as np
import pytest

from nnrtl.hw.arith.float import BF16, FP16, FP32
from nnrtl.sim.golden.accumulator import reduction_order, streaming_sum, streaming_sums
from nnrtl.sim.golden.float import from_bits, special_values, to_bits

NUMPY = {FP32: np.float32, FP16: np.float16}


def numpy_sum(values, stages, dtype):
    """The documented order evaluated in numpy arithmetic of ``dtype``."""
    slots = [dtype(-0.0)] * stages
    for k, x in enumerate(values):
        slots[k % stages] = slots[k % stages] + dtype(x)
    n = len(values)
    leaving = {f"Q{j}": slots[(n + j) % stages] for j in range(stages)}
    return eval(reduction_order(stages), {}, leaving)  # e.g. "Q2 + (Q0 + Q1)"


def bits_of(value, dtype):
    return int(np.asarray(value, dtype=dtype).view(np.uint32 if dtype is np.float32
                                                   else np.uint16))


@pytest.mark.parametrize("fmt", [FP32, FP16])
@pytest.mark.parametrize("stages", range(1, 7))
def test_order_matches_numpy_arithmetic(fmt, stages):
    dtype = NUMPY[fmt]
    rng = np.random.default_rng(stages)
    streams = []
    for n in list(range(1, 2 * stages + 3)) + [50, 333]:
        # wide magnitudes, so that the order of the additions shows in the rounding
        scale = 2.0 ** rng.integers(-8, 9, n) if fmt is FP32 else 2.0 ** rng.integers(-4, 5, n)
        streams.append(np.asarray(rng.normal(size=n) * scale, dtype=dtype))
    sums = streaming_sums(fmt, [s.view(np.uint32 if dtype is np.float32 else np.uint16)
                                for s in streams], adder_stages=stages)
    for values, got in zip(streams, sums):
        with np.errstate(over="ignore"):
            want = numpy_sum(values, stages, dtype)
        assert int(got) == bits_of(want, dtype)


def test_order_shows():
    """A stream whose sum depends on the order: 1, 2**24, 1, -2**24 in fp32."""
    x = to_bits(FP32, [1.0, 2.0 ** 24, 1.0, -(2.0 ** 24)])
    sums = {stages: from_bits(FP32, streaming_sum(FP32, x, adder_stages=stages))
            for stages in (1, 2, 3)}
    # sequential: 2**24 + 1 ties to 2**24, so the ones are lost; two slots keep them
    assert sums == {1: 0.0, 2: 2.0, 3: 1.0}  # 3 slots: (1 - 2**24) + (2**24 + 1 -> 2**24)


@pytest.mark.parametrize("stages", [1, 2, 3, 6])
def test_semantics(stages):
    fmt = FP32
    sv = special_values(fmt)

    def total(*values, flush=False):
        return streaming_sum(fmt, list(values), adder_stages=stages, flush_subnormals=flush)

    assert total(sv["+1"]) == sv["+1"]
    assert total(sv["+max_subnormal"]) == sv["+max_subnormal"]
    assert total(sv["+max_subnormal"], flush=True) == sv["+0"]
    assert total(sv["-max_subnormal"], flush=True) == sv["-0"]
    assert total(sv["-snan"]) == fmt.canonical_nan
    assert total(*([sv["+1"]] * 9 + [sv["-qnan"]])) == fmt.canonical_nan
    assert total(sv["+inf"], sv["+1"], sv["-max_normal"]) == sv["+inf"]
    assert total(sv["-inf"], *[sv["+1"]] * 7) == sv["-inf"]
    assert total(sv["+inf"], sv["+1"], sv["-inf"]) == fmt.canonical_nan
    assert total(*[sv["+max_normal"]] * 4) == sv["+inf"]  # overflow of a partial sum
    assert total(*[sv["-0"]] * 7) == sv["-0"]
    assert total(*[sv["-0"]] * 7, sv["+0"]) == sv["+0"]
    assert total(sv["+1"], sv["-1"]) == sv["+0"]
    assert total(*[sv["+min_subnormal"]] * 5) == 5
    assert total(*[sv["+min_subnormal"]] * 5, flush=True) == sv["+0"]


def test_many_streams_at_once_equal_one_at_a_time():
    rng = np.random.default_rng(3)
    streams = [to_bits(BF16, rng.normal(size=n)) for n in rng.integers(1, 60, 40)]
    for stages in (1, 4, 5):
        together = streaming_sums(BF16, streams, adder_stages=stages, flush_subnormals=True)
        alone = [streaming_sum(BF16, s, adder_stages=stages, flush_subnormals=True)
                 for s in streams]
        assert [int(x) for x in together] == alone


@pytest.mark.parametrize("fmt", [FP32, BF16, FP16])
@pytest.mark.parametrize("stages", [1, 3, 6])
def test_within_bound_of_exact_sum(fmt, stages):
    """|sum - fsum(x)| <= h u / (1 - h u) * sum(|x|), h the most additions any value goes
    through (its slot's share, then at most ``stages`` in the reduction), u = 2**-p."""
    rng = np.random.default_rng(stages * 7 + fmt.width)
    u = 2.0 ** -fmt.precision
    for n in (1, 7, 100, 1024, 4096):
        h = -(-n // stages) + stages
        if h * u > 0.25 or n // stages > 1024:
            continue  # no useful bound (bf16), or slow
        for scale_spread in (0, 6):
            x = rng.normal(size=n) * 2.0 ** rng.integers(-scale_spread, scale_spread + 1, n)
            bits = to_bits(fmt, x)
            values = from_bits(fmt, bits)  # exactly what is summed
            got = float(from_bits(fmt, streaming_sum(fmt, bits, adder_stages=stages)))
            exact = math.fsum(values)
            bound = h * u / (1 - h * u) * math.fsum(np.abs(values))
            assert abs(got - exact) <= bound, (n, got, exact, bound)


def test_validation():
    with pytest.raises(ValueError, match=r"^stream 1 is empty; every stream holds at least "
                                         r"one value$"):
        streaming_sums(FP32, [[1], []], adder_stages=2)
    with pytest.raises(TypeError, match=r"^adder_stages must be a positive integer, not 0$"):
        streaming_sum(FP32, [1], adder_stages=0)
    with pytest.raises(TypeError, match=r"^fmt must be a FloatFormat, not 'fp32'$"):
        streaming_sum("fp32", [1], adder_stages=1)
    assert streaming_sums(FP32, [], adder_stages=3).size == 0

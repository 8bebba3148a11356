"""The Omni-PE golden model (:mod:`nnrtl.sim.golden.omni.pe`) against numpy and PyTorch
fp32.

EW multiply, outer product and EW add / subtract: bit for bit equal to numpy's and
PyTorch's float32 operations (finite operands, subnormals and overflow included) with
``flush_subnormals=False`` (numpy and PyTorch keep subnormals; the PE's default flushes
them, as :func:`nnrtl.sim.golden.float.float_add` and ``float_mul`` document and
``tests/golden/test_golden_float.py`` checks).

MVM: the accumulator's order is not the sequential one, so the sum is checked within the
classic error bound of a summation tree: with ``u = 2**-24``, a product rounded once and
then added through at most ``ceil(n / L) - 1`` additions of its slot (the slot's first
addition, ``-0 + p``, is exact) and the ``ceil(log2 L)`` levels of the final reduction,

    |sum - exact| <= gamma(k) * sum |x_i y_i|,  k = ceil(n / L) + ceil(log2 L),
    gamma(k) = k u / (1 - k u),

``exact`` the exact dot product of the fp32 operands (``math.fsum`` of float64 products,
which are exact). Against PyTorch's fp32 dot product (its order unknown: ``gamma(n)``) the
two bounds add. With one adder stage the order is the sequential one, and the model
equals a float32 loop bit for bit.
"""

import math

import numpy as np
import pytest
import torch

from nnrtl.hw.arith.float import FP32
from nnrtl.hw.omni import OmniJob, OmniMode, OmniPEConfig
from nnrtl.sim.golden.float import from_bits, to_bits
from nnrtl.sim.golden.omni.pe import job_results, run_jobs

U = 2.0 ** -24


def gamma(k):
    return k * U / (1 - k * U)


def fp32_values(rng, n):
    """Normal values over a wide range, with zeros, subnormals and near-overflow ones."""
    x = (rng.normal(size=n) * 2.0 ** rng.integers(-40, 40, n)).astype(np.float32)
    pick = rng.random(n)
    x[pick < 0.05] = np.float32(0.0) * np.sign(rng.normal())
    x[(pick >= 0.05) & (pick < 0.1)] = np.float32(1e-40) * rng.integers(-50, 50)
    x[(pick >= 0.1) & (pick < 0.13)] = np.float32(3e38) * np.sign(rng.normal())
    return x


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("adder_stages", [1, 8])
def test_elementwise_modes_equal_numpy_and_torch(adder_stages):
    config = OmniPEConfig(adder_stages=adder_stages, partial_depth=8, flush_subnormals=False)
    rng = np.random.default_rng(adder_stages)
    n = 2000
    a, b = fp32_values(rng, n), fp32_values(rng, n)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    with np.errstate(over="ignore"):
        cases = {
            OmniJob(OmniMode.EW_MUL, n): (a * b, ta * tb, a),
            OmniJob(OmniMode.EW_ADD, n): (a + b, ta + tb, a),
            OmniJob(OmniMode.EW_ADD, n, True): (a - b, ta - tb, a),
            OmniJob(OmniMode.OUTER, n): (a[0] * b, ta[0] * tb, a[:1]),
        }
    for job, (want_numpy, want_torch, first) in cases.items():
        got = job_results(config, job, bits(first), bits(b))
        assert np.array_equal(got, bits(want_numpy)), job
        assert np.array_equal(got, bits(want_torch.numpy())), job


@pytest.mark.parametrize("adder_stages", [2, 3, 5, 8])
@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 63, 1024])
def test_mvm_within_the_tree_bound(adder_stages, n):
    config = OmniPEConfig(adder_stages=adder_stages, partial_depth=8)
    rng = np.random.default_rng(1000 * adder_stages + n)
    x = rng.normal(size=n).astype(np.float32)
    y = (rng.normal(size=n) * 2.0 ** rng.integers(-8, 8, n)).astype(np.float32)
    [got] = from_bits(FP32, job_results(config, OmniJob(OmniMode.MVM, n), bits(x), bits(y)))
    products = x.astype(np.float64) * y.astype(np.float64)
    exact = math.fsum(products)
    magnitude = math.fsum(np.abs(products))
    k = -(-n // adder_stages) + math.ceil(math.log2(adder_stages))
    assert abs(got - exact) <= gamma(k) * magnitude
    torch_dot = float(torch.dot(torch.from_numpy(x), torch.from_numpy(y)))
    assert abs(got - torch_dot) <= (gamma(k) + gamma(n)) * magnitude


def test_mvm_with_one_stage_is_sequential():
    config = OmniPEConfig(adder_stages=1, partial_depth=1, flush_subnormals=False)
    rng = np.random.default_rng(3)
    x, y = fp32_values(rng, 300), rng.normal(size=300).astype(np.float32)
    total = np.float32(-0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        for p in x * y:
            total = np.float32(total + p)
    [got] = job_results(config, OmniJob(OmniMode.MVM, 300), bits(x), bits(y))
    assert got == bits(total)


def test_run_jobs_splits_the_streams():
    config = OmniPEConfig()
    jobs = [OmniJob(OmniMode.OUTER, 3), OmniJob(OmniMode.MVM, 2),
            OmniJob(OmniMode.EW_ADD, 2, True)]
    input1 = to_bits(FP32, [2.0, 1.0, 3.0, 10.0, 0.5])
    input2 = to_bits(FP32, [1.0, 2.0, 3.0, 4.0, 5.0, 1.0, 0.25])
    results = [from_bits(FP32, r).tolist() for r in run_jobs(config, jobs, input1, input2)]
    assert results == [[2.0, 4.0, 6.0], [19.0], [9.0, 0.25]]


@pytest.mark.parametrize("call, error, message", [
    (lambda: job_results(OmniPEConfig(), OmniJob(OmniMode.OUTER, 3), [1, 2], [1, 2, 3]),
     ValueError, r"^input1 holds 2 values, not 1 \(a OUTER job of length 3\)$"),
    (lambda: run_jobs(OmniPEConfig(), [OmniJob(OmniMode.MVM, 2)], [1, 2], [1]), ValueError,
     r"^the jobs take 2 Input1 and 2 Input2 values, not 2 and 1$"),
    (lambda: run_jobs(OmniPEConfig(), ["job"], [], []), TypeError,
     r"^job must be an OmniJob, not 'job'$"),
    (lambda: job_results("config", OmniJob(OmniMode.MVM, 1), [1], [1]), TypeError,
     r"^config must be an OmniPEConfig, not 'config'$"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()

"""The EB and SFU-backward golden models (nnrtl.sim.golden.fpdeep.eb) against PyTorch
autograd in float64.

Bound. fixed16 codes are integers; the float64 reference works on the same values (code ·
2⁻ᶠ) and every product and sum of them is exact in float64 here (below 2⁵³). So:

* EB: the golden model's exact sums equal ``x.grad · 2²ᶠ`` of ``conv2d(x, W, padding)``
  back-propagated with δ **exactly** (bound 0); its 16-bit output differs from ``x.grad``
  only by the final rounding, ``|E·2⁻ᶠ − x.grad| ≤ 2⁻ᶠ⁻¹`` where not saturated, and is
  the saturation limit where ``|x.grad|`` exceeds it.
* EB fp32: every error is a sum of ``n = n_out·K²`` products (zero lanes add exact
  zeros); along any path from a term to the result there are at most ``r = 1 + L_tile +
  L_CE + (G − 1)`` roundings (the product, the tile and CE tree levels, the group adds), so
  ``|ê − e| ≤ γ_r · Σ|W·δ|`` (Higham 4.2), ``γ_r = r·u/(1 − r·u)``, ``u = 2⁻²⁴``, with
  ``Σ|W·δ|`` the same back-propagation of ``|W|`` and ``|δ|``; float64's own error is
  below ``n·2⁻⁵³·Σ|W·δ|``, added.
* SFU backward: ``z.grad`` of ``max_pool2d(relu(z))`` (or ``relu(z)``) back-propagated with
  the error equals the golden δ exactly (torch's first-maximum rule and ReLU'(0) = 0, the
  SFU's).
"""

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.sim.golden.fpdeep.eb import eb_module, eb_sums, rescale, sfu_backward
from nnrtl.sim.golden.fpdeep.fp import fp_module

EB_CASES = [  # k, pad, w_in, ic, oc, p, stride, q
    (3, 1, 7, 3, 5, 2, 1, 3), (3, 0, 6, 2, 4, 4, 1, 2), (5, 2, 9, 3, 3, 1, 1, 3),
    (1, 0, 5, 4, 6, 4, 1, 4), (2, 0, 5, 1, 3, 2, 1, 1), (5, 1, 8, 2, 7, 3, 1, 2),
    # passes; stride 2 with a row and column no forward window reached; stride 3, K = 5
    (3, 1, 7, 5, 4, 3, 1, 2), (3, 0, 8, 3, 4, 2, 2, 1), (5, 1, 11, 2, 3, 2, 3, 2),
]


def config(precision, case):
    k, pad, w_in, ic, oc, p, stride, q = EB_CASES[case]
    return FpConfig(precision=precision, k=k, stride=stride, pad=pad, w_in=w_in, n_in=ic, n_out=oc,
                    p=p, q=q)


def torch_error(cfg, weights, delta):
    """``x.grad`` ``(w_in, w_in, n_in)`` of ``conv2d(x, weights)`` back-propagated with
    ``delta`` (float64 arrays)."""
    x = torch.zeros((1, cfg.n_in, cfg.w_in, cfg.w_in), dtype=torch.float64,
                    requires_grad=True)
    F.conv2d(x, torch.from_numpy(np.asarray(weights, np.float64)), stride=cfg.stride,
             padding=cfg.pad).backward(
        torch.from_numpy(np.moveaxis(np.asarray(delta, np.float64), -1, 0)[None]))
    return x.grad[0].permute(1, 2, 0).numpy()


def codes(rng, shape, scale):
    return rng.integers(-scale, scale + 1, shape)


@pytest.mark.parametrize("case", range(len(EB_CASES)))
def test_eb_against_torch(case):
    cfg = config("fixed16", case)
    f, k, ic, oc = cfg.frac_bits, cfg.k, cfg.n_in, cfg.n_out
    rng = np.random.default_rng(case)
    # up to ±16.0: large enough that some errors saturate in the 16-bit output
    weights = codes(rng, (oc, ic, k, k), 1 << (f + 4))
    delta = codes(rng, (cfg.w_out, cfg.w_out, oc), 1 << (f + 4))
    grad = torch_error(cfg, weights / 2.0 ** f, delta / 2.0 ** f)          # (y, x, i)
    assert np.array_equal(eb_sums(cfg, delta, weights), grad * 2.0 ** (2 * f))
    out = eb_module(cfg, delta, weights) / 2.0 ** f
    top, bottom = ((1 << 15) - 1) / 2.0 ** f, -(1 << 15) / 2.0 ** f
    inside = (grad <= top) & (grad >= bottom)
    assert np.all(np.abs(out - grad)[inside] <= 2.0 ** -(f + 1))
    assert np.array_equal(out[~inside], np.where(grad[~inside] > 0, top, bottom))
    assert inside.sum() > 0


@pytest.mark.parametrize("case", range(len(EB_CASES)))
def test_eb_fp32_against_torch(case):
    from nnrtl.hw.arith.float_format import FP32
    from nnrtl.hw.fpdeep.conv import tree_levels
    from nnrtl.sim.golden.float import from_bits, to_bits

    cfg = config("fp32", case)
    k, ic, oc, p = cfg.k, cfg.n_in, cfg.n_out, cfg.p
    rng = np.random.default_rng(40 + case)
    weights = (rng.standard_normal((oc, ic, k, k)) * 0.5).astype(np.float32)
    delta = rng.standard_normal((cfg.w_out, cfg.w_out, oc)).astype(np.float32)
    bits = lambda v: to_bits(FP32, v).astype(np.int64)
    got = from_bits(FP32, eb_module(cfg, bits(delta), bits(weights))).astype(np.float64)

    exact = torch_error(cfg, weights, delta)
    magnitude = torch_error(cfg, np.abs(weights), np.abs(delta))
    r = 1 + tree_levels(k * k) + tree_levels(p) + cfg.groups - 1
    u = 2.0 ** -24
    bound = (r * u / (1 - r * u) + oc * k * k * 2.0 ** -53) * magnitude
    assert np.all(np.abs(got - exact) <= bound)
    assert np.abs(got - exact).max() > 0                 # the roundings show


def test_eb_saturates_somewhere():
    """The random magnitudes of the cases above reach the 16-bit limit (the saturation is
    exercised, not only the rounding)."""
    cfg = config("fixed16", 0)
    rng = np.random.default_rng(0)
    f = cfg.frac_bits
    weights = codes(rng, (cfg.n_out, cfg.n_in, cfg.k, cfg.k), 1 << (f + 4))
    delta = codes(rng, (cfg.w_out, cfg.w_out, cfg.n_out), 1 << (f + 4))
    out = eb_module(cfg, delta, weights)
    assert np.any(np.abs(out) >= (1 << 15) - 1)


OCP_SPLITS = [  # precision, case, output-channel boundaries of the OCP segments
    ("fixed16", 0, (0, 2, 5)), ("fixed16", 7, (0, 1, 3, 4)), ("fp32", 0, (0, 2, 5)),
    ("fp32", 8, (0, 1, 3)),
]


@pytest.mark.parametrize("split", range(len(OCP_SPLITS)))
def test_eb_ocp_reduction_against_torch(split):
    """An OCP layer's segments (output channels ``[lo, hi)`` each) reduce their partial
    errors up the backward chain (``partial_in`` / ``rounded``, the rule of
    ``gen/fpdeep/chain.py``): fixed16 the exact sums equal the whole layer's (``x.grad ·
    2²ᶠ``, bound 0) and the most upstream segment rounds once; fp32 within the Higham bound
    of the test above with one more rounding per segment downstream."""
    precision, case, bounds = OCP_SPLITS[split]
    layer = config(precision, case)
    rng = np.random.default_rng(70 + split)
    shape_w = (layer.n_out, layer.n_in, layer.k, layer.k)
    shape_d = (layer.w_out, layer.w_out, layer.n_out)
    if precision == "fp32":
        from nnrtl.hw.arith.float_format import FP32
        from nnrtl.hw.fpdeep.conv import tree_levels
        from nnrtl.sim.golden.float import from_bits, to_bits
        weights = (rng.standard_normal(shape_w) * 0.5).astype(np.float32)
        delta = rng.standard_normal(shape_d).astype(np.float32)
        words = [to_bits(FP32, v).astype(np.int64) for v in (weights, delta)]
    else:
        weights, delta = codes(rng, shape_w, 1 << 12), codes(rng, shape_d, 1 << 12)
        words = [weights, delta]
    segments = list(zip(bounds[:-1], bounds[1:]))
    configs = [dataclasses.replace(layer, n_out=hi - lo, p=min(layer.p, hi - lo))
               for lo, hi in segments]

    def reduce(round_last):
        partial = None
        for n in reversed(range(len(segments))):         # downstream first
            lo, hi = segments[n]
            partial = eb_module(configs[n], words[1][..., lo:hi], words[0][lo:hi], partial,
                                rounded=round_last and n == 0)
        return partial

    partial = reduce(True)
    if precision == "fixed16":
        f = layer.frac_bits
        wide = reduce(False)
        exact = torch_error(layer, weights / 2.0 ** f, delta / 2.0 ** f)
        assert np.array_equal(wide, exact * 2.0 ** (2 * f))
        assert np.array_equal(partial, rescale(layer, wide))
        return
    groups = max(cfg.groups for cfg in configs)
    got = from_bits(FP32, partial).astype(np.float64)
    exact = torch_error(layer, weights, delta)
    magnitude = torch_error(layer, np.abs(weights), np.abs(delta))
    r = 1 + tree_levels(layer.taps) + tree_levels(layer.p) + groups - 1 + len(segments) - 1
    u = 2.0 ** -24
    bound = (r * u / (1 - r * u) + layer.n_out * layer.taps * 2.0 ** -53) * magnitude
    assert np.all(np.abs(got - exact) <= bound)


def test_eb_partial_out_is_unrounded():
    """``rounded=False`` returns the exact 48-bit sums plus the partial (fixed16), which
    the upstream segment rounds; fp32 words are the same either way."""
    cfg = config("fixed16", 6)
    rng = np.random.default_rng(5)
    weights = codes(rng, (cfg.n_out, cfg.n_in, cfg.k, cfg.k), 1 << 8)
    delta = codes(rng, (cfg.w_out, cfg.w_out, cfg.n_out), 1 << 8)
    partial = codes(rng, (cfg.w_in, cfg.w_in, cfg.n_in), 1 << 20)
    wide = eb_module(cfg, delta, weights, partial, rounded=False)
    assert np.array_equal(wide, eb_sums(cfg, delta, weights) + partial)
    assert np.abs(wide).max() > 1 << 15                  # beyond the 16-bit words
    assert np.array_equal(eb_module(cfg, delta, weights, partial), rescale(cfg, wide))


SFU_CASES = [  # k, pad, w_in, oc, p, pool, relu
    (3, 1, 8, 5, 2, (2, 2, 0), True), (3, 1, 7, 3, 3, (2, 2, 0), True),
    (3, 0, 9, 4, 3, (3, 3, 0), True), (3, 1, 6, 3, 2, None, True),
    (1, 0, 5, 2, 1, (2, 2, 0), False),
    # overlapping (AlexNet's 3×3/2): 8×8 → 3×3 (row and column 7 uncovered), 9×9 → 4×4
    (3, 1, 8, 5, 2, (3, 2, 0), True), (3, 0, 11, 3, 3, (3, 2, 0), True),
]


@pytest.mark.parametrize("case", range(len(SFU_CASES)))
def test_sfu_backward_against_torch(case):
    k, pad, w_in, oc, p, pool, relu = SFU_CASES[case]
    cfg = FpConfig(precision="fixed16", k=k, stride=1, pad=pad, w_in=w_in, n_in=2, n_out=oc, p=p,
                   pool=pool, relu=relu)
    rng = np.random.default_rng(10 + case)
    one = 1 << cfg.frac_bits
    act = codes(rng, (w_in, w_in, 2), one)
    weights = codes(rng, (oc, 2, k, k), one // 2)
    result = fp_module(cfg, act, weights, codes(rng, oc, one))
    side = cfg.pool_out
    shape = (side, side, cfg.groups, cfg.p)
    error = codes(rng, shape, one)
    error.reshape(side, side, -1)[..., oc:] = 0
    delta = sfu_backward(cfg, error, result.relu.reshape(shape), result.argmax.reshape(shape))
    z = result.z.reshape(cfg.w_out, cfg.w_out, -1)[..., :oc]
    zt = torch.tensor(np.moveaxis(z, -1, 0)[None], dtype=torch.float64, requires_grad=True)
    y = F.relu(zt) if relu else zt
    if pool is not None:
        y = F.max_pool2d(y, pool[0], pool[1])
    err = error.reshape(side, side, -1)[..., :oc]
    y.backward(torch.tensor(np.moveaxis(err, -1, 0)[None], dtype=torch.float64))
    want = zt.grad[0].permute(1, 2, 0).numpy()
    got = delta.reshape(cfg.w_out, cfg.w_out, -1)
    assert np.array_equal(got[..., :oc], want)
    assert not got[..., oc:].any()
    assert got.any() and (pool is None or (got == 0).sum() > got.size // 2)


TIE_CASES = [  # precision, w_out, oc, p, pool
    ("fp32", 9, 3, 2, (3, 2, 0)), ("fp32", 8, 2, 2, (3, 1, 0)), ("fp32", 7, 3, 3, (2, 2, 0)),
    ("fixed16", 11, 3, 2, (3, 2, 0)), ("fixed16", 10, 2, 1, (5, 2, 0)),
]


@pytest.mark.parametrize("case", range(len(TIE_CASES)))
def test_sfu_backward_overlap_ties_against_torch(case):
    """Overlapping pools with many ties: ``z`` from seven values (ReLU'd zeros and equal
    positive maxima in most windows), the SFU's forward argmax (:func:`~nnrtl.sim.golden.
    fpdeep.fp.sfu`) and the golden backward against ``z.grad`` of ``max_pool2d(relu(z))``.
    fp32 in torch's own float32 (its CPU kernel adds ``grad_input[argmax] += grad`` over
    the pooled pixels in order, as the golden model): equal bit for bit up to the sign of
    zero; fixed16 exact in float64 (errors within ±32.0: sums of at most ``⌈k/s⌉²`` of them
    stay in the 16-bit range)."""
    from nnrtl.hw.arith.float_format import FP32
    from nnrtl.sim.golden.float import from_bits, to_bits
    from nnrtl.sim.golden.fpdeep.fp import sfu
    precision, w_out, oc, p, pool = TIE_CASES[case]
    cfg = FpConfig(precision=precision, k=1, stride=1, pad=0, w_in=w_out, n_in=1, n_out=oc, p=p,
                   pool=pool)
    rng = np.random.default_rng(40 + case)
    lanes = cfg.groups * cfg.p
    values = rng.integers(-3, 4, (w_out, w_out, lanes)).astype(np.float64) / 2
    values[..., oc:] = 0
    side = cfg.pool_out
    err = rng.standard_normal((side, side, lanes)) * 8
    err[..., oc:] = 0
    if precision == "fp32":
        err = err.astype(np.float32)
        enc = lambda v: to_bits(FP32, np.asarray(v, np.float32)).astype(np.int64)
    else:
        err = np.round(err * 256) / 256
        enc = lambda v: np.round(np.asarray(v) * 256).astype(np.int64)
    shape = (side, side, cfg.groups, cfg.p)
    z = enc(values).reshape(w_out, w_out, cfg.groups, cfg.p)
    _, relu, argmax = sfu(cfg, z)
    delta = sfu_backward(cfg, enc(err).reshape(shape), relu, argmax)
    dtype = torch.float32 if precision == "fp32" else torch.float64
    zt = torch.tensor(np.moveaxis(values[..., :oc], -1, 0)[None], dtype=dtype,
                      requires_grad=True)
    F.max_pool2d(F.relu(zt), pool[0], pool[1]).backward(
        torch.tensor(np.moveaxis(err[..., :oc], -1, 0)[None], dtype=dtype))
    want = zt.grad[0].permute(1, 2, 0).numpy()
    got = delta.reshape(w_out, w_out, lanes)[..., :oc]
    if precision == "fp32":
        got = from_bits(FP32, got.astype(np.uint32)).astype(np.float32)
    else:
        got = got / 256
    assert np.array_equal(got, want)
    assert not delta.reshape(w_out, w_out, lanes)[..., oc:].any()
    routed = np.zeros((w_out, w_out, lanes), int)       # windows routed to each pixel
    k, s, _ = pool
    for py in range(side):
        for px in range(side):
            for lane in range(lanes):
                a, b = divmod(int(argmax.reshape(side, side, lanes)[py, px, lane]), k)
                routed[py * s + a, px * s + b, lane] += relu.reshape(side, side, lanes)[
                    py, px, lane]
    assert (routed >= 2).any() == (k > s)                # sums where windows overlap



"""The FPDeep chain's pieces (:mod:`nnrtl.gen.fpdeep.chain`): the nodes' words, the EB
partial-error reduction of an OCP layer against one node's EB and float64 PyTorch, the
segments the node RTL cannot run yet."""

import numpy as np
import torch

from nnrtl.gen.fpdeep.chain import Codec, GoldenRunner, Segment, rtl_limits
from nnrtl.hw.fpdeep.config import FpConfig


def test_codec_words():
    """fixed16: x·2^f rounded half up, saturated to 16 bits; fp32: float32 patterns."""
    codec = Codec("fixed16", 13)
    q = 2.0 ** -13
    assert codec.encode([0.5 * q, -0.5 * q, 1.49 * q, 10, -10]).tolist() == [
        1, 0, 1, 32767, -32768]
    assert codec.decode([8192, -1]).tolist() == [1.0, -q]
    fp = Codec("fp32", 13)
    assert fp.encode([1.0, -2.0]).tolist() == [0x3F800000, 0xC0000000]
    assert fp.decode(fp.encode([0.1])).tolist() == [float(np.float32(0.1))]


def _ocp_errors(precision, delta, weights, cuts):
    """The errors of an OCP layer (5 output channels cut at ``cuts``) reduced on the
    backward chain by :class:`GoldenRunner`, downstream segment first."""
    runner, partial = GoldenRunner(), None
    bounds = [0, *cuts, 5]
    for n in reversed(range(len(bounds) - 1)):
        lo, hi = bounds[n], bounds[n + 1]
        cfg = FpConfig(precision=precision, k=3, stride=1, pad=1, w_in=7, n_in=4, n_out=hi - lo,
                       p=1, frac_bits=13)
        partial = runner.eb(n + 1, cfg, delta[..., lo:hi], weights[lo:hi], partial, n == 0)
    return partial


def test_ocp_error_reduction():
    """fixed16: the exact partial sums rounded once by the most upstream segment give
    the unsplit layer's errors bit for bit; fp32: within 1e-6 of PyTorch float64's
    input gradient of the convolution (δ through the 180°-rotated kernels)."""
    rng = np.random.default_rng(3)
    delta = rng.uniform(-0.5, 0.5, (7, 7, 5))
    weights = rng.uniform(-0.5, 0.5, (5, 4, 3, 3))
    codec = Codec("fixed16", 13)
    whole = _ocp_errors("fixed16", codec.encode(delta), codec.encode(weights), [])
    for cuts in ([2], [1, 3]):
        split = _ocp_errors("fixed16", codec.encode(delta), codec.encode(weights), cuts)
        assert np.array_equal(split, whole), cuts
    fp = Codec("fp32", 13)
    found = fp.decode(_ocp_errors("fp32", fp.encode(delta), fp.encode(weights), [1, 3]))
    x = torch.zeros(1, 4, 7, 7, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(fp.decode(fp.encode(weights)))
    y = torch.nn.functional.conv2d(x, w, padding=1)
    y.backward(torch.tensor(fp.decode(fp.encode(delta))).permute(2, 0, 1)[None])
    reference = x.grad[0].permute(1, 2, 0).numpy()
    assert np.abs(found - reference).max() < 1e-6
    assert np.abs(codec.decode(whole) - reference).max() <= 2 ** -14 + 45 * 2 ** -14


class _Seg:
    def __init__(self, layer, mode):
        self.layer, self.mode = layer, mode


def test_rtl_limits():
    """The segments the node RTL cannot run yet: fixed16 EB sums of more than 2^16
    products, on one node or reduced up an OCP chain (the most upstream node's partial
    holds every product of the layer); EB with q < n_in and an OCP layer's EB (partial
    errors) run; the first layer has no EB."""
    def segment(node, mode, q, n_in=6, n_out=4, precision="fp32"):
        return Segment(node, FpConfig(precision=precision, k=3, stride=1, pad=1, w_in=7, n_in=n_in,
                                      n_out=n_out, p=2, q=q),
                       _Seg("conv", mode))
    layers = {0: [segment(1, "ICP", 1)],
              1: [segment(1, "OCP", 6), segment(2, "OCP", 3)],
              2: [segment(2, "ICP", 6), segment(3, "ICP", 6, n_out=7282,
                                                  precision="fixed16")],
              3: [segment(3, "OCP", 6, n_out=4000, precision="fixed16"),
                  segment(4, "OCP", 6, n_out=4000, precision="fixed16")]}
    assert rtl_limits(layers) == [
        ("conv", 3, "EB sums n_out·k² = 65538 products, more than 2^16"),
        ("conv", 3, "EB's OCP partial errors sum 72000 products up to this node, more "
                    "than 2^16")]

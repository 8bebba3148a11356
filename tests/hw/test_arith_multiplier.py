# amaranth: UnusedElaboratable=no
"""LUT-built multipliers and the DSP count of ``*``: ``lut_product`` is exact (Amaranth
simulator: exhaustive for small widths, random and extreme codes for 16 bits), Yosys
builds it without DSP slices in about the LUTs ``lut_product_luts`` says, and
``dsp_slices`` agrees with Yosys ``synth_xilinx`` on every shape measured."""

import itertools
import random
import re

import pytest
from amaranth.hdl import Module, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from nnrtl.gen.synth import count_resources, run_yosys
from nnrtl.hw.arith.multiplier import (dsp_slices, lut_product, lut_product_luts,
                                       rtl_products)


class Product(wiring.Component):
    """``p = a * b``, registered, with ``lut_product`` or ``*``."""

    def __init__(self, a_shape, b_shape, lut=True, registered=False):
        self._lut, self._registered = lut, registered
        super().__init__({"a": In(a_shape), "b": In(b_shape),
                          "p": Out(signed(a_shape.width + b_shape.width + 1))})

    def elaborate(self, platform):
        m = Module()
        value = lut_product(m, self.a, self.b) if self._lut else self.a * self.b
        domain = m.d.sync if self._registered else m.d.comb
        domain += self.p.eq(value)
        return m


def codes(width):
    return range(-(1 << (width - 1)), 1 << (width - 1))


@pytest.mark.parametrize("a_width, b_width", [(2, 2), (3, 5), (5, 3), (4, 4), (6, 1), (1, 6)])
def test_lut_product_exhaustive(a_width, b_width):
    dut = Product(signed(a_width), signed(b_width))
    sim = Simulator(dut)

    async def bench(ctx):
        for a, b in itertools.product(codes(a_width), codes(b_width)):
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            assert ctx.get(dut.p) == a * b, (a, b)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("a_width, b_width", [(16, 16), (16, 12), (17, 18)])
def test_lut_product_random_and_extremes(a_width, b_width):
    dut = Product(signed(a_width), signed(b_width))
    rng = random.Random(a_width * 100 + b_width)
    ends = [min(codes(a_width)), max(codes(a_width)), -1, 0, 1]
    pairs = [(a, b) for a in ends for b in [min(codes(b_width)), max(codes(b_width)), -1, 0, 1]]
    pairs += [(rng.choice(codes(a_width)), rng.choice(codes(b_width))) for _ in range(2000)]
    sim = Simulator(dut)

    async def bench(ctx):
        for a, b in pairs:
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            assert ctx.get(dut.p) == a * b, (a, b)
    sim.add_testbench(bench)
    sim.run()


def _synthesize(component, family, tmp_path):
    from amaranth.back import verilog
    (tmp_path / "top.v").write_text(verilog.convert(component, name="top"))
    cells, _, _ = run_yosys(tmp_path / "top.v", "top", family, tmp_path)
    return count_resources(cells)


def test_lut_product_has_no_dsp_and_the_estimated_luts(tmp_path):
    counts = _synthesize(Product(signed(16), signed(16), registered=True), "xc7", tmp_path)
    assert counts["dsp"] == 0 and counts["carry"] > 0
    assert counts["lut"] == pytest.approx(lut_product_luts(16, 16), rel=0.05)


# (family, a bits, b bits, a signed, b signed): DSP slices Yosys 0.70 synth_xilinx gave.
MEASURED = [
    ("xc7", 16, 16, True, True, 1), ("xc7", 32, 32, True, True, 4),
    ("xc7", 32, 16, True, True, 2), ("xc7", 25, 18, True, True, 1),
    ("xc7", 26, 18, True, True, 2), ("xc7", 24, 17, True, True, 1),
    ("xc7", 33, 33, True, True, 4), ("xc7", 32, 7, True, False, 2),
    ("xc7", 18, 32, True, True, 2), ("xc7", 40, 18, True, True, 2),
    ("xc7", 27, 18, True, True, 2), ("xcup", 26, 18, True, True, 1),
    ("xcup", 27, 18, True, True, 1), ("xcup", 28, 18, True, True, 2),
    ("xcup", 32, 32, True, True, 4), ("xcup", 40, 18, True, True, 2),
]


@pytest.mark.parametrize("family, a, b, a_signed, b_signed, dsp", MEASURED)
def test_dsp_slices_as_measured(family, a, b, a_signed, b_signed, dsp):
    assert dsp_slices(a, b, family, a_signed=a_signed, b_signed=b_signed) == dsp


@pytest.mark.parametrize("family, a, b, a_signed, b_signed",
                         [("xc7", 32, 32, True, True), ("xcup", 27, 18, True, True),
                          ("xc7", 32, 7, True, False)])
def test_dsp_slices_against_yosys(family, a, b, a_signed, b_signed, tmp_path):
    shape = {True: signed, False: unsigned}
    component = Product(shape[a_signed](a), shape[b_signed](b), lut=False, registered=True)
    expected = dsp_slices(a, b, family, a_signed=a_signed, b_signed=b_signed)
    (a_rtl, a_rtl_signed, b_rtl, b_rtl_signed), = rtl_products(component)  # mixed: both signed
    assert dsp_slices(a_rtl, b_rtl, family, a_signed=a_rtl_signed,
                      b_signed=b_rtl_signed) == expected
    assert _synthesize(component, family, tmp_path)["dsp"] == expected


def test_rtl_products_ignores_lut_products():
    assert rtl_products(Product(signed(16), signed(16))) == []


def test_dsp_slices_rejects_an_unknown_family():
    with pytest.raises(KeyError, match=re.escape("'xc6'")):
        dsp_slices(16, 16, "xc6")

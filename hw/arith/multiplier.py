"""A two's complement multiplier written as partial products, so that synthesis builds it
from LUTs and carry chains instead of a DSP slice.

Yosys (``synth_xilinx``) and Vivado map every ``*`` to DSP slices while any are left;
an engine with more multipliers than its board has DSPs (SBE on the ZC706: 1024 PEs,
900 DSP48E1) writes the rest with :func:`lut_product`. There is no ``$mul`` for the tools
to map. The partial products are ``b[i] ? a : 0`` with weight ``2**i`` for the magnitude
bits of ``b`` and ``-(b[n-1] ? a : 0)`` with weight ``2**(n-1)`` for its sign bit. They
are added pairwise as a balanced tree; the ``d`` low bits of the lower-weight operand,
below the other one, pass through untouched, so each adder is only as wide as the overlap
(plus a carry) and stays an adder (a carry chain) in synthesis, instead of being merged
into one carry-save tree. Every sum is cut to the product's width (two's complement sums
cut to ``2n`` bits are exact modulo ``2**(2n)``, and the product fits), so the value is
exactly ``a * b``.

Yosys 0.48 ``synth_xilinx`` builds a registered 16 x 16 product from 393 LUTs and 69
CARRY4 (:func:`lut_product_adder_bits` gives 368 adder bits for it).
"""

import re

from amaranth.back import rtlil
from amaranth.hdl import Cat, Mux, Signal, signed

__all__ = ["lut_product", "lut_product_adder_bits", "lut_product_luts", "DSP_INPUTS",
           "dsp_slices", "rtl_products"]


def _tree(rows, a_width, add):
    """Walk the adder tree of an ``a_width`` x ``len(rows)`` product.

    ``rows`` are the partial products (row ``i`` has weight ``2**i``, the last one is
    negated and a bit wider). Terms are ``(value, weight, width)``;
    ``add(low, high, d, width)`` returns the value of ``(low >> d) + high`` in ``width``
    bits (``low`` has the lower weight, ``d`` the difference). Returns the final term.
    """
    b_width = len(rows)
    product_width = a_width + b_width
    terms = [(row, i, a_width + (i == b_width - 1)) for i, row in enumerate(rows)]
    while len(terms) > 1:
        paired = []
        for (low, s_low, w_low), (high, s_high, w_high) in zip(terms[0::2], terms[1::2]):
            d = s_high - s_low
            room = product_width - s_low
            width = min(room - d, max(w_low - d, w_high) + 1)
            total = add(low, high, d, width)
            paired.append((total, s_low, min(room, d + width)))
        terms = paired + terms[len(terms) - len(terms) % 2:]
    return terms[0]


def lut_product_adder_bits(a_width, b_width):
    """Bits of all the adders of an ``a_width`` x ``b_width`` :func:`lut_product` (about
    one LUT and a quarter CARRY4 each)."""
    bits = []
    _tree([None] * b_width, a_width, lambda low, high, d, width: bits.append(width))
    return sum(bits)


def lut_product(m, a, b, *, name="lut_product"):
    """``a * b`` of two signed Amaranth values, as partial products (no ``*``).

    The partial sums are signals driven in ``m.d.comb`` (named ``{name}_sum{k}``).
    Returns a ``signed(len(a) + len(b))`` value.
    """
    a = a.as_signed()
    width = len(a) + len(b)
    rows = [Mux(b[i], a, 0) for i in range(len(b) - 1)] + [-Mux(b[-1], a, 0)]
    sums = []

    def add(low, high, d, sum_width):
        total = Signal(signed(sum_width), name=f"{name}_sum{len(sums)}")
        m.d.comb += total.eq(low.as_signed()[d:].as_signed() + high.as_signed())
        sums.append(total)
        return Cat(low[:d], total).as_signed()

    value, _, _ = _tree(rows, len(a), add)
    return value[:width].as_signed()


def lut_product_luts(a_width, b_width):
    """LUTs of one :func:`lut_product`: a LUT per adder bit, plus one per pair of
    partial-product bits entering the first adders (the carry chain's generate input).
    Within 3% of Yosys 0.70 ``synth_xilinx`` for 8 to 18-bit squares (16 x 16: 405 here,
    393 there)."""
    return lut_product_adder_bits(a_width, b_width) + a_width * b_width // 2


#: DSP slice multiplier inputs by Yosys family: (A, B) widths, signed.
DSP_INPUTS = {"xc7": (25, 18), "xcup": (27, 18)}


def dsp_slices(a_width, b_width, family, *, a_signed=True, b_signed=True):
    """DSP slices of one ``a_width`` x ``b_width`` multiplier in ``family`` (``xc7``:
    DSP48E1, 25 x 18 signed; ``xcup``: DSP48E2, 27 x 18), the way Yosys ``synth_xilinx``
    cuts it (``mul2dsp``): the wider operand on A, each operand split into a signed top
    part of the full width and unsigned lower parts one bit narrower. An unsigned operand
    takes one more bit."""
    a, b = a_width + (not a_signed), b_width + (not b_signed)
    a, b = max(a, b), min(a, b)
    a_max, b_max = DSP_INPUTS[family]

    def parts(width, maximum):
        return 1 if width <= maximum else 1 + -(-(width - maximum) // (maximum - 1))
    return parts(a, a_max) * parts(b, b_max)


_MUL_CELL = re.compile(r"cell \$mul \S+\n((?:\s*parameter .*\n)+)")


def rtl_products(component):
    """``[(a_width, a_signed, b_width, b_signed), ...]``: every ``*`` in the RTL of
    ``component`` (its ``$mul`` cells once converted to RTLIL, submodules included)."""
    products = []
    for cell in _MUL_CELL.findall(rtlil.convert(component)):
        params = dict(line.split()[1:3] for line in cell.strip().splitlines())
        products.append((int(params["\\A_WIDTH"]), params["\\A_SIGNED"] == "1",
                         int(params["\\B_WIDTH"]), params["\\B_SIGNED"] == "1"))
    return products

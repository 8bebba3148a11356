# amaranth: UnusedElaboratable=no
"""Fixed-point units: Rescale, FixedMul, FixedAdd, FixedMac (Amaranth simulator).

Random operands (extremes and near-zero codes favoured), random gaps on ``i`` and stalls
on ``o``, bit-exact against :mod:`nnrtl.sim.golden.fixed`; the latency property is the
measured one and a beat is accepted every cycle when nothing stalls.
"""

import zlib

import pytest
from amaranth.hdl import signed, unsigned

from nnrtl.hw.arith.fixed import (FixedAdd, FixedMac, FixedMul, Overflow, QFormat, Rescale,
                                  Rounding)
from nnrtl.sim.tb.arith_fixed import check_in_amaranth as check_unit

Q = QFormat
TRUNCATE, HALF_UP, HALF_EVEN = Rounding.TRUNCATE, Rounding.HALF_UP, Rounding.HALF_EVEN
SATURATE, WRAP = Overflow.SATURATE, Overflow.WRAP

UNITS = {
    "rescale_32_to_16": lambda: Rescale(Q(32, 24), Q(16, 12)),
    "rescale_even_wrap": lambda: Rescale(Q(16, 4), Q(8, 2), rounding=HALF_EVEN,
                                         overflow=WRAP),
    "rescale_left_unsigned": lambda: Rescale(Q(12, 8, False), Q(10, 9), rounding=TRUNCATE),
    "rescale_to_unsigned": lambda: Rescale(Q(16, 8), Q(8, 0, False)),
    "mul_16x16": lambda: FixedMul(Q(16, 12), Q(16, 12)),
    "mul_16_rescaled_even": lambda: FixedMul(Q(16, 12), Q(16, 12), Q(16, 12),
                                             rounding=HALF_EVEN, stages=1),
    "mul_mixed_wrap": lambda: FixedMul(Q(16, 15), Q(16, 8, False), Q(16, 10),
                                       overflow=WRAP, stages=2),
    "mul_32_truncate": lambda: FixedMul(Q(32, 24), Q(32, 24), Q(32, 24), rounding=TRUNCATE,
                                        stages=4),
    "add_exact": lambda: FixedAdd(Q(16, 12), Q(16, 8)),
    "sub_32_saturate": lambda: FixedAdd(Q(32, 24), Q(32, 24), Q(32, 24), subtract=True),
    "add_wrap_even": lambda: FixedAdd(Q(32, 20), Q(16, 12), Q(16, 8), rounding=HALF_EVEN,
                                      overflow=WRAP),
    "mac_16_acc_32": lambda: FixedMac(Q(16, 12), Q(16, 12)),
    "mac_init_saturating": lambda: FixedMac(Q(16, 12), Q(16, 12), Q(16, 12), init=True,
                                            acc_overflow=SATURATE, stages=1),
    "mac_wide_even_wrap": lambda: FixedMac(Q(16, 15), Q(8, 4, False), Q(12, 6),
                                           acc_fmt=Q(40, 19), rounding=HALF_EVEN,
                                           overflow=WRAP, stages=3),
}


@pytest.mark.parametrize("name", UNITS)
def test_matches_model(name):
    check_unit(UNITS[name](), seed=zlib.crc32(name.encode()))


def test_mac_back_to_back_groups_and_single_beat_groups():
    unit = FixedMac(Q(16, 0), Q(16, 0), init=True)
    inputs = [{"a": k, "b": 3, "last": 1, "init": 100 * k} for k in range(1, 20)]
    inputs += [{"a": 5, "b": 5, "last": k % 3 == 2, "init": 7} for k in range(30)]
    results = check_unit(unit, inputs=inputs)
    assert results[:19] == [{"sum": 103 * k} for k in range(1, 20)]
    assert results[19:29] == [{"sum": 7 + 75}] * 10


def test_saturating_multiply_corner():
    """-1.0 * -1.0 in Q(16, 15) is +1.0, one LSB beyond the format: it saturates."""
    unit = FixedMul(Q(16, 15), Q(16, 15), Q(16, 15))
    inputs = [{"a": -32768, "b": -32768}, {"a": -32768, "b": 32767}, {"a": 1, "b": 1 << 14}]
    assert check_unit(unit, inputs=inputs, patterns=[(0, 0)]) == \
        [{"product": 32767}, {"product": -32767}, {"product": 1}]


def test_latency_properties_and_formats():
    assert Rescale(Q(32, 24), Q(16, 12)).latency == 1
    assert FixedMul(Q(16, 12), Q(16, 12)).latency == 3
    assert FixedMul(Q(16, 12), Q(16, 12)).product_fmt == Q(32, 24)
    assert FixedMul(Q(16, 12), Q(16, 12), Q(32, 24), stages=2).latency == 2
    assert FixedMul(Q(16, 12), Q(16, 12), Q(16, 12), stages=2).latency == 3
    assert FixedAdd(Q(16, 12), Q(16, 8)).sum_fmt == Q(21, 12)  # Q(16, 8) gains 4 bits
    assert FixedAdd(Q(16, 12), Q(16, 8)).latency == 1
    assert FixedAdd(Q(8, 0, False), Q(8, 0, False)).sum_fmt == Q(9, 0, False)
    assert FixedAdd(Q(8, 0, False), Q(8, 0, False), subtract=True).sum_fmt == Q(9, 0)
    assert FixedAdd(Q(32, 24), Q(32, 24), Q(32, 24)).latency == 2
    mac = FixedMac(Q(16, 12), Q(16, 12))
    assert (mac.acc_fmt, mac.out_fmt, mac.latency, mac.stages) == (Q(32, 24), Q(32, 24), 3, 2)
    assert FixedMac(Q(16, 12), Q(16, 12), Q(16, 12)).latency == 4
    assert mac.rounding is HALF_UP and mac.overflow is SATURATE and mac.acc_overflow is WRAP


def test_signatures():
    mul = FixedMul(Q(16, 12), Q(16, 8, False), Q(16, 10))
    assert list(mul.signature.members) == ["i", "o"]
    layout = mul.i.payload.shape()
    assert [(name, field.shape) for name, field in layout] == \
        [("a", signed(16)), ("b", unsigned(16))]
    assert [(n, f.shape) for n, f in mul.o.payload.shape()] == [("product", signed(16))]
    mac = FixedMac(Q(16, 12), Q(16, 12), init=True)
    assert [(n, f.shape) for n, f in mac.i.payload.shape()] == \
        [("a", signed(16)), ("b", signed(16)), ("last", 1), ("init", signed(32))]
    assert [(n, f.shape) for n, f in mac.o.payload.shape()] == [("sum", signed(32))]
    assert [n for n, _ in FixedMac(Q(8, 0), Q(8, 0)).i.payload.shape()] == ["a", "b", "last"]
    assert [n for n, _ in FixedAdd(Q(8, 0), Q(8, 0)).o.payload.shape()] == ["sum"]
    assert [n for n, _ in Rescale(Q(8, 0), Q(8, 0)).o.payload.shape()] == ["value"]


Q16 = Q(16, 12)


@pytest.mark.parametrize("call, error, message", [
    (lambda: Q(0, 0), TypeError, r"^width must be a positive integer, not 0$"),
    (lambda: Q(True, 0), TypeError, r"^width must be a positive integer, not True$"),
    (lambda: Q(16.0, 0), TypeError, r"^width must be a positive integer, not 16\.0$"),
    (lambda: Q(16, -1), TypeError, r"^fraction_bits must be a non-negative integer, not -1$"),
    (lambda: Q(16, 12, 1), TypeError, r"^signed must be a bool, not 1$"),
    (lambda: Q(16, 20), ValueError, r"^fraction_bits \(20\) cannot exceed width \(16\)$"),
    (lambda: Rescale(16, Q16), TypeError, r"^in_fmt must be a QFormat, not 16$"),
    (lambda: Rescale(Q16, None), TypeError, r"^out_fmt must be a QFormat, not None$"),
    (lambda: Rescale(Q16, Q16, rounding="floor"), TypeError,
     r"^rounding must be a Rounding, not 'floor'$"),
    (lambda: Rescale(Q16, Q16, overflow=Rounding.TRUNCATE), TypeError,
     r"^overflow must be an Overflow, not <Rounding\.TRUNCATE: 'truncate'>$"),
    (lambda: FixedMul((16, 12), Q16), TypeError, r"^a_fmt must be a QFormat, not \(16, 12\)$"),
    (lambda: FixedMul(Q16, "q16"), TypeError, r"^b_fmt must be a QFormat, not 'q16'$"),
    (lambda: FixedMul(Q16, Q16, 32), TypeError, r"^out_fmt must be a QFormat, not 32$"),
    (lambda: FixedMul(Q16, Q16, stages=0), TypeError,
     r"^stages must be a positive integer, not 0$"),
    (lambda: FixedMul(Q16, Q16, stages=2.0), TypeError,
     r"^stages must be a positive integer, not 2\.0$"),
    (lambda: FixedAdd(Q16, Q16, subtract=1), TypeError, r"^subtract must be a bool, not 1$"),
    (lambda: FixedAdd(Q16, Q16, overflow="wrap"), TypeError,
     r"^overflow must be an Overflow, not 'wrap'$"),
    (lambda: FixedMac(Q16, Q16, init="yes"), TypeError, r"^init must be a bool, not 'yes'$"),
    (lambda: FixedMac(Q16, Q16, acc_fmt=32), TypeError, r"^acc_fmt must be a QFormat, not 32$"),
    (lambda: FixedMac(Q16, Q16, acc_overflow=None), TypeError,
     r"^acc_overflow must be an Overflow, not None$"),
    (lambda: FixedMac(Q16, Q16, stages=-1), TypeError,
     r"^stages must be a positive integer, not -1$"),
    (lambda: FixedMac(Q16, Q16, acc_fmt=Q(32, 20)), ValueError,
     r"^acc_fmt\.fraction_bits \(20\) must equal the product's fraction bits \(24\)$"),
    (lambda: FixedMac(Q16, Q16, acc_fmt=Q(31, 24)), ValueError,
     r"^acc_fmt \(sfix31_En24\) cannot hold every product \(sfix32_En24\)$"),
    (lambda: FixedMac(Q16, Q16, acc_fmt=Q(32, 24, False)), ValueError,
     r"^acc_fmt \(ufix32_En24\) cannot hold every product \(sfix32_En24\)$"),
])
def test_validation(call, error, message):
    with pytest.raises(error, match=message):
        call()

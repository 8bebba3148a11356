"""The FPDeep node's parameter space for random configurations (:mod:`nnrtl.gen.draws`)."""

import struct

from ...hw.fpdeep.config import SHIFTS, FpConfig

__all__ = ["draw", "draw_segment"]

#: Segment kinds: (``partial_in``, ``completes``). A completing segment with partials in
#: is the last node of an ICP split, one without the layer's only segment; a partial
#: segment sends its partials downstream.
KINDS = ((False, True), (True, True), (False, False), (True, False))


def _fp32_bits(value):
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _shape(rng, kernels):
    """``(k, stride, pad, w_in)``: kernel 1 to 5 (mostly 1 to 3), stride 1 to 3, any pad
    below the kernel, an input map of 1 to 7 pixels a side that the padded window fits
    (odd sides, strides that leave input pixels unread)."""
    k = rng.choice(kernels)
    stride = rng.choice([1, 1, 1, 2, 2, 3])
    pad = rng.choice([0, k // 2, rng.randrange(k)])
    least = max(1, k - 2 * pad)
    w_in = rng.randint(least, max(least, 7 if k < 5 else 6))
    return k, stride, pad, w_in


def draw_segment(rng, precision, *, stages=(3, 3), frac_bits=8, kind=None, macs=12,
                 kernels=(1, 1, 2, 3, 3, 3, 4, 5), shifts=("lut", "dsp")):
    """A random :class:`FpConfig` of ``precision`` at simulation size: 1 to 5 input and
    output channels on ``P`` CEs of ``Q`` tiles (one pass or several, the last ragged),
    ``P · Q · K²`` at most ``macs`` (or ``K²``), a segment ``kind`` of :data:`KINDS`
    (random when None), ReLU or not, and on a completing segment a pool (kernel 1 to 3
    within the map, stride 1 to 3, overlapping or not) or none. ``stages`` are the fp32
    units' (multiplier, adder) pipeline stages, ``shifts`` their shifts."""
    k, stride, pad, w_in = _shape(rng, kernels)
    n_in, n_out = rng.randint(1, 5), rng.randint(1, 5)
    budget = max(1, macs // (k * k))
    p = rng.randint(1, min(n_out, budget))
    q = rng.randint(1, min(n_in, max(1, budget // p)))
    partial_in, completes = kind if kind is not None else rng.choice(KINDS)
    w_out = (w_in + 2 * pad - k) // stride + 1
    pool = None
    if completes and rng.random() < 0.4:
        size = rng.randint(1, min(3, w_out))
        pool = (size, rng.randint(1, 3), 0)
    return FpConfig(precision=precision, k=k, stride=stride, pad=pad, w_in=w_in, n_in=n_in,
                    n_out=n_out, p=p, partial_in=partial_in, completes=completes,
                    relu=rng.random() < 0.7, pool=pool, frac_bits=frac_bits,
                    multiplier_stages=stages[0], adder_stages=stages[1], q=q,
                    multiplier_shifts=shifts[0], adder_shifts=shifts[1])


def draw(rng):
    """A random FPDeep node on the VC709 at simulation size: fixed16 (any ``frac_bits``)
    or fp32 (any unit stages and shifts), 1 to 3 segments of every kind
    (:func:`draw_segment`), EB on or off per segment, EB partial errors taken and/or sent
    and ``delta_out`` on completing segments, mini-batches of 1 to 3, an Act-RAM of 1 to
    4 images and a learning rate of the precision's format. ``segments`` and ``eb`` are always pinned
    (their lengths agree); the scalars are left to the completion at times.

    Size: a node's segments share a budget of 1 to 12 MACs per module (fixed16; fp32 1
    to 4 on kernels of at most 3, at most 2 with two segments, its units elaborating
    about ten times a fixed16 MAC's logic), each segment at least its ``K²``.

    Returns
    -------
    tuple
        ``("vc709", {name: value})``.
    """
    precision = rng.choice(["fixed16", "fixed16", "fp32"])
    options = {"frac_bits": 8, "stages": (3, 3)}
    if precision == "fixed16" and rng.random() < 0.4:
        options["frac_bits"] = rng.randint(1, 15)
    if precision == "fp32" and rng.random() < 0.5:
        options["stages"] = (rng.randint(0, 6), rng.randint(0, 6))
    if precision == "fp32":
        options["shifts"] = (rng.choice(SHIFTS), rng.choice(SHIFTS))
    count = rng.choice([1, 1, 1, 1, 2, 2, 3] if precision == "fixed16"
                       else [1, 1, 1, 1, 1, 2])
    if precision == "fp32":             # an fp32 MAC elaborates ~10x a fixed16 one
        options["kernels"] = (1, 1, 2, 3) if count == 1 else (1, 2)
    options["macs"] = rng.randint(1, 12 if precision == "fixed16" else 4) // count or 1
    segments = tuple(draw_segment(rng, precision, **options) for _ in range(count))
    eb = tuple(rng.random() < 0.75 for _ in segments)
    params = {"segments": segments, "eb": eb}
    if any(eb) and rng.random() < 0.3:
        params["eb_partial"] = tuple((rng.random() < 0.5, rng.random() < 0.5) if e
                                     else (False, False) for e in eb)
    if any(s.completes for s in segments) and rng.random() < 0.3:
        params["delta_out"] = tuple(s.completes and rng.random() < 0.6 for s in segments)
    if rng.random() < 0.8:
        params["batch"] = rng.choice([1, 1, 2, 2, 3])
    if rng.random() < 0.7:
        params["act_images"] = rng.choice([1, 2, 2, 3, 4])
    if precision == "fp32":
        params["lr"] = _fp32_bits(2.0 ** -rng.randint(3, 10))
    elif rng.random() < 0.7:
        params["lr"] = rng.randint(1, 40000)
    if rng.random() < 0.3:
        params["node"] = rng.randint(1, 15)
    return "vc709", params

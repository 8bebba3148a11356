"""Bit-exact model of the demo engine's MAC array (:mod:`nnrtl.hw.demo`)."""

import numpy as np

__all__ = ["wrap", "dot_products", "pack_operands", "unpack_sums"]


def wrap(values, width):
    """Reduce integers to ``width``-bit two's complement (what a wrapping register holds)."""
    values = np.asarray(values, dtype=object)
    half = 1 << (width - 1)
    return (values + half) % (1 << width) - half


def dot_products(a, b, config):
    """Sums of one frame, lane by lane, as the RTL computes them.

    Parameters
    ----------
    a, b : array_like of int, shape (beats, lanes)
        Signed operands of ``config.operand_width`` bits.
    config : DemoConfig

    Returns
    -------
    list of int
        ``lanes`` sums, each wrapped to ``config.acc_width`` bits. Products are exact
        (``2 * operand_width <= acc_width``) and wrapping addition is associative, so the
        order of accumulation does not change the result.
    """
    a = np.asarray(a, dtype=object)
    b = np.asarray(b, dtype=object)
    return [int(v) for v in wrap((a * b).sum(axis=0), config.acc_width)]


def pack_operands(a_row, b_row, config):
    """One input beat (an int of ``config.in_width`` bits) from one row of operands."""
    w = config.operand_width
    mask = (1 << w) - 1
    word = 0
    for lane, (a, b) in enumerate(zip(a_row, b_row)):
        word |= (int(a) & mask) << (2 * lane * w)
        word |= (int(b) & mask) << ((2 * lane + 1) * w)
    return word


def unpack_sums(word, config):
    """The ``lanes`` signed sums of one output beat."""
    width = config.acc_width
    return [int(wrap((word >> (lane * width)) & ((1 << width) - 1), width))
            for lane in range(config.lanes)]

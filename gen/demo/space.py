"""The demo engine's parameter space for random configurations (:mod:`nnrtl.gen.draws`)."""

__all__ = ["draw"]


def draw(rng):
    """A random demo MAC array on the ZC706: 1 to 16 lanes, operands of 2 to 27 bits, an
    accumulator of a multiple of 8 bits from twice the operand to 64.

    Returns
    -------
    tuple
        ``("zc706", {name: value})``.
    """
    operand = rng.randint(2, 27)
    accumulators = [bits for bits in range(8, 65, 8) if bits >= 2 * operand]
    return "zc706", {"lanes": rng.randint(1, 16), "operand_width": operand,
                     "acc_width": rng.choice(accumulators)}

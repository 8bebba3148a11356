"""The padded sizes of an SBE configuration: the smallest input and hidden sizes at least
a model's that the RTL's divisibility rules accept (:attr:`nnrtl.hw.sbe.SbeConfig.padded`),
and the nearest valid values a rule padding cannot satisfy names."""

import math

__all__ = ["padded_sizes", "nearest_valid", "is_power_of_two"]


def is_power_of_two(n):
    """Whether ``n`` is a positive power of two."""
    return n > 0 and not n & (n - 1)


def nearest_valid(value, valid):
    """The nearest valid values below and above ``value`` (text, for error messages)."""
    below = next((n for n in range(value - 1, 0, -1) if valid(n)), None)
    above = next((n for n in range(value + 1, 2 * value + 64) if valid(n)), None)
    return " or ".join(str(n) for n in (below, above) if n is not None)


def _hidden_fits(config, hidden):
    rows = 4 * hidden
    pes = config.pes
    if rows % pes and pes % rows:
        return False
    step = max(1, pes // rows)
    if not is_power_of_two(step) or hidden % step or rows % config.bus_weights:
        return False
    if (min(pes, rows) // 4) % config.post_units:
        return False
    if config.layers > 1:
        width = 2 * hidden
        if width % config.blocks or (width // config.blocks) % step:
            return False
    return True


def padded_sizes(config):
    """``(padded_input_size, padded_hidden_size)``: the smallest sizes at least the model's
    that the RTL's rules accept, or None if no hidden size does."""
    limit = config.hidden_size + 4 * math.lcm(config.pes, config.blocks,
                                              4 * config.post_units) + 1
    hidden = next((h for h in range(config.hidden_size, limit) if _hidden_fits(config, h)),
                  None)
    if hidden is None:
        return None
    step = max(1, config.pes // (4 * hidden))
    inputs = config.input_size
    while ((inputs + hidden) % config.blocks or inputs % step
           or ((inputs + hidden) // config.blocks) % step):
        inputs += 1
    return inputs, hidden

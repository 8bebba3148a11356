"""Type and range checks of parameters, in Amaranth's wording (``hidden_size must be a
positive integer, not -3``): one copy for every configuration object of nnrtl."""

__all__ = ["is_int", "check_positive", "check_range", "check_non_negative", "by_distance"]


def by_distance(default, values):
    """``values`` ordered by their distance from ``default`` (the smaller first on a tie),
    ``default`` first when it is among them: the preference order of a free parameter's
    values when a partial configuration is completed (a configuration's ``candidates``)."""
    return sorted(dict.fromkeys(values), key=lambda v: (v != default, abs(v - default), v))


def is_int(value):
    """Whether ``value`` is an ``int`` (not a ``bool``)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_positive(name, value):
    """Raise ``TypeError`` unless ``value`` is a positive integer."""
    if not is_int(value) or value <= 0:
        raise TypeError(f"{name} must be a positive integer, not {value!r}")


def check_range(name, value, minimum, maximum):
    """Raise ``TypeError`` unless ``value`` is an integer from ``minimum`` to ``maximum``."""
    if not is_int(value) or not minimum <= value <= maximum:
        raise TypeError(f"{name} must be an integer from {minimum} to {maximum}, not {value!r}")


def check_non_negative(name, value):
    """Raise ``TypeError`` unless ``value`` is a non-negative integer."""
    if not is_int(value) or value < 0:
        raise TypeError(f"{name} must be a non-negative integer, not {value!r}")

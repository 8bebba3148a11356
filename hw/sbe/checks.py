"""The type and range checks of :class:`~nnrtl.hw.sbe.SbeConfig`'s parameters, in
Amaranth's wording (``hidden_size must be a positive integer, not -3``)."""

from ..checks import check_non_negative, check_positive, check_range, is_int

__all__ = ["is_int", "check_positive", "check_range", "check_non_negative",
           "check_hidden_sizes"]


def check_hidden_sizes(config):
    """``config.hidden_sizes`` as a tuple (a list, as a manifest's JSON holds it, is taken),
    checked against ``hidden_size`` and ``layers``.

    Raises
    ------
    TypeError
        Not a sequence of positive integers.
    ValueError
        Not one size per layer, or ``hidden_size`` not the largest of them.
    """
    sizes = config.hidden_sizes
    if not isinstance(sizes, (tuple, list)) or not all(is_int(n) and n > 0 for n in sizes):
        raise TypeError(f"hidden_sizes must be a tuple of positive integers, not {sizes!r}")
    sizes = tuple(sizes)
    if sizes and len(sizes) != config.layers:
        raise ValueError(f"hidden_sizes {sizes} must have one size per layer: layers is "
                         f"{config.layers}; set layers={len(sizes)}")
    if sizes and max(sizes) != config.hidden_size:
        raise ValueError(f"hidden_size ({config.hidden_size}) must be the largest of "
                         f"hidden_sizes {sizes}, what the engine is sized for; set "
                         f"hidden_size={max(sizes)}")
    return sizes

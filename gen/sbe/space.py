"""The SBE's parameter space for random configurations (:mod:`nnrtl.gen.draws`)."""

__all__ = ["draw"]


def draw(rng):
    """A random SBE on the ZC706 at simulation size: 1 to 3 layers (tapering or not), odd
    sizes, 4 to 64 PEs (fewer or more than the rows), batch 1 to beyond the sequence,
    optional batch normalisation, LUT multipliers and 8-bit operands. ``blocks``,
    ``bus_weights`` and ``post_units`` are left to the completion, or pinned to a value
    the completion would also reach.

    Returns
    -------
    tuple
        ``("zc706", {name: value})``.
    """
    layers = rng.choice([1, 1, 2, 3])
    hidden = rng.randint(1, 20)
    pes = 4 * rng.randint(1, 16)
    params = {"input_size": rng.randint(1, 40), "hidden_size": hidden, "layers": layers,
              "seq_len": rng.randint(1, 6), "pes": pes}
    if layers > 1 and rng.random() < 0.5:
        sizes = [rng.randint(1, hidden) for _ in range(layers)]
        sizes[rng.randrange(layers)] = hidden
        params["hidden_sizes"] = tuple(sizes)
    if rng.random() < 0.6:
        params["batch"] = rng.choice([1, rng.randint(1, params["seq_len"] + 2)])
    if rng.random() < 0.3:
        params["blocks"] = rng.choice([1, 2, 3, 4])
    if rng.random() < 0.3:
        params["batch_norm"] = True
    if rng.random() < 0.2:
        params["lut_multipliers"] = rng.randint(0, pes)
    if rng.random() < 0.2:
        params.update(operand_width=8, acc_width=rng.choice([16, 24]), weight_frac=6,
                      act_frac=6, cell_frac=12)
    return "zc706", params

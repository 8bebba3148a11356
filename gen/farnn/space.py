"""FARNN's parameter space for random configurations (:mod:`nnrtl.gen.draws`)."""

from ...hw.arith.dsp_usage import DSP_USAGE

__all__ = ["draw"]


def draw(rng):
    """A random FARNN on the VU9P at simulation size: LSTM (with or without a recurrent
    projection) or GRU, 1 to 9 hidden units, 1 to 2 layers, batch 1 to 3, 1 to 3 chains of
    1 to 6 PEs, at most 6 PEs an MVM unit (so rounds may be partial and split), the split
    chosen or pinned, the arithmetic's pipeline depths and its DSP usage.

    Returns
    -------
    tuple
        ``("vu9p", {name: value})``.
    """
    cell = rng.choice(["lstm", "gru"])
    hidden = rng.randint(1, 9)
    chains = rng.randint(1, 3)
    params = {"cell": cell, "input_size": rng.randint(1, 6), "hidden_size": hidden,
              "layers": rng.choice([1, 1, 2]), "seq_len": rng.randint(1, 3),
              "batch": rng.choice([1, 1, 2, 3]),
              "chain_length": rng.randint(1, max(1, 6 // chains)), "chains": chains}
    if cell == "lstm" and hidden > 1 and rng.random() < 0.3:
        params["proj_size"] = rng.randint(1, hidden - 1)
    if rng.random() < 0.5:
        params["split"] = rng.choice([d for d in range(1, chains + 1) if chains % d == 0])
    if rng.random() < 0.3:
        params["adder_stages"] = rng.randint(1, 6)
        params["multiplier_stages"] = rng.randint(0, 6)
    if rng.random() < 0.5:
        params["dsp_usage"] = rng.choice(list(DSP_USAGE))
    return "vu9p", params

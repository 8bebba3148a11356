"""The η-LSTM top's parameter space for random configurations (:mod:`nnrtl.gen.draws`)."""

__all__ = ["draw"]


def draw(rng):
    """A random η-LSTM top on the VCU128 at simulation size: an LSTM of 1 to 5 inputs and
    hidden units, 1 to 2 layers, 1 to 2 steps and batch 1 to 2, over 2 to 4 channels of 1 to
    4 Omni-PEs with 0 to ``channels - 1`` swing channels, adders of 2 to 8 stages, and 1
    to 3 HBM ports.

    Returns
    -------
    tuple
        ``("vcu128", {name: value})``.
    """
    channels = rng.randint(2, 4)
    return "vcu128", {
        "input_size": rng.randint(1, 5), "hidden_size": rng.randint(1, 5),
        "layers": rng.randint(1, 2), "seq_len": rng.randint(1, 2),
        "batch": rng.randint(1, 2), "channels": channels,
        "pes_per_channel": rng.randint(1, 4), "swing_channels": rng.randint(0, channels - 1),
        "adder_stages": rng.randint(2, 8), "max_tasks": 16, "hbm_ports": rng.randint(1, 3)}

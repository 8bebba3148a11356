"""Bit-exact model of :class:`nnrtl.hw.omni.channel.Channel` running the FW and BP cell
programs of :mod:`nnrtl.hw.omni.channel_program`.

Every step is run as the RTL runs it: each active lane's job through
:func:`nnrtl.sim.golden.omni.pe.job_results` (the MVM sums in the streaming accumulator's
order, every EW operation one :mod:`nnrtl.sim.golden.float` operation), then, for a step
routed through an activation unit, :func:`nnrtl.sim.golden.activation.evaluate` on the
config's table. The scratchpad is a dict of named flat vectors of bit patterns.

:func:`fw_cell` / :func:`bp_cell` take float arrays (rounded to the format), run the
program and return every vector the program wrote, as bit patterns.
"""

import functools

import numpy as np

from nnrtl.hw.omni.channel_config import Activation, ChannelConfig, Source
from nnrtl.hw.omni.channel_program import bp_program, fw_program, vector_sizes

from ..activation import evaluate
from ..float import pattern_dtype, to_bits
from .pe import job_results

__all__ = ["run_program", "step_operands", "step_results", "fw_inputs", "bp_inputs",
           "fw_cell", "bp_cell"]


def _check(config):
    if not isinstance(config, ChannelConfig):
        raise TypeError(f"config must be a ChannelConfig, not {config!r}")


def step_operands(step, scratchpad):
    """``(operand1, operand2)`` of ``step`` per lane: two lists of ``lanes`` arrays."""
    lanes = step.instruction.lanes
    out = []
    for access, source in ((step.operand1, step.instruction.source1),
                           (step.operand2, step.instruction.source2)):
        words = np.asarray(scratchpad[access.name], dtype=np.uint64)[access.index]
        if source is Source.BROADCAST:
            out.append([words] * lanes)
        else:
            out.append([words[:, lane] for lane in range(lanes)])
    return out


def step_results(config, step, scratchpad, tables=None):
    """The ``(out_beats, lanes)`` result words of ``step`` on ``scratchpad``."""
    instruction = step.instruction
    pe = config.pe
    operand1, operand2 = step_operands(step, scratchpad)
    columns = [np.asarray(job_results(pe, instruction.job, a, b), dtype=np.uint64)
               for a, b in zip(operand1, operand2)]
    results = np.stack(columns, axis=1)
    if instruction.activation is not Activation.NONE:
        tables = tables or {}
        function = "sigmoid" if instruction.activation is Activation.SIGMOID else "tanh"
        table = tables.get(function) or config.table(function)
        results = np.asarray(evaluate(table, results.ravel(),
                                      flush_subnormals=config.flush_subnormals),
                             dtype=np.uint64).reshape(results.shape)
    return results


@functools.lru_cache(maxsize=16)
def _tables(config):
    """The activation tables of ``config``, built once per configuration."""
    return {name: config.table(name) for name in ("sigmoid", "tanh")}


def run_program(config, program, scratchpad):
    """Run ``program`` on ``scratchpad`` (a dict, updated in place: written vectors are
    created at their :func:`~nnrtl.hw.omni.channel_program.vector_sizes` length). Returns
    the list of every step's result words (as ``step_results``)."""
    _check(config)
    sizes = vector_sizes(config)
    tables = _tables(config)
    outputs = []
    for step in program:
        results = step_results(config, step, scratchpad, tables)
        name = step.result.name
        if name not in scratchpad:
            scratchpad[name] = np.zeros(sizes[name], dtype=np.uint64)
        scratchpad[name][step.result.index] = results
        outputs.append(results)
    return outputs


def _bits(config, values):
    return np.asarray(to_bits(config.fmt, np.asarray(values, dtype=np.float64).ravel()),
                      dtype=np.uint64)


def fw_inputs(config, weight_ih, weight_hh, bias, x, h_prev, s_prev):
    """The FW scratchpad from float arrays: ``weight_ih`` 4H x I, ``weight_hh`` 4H x H,
    ``bias`` 4H (PyTorch's ``bias_ih + bias_hh``), ``x`` I, ``h_prev`` and ``s_prev`` H."""
    _check(config)
    weights = np.concatenate([np.asarray(weight_ih, dtype=np.float64),
                              np.asarray(weight_hh, dtype=np.float64),
                              np.asarray(bias, dtype=np.float64).reshape(-1, 1)], axis=1)
    z = np.concatenate([np.ravel(x), np.ravel(h_prev), [1.0]])
    want = (4 * config.hidden_size, config.fw_row_length)
    if weights.shape != want or z.size != config.fw_row_length:
        raise ValueError(f"the weights are {weights.shape[0]} x {weights.shape[1]} and z "
                         f"holds {z.size}, not {want[0]} x {want[1]} and {want[1]}")
    return {"weights": _bits(config, weights), "z": _bits(config, z),
            "s_prev": _bits(config, s_prev), "one": _bits(config, [1.0])}


def bp_inputs(config, fw_scratchpad, dy, dh_next, ds_next, dw_acc=None, db_acc=None):
    """The BP scratchpad: the FW one after :func:`fw_cell` (weights, z, gates, s,
    s_prev), the gradients ``dy`` (from the layer above), ``dh_next`` (δH_t) and
    ``ds_next`` (δS_t), H each, and the gradients accumulated so far (default 0):
    ``dw_acc`` 4H x (I+H), ``db_acc`` 4H."""
    _check(config)
    h, z_size = config.hidden_size, config.input_size + config.hidden_size
    pad = {name: np.asarray(fw_scratchpad[name], dtype=np.uint64).copy()
           for name in ("weights", "z", "one", "i", "f", "c", "o", "s", "s_prev")}
    pad["dy"], pad["dh_next"], pad["ds_next"] = (_bits(config, v) for v in (dy, dh_next,
                                                                            ds_next))
    pad["dw_acc"] = _bits(config, np.zeros((4 * h, z_size)) if dw_acc is None else dw_acc)
    pad["db_acc"] = _bits(config, np.zeros(4 * h) if db_acc is None else db_acc)
    return pad


def fw_cell(config, scratchpad):
    """Run :func:`~nnrtl.hw.omni.channel_program.fw_program` on a copy of
    ``scratchpad`` (from :func:`fw_inputs`); return the scratchpad after it."""
    pad = {name: np.asarray(v, dtype=np.uint64).copy() for name, v in scratchpad.items()}
    run_program(config, fw_program(config), pad)
    return pad


def bp_cell(config, scratchpad):
    """Run :func:`~nnrtl.hw.omni.channel_program.bp_program` on a copy of
    ``scratchpad`` (from :func:`bp_inputs`); return the scratchpad after it."""
    pad = {name: np.asarray(v, dtype=np.uint64).copy() for name, v in scratchpad.items()}
    run_program(config, bp_program(config), pad)
    return pad


def as_dtype(config, bits):
    """``bits`` as ``pattern_dtype(config.fmt)``."""
    return np.asarray(bits).astype(pattern_dtype(config.fmt))

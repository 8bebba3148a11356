"""An LSTM layer's FW and BP passes as a sequence of channel cell programs (spec
§1, §2.1, §3.3): the part of a training step :mod:`.trainer` gives the channel, shared by
its two backends.

A pass is a generator: it yields ``(program name, scratchpad)`` for every cell, in the
order the channel runs them, and is sent back the scratchpad after the program (every
vector the program wrote, bit patterns); its return value is the pass's outputs. The
golden backend answers with :func:`nnrtl.sim.golden.omni.channel.run_program`
(:func:`run_golden`), the RTL backend's bench (:mod:`nnrtl.sim.tb.omni.train`) with the
Channel RTL under Verilator, each beat checked against the same golden model. So the
sequencing (which vector of which cell feeds which) is written once.

The channel runs one sample at a time (its programs take vectors): a timestamp of a batch
of ``B`` is ``B`` cells. Programs (:func:`programs`), from
:mod:`nnrtl.hw.omni.channel_program`'s FW and BP cells:

* ``fw``: the FW cell (baseline: the gates ``i, f, c, o`` and ``s_t``, ``s_{t-1}`` are
  what FW stores for BP);
* ``fw_ms1``: MS1's FW: the FW cell followed by the BP cell's BP-EW-P1 steps (the steps
  before ``dh = dY + dH``): the six P1 vectors are computed in FW, right after FW-EW,
  and stored (pruned and compressed by the host, :mod:`.compress`) instead of the gates;
* ``bp``: the BP cell (baseline: BP-EW-P1 from the stored gates, then P2, eqs. 2-3);
* ``bp_ms1``: the BP cell without its P1 steps, the P1 vectors (decoded) given in the
  scratchpad (``p_S = f_t`` is given as the program's ``f``, the only use of ``f`` after
  P1).

At prune threshold 0 the P1 vectors MS1 stores are the bits the baseline's BP computes
(same channel operations on the same inputs), so MS1 gives the baseline's gradients bit
for bit.

Vectors are bit patterns of the channel's format (``uint64`` arrays). The weight vector
is :func:`nnrtl.sim.golden.omni.channel.fw_inputs`'s ``[W_ih W_hh b]`` rows.
"""

import numpy as np

from nnrtl.hw.omni.channel_program import bp_program, fw_program

__all__ = ["PART1_VECTORS", "SAVED", "PASSES", "programs", "weights_vector", "fw_pass", "bp_pass",
           "run_golden", "drive", "cell_macs"]

#: BP-EW-P1's vectors as the BP program names them, in :data:`nnrtl.gen.omni.cell.PART1`
#: order (``p_S`` is the gate ``f``).
PART1_VECTORS = ("p_o", "p_s", "p_i", "p_f", "p_c", "f")
#: What the baseline FW stores of a cell for BP (besides x_t and h_{t-1}).
SAVED = ("i", "f", "c", "o", "s", "s_prev")


def _p1_length(config):
    """The number of BP-EW-P1 steps at the head of the BP program."""
    program = bp_program(config)
    return next(k for k, step in enumerate(program) if step.result.name == "dh")


def programs(config):
    """``{name: list of Step}`` of the four programs (module docstring) for ``config``
    (a :class:`~nnrtl.hw.omni.channel_config.ChannelConfig`)."""
    fw, bp = fw_program(config), bp_program(config)
    split = _p1_length(config)
    return {"fw": fw, "fw_ms1": fw + bp[:split], "bp": bp, "bp_ms1": bp[split:]}


def weights_vector(config, weight_ih, weight_hh, bias):
    """The ``weights`` vector (bits) of a layer: row ``r`` is ``[W_ih[r] W_hh[r] b[r]]``,
    ``bias`` the sum ``bias_ih + bias_hh`` (rounded once to the format)."""
    from nnrtl.sim.golden.omni.channel import fw_inputs

    h, i_size = config.hidden_size, config.input_size
    return fw_inputs(config, weight_ih, weight_hh, bias, np.zeros(i_size), np.zeros(h),
                     np.zeros(h))["weights"]


def _constant_one(config):
    from nnrtl.sim.golden.float import to_bits

    return np.asarray(to_bits(config.fmt, np.array([1.0])), dtype=np.uint64)


def _z(x, h_prev, one):
    return np.concatenate([x, h_prev, one]).astype(np.uint64)


def fw_pass(config, weights, xs, ms1=False, kept=None):
    """The FW pass of a layer (generator, module docstring).

    Parameters
    ----------
    config : ChannelConfig
        The layer's sizes.
    weights : ndarray
        :func:`weights_vector`.
    xs : ndarray, T x B x I
        The layer input, bits.
    ms1 : bool
        Run ``fw_ms1`` (store the P1 vectors) instead of ``fw``.
    kept : ndarray of bool, T, optional
        MS2: the cells whose BP runs (default all); the others store nothing (their
        stored vectors stay 0) and, with ``ms1``, run ``fw`` (no P1).

    Returns
    -------
    dict of ndarray (bits): ``h`` (T x B x H, the outputs) and, per stored vector (the
    :data:`SAVED` ones, or with ``ms1`` the :data:`PART1_VECTORS`), T x B x H.
    """
    length, batch = xs.shape[:2]
    h = config.hidden_size
    one = _constant_one(config)
    stored = PART1_VECTORS if ms1 else SAVED
    kept = np.ones(length, bool) if kept is None else np.asarray(kept, bool)
    out = {name: np.zeros((length, batch, h), np.uint64) for name in ("h", *stored)}
    h_prev = np.zeros((batch, h), np.uint64)
    s_prev = np.zeros((batch, h), np.uint64)
    for t in range(length):
        for b in range(batch):
            pad = yield ("fw_ms1" if ms1 and kept[t] else "fw",
                         {"weights": weights, "z": _z(xs[t, b], h_prev[b], one),
                          "s_prev": s_prev[b].copy(), "one": one})
            for name in ("h", *stored) if kept[t] else ("h",):
                out[name][t, b] = pad[name]
            h_prev[b], s_prev[b] = pad["h"], pad["s"]
    return out


def bp_pass(config, weights, xs, hs, stored, dys, kept=None, ms1=False):
    """The BP pass of a layer (generator, module docstring), timestamps last to first.

    Parameters
    ----------
    config, weights : as :func:`fw_pass`
    xs : ndarray, T x B x I
        The layer input (stored activation x_t).
    hs : ndarray, T x B x H
        The layer outputs of FW (h_{t-1} of timestamp t is ``hs[t - 1]``, 0 at t = 0).
    stored : dict of ndarray
        What FW stored (:func:`fw_pass`'s vectors; with ``ms1`` the decoded P1 vectors).
    dys : ndarray, T x B x H
        The loss gradient at the outputs (from the layer above, bits).
    kept : ndarray of bool, T, optional
        MS2: the cells that run BP (default all). A skipped cell runs nothing and passes
        zeros to the cell before it and to the layer below.
    ms1 : bool
        Run ``bp_ms1`` on the stored P1 vectors instead of ``bp``.

    Returns
    -------
    dict of ndarray (bits): ``dx`` (T x B x I, the gradient at the layer input),
    ``dgates`` (T x B x 4H, zero at skipped cells), ``dw`` (4H x (I + H), rows ``[δW_ih
    δW_hh]``, summed over cells) and ``db`` (4H).
    """
    length, batch = xs.shape[:2]
    h, i_size = config.hidden_size, config.input_size
    kept = np.ones(length, bool) if kept is None else np.asarray(kept, bool)
    one = _constant_one(config)
    zero = np.zeros(h, np.uint64)
    dh_next = np.zeros((batch, h), np.uint64)
    ds_next = np.zeros((batch, h), np.uint64)
    dw = np.zeros(4 * h * (i_size + h), np.uint64)
    db = np.zeros(4 * h, np.uint64)
    out = {"dx": np.zeros((length, batch, i_size), np.uint64),
           "dgates": np.zeros((length, batch, 4 * h), np.uint64)}
    for t in reversed(range(length)):
        if not kept[t]:
            dh_next[:], ds_next[:] = 0, 0
            continue
        for b in range(batch):
            h_prev = hs[t - 1, b] if t else zero
            pad = {"weights": weights, "z": _z(xs[t, b], h_prev, one), "one": one,
                   "dy": dys[t, b].copy(), "dh_next": dh_next[b].copy(),
                   "ds_next": ds_next[b].copy(), "dw_acc": dw, "db_acc": db}
            pad.update({name: stored[name][t, b].copy() for name in stored})
            pad = yield ("bp_ms1" if ms1 else "bp", pad)
            dw, db = pad["dw"].copy(), pad["db"].copy()
            out["dx"][t, b] = pad["dz"][:i_size]
            out["dgates"][t, b] = pad["dgates"]
            dh_next[b], ds_next[b] = pad["dz"][i_size:], pad["ds_prev"]
    out["dw"], out["db"] = dw.reshape(4 * h, i_size + h), db
    return out


#: The passes by name.
PASSES = {"fw": fw_pass, "bp": bp_pass}


def drive(passes, run):
    """Run a pass generator, answering each ``(name, pad)`` with ``run(name, pad)``;
    returns the pass's outputs."""
    try:
        request = next(passes)
        while True:
            request = passes.send(run(*request))
    except StopIteration as stop:
        return stop.value


def run_golden(config):
    """A ``run`` for :func:`drive`: the golden channel model on ``config``'s programs
    (:func:`nnrtl.sim.golden.omni.channel.run_program`'s loop, with the activation tables
    built once for the pass rather than once per cell)."""
    from nnrtl.hw.omni.channel_program import vector_sizes
    from nnrtl.sim.golden.omni.channel import step_results

    table = programs(config)
    sizes = vector_sizes(config)
    tables = {name: config.table(name) for name in ("sigmoid", "tanh")}

    def run(name, pad):
        pad = {key: np.array(value, dtype=np.uint64) for key, value in pad.items()}
        for step in table[name]:
            target = step.result.name
            if target not in pad:
                pad[target] = np.zeros(sizes[target], dtype=np.uint64)
            pad[target][step.result.index] = step_results(config, step, pad, tables)
        return pad
    return run


def cell_macs(config):
    """``(fw, bp)``: the useful MACs of one FW and one BP cell of one sample: ``4H(I+H)``
    in FW (eq. 1, the bias MAC not counted), ``2 * 4H(I+H)`` in BP (eqs. 2 and 3)."""
    macs = 4 * config.hidden_size * (config.input_size + config.hidden_size)
    return macs, 2 * macs

"""The data of the FARNN engine bench's layer passes (:mod:`nnrtl.sim.tb.farnn`), apart
from cocotb: what a pass takes (drawn from a seed, or an ``.npz`` file the trainer's ``rtl``
backend writes), the golden model's results for it, the cells of every stream, and the
arrays the RTL's output frames make (the ``.npz`` the bench writes back).

Every array holds fp32 bit patterns (``uint32``); ``T`` steps, ``B`` vectors, ``H`` cells,
``units`` gates, ``R`` the recurrent size.

Inputs (:data:`INPUTS`; a pass needs its own)
    ``weights_fw``, ``weights_bw`` : (beats, chains)
        The pass's weight stream exactly as :func:`nnrtl.gen.farnn.host.pack_weights`
        packs it (BW: the host-transposed matrices), projection loads included.
    ``bias_n`` : (H,)
        GRU's ``bR_n``, sent after the FW load as
        :func:`~nnrtl.hw.farnn.schedule.bias_beats` (GRU FW only).
    ``imvm`` : (T, B, units, H)
        FW: the host's input MVM with its biases.
    ``h``, ``saved_<name>`` : (T, B, H)
        BW: the FW pass's hidden state and save stream (LSTM ``i f g o c``, GRU ``r z n
        hn``; :data:`nnrtl.sim.golden.farnn.cells.SAVED`).
    ``dy`` : (T, B, R)
        BW: the host's delta of the layer's output.

Outputs (:data:`OUTPUTS`)
    FW: ``h`` and ``saved_<name>`` (as the BW inputs of the same names, so a FW pass's
    outputs are the next BW pass's inputs as they are). BW: ``d_input`` and
    ``d_recurrent``, (T, B, units, H), the W and R sides' gate deltas (equal but for
    GRU's n, whose R side is ``dhn``).

Streams (the top's, :mod:`nnrtl.hw.farnn.engine`): one frame a step, the cells in
:func:`~nnrtl.hw.farnn.schedule.cell_order`, FW steps ``0 .. T-1``, BW ``T-1 .. 0``.
``s_imvm`` carries ``imvm`` per cell; ``m_h`` ``h``; ``m_saved`` the saved values and the
state before the step (LSTM ``c_{t-1}``, GRU ``h_{t-1}``; +0 at ``t = 0``); ``s_bw`` an
``m_saved`` beat with ``dy`` appended; ``m_deltas`` ``d_input``'s gates (GRU: then
``d_recurrent``'s n).

Projection (``proj_size > 0``): the inputs, the weight streams and the golden results
already carry it (:class:`~nnrtl.sim.golden.farnn.layer.LayerWeights` from the streams'
projection loads; outputs ``y`` and ``dr_hat`` reserved); the top does not build one yet,
so :func:`check_supported` refuses it. Its output cells (``r_t`` in FW, ``dr^_t`` in BW,
following the golden model) are the one thing to add to :func:`output_cells` and
:func:`arrays_of` with the top.
"""

import numpy as np

from nnrtl.gen.farnn.host import pack_weights, unpack_weights
from nnrtl.hw.farnn.schedule import cell_order
from nnrtl.sim.golden.farnn import cells
from nnrtl.sim.golden.farnn import layer as golden

__all__ = ["PHASES", "INPUTS", "OUTPUTS", "input_names", "output_names", "check_supported",
           "random_inputs", "check_inputs", "layer_weights", "forward_result",
           "backward_result", "expected_outputs", "input_cells", "output_cells", "arrays_of",
           "save", "load"]

PHASES = ("fw", "bw")

#: The input arrays of each pass (GRU FW also ``bias_n``; BW also ``saved_<name>``).
INPUTS = {"fw": ("weights_fw", "imvm"), "bw": ("weights_bw", "h", "dy")}
#: The output arrays of each pass (FW also ``saved_<name>``).
OUTPUTS = {"fw": ("h",), "bw": ("d_input", "d_recurrent")}


def _saved(config):
    return [f"saved_{name}" for name in cells.SAVED[config.cell]]


def input_names(config, phase):
    """The names of the arrays pass ``phase`` of ``config`` takes."""
    names = list(INPUTS[phase])
    if phase == "fw" and config.cell == "gru":
        names.append("bias_n")
    if phase == "bw":
        names += _saved(config)
    return names


def output_names(config, phase):
    """The names of the arrays pass ``phase`` of ``config`` gives back."""
    return list(OUTPUTS[phase]) + (_saved(config) if phase == "fw" else [])


def check_supported(config):
    """ValueError if the top cannot run ``config``'s passes (a projection: module
    docstring)."""
    if config.proj_size:
        raise ValueError(f"proj_size ({config.proj_size}) must be 0 for the engine bench: "
                         f"the top (nnrtl.hw.farnn.engine) has no projection yet")


def _shapes(config, phase):
    steps, batch, hidden, units = config.seq_len, config.batch, config.hidden_size, \
        config.units
    shapes = {"weights_fw": (config.weight_stream_beats("fw"), config.chains),
              "weights_bw": (config.weight_stream_beats("bw"), config.chains),
              "bias_n": (hidden,), "imvm": (steps, batch, units, hidden),
              "h": (steps, batch, hidden), "dy": (steps, batch, config.recurrent_size),
              "d_input": (steps, batch, units, hidden),
              "d_recurrent": (steps, batch, units, hidden)}
    shapes.update({name: (steps, batch, hidden) for name in _saved(config)})
    return shapes


def check_inputs(config, phase, data):
    """ValueError naming the array, its shape and the one pass ``phase`` of ``config``
    needs, for a missing or misshapen input."""
    shapes = _shapes(config, phase)
    for name in input_names(config, phase):
        if name not in data:
            raise ValueError(f"the {phase} pass needs the array {name} (has "
                             f"{', '.join(sorted(data)) or 'none'})")
        array = np.asarray(data[name])
        if array.shape != shapes[name] or array.dtype != np.uint32:
            raise ValueError(f"array {name} must be uint32 of shape {shapes[name]} for "
                             f"{config}, not {array.dtype} {array.shape}")


def random_inputs(config, rng):
    """Both passes' inputs drawn from ``rng`` (a ``numpy.random.Generator``): weights
    (``weight_hh`` scaled by 0.4, ``bias_hh`` by 0.3, with a projection ``weight_hr``),
    ``imvm`` and ``dy`` standard normal; the BW's ``h`` and saved values the golden FW's."""
    steps, batch, hidden, units = config.seq_len, config.batch, config.hidden_size, \
        config.units
    weight_hh = rng.standard_normal((units * hidden, config.recurrent_size)) * 0.4
    bias_hh = rng.standard_normal(units * hidden) * 0.3
    imvm = golden.to_bits(rng.standard_normal((steps, batch, units, hidden)))
    dy = golden.to_bits(rng.standard_normal((steps, batch, config.recurrent_size)))
    weight_hr = (rng.standard_normal((config.proj_size, hidden)) * 0.4
                 if config.proj_size else None)
    weights = golden.LayerWeights.from_arrays(config, weight_hh, bias_hh, weight_hr)
    fw = golden.forward(config, weights, imvm)
    data = {"weights_fw": pack_weights(config, "fw", weights.recurrent, weights.projection),
            "weights_bw": pack_weights(config, "bw", weights.recurrent_t,
                                       weights.projection_t),
            "imvm": imvm, "dy": dy, "h": fw.h,
            **{f"saved_{name}": values for name, values in fw.saved.items()}}
    if config.cell == "gru":
        data["bias_n"] = weights.bias_n
    return data


def layer_weights(config, data):
    """The :class:`~nnrtl.sim.golden.farnn.layer.LayerWeights` the streams in ``data``
    carry (the passes' matrices that are there; None for the others)."""
    fields = {}
    if "weights_fw" in data:
        fields["recurrent"], fields["projection"] = unpack_weights(config, "fw",
                                                                   data["weights_fw"])
    if "weights_bw" in data:
        fields["recurrent_t"], fields["projection_t"] = unpack_weights(config, "bw",
                                                                       data["weights_bw"])
    return golden.LayerWeights(recurrent=fields.get("recurrent"),
                               recurrent_t=fields.get("recurrent_t"),
                               bias_n=data.get("bias_n"), projection=fields.get("projection"),
                               projection_t=fields.get("projection_t"))


def forward_result(config, arrays):
    """A :class:`~nnrtl.sim.golden.farnn.layer.ForwardResult` from ``h`` and the
    ``saved_<name>`` arrays (a FW pass's outputs, or a BW pass's inputs). ``y`` is ``h``
    (no projection)."""
    saved = {name: np.asarray(arrays[f"saved_{name}"], np.uint32)
             for name in cells.SAVED[config.cell]}
    h = np.asarray(arrays["h"], np.uint32)
    return golden.ForwardResult(h=h, y=arrays.get("y", h), c=saved.get("c"), saved=saved)


def backward_result(config, arrays):
    """A :class:`~nnrtl.sim.golden.farnn.layer.BackwardResult` from a BW pass's outputs
    (the RTL sends no ``dv_prev`` / ``dc_prev``: None)."""
    return golden.BackwardResult(d_input=np.asarray(arrays["d_input"], np.uint32),
                                 d_recurrent=np.asarray(arrays["d_recurrent"], np.uint32),
                                 dv_prev=None, dc_prev=None, dr_hat=arrays.get("dr_hat"))


def expected_outputs(config, phase, data):
    """The golden model's outputs of pass ``phase`` on ``data``, as :func:`arrays_of`
    gives the RTL's."""
    weights = layer_weights(config, data)
    if phase == "fw":
        fw = golden.forward(config, weights, data["imvm"])
        return {"h": fw.h, **{f"saved_{name}": fw.saved[name] for name in fw.saved}}
    bw = golden.backward(config, weights, forward_result(config, data), data["dy"])
    return {"d_input": bw.d_input, "d_recurrent": bw.d_recurrent}


def _steps(config, phase):
    steps = range(config.seq_len)
    return list(steps) if phase == "fw" else list(reversed(steps))


def _before(config, arrays, t, b, row):
    """The state before step ``t``: LSTM ``c_{t-1}``, GRU ``h_{t-1}`` (+0 at ``t = 0``)."""
    if t == 0:
        return 0
    return int(arrays["saved_c" if config.cell == "lstm" else "h"][t - 1, b, row])


def _saved_words(config, arrays, t, b, row):
    return [int(arrays[name][t, b, row]) for name in _saved(config)] + [
        _before(config, arrays, t, b, row)]


def input_cells(config, phase, data):
    """``(source, frames)``: the input stream of pass ``phase`` and its frames, one a
    step in the pass's order, each a list of beats (lists of words)."""
    order = cell_order(config)
    frames = []
    for t in _steps(config, phase):
        if phase == "fw":
            frames.append([[int(w) for w in data["imvm"][t, b, :, row]] for b, row in order])
        else:
            frames.append([_saved_words(config, data, t, b, row) + [int(data["dy"][t, b, row])]
                           for b, row in order])
    return ("s_imvm" if phase == "fw" else "s_bw"), frames


def output_cells(config, phase, arrays):
    """``{sink: frames}``: the output streams of pass ``phase`` carrying ``arrays`` (its
    outputs), one frame a step in the pass's order, each a list of beats."""
    order = cell_order(config)
    steps = _steps(config, phase)
    if phase == "fw":
        return {"m_h": [[[int(arrays["h"][t, b, row])] for b, row in order] for t in steps],
                "m_saved": [[_saved_words(config, arrays, t, b, row) for b, row in order]
                            for t in steps]}
    gru = config.cell == "gru"
    return {"m_deltas": [[[int(w) for w in arrays["d_input"][t, b, :, row]]
                          + ([int(arrays["d_recurrent"][t, b, 2, row])] if gru else [])
                          for b, row in order] for t in steps]}


def arrays_of(config, phase, frames):
    """The inverse of :func:`output_cells`: pass ``phase``'s output arrays from the frames
    of its sinks (``{sink: frames}``). The ``m_saved`` beats' last word (the state before
    the step) is not kept: it repeats ``saved_c`` / ``h`` of the step before."""
    steps, batch, hidden, units = config.seq_len, config.batch, config.hidden_size, \
        config.units
    order = cell_order(config)
    if phase == "fw":
        out = {name: np.zeros((steps, batch, hidden), np.uint32)
               for name in ["h"] + _saved(config)}
        for t, beats in zip(_steps(config, phase), frames["m_h"]):
            for (b, row), beat in zip(order, beats):
                out["h"][t, b, row] = beat[0]
        for t, beats in zip(_steps(config, phase), frames["m_saved"]):
            for (b, row), beat in zip(order, beats):
                for name, word in zip(_saved(config), beat):
                    out[name][t, b, row] = word
        return out
    d_input = np.zeros((steps, batch, units, hidden), np.uint32)
    for t, beats in zip(_steps(config, phase), frames["m_deltas"]):
        for (b, row), beat in zip(order, beats):
            d_input[t, b, :, row] = beat[:units]
    d_recurrent = d_input.copy()
    if config.cell == "gru":
        for t, beats in zip(_steps(config, phase), frames["m_deltas"]):
            for (b, row), beat in zip(order, beats):
                d_recurrent[t, b, 2, row] = beat[units]
    return {"d_input": d_input, "d_recurrent": d_recurrent}


def save(path, arrays):
    """Write ``arrays`` (name -> array) to the ``.npz`` file ``path``, as ``uint32``."""
    np.savez(path, **{name: np.asarray(value, np.uint32) for name, value in arrays.items()})


def load(path):
    """The arrays of the ``.npz`` file ``path`` (no pickled objects allowed)."""
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}

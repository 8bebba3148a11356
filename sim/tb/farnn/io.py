# amaranth: UnusedElaboratable=no
"""The data of the FARNN engine bench's layer passes (:mod:`nnrtl.sim.tb.farnn.engine`),
apart from cocotb: what a pass takes (drawn from a seed, or an ``.npz`` file the trainer's
``rtl`` backend writes), the golden model's results for it, the cells of every stream, and
the arrays the RTL's output frames make (the ``.npz`` the bench writes back).

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
"""

import numpy as np

from nnrtl.gen.farnn.host import pack_weights, unpack_weights
from nnrtl.hw.farnn.schedule import bias_beats, cell_order
from nnrtl.sim.golden.farnn import cells
from nnrtl.sim.golden.farnn import layer as golden

__all__ = ["PHASES", "INPUTS", "OUTPUTS", "SOURCES", "SINKS", "input_names",
           "output_names", "sources", "sinks", "check_supported", "random_inputs",
           "check_inputs", "weight_frames", "layer_weights", "forward_result",
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
    """The names of the arrays pass ``phase`` of ``config`` gives back (with a projection
    also FW ``y``, BW ``dr_hat``)."""
    names = list(OUTPUTS[phase]) + (_saved(config) if phase == "fw" else [])
    if config.proj_size:
        names.append("y" if phase == "fw" else "dr_hat")
    return names


def check_supported(config):
    """The top's own ValueError if it cannot be built for ``config`` (weights that do not
    fit): constructing it checks, without elaborating."""
    from nnrtl.hw.farnn.engine import FarnnEngine
    FarnnEngine(config)


def _shapes(config, phase):
    steps, batch, hidden, units = config.seq_len, config.batch, config.hidden_size, \
        config.units
    shapes = {"weights_fw": (config.weight_stream_beats("fw"), config.chains),
              "weights_bw": (config.weight_stream_beats("bw"), config.chains),
              "bias_n": (hidden,), "imvm": (steps, batch, units, hidden),
              "h": (steps, batch, hidden), "dy": (steps, batch, config.recurrent_size),
              "d_input": (steps, batch, units, hidden),
              "d_recurrent": (steps, batch, units, hidden),
              "y": (steps, batch, config.recurrent_size),
              "dr_hat": (steps, batch, config.recurrent_size)}
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


def weight_frames(config, phase, data):
    """The load of pass ``phase``: its weight stream (``data["weights_<phase>"]``, as the
    host packed it) cut into one frame a load (each unit's gate matrix, then with a
    projection its projection block), then (GRU FW) the ``bR_n`` beats as one frame."""
    stream = np.asarray(data[f"weights_{phase}"])
    sizes = [config.chain_length * shape.weights_per_pe
             for _ in range(config.units) for shape in config.pass_matrices(phase)]
    ends = np.cumsum(sizes)
    frames = [stream[end - size:end] for size, end in zip(sizes, ends)]
    if config.cell == "gru" and phase == "fw":
        frames.append(np.asarray(bias_beats(config, data["bias_n"])))
    return frames


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
        out = {"h": fw.h, "y": fw.y, **{f"saved_{name}": fw.saved[name] for name in fw.saved}}
    else:
        bw = golden.backward(config, weights, forward_result(config, data), data["dy"])
        out = {"d_input": bw.d_input, "d_recurrent": bw.d_recurrent, "dr_hat": bw.dr_hat}
    return {name: out[name] for name in output_names(config, phase)}


def _steps(config, phase):
    steps = range(config.seq_len)
    return list(steps) if phase == "fw" else list(reversed(steps))


#: The cell streams of each pass: inputs, outputs (with a projection also ``s_dy`` in BW
#: and ``m_proj`` in both).
SOURCES = {"fw": ("s_imvm",), "bw": ("s_bw",)}
SINKS = {"fw": ("m_h", "m_saved"), "bw": ("m_deltas",)}


def sources(config, phase):
    """The input streams of pass ``phase`` (their cells and order: Notes).

    Notes
    -----
    Streams (the top's, :mod:`nnrtl.hw.farnn.engine`): one frame a step, the cells in
    :func:`~nnrtl.hw.farnn.schedule.cell_order`, FW steps ``0 .. T-1``, BW ``T-1 .. 0``.
    ``s_imvm`` carries ``imvm`` per cell; ``m_h`` ``h``; ``m_saved`` the saved values and the
    state before the step (LSTM ``c_{t-1}``, GRU ``h_{t-1}``; +0 at ``t = 0``); ``s_bw`` an
    ``m_saved`` beat with ``dy`` appended; ``m_deltas`` ``d_input``'s gates (GRU: then
    ``d_recurrent``'s n). The weight stream goes as one frame a load (``tlast`` closing it).

    Projection (``proj_size > 0``, LSTM), as the top with a projection defines its ports:
    ``s_bw`` then carries no ``dy``; ``s_dy`` (BW) carries ``dy`` per cell; ``m_proj`` carries
    FW ``y`` (``r_t = W_hr h_t``) and BW ``dr_hat`` (``dr^_t``), outputs of those names (T, B,
    P); the weight stream is cut into loads (each unit's gate matrix, then its projection
    block). Cells follow :func:`~nnrtl.hw.farnn.schedule.cell_order` of the matrix whose job
    makes them: ``projection`` for FW ``m_proj``, ``projection_t`` for ``s_bw`` and
    ``m_deltas``, ``recurrent_t`` for ``s_dy`` and BW ``m_proj``, ``recurrent`` for the rest.
    """
    return SOURCES[phase] + (("s_dy",) if config.proj_size and phase == "bw" else ())


def sinks(config, phase):
    """The output streams of pass ``phase``."""
    return SINKS[phase] + (("m_proj",) if config.proj_size else ())


def _matrix(config, phase, port):
    """The matrix whose job's cell order stream ``port`` follows (the top's docstring)."""
    if not config.proj_size:
        return "recurrent"
    if port == "m_proj":
        return "projection" if phase == "fw" else "recurrent_t"
    return {"s_bw": "projection_t", "m_deltas": "projection_t",
            "s_dy": "recurrent_t"}.get(port, "recurrent")


def _order(config, phase, port):
    matrix = _matrix(config, phase, port)
    return cell_order(config) if matrix == "recurrent" else cell_order(config, None, matrix)


def _before(config, arrays, t, b, row):
    """The state before step ``t``: LSTM ``c_{t-1}``, GRU ``h_{t-1}`` (+0 at ``t = 0``)."""
    if t == 0:
        return 0
    return int(arrays["saved_c" if config.cell == "lstm" else "h"][t - 1, b, row])


def _beat(config, phase, port, arrays, t, b, row):
    """The words of cell ``(t, b, row)`` on stream ``port``, from ``arrays``."""
    if port == "s_imvm":
        return [int(w) for w in arrays["imvm"][t, b, :, row]]
    if port == "m_h":
        return [int(arrays["h"][t, b, row])]
    if port in ("m_saved", "s_bw"):
        words = [int(arrays[name][t, b, row]) for name in _saved(config)] + [
            _before(config, arrays, t, b, row)]
        if port == "s_bw" and not config.proj_size:      # dy enters at dr^ with one
            words.append(int(arrays["dy"][t, b, row]))
        return words
    if port == "s_dy":
        return [int(arrays["dy"][t, b, row])]
    if port == "m_proj":
        return [int(arrays["y" if phase == "fw" else "dr_hat"][t, b, row])]
    gru = config.cell == "gru"                           # m_deltas
    return [int(w) for w in arrays["d_input"][t, b, :, row]] + (
        [int(arrays["d_recurrent"][t, b, 2, row])] if gru else [])


def _frames(config, phase, ports, arrays):
    order = {port: _order(config, phase, port) for port in ports}
    return {port: [[_beat(config, phase, port, arrays, t, b, row) for b, row in order[port]]
                   for t in _steps(config, phase)] for port in ports}


def input_cells(config, phase, data):
    """``{source: frames}``: the input streams of pass ``phase`` carrying ``data``, one
    frame a step in the pass's order, each a list of beats (lists of words)."""
    return _frames(config, phase, sources(config, phase), data)


def output_cells(config, phase, arrays):
    """``{sink: frames}``: the output streams of pass ``phase`` carrying ``arrays`` (its
    outputs), one frame a step in the pass's order, each a list of beats."""
    return _frames(config, phase, sinks(config, phase), arrays)


def arrays_of(config, phase, frames):
    """The inverse of :func:`output_cells`: pass ``phase``'s output arrays from the frames
    of its sinks (``{sink: frames}``). The ``m_saved`` beats' last word (the state before
    the step) is not kept: it repeats ``saved_c`` / ``h`` of the step before."""
    shapes = _shapes(config, phase)
    out = {name: np.zeros(shapes[name], np.uint32) for name in output_names(config, phase)}
    units, saved = config.units, _saved(config)
    for port in sinks(config, phase):
        order = _order(config, phase, port)
        for t, beats in zip(_steps(config, phase), frames[port]):
            for (b, row), beat in zip(order, beats):
                if port == "m_h":
                    out["h"][t, b, row] = beat[0]
                elif port == "m_saved":
                    for name, word in zip(saved, beat):
                        out[name][t, b, row] = word
                elif port == "m_proj":
                    out["y" if phase == "fw" else "dr_hat"][t, b, row] = beat[0]
                else:                                    # m_deltas
                    out["d_input"][t, b, :, row] = beat[:units]
                    out["d_recurrent"][t, b, :, row] = beat[:units]
                    if config.cell == "gru":
                        out["d_recurrent"][t, b, 2, row] = beat[units]
    return out


def save(path, arrays):
    """Write ``arrays`` (name -> array) to the ``.npz`` file ``path``, as ``uint32``."""
    np.savez(path, **{name: np.asarray(value, np.uint32) for name, value in arrays.items()})


def load(path):
    """The arrays of the ``.npz`` file ``path`` (no pickled objects allowed)."""
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}

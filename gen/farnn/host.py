"""The host (GPU) side of a FARNN training step, in PyTorch float32 on CUDA when present,
else on the CPU (:func:`device`; named in results by :func:`device_name`): the input MVM of
all steps, the BW input MVM, the gradients, the transposed weight layout and the weight
stream packing. None of this is bit-exact with the FPGA side, nor needs to be.

The weight stream of a pass
---------------------------
A pass (``"fw"`` or ``"bw"``) loads its matrices (:meth:`FarnnConfig.pass_matrices`: FW
``R_k`` and ``W_hr``, BW the host-transposed ``R_k^T`` and ``W_hr^T``) through the weight
port: beats of ``chains`` fp32 words, :func:`pack_weights` returning them as a ``uint32``
array ``beats x chains``. Word order:

* **lane -> chain**: word ``c`` of a beat (bits ``32 c .. 32 c + 31`` of the 512-bit beat,
  i.e. ``stream.tobytes()`` little-endian) goes to chain ``c`` of the unit being loaded;
* **units** one after another, unit 0 (gate i / r) first: ``chain_length * D`` beats each,
  ``D = weights_per_pe(phase)``;
* **matrices**: within a unit, the pass's matrices one after another, the gate matrix, then
  with a projection the unit's block of it: one *load* each, ``chain_length * D_m`` beats
  (``D_m`` the matrix's :attr:`~nnrtl.hw.farnn.config.MatrixShape.weights_per_pe`);
* **PE and address**: within a load, beat ``k * D_m + a`` carries, on lane ``c``, the word
  at address ``base + a`` of PE ``k`` (0 = the chain's head) of chain ``c``, ``base`` 0 for
  the gate matrix and its ``D_m`` for the projection. A chain therefore receives its head
  PE's words first; each PE keeps the first ``D_m`` words that reach it and relays the
  rest to its successor;
* **PE memory image** (address ``a`` of PE ``k`` of chain ``c``). For a matrix of ``n_in``
  columns
  (:class:`~nnrtl.hw.farnn.config.MatrixShape`, ``P = chains * chain_length``): in a full
  round ``r`` PE ``k`` of chain ``c`` holds row ``r * P + k * chains + c`` of the unit's
  block at addresses ``r * n_in + t`` (consecutive rows on the lanes of one head cycle);
  in a split last round (``split`` groups of ``lanes = chains / split`` chains, ``chunk =
  ceil(n_in / split)``) PE ``k`` of chain ``g * lanes + j`` holds column ``g * chunk + t`` of
  row ``(S - 1) * P + k * lanes + j`` at address ``(S - 1) * n_in + t``. Words of rows past
  the block's end and of columns past ``n_in`` are zeros. A load is exactly the MVM unit's
  own packer's stream of that matrix (``sim/golden/farnn/mvm.py``, ``pack_weights``, with
  the rounds of the largest block).

:func:`unpack_weights` inverts it and checks the zero words and the length.
"""

import numpy as np

from ..errors import UsageError

__all__ = ["device", "device_name", "input_mvm", "backward_input_mvm", "gradients",
           "transpose_recurrent", "pass_weights", "pack_weights", "unpack_weights",
           "pe_image"]


def device():
    """``torch.device("cuda")`` when CUDA is available, else ``torch.device("cpu")``."""
    import torch
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_name():
    """The device the host part runs on, for results: ``"cuda:<GPU name>"`` or ``"cpu"``."""
    import torch
    if torch.cuda.is_available():
        return f"cuda:{torch.cuda.get_device_name(0)}"
    return "cpu"


def _tensor(array):
    """A float32 tensor on :func:`device` (a tensor is moved, an array copied)."""
    import torch
    if isinstance(array, torch.Tensor):
        return array.to(device(), dtype=torch.float32)
    return torch.tensor(np.asarray(array, dtype=np.float32), device=device())


def input_mvm(layer, x):
    """The input MVM of every step with the biases the host adds (the contract): ``W_k x +
    bW_k + bR_k`` for the LSTM gates and GRU r, z; ``W_n x + bW_n`` for GRU n (the FPGA adds
    ``bR_n`` inside the reset gate).

    Parameters
    ----------
    layer : nnrtl.gen.models.LSTM or GRU
    x : array_like or tensor, shape (T, B, input_size)

    Returns
    -------
    tensor float32, shape (T, B, units, H)
    """
    units, hidden = layer.GATES, layer.hidden_size
    x = _tensor(x)
    out = x @ _tensor(layer.weight_ih).T
    if layer.has_bias:
        bias = _tensor(layer.bias_ih)
        recurrent_bias = _tensor(layer.bias_hh)
        if units == 3:                      # GRU: bR_n stays on the FPGA
            recurrent_bias[2 * hidden:] = 0
        out = out + (bias + recurrent_bias)
    return out.reshape(*out.shape[:2], units, hidden)


def backward_input_mvm(layer, d_input):
    """``dx_t = sum_k W_k^T d*_k,t`` for every step at once.

    Parameters
    ----------
    layer : LSTM or GRU
    d_input : array_like, shape (T, B, units, H)
        The W side's gate deltas.

    Returns
    -------
    tensor float32, shape (T, B, input_size)
    """
    d = _tensor(d_input)
    return d.reshape(*d.shape[:2], -1) @ _tensor(layer.weight_ih)


def gradients(layer, x, v_prev, d_input, d_recurrent, h=None, dr_hat=None):
    """The weight gradients of one layer over the sequence and the batch.

    Parameters
    ----------
    layer : LSTM or GRU
    x : (T, B, input_size) the layer's input.
    v_prev : (T, B, recurrent_size) the recurrent vector each step read (``h_{t-1}`` or
        ``r_{t-1}``; zeros at ``t = 0``).
    d_input, d_recurrent : (T, B, units, H) the W and R sides' gate deltas.
    h : (T, B, H) the hidden state (with a projection).
    dr_hat : (T, B, P) the projection's output deltas (with a projection).

    Returns
    -------
    dict of field name -> ndarray float64, in PyTorch's shapes: ``dW = sum_t d*_t x_t^T``,
    ``dR = sum_t d*_t v_{t-1}^T``, bias gradients ``sum_t d*_t``, ``dW_hr = sum_t dr^_t
    h_t^T``.
    """
    import torch
    x, v_prev = _tensor(x), _tensor(v_prev)
    d_in, d_rec = _tensor(d_input), _tensor(d_recurrent)
    rows = d_in.shape[2] * d_in.shape[3]
    d_in, d_rec = d_in.reshape(-1, rows), d_rec.reshape(-1, rows)
    out = {"weight_ih": d_in.T @ x.reshape(-1, x.shape[-1]),
           "weight_hh": d_rec.T @ v_prev.reshape(-1, v_prev.shape[-1])}
    if layer.has_bias:
        out["bias_ih"] = d_in.sum(0)
        out["bias_hh"] = d_rec.sum(0)
    if getattr(layer, "proj_size", 0):
        dr, hh = _tensor(dr_hat), _tensor(h)
        out["weight_hr"] = dr.reshape(-1, dr.shape[-1]).T @ hh.reshape(-1, hh.shape[-1])
    with torch.no_grad():
        return {name: value.double().cpu().numpy() for name, value in out.items()}


def transpose_recurrent(weight_hh, units):
    """The BW layout of the recurrent matrices: ``R_k^T`` per gate, transposed on the
    device. ``weight_hh`` is PyTorch's ``units*H x recurrent_size``; returns a float32
    array ``units x recurrent_size x H``."""
    w = _tensor(weight_hh)
    blocks = w.reshape(units, -1, w.shape[1])
    return blocks.transpose(1, 2).contiguous().cpu().numpy()


def pass_weights(config, phase, recurrent, projection=None):
    """The matrices of pass ``phase`` as the PEs hold them, fp32 patterns: ``[(shape,
    groups x total_rows x n_in array)]`` in :meth:`FarnnConfig.pass_matrices` order.
    ``recurrent`` is ``units x rows x n_in`` (``R_k`` for FW, ``R_k^T`` for BW),
    ``projection`` ``W_hr`` (FW) or ``W_hr^T`` (BW)."""
    shapes = config.pass_matrices(phase)
    arrays = [np.asarray(recurrent, dtype=np.uint32)]
    if len(shapes) > 1:
        arrays.append(np.asarray(projection, dtype=np.uint32)[None])
    for shape, array in zip(shapes, arrays):
        expected = ((config.units if shape.units == 1 else 1), shape.total_rows, shape.inputs)
        if array.shape != expected:
            raise ValueError(f"the {shape.name} matrices must have shape {expected}, not "
                             f"{array.shape}")
    return list(zip(shapes, arrays))


def _layout(shape):
    """``(full, pes, lanes, chunk, last)``: full rounds, rows per full round, lanes and chunk
    of the split round, rows of the split round (0 without one)."""
    full = shape.slices - 1 if shape.split_last else shape.slices
    pes = shape.pes_per_unit
    last = shape.lanes * shape.chain_length if shape.split_last else 0
    return full, pes, shape.lanes, shape.chunk, last


def pe_image(config, shape, block):
    """The words of one unit's block of a matrix in its PEs: ``chains x chain_length x
    shape.weights_per_pe`` (module docstring). ``block`` is the unit's rows, at most
    ``shape.rows`` of them (fewer in the projection's last block)."""
    block = np.asarray(block, dtype=np.uint32)
    full, pes, lanes, chunk, last = _layout(shape)
    length, n_in = config.chain_length, shape.inputs
    padded = np.zeros((full * pes + last, max(n_in, shape.split * chunk)), np.uint32)
    padded[:block.shape[0], :n_in] = block
    # full rounds: padded[r, k, c, t] -> chain c, PE k, address r * n_in + t
    fulls = padded[:full * pes, :n_in].reshape(full, length, config.chains, n_in)
    parts = [fulls.transpose(2, 1, 0, 3).reshape(config.chains, length, full * n_in)]
    if last:
        # split round: padded[k, j, g, t] -> chain g * lanes + j, PE k, address + t
        rows = padded[full * pes:, :shape.split * chunk]
        split = rows.reshape(length, lanes, shape.split, chunk).transpose(2, 1, 0, 3)
        parts.append(split.reshape(config.chains, length, chunk))
    return np.concatenate(parts, axis=2)


def _block_of_image(shape, image, rows):
    """The inverse of :func:`pe_image`: ``(block, padding)``, the block's ``rows`` rows and
    every other word of the image."""
    full, pes, lanes, chunk, last = _layout(shape)
    chains, length = image.shape[:2]
    n_in = shape.inputs
    padded = np.zeros((full * pes + last, max(n_in, shape.split * chunk)), np.uint32)
    fulls = image[:, :, :full * n_in].reshape(chains, length, full, n_in)
    padded[:full * pes, :n_in] = fulls.transpose(2, 1, 0, 3).reshape(full * pes, n_in)
    if last:
        split = image[:, :, full * n_in:].reshape(shape.split, lanes, length, chunk)
        padded[full * pes:, :shape.split * chunk] = split.transpose(2, 1, 0, 3).reshape(
            last, shape.split * chunk)
    mask = np.ones(padded.shape, bool)
    mask[:rows, :n_in] = False
    return padded[:rows, :n_in], padded[mask]


def _blocks(shape, array, unit):
    """Unit ``unit``'s block of rows of the matrices ``array`` (groups x rows x n_in)."""
    if shape.units == 1:
        return array[unit]
    return array[0, unit * shape.rows:(unit + 1) * shape.rows]


def pack_weights(config, phase, recurrent, projection=None):
    """The weight stream of pass ``phase``: ``uint32`` array ``beats x chains``
    (:meth:`FarnnConfig.weight_stream_beats` beats; word order in the module docstring).
    ``recurrent`` (``units x rows x n_in``) and ``projection`` are fp32 patterns of the
    pass's matrices (:func:`pass_weights`)."""
    matrices = pass_weights(config, phase, recurrent, projection)
    loads = []
    for unit in range(config.units):
        for shape, array in matrices:
            image = pe_image(config, shape, _blocks(shape, array, unit))
            loads.append(image.transpose(1, 2, 0).reshape(-1, config.chains))
    return np.concatenate(loads)


def unpack_weights(config, phase, stream):
    """The pass's matrices back from its weight stream: ``(recurrent, projection)`` as
    :func:`pack_weights` takes them (``projection`` None without one).

    Raises
    ------
    UsageError
        If the stream has the wrong shape (naming the expected beats and lanes) or a word
        the order reserves for padding is not zero (naming the unit and the matrix): a
        stream in another order or for another configuration.
    """
    stream = np.asarray(stream, dtype=np.uint32)
    beats = config.weight_stream_beats(phase)
    if stream.shape != (beats, config.chains):
        raise UsageError(f"the {phase} weight stream must be {beats} beats of "
                         f"{config.chains} words for {config}, not {stream.shape}")
    shapes = config.pass_matrices(phase)
    matrices = [np.zeros((config.units if shape.units == 1 else 1, shape.total_rows,
                          shape.inputs), np.uint32) for shape in shapes]
    beat = 0
    for unit in range(config.units):
        for shape, matrix in zip(shapes, matrices):
            size = config.chain_length * shape.weights_per_pe
            image = stream[beat:beat + size].reshape(config.chain_length,
                                                     shape.weights_per_pe, config.chains)
            base = 0 if shape.units == 1 else unit * shape.rows
            count = max(0, min(shape.rows, shape.total_rows - base))
            block, padding = _block_of_image(shape, image.transpose(2, 0, 1), count)
            if padding.any():
                raise UsageError(
                    f"the {phase} weight stream has a nonzero padding word in unit {unit}'s "
                    f"{shape.name} load (beats {beat} to {beat + size - 1}): not in the "
                    f"order of nnrtl.gen.farnn.host")
            target = matrix[unit] if shape.units == 1 else matrix[0, base:base + count]
            target[...] = block
            beat += size
    return matrices[0], (matrices[1][0] if len(matrices) > 1 else None)

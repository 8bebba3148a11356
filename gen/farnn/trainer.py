"""The FARNN training step behind the platform's training interface
(:mod:`nnrtl.gen.train`): :class:`FarnnTrainer` runs each layer's recurrence (FW and BW
passes) on the FPGA part -- its bit-exact golden model (backend ``golden``) or the
engine's RTL under Verilator (backend ``rtl``, :mod:`.rtl`) -- and the rest on the host in
PyTorch (:mod:`.host`): the input MVM of all steps, the BW input MVM and the gradients.
The weights reach the FPGA part as the weight streams of :func:`~.host.pack_weights` (the
BW ones host-transposed): the RTL loads them as they are, the golden model unpacks them
as the PEs hold them. Both backends give the host the same arrays (the FPGA part is
bit-exact and the host part deterministic), so they update the weights bit for bit alike.

Layers are run one after another (one layer's weights on chip at a time), FW from the
first layer up, BW from the last down; the output delta of layer ``l`` is the BW input MVM
of layer ``l + 1``, and the gradient at the network's inputs (for an embedding in front,
:meth:`FarnnTrainer.input_gradient`) the BW input MVM of layer 0.

A ``reverse`` layer is a forward pass over the time-reversed sequence: the host streams
the steps last first and puts the outputs back in time order (the FPGA part is the same).
A ``bidirectional`` layer is two such passes, one a direction, each with its own weights:
their outputs are concatenated (forward first, as PyTorch's), the loss gradient split
between them, and the two BW input MVMs summed into the previous layer's delta.

Sequences of different lengths (``lengths``, :mod:`nnrtl.gen.models.sequences`): the FPGA
part runs every sequence to the batch's last step; the host gives a reverse pass each
sequence reversed within its length and zeroes the outputs and the loss gradient past
each end. The padding's gradients are then zero, so the weights' equal those of
sequences that stop at their ends.
"""

import dataclasses

import numpy as np

from nnrtl.hw.farnn import FarnnConfig
from nnrtl.sim.golden import farnn as golden
from nnrtl.sim.golden.farnn.layer import from_bits, to_bits

from ..errors import UsageError
from ..models.sequences import reverse_within, step_mask
from ..params import parse_params
from ..train import BACKENDS
from . import host
from .rtl import RtlPasses

__all__ = ["FarnnTrainer", "config_for", "train_hook", "GRADIENT_BOUND"]

#: The largest difference of a weight gradient from PyTorch float64 autograd the engine's
#: arithmetic allows. The error is that of fp32 arithmetic (one rounding per operation, each
#: MVM sum a chain of fp32 additions in the accumulator's order) plus the PWL sigmoid/tanh
#: tables' (absolute error up to 4.9e-6 and 9.7e-6: ``nnrtl.sim.golden.activation.
#: max_abs_error``), carried through the recurrence. It is relative to the gradients:
#: ``python -m nnrtl.gen.farnn.studies.accuracy`` (2-layer LSTM, GRU and LSTM with
#: projection, hidden 40, batch 2, a split last round, the summed loss whose gradients grow
#: with T) measures at most 2.8e-6 of each tensor's largest gradient for T = 16 ... 256, and
#: absolute errors from 1.3e-6 (T = 16) to 4.2e-5 (GRU, T = 256, gradients up to 144).
#: 1e-4 therefore holds for gradients up to about 35 even at the worst relative error, and
#: for every model and length measured; with the interface's mean losses (gradients well
#: below 1) the tests' steps stay 20 times and more below it.
GRADIENT_BOUND = 1e-4


def _workload_sizes(network):
    """``(cell, input_size, hidden_size, proj_size)`` of an RNN network, or a UsageError
    naming the layer and the rule it breaks."""
    from nnrtl.gen.models import GRU, LSTM, refuse_extensions

    source = network.source or "the model"
    if not network.is_rnn:
        raise UsageError(f"the farnn engine trains LSTM and GRU layers; {source} is a CNN")
    first = network.layers[0]
    cell = "lstm" if isinstance(first, LSTM) else "gru"
    for index, layer in enumerate(network.layers):
        kind = "lstm" if isinstance(layer, LSTM) else "gru" if isinstance(layer, GRU) else None
        if kind != cell:
            raise UsageError(f"layer {index} of {source} is {type(layer).__name__}, but layer "
                             f"0 is {type(first).__name__}: the farnn engine runs one cell "
                             f"type")
        refuse_extensions(layer, f"layer {index} of {source}", "the farnn engine")
        if (layer.hidden_size, layer.proj_size) != (first.hidden_size, first.proj_size):
            raise UsageError(f"layer {index} of {source} has hidden_size "
                             f"{layer.hidden_size} and proj_size {layer.proj_size}, layer 0 "
                             f"{first.hidden_size} and {first.proj_size}: every layer of "
                             f"the farnn engine has the same")
    return cell, first.input_size, first.hidden_size, first.proj_size


def config_for(network, seq_len, batch, params=()):
    """The :class:`FarnnConfig` of ``network`` for sequences of ``seq_len`` steps in
    batches of ``batch``: the sizes from the model, the hardware ``params`` (``--param``
    strings) as given, and, when ``chain_length`` is not given, the shortest chains whose
    PEs hold every pass's weights (a small model builds a small engine)."""
    cell, inputs, hidden, proj = _workload_sizes(network)
    sizes = dict(cell=cell, input_size=inputs, hidden_size=hidden, proj_size=proj,
                 layers=len(network.layers), seq_len=seq_len, batch=batch)
    given = {item.partition("=")[0].strip() for item in params}
    for name in sorted(given & set(sizes)):
        raise UsageError(f"parameter {name} comes from the model and the inputs "
                         f"({sizes[name]}); do not give it with --model")
    base = FarnnConfig(**sizes, chain_length=1)
    config = parse_params(FarnnConfig, params, base=base)
    if "chain_length" not in given:
        length = 1
        while not config.fits:
            length += 1
            try:
                config = dataclasses.replace(config, chain_length=length)
            except (TypeError, ValueError) as error:
                raise UsageError(f"{error} (chain_length {length}, chosen for the "
                                 f"weights to fit)") from None
    if not config.fits:
        raise UsageError(f"the weights of {network.source or 'the model'} need "
                         f"{config.max_weights_per_pe} words per PE, more than weight_depth "
                         f"({config.weight_depth}): give a longer chain_length or "
                         f"weight_depth=8192")
    return config


def _flip(values, reverse, lengths=None):
    """``values`` (time first) reversed in time when ``reverse`` (each sequence within its
    length, given ``lengths``), a copy with positive strides (numpy keeps a length-1
    axis's negative stride through ascontiguousarray)."""
    if not reverse:
        return values
    return values[::-1].copy() if lengths is None else reverse_within(values, lengths)


def _masked(values, lengths):
    """``values`` (time first) zero past each sequence's end (all kept without
    ``lengths``)."""
    if lengths is None:
        return values
    return values * step_mask(lengths, values.shape[0])[..., None].astype(values.dtype)


def _delta_below(deltas, lengths=None):
    """The gradient at a layer's inputs (float32, time first) from each direction's W side
    gate deltas ``[(_Layer, d_input)]``: the BW input MVM on the host, back in time order,
    summed over the directions."""
    parts = [_flip(host.backward_input_mvm(saved.layer, delta).cpu().numpy(), saved.reverse,
                   lengths) for saved, delta in deltas]
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


@dataclasses.dataclass
class _Layer:
    """What a layer's FW leaves for its BW: one direction's pass (``index``, the pass's
    number on the FPGA part; ``suffix`` of its tensors' fields; ``reverse`` in time)."""

    layer: object
    x: np.ndarray
    streams: dict
    fw: object
    index: int = 0
    suffix: str = ""
    reverse: bool = False


class FarnnTrainer:
    """The training step of :mod:`nnrtl.gen.train` with the FPGA part in the golden model
    or the RTL.

    Parameters
    ----------
    config : FarnnConfig
        Sizes and hardware (split, stages) of the engine; the network given to
        :meth:`forward` must have its cell type and sizes.
    backend : str
        ``"golden"``, or ``"rtl"``: every layer pass one run of the Verilator bench
        (:class:`~.rtl.RtlPasses`; a configuration the top refuses is a UsageError).
    seed : int
        The bench's seed (``rtl``).
    log : callable, optional
        Progress lines (``rtl``: the Verilator build's).

    Attributes
    ----------
    gradient_bound : float
        :data:`GRADIENT_BOUND`.
    device : str
        Where the host part runs (:func:`~.host.device_name`).
    """

    gradient_bound = GRADIENT_BOUND
    takes_lengths = True

    def __init__(self, config, backend="golden", *, seed=1, log=None):
        if not isinstance(config, FarnnConfig):
            raise TypeError(f"config must be a FarnnConfig, not {config!r}")
        if backend not in BACKENDS:
            raise UsageError(f"--backend must be one of {', '.join(BACKENDS)} for the farnn "
                             f"engine, not {backend!r}")
        self.config = config
        self.backend = backend
        self.device = host.device_name()
        self._rtl = RtlPasses(config, seed=seed, log=log) if backend == "rtl" else None
        self._layers = []
        self._shape = None
        self._input_delta = None
        self._lengths = None

    def _streams(self, layer):
        """What the FPGA receives of a layer: ``{"weights_fw": FW stream of R_k (and
        W_hr), "weights_bw": BW stream of the host-transposed R_k^T (and W_hr^T),
        "bias_n": GRU's bR_n}`` (:mod:`nnrtl.sim.tb.farnn.io` names)."""
        config = self.config
        recurrent = to_bits(layer.weight_hh).reshape(config.units, config.hidden_size,
                                                     config.recurrent_size)
        transposed = to_bits(host.transpose_recurrent(layer.weight_hh, config.units))
        projection = projection_t = None
        if config.proj_size:
            projection = to_bits(layer.weight_hr)
            projection_t = to_bits(host.transpose_recurrent(layer.weight_hr, 1))[0]
        streams = {"weights_fw": host.pack_weights(config, "fw", recurrent, projection),
                   "weights_bw": host.pack_weights(config, "bw", transposed, projection_t)}
        if config.cell == "gru":
            streams["bias_n"] = (np.zeros(config.hidden_size, np.uint32) if not layer.has_bias
                                 else to_bits(layer.bias_hh[2 * config.hidden_size:]))
        return streams

    def _weights(self, layer):
        """The layer's matrices as the PEs hold them after its weight streams
        (:meth:`_streams`): FW ``R_k`` (and ``W_hr``), BW ``R_k^T`` (and ``W_hr^T``)."""
        from nnrtl.sim.tb.farnn import io as farnn_io
        return farnn_io.layer_weights(self.config, self._streams(layer))

    def _forward_pass(self, index, streams, imvm):
        """Layer ``index``'s FW pass on the FPGA part: a ForwardResult."""
        from nnrtl.sim.tb.farnn import io as farnn_io
        if self._rtl is None:
            return golden.forward(self.config, farnn_io.layer_weights(self.config, streams),
                                  imvm)
        data = {**streams, "imvm": imvm}
        return farnn_io.forward_result(self.config, self._rtl.run(index, "fw", data))

    def _backward_pass(self, index, streams, fw, dy):
        """Layer ``index``'s BW pass on the FPGA part, from its FW pass ``fw``: a
        BackwardResult (the RTL's without ``dv_prev`` and ``dc_prev``, which stay on
        chip)."""
        from nnrtl.sim.tb.farnn import io as farnn_io
        if self._rtl is None:
            return golden.backward(self.config, farnn_io.layer_weights(self.config, streams),
                                   fw, dy)
        data = {**streams, "h": fw.h, "dy": dy,
                **{f"saved_{name}": values for name, values in fw.saved.items()}}
        return farnn_io.backward_result(self.config, self._rtl.run(index, "bw", data))

    def forward(self, network, inputs, lengths=None):
        """The last layer's outputs at every step, ``T x B x output_size`` float64, for
        time-first ``inputs`` (``T x B x input_size``); ``lengths``: each sequence's steps
        (the module docstring)."""
        _workload_sizes(network)
        config = self.config
        first = network.layers[0]
        if (first.input_size, first.hidden_size, first.proj_size) != (
                config.input_size, config.hidden_size, config.proj_size) or (
                network.layers[0].GATES != config.units):
            raise UsageError(f"the network's sizes (cell {type(first).__name__}, input "
                             f"{first.input_size}, hidden {first.hidden_size}, proj "
                             f"{first.proj_size}) are not those of the engine's "
                             f"configuration {config}")
        x = np.asarray(inputs, dtype=np.float32)
        if x.shape[:2] != (config.seq_len, config.batch) and self._rtl is not None:
            raise UsageError(f"the inputs are {x.shape[0]} steps of batch {x.shape[1]}, the "
                             f"engine's configuration {config.seq_len} of {config.batch}: "
                             f"--backend rtl runs the configuration's")
        self._shape = x.shape[:2]
        self._lengths = lengths
        self._layers = []
        self._input_delta = None
        if self._rtl is not None:
            self._rtl.clear()
        passes = 0
        for layer in network.layers:
            records, outputs = [], []
            for suffix, view, reverse in layer.passes():
                xd = _flip(x, reverse, lengths)
                streams = self._streams(view)
                imvm = to_bits(host.input_mvm(view, xd).cpu().numpy())
                fw = self._forward_pass(passes, streams, imvm)
                records.append(_Layer(layer=view, x=xd, streams=streams, fw=fw,
                                      index=passes, suffix=suffix, reverse=reverse))
                outputs.append(_masked(_flip(from_bits(fw.y), reverse, lengths), lengths))
                passes += 1
            self._layers.append(records)
            x = outputs[0] if len(outputs) == 1 else np.concatenate(outputs, axis=-1)
        return x.astype(np.float64)

    def backward(self, grad_outputs):
        """The gradients of every tensor of the last :meth:`forward`'s network,
        ``{(layer index, field): float64 array}``, given the loss gradient at its outputs
        (``T x B x output_size``)."""
        config = self.config
        dy = np.asarray(grad_outputs, dtype=np.float32)
        gradients = {}
        for index in reversed(range(len(self._layers))):
            records = self._layers[index]
            width = dy.shape[-1] // len(records)
            deltas = []
            for k, saved in enumerate(records):
                dyd = _flip(_masked(dy[..., k * width:(k + 1) * width], self._lengths),
                            saved.reverse, self._lengths).copy()
                bw = self._backward_pass(saved.index, saved.streams, saved.fw, to_bits(dyd))
                y = from_bits(saved.fw.y)
                v_prev = np.concatenate([np.zeros_like(y[:1]), y[:-1]])
                fields = host.gradients(
                    saved.layer, saved.x, v_prev, from_bits(bw.d_input),
                    from_bits(bw.d_recurrent), h=from_bits(saved.fw.h),
                    dr_hat=None if bw.dr_hat is None else from_bits(bw.dr_hat))
                for field in saved.layer.tensor_fields():
                    gradients[(index, field + saved.suffix)] = fields[field]
                deltas.append((saved, from_bits(bw.d_input)))
            if index:
                dy = _delta_below(deltas, self._lengths)
            else:
                self._input_delta = deltas
        return gradients

    def input_gradient(self):
        """The gradient of the loss at the last :meth:`forward`'s inputs, ``T x B x
        input_size`` float64: layer 0's BW input MVM (on the host, :func:`~.host.
        backward_input_mvm`) of the W side's gate deltas of the last :meth:`backward`.
        Its error is that of the weight gradients (the same deltas through one more fp32
        MVM): within :data:`GRADIENT_BOUND`.

        Raises
        ------
        ValueError
            No :meth:`backward` since the last :meth:`forward`.
        """
        if self._input_delta is None:
            raise ValueError("input_gradient comes from backward: call forward and backward "
                             "first")
        return _delta_below(self._input_delta, self._lengths).astype(np.float64)

    def counters(self):
        """The last step's FPGA part (FW and BW of every layer) and ``host_device``, where
        the host part ran (recorded in ``train.json``). Backend ``rtl``: the RTL's counters
        summed over the passes (``cycles`` of the runs, ``mac_cycles``, ``load_cycles``,
        ``activation_wait_cycles``, ``useful_macs``), ``utilization`` and ``passes`` (per
        pass: layer, phase, counters, wall ``seconds``; :meth:`.rtl.RtlPasses.counters`).
        Backend ``golden``: ``cycles`` and ``utilization`` None (the golden model has no
        cycles), ``useful_macs`` from the configuration (``T`` steps of MVM in BW, where
        the RTL runs none in its first BW step)."""
        if self._rtl is not None:
            return {**self._rtl.counters(), "host_device": self.device}
        useful = None
        if self._shape is not None:
            steps, batch = self._shape
            useful = dataclasses.replace(self.config, seq_len=steps, batch=batch,
                                         layers=sum(map(len, self._layers))).useful_macs
        return {"cycles": None, "useful_macs": useful, "utilization": None,
                "host_device": self.device}


def train_hook(request, network):
    """The engine's ``train`` hook (:class:`nnrtl.gen.train.TrainRequest`): a
    :class:`FarnnTrainer` for ``network`` sized by the request's inputs (its
    ``input_shape``, else its ``inputs`` file) and ``--param``s. Registered in
    :mod:`nnrtl.gen.farnn.engine`."""
    from nnrtl.gen.models import load_array

    if request.options:
        raise UsageError(f"the farnn engine takes no options, not {' '.join(request.options)}")
    if request.input_shape is not None:
        steps, batch = request.input_shape[:2]
    else:
        inputs = load_array(request.inputs, what="--inputs")
        steps, batch = (inputs.shape[1], inputs.shape[0]) if inputs.ndim == 3 else (
            inputs.shape[0], 1)
    config = config_for(network, steps, batch, request.params)
    return FarnnTrainer(config, request.backend, seed=request.seed, log=request.log)

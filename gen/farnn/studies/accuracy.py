"""Gradients of a full FARNN training step (FPGA part in the golden model, host part in
PyTorch float32) against PyTorch float64 autograd, for growing sequence lengths.

``python -m nnrtl.gen.farnn.studies.accuracy [T ...]`` prints one JSON line per model and
length: the largest absolute difference of any weight gradient, the largest relative one
(per tensor, ``max |g - g64| / max |g64|``) and the largest gradient. The models: random
``nn.LSTM`` / ``nn.GRU`` / ``nn.LSTM(proj_size=...)`` layers (PyTorch's default
initialisation) of :data:`MODELS` on :data:`HARDWARE` (16 PEs per unit: the 40 rows of a
gate matrix in 3 slices, the last 8 split by 2), batch 2, inputs uniform in ``[-1, 1]``, the loss
``sum((y - target)**2) / 2`` against random targets (its gradient ``y - target`` does not
shrink with T as the MSE's mean does, so the gradients grow with T).
"""

import json
import sys
import time

import numpy as np

__all__ = ["MODELS", "HARDWARE", "random_network", "reference_gradients", "gradient_errors",
           "main"]

#: name: (cell, input_size, hidden_size, proj_size, layers)
MODELS = {
    "lstm": ("lstm", 16, 40, 0, 2),
    "gru": ("gru", 16, 40, 0, 2),
    "lstm-proj": ("lstm", 16, 40, 12, 2),
}
#: ``--param``s of the engine the models run on.
HARDWARE = ("chains=16", "chain_length=1")


def random_network(cell, input_size, hidden_size, proj_size=0, layers=1, seed=0):
    """A :class:`~nnrtl.gen.models.Network` of a freshly initialised ``nn.LSTM`` or
    ``nn.GRU`` stack (biases included)."""
    import torch

    from nnrtl.gen.models import GRU, LSTM, Network

    torch.manual_seed(seed)
    if cell == "lstm":
        module = torch.nn.LSTM(input_size, hidden_size, num_layers=layers,
                               proj_size=proj_size)
    else:
        module = torch.nn.GRU(input_size, hidden_size, num_layers=layers)
    state = {name: value.detach().double().numpy() for name, value in
             module.state_dict().items()}
    built = []
    for index in range(layers):
        fields = {field: state[f"{field}_l{index}"]
                  for field in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
                  if f"{field}_l{index}" in state}
        built.append(LSTM(**fields) if cell == "lstm" else GRU(**fields))
    return Network(layers=tuple(built))


def reference_gradients(network, inputs, grad_outputs):
    """float64 autograd gradients ``{(layer, field): array}`` of ``sum(outputs *
    grad_outputs)``, i.e. the backward of the same loss gradient."""
    import torch

    from nnrtl.gen.models import to_torch, torch_parameter

    module = to_torch(network, torch.float64)
    outputs = module(torch.tensor(np.asarray(inputs, dtype=np.float64)))[0]
    outputs.backward(torch.tensor(grad_outputs))
    return {(index, field): torch_parameter(network, module, index, field).grad.numpy()
            for index, layer in enumerate(network.layers)
            for field in layer.tensor_fields()}


def gradient_errors(network, steps, batch, *, seed=0, params=()):
    """Run one training step's gradients through
    :class:`~nnrtl.gen.farnn.trainer.FarnnTrainer` and float64 autograd with the same loss
    gradient (``y - target``, the engine's outputs'); return ``(max_abs, max_rel, largest
    gradient)``."""
    from ..trainer import FarnnTrainer, config_for

    rng = np.random.default_rng(seed)
    first = network.layers[0]
    inputs = rng.uniform(-1, 1, (steps, batch, first.input_size))
    targets = rng.uniform(-1, 1, (steps, batch, network.layers[-1].output_size))
    trainer = FarnnTrainer(config_for(network, steps, batch, params))
    outputs = trainer.forward(network, inputs)
    grad_outputs = outputs - targets
    engine = trainer.backward(grad_outputs)
    reference = reference_gradients(network, inputs, grad_outputs)
    max_abs = max_rel = largest = 0.0
    for key, value in reference.items():
        difference = float(np.max(np.abs(engine[key] - value)))
        scale = float(np.max(np.abs(value)))
        max_abs = max(max_abs, difference)
        max_rel = max(max_rel, difference / scale if scale else difference)
        largest = max(largest, scale)
    return max_abs, max_rel, largest


def main(argv=None):
    from ..host import device_name
    from ..trainer import GRADIENT_BOUND

    argv = sys.argv[1:] if argv is None else argv
    lengths = [int(a) for a in argv] or [16, 32, 64, 128, 256]
    for name, (cell, inputs, hidden, proj, layers) in MODELS.items():
        network = random_network(cell, inputs, hidden, proj, layers)
        for steps in lengths:
            start = time.monotonic()
            max_abs, max_rel, largest = gradient_errors(network, steps, 2,
                                                        params=HARDWARE)
            print(json.dumps({
                "model": name, "input_size": inputs, "hidden_size": hidden,
                "proj_size": proj, "layers": layers, "batch": 2, "seq_len": steps,
                "max_abs_error": float(f"{max_abs:.3g}"),
                "max_rel_error": float(f"{max_rel:.3g}"),
                "largest_gradient": float(f"{largest:.3g}"), "bound": GRADIENT_BOUND,
                "within_bound": max_abs <= GRADIENT_BOUND, "host_device": device_name(),
                "seconds": round(time.monotonic() - start, 1)}), flush=True)


if __name__ == "__main__":
    main()

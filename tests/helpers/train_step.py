"""One training step through nnrtl.gen.train's functions (the path ``train`` takes), for
the engines' trainer tests."""

import numpy as np

from nnrtl.gen import train as interface


def interface_step(network, make_trainer, x, y, loss, lr):
    """The step of ``make_trainer(seq_len, batch)``'s trainer on ``x``, ``y``: returns
    ``(largest difference of the update from PyTorch float64's, lr * gradient bound,
    trainer)``."""
    batch = interface.prepare_batch(network, x, y, loss)
    trainer = make_trainer(*batch.inputs.shape[:2])
    outputs = trainer.forward(network, batch.inputs.numpy())
    _, grad_outputs = interface.loss_and_gradient(outputs, batch, loss, network.is_rnn)
    updated = interface.sgd_step(network, trainer.backward(grad_outputs), lr)
    _, reference = interface.reference_step(network, batch, loss, lr)
    pa, pb = updated.parameters(), reference.parameters()
    difference = max(float(np.max(np.abs(pa[name] - pb[name]))) for name in pa)
    return difference, lr * trainer.gradient_bound, trainer

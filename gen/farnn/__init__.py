"""The FARNN engine's generator side: the host part of a training step in PyTorch
(:mod:`.host`: input MVMs, gradients, transposed weight layout, weight stream packing) and
the training interface's trainer (:mod:`.trainer`). :mod:`.studies.accuracy` measures the
gradients of a full training step against PyTorch float64 autograd."""

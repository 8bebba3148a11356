"""The FARNN engine's studies: the benchmark (:mod:`.bench`, the engine's ``bench`` hook,
with its model figures, GPU baseline and markdown) and the gradient-accuracy study
(:mod:`.accuracy`)."""

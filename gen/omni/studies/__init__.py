"""The η-LSTM engine's studies: the bench beside the paper (:mod:`.bench`, the ``omni`` part
of ``nnrtl.benches``, with its markdown and plots) and the accuracy of MS1 / MS2 against
PyTorch training (:mod:`.accuracy`, its multi-seed sweep and report)."""

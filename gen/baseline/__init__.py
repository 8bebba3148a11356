"""GPU baselines the papers measure against (not engines: no RTL). :mod:`.persistent_rnn`:
a persistent RNN layer (Diamos et al., ICML 2016) in numba-cuda, runnable in numba's CUDA
simulator for small sizes (``nnrtl baseline persistent-rnn``); :mod:`.gpu_model`: an RNN
stack's training step on a GPU, modelled from its published figures."""

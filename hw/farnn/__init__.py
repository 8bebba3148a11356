"""FARNN: chained weight-stationary fp32 PEs for small-batch LSTM/GRU training
(``papers/farnn-fpga-gpu-rnn-training.txt``).

:class:`FarnnConfig` (``config.py``) is the single source of truth of an engine. The
bit-exact model is :mod:`nnrtl.sim.golden.farnn`; the host side of a training step is
:mod:`nnrtl.gen.farnn`.
"""

from .config import CELLS, GATES, MATRICES, WEIGHT_DEPTHS, FarnnConfig, MatrixShape

__all__ = ["FarnnConfig", "MatrixShape", "CELLS", "GATES", "MATRICES", "WEIGHT_DEPTHS"]

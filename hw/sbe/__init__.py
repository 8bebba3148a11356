"""The SBE: stall-free blocking-batching LSTM inference with the weights in off-chip memory
(Que et al., "Mapping Large LSTMs to FPGAs with Weight Reuse", 2020, Fig. 7).

:class:`SbeConfig` is the single source of truth of an engine; the paper's two designs are
:data:`PRESETS` (``presets.py``). The RTL, one unit per file: :class:`SbeEngine` (``engine.py``: buffers,
interconnection, h store, AXI edges), :class:`Controller` (``controller.py``: the
stall-free blocking-batching order), :class:`WeightLoader` / :class:`InputLoader`
(``loaders.py``), :class:`PEGroup` (``pe.py``: PEs and BB-FIFOs), :class:`PostProcessingUnit`
(``post.py``). The bit-exact model is :mod:`nnrtl.sim.golden.sbe`.
"""

from .config import GATES, SbeConfig
from .layer_shape import LayerShape
from .formats import Formats, HeaderLayout, PWLTables, StreamBits
from .presets import PRESETS, VC709_LSTM512, ZC706_LSTM256
from .controller import Controller
from .engine import SbeEngine
from .loaders import InputLoader, WeightLoader
from .pe import PEGroup
from .post import PostProcessingUnit

__all__ = ["SbeConfig", "LayerShape", "PRESETS", "ZC706_LSTM256",
           "VC709_LSTM512", "GATES", "Formats", "PWLTables", "HeaderLayout", "StreamBits",
           "SbeEngine", "Controller", "WeightLoader", "InputLoader", "PEGroup",
           "PostProcessingUnit"]

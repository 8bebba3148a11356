"""The SBE engine's generator side: performance and resource models (:mod:`.perf`),
design-space exploration (:mod:`.explore`), weight importers (:mod:`.importers`) and
post-training quantization (:mod:`.quantize`)."""

from .explore import Candidate, Exploration, explore, format_table
from .importers import LSTMLayer, LSTMModel, ModelSpec, load_keras, load_torch, lstm_forward
from .perf import (Prediction, ResourceEstimate, model_cycles, paper_performance, predict,
                   resource_estimate, resources)
from .quantize import QuantizedLSTM, quantize_model

__all__ = [
    "Candidate", "Exploration", "explore", "format_table",
    "LSTMLayer", "LSTMModel", "ModelSpec", "load_keras", "load_torch", "lstm_forward",
    "Prediction", "ResourceEstimate", "model_cycles", "paper_performance", "predict",
    "resource_estimate", "resources",
    "QuantizedLSTM", "quantize_model",
]

"""The SBE engine's generator side: performance and resource models (:mod:`.perf`),
design-space exploration (:mod:`.explore`), weight importers (:mod:`.importers`),
post-training quantization (:mod:`.quantize`) and the mapping of a model file to a
configuration (:mod:`.frommodel`)."""

from .explore import Candidate, Exploration, explore, format_table
from .frommodel import config_from_model, load_model, quantized_base, synthetic_calibration
from .importers import LSTMLayer, LSTMModel, ModelSpec, load_keras, load_torch, lstm_forward
from .perf import (Prediction, ResourceEstimate, model_cycles, paper_performance, predict,
                   resource_estimate, resources)
from .quantize import QuantizedLSTM, quantize_model

__all__ = [
    "Candidate", "Exploration", "explore", "format_table",
    "config_from_model", "load_model", "quantized_base", "synthetic_calibration",
    "LSTMLayer", "LSTMModel", "ModelSpec", "load_keras", "load_torch", "lstm_forward",
    "Prediction", "ResourceEstimate", "model_cycles", "paper_performance", "predict",
    "resource_estimate", "resources",
    "QuantizedLSTM", "quantize_model",
]

"""The SBE engine's generator side: its hooks (:mod:`.engine`), performance and resource
models (:mod:`.perf`, :mod:`.resources`),
design-space exploration (:mod:`.explore`) and the mapping of a model file to a
configuration with its quantized weights (:mod:`.frommodel`, reading models through
:mod:`nnrtl.gen.models`)."""

from .explore import Candidate, Exploration, explore, format_table
from .frommodel import (QuantizedLSTM, config_from_model, load_model, quantize_model,
                        quantized_base, synthetic_calibration)
from .perf import Prediction, model_cycles, paper_performance, predict
from .resources import ResourceEstimate, resource_estimate, resources

__all__ = [
    "Candidate", "Exploration", "explore", "format_table",
    "config_from_model", "load_model", "quantized_base", "synthetic_calibration",
    "Prediction", "ResourceEstimate", "model_cycles", "paper_performance", "predict",
    "resource_estimate", "resources",
    "QuantizedLSTM", "quantize_model",
]

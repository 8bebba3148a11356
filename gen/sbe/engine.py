"""The SBE registered with the platform (:mod:`nnrtl.gen.engines`): its hooks.

``simulate``
    One run of :mod:`nnrtl.sim.tb.sbe.engine`: every layer over ``steps`` steps (default
    ``config.seq_len``), layer 0 cut into two runs at a seeded random step so that the
    state carried across runs is exercised; with a model (``--model``), the user's inputs
    in one run per layer, the last layer's h written as floats and compared with the
    float64 LSTM of the dequantized weights.
``load_model``
    A model file read through :mod:`nnrtl.gen.models`, quantized to 16 bits, its
    hardware parameters ``--param`` does not pin chosen by the design-space exploration
    (:func:`.frommodel.model_config`, the completion ``nnrtl explore sbe`` makes).
``model_files``
    :mod:`.hostfiles`: ``weights.bin``, ``runs.json`` and ``host.py`` of a model's
    design (``nnrtl generate sbe --model``).
``explore``
    The paper's automatic hardware mapping (:mod:`.explore`).
``bench``
    :mod:`.bench`.
``breakdown``, ``report``
    :mod:`.report`: where a simulation's cycles went; the exploration and utilization
    plots of ``nnrtl report``.
"""

import dataclasses
import random
import tempfile
from pathlib import Path

import numpy as np

from ...hw.sbe import PRESETS, SbeConfig, SbeEngine
from ..engines import Engine, ModelBinding
from .space import draw

__all__ = ["ENGINE", "simulate", "predict", "load_model", "explore"]


def predict(config, workload):
    """The performance model: ``workload`` holds ``steps``, the time steps every layer
    runs in one run (default ``config.seq_len``)."""
    from .perf import run_cycles

    steps = workload.get("steps", config.seq_len)
    return {"cycles": sum(run_cycles(config, layer, steps) for layer in range(config.layers)),
            "useful_macs": steps * config.macs_per_step}


def _run(request, *, steps, split, model=None, outputs=None):
    from ...sim.runner import simulate as run

    config = request.config
    params = {
        "config": dataclasses.asdict(config),
        "steps": steps,
        "split": split,
        "batch_norm": config.batch_norm,
        "source_pauses": request.backpressure,
        "sink_pauses": request.backpressure,
        "model": model and str(model),
        "outputs": outputs and str(outputs),
    }
    result = run(ENGINE.verilog(config), test_module="nnrtl.sim.tb.sbe.engine", params=params,
                 seed=request.seed, waves=request.waves, name="nnrtl_sbe", log=request.log)
    return result


def simulate(request, *, split=None, codes=None, code_outputs=None):
    """One SBE simulation (see the module).

    ``split``: the step at which layer 0's sequence is cut into two runs (default a
    seeded random step; 0: one run). ``codes``: an ``.npz`` of weight, bias and input codes
    (:mod:`nnrtl.sim.tb.sbe.engine`'s ``model``) instead of random ones; ``code_outputs``: where
    the last layer's h codes go (``.npy``)."""
    config = request.config
    if request.model is not None:
        return _simulate_model(request)
    steps = config.seq_len if request.steps is None else request.steps
    if split is None:
        split = random.Random(request.seed).randint(1, steps - 1) if steps > 1 else 0
    return _run(request, steps=steps, split=split, model=codes, outputs=code_outputs)


def _simulate_model(request):
    """The user's inputs through the RTL, h written to ``request.outputs`` as floats."""
    from .frommodel import write_engine_inputs

    from .host_layers import HostLayers

    config, quantized, xs = request.config, request.model, request.inputs
    with tempfile.TemporaryDirectory() as scratch:
        engine_inputs, codes = Path(scratch) / "model.npz", Path(scratch) / "h.npy"
        host = quantized.host or HostLayers()
        write_engine_inputs(engine_inputs, config, quantized, host.engine_order(xs))
        result = _run(request, steps=len(xs), split=0, model=engine_inputs, outputs=codes)
        if not codes.exists():
            return result              # a mismatch: the bench wrote no outputs
        hs = host.engine_order(np.load(codes) * 2.0 ** -config.act_frac)
    outputs = host.outputs(hs)
    np.save(request.outputs, outputs)
    result["outputs"] = str(request.outputs)
    reference, _ = quantized.dequantized().forward(xs)
    result["max_abs_error_vs_float"] = float(np.max(np.abs(outputs - host.outputs(reference))))
    if host:
        result["host_layers"] = list(host.described)
        result["reverse"] = host.reverse
    result["config"] = dataclasses.asdict(config)
    return result


def load_model(request):
    """``--model``: the configuration of a model file for ``request.board``."""
    from .explore import check_seq_len
    from ..models import model_format
    from .frommodel import calibration_used, load_inputs, model_config
    from .host_layers import load_tokens, load_whole_model

    if request.seq_len is not None:
        check_seq_len(request.seq_len, name="--seq-len")   # before reading a model for nothing
    model, host = load_whole_model(request.path, request.weights, prefix=request.prefix)
    xs = None
    if request.inputs is not None and host.embedding is not None:
        xs = host.engine_inputs(load_tokens(request.inputs, host.embedding))
    elif request.inputs is not None:
        xs = load_inputs(request.inputs, model.spec.input_size)
    seq_len = len(xs) if xs is not None else request.seq_len
    if seq_len is None:
        seq_len = SbeConfig().seq_len
    calibration, used = xs, calibration_used(seq_len, xs)
    if xs is None and host.embedding is not None:
        calibration, used = host.calibration(seq_len)
    config, quantized = model_config(model, request.board, request.params, seq_len=seq_len,
                                     calibration=calibration, lut_share=request.lut_share)
    source = {"path": str(request.path), "weights": request.weights and str(request.weights),
              "format": model_format(request.path), "calibration": used}
    return ModelBinding(config=config, model=dataclasses.replace(quantized, source=source,
                                                                 host=host or None),
                        inputs=xs)


def explore(request):
    """``nnrtl explore sbe``: the paper's automatic hardware mapping of a model."""
    from .exploration import explore_request
    return explore_request(request)


def _bench(out):
    from .studies.bench import bench_sbe, markdown_sbe
    result = bench_sbe(out=out)
    return result, markdown_sbe(result)


def _breakdown(result):
    from .report import breakdown
    return breakdown(result)


def _report(data):
    from .report import report
    return report(data)


def _model_files(config, binding, directory):
    from .hostfiles import model_files
    return model_files(config, binding, directory)


def _resources(config, family):
    from .resources import resources
    return resources(config, family)


ENGINE = Engine(
    name="sbe",
    summary="stall-free blocking-batching LSTM inference, weights in off-chip memory",
    config_class=SbeConfig,
    top=SbeEngine,
    resources=_resources,
    predict=predict,
    simulate=simulate,
    presets=PRESETS,
    load_model=load_model,
    model_files=_model_files,
    explore=explore,
    bench=_bench,
    breakdown=_breakdown,
    report=_report,
    draw=draw,
    steps_help="time steps each layer runs (default seq_len; the first layer's in two runs)",
)

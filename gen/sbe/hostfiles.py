"""What a host needs to run an SBE design on its model (``nnrtl generate sbe --model``).

``weights.bin``
    The weight-stream image in DMA order: for each layer, the bytes of ``s_weights`` for a
    run of ``seq_len`` steps (header, then the blocks of
    :func:`~nnrtl.sim.golden.sbe.weight_beats`), each beat ``bus_weights`` little-endian
    words of ``operand_width`` bits in ``stream_bits.weights / 8`` bytes, as the testbench
    (:mod:`nnrtl.sim.tb.sbe.engine`) sends them.
``runs.json``
    The runs in order (layer, steps, flags, the layer's slice of ``weights.bin``, beat
    counts of :func:`~nnrtl.sim.golden.sbe.beat_counts`, the layer's model sizes
    ``model_input_size`` and ``hidden_size`` beside the padded ``input_size`` the engine
    reads), the streams' beat sizes, the input order's parameters, ``hidden_sizes`` (the
    model's, per layer), ``padded_hidden_size`` (h values per ``m_axis`` frame) and the
    register map (as ``manifest.json`` lists it).
``host.py``
    A copy of :mod:`.host_template`: loads both and runs every layer through four
    functions the user writes for the platform.
``host_layers.json``, ``host_layers.bin``
    Only for a model with layers around its stack (:mod:`.host_layers`): what ``host.py``'s
    ``Host.model`` runs on the host, each layer's tensors as little-endian float64 in
    ``host_layers.bin`` (row-major; offsets and shapes in the JSON): the embedding's
    ``weight`` in front, the head's ``Linear`` layers after the stack; ``reverse`` for a
    stack run in reverse (the steps sent last first, the outputs reversed back).
"""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from ...sim.golden.sbe import LayerParams, beat_counts, pack_beat, weight_beats

__all__ = ["WEIGHTS", "RUNS", "HOST", "HOST_LAYERS", "HOST_TENSORS", "model_files",
           "weight_image", "runs_plan", "host_layer_files"]

WEIGHTS, RUNS, HOST = "weights.bin", "runs.json", "host.py"
HOST_LAYERS, HOST_TENSORS = "host_layers.json", "host_layers.bin"
_TEMPLATE = Path(__file__).with_name("host_template.py")


def weight_image(config, params, steps):
    """The bytes of ``s_weights`` for one run of every layer over ``steps`` steps:
    ``[bytes of layer 0, bytes of layer 1, ...]`` (``params``: a
    :class:`~nnrtl.sim.golden.sbe.LayerParams` per layer)."""
    width, size = config.operand_width, config.stream_bits.weights // 8
    return [b"".join(pack_beat(row, width).to_bytes(size, "little")
                     for row in weight_beats(config, layer, layer_params, steps))
            for layer, layer_params in enumerate(params)]


def runs_plan(config, images, registers):
    """The JSON-able content of ``runs.json`` for the per-layer ``images`` of
    :func:`weight_image` (runs of ``config.seq_len`` steps)."""
    bits = config.stream_bits
    runs, offset = [], 0
    for layer, image in enumerate(images):
        shape = config.layer(layer)
        inputs, hidden = config.layer_sizes(layer)
        counts = beat_counts(config, layer, config.seq_len)
        runs.append({
            "layer": layer,
            "steps": config.seq_len,
            "flags": {"keep_state": 0, "batch_norm": 0},
            "weights": {"offset": offset, "length": len(image)},
            "weight_beats": counts["header"] + counts["weights"],
            "header_beats": counts["header"],
            "input_beats": counts["inputs"],
            "output_beats": counts["outputs"],
            "input_size": shape.input_size,
            "model_input_size": inputs,
            "hidden_size": hidden,
            "batch": config.batch,
            "block_columns": shape.block_columns,
            "first_hidden_block": shape.first_hidden_block,
        })
        offset += len(image)
    return {
        "weights_file": WEIGHTS,
        "seq_len": config.seq_len,
        "layers": config.layers,
        "input_size": config.input_size,
        "hidden_size": config.layer_hidden_sizes[-1],
        "hidden_sizes": list(config.layer_hidden_sizes),
        "padded_hidden_size": config.padded_hidden_size,
        "operand_width": config.operand_width,
        "act_frac": config.act_frac,
        "streams": {
            "weights": {"name": "s_weights", "words": config.bus_weights,
                        "beat_bytes": bits.weights // 8},
            "inputs": {"name": "s_inputs", "words": config.columns_per_cycle,
                       "beat_bytes": bits.inputs // 8},
            "outputs": {"name": "m_axis", "words": config.post_units,
                        "beat_bytes": bits.outputs // 8},
        },
        "registers": registers.as_dict(),
        "runs": runs,
    }


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _model_section(config, quantized):
    source = quantized.source or {}
    path = source.get("path")
    network = quantized.network
    section = {
        "path": path,
        "sha256": path and _sha256(path),
        "format": source.get("format"),
        "weights": source.get("weights"),
        "weights_sha256": source.get("weights") and _sha256(source["weights"]),
        "layers": [{"kind": type(layer.layer).__name__,
                    "input_size": int(layer.layer.input_size),
                    "hidden_size": int(layer.layer.hidden_size)}
                   for layer in network.layers],
        "quantization": {
            "width": quantized.width,
            "acc_width": quantized.acc_width,
            "weight_frac": config.weight_frac,
            "act_frac": config.act_frac,
            "cell_frac": config.cell_frac,
            "rounding": quantized.rounding,
            "saturated_codes": int(quantized.saturated),
            "ranges": {name: float(value) for name, value in quantized.ranges.items()},
        },
        "calibration": source.get("calibration"),
    }
    return section


def host_layer_files(host, directory):
    """Write ``host_layers.json`` and ``host_layers.bin`` of ``host`` (a
    :class:`~.host_layers.HostLayers`) into ``directory``; returns their names."""
    blobs, offset = [], 0

    def tensor(array):
        nonlocal offset
        data = np.ascontiguousarray(array, dtype="<f8").tobytes()
        blobs.append(data)
        entry = {"offset": offset, "shape": list(np.shape(array))}
        offset += len(data)
        return entry

    plan = {"tensors_file": HOST_TENSORS, "layers": list(host.described),
            "reverse": host.reverse, "embedding": None, "head": []}
    if host.embedding is not None:
        plan["embedding"] = {"key": host.embedding.key,
                             "weight": tensor(host.embedding.weight)}
    for layer in () if host.head is None else host.head.layers:
        kind = type(layer).__name__
        plan["head"].append({"kind": kind, "weight": tensor(layer.weight),
                             "bias": None if layer.bias is None else tensor(layer.bias)}
                            if kind == "Linear" else {"kind": kind})
    directory = Path(directory)
    (directory / HOST_TENSORS).write_bytes(b"".join(blobs))
    (directory / HOST_LAYERS).write_text(json.dumps(plan, indent=2) + "\n")
    return [HOST_LAYERS, HOST_TENSORS]


def model_files(config, binding, directory):
    """The SBE's ``model_files`` hook: write ``weights.bin``, ``runs.json`` and ``host.py``
    into ``directory``; return the manifest's ``"model"`` section (``"files"``: the
    names written)."""
    quantized = binding.model
    params = [LayerParams.from_quantized(quantized, layer) for layer in range(config.layers)]
    images = weight_image(config, params, config.seq_len)
    directory = Path(directory)
    (directory / WEIGHTS).write_bytes(b"".join(images))
    plan = runs_plan(config, images, config.registers)
    (directory / RUNS).write_text(json.dumps(plan, indent=2) + "\n")
    shutil.copyfile(_TEMPLATE, directory / HOST)
    files = [WEIGHTS, RUNS, HOST]
    section = _model_section(config, quantized)
    if quantized.host:
        files += host_layer_files(quantized.host, directory)
        section["host_layers"] = list(quantized.host.described)
        section["reverse"] = quantized.host.reverse
    return {**section, "files": files}

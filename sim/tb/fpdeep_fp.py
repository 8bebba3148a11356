"""The FPDeep FP module (:mod:`nnrtl.hw.fpdeep.fp`): stimulus and expected beats from the golden
model (:mod:`nnrtl.sim.golden.fpdeep.fp`), shared by the Amaranth-simulator tests, and a cocotb
bench under Verilator with every backpressure pattern on the activation-in, partial-in and
partial-out / out streams.

A case (:func:`random_case`) is random images, weights, bias and upstream partials for an
:class:`~nnrtl.hw.fpdeep.config.FpConfig`; :func:`stimulus` turns it into the integer payloads
of the ``load``, ``act_in`` and ``part_in`` streams, :func:`expected` into those of
``part_out`` or ``out``. Payloads are packed by the ports' own layouts (:func:`pack`).

Parameters of the cocotb bench (``tb_params()``): ``cfg`` (the FpConfig's fields),
``images``, ``patterns`` (names from :mod:`nnrtl.sim.patterns`), ``seed``. Per pattern the
bench loads the LPRAM, streams the images and checks every output beat; reported:
``bit_exact``, per pattern ``beats``, ``mismatches`` (the first few, naming stream, beat and
field), ``cycles``.
"""

import dataclasses
import random

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.config import FpConfig
from nnrtl.hw.fpdeep.fp import out_layout, partial_layout
from nnrtl.hw.fpdeep.line_buffer import pixel_layout
from nnrtl.hw.fpdeep.lpram import load_layout
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.fpdeep.fp import fp_module, pad_bias, pad_weights

__all__ = ["pack", "unpack", "random_case", "stimulus", "expected", "config_of"]


def pack(shape, value):
    """The integer of ``value`` (int, sequence or mapping) laid out as ``shape``."""
    if isinstance(shape, data.StructLayout):
        return sum(pack(field.shape, value[name]) << field.offset
                   for name, field in shape) if value is not None else 0
    if isinstance(shape, data.ArrayLayout):
        width = Shape.cast(shape.elem_shape).width if not isinstance(
            shape.elem_shape, data.Layout) else shape.elem_shape.size
        return sum(pack(shape.elem_shape, v) << (n * width) for n, v in enumerate(value))
    width = Shape.cast(shape).width
    return int(value) & ((1 << width) - 1)


def unpack(shape, bits):
    """The inverse of :func:`pack` (ints unsigned; lists and dicts)."""
    if isinstance(shape, data.StructLayout):
        return {name: unpack(field.shape, bits >> field.offset) for name, field in shape}
    if isinstance(shape, data.ArrayLayout):
        elem = shape.elem_shape
        width = elem.size if isinstance(elem, data.Layout) else Shape.cast(elem).width
        return [unpack(elem, bits >> (n * width)) for n in range(shape.length)]
    return bits & ((1 << Shape.cast(shape).width) - 1)


def config_of(fields):
    """An FpConfig from its fields (a dict, e.g. from ``tb_params()``)."""
    fields = dict(fields)
    if fields.get("pool") is not None:
        fields["pool"] = tuple(fields["pool"])
    return FpConfig(**fields)


def random_case(cfg, images, seed):
    """Random ``act`` (images, w_in, w_in, n_in), ``weights``, ``bias`` and ``partial_in``
    (images, w_out², groups, P) as the module's words (fp32 bit patterns, fixed16 codes)."""
    rng = np.random.default_rng(seed)
    shape_w = (cfg.n_out, cfg.n_in, cfg.k, cfg.k)
    shape_p = (images, cfg.w_out ** 2, cfg.groups, cfg.p)
    shape_a = (images, cfg.w_in, cfg.w_in, cfg.n_in)
    if cfg.precision == "fp32":
        bits = lambda x: to_bits(FP32, x.astype(np.float32)).astype(np.int64)
        act = bits(rng.standard_normal(shape_a))
        weights = bits(rng.standard_normal(shape_w) * 0.5)
        bias = bits(rng.standard_normal(cfg.n_out) * 0.5)
        partial = bits(rng.standard_normal(shape_p) * 2) if cfg.partial_in else None
    else:
        one = 1 << cfg.frac_bits
        act = rng.integers(-one, one + 1, shape_a)
        weights = rng.integers(-one // 2, one // 2 + 1, shape_w)
        bias = rng.integers(-one, one + 1, cfg.n_out)
        partial = (rng.integers(-(one << cfg.frac_bits), one << cfg.frac_bits, shape_p)
                   if cfg.partial_in else None)
    return {"act": act, "weights": weights, "bias": bias, "partial_in": partial}


def stimulus(cfg, case):
    """Payload integers per input stream: ``load``, ``act_in``, ``part_in`` (if any)."""
    w = pad_weights(cfg, case["weights"])                  # (g, j, i, t)
    b = pad_bias(cfg, case["bias"])
    load = []
    for bank in range(cfg.banks):
        i, t = divmod(bank, cfg.taps)
        load += [pack(load_layout(cfg), {"bank": bank, "row": g, "data": list(w[g, :, i, t])})
                 for g in range(cfg.groups)]
    if cfg.completes:
        load += [pack(load_layout(cfg), {"bank": cfg.banks, "row": g, "data": list(b[g])})
                 for g in range(cfg.groups)]
    pixel = pixel_layout(cfg.word_bits, cfg.n_in)
    act = [pack(pixel, list(image[y, x])) for image in case["act"]
           for y in range(cfg.w_in) for x in range(cfg.w_in)]
    result = {"load": load, "act_in": act}
    if cfg.partial_in:
        layout = partial_layout(cfg)
        beats = cfg.w_out ** 2 * cfg.groups
        result["part_in"] = [
            pack(layout, {"data": list(beat), "last": int(n == beats - 1)})
            for image in case["partial_in"]
            for n, beat in enumerate(image.reshape(beats, cfg.p))]
    return result


def expected(cfg, case):
    """``(stream name, payload integers)`` the module must send for ``case``."""
    beats = []
    for n, act in enumerate(case["act"]):
        partial = case["partial_in"][n] if cfg.partial_in else None
        result = fp_module(cfg, act, case["weights"], case["bias"], partial)
        if not cfg.completes:
            flat = result.partials.reshape(-1, cfg.p)
            beats += [pack(partial_layout(cfg), {"data": list(beat),
                                                 "last": int(k == len(flat) - 1)})
                      for k, beat in enumerate(flat)]
        else:
            data_, relu, argmax = (v.reshape(-1, cfg.p) for v in
                                   (result.data, result.relu, result.argmax))
            beats += [pack(out_layout(cfg), {"data": list(data_[k]), "relu": pack(
                data.ArrayLayout(1, cfg.p), list(relu[k])), "argmax": list(argmax[k]),
                "last": int(k == len(data_) - 1)}) for k in range(len(data_))]
    return ("out" if cfg.completes else "part_out"), beats


def fields_of(cfg):
    """The JSON-able fields of ``cfg`` (for ``tb_params``)."""
    return dataclasses.asdict(cfg)


def _rng(seed):
    return random.Random(seed)

"""Run a generated SBE design on its model from a host: ``host.py`` of ``nnrtl generate sbe
--model`` (copied from ``nnrtl/gen/sbe/host_template.py``; Python 3.8+, no dependencies).

It reads ``runs.json`` and ``weights.bin`` beside it and drives the engine as nnrtl's
testbench does, through four functions you write for your platform::

    write_register(offset, value)   write a 32-bit word at a byte offset of the AXI4-Lite
                                    register map (runs.json "registers")
    read_register(offset) -> int    read that word
    send(stream, data)              queue ``data`` (bytes) as one AXI4-Stream frame (tlast on
                                    its last beat) on "s_weights" or "s_inputs"; it must
                                    return before the engine has taken it all (a DMA
                                    transfer started, not waited for): the engine takes
                                    the streams only once the run is started
    receive(stream, size) -> bytes  the next frame of "m_axis", ``size`` bytes (one step's h)

Example::

    from host import Host
    host = Host("build/lstm", write_register=..., read_register=..., send=..., receive=...)
    hs = host.run(xs)    # seq_len x input_size floats -> seq_len x last layer's h floats
    ys = host.model(inputs)   # the whole model: an embedding's token ids in, a head's out

Each layer runs over the whole sequence, in ``seq_len``-step runs (a longer sequence, a
multiple of ``seq_len``, continues the state with ``flags.keep_state``): registers
``steps``, ``layer``, ``flags``; the layer's weight image (header and blocks) on
``s_weights``; its x on ``s_inputs``; ``control.start``; one h frame per step from
``m_axis``; then ``status.busy`` 0 and ``status.done`` 1. The next layer's x are this
layer's h codes.

``python host.py [DIR]`` prints the runs of the design in DIR (default: this file's).
"""

import array
import json
import math
import os
import sys

__all__ = ["Host", "quantize", "EngineError"]


class EngineError(RuntimeError):
    """The engine did not finish a run, or sent a frame of the wrong size."""


def quantize(values, frac, width):
    """``values`` (floats) as codes with ``frac`` fraction bits: rounded half to even and
    saturated to ``width`` signed bits (nnrtl's quantization of inputs)."""
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return [min(high, max(low, int(round(v * 2.0 ** frac)))) for v in values]


def _pack(words, width, beat_words, beat_bytes):
    """Words (signed or unsigned codes) as beats of ``beat_words`` little-endian words."""
    mask = (1 << width) - 1
    out = bytearray()
    for b in range(0, len(words), beat_words):
        value = 0
        for n, word in enumerate(words[b:b + beat_words]):
            value |= (int(word) & mask) << (n * width)
        out += value.to_bytes(beat_bytes, "little")
    return bytes(out)


def _unpack(data, width, beat_words, beat_bytes):
    """The signed words of beats of ``beat_words`` words."""
    mask, sign = (1 << width) - 1, 1 << (width - 1)
    words = []
    for b in range(0, len(data), beat_bytes):
        value = int.from_bytes(data[b:b + beat_bytes], "little")
        for n in range(beat_words):
            word = (value >> (n * width)) & mask
            words.append(word - (sign << 1) if word & sign else word)
    return words


class Host:
    """The design in ``directory`` (``runs.json``, ``weights.bin``) on your platform's
    register and stream functions (see the module)."""

    def __init__(self, directory, *, write_register, read_register, send, receive,
                 max_polls=1_000_000):
        with open(os.path.join(directory, "runs.json")) as file:
            self.plan = json.load(file)
        with open(os.path.join(directory, self.plan["weights_file"]), "rb") as file:
            self.weights = file.read()
        self._write, self._read = write_register, read_register
        self._send, self._receive = send, receive
        self.max_polls = max_polls
        self.registers = {r["name"]: r for r in self.plan["registers"]["registers"]}
        self.embedding, self.head, self.reverse = _host_layers(directory)

    def _offset(self, register):
        return self.registers[register]["offset"]

    def _fields(self, register, **values):
        fields = {f["name"]: f["offset"] for f in self.registers[register]["fields"]}
        word = 0
        for name, value in values.items():
            word |= (int(value) & 1) << fields[name]
        return word

    def _field(self, register, name, word):
        offset = next(f["offset"] for f in self.registers[register]["fields"]
                      if f["name"] == name)
        return (word >> offset) & 1

    def _input_words(self, run, xs):
        """x codes of one run (``steps x`` the layer's model input size), padded with zeros
        to the ``input_size`` the engine reads, in the order of ``s_inputs``: per batch,
        the x-only blocks block by block (every step of the batch), then each step's
        other columns."""
        batch, columns, first = run["batch"], run["block_columns"], run["first_hidden_block"]
        pad = [0] * (run["input_size"] - run["model_input_size"])
        xs = [list(x) + pad for x in xs]
        words = []
        for t0 in range(0, len(xs), batch):
            steps = xs[t0:t0 + batch]
            for block in range(first):
                for x in steps:
                    words += x[block * columns:(block + 1) * columns]
            for x in steps:
                words += x[first * columns:]
        return words

    def _run(self, run, xs, keep_state):
        """One run (``len(xs) == run["steps"]``); returns its h codes, the layer's model
        units (a frame carries ``padded_hidden_size`` values, the padded units' last)."""
        plan, streams = self.plan, self.plan["streams"]
        width = plan["operand_width"]
        self._write(self._offset("steps"), run["steps"])
        self._write(self._offset("layer"), run["layer"])
        self._write(self._offset("flags"), self._fields(
            "flags", keep_state=keep_state, batch_norm=run["flags"]["batch_norm"]))
        image = run["weights"]
        self._send("s_weights", self.weights[image["offset"]:image["offset"] + image["length"]])
        inputs = streams["inputs"]
        self._send("s_inputs", _pack(self._input_words(run, xs), width, inputs["words"],
                                     inputs["beat_bytes"]))
        self._write(self._offset("control"), self._fields("control", start=1))
        outputs = streams["outputs"]
        size = plan["padded_hidden_size"] // outputs["words"] * outputs["beat_bytes"]
        hs = []
        for t in range(run["steps"]):
            frame = bytes(self._receive("m_axis", size))
            if len(frame) != size:
                raise EngineError(f"layer {run['layer']} step {t}: m_axis frame of "
                                  f"{len(frame)} bytes, expected {size}")
            hs.append(_unpack(frame, width, outputs["words"],
                              outputs["beat_bytes"])[:run["hidden_size"]])
        status = self._offset("status")
        for _ in range(self.max_polls):
            word = self._read(status)
            if not self._field("status", "busy", word):
                break
        else:
            raise EngineError(f"layer {run['layer']}: status.busy still 1 after "
                              f"{self.max_polls} reads")
        if not self._field("status", "done", word):
            raise EngineError(f"layer {run['layer']}: status.done is 0 after the run")
        return hs

    def run(self, xs, *, codes=False):
        """Run every layer on ``xs`` (``T x input_size``, ``T`` a multiple of
        ``seq_len``): floats quantized to the input format, or codes if ``codes``.
        Returns the last layer's h, ``T x hidden_size``: floats, or codes if ``codes``."""
        plan = self.plan
        seq_len, frac, width = plan["seq_len"], plan["act_frac"], plan["operand_width"]
        xs = [list(x) for x in xs]
        if not xs or len(xs) % seq_len:
            raise ValueError(f"xs must have a multiple of seq_len {seq_len} steps, not "
                             f"{len(xs)}")
        if any(len(x) != plan["input_size"] for x in xs):
            raise ValueError(f"every step of xs must have input_size {plan['input_size']} "
                             f"values")
        if not codes:
            xs = [quantize(x, frac, width) for x in xs]
        for run in plan["runs"]:
            hs = []
            for start in range(0, len(xs), seq_len):
                hs += self._run(run, xs[start:start + seq_len], keep_state=start > 0)
            xs = hs
        return xs if codes else [[v * 2.0 ** -frac for v in h] for h in xs]

    def model(self, inputs):
        """The whole model on ``inputs``: the embedding's rows for token ids (when the
        model starts with one; else input vectors), :meth:`run` (on the reversed sequence,
        its outputs reversed back, for a stack run in reverse), then the head's ``Linear``
        layers and activations on every step's h (when it has them), in floats."""
        if self.embedding is not None:
            if any(not 0 <= int(t) < len(self.embedding) or int(t) != t for t in inputs):
                raise ValueError(f"token ids must be integers in 0..{len(self.embedding) - 1}")
            inputs = [self.embedding[int(t)] for t in inputs]
        if self.reverse:                    # a reverse stack: the steps last first
            out = self.run(list(inputs)[::-1])[::-1]
        else:
            out = self.run(inputs)
        for kind, weight, bias in self.head:
            if kind == "Linear":
                out = [[sum(w * v for w, v in zip(row, h)) + (bias[k] if bias else 0.0)
                        for k, row in enumerate(weight)] for h in out]
            else:
                out = [_ACTIVATIONS[kind](h) for h in out]
        return out


def _softmax(values):
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


#: The head's activations, on one step's values.
_ACTIVATIONS = {
    "ReLU": lambda h: [max(v, 0.0) for v in h],
    "Tanh": lambda h: [math.tanh(v) for v in h],
    "Sigmoid": lambda h: [0.5 * (1.0 + math.tanh(0.5 * v)) for v in h],
    "Softmax": _softmax,
}


def _matrix(blob, entry):
    """A tensor of ``host_layers.bin``: a list of rows (2-D) or a list (1-D)."""
    values = array.array("d")
    count = 1
    for size in entry["shape"]:
        count *= size
    values.frombytes(blob[entry["offset"]:entry["offset"] + 8 * count])
    if sys.byteorder != "little":
        values.byteswap()
    if len(entry["shape"]) == 1:
        return list(values)
    columns = entry["shape"][1]
    return [list(values[r * columns:(r + 1) * columns]) for r in range(entry["shape"][0])]


def _host_layers(directory):
    """``(embedding rows or None, [(kind, weight rows or None, bias or None), ...],
    reverse)`` from
    ``host_layers.json`` and ``host_layers.bin``, if the design's model has them."""
    path = os.path.join(directory, "host_layers.json")
    if not os.path.exists(path):
        return None, [], False
    with open(path) as file:
        plan = json.load(file)
    with open(os.path.join(directory, plan["tensors_file"]), "rb") as file:
        blob = file.read()
    embedding = plan["embedding"] and _matrix(blob, plan["embedding"]["weight"])
    head = [(layer["kind"], layer.get("weight") and _matrix(blob, layer["weight"]),
             layer.get("bias") and _matrix(blob, layer["bias"])) for layer in plan["head"]]
    return embedding, head, plan.get("reverse", False)


def _describe(directory):
    with open(os.path.join(directory, "runs.json")) as file:
        plan = json.load(file)
    print(f"{plan['layers']} layer(s), input_size {plan['input_size']}, hidden sizes "
          f"{plan['hidden_sizes']}, runs of {plan['seq_len']} steps, inputs with "
          f"{plan['act_frac']} fraction bits")
    for run in plan["runs"]:
        image = run["weights"]
        print(f"  layer {run['layer']}: weights.bin[{image['offset']}:"
              f"{image['offset'] + image['length']}], {run['input_beats']} input beats, "
              f"{run['output_beats']} output beats")


if __name__ == "__main__":
    _describe(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))

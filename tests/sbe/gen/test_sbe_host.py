"""``nnrtl generate sbe --model``'s host files (:mod:`nnrtl.gen.sbe.hostfiles`): weights.bin
against the golden packer, runs.json against the golden beat counts, and host.py driving an
engine emulated with the golden model (:mod:`nnrtl.sim.golden.sbe`)."""

import dataclasses
import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from nnrtl.boards import get_board
from nnrtl.gen.emit import generate
from nnrtl.gen.engines import ModelRequest, get_engine
from nnrtl.sim.golden import sbe as golden

ZC706 = get_board("zc706")
SEQ_LEN = 6
#: Two small configurations: k = 1 with case 3 in layer 0 (h blocks re-sent every step)
#: and x-only blocks in both layers; k = 2 with no x-only block in layer 0.
CONFIGS = {
    "k1-blocks4": ("pes=32", "blocks=4", "bus_weights=4", "post_units=2", "batch=4"),
    "k2-blocks2": ("pes=64", "blocks=2", "bus_weights=4", "post_units=4", "batch=4"),
}
HOST_FILES = {"weights.bin", "runs.json", "host.py"}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    torch.manual_seed(5)
    lstm = torch.nn.LSTM(4, 8, num_layers=2)
    with torch.no_grad():
        for parameter in lstm.parameters():
            parameter.copy_(torch.randn_like(parameter) * 0.6)
    path = tmp_path_factory.mktemp("model") / "lstm.pt"
    torch.save(lstm.state_dict(), path)
    return path


def bind(path, params):
    engine = get_engine("sbe")
    return engine, engine.load_model(ModelRequest(path=path, weights=None, board=ZC706,
                                                  params=params, seq_len=SEQ_LEN))


def layer_params(binding):
    return [golden.LayerParams.from_quantized(binding.model, layer)
            for layer in range(binding.config.layers)]


def write_host_files(engine, binding, directory):
    directory.mkdir()
    section = engine.model_files(binding.config, binding, directory)
    assert set(section["files"]) == HOST_FILES == {p.name for p in directory.iterdir()}
    return section


def load_host(directory):
    spec = importlib.util.spec_from_file_location("generated_host", directory / "host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def emulated_host(directory, config):
    """The generated ``Host`` of ``directory`` on a :class:`GoldenEngine` of ``config``."""
    emulator = GoldenEngine(config)
    return load_host(directory).Host(
        directory, write_register=emulator.write_register,
        read_register=emulator.read_register, send=emulator.send, receive=emulator.receive)


class GoldenEngine:
    """The SBE as host.py sees it, its arithmetic the golden model's: registers in a dict
    by offset, each stream a queue of frames; ``control.start`` decodes the frames sent
    (weights and x back to codes through the golden packers' orders), runs
    :func:`~nnrtl.sim.golden.sbe.run_layer` and queues one h frame per step."""

    def __init__(self, config):
        self.config = config
        registers = config.registers.as_dict()["registers"]
        self.offsets = {r["name"]: r["offset"] for r in registers}
        self.bits = {r["name"]: {f["name"]: f["offset"] for f in r["fields"]}
                     for r in registers}
        self.registers = {}
        self.frames = {"s_weights": [], "s_inputs": [], "m_axis": []}
        self.state = None
        self.log = []

    # -- the four functions host.py takes --
    def write_register(self, offset, value):
        name = next(n for n, o in self.offsets.items() if o == offset)
        self.log.append(("write", name, value))
        self.registers[name] = value
        if name == "control" and value >> self.bits["control"]["start"] & 1:
            self._start()

    def read_register(self, offset):
        name = next(n for n, o in self.offsets.items() if o == offset)
        self.log.append(("read", name))
        return self.registers.get(name, 0)

    def send(self, stream, data):
        self.log.append(("send", stream, len(data)))
        self.frames[stream].append(bytes(data))

    def receive(self, stream, size):
        frame = self.frames[stream].pop(0)
        assert len(frame) == size
        return frame

    # -- the engine --
    def _words(self, data, words, beat_bits):
        size = beat_bits // 8
        assert len(data) % size == 0
        return np.array([golden.unpack_beat(int.from_bytes(data[b:b + size], "little"),
                                            words, self.config.operand_width, signed=False)
                         for b in range(0, len(data), size)], dtype=np.int64)

    def _params(self, layer, data, steps):
        config, width = self.config, self.config.operand_width
        beats = self._words(data, config.bus_weights, config.stream_bits.weights)
        counts = golden.beat_counts(config, layer, steps)
        assert len(beats) == counts["header"] + counts["weights"]
        header, body = beats[:counts["header"]], beats[counts["header"]:].reshape(-1)
        values = sum(header[:, n] << (n * width) for n in range(config.bus_weights))
        values = values & ((1 << config.acc_width) - 1)
        values -= (values >> (config.acc_width - 1)) << config.acc_width
        layout = config.header_layout
        values = values.reshape(config.hidden_size, layout.fields)
        bias = np.stack([values[:, layout.index("bias", g)] for g in range(4)], axis=1)
        shape = config.layer(layer)
        index = np.arange(config.rows * shape.columns).reshape(config.rows, shape.columns)
        order = golden.weight_beats(config, layer, golden.LayerParams(
            matrix=index, bias=np.zeros(config.rows, dtype=np.int64)), steps)
        order = order[counts["header"]:].reshape(-1)
        matrix = np.full(index.size, -1 << 40, dtype=np.int64)
        signed = body - ((body >> (width - 1)) << width)
        for position, word in zip(order, signed):   # a block sent twice carries the same words
            assert matrix[position] in (-1 << 40, word)
            matrix[position] = word
        assert (matrix != -1 << 40).all()
        return golden.LayerParams(matrix=matrix.reshape(index.shape), bias=bias.reshape(-1))

    def _xs(self, layer, data, steps):
        config = self.config
        words = self._words(data, config.columns_per_cycle, config.stream_bits.inputs)
        width = config.operand_width
        words = words - ((words >> (width - 1)) << width)
        inputs = config.layer(layer).input_size
        order = golden.input_beats(config, layer, np.arange(steps * inputs).reshape(steps,
                                                                                    inputs))
        xs = np.zeros(steps * inputs, dtype=np.int64)
        xs[order.reshape(-1)] = words.reshape(-1)
        return xs.reshape(steps, inputs)

    def _start(self):
        config, regs = self.config, self.registers
        steps, layer = regs["steps"], regs["layer"]
        keep = regs["flags"] >> self.bits["flags"]["keep_state"] & 1
        batch_norm = bool(regs["flags"] >> self.bits["flags"]["batch_norm"] & 1)
        params = self._params(layer, self.frames["s_weights"].pop(0), steps)
        xs = self._xs(layer, self.frames["s_inputs"].pop(0), steps)
        h0, c0 = self.state if keep else (None, None)
        hs, c = golden.run_layer(config, layer, params, xs, h0, c0, batch_norm=batch_norm)
        self.state = hs[-1], c
        size = config.stream_bits.outputs // 8
        for h in hs:
            beats = golden.output_beats(config, h[None, :])
            self.frames["m_axis"].append(b"".join(
                golden.pack_beat(row, config.operand_width).to_bytes(size, "little")
                for row in beats))
        regs["status"] = 1 << self.bits["status"]["done"]


@pytest.mark.parametrize("name", CONFIGS)
def test_weights_bin_is_the_golden_weight_stream_of_each_layer(model_path, tmp_path, name):
    engine, binding = bind(model_path, CONFIGS[name])
    config = binding.config
    write_host_files(engine, binding, tmp_path / "out")
    image = (tmp_path / "out/weights.bin").read_bytes()
    plan = json.loads((tmp_path / "out/runs.json").read_text())
    assert config.operand_width == 16 and config.bus_weights * 16 == \
        config.stream_bits.weights                  # the testbench's fast path applies
    expected = [golden.weight_beats(config, layer, params, SEQ_LEN).astype("<u2").tobytes()
                for layer, params in enumerate(layer_params(binding))]
    assert image == b"".join(expected)
    offset = 0
    for run, stream in zip(plan["runs"], expected):
        assert run["weights"] == {"offset": offset, "length": len(stream)}
        offset += len(stream)


@pytest.mark.parametrize("name", CONFIGS)
def test_runs_json_counts_are_the_golden_beat_counts(model_path, tmp_path, name):
    engine, binding = bind(model_path, CONFIGS[name])
    config = binding.config
    write_host_files(engine, binding, tmp_path / "out")
    plan = json.loads((tmp_path / "out/runs.json").read_text())
    assert [run["layer"] for run in plan["runs"]] == [0, 1]
    for layer, run in enumerate(plan["runs"]):
        counts = golden.beat_counts(config, layer, SEQ_LEN)
        assert (run["steps"], run["header_beats"], run["weight_beats"], run["input_beats"],
                run["output_beats"]) == (SEQ_LEN, counts["header"],
                                         counts["header"] + counts["weights"],
                                         counts["inputs"], counts["outputs"])
        assert run["weights"]["length"] == run["weight_beats"] * config.stream_bits.weights // 8
        assert run["flags"] == {"keep_state": 0, "batch_norm": 0}
    assert {k: (v["words"], v["beat_bytes"]) for k, v in plan["streams"].items()} == {
        "weights": (config.bus_weights, config.stream_bits.weights // 8),
        "inputs": (config.columns_per_cycle, config.stream_bits.inputs // 8),
        "outputs": (config.post_units, config.stream_bits.outputs // 8)}
    assert plan["registers"] == config.registers.as_dict()


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("repeats", [1, 2])
def test_host_py_on_the_golden_engine_returns_the_golden_h(model_path, tmp_path, name,
                                                           repeats):
    """host.py run on an engine emulated by the golden model returns the golden model's
    dequantized h of the last layer; with a sequence of two runs per layer, the second
    continues the first's state (keep_state)."""
    engine, binding = bind(model_path, CONFIGS[name])
    config = binding.config
    write_host_files(engine, binding, tmp_path / "out")
    host = load_host(tmp_path / "out")
    emulator = GoldenEngine(config)
    runner = host.Host(tmp_path / "out", write_register=emulator.write_register,
                       read_register=emulator.read_register, send=emulator.send,
                       receive=emulator.receive)
    xs = np.random.default_rng(2).uniform(-1.2, 1.2, size=(repeats * SEQ_LEN, 4))
    xs[0, 0] = 3.0                          # saturates: the host clamps as nnrtl does
    got = runner.run(xs.tolist())

    codes = np.clip(np.rint(xs * 2.0 ** config.act_frac), -2 ** 15, 2 ** 15 - 1)
    expected = codes.astype(np.int64)
    for layer, params in enumerate(layer_params(binding)):
        expected, _ = golden.run_layer(config, layer, params, expected, batch_norm=False)
    assert np.array_equal(np.array(got), expected * 2.0 ** -config.act_frac)
    assert np.abs(expected).max() > 0

    writes = [entry[1:] for entry in emulator.log if entry[0] == "write"]
    sends = [entry[1] for entry in emulator.log if entry[0] == "send"]
    flags = [value for name, value in writes if name == "flags"]
    keep = 1 << emulator.bits["flags"]["keep_state"]
    assert flags == [0, *[keep] * (repeats - 1)] * 2
    assert [name for name, _ in writes][:4] == ["steps", "layer", "flags", "control"]
    assert sends == ["s_weights", "s_inputs"] * 2 * repeats
    assert not any(emulator.frames.values())

    assert runner.run(codes.astype(int).tolist(), codes=True) == expected.tolist()


def test_host_py_runs_a_stack_of_different_hidden_sizes(tmp_path):
    """A stack tapering 8 -> 5 units on 5 inputs (two ``nn.LSTM`` modules): the engine
    (emulated) runs 8 inputs (whole blocks) and layer 1 padded to 8 units; runs.json gives
    each layer's model sizes beside the padded ones, and host.py pads x, cuts h and returns
    the golden model's 5 units."""
    torch.manual_seed(7)
    modules = [torch.nn.LSTM(5, 8), torch.nn.LSTM(8, 5)]
    state = {f"{key[:-1]}{index}": value for index, module in enumerate(modules)
             for key, value in module.state_dict().items()}
    torch.save(state, tmp_path / "taper.pt")
    engine, binding = bind(tmp_path / "taper.pt", CONFIGS["k1-blocks4"])
    config = binding.config
    assert (config.hidden_size, config.hidden_sizes) == (8, (8, 5)) and config.is_padded
    write_host_files(engine, binding, tmp_path / "out")
    plan = json.loads((tmp_path / "out/runs.json").read_text())
    assert (plan["hidden_size"], plan["hidden_sizes"], plan["padded_hidden_size"]) == \
        (5, [8, 5], 8)
    assert [(run["model_input_size"], run["input_size"], run["hidden_size"])
            for run in plan["runs"]] == [(5, 8, 8), (8, 8, 5)]
    emulator = GoldenEngine(config.padded)      # what the RTL runs
    runner = load_host(tmp_path / "out").Host(
        tmp_path / "out", write_register=emulator.write_register,
        read_register=emulator.read_register, send=emulator.send, receive=emulator.receive)
    codes = np.random.default_rng(3).integers(-4000, 4000, size=(SEQ_LEN, 5))
    expected = codes
    for layer, params in enumerate(layer_params(binding)):
        expected, _ = golden.run_layer(config, layer, params, expected, batch_norm=False)
    assert expected.shape == (SEQ_LEN, 5) and np.abs(expected).max() > 0
    assert runner.run(codes.tolist(), codes=True) == expected.tolist()
    assert not any(emulator.frames.values())


def test_host_py_runs_a_whole_model_around_the_engine(tmp_path):
    """A ``state_dict`` of Embedding(11 -> 4), LSTM(4, 8, 2 layers), Linear(8 -> 3): the
    generated files hold the embedding and the head; ``Host.model`` on token ids (engine
    emulated) equals the golden h of the embedding's rows through the head, computed here
    with numpy; a token id outside the vocabulary is refused."""
    torch.manual_seed(9)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(11, 4)
            self.lstm = torch.nn.LSTM(4, 8, num_layers=2)
            self.fc = torch.nn.Linear(8, 3)

    model = Model()
    torch.save(model.state_dict(), tmp_path / "whole.pt")
    engine, binding = bind(tmp_path / "whole.pt", CONFIGS["k1-blocks4"])
    config = binding.config
    directory = tmp_path / "out"
    directory.mkdir()
    section = engine.model_files(config, binding, directory)
    assert set(section["files"]) == HOST_FILES | {"host_layers.json", "host_layers.bin"}
    assert section["host_layers"] == ["Embedding(11 -> 4) (embed.weight)",
                                      "Linear(8 -> 3) (fc.weight, fc.bias)"]
    runner = emulated_host(directory, config)
    tokens = [3, 0, 10, 7, 7, 1]
    got = np.array(runner.model(tokens))

    rows = model.embed.weight.detach().double().numpy()[tokens]
    codes = np.clip(np.rint(rows * 2.0 ** config.act_frac), -2 ** 15, 2 ** 15 - 1)
    expected = codes.astype(np.int64)
    for layer, params in enumerate(layer_params(binding)):
        expected, _ = golden.run_layer(config, layer, params, expected, batch_norm=False)
    weight = model.fc.weight.detach().double().numpy()
    bias = model.fc.bias.detach().double().numpy()
    want = expected * 2.0 ** -config.act_frac @ weight.T + bias
    assert got.shape == (SEQ_LEN, 3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"token ids must be integers in 0\.\.10"):
        runner.model([11] * SEQ_LEN)


def test_host_py_runs_a_reverse_stack_on_the_reversed_sequence(tmp_path):
    """Two LSTM layers running in reverse (ONNX): ``Host.model`` sends the steps last first
    and reverses the engine's h back: the golden h of the reversed codes, reversed."""
    from onnx_files import reverse_lstm_stack

    torch.manual_seed(6)
    lstm = torch.nn.LSTM(4, 8, num_layers=2).double()
    reverse_lstm_stack(lstm, tmp_path / "reverse.onnx")
    engine, binding = bind(tmp_path / "reverse.onnx", CONFIGS["k1-blocks4"])
    config = binding.config
    directory = tmp_path / "out"
    directory.mkdir()
    section = engine.model_files(config, binding, directory)
    assert section["reverse"] is True and section["host_layers"] == []
    runner = emulated_host(directory, config)
    xs = np.random.default_rng(4).uniform(-1, 1, size=(SEQ_LEN, 4))
    got = np.array(runner.model(xs.tolist()))
    codes = np.clip(np.rint(xs[::-1] * 2.0 ** config.act_frac), -2 ** 15, 2 ** 15 - 1)
    expected = codes.astype(np.int64)
    for layer, params in enumerate(layer_params(binding)):
        expected, _ = golden.run_layer(config, layer, params, expected, batch_norm=False)
    assert np.array_equal(got, expected[::-1] * 2.0 ** -config.act_frac)
    assert not np.array_equal(got, np.array(runner.run(xs.tolist())))


def test_host_py_refuses_a_sequence_not_a_multiple_of_seq_len(model_path, tmp_path):
    engine, binding = bind(model_path, CONFIGS["k1-blocks4"])
    write_host_files(engine, binding, tmp_path / "out")
    emulator = GoldenEngine(binding.config)
    runner = load_host(tmp_path / "out").Host(
        tmp_path / "out", write_register=emulator.write_register,
        read_register=emulator.read_register, send=emulator.send, receive=emulator.receive)
    with pytest.raises(ValueError, match=r"xs must have a multiple of seq_len 6 steps, not 7"):
        runner.run([[0.0] * 4] * 7)
    assert emulator.log == []


def test_generate_with_a_model_lists_the_host_files_and_the_model(model_path, tmp_path):
    engine, binding = bind(model_path, CONFIGS["k1-blocks4"])
    manifest = generate(engine, binding.config, ZC706, tmp_path / "out", binding=binding)
    out = tmp_path / "out"
    on_disk = json.loads((out / "manifest.json").read_text())
    assert HOST_FILES <= set(on_disk["files"])
    for name in HOST_FILES:
        assert on_disk["files"][name] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    template = importlib.util.find_spec("nnrtl.gen.sbe.host_template").origin
    assert (out / "host.py").read_bytes() == Path(template).read_bytes()
    model = on_disk["model"]
    assert model["path"] == str(model_path) and model["format"] == "state_dict"
    assert model["sha256"] == hashlib.sha256(model_path.read_bytes()).hexdigest()
    assert model["layers"] == [{"kind": "LSTM", "input_size": 4, "hidden_size": 8},
                               {"kind": "LSTM", "input_size": 8, "hidden_size": 8}]
    quantization = model["quantization"]
    assert (quantization["weight_frac"], quantization["act_frac"], quantization["cell_frac"]) \
        == (binding.config.weight_frac, binding.config.act_frac, binding.config.cell_frac)
    assert quantization["saturated_codes"] == binding.model.saturated
    assert set(quantization["ranges"]) == {"x", "h", "z", "c", "w"}
    assert model["calibration"] == {"data": "synthetic", "distribution": "uniform in [-1, 1]",
                                    "sequences": 8, "steps": SEQ_LEN, "seed": 0}
    assert manifest["model"] == model and model["files"] == ["weights.bin", "runs.json",
                                                             "host.py"]
    plan = json.loads((out / "runs.json").read_text())
    assert plan["registers"] == on_disk["registers"]


def test_generate_without_a_model_writes_no_host_files(model_path, tmp_path):
    engine, binding = bind(model_path, CONFIGS["k1-blocks4"])
    manifest = generate(engine, binding.config, ZC706, tmp_path / "out")
    assert "model" not in manifest
    assert not HOST_FILES & {p.name for p in (tmp_path / "out").iterdir()}


def test_a_failure_writing_the_host_files_leaves_no_directory(model_path, tmp_path,
                                                               monkeypatch):
    from nnrtl.gen.sbe import hostfiles

    def fail(*args):
        raise RuntimeError("disk full")

    engine, binding = bind(model_path, CONFIGS["k1-blocks4"])
    monkeypatch.setattr(hostfiles, "runs_plan", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        generate(engine, binding.config, ZC706, tmp_path / "out", binding=binding)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_host_py_runs_the_rtl_bit_exact(model_path, tmp_path):
    """host.py's sequence on the real RTL under Verilator (:mod:`sbe_host_bench`, random
    gaps and backpressure): the h codes it returns are the golden model's."""
    from nnrtl.hw.sbe import SbeEngine
    from nnrtl.sim.runner import simulate

    engine, binding = bind(model_path, CONFIGS["k1-blocks4"])
    config = binding.config
    generate(engine, config, ZC706, tmp_path / "out", binding=binding)
    xs = np.random.default_rng(4).uniform(-1, 1, size=(SEQ_LEN, 4))
    codes = np.rint(xs * 2.0 ** config.act_frac).astype(np.int64)
    expected = codes
    for layer, params in enumerate(layer_params(binding)):
        expected, _ = golden.run_layer(config, layer, params, expected, batch_norm=False)
    result = simulate(SbeEngine(config), test_module="sbe_host_bench", name="nnrtl_sbe",
                      seed=3, params={"config": dataclasses.asdict(config),
                                      "directory": str(tmp_path / "out"),
                                      "xs": codes.tolist(), "source_pauses": "random",
                                      "sink_pauses": "random"})
    assert result.get("failure") is None, result
    assert result["hs"] == expected.tolist()


def test_host_py_runs_a_head_with_activations(tmp_path):
    """ONNX LSTM(4, 8) -> Linear -> Tanh -> Linear -> Softmax: the generated host files hold
    the head's layers and ``Host.model`` (engine emulated) gives the golden h through them,
    computed here with numpy: probabilities summing to 1."""
    from onnx_files import lstm_with_head

    torch.manual_seed(5)
    lstm = torch.nn.LSTM(4, 8).double()
    fc1, fc2 = torch.nn.Linear(8, 5).double(), torch.nn.Linear(5, 3).double()
    lstm_with_head(lstm, tmp_path / "head.onnx", [fc1, "Tanh", fc2, "Softmax"])
    engine, binding = bind(tmp_path / "head.onnx", CONFIGS["k1-blocks4"])
    config = binding.config
    directory = tmp_path / "out"
    directory.mkdir()
    section = engine.model_files(config, binding, directory)
    assert [text.split(" (")[0] for text in section["host_layers"]] == [
        "Linear(8 -> 5)", "Tanh", "Linear(5 -> 3)", "Softmax"]
    runner = emulated_host(directory, config)
    xs = np.random.default_rng(3).uniform(-1, 1, size=(SEQ_LEN, 4))
    got = np.array(runner.model(xs.tolist()))
    codes = np.clip(np.rint(xs * 2.0 ** config.act_frac), -2 ** 15, 2 ** 15 - 1)
    expected = codes.astype(np.int64)
    for layer, params in enumerate(layer_params(binding)):
        expected, _ = golden.run_layer(config, layer, params, expected, batch_norm=False)
    hidden = np.tanh(expected * 2.0 ** -config.act_frac @ fc1.weight.detach().numpy().T
                     + fc1.bias.detach().numpy())
    logits = hidden @ fc2.weight.detach().numpy().T + fc2.bias.detach().numpy()
    want = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-12)

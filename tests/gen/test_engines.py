"""The engine hooks: a toy engine registered at run time goes through ``nnrtl generate``,
``sim``, ``explore`` and ``train`` without the command line knowing it; the command line,
bench and emitters name no engine."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from nnrtl.gen import engines as registry
from nnrtl.gen.cli import main
from nnrtl.gen.engines import Engine, ModelBinding, Preset
from nnrtl.hw.demo import DemoConfig, DemoEngine


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    lanes: int = 2
    wrong: bool = False

    def __post_init__(self):
        if not isinstance(self.lanes, int) or not 1 <= self.lanes <= 8:
            raise TypeError(f"lanes must be an integer from 1 to 8, not {self.lanes!r}")


class ToyExploration:
    def __init__(self, request):
        self.request = request

    def table(self):
        return f"toy exploration on {self.request.board.name}, top {self.request.top}"

    def as_json(self):
        return {"board": self.request.board.name, "top": self.request.top,
                "params": list(self.request.params)}


CALLS = []


def _simulate(request):
    CALLS.append(request)
    cycles = 10 * (request.steps or 3)
    return {"bit_exact": not request.config.wrong, "cycles": cycles, "model_cycles": cycles,
            "useful_macs": request.config.lanes * cycles, "utilization": 1.0,
            "stall_cycles": 0}


def _load_model(request):
    from nnrtl.gen.models import load_network
    network = load_network(request.path)
    return ModelBinding(ToyConfig(lanes=network.layers[0].hidden_size), network)


def _train(request, network):
    from nnrtl.gen.train import HostTrainer
    CALLS.append(request)
    return HostTrainer(ToyConfig())


TOY = Engine(
    name="toy", summary="a toy engine for the platform's tests", config_class=ToyConfig,
    top=lambda config: DemoEngine(DemoConfig(lanes=config.lanes)),
    resources=lambda config, family: {"dsp": config.lanes},
    predict=lambda config, workload: {"cycles": 10 * workload["steps"]},
    simulate=_simulate,
    presets={"four": Preset(ToyConfig(lanes=4), "vu9p", "four lanes, for the test")},
    load_model=_load_model,
    explore=lambda request: ToyExploration(request),
    train=_train,
    options={"train": lambda group: group.add_argument("--fpgas", type=int, metavar="N")},
)


@pytest.fixture
def toy():
    registry.register(TOY)
    CALLS.clear()
    yield TOY
    registry.unregister("toy")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_engines_json_lists_hooks(toy, capsys):
    code, out, _ = run(capsys, "engines", "--json")
    assert code == 0
    by_name = {e["name"]: e for e in json.loads(out)}
    assert {"demo", "sbe", "toy"} <= set(by_name)
    assert by_name["toy"]["hooks"] == ["top", "resources", "predict", "simulate",
                                       "load_model", "explore", "train"]
    assert by_name["toy"]["presets"] == {"four": {"board": "vu9p",
                                                  "source": "four lanes, for the test"}}
    assert by_name["toy"]["parameters"][0] == {"name": "lanes", "type": "int", "default": 2}
    assert "train" not in by_name["demo"]["hooks"] and "bench" in by_name["demo"]["hooks"]


def test_generate_through_hooks(toy, tmp_path, capsys):
    output = tmp_path / "toy"
    code, out, _ = run(capsys, "generate", "toy", "--board", "zc706", "--preset", "four",
                       "--param", "lanes=3", "-o", str(output))
    assert code == 0, out
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["engine"] == "toy" and manifest["parameters"] == {"lanes": 3,
                                                                     "wrong": False}
    assert manifest["resources_needed"] == {"dsp": 3}
    assert "module nnrtl_toy(" in (output / "nnrtl_toy.v").read_text()


def test_sim_through_hooks_and_exit_codes(toy, capsys):
    code, out, _ = run(capsys, "sim", "toy", "--board", "vc709", "--steps", "5", "--seed", "7",
                       "--backpressure", "bursty")
    assert code == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert result["engine"] == "toy" and result["cycles"] == 50 and result["bit_exact"]
    request = CALLS[-1]
    assert (request.board.name, request.seed, request.backpressure, request.steps) == (
        "vc709", 7, "bursty", 5)
    code, out, _ = run(capsys, "sim", "toy", "--board", "vc709", "--param", "wrong=true")
    assert code == 1 and json.loads(out)["bit_exact"] is False


def test_clock_hook_sets_the_throughput_clock(toy, tmp_path, capsys):
    """Without a ``clock`` hook the figures are at the board's clock (VC709: its 200 MHz
    oscillator); with one, at the engine's, in ``nnrtl sim``'s JSON and the manifest."""
    code, out, _ = run(capsys, "sim", "toy", "--board", "vc709", "--steps", "5")
    result = json.loads(out.strip().splitlines()[-1])
    # 2 operations x 2 lanes a cycle at 200 MHz.
    assert (result["f_clk_mhz"], result["gops"]) == (200.0, pytest.approx(0.8))
    registry.unregister("toy")
    registry.register(dataclasses.replace(TOY, clock=lambda config, board: 333e6))
    code, out, _ = run(capsys, "sim", "toy", "--board", "vc709", "--steps", "5")
    result = json.loads(out.strip().splitlines()[-1])
    assert (result["f_clk_mhz"], result["gops"]) == (333.0, pytest.approx(2 * 2 * 0.333))
    code, out, _ = run(capsys, "generate", "toy", "--board", "vc709", "-o",
                       str(tmp_path / "toy"))
    manifest = json.loads((tmp_path / "toy" / "manifest.json").read_text())
    assert (manifest["engine_clock_hz"], manifest["board"]["clock_hz"]) == (333e6, 200e6)


def test_explore_through_hooks(toy, capsys):
    code, out, _ = run(capsys, "explore", "toy", "--board", "vu9p", "--top", "3")
    assert (code, out) == (0, "toy exploration on vu9p, top 3\n")
    code, out, _ = run(capsys, "explore", "toy", "--board", "vu9p", "--param", "x=1", "--json")
    assert json.loads(out) == {"board": "vu9p", "top": 10, "params": ["x=1"]}


def test_a_missing_hook_is_a_usage_error(capsys):
    code, _, err = run(capsys, "explore", "demo", "--board", "vu9p")
    assert code == 2
    assert re.fullmatch(r"nnrtl: error: demo has no design-space exploration; engines with "
                        r"one: farnn, sbe\n", err)
    code, _, err = run(capsys, "sim", "demo", "--board", "vu9p", "--model", "m.pt",
                       "--inputs", "x.npy", "--outputs", "y.npy")
    assert code == 2
    assert re.fullmatch(r"nnrtl: error: demo has no --model \(model import\); engines with "
                        r"one: sbe\n", err)


def test_train_through_hooks(toy, tmp_path, capsys):
    """A real PyTorch step through the interface: the toy engine's trainer is the host's
    float32 autograd; the platform's SGD update agrees with plain PyTorch float64."""
    import torch
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4)
    torch.save(lstm.state_dict(), tmp_path / "lstm.pt")
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (5, 3)))
    np.save(tmp_path / "y.npy", rng.uniform(-0.5, 0.5, (5, 4)))
    code, out, _ = run(capsys, "train", "toy", "--board", "vu9p", "--model",
                       str(tmp_path / "lstm.pt"), "--inputs", str(tmp_path / "x.npy"),
                       "--targets", str(tmp_path / "y.npy"), "--lr", "0.1", "--steps", "2",
                       "-o", str(tmp_path / "run"), "--fpgas", "3")
    assert code == 0, out
    assert CALLS[-1].options == {"fpgas": 3}
    trained = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert list(trained) == list(lstm.state_dict())
    # Two steps of torch.optim.SGD on nn.LSTM itself, float64.
    reference = torch.nn.LSTM(3, 4, dtype=torch.float64)
    reference.load_state_dict({k: v.double() for k, v in lstm.state_dict().items()})
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    x = torch.tensor(np.load(tmp_path / "x.npy"))[:, None, :]
    y = torch.tensor(np.load(tmp_path / "y.npy"))[:, None, :]
    for _ in range(2):
        optimizer.zero_grad()
        torch.nn.MSELoss()(reference(x)[0], y).backward()
        optimizer.step()
    for name, value in reference.state_dict().items():
        assert torch.allclose(trained[name].double(), value, atol=1e-5), name
        assert not torch.equal(trained[name], lstm.state_dict()[name]), name
    log = json.loads((tmp_path / "run" / "train.json").read_text())
    assert [s["step"] for s in log["steps"]] == [0, 1] and log["within_bound"]
    assert log["steps"][1]["loss"] < log["steps"][0]["loss"]
    assert all(s["update_max_abs_diff"] <= s["update_bound"] for s in log["steps"])
    assert set(p.name for p in (tmp_path / "run").iterdir()) == {"model.pt", "train.json",
                                                                 "manifest.json"}


def test_cli_bench_and_emit_name_no_engine():
    """Engines plug in through their hooks: no registered engine's name is a string literal
    in the command line, the bench driver or the emitters."""
    gen = Path(registry.__file__).parent
    names = set(registry.engines())
    for module in ("cli.py", "commands.py", "bench.py", "emit.py", "train.py", "output.py",
                   "report.py"):
        text = (gen / module).read_text()
        for name in names:
            assert not re.search(rf"[\"']{name}[\"']", text), f"{module} names {name}"


def test_every_engines_defaults_generate_on_a_board():
    """With no --param, generate completes the defaults under the board's budget: every
    engine has a board, and what the papers' defaults cannot fit is changed (fewer
    channels, more of the arithmetic on DSP slices)."""
    from nnrtl.gen.engines import default_boards, engines
    found = {name: default_boards(engine) for name, engine in engines().items()}
    assert all(found.values()), {name: boards for name, boards in found.items() if not boards}
    assert found["sbe"]["zc706"] == {} and found["demo"]["zc706"] == {}
    assert found["omni"]["vcu128"] == {"channels": 32}           # 40 with 14 DMAs need 82.3%
    # FARNN's defaults are the paper's 1,024 PEs at 4K words: they fit at DSP usage max,
    # which the completion chooses
    assert found["farnn"]["vu9p"] == {"dsp_usage": "max"}


def test_verilog_is_converted_once_per_configuration_and_checked_on_request(monkeypatch):
    """``Engine.verilog`` converts a configuration once in a process; a request with the
    shared-unit check converts again unless the kept text was checked."""
    from nnrtl.hw import hierarchy
    calls = []
    convert = hierarchy.convert

    def counting(component, name):
        calls.append(registry.os.environ.get("NNRTL_CHECK_SHARED"))
        return convert(component, name)

    monkeypatch.setattr(hierarchy, "convert", counting)
    monkeypatch.delenv("NNRTL_CHECK_SHARED", raising=False)
    registry._VERILOG.clear()
    engine = registry.get_engine("demo")
    config = DemoConfig(lanes=2)
    text = engine.verilog(config)
    assert "module nnrtl_demo" in text and engine.verilog(config) is text
    assert engine.verilog(config, check_shared=True) == text
    assert engine.verilog(config, check_shared=True) == text
    assert calls == [None, "1"]
    assert "NNRTL_CHECK_SHARED" not in registry.os.environ

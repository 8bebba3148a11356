"""The SBE engine end to end under Verilator: bit-exact against the golden model with
random stream gaps and backpressure, and cycle counts equal to the performance model
(:func:`nnrtl.gen.sbe.perf.run_cycles`, within 5%, mostly exactly) when nothing stalls the
streams.

``make test`` builds three engines chosen to cover the paper's three cases, row passes
(``pes < 4 * hidden_size``), several columns per cycle (``pes > 4 * hidden_size``), batch
1, a batch that does not divide the sequence, non-power-of-two sizes, batch norm, two
layers, PEs multiplying in LUTs and a state carried from run to run. ``make test-slow`` adds randomized
configurations and the paper's full-size designs.
"""

import random

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import get_engine
from nnrtl.hw.sbe import PRESETS, SBEConfig

from cli_result import sim_json_line

ENGINE = get_engine("sbe")

#: Case 3 with two row passes, batch 1, non-power-of-two sizes.
CASE3_PASSES = dict(input_size=20, hidden_size=6, pes=12, batch=1, blocks=13, seq_len=4,
                    bus_weights=4, post_units=1)
#: Case 2, two columns per cycle, batch norm, two layers, batch 3 of 7 steps; 12 PEs
#: (a whole group of 8 and half of the next) multiply in LUTs.
CASE2_WIDE = dict(input_size=30, hidden_size=6, pes=48, batch=3, blocks=3, seq_len=7,
                  bus_weights=8, post_units=2, layers=2, batch_norm=True, lut_multipliers=12)
#: Case 1 with the weights streamed per batch, x columns in the hidden block.
CASE1 = dict(input_size=44, hidden_size=12, pes=48, batch=4, blocks=4, seq_len=9,
             bus_weights=8, post_units=4)


def random_config(rng):
    """A random valid configuration of a small engine."""
    while True:
        hidden = rng.randint(2, 12)
        rows = 4 * hidden
        pes = rng.choice([d for d in range(4, rows + 1, 4) if rows % d == 0] + [2 * rows])
        k = max(1, pes // rows)
        input_size = k * rng.randint(1, 24 // k)
        columns = input_size + hidden
        blocks = rng.choice([b for b in range(1, columns + 1) if columns % b == 0])
        seq_len = rng.randint(2, 8)
        try:
            return SBEConfig(
                input_size=input_size, hidden_size=hidden, pes=pes, blocks=blocks,
                batch=rng.randint(1, seq_len), seq_len=seq_len,
                bus_weights=rng.choice([2, 4, 8, 16]), post_units=rng.choice([1, 2, 4]),
                layers=rng.choice([1, 1, 2]), batch_norm=rng.random() < 0.3,
                lut_multipliers=rng.choice([0, rng.randint(1, pes)]))
        except ValueError:
            continue


def check(config, backpressure, seed):
    result = ENGINE.simulate(config, board=get_board("zc706"), seed=seed,
                             backpressure=backpressure)
    assert result["bit_exact"] is True
    assert result["useful_macs"] == result["expected_macs"]
    if backpressure == "none":
        # The bound; most configurations match the model exactly (the runs of a
        # later layer in case 2 with two columns per cycle come out ~2% under it).
        assert abs(result["cycles"] - result["model_cycles"]) <= 0.05 * result["model_cycles"]
    else:
        assert result["cycles"] >= result["model_cycles"]
    assert 0 < result["utilization"] <= 1
    return result


@pytest.mark.parametrize("params", [CASE3_PASSES, CASE2_WIDE, CASE1],
                         ids=["case3-passes", "case2-wide-bn-2layers", "case1"])
@pytest.mark.parametrize("backpressure", ["none", "random"])
def test_sbe_engine_bit_exact(params, backpressure):
    config = SBEConfig(**params)
    check(config, backpressure, seed=len(backpressure))


def test_cases_covered():
    cases = {case for params in (CASE3_PASSES, CASE2_WIDE, CASE1)
             for case in SBEConfig(**params).cases}
    assert cases == {1, 2, 3}
    assert SBEConfig(**CASE3_PASSES).passes == 2
    assert SBEConfig(**CASE2_WIDE).columns_per_cycle == 2
    assert not SBEConfig(**CASE1).weights_resident


def test_sim_command_prints_one_json_line(capsys):
    params = [f"{key}={value}" for key, value in CASE3_PASSES.items()]
    code = main(["sim", "sbe", "--board", "vc709", "--seed", "4", "--backpressure", "none",
                 *(arg for param in params for arg in ("--param", param))])
    result = sim_json_line(capsys, code)
    assert result["cycles"] == result["model_cycles"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_sbe_random_configurations(seed):
    config = random_config(random.Random(seed))
    check(config, "random", seed)
    check(config, "none", seed)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_full_size_preset_one_batch(name):
    """The paper's designs, one whole batch (``batch`` steps), bit-exact."""
    config = PRESETS[name].config
    result = ENGINE.simulate(config, board=get_board(PRESETS[name].board), seed=1,
                             backpressure="none", steps=config.batch, split=0)
    assert result["bit_exact"] is True
    assert abs(result["cycles"] - result["model_cycles"]) <= 0.05 * result["model_cycles"]


def test_sim_command_runs_a_pytorch_model(tmp_path, capsys):
    """``nnrtl sim sbe --model --inputs --outputs``: a user's nn.LSTM through the RTL."""
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(12, 8, num_layers=2).double()
    torch.save(lstm.state_dict(), tmp_path / "lstm.pt")
    xs = np.random.default_rng(0).uniform(-1, 1, (10, 12))
    np.save(tmp_path / "x.npy", xs)
    code = main(["sim", "sbe", "--board", "zc706", "--model", str(tmp_path / "lstm.pt"),
                 "--inputs", str(tmp_path / "x.npy"), "--outputs", str(tmp_path / "y.npy"),
                 "--param", "pes=32", "--param", "blocks=4", "--param", "batch=4",
                 "--param", "bus_weights=8", "--backpressure", "random", "--seed", "2"])
    sim_json_line(capsys, code)
    hs = np.load(tmp_path / "y.npy")
    expected, _ = lstm(torch.tensor(xs))
    assert hs.shape == (10, 8)
    # The golden model's bound against PyTorch (tests/golden/test_sbe_golden.py).
    assert np.max(np.abs(hs - expected.detach().numpy())) < 6e-4


@pytest.mark.parametrize("argv, message", [
    (["--inputs", "x.npy", "--outputs", "y.npy"], "go together"),
    (["--model", "lstm.pt"], "go together"),
    (["--model", "lstm.pt", "--inputs", "x.npy"], "go together"),
    (["--model", "lstm.pt", "--inputs", "bad.npy", "--outputs", "y.npy"],
     "must be an array of shape (seq_len, 12)"),
    (["--model", "lstm.pt", "--inputs", "x.npy", "--outputs", "y.npy", "--param",
      "hidden_size=4"], "hidden_size comes from the model"),
])
def test_sim_model_errors(tmp_path, monkeypatch, capsys, argv, message):
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    torch.save(torch.nn.LSTM(12, 8).state_dict(), tmp_path / "lstm.pt")
    np.save(tmp_path / "x.npy", np.zeros((4, 12)))
    np.save(tmp_path / "bad.npy", np.zeros((4, 11)))
    monkeypatch.chdir(tmp_path)
    assert main(["sim", "sbe", "--board", "zc706", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "y.npy").exists()

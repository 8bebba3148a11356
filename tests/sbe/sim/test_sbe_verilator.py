"""The SBE engine end to end under Verilator: bit-exact against the golden model under
every backpressure pattern, cycle counts equal to the performance model
(:func:`nnrtl.gen.sbe.perf.run_cycles`) run by run when nothing stalls the streams, one
exception named below; full-range weights that wrap the accumulators and saturate the
batch norm; the bench's own failures shown by fault injection.

The bench (:mod:`nnrtl.sim.tb.sbe.engine`) itself fails the simulation, so that ``simulate``
raises, if a wait overruns its cycle budget, a source does not drain after its run, the
``weight_words`` counter differs from the golden model's beat counts, ``useful_macs``
from ``steps x macs_per_step``, or the engine sends more than expected.

``make test`` builds three engines chosen to cover the paper's three cases, row passes
(``pes < 4 * hidden_size``), several columns per cycle (``pes > 4 * hidden_size``), batch
1, a batch that does not divide the sequence, non-power-of-two sizes, batch norm, two
layers, PEs multiplying in LUTs and a state carried from run to run. ``make test-slow``
adds randomized configurations and the paper's full-size designs.
"""

import json
import random
import re

import numpy as np
import pytest

from nnrtl.boards import get_board
from nnrtl.gen.cli import main
from nnrtl.gen.engines import SimRequest, get_engine
from nnrtl.hw.sbe import PRESETS, SbeConfig
from nnrtl.sim.golden import sbe as golden
from nnrtl.sim.patterns import PATTERNS
from nnrtl.sim.runner import SimulationError

from cli_result import sim_json_line

ENGINE = get_engine("sbe")

pytestmark = pytest.mark.timeout(900)    # a Verilator build (minutes on a busy machine)

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
#: Sizes the RTL's rules refuse (issue 11): 39 inputs, 19 hidden units on the default
#: hardware (64 PEs, 4 blocks, 8 weights a beat, 4 post-processing units), run padded to
#: 40 and 32 (two row passes, case 2).
ODD = dict(input_size=39, hidden_size=19, seq_len=6, batch=3)
CONFIGS = {"case3-passes": CASE3_PASSES, "case2-wide-bn-2layers": CASE2_WIDE, "case1": CASE1,
           "odd-39x19": ODD}


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
            return SbeConfig(
                input_size=input_size, hidden_size=hidden, pes=pes, blocks=blocks,
                batch=rng.randint(1, seq_len), seq_len=seq_len,
                bus_weights=rng.choice([2, 4, 8, 16]), post_units=rng.choice([1, 2, 4]),
                layers=rng.choice([1, 1, 2]), batch_norm=rng.random() < 0.3,
                lut_multipliers=rng.choice([0, rng.randint(1, pes)]))
        except ValueError:
            continue


def check_cycles(result):
    """Gapless streams: every run's cycles equal the model's -- exactly, except where a
    batch's x vectors take longer to stream than the weights before them: the model
    assumes x never stalls the array (gen/sbe/perf.py), and the RTL counts the cycles it
    waited for x."""
    for run in result["runs"]:
        extra = run["cycles"] - run["model_cycles"]
        assert extra == 0 or 0 < extra <= run["input_wait_cycles"], run


def check(config, backpressure, seed, **kwargs):
    """Simulate; bit-exact; with ``none`` each run's cycles equal the model's (beyond it
    by at most the cycles spent waiting for x, see below), with pauses the total is at least the model's; every
    piece of work within half its cycle budget."""
    steps = kwargs.pop("steps", None)
    result = ENGINE.simulate(SimRequest(config, get_board("zc706"), seed=seed,
                                        backpressure=backpressure, steps=steps), **kwargs)
    assert result["bit_exact"] is True
    assert result["mismatches"] == 0 and result["first_mismatch"] is None
    if backpressure == "none":
        check_cycles(result)
    else:
        assert result["cycles"] >= result["model_cycles"]
    assert result["budget_use"] < 0.5
    return result


@pytest.mark.parametrize("params", CONFIGS.values(), ids=CONFIGS.keys())
@pytest.mark.parametrize("backpressure", PATTERNS)
def test_sbe_engine_bit_exact(params, backpressure):
    config = SbeConfig(**params)
    # `none` and `random` run the whole sequence; `cycle` and `bursty` (slower to
    # simulate) two batches' worth, which still crosses a batch and a run boundary.
    steps = None if backpressure in ("none", "random") else min(config.seq_len,
                                                                  config.batch + 1)
    check(config, backpressure, seed=len(backpressure), steps=steps)


def test_cases_covered():
    cases = {case for params in CONFIGS.values() for case in SbeConfig(**params).cases}
    assert cases == {1, 2, 3}
    assert SbeConfig(**CASE3_PASSES).passes == 2
    assert SbeConfig(**CASE2_WIDE).columns_per_cycle == 2
    assert not SbeConfig(**CASE1).weights_resident
    odd = SbeConfig(**ODD)
    assert (odd.padded_input_size, odd.padded_hidden_size) == (40, 32)


def test_scaled_up_weights_wrap_and_saturate(tmp_path):
    """Full-range weights (``random_layer(scale=16)``), x and biases: the accumulators
    wrap, the bias addition and the batch norm saturate ``A``; the RTL stays bit-exact,
    and ``outputs`` holds what it sent."""
    config = SbeConfig(**CASE2_WIDE)
    fmts = config.formats
    acc, cell, vector = fmts.acc, fmts.cell, fmts.vector
    rng = np.random.default_rng(5)
    layers = []
    for l in range(config.layers):
        params = golden.random_layer(config, l, rng, scale=16.0)
        bias = rng.integers(acc.min_code, acc.max_code, size=config.rows, endpoint=True)
        layers.append(golden.LayerParams(matrix=params.matrix, bias=bias,
                                         bn_scale=params.bn_scale, bn_shift=params.bn_shift))
    xs = rng.integers(vector.min_code, vector.max_code, endpoint=True,
                      size=(config.seq_len, config.input_size))
    # how often each happens, from the data alone (exact sums in Python integers)
    wraps = bias_saturations = bn_saturations = 0
    x = xs
    for l, params in enumerate(layers):
        hs, _ = golden.run_layer(config, l, params, x)
        h_prev = np.vstack([np.zeros((1, config.hidden_size), dtype=np.int64), hs[:-1]])
        v = np.concatenate([x, h_prev], axis=1).astype(object)
        exact = v.dot(params.matrix.astype(object).T)
        half = 1 << (acc.width - 1)
        wrapped = (exact + half) % (2 * half) - half
        wraps += int(np.sum(exact != wrapped))
        z = wrapped + params.bias.astype(object)
        bias_saturations += int(np.sum((z > acc.max_code) | (z < acc.min_code)))
        scaled = np.clip(z, acc.min_code, acc.max_code) * params.bn_scale.astype(object)
        bn_saturations += int(np.sum(abs(scaled) > (acc.max_code + 1) << cell.fraction_bits))
        x = hs
    assert min(wraps, bias_saturations, bn_saturations) >= 10, \
        (wraps, bias_saturations, bn_saturations)
    np.savez(tmp_path / "model.npz", xs=xs, **{
        f"{name}{l}": getattr(params, name) for l, params in enumerate(layers)
        for name in ("matrix", "bias", "bn_scale", "bn_shift")})
    check(config, "random", seed=7, steps=config.seq_len, codes=tmp_path / "model.npz",
          code_outputs=tmp_path / "h.npy")
    assert np.array_equal(np.load(tmp_path / "h.npy"), x)


def _sbe_cli_args(backpressure="none"):
    params = [f"{key}={value}" for key, value in CASE3_PASSES.items()]
    return ["sim", "sbe", "--board", "vc709", "--seed", "4", "--backpressure", backpressure,
            *(arg for param in params for arg in ("--param", param))]


def test_sim_command_prints_one_json_line(capsys):
    result = sim_json_line(capsys, main(_sbe_cli_args()))
    assert result["cycles"] == result["model_cycles"]


def test_sim_command_reports_a_mismatch(capsys, monkeypatch):
    """A wrong h value: JSON line with ``bit_exact: false`` and the first mismatch, exit 1
    (the bench flips one expected word)."""
    monkeypatch.setenv("NNRTL_TB_FAULT", "corrupt-golden")
    code = main(_sbe_cli_args())
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 1 and len(lines) == 1
    result = json.loads(lines[0])
    assert result["bit_exact"] is False and result["mismatches"] == 1
    mismatch = result["first_mismatch"]
    assert (mismatch["stream"], mismatch["index"], mismatch["frame"]) == ("m_axis", 0, 0)
    assert mismatch["expected"] ^ mismatch["got"] == 1


@pytest.mark.timeout(600)
def test_stalled_sink_fails_by_budget(monkeypatch):
    """A sink that never accepts: the wait for the first h fails by its budget, naming the
    stream, the run and the cycle, with the counters."""
    monkeypatch.setenv("NNRTL_TB_FAULT", "stall-sink")
    with pytest.raises(SimulationError) as failure:
        ENGINE.simulate(SimRequest(SbeConfig(**CASE3_PASSES), get_board("zc706"), seed=1,
                                   backpressure="none", steps=2), split=0)
    headline = str(failure.value).splitlines()[0]
    assert re.match(r"^budget overrun: waiting for m_axis h of layer 0 step 0 at cycle \d+, "
                    r"\d+ cycles into the run of layer 0, steps 0-1 \(budget \d+ cycles: "
                    r"\d+ model cycles, 12 output beats, patterns none/none\); registers: "
                    r"status=\d ", headline), headline
    assert "weight_words=" in headline and "handover_wait_cycles=" in headline


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("seed", range(6))
def test_sbe_random_configurations(seed):
    config = random_config(random.Random(seed))
    check(config, "random", seed)
    check(config, "none", seed)


@pytest.mark.slow
@pytest.mark.timeout(3 * 3600)
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_full_size_preset_one_batch(name):
    """The paper's designs, one whole batch (``batch`` steps), bit-exact."""
    config = PRESETS[name].config
    result = ENGINE.simulate(SimRequest(config, get_board(PRESETS[name].board), seed=1,
                                        backpressure="none", steps=config.batch), split=0)
    assert result["bit_exact"] is True
    check_cycles(result)


@pytest.mark.parametrize("kind", ["state_dict", "onnx"])
def test_sim_command_runs_a_pytorch_model(tmp_path, capsys, kind):
    """``nnrtl sim sbe --model --inputs --outputs``: a user's nn.LSTM through the RTL, as a
    ``state_dict`` and as the ONNX file ``torch.onnx.export`` writes; both within the
    golden model's bound of PyTorch."""
    import warnings

    import torch

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(12, 8, num_layers=2).double()
    xs = np.random.default_rng(0).uniform(-1, 1, (10, 12))
    model = tmp_path / ("lstm.pt" if kind == "state_dict" else "lstm.onnx")
    if kind == "state_dict":
        torch.save(lstm.state_dict(), model)
    else:
        with warnings.catch_warnings():     # the exporter's own warnings are its own
            warnings.simplefilter("ignore")
            torch.onnx.export(lstm.float().eval(), (torch.zeros(10, 1, 12),), model,
                              dynamo=True, verbose=False)
        lstm.double()
    np.save(tmp_path / "x.npy", xs)
    code = main(["sim", "sbe", "--board", "zc706", "--model", str(model),
                 "--inputs", str(tmp_path / "x.npy"), "--outputs", str(tmp_path / "y.npy"),
                 "--param", "pes=32", "--param", "blocks=4", "--param", "batch=4",
                 "--param", "bus_weights=8", "--backpressure", "random", "--seed", "2"])
    sim_json_line(capsys, code)
    hs = np.load(tmp_path / "y.npy")
    expected, _ = lstm(torch.tensor(xs))
    assert hs.shape == (10, 8)
    # The golden model's bound against PyTorch (tests/sbe/golden/test_sbe_golden.py).
    assert np.max(np.abs(hs - expected.detach().numpy())) < 6e-4


def test_sim_command_runs_a_whole_model(tmp_path, capsys):
    """Embedding -> nn.LSTM -> Linear as one ``state_dict``: ``--inputs`` are token ids,
    the stack runs on the RTL, the embedding and the head on the host, the outputs are
    the model's, within the golden model's bound of PyTorch carried through the head. The
    stack and the embedding's rows are the PyTorch-model test's (the same design)."""
    import torch

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(12, 8, num_layers=2).double()
    xs = np.random.default_rng(0).uniform(-1, 1, (10, 12))
    head = torch.nn.Linear(8, 3).double()
    state = {f"lstm.{key}": value for key, value in lstm.state_dict().items()}
    state.update({"embed.weight": torch.tensor(xs[::-1].copy()),
                  **{f"fc.{key}": value for key, value in head.state_dict().items()}})
    torch.save(state, tmp_path / "whole.pt")
    tokens = np.arange(10)[::-1]                        # the rows in xs's order
    np.save(tmp_path / "tokens.npy", tokens)
    code = main(["sim", "sbe", "--board", "zc706", "--model", str(tmp_path / "whole.pt"),
                 "--inputs", str(tmp_path / "tokens.npy"), "--outputs",
                 str(tmp_path / "y.npy"), "--param", "pes=32", "--param", "blocks=4",
                 "--param", "batch=4", "--param", "bus_weights=8", "--backpressure",
                 "random", "--seed", "2"])
    result = sim_json_line(capsys, code)
    assert result["host_layers"] == ["Embedding(10 -> 12) (embed.weight)",
                                     "Linear(8 -> 3) (fc.weight, fc.bias)"]
    ys = np.load(tmp_path / "y.npy")
    with torch.no_grad():
        expected = head(lstm(torch.tensor(xs))[0]).numpy()
    assert ys.shape == (10, 3)
    # the stack's bound (6e-4 a value) through the head: at most the rows' absolute sums
    bound = 6e-4 * np.abs(head.weight.detach().numpy()).sum(axis=1).max()
    assert np.max(np.abs(ys - expected)) < bound


def test_sim_command_runs_a_reverse_stack(tmp_path, capsys):
    """Two LSTM layers running in reverse (an ONNX graph): the host sends the steps last
    first and reverses the engine's outputs back; within the golden model's bound of
    PyTorch on the flipped sequence. The weights and inputs are the PyTorch-model test's."""
    import torch

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(12, 8, num_layers=2).double()
    xs = np.random.default_rng(0).uniform(-1, 1, (10, 12))
    from onnx_files import reverse_lstm_stack
    reverse_lstm_stack(lstm, tmp_path / "reverse.onnx")
    np.save(tmp_path / "x.npy", xs)
    code = main(["sim", "sbe", "--board", "zc706", "--model", str(tmp_path / "reverse.onnx"),
                 "--inputs", str(tmp_path / "x.npy"), "--outputs", str(tmp_path / "y.npy"),
                 "--param", "pes=32", "--param", "blocks=4", "--param", "batch=4",
                 "--param", "bus_weights=8", "--backpressure", "random", "--seed", "2"])
    result = sim_json_line(capsys, code)
    assert result["reverse"] is True and result["host_layers"] == []
    hs = np.load(tmp_path / "y.npy")
    with torch.no_grad():
        expected = lstm(torch.tensor(xs[::-1].copy()))[0].numpy()[::-1]
    assert hs.shape == (10, 8)
    assert np.max(np.abs(hs - expected)) < 6e-4


def test_sim_command_runs_an_odd_size_pytorch_model(tmp_path, capsys):
    """An nn.LSTM of 39 inputs and 19 hidden units (sizes the RTL runs padded) on the
    default hardware (pinned: the exploration would choose 1,024 PEs): the engine's h
    within the golden model's bound of PyTorch, padding reported apart from the useful
    MACs."""
    import torch

    torch.manual_seed(1)
    lstm = torch.nn.LSTM(39, 19).double()
    xs = np.random.default_rng(1).uniform(-1, 1, (6, 39))
    torch.save(lstm.state_dict(), tmp_path / "lstm.pt")
    np.save(tmp_path / "x.npy", xs)
    code = main(["sim", "sbe", "--board", "zc706", "--model", str(tmp_path / "lstm.pt"),
                 "--inputs", str(tmp_path / "x.npy"), "--outputs", str(tmp_path / "y.npy"),
                 "--param", "pes=64", "--param", "blocks=4", "--param", "bus_weights=8",
                 "--param", "batch=3", "--backpressure", "random", "--seed", "3"])
    result = sim_json_line(capsys, code)
    assert result["bit_exact"] is True
    assert result["useful_macs"] == 6 * 4 * 19 * (39 + 19)
    assert result["padding_macs"] == 6 * (4 * 32 * (40 + 32) - 4 * 19 * (39 + 19))
    hs = np.load(tmp_path / "y.npy")
    expected, _ = lstm(torch.tensor(xs))
    assert hs.shape == (6, 19)
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
    import torch

    torch.save(torch.nn.LSTM(12, 8).state_dict(), tmp_path / "lstm.pt")
    np.save(tmp_path / "x.npy", np.zeros((4, 12)))
    np.save(tmp_path / "bad.npy", np.zeros((4, 11)))
    monkeypatch.chdir(tmp_path)
    assert main(["sim", "sbe", "--board", "zc706", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "y.npy").exists()


#: Layers of different hidden sizes (issue 11): 12 inputs, a stack tapering 16 -> 9 on the
#: default hardware, layer 1 run padded to 16 units (case 3, then case 2).
TAPERED = dict(input_size=12, hidden_size=16, hidden_sizes=(16, 9), layers=2, seq_len=6,
               batch=3)


def test_sbe_tapered_layers_bit_exact_and_cycles_as_modelled():
    """The tapered stack with gapless streams: bit-exact, every run's cycles equal to the
    performance model's, the padding counted apart from the useful MACs."""
    config = SbeConfig(**TAPERED)
    assert config.is_padded and config.cases == (3, 2)
    result = check(config, "none", seed=11)
    assert result["cycles"] == result["model_cycles"]
    assert result["useful_macs"] == 6 * (4 * 16 * (12 + 16) + 4 * 9 * (16 + 9))
    assert result["padding_macs"] == 6 * 4 * 16 * (16 + 16) - 6 * 4 * 9 * (16 + 9)


@pytest.mark.slow
@pytest.mark.parametrize("backpressure", PATTERNS)
def test_sbe_tapered_layers_bit_exact_under_every_pattern(backpressure):
    check(SbeConfig(**TAPERED), backpressure, seed=len(backpressure) + 20)


def test_sim_command_runs_a_tapered_keras_stack(tmp_path, capsys):
    """A stack tapering 16 -> 9 units saved by Keras itself (``model.save``, torch
    backend) through ``nnrtl sim sbe --model`` under random backpressure: bit-exact
    against the golden model, and the engine's h within the golden model's bound of
    Keras' own ``predict``."""
    import os
    import warnings

    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6, 12)),
                              keras.layers.LSTM(16, return_sequences=True),
                              keras.layers.LSTM(9, return_sequences=True)])
    xs = np.random.default_rng(6).uniform(-1, 1, (6, 12))
    with warnings.catch_warnings():     # Keras' own warnings are Keras'
        warnings.simplefilter("ignore")
        model.save(tmp_path / "taper.keras")
        expected = model.predict(xs[None].astype(np.float32), verbose=0)[0]
    np.save(tmp_path / "x.npy", xs)
    code = main(["sim", "sbe", "--board", "zc706", "--model", str(tmp_path / "taper.keras"),
                 "--inputs", str(tmp_path / "x.npy"), "--outputs", str(tmp_path / "y.npy"),
                 "--param", "pes=64", "--param", "blocks=4", "--param", "bus_weights=8",
                 "--param", "batch=3", "--backpressure", "random", "--seed", "5"])
    result = sim_json_line(capsys, code)
    assert result["bit_exact"] is True
    assert (result["config"]["hidden_size"], result["config"]["hidden_sizes"]) == (16, [16, 9])
    assert result["useful_macs"] == 6 * (4 * 16 * (12 + 16) + 4 * 9 * (16 + 9))
    hs = np.load(tmp_path / "y.npy")
    assert hs.shape == (6, 9)
    # The golden model's bound against PyTorch (tests/sbe/golden/test_sbe_golden.py); Keras
    # computes in float32, 1e-6 from the float64 LSTM.
    assert np.max(np.abs(hs - expected)) < 6e-4

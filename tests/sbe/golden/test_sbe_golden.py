"""Golden model of the SBE (:mod:`nnrtl.sim.golden.sbe`): accuracy and exactness.

The model is checked against PyTorch's float64 ``nn.LSTM`` (within the error the
piecewise-linear activations bring), against a float64 batch-norm formula and against a
slow scalar re-implementation of the contract's arithmetic in Python integers
(:mod:`sbe_contract`; bit for bit, including the accumulator's wrap and every saturation).
The streams are in ``test_sbe_streams.py``.
"""

import dataclasses

import numpy as np
import pytest
import torch

from nnrtl.gen.models import load_state_dict
from nnrtl.gen.models.quantize import to_fixed
from nnrtl.gen.sbe.frommodel import quantize_model
from nnrtl.hw.sbe import VC709_LSTM512, SbeConfig
from nnrtl.sim.golden import sbe
from nnrtl.sim.golden.fixed import to_float

from sbe_contract import random_config, scalar_step


# -- Golden model against PyTorch ----------------------------------------------------------

TORCH_SHAPES = [(12, 10, 1), (12, 10, 2), (40, 24, 1), (40, 24, 2), (16, 32, 2)]


def torch_case(inputs, hidden, layers, steps, seed, margin_bits, hardware=None):
    """PyTorch's output, the golden model's (as float64) and the dequantized float
    model's for one random LSTM and input sequence; ``hardware`` the SbeConfig fields
    beyond the sizes (default: one pass, weights resident, narrow buses)."""
    torch.manual_seed(seed)
    lstm = torch.nn.LSTM(inputs, hidden, num_layers=layers).double()   # default init
    x = np.random.default_rng(seed).uniform(-1, 1, size=(steps, inputs))
    with torch.no_grad():
        expected = lstm(torch.from_numpy(x))[0].numpy()
    quantized = quantize_model(load_state_dict(lstm.state_dict()), x, width=16, acc_width=32,
                               margin_bits=margin_bits)
    if hardware is None:
        hardware = dict(pes=4 * hidden, blocks=2 if layers == 1 else 1, bus_weights=2,
                        post_units=2)
    config = quantized.apply(SbeConfig(
        input_size=inputs, hidden_size=hidden, layers=layers, seq_len=steps,
        batch=min(8, steps), **hardware))
    params = [sbe.LayerParams.from_quantized(quantized, index) for index in range(layers)]
    xs, saturated = to_fixed(x, config.act_frac, config.operand_width)
    assert saturated == 0
    hs, _ = sbe.run_model(config, params, xs)
    golden = to_float(hs, config.formats.vector)
    dequantized = quantized.dequantized().forward(x)[0]
    return expected, golden, dequantized


@pytest.mark.parametrize("margin_bits, bound, float_bound", [
    (0, 6e-4, 1e-4),      # measured 2.7e-4 and 4.4e-5
    (2, 2e-3, 4e-4),      # measured 1.1e-3 and 1.7e-4
])
@pytest.mark.parametrize("shape", TORCH_SHAPES, ids=lambda s: "x{}-h{}-l{}".format(*s))
def test_golden_against_torch(shape, margin_bits, bound, float_bound):
    """``max |h - torch|`` over 3 seeds and 10, 30 and 50 steps; ``margin_bits=2`` widens
    the accumulator's range to [-32, 32), so the PWL tables take their full ranges
    (sigmoid [-8, 8), tanh [-4, 4)) and errors, as with the paper's formats."""
    worst = worst_float = 0.0
    for seed in range(3):
        for steps in (10, 30, 50):
            expected, golden, dequantized = torch_case(*shape, steps, seed, margin_bits)
            worst = max(worst, float(np.max(np.abs(golden - expected))))
            worst_float = max(worst_float, float(np.max(np.abs(dequantized - expected))))
    assert worst <= bound
    assert worst_float <= float_bound


@pytest.mark.parametrize("shape", [(39, 19, 1), (13, 40, 1), (123, 100, 2)],
                         ids=lambda s: "x{}-h{}-l{}".format(*s))
def test_golden_against_torch_on_odd_sizes(shape):
    """Sizes the RTL runs padded, on the default hardware (64 PEs, 4 blocks, 8 weights a
    beat, 4 post-processing units): the same bound of PyTorch as above
    (``margin_bits=0``)."""
    assert SbeConfig(input_size=shape[0], hidden_size=shape[1], layers=shape[2]).is_padded
    worst = 0.0
    for seed in range(2):
        expected, golden, _ = torch_case(*shape, 20, seed, 0, hardware={})
        assert golden.shape == expected.shape
        worst = max(worst, float(np.max(np.abs(golden - expected))))
    assert worst <= 6e-4


def tapered_torch_case(inputs, sizes, steps, seed):
    """A stack of ``nn.LSTM`` modules of hidden sizes ``sizes`` (one layer each), as one
    state_dict: PyTorch's output and the golden model's on the default hardware."""
    torch.manual_seed(seed)
    modules = [torch.nn.LSTM(n_in, n_out).double()
               for n_in, n_out in zip((inputs, *sizes[:-1]), sizes)]
    state = {f"{key[:-1]}{index}": value for index, module in enumerate(modules)
             for key, value in module.state_dict().items()}
    x = np.random.default_rng(seed).uniform(-1, 1, size=(steps, inputs))
    with torch.no_grad():
        expected = torch.from_numpy(x)
        for module in modules:
            expected = module(expected)[0]
    quantized = quantize_model(load_state_dict(state), x, width=16, acc_width=32,
                               margin_bits=0)
    config = quantized.apply(SbeConfig(input_size=inputs, hidden_size=max(sizes),
                                       hidden_sizes=sizes, layers=len(sizes),
                                       seq_len=steps))
    params = [sbe.LayerParams.from_quantized(quantized, index) for index in range(len(sizes))]
    xs, _ = to_fixed(x, config.act_frac, config.operand_width)
    hs, (h_n, c_n) = sbe.run_model(config, params, xs)
    assert [h.shape for h in h_n] == [c.shape for c in c_n] == [(n,) for n in sizes]
    return expected.numpy(), to_float(hs, config.formats.vector)


@pytest.mark.parametrize("sizes", [(16, 9), (9, 16), (24, 16, 9)],
                         ids=lambda s: "h" + "-".join(map(str, s)))
def test_golden_against_torch_on_layers_of_different_sizes(sizes):
    """Stacks whose hidden sizes differ (a Keras-style taper 16 -> 9, a widening 9 -> 16,
    three layers), each layer run padded to the largest: the same bound of PyTorch as
    above (``margin_bits=0``)."""
    worst = 0.0
    for seed in range(2):
        expected, golden = tapered_torch_case(12, sizes, 20, seed)
        assert golden.shape == expected.shape == (20, sizes[-1])
        worst = max(worst, float(np.max(np.abs(golden - expected))))
    assert worst <= 6e-4


def test_torch_formats_and_params():
    """The quantizer's formats reach the config, and the interleaved rows the params."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(12, 10).double()
    x = np.random.default_rng(0).uniform(-1, 1, size=(20, 12))
    quantized = quantize_model(load_state_dict(lstm.state_dict()), x)
    config = quantized.apply(SbeConfig(input_size=12, hidden_size=10, seq_len=20, pes=40,
                                       batch=4, blocks=2, bus_weights=4, post_units=2))
    W, V, A, E = config.formats
    assert (W.width, W.fraction_bits) == (16, quantized.weight_frac)
    assert (V.fraction_bits, E.fraction_bits) == (quantized.act_frac, quantized.cell_frac)
    assert A.fraction_bits == W.fraction_bits + V.fraction_bits
    params = sbe.LayerParams.from_quantized(quantized, 0).check(config, 0)
    layer = quantized.layers[0]
    for j in range(10):
        for g in range(4):              # row 4j + g is row j of gate block g
            assert np.array_equal(params.matrix[4 * j + g, :12], layer.w_x[g * 10 + j])
            assert np.array_equal(params.matrix[4 * j + g, 12:], layer.w_h[g * 10 + j])
            assert params.bias[4 * j + g] == layer.bias[g * 10 + j]


# -- Batch normalisation -------------------------------------------------------------------

def float_sigmoid(z):
    return 0.5 + 0.5 * np.tanh(0.5 * z)


def test_batch_norm_against_float():
    """``z = (acc + bias) * scale + shift`` within half an A LSB (one rounding); h and c
    of one step from a zero state within the PWL errors of the float formula."""
    config = SbeConfig(input_size=40, hidden_size=16, pes=64, blocks=4, batch_norm=True)
    W, V, A, E = config.formats
    rng = np.random.default_rng(5)
    worst_z = worst_h = worst_c = 0.0
    for _ in range(20):
        params = sbe.random_layer(config, 0, rng)
        x = sbe.random_inputs(config, 1, rng)[0]
        h_prev = rng.integers(-4096, 4096, size=16)      # [-1, 1) in V
        acc = sbe.accumulate(config, params, x, h_prev)
        z = sbe.preactivation(config, params, acc)
        reference = ((to_float(acc, A) + to_float(params.bias, A))
                     * to_float(params.bn_scale, E) + to_float(params.bn_shift, A))
        inside = np.abs(reference) < A.max_value - 1
        assert inside.mean() > 0.95
        worst_z = max(worst_z, float(np.max(np.abs(to_float(z, A) - reference)[inside])))
        h, c = sbe.step(config, params, x, h_prev, np.zeros(16, dtype=np.int64))
        i, u, f, o = reference.reshape(16, 4).T
        c_ref = float_sigmoid(i) * np.tanh(u)
        h_ref = float_sigmoid(o) * np.tanh(c_ref)
        worst_c = max(worst_c, float(np.max(np.abs(to_float(c, E) - c_ref))))
        worst_h = max(worst_h, float(np.max(np.abs(to_float(h, V) - h_ref))))
    assert worst_z <= 0.5 * A.resolution
    assert worst_c <= 1.2e-3        # sigmoid 3.9e-4 + tanh 7.6e-4 (measured 8.2e-4)
    assert worst_h <= 2.5e-3        # + tanh of c and h's rounding (measured 1.2e-3)


def test_batch_norm_disabled_at_run_time():
    config = SbeConfig(batch_norm=True)
    rng = np.random.default_rng(1)
    params = sbe.random_layer(config, 0, rng)
    plain = dataclasses.replace(params, bn_scale=None, bn_shift=None)
    xs = sbe.random_inputs(config, 5, rng)
    off, _ = sbe.run_layer(config, 0, params, xs, batch_norm=False)
    assert np.array_equal(off, sbe.run_layer(config, 0, plain, xs, batch_norm=False)[0])
    assert np.array_equal(off, sbe.run_layer(SbeConfig(), 0, plain, xs)[0])
    assert not np.array_equal(off, sbe.run_layer(config, 0, params, xs)[0])


# -- Exactness of the arithmetic -----------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_step_matches_scalar_reference(seed):
    rng = np.random.default_rng(100 + seed)
    config = random_config(rng)
    index = int(rng.integers(config.layers))
    for scale in (0.25, 1.0, 4.0):      # from mostly inside the PWL ranges to saturated
        params = sbe.random_layer(config, index, rng, scale=scale)
        xs = sbe.random_inputs(config, 3, rng, layer_index=index)
        W, V, A, E = config.formats
        h = rng.integers(V.min_code, V.max_code, size=config.hidden_size, endpoint=True)
        c = rng.integers(E.min_code, E.max_code, size=config.hidden_size, endpoint=True)
        h0, c0 = h, c
        for x in xs:
            h_ref, c_ref = scalar_step(config, params, x, h, c, config.batch_norm)
            h, c = sbe.step(config, params, x, h, c)
            assert h.tolist() == h_ref and c.tolist() == c_ref
        hs, c_last = sbe.run_layer(config, index, params, xs, h0, c0)
        assert np.array_equal(hs[-1], h) and np.array_equal(c_last, c)


def test_run_model_chains_layers():
    rng = np.random.default_rng(3)
    config = random_config(rng, layers=2, hidden_size=8, input_size=12, blocks=4, pes=32,
                           post_units=2, bus_weights=4, operand_width=16, acc_width=32,
                           weight_frac=12, act_frac=12, cell_frac=16)
    params = [sbe.random_layer(config, index, rng) for index in range(2)]
    xs = sbe.random_inputs(config, 9, rng)
    trace = {}
    out, (h_n, c_n) = sbe.run_model(config, params, xs, trace=trace)
    first, c_first = sbe.run_layer(config, 0, params[0], xs)
    second, c_second = sbe.run_layer(config, 1, params[1], first)
    assert np.array_equal(out, second) and np.array_equal(trace["h"][0], first)
    assert np.array_equal(trace["x"][1], first)
    assert np.array_equal(h_n, [first[-1], second[-1]])
    assert np.array_equal(c_n, [c_first, c_second])


def test_accumulator_wraps():
    """Sums far beyond 2**31 wrap to 32 bits, as a DSP48 accumulator does."""
    config = SbeConfig(input_size=24, hidden_size=8, pes=32, blocks=2, bus_weights=4)
    W, V, A, E = config.formats
    rng = np.random.default_rng(7)
    matrix = rng.integers(W.max_code - 2000, W.max_code, size=(32, 32), endpoint=True)
    matrix[::3] *= -1
    params = sbe.LayerParams(matrix=matrix, bias=rng.integers(-2 ** 24, 2 ** 24, size=32))
    x = rng.integers(V.max_code - 100, V.max_code, size=24, endpoint=True)
    h_prev = rng.integers(V.min_code, V.min_code + 100, size=8, endpoint=True)
    exact = [sum(int(w) * int(v) for w, v in zip(row, [*x, *h_prev])) for row in matrix]
    assert min(abs(e) for e in exact) > 2 ** 33
    wrapped = [(e + 2 ** 31) % 2 ** 32 - 2 ** 31 for e in exact]
    assert sbe.accumulate(config, params, x, h_prev).tolist() == wrapped
    c_prev = np.zeros(8, dtype=np.int64)
    h, c = sbe.step(config, params, x, h_prev, c_prev)
    assert (h.tolist(), c.tolist()) == scalar_step(config, params, x, h_prev, c_prev, False)


def test_exact_products_int64_path(monkeypatch):
    """The int64 fallback (taken when a sum could pass 2**53) equals the float path."""
    rng = np.random.default_rng(2)
    config = random_config(rng, operand_width=18, acc_width=40, batch_norm=False)
    params = sbe.random_layer(config, 0, rng, scale=8.0)
    xs = sbe.random_inputs(config, 4, rng)
    fast = sbe.run_layer(config, 0, params, xs)
    monkeypatch.setattr(sbe.model, "_EXACT_FLOAT", 0)
    slow = sbe.run_layer(config, 0, params, xs)
    assert all(np.array_equal(a, b) for a, b in zip(fast, slow))


def saturation_config(**overrides):
    base = dict(input_size=4, hidden_size=2, pes=8, blocks=2, bus_weights=2, post_units=2,
                operand_width=16, acc_width=32, weight_frac=12, act_frac=12, cell_frac=16)
    return SbeConfig(**(base | overrides))


def test_saturation_of_preactivation_and_batch_norm():
    config = saturation_config(batch_norm=True)
    W, V, A, E = config.formats
    acc = np.array([A.max_code - 5, A.min_code + 5, 1 << 24, -(1 << 24)] * 2)
    bias = np.array([100, -100, 0, 0] * 2)
    scale = np.array([1 << 16, 1 << 16, 3 << 16, 3 << 16] * 2)        # 1.0 and 3.0
    params = sbe.LayerParams(matrix=np.zeros((8, 6), dtype=np.int64), bias=bias,
                             bn_scale=scale, bn_shift=np.array([0, 0, A.max_code,
                                                                A.min_code] * 2))
    assert sbe.preactivation(config, params, acc, batch_norm=False).tolist()[:4] == [
        A.max_code, A.min_code, 1 << 24, -(1 << 24)]
    assert sbe.preactivation(config, params, acc).tolist()[:4] == [
        A.max_code, A.min_code, A.max_code, A.min_code]


def test_saturation_of_cell_and_hidden():
    """With i = u = f = o = 1 (pre-activations beyond the tables' ranges, which clamp)
    the cell state grows by about 1.0 a step until it saturates at the top of ``E``
    ([-8, 8)); with ``V`` spanning [-1, 1), h saturates as o * tanh(c) rounds to 1.0."""
    config = saturation_config(operand_width=8, acc_width=16, weight_frac=4, act_frac=7,
                               cell_frac=12, bus_weights=2)
    W, V, A, E = config.formats
    table = sbe.tables(config)
    big = A.max_code - 4
    assert big > table.sigmoid.high_code and -big < table.tanh.low_code
    params = sbe.LayerParams(matrix=np.zeros((8, 6), dtype=np.int64),
                             bias=np.array([big] * 4 + [-big] * 4))
    x = np.zeros(4, dtype=np.int64)
    h = c = np.zeros(2, dtype=np.int64)
    cells = []
    for _ in range(10):
        h_ref, c_ref = scalar_step(config, params, x, h, c, False)
        h, c = sbe.step(config, params, x, h, c)
        assert (h.tolist(), c.tolist()) == (h_ref, c_ref)
        cells.append(int(c[0]))
    top = cells.index(E.max_code)
    assert 7 <= top <= 9 and cells[top:] == [E.max_code] * (10 - top)
    assert all(0 < b - a <= 1 << E.fraction_bits for a, b in zip(cells, cells[1:top + 1]))
    assert h[0] == V.max_code
    # Unit 1: i = f = o ~ 0 and u ~ -1: c stays near 0, h is 0.
    assert abs(to_float(c[1], E)) < 1e-3 and h[1] == 0


def test_random_data_exercises_inside_and_saturated_ranges():
    """With the defaults, random layers and inputs give pre-activations mostly inside
    the tanh range [-4, 4) and sometimes beyond the sigmoid's [-8, 8)."""
    config = SbeConfig(input_size=80, hidden_size=16, layers=2, blocks=4)
    rng = np.random.default_rng(11)
    A = config.formats.acc
    z = []
    for index in range(2):
        params = sbe.random_layer(config, index, rng)
        xs = sbe.random_inputs(config, 20, rng, layer_index=index)
        for x in xs:
            acc = sbe.accumulate(config, params, x, np.zeros(16, dtype=np.int64))
            z.append(to_float(sbe.preactivation(config, params, acc), A))
    z = np.abs(np.concatenate(z))
    assert 0.8 < np.mean(z < 4) < 0.99 and 0 < np.mean(z >= 8) < 0.05


def test_full_size_paper_layer():
    """The VC709 design's layer (2048 rows x 2304 columns) runs and streams; 16 steps
    here (64 take about a second)."""
    config = dataclasses.replace(VC709_LSTM512, seq_len=16, batch=16)
    rng = np.random.default_rng(0)
    params = sbe.random_layer(config, 0, rng)
    xs = sbe.random_inputs(config, 16, rng)
    hs, c = sbe.run_layer(config, 0, params, xs)
    assert hs.shape == (16, 512) and c.shape == (512,)
    assert 0.1 < np.std(to_float(hs, config.formats.vector)) < 0.9
    counts = sbe.beat_counts(config, 0, 16)
    beats = sbe.weight_beats(config, 0, params, 16)
    assert len(beats) == counts["header"] + counts["weights"]
    assert counts["weights"] * config.bus_weights == config.weight_words_per_batch


def test_tables_cached_per_formats():
    config = SbeConfig()
    assert sbe.tables(config) is config.pwl_tables
    assert config.pwl_tables is dataclasses.replace(config, batch=2, blocks=2).pwl_tables
    assert config.pwl_tables is not dataclasses.replace(config, cell_frac=20).pwl_tables
    table = sbe.tables(config)
    A, E = config.formats.acc, config.formats.cell
    sigmoid = table.sigmoid
    assert (sigmoid.in_fmt, sigmoid.out_fmt, sigmoid.segments) == (A, E, 64)
    assert (table.tanh.function, table.cell_tanh.in_fmt) == ("tanh", E)


# -- Errors --------------------------------------------------------------------------------

def test_errors():
    config = SbeConfig()
    rng = np.random.default_rng(0)
    params = sbe.random_layer(config, 0, rng)
    with pytest.raises(ValueError,
                       match=r"^matrix must have 4 \* hidden_size rows, not 6$"):
        sbe.LayerParams(matrix=np.zeros((6, 3), dtype=int), bias=np.zeros(6, dtype=int))
    with pytest.raises(ValueError, match=r"^bn_scale and bn_shift must be given together$"):
        sbe.LayerParams(matrix=params.matrix, bias=params.bias, bn_scale=params.bias)
    with pytest.raises(TypeError, match=r"^bias must be an array of integer codes, "
                                        r"not float64$"):
        sbe.LayerParams(matrix=params.matrix, bias=params.bias * 1.0)
    with pytest.raises(ValueError, match=r"^layer 0: matrix must have shape \(64, 96\), "
                                         r"not \(64, 95\)$"):
        sbe.run_layer(config, 0, dataclasses.replace(params, matrix=params.matrix[:, 1:]),
                      np.zeros((2, 80), dtype=int))
    with pytest.raises(ValueError, match=r"^xs has codes outside sfix16_En12 "
                                         r"\[-32768, 32767\]$"):
        sbe.run_layer(config, 0, params, np.full((2, 80), 40000))
    with pytest.raises(ValueError, match=r"^batch_norm cannot be enabled: the config has "
                                         r"no batch-norm unit \(config.batch_norm is "
                                         r"False\)$"):
        sbe.run_layer(config, 0, params, np.zeros((2, 80), dtype=int), batch_norm=True)
    with pytest.raises(ValueError, match=r"^batch_norm is enabled but the parameters have "
                                         r"no bn_scale and bn_shift$"):
        sbe.run_layer(dataclasses.replace(config, batch_norm=True), 0, params,
                      np.zeros((2, 80), dtype=int))
    with pytest.raises(ValueError, match=r"^acc_width \(64\) above 61 is not modelled: the "
                                         r"PWL model takes int64 codes$"):
        sbe.tables(dataclasses.replace(config, acc_width=64))
    with pytest.raises(TypeError, match=r"^steps must be a positive integer, not 0$"):
        sbe.beat_counts(config, 0, 0)

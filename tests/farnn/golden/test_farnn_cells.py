"""The FARNN per-cell golden (:mod:`nnrtl.sim.golden.farnn.cells`): driven step by step
with the recurrent MVM of the layer golden, it reproduces :func:`layer.forward` and
:func:`layer.backward` bit for bit (LSTM, LSTM with a projection, GRU); against float64
formulas within the table units' error; ``-0`` is the adder's exact identity (the RTL's
``dy`` with a projection); its argument checks."""

import numpy as np
import pytest

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.sim.golden.farnn import LayerWeights, backward, cells, forward, fold, unit_mvm
from nnrtl.sim.golden.farnn.layer import from_bits, to_bits
from nnrtl.sim.golden.float import float_add, special_values


def small(cell, proj=0):
    """5 cells on 2 chains x 2 PEs (two rounds, the last split by 2), batch 2, 4 steps."""
    return FarnnConfig(cell=cell, input_size=3, hidden_size=5, proj_size=proj, layers=1,
                       seq_len=4, batch=2, chains=2, chain_length=2, split=2)


def layer_weights(config, rng):
    rows = config.units * config.hidden_size
    return LayerWeights.from_arrays(
        config, rng.uniform(-0.6, 0.6, (rows, config.recurrent_size)),
        rng.uniform(-0.5, 0.5, rows),
        rng.uniform(-0.6, 0.6, (config.proj_size, config.hidden_size))
        if config.proj_size else None)


def mvm(config, name, weights, x, per_group):
    return unit_mvm(config.matrix(name), weights, x, per_group=per_group,
                    adder_stages=config.adder_stages,
                    multiplier_stages=config.multiplier_stages)


def stack(gates, cell):
    """(B, units, H) from a dict of (B, H) per gate."""
    return np.stack([gates[name] for name in FarnnConfig(cell=cell).gates], axis=1)


@pytest.mark.parametrize("cell, proj", [("lstm", 0), ("lstm", 2), ("gru", 0)])
def test_cells_reproduce_the_layer_golden(cell, proj):
    config = small(cell, proj)
    rng = np.random.default_rng(len(cell) + proj)
    weights = layer_weights(config, rng)
    steps, batch, hidden = config.seq_len, config.batch, config.hidden_size
    imvm = to_bits(rng.uniform(-2, 2, (steps, batch, config.units, hidden)))
    dy = to_bits(rng.uniform(-1, 1, (steps, batch, config.recurrent_size)))
    fw = forward(config, weights, imvm)
    bw = backward(config, weights, fw, dy)

    # FW: the layer's recurrent MVM on the previous output, then the cell.
    zero = np.zeros((batch, hidden), np.uint32)
    v = np.zeros((batch, config.recurrent_size), np.uint32)
    state = zero
    for t in range(steps):
        rm = mvm(config, "recurrent", weights.recurrent, v, False)
        if cell == "lstm":
            h, state, saved = cells.lstm_forward(imvm[t], rm, state, axis=1)
            assert np.array_equal(state, fw.c[t])
        else:
            h, saved = cells.gru_forward(imvm[t], rm, weights.bias_n, state, axis=1)
            state = h
        assert np.array_equal(h, fw.h[t])
        for name in cells.SAVED[cell]:
            assert np.array_equal(saved[name], fw.saved[name][t]), (t, name)
        v = mvm(config, "projection", weights.projection[None], h, False)[:, 0] if proj else h

    # BW: the cell from the step's delta, then the transposed MVM's fold.
    dv = np.zeros((batch, config.recurrent_size), np.uint32)
    dc = zero
    for t in reversed(range(steps)):
        saved = {name: fw.saved[name][t] for name in cells.SAVED[cell]}
        if cell == "lstm":
            c_prev = fw.c[t - 1] if t else zero
            if proj:
                dr_hat = float_add(FP32, dv, dy[t])
                assert np.array_equal(dr_hat, bw.dr_hat[t])
                dh = mvm(config, "projection_t", weights.projection_t[None], dr_hat,
                         False)[:, 0]
                d, dc = cells.lstm_backward(saved, c_prev, dh, None, dc)
            else:
                d, dc = cells.lstm_backward(saved, c_prev, dv, dy[t], dc)
            assert np.array_equal(dc, bw.dc_prev[t])
            d_input = d_recurrent = stack(d, cell)
            u = mvm(config, "recurrent_t", weights.recurrent_t, d_recurrent, True)
            dv = fold([u[:, k] for k in range(config.units)])
        else:
            h_prev = fw.h[t - 1] if t else zero
            d_in, d_rec, direct = cells.gru_backward(saved, h_prev, dv, dy[t])
            d_input, d_recurrent = stack(d_in, cell), stack(d_rec, cell)
            u = mvm(config, "recurrent_t", weights.recurrent_t, d_recurrent, True)
            dv = float_add(FP32, fold([u[:, k] for k in range(config.units)]), direct)
        assert np.array_equal(d_input, bw.d_input[t]), t
        assert np.array_equal(d_recurrent, bw.d_recurrent[t]), t
        assert np.array_equal(dv, bw.dv_prev[t]), t


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_cells_against_float64():
    """One step of each cell against the float64 formulas of its own rounded inputs:
    within a few table errors (sigmoid 5e-6, tanh 1e-5, module docstring of
    ``hw/arith/activation.py``) and fp32 roundings."""
    rng = np.random.default_rng(7)
    n = 2000
    imvm, rmvm = (rng.uniform(-3, 3, (4, n)) for _ in range(2))
    c_prev, h_prev, bias = (rng.uniform(-1, 1, n) for _ in range(3))
    f64 = lambda bits: from_bits(bits).astype(np.float64)   # noqa: E731
    x, r_, cp = to_bits(imvm), to_bits(rmvm), to_bits(c_prev)
    a = f64(x) + f64(r_)
    i, f, g, o = sigmoid(a[0]), sigmoid(a[1]), np.tanh(a[2]), sigmoid(a[3])
    c = f * f64(cp) + i * g
    h, c_bits, saved = cells.lstm_forward(x, r_, cp)
    assert np.max(np.abs(f64(c_bits) - c)) < 4e-5
    assert np.max(np.abs(f64(h) - sigmoid(a[3]) * np.tanh(c))) < 6e-5
    assert np.array_equal(saved["c"], c_bits)

    hp, b = to_bits(h_prev), to_bits(bias)
    a = f64(x) + f64(r_)
    r, z = sigmoid(a[0]), sigmoid(a[1])
    n_ = np.tanh(f64(x[2]) + r * (f64(r_[2]) + f64(b)))
    h, saved = cells.gru_forward(x[:3], r_[:3], b, hp)
    assert np.max(np.abs(f64(h) - ((1 - z) * n_ + z * f64(hp)))) < 4e-5

    # BW from exact saved values: Eq. 3 in float64 on the same inputs.
    s = {k: to_bits(rng.uniform(0.05, 0.95, n)) for k in ("i", "f", "o")}
    s["g"], s["c"] = to_bits(rng.uniform(-0.9, 0.9, n)), to_bits(rng.uniform(-2, 2, n))
    dh, dy, dc = (to_bits(rng.uniform(-1, 1, n)) for _ in range(3))
    d, dc_prev = cells.lstm_backward(s, cp, dh, dy, dc)
    v = {k: f64(bits) for k, bits in s.items()}
    dh_hat = f64(dh) + f64(dy)
    tc = np.tanh(v["c"])
    dc_hat = f64(dc) + (1 - tc ** 2) * v["o"] * dh_hat
    want = dict(i=v["i"] * (1 - v["i"]) * v["g"] * dc_hat,
                f=v["f"] * (1 - v["f"]) * f64(cp) * dc_hat,
                g=(1 - v["g"] ** 2) * v["i"] * dc_hat,
                o=v["o"] * (1 - v["o"]) * tc * dh_hat)
    for gate, value in want.items():
        assert np.max(np.abs(f64(d[gate]) - value)) < 5e-5, gate
    assert np.max(np.abs(f64(dc_prev) - v["f"] * dc_hat)) < 5e-5


def test_negative_zero_is_the_adders_identity():
    """``fa(x, -0) = x`` bit for bit for every special value and random patterns: the RTL
    feeds ``dy = -0`` where the golden adds no ``dy`` (LSTM with a projection)."""
    rng = np.random.default_rng(8)
    values = np.concatenate([np.array(list(special_values(FP32).values()), np.uint32),
                             rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(
                                 np.uint32)])
    values = values[(values & 0x7FFFFFFF) <= 0x7F800000]   # canonical NaN only: below
    values = np.append(values, np.uint32(FP32.canonical_nan))
    assert np.array_equal(float_add(FP32, values, cells.NEGATIVE_ZERO), values)
    # and +0 is not: -0 + +0 = +0
    assert float_add(FP32, np.uint32(0x80000000), np.uint32(0)) == 0


def test_cells_check_their_arguments():
    three = np.zeros((3, 2), np.uint32)
    with pytest.raises(ValueError, match=r"^imvm must have 4 gates \(i, f, g, o\) along axis "
                                         r"0, not shape \(3, 2\)$"):
        cells.lstm_forward(three, np.zeros((4, 2), np.uint32), 0)
    with pytest.raises(ValueError, match=r"^rmvm must have 3 gates \(r, z, n\) along axis 1, "
                                         r"not shape \(2, 4\)$"):
        cells.gru_forward(np.zeros((2, 3)), np.zeros((2, 4)), 0, 0, axis=1)
    with pytest.raises(ValueError, match=r"^saved must hold r, z, n, hn; missing hn$"):
        cells.gru_backward(dict(r=0, z=0, n=0), 0, 0, 0)
    with pytest.raises(ValueError, match=r"^saved must hold i, f, g, o, c; missing f, c$"):
        cells.lstm_backward(dict(i=0, g=0, o=0), 0, 0, 0, 0)

"""The FARNN golden model: its MVM against the accumulator golden and plain float32 sums at
the bit level, the layer's FW and BW passes against float64 (numpy and PyTorch autograd)
within documented bounds, and the bit-level facts of the first step."""

import numpy as np
import pytest
import torch

from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.farnn import FarnnConfig
from nnrtl.sim.golden import activation
from nnrtl.sim.golden.accumulator import streaming_sum
from nnrtl.sim.golden.farnn import LayerWeights, backward, forward, rmvm, unit_mvm
from nnrtl.sim.golden.farnn.layer import from_bits, to_bits
from nnrtl.sim.golden.float import float_add, float_mul

OPTIONS = dict(adder_stages=4, multiplier_stages=3)


def random_bits(rng, shape, scale=1.0):
    return to_bits(rng.uniform(-scale, scale, shape))


@pytest.mark.parametrize("adder_stages", [1, 4, 6])
def test_split_1_is_the_accumulator_golden_row_by_row(adder_stages):
    rng = np.random.default_rng(adder_stages)
    w, x = random_bits(rng, (3, 11)), random_bits(rng, (2, 11))
    out = rmvm(w, x, split=1, adder_stages=adder_stages, multiplier_stages=3)
    for v in range(2):
        for j in range(3):
            products = float_mul(FP32, w[j], x[v])
            assert out[v, j] == streaming_sum(FP32, products, adder_stages=adder_stages)


def test_split_folds_the_chunks_left_to_right():
    """11 inputs split by 3: chunks [0, 4), [4, 8), [8, 11), each its own stream, then
    ((q0 + q1) + q2)."""
    rng = np.random.default_rng(1)
    w, x = random_bits(rng, (5, 11)), random_bits(rng, (11,))
    out = rmvm(w, x, split=3, **OPTIONS)
    for j in range(5):
        p = float_mul(FP32, w[j], x)
        q = [streaming_sum(FP32, p[a:b], adder_stages=4) for a, b in ((0, 4), (4, 8), (8, 11))]
        assert out[j] == float_add(FP32, float_add(FP32, q[0], q[1]), q[2])


def test_one_adder_stage_is_the_sequential_float32_dot_product():
    """With one slot the accumulator adds in element order: numpy's float32 arithmetic (IEEE,
    round to nearest even) computing -0 + p0 + p1 + ... gives the same bits."""
    rng = np.random.default_rng(2)
    w, x = rng.uniform(-1, 1, (4, 37)).astype(np.float32), rng.uniform(-1, 1, 37).astype(
        np.float32)
    out = from_bits(rmvm(to_bits(w), to_bits(x), split=1, adder_stages=1,
                         multiplier_stages=0))
    for j in range(4):
        total = np.float32(-0.0)
        for e in range(37):
            total = np.float32(total + np.float32(w[j, e] * x[e]))
        assert out[j].tobytes() == total.tobytes()


def test_summation_order_matters_and_multiplier_stages_do_not():
    rng = np.random.default_rng(3)
    w, x = random_bits(rng, (64, 50)), random_bits(rng, (3, 50))
    base = rmvm(w, x, split=1, adder_stages=4, multiplier_stages=3)
    assert np.array_equal(base, rmvm(w, x, split=1, adder_stages=4, multiplier_stages=0))
    assert not np.array_equal(base, rmvm(w, x, split=1, adder_stages=2, multiplier_stages=3))
    assert not np.array_equal(base, rmvm(w, x, split=2, adder_stages=4, multiplier_stages=3))
    # each within fp32 summation error of the float64 product: n * 2**-24 * sum |w x|
    exact = from_bits(x).astype(np.float64) @ from_bits(w).astype(np.float64).T
    bound = 50 * 2.0 ** -24 * (np.abs(from_bits(x)) @ np.abs(from_bits(w)).T)
    assert np.all(np.abs(from_bits(base) - exact) <= bound)


def test_rmvm_rejects_bad_arguments():
    w, x = np.zeros((2, 5), np.uint32), np.zeros(5, np.uint32)
    with pytest.raises(ValueError, match=r"^split \(4\) leaves a chunk of the 5 inputs empty "
                                         r"\(chunks of 2\)$"):
        rmvm(w, x, split=4, **OPTIONS)
    with pytest.raises(ValueError, match=r"^weight_bits must be rows x n_in and x_bits "
                                         r"\.\.\. x n_in, not \(2, 5\) and \(4,\)$"):
        rmvm(w, x[:4], split=1, **OPTIONS)
    with pytest.raises(TypeError, match=r"^adder_stages must be an integer from 1 to 6, "
                                        r"not 0$"):
        rmvm(w, x, split=1, adder_stages=0, multiplier_stages=3)


def test_unit_mvm_splits_the_last_round_only():
    """7 rows on 2 chains x 3 PEs: rows 0-5 a full round, row 6 the last round, split by 2
    (the unit's factor); FW one vector for every unit, BW each unit its own."""
    rng = np.random.default_rng(4)
    config = FarnnConfig(cell="gru", input_size=3, hidden_size=7, chains=2, chain_length=3,
                         split=2)
    shape = config.matrix("recurrent")
    assert (shape.split_from, shape.split, shape.split_last) == (6, 2, True)
    w, x = random_bits(rng, (3, 7, 7)), random_bits(rng, (2, 7))
    out = unit_mvm(shape, w, x, per_group=False, **OPTIONS)
    assert out.shape == (2, 3, 7)
    for k in range(3):
        assert np.array_equal(out[:, k, :6], rmvm(w[k, :6], x, split=1, **OPTIONS))
        assert np.array_equal(out[:, k, 6:], rmvm(w[k, 6:], x, split=2, **OPTIONS))
    per_gate = random_bits(rng, (2, 3, 7))
    out = unit_mvm(shape, w, per_gate, per_group=True, **OPTIONS)
    assert np.array_equal(out[:, 1, 6:], rmvm(w[1, 6:], per_gate[:, 1], split=2, **OPTIONS))
    assert np.array_equal(out[:, 2, :6], rmvm(w[2, :6], per_gate[:, 2], split=1, **OPTIONS))
    with pytest.raises(ValueError, match=r"^the recurrent matrix must be 7 x 7, not 7 x 6$"):
        unit_mvm(shape, w[:, :, :6], x, per_group=False, **OPTIONS)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def small(cell, proj=0):
    """A small engine whose gate matrices run split (9 rows on 2 chains x 3 PEs: the last
    3 rows split by 2)."""
    return FarnnConfig(cell=cell, input_size=4, hidden_size=9, proj_size=proj, layers=1,
                       seq_len=6, batch=2, chains=2, chain_length=3, split=2)


def layer_weights(config, rng):
    rows = config.units * config.hidden_size
    weight_hh = rng.uniform(-0.5, 0.5, (rows, config.recurrent_size))
    bias_hh = rng.uniform(-0.5, 0.5, rows)
    weight_hr = (rng.uniform(-0.5, 0.5, (config.proj_size, config.hidden_size))
                 if config.proj_size else None)
    return LayerWeights.from_arrays(config, weight_hh, bias_hh, weight_hr)


def torch_layer(config, weights, imvm, dy):
    """The same layer in PyTorch float64 with autograd, from the imvm values on: returns
    (outputs, grad of imvm, grad of the recurrent matrices, grad of W_hr)."""
    recurrent = torch.tensor(from_bits(weights.recurrent).astype(np.float64),
                             requires_grad=True)
    projection = (torch.tensor(from_bits(weights.projection).astype(np.float64),
                               requires_grad=True) if config.proj_size else None)
    a_in = torch.tensor(from_bits(imvm).astype(np.float64), requires_grad=True)
    steps, batch = imvm.shape[:2]
    v = torch.zeros(batch, config.recurrent_size, dtype=torch.float64)
    h = c = torch.zeros(batch, config.hidden_size, dtype=torch.float64)
    outputs = []
    for t in range(steps):
        rm = torch.einsum("khr,br->bkh", recurrent, v)
        if config.cell == "lstm":
            a = a_in[t] + rm
            i, f, o = torch.sigmoid(a[:, 0]), torch.sigmoid(a[:, 1]), torch.sigmoid(a[:, 3])
            c = f * c + i * torch.tanh(a[:, 2])
            h = o * torch.tanh(c)
        else:
            bias_n = torch.tensor(from_bits(weights.bias_n).astype(np.float64))
            r = torch.sigmoid(a_in[t, :, 0] + rm[:, 0])
            z = torch.sigmoid(a_in[t, :, 1] + rm[:, 1])
            n = torch.tanh(a_in[t, :, 2] + r * (rm[:, 2] + bias_n))
            h = (1 - z) * n + z * h
        v = h @ projection.T if config.proj_size else h
        outputs.append(v)
    y = torch.stack(outputs)
    (y * torch.tensor(from_bits(dy).astype(np.float64))).sum().backward()
    return (y.detach().numpy(), a_in.grad.numpy(), recurrent.grad.numpy(),
            None if projection is None else projection.grad.numpy())


#: Largest difference of FW outputs and BW deltas from float64 on these small layers
#: (6 steps, weights and inputs below 1): fp32 rounding (~6e-8 relative per operation) and
#: the PWL sigmoid/tanh tables (absolute error up to 4.9e-6 and 9.7e-6), propagated through
#: 6 steps; measured at most 5.7e-6 (GRU outputs).
LAYER_BOUND = 2e-5


@pytest.mark.parametrize("cell, proj", [("lstm", 0), ("gru", 0), ("lstm", 4)])
def test_layer_against_float64_autograd(cell, proj):
    rng = np.random.default_rng(5)
    config = small(cell, proj)
    assert config.matrix("recurrent").split_last
    weights = layer_weights(config, rng)
    imvm = random_bits(rng, (6, 2, config.units, 9))
    dy = random_bits(rng, (6, 2, config.recurrent_size))
    fw = forward(config, weights, imvm)
    bw = backward(config, weights, fw, dy)
    y, d_imvm, d_recurrent, d_projection = torch_layer(config, weights, imvm, dy)
    assert np.abs(from_bits(fw.y) - y).max() < LAYER_BOUND
    # the W side's deltas are the gradient of the imvm inputs
    assert np.abs(from_bits(bw.d_input) - d_imvm).max() < LAYER_BOUND
    # dR_k = sum_t dR-side_k v_{t-1}^T (the host's product, here in float64)
    v_prev = np.concatenate([np.zeros_like(fw.y[:1]), fw.y[:-1]])
    grad = np.einsum("tbkh,tbr->khr", from_bits(bw.d_recurrent).astype(np.float64),
                     from_bits(v_prev).astype(np.float64))
    assert np.abs(grad - d_recurrent).max() < LAYER_BOUND * 10
    if proj:
        grad = np.einsum("tbp,tbh->ph", from_bits(bw.dr_hat).astype(np.float64),
                         from_bits(fw.h).astype(np.float64))
        assert np.abs(grad - d_projection).max() < LAYER_BOUND * 10
    else:
        assert bw.dr_hat is None


def test_first_step_bits():
    """At t = 0 the recurrent vector is +0: every product is a zero, the sums are zeros and
    a_k = fa(imvm_k, 0) = imvm_k; the gates are the activation goldens of the host's values,
    c = fa(fm(f, +0), fm(i, g)) = fm(i, g) and h = fm(o, tanh(c)), bit for bit."""
    rng = np.random.default_rng(6)
    config = small("lstm")
    imvm = random_bits(rng, (1, 2, 4, 9))
    fw = forward(config, layer_weights(config, rng), imvm)
    i, f, g, o = (imvm[0, :, k] for k in range(4))
    assert np.array_equal(fw.saved["i"][0], activation.sigmoid(FP32, i))
    assert np.array_equal(fw.saved["g"][0], activation.tanh(FP32, g))
    c = float_mul(FP32, activation.sigmoid(FP32, i), activation.tanh(FP32, g))
    assert np.array_equal(fw.c[0], c)
    assert np.array_equal(fw.h[0], float_mul(FP32, activation.sigmoid(FP32, o),
                                             activation.tanh(FP32, c)))


def test_last_bw_step_bits():
    """At t = T-1 the recurrent deltas are +0, so dh^ = dy (exact) and, for LSTM, dc^ =
    fm(fm(tanh'(tanh c), o), dy); do* = fm(sig'(o), fm(tanh c, dy))."""
    rng = np.random.default_rng(7)
    config = small("lstm")
    weights = layer_weights(config, rng)
    fw = forward(config, weights, random_bits(rng, (3, 2, 4, 9)))
    dy = random_bits(rng, (3, 2, 9))
    bw = backward(config, weights, fw, dy)
    o, c = fw.saved["o"][2], fw.c[2]
    tc = activation.tanh(FP32, c)
    do = float_mul(FP32, activation.sigmoid_derivative(FP32, o), float_mul(FP32, tc, dy[2]))
    assert np.array_equal(bw.d_input[2, :, 3], do)
    dc_hat = float_mul(FP32, float_mul(FP32, activation.tanh_derivative(FP32, tc), o), dy[2])
    assert np.array_equal(bw.dc_prev[2], float_mul(FP32, fw.saved["f"][2], dc_hat))


def test_gru_bias_n_is_added_on_the_fpga():
    """bR_n enters n inside the reset gate: changing it changes h; a layer without biases
    adds +0."""
    rng = np.random.default_rng(8)
    config = small("gru")
    rows = 3 * 9
    weight_hh = rng.uniform(-0.5, 0.5, (rows, 9))
    imvm = random_bits(rng, (2, 2, 3, 9))
    without = LayerWeights.from_arrays(config, weight_hh)
    assert np.array_equal(without.bias_n, np.zeros(9, np.uint32))
    bias = np.zeros(rows)
    bias[18:] = 0.25
    with_bias = LayerWeights.from_arrays(config, weight_hh, bias)
    first = forward(config, without, imvm)
    second = forward(config, with_bias, imvm)
    # hn = fa(R_n h + bR_n): at t = 0, R_n h = +0, so hn is the bias
    assert np.array_equal(second.saved["hn"][0], to_bits(np.full((2, 9), 0.25)))
    assert not np.array_equal(first.h[0], second.h[0])


def test_full_size_step():
    """One step of the paper's 1,024-cell LSTM (1,024 x 1,024 per unit on 256 PEs: 4
    slices) FW and BW: runs in seconds; the recurrent sums within the fp32 bound of float64."""
    rng = np.random.default_rng(9)
    config = FarnnConfig(batch=1)
    w = random_bits(rng, (4, 1024, 1024), 0.05)
    weights = LayerWeights(recurrent=w, recurrent_t=np.ascontiguousarray(
        w.transpose(0, 2, 1)))
    imvm = random_bits(rng, (2, 1, 4, 1024))
    fw = forward(config, weights, imvm)
    h0 = from_bits(fw.h[0]).astype(np.float64)
    exact = np.einsum("khr,br->bkh", from_bits(w).astype(np.float64), h0)
    a = from_bits(fw.saved["i"][1])
    assert np.abs(a - sigmoid(from_bits(imvm[1, :, 0]) + exact[:, 0])).max() < 1e-5
    bw = backward(config, weights, fw, random_bits(rng, (2, 1, 1024)))
    assert bw.dv_prev.shape == (2, 1, 1024) and bw.dc_prev.shape == (2, 1, 1024)


def test_fast_product_is_the_float_mul_golden():
    """rmvm's products: numpy's IEEE float32 multiply gives the golden's bits over its whole
    operand mix (subnormals, ties, overflow, specials; NaNs canonical)."""
    from nnrtl.sim.golden.farnn.rmvm import fp32_mul
    from nnrtl.sim.golden.float import random_operands
    a, b, kinds = random_operands(FP32, "mul", 200_000, seed=11)
    assert {"subnormal", "tie", "overflow", "special"} <= set(kinds)
    assert np.array_equal(fp32_mul(a, b), float_mul(FP32, a, b))


def test_fast_sum_is_the_float_add_and_accumulator_golden():
    from nnrtl.sim.golden.accumulator import streaming_sums
    from nnrtl.sim.golden.farnn.rmvm import fp32_add, fp32_streaming_sums
    from nnrtl.sim.golden.float import random_operands
    a, b, kinds = random_operands(FP32, "add", 200_000, seed=12)
    assert {"subnormal", "tie", "overflow", "special", "cancellation"} <= set(kinds)
    assert np.array_equal(fp32_add(a, b), float_add(FP32, a, b))
    # streams mixing every kind of operand, lengths around the slot count, 1 to 6 slots
    for stages in range(1, 7):
        for length in (1, stages - 1 or 1, stages, stages + 1, 3 * stages + 2, 40):
            streams = np.concatenate([a, b])[: 300 * length].reshape(300, length)
            assert np.array_equal(fp32_streaming_sums(streams, adder_stages=stages),
                                  streaming_sums(FP32, streams, adder_stages=stages)), \
                (stages, length)

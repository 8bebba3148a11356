"""The persistent RNN baseline (:mod:`nnrtl.gen.baseline.persistent_rnn`): its plan, the
numpy model of its multi-block schedule and the kernel in numba's CUDA simulator (one
block: the simulator runs blocks one at a time, so a grid barrier between blocks cannot
be simulated) against PyTorch float64, and ``nnrtl baseline persistent-rnn``."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

from nnrtl.gen.baseline.persistent_backward import (backward, schedule_model_backward,  # noqa: E402
                                                    torch_gradients, weight_gradients)
from nnrtl.gen.baseline.persistent_rnn import (  # noqa: E402
    GATES, MAX_SHARED_FLOATS, MAX_WEIGHTS_PER_THREAD, forward, input_projection, plan, run,
    schedule_model, torch_forward)

#: fp32 arithmetic against float64 over a few steps.
BOUND = 1e-5


def _layer(cell, inputs, hidden, batch, steps, seed):
    rng = np.random.default_rng(seed)
    gates = GATES[cell]
    scale = 1 / np.sqrt(hidden)
    weights = (rng.uniform(-scale, scale, (gates * hidden, inputs)).astype(np.float32),
               rng.uniform(-scale, scale, (gates * hidden, hidden)).astype(np.float32),
               rng.uniform(-scale, scale, gates * hidden).astype(np.float32),
               rng.uniform(-scale, scale, gates * hidden).astype(np.float32))
    x = rng.uniform(-1, 1, (steps, batch, inputs)).astype(np.float32)
    h0 = rng.uniform(-0.5, 0.5, (batch, hidden)).astype(np.float32)
    c0 = rng.uniform(-0.5, 0.5, (batch, hidden)).astype(np.float32) if cell == "lstm" \
        else None
    return weights, x, h0, c0


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("hidden, batch, blocks", [(1152, 4, None), (2048, 1, None),
                                                   (40, 3, 4), (7, 2, 3), (1152, 64, None),
                                                   (1152, 64, 132), (2048, 64, 132),
                                                   (2048, 32, None)])
def test_plan_covers_every_row_and_batch_element_once_within_the_limits(cell, hidden, batch,
                                                                          blocks):
    p = plan(cell, hidden, batch, blocks=blocks)
    assert p.blocks * p.units >= hidden > (p.blocks - 1) * p.units
    assert p.slices * p.columns >= hidden > (p.slices - 1) * p.columns
    assert p.passes * p.chunk >= batch > (p.passes - 1) * p.chunk
    assert p.threads <= 1024 and p.units * p.slices * p.gates * p.chunk <= MAX_SHARED_FLOATS
    assert p.weights_per_thread <= MAX_WEIGHTS_PER_THREAD
    if blocks is not None:
        assert p.blocks <= blocks and p.units == -(-hidden // blocks)


def test_a_batch_over_shared_memory_goes_in_passes():
    """LSTM, 1,152 units, batch 64 on 132 blocks: 9 units a block; a unit's 4 x 1,152
    weights need 29 threads of at most 160; 9 x 29 x 4 partial sums a batch element leave
    room for 11 of 12,288 floats, so 6 passes of 11 elements."""
    p = plan("lstm", 1152, 64, blocks=132)
    assert (p.units, p.slices, p.chunk, p.passes, p.blocks) == (9, 29, 11, 6, 128)
    assert (9 * 29 * 4 * 11 <= MAX_SHARED_FLOATS < 9 * 29 * 4 * 12)
    # where the whole batch fits, a unit has a thread for each element, in one pass
    p = plan("lstm", 1152, 4)
    assert (p.slices, p.chunk, p.passes) == (29, 4, 1)


def test_plan_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match=r"^cell must be one of lstm, gru, not 'rnn'$"):
        plan("rnn", 8, 1)
    with pytest.raises(ValueError, match=r"^hidden_size 41000 needs 1025 threads a unit"):
        plan("lstm", 41000, 1)
    with pytest.raises(ValueError, match=r"^1152 units of hidden_size 1152 need 33408 "
                                         r"threads"):
        plan("lstm", 1152, 1, blocks=1)
    with pytest.raises(ValueError, match=r"^the simulator runs one block"):
        plan("lstm", 1152, 4, simulator=True)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_schedule_model_of_several_blocks_equals_pytorch(cell):
    """40 units over 4 blocks, rows cut into slices: the schedule's float32 sums against
    PyTorch float64."""
    (w_ih, w_hh, b_ih, b_hh), x, h0, c0 = _layer(cell, 5, 40, 3, 6, seed=1)
    p = plan(cell, 40, 3, blocks=4)
    assert p.blocks == 4 and p.slices > 1
    y, h_n, c_n = schedule_model(p, input_projection(x, w_ih, b_ih, b_hh, cell), w_hh, b_hh,
                                 h0, c0)
    want = torch_forward(cell, (w_ih, w_hh, b_ih, b_hh), x, h0, c0)
    for got, ref in zip((y, h_n, c_n), want):
        if ref is not None:
            np.testing.assert_allclose(got, ref, rtol=0, atol=BOUND)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_kernel_in_the_simulator_equals_pytorch_and_the_schedule(cell):
    """One block of 6 units, rows in slices of 6 columns, batch 2, 5 steps."""
    (w_ih, w_hh, b_ih, b_hh), x, h0, c0 = _layer(cell, 4, 6, 2, 5, seed=2)
    p = plan(cell, 6, 2, simulator=True)
    xw = input_projection(x, w_ih, b_ih, b_hh, cell)
    y, h_n, c_n, _saved, _seconds = forward(p, xw, w_hh, b_hh, h0, c0)
    want = torch_forward(cell, (w_ih, w_hh, b_ih, b_hh), x, h0, c0)
    model = schedule_model(p, xw, w_hh, b_hh, h0, c0)
    for got, ref, same in zip((y, h_n, c_n), want, model):
        if ref is not None:
            np.testing.assert_allclose(got, ref, rtol=0, atol=BOUND)
            np.testing.assert_allclose(got, same, rtol=0, atol=1e-6)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_kernels_in_the_simulator_take_the_batch_in_passes(cell):
    """Batch 5 through a shared memory of 48 floats: one thread a unit, 6 units x 4 or 3
    gates leave room for 2 elements, so 3 passes; forward and backward equal their
    schedules and PyTorch."""
    weights, x, h0, c0 = _layer(cell, 3, 6, 5, 4, seed=7)
    w_ih, w_hh, b_ih, b_hh = weights
    p = plan(cell, 6, 5, simulator=True, shared_floats=48)
    assert (p.units, p.slices, p.chunk, p.passes) == (6, 1, 2, 3)
    xw = input_projection(x, w_ih, b_ih, b_hh, cell)
    y, h_n, c_n, saved, _seconds = forward(p, xw, w_hh, b_hh, h0, c0)
    for got, same in zip((y, h_n, c_n), schedule_model(p, xw, w_hh, b_hh, h0, c0)):
        if same is not None:
            np.testing.assert_allclose(got, same, rtol=0, atol=1e-6)
    _check_backward_kernel(p, cell, weights, x, h0, c0, y, saved, seed=8)


def _check_backward_kernel(p, cell, weights, x, h0, c0, y, saved, *, seed):
    """The backward kernel of plan ``p`` against its numpy schedule and PyTorch autograd,
    for a random ``dy``."""
    dy = np.random.default_rng(seed).uniform(-1, 1, y.shape).astype(np.float32)
    dz_x, dz_h, dh0, dc0, _seconds = backward(p, dy, saved, y, h0, c0, weights[1])
    model = schedule_model_backward(p, dy, saved, y, h0, c0, weights[1])
    for got, same in zip((dz_x, dz_h, dh0, dc0), model):
        if same is not None:
            np.testing.assert_allclose(got, same, rtol=0, atol=1e-6)
    _check_gradients(cell, weights, x, h0, c0, y, dy, dz_x, dz_h, dh0, dc0)


def _check_gradients(cell, weights, x, h0, c0, y, dy, dz_x, dz_h, dh0, dc0):
    grads = weight_gradients(x, y, h0, dz_x, dz_h, weights[0])
    grads.update(h0=dh0, c0=dc0)
    want = torch_gradients(cell, weights, x, h0, c0, dy)
    assert set(want) <= set(grads)
    for name, ref in want.items():
        np.testing.assert_allclose(grads[name], ref, rtol=0, atol=BOUND, err_msg=name)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_backward_schedule_model_of_several_blocks_equals_pytorch_autograd(cell):
    """40 units over 4 blocks: every gradient of ``sum(y * dy)`` (weights, biases, the
    inputs, the initial states) against PyTorch float64 autograd."""
    weights, x, h0, c0 = _layer(cell, 5, 40, 3, 6, seed=3)
    w_ih, w_hh, b_ih, b_hh = weights
    p = plan(cell, 40, 3, blocks=4)
    xw = input_projection(x, w_ih, b_ih, b_hh, cell)
    dy = np.random.default_rng(4).uniform(-1, 1, (6, 3, 40)).astype(np.float32)
    # the forward's saved values from the simulator-free schedule: recompute them
    y, _, _ = schedule_model(p, xw, w_hh, b_hh, h0, c0)
    saved = _saved(cell, xw, w_hh, b_hh, h0, c0, y)
    _check_gradients(cell, weights, x, h0, c0, y, dy,
                     *schedule_model_backward(p, dy, saved, y, h0, c0, w_hh))


def _saved(cell, xw, w_hh, b_hh, h0, c0, y):
    """What the forward kernel saves, from numpy."""
    hidden = w_hh.shape[1]
    previous = np.concatenate([h0[None], y[:-1]])
    z = previous @ w_hh.T
    sig = lambda v: 1 / (1 + np.exp(-v))       # noqa: E731
    if cell == "lstm":
        pre = xw + z
        i, f, g, o = (pre[..., k * hidden:(k + 1) * hidden] for k in range(4))
        i, f, g, o = sig(i), sig(f), np.tanh(g), sig(o)
        cells, c = [], c0
        for t in range(len(y)):
            c = f[t] * c + i[t] * g[t]
            cells.append(c)
        return np.concatenate([i, f, g, o, np.stack(cells)], axis=-1).astype(np.float32)
    hn = z[..., 2 * hidden:] + b_hh[2 * hidden:]
    r = sig(xw[..., :hidden] + z[..., :hidden])
    u = sig(xw[..., hidden:2 * hidden] + z[..., hidden:2 * hidden])
    n = np.tanh(xw[..., 2 * hidden:] + r * hn)
    return np.concatenate([r, u, n, hn], axis=-1).astype(np.float32)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_backward_kernel_in_the_simulator_equals_pytorch_autograd(cell):
    weights, x, h0, c0 = _layer(cell, 4, 6, 2, 5, seed=5)
    w_ih, w_hh, b_ih, b_hh = weights
    p = plan(cell, 6, 2, simulator=True)
    xw = input_projection(x, w_ih, b_ih, b_hh, cell)
    y, _h_n, _c_n, saved, _seconds = forward(p, xw, w_hh, b_hh, h0, c0)
    np.testing.assert_allclose(saved, _saved(cell, xw, w_hh, b_hh, h0, c0, y), rtol=0,
                               atol=1e-6)
    _check_backward_kernel(p, cell, weights, x, h0, c0, y, saved, seed=6)


def test_run_reports_the_error_and_the_rate():
    result = run("lstm", 3, 5, 2, 3, device="simulator", backward=True)
    assert result["device"] == "simulator" and result["blocks"] == 1
    assert result["max_abs_error_vs_torch"] < BOUND
    assert result["backward_max_abs_error_vs_torch"] < BOUND
    assert result["seconds"] > 0 and result["tflops"] > 0
    assert result["backward_seconds"] > 0 and result["backward_tflops"] > 0


def test_command_prints_one_json_line_and_refuses_a_size_it_cannot_run():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    command = [sys.executable, "-m", "nnrtl.gen.cli", "baseline", "persistent-rnn",
               "--cell", "gru", "--hidden-size", "5", "--seq-len", "3", "--backward",
               "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    result = json.loads(line)
    assert {"device", "max_abs_error_vs_torch", "seconds", "tflops"} <= set(result)
    assert result["max_abs_error_vs_torch"] < BOUND
    assert result["backward_max_abs_error_vs_torch"] < BOUND
    assert result["within_tolerance"] is True
    done = subprocess.run(command + ["--tolerance", "1e-12"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 1 and json.loads(done.stdout)["within_tolerance"] is False
    assert "more than --tolerance 1e-12" in done.stderr
    done = subprocess.run(command[:-1] + ["--hidden-size", "5000"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("nnrtl: error: the simulator runs one block")


def test_bench_sweeps_and_labels_what_it_does_not_measure(tmp_path):
    """The Fig. 1 bench at simulator size (a row the plan refuses is labelled so); on a
    machine without a CUDA device its default run measures nothing and says why."""
    from nnrtl.gen.baseline.bench import bench_persistent_rnn, markdown
    result = bench_persistent_rnn(tmp_path, device="simulator", hidden_sizes=(4, 2000),
                                  batches=(1, 2), steps=2)
    assert result["measured"] and [row["batch"] for row in result["rows"]] == [1, 2, 1, 2]
    small, large = result["rows"][:2], result["rows"][2:]
    assert all(row["max_abs_error_vs_torch"] < BOUND and row["tflops"] > 0 for row in small)
    assert all(row["refused"].startswith("the simulator runs one block") for row in large)
    assert (tmp_path / "persistent_rnn.png").stat().st_size > 0
    text = markdown(result)
    assert "| 2,000 | 1 | refused: the simulator runs one block" in text
    nothing = bench_persistent_rnn(tmp_path)          # no GPU here: nothing measured
    assert nothing["measured"] is False and "no CUDA device" in nothing["reason"]
    assert "Not measured: no CUDA device" in markdown(nothing)


@settings(max_examples=300, deadline=None)
@given(cell=st.sampled_from(["lstm", "gru"]), hidden=st.integers(1, 9000),
       batch=st.integers(1, 256), blocks=st.one_of(st.none(), st.integers(1, 600)))
def test_plan_draws_fit_their_limits_or_say_why(cell, hidden, batch, blocks):
    """Random layers: a plan covers every row and batch element within the thread,
    register and shared-memory limits, or a ValueError names the sizes."""
    try:
        p = plan(cell, hidden, batch, blocks=blocks)
    except ValueError as error:
        assert f"hidden_size {hidden}" in str(error)
        return
    assert p.blocks * p.units >= hidden and p.slices * p.columns >= hidden
    assert p.passes * p.chunk >= batch > (p.passes - 1) * p.chunk
    assert p.threads <= 1024 and p.weights_per_thread <= MAX_WEIGHTS_PER_THREAD
    assert p.units * p.slices * p.gates * p.chunk <= MAX_SHARED_FLOATS

"""The numba-cuda kernel of :mod:`.persistent_rnn`. numba is imported where it is used
(:func:`build`: the rest of nnrtl never needs it), into this module's globals: numba's
CUDA simulator runs a kernel with the ``cuda`` of its function's globals replaced by its
own, which a closure's would escape."""

import math

__all__ = ["build"]

#: ``numba.cuda`` and ``numba.float32``, once :func:`build` has run.
cuda = float32 = None


def build(gates, units, slices, columns, batch):
    """The kernel ``kernel(xw, w_hh, b_hn, h_buf, c, y)`` of a plan (module docstring of
    :mod:`.persistent_rnn`): ``gates`` 4 (LSTM) or 3 (GRU); the local and shared arrays'
    sizes are these constants."""
    global cuda, float32
    from numba import cuda, float32

    weights = gates * columns
    shared = units * slices * gates * batch

    @cuda.jit(device=True)
    def sigmoid(z):
        return float32(1.0) / (float32(1.0) + math.exp(-z))

    @cuda.jit
    def kernel(xw, w_hh, b_hn, h_buf, c, y):
        hidden = w_hh.shape[1]
        steps = xw.shape[0]
        grid = cuda.cg.this_grid()
        tid = cuda.threadIdx.x
        u, s = tid // slices, tid % slices
        unit = cuda.blockIdx.x * units + u
        first = s * columns
        w = cuda.local.array(weights, float32)
        for g in range(gates):
            for k in range(columns):
                col = first + k
                w[g * columns + k] = w_hh[g * hidden + unit, col] \
                    if unit < hidden and col < hidden else float32(0.0)
        partial = cuda.shared.array(shared, float32)
        base = u * slices * gates * batch
        for t in range(steps):
            src, dst = t % 2, (t + 1) % 2
            for b in range(batch):
                for g in range(gates):
                    acc = float32(0.0)
                    for k in range(columns):
                        col = first + k
                        if col < hidden:
                            acc += w[g * columns + k] * h_buf[src, b, col]
                    partial[base + (s * gates + g) * batch + b] = acc
            cuda.syncthreads()
            if s < batch and unit < hidden:
                b = s
                z0 = float32(0.0)
                z1 = float32(0.0)
                z2 = float32(0.0)
                z3 = float32(0.0)
                for q in range(slices):
                    at = base + q * gates * batch + b
                    z0 += partial[at]
                    z1 += partial[at + batch]
                    z2 += partial[at + 2 * batch]
                    if gates == 4:
                        z3 += partial[at + 3 * batch]
                if gates == 4:
                    i = sigmoid(xw[t, b, unit] + z0)
                    f = sigmoid(xw[t, b, hidden + unit] + z1)
                    gg = math.tanh(xw[t, b, 2 * hidden + unit] + z2)
                    o = sigmoid(xw[t, b, 3 * hidden + unit] + z3)
                    cell_ = f * c[b, unit] + i * gg
                    c[b, unit] = cell_
                    h = o * math.tanh(cell_)
                else:
                    r = sigmoid(xw[t, b, unit] + z0)
                    zz = sigmoid(xw[t, b, hidden + unit] + z1)
                    n = math.tanh(xw[t, b, 2 * hidden + unit] + r * (z2 + b_hn[unit]))
                    h = (float32(1.0) - zz) * n + zz * h_buf[src, b, unit]
                h_buf[dst, b, unit] = h
                y[t, b, unit] = h
            cuda.syncthreads()
            grid.sync()

    return kernel

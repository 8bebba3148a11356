"""The numba-cuda kernel of :mod:`.persistent_rnn`. numba is imported where it is used
(:func:`build`: the rest of nnrtl never needs it), into this module's globals: numba's
CUDA simulator runs a kernel with the ``cuda`` of its function's globals replaced by its
own, which a closure's would escape."""

import math

__all__ = ["build"]

#: ``numba.cuda`` and ``numba.float32``, once :func:`build` has run.
cuda = float32 = None


def build(gates, units, slices, columns, batch, chunk):
    """The forward kernel ``kernel(xw, w_hh, b_hn, h_buf, c, y, saved)`` of a plan
    (module docstring of :mod:`.persistent_rnn`): ``gates`` 4 (LSTM) or 3 (GRU), the batch
    taken ``chunk`` elements a pass through shared memory; the local and shared arrays'
    sizes are these constants. ``saved`` takes what the backward pass
    reads (``T x B x 5H``: i, f, g, o, c of an LSTM; ``T x B x 4H``: r, z, n and
    ``W_hn h + b_hn`` of a GRU)."""
    global cuda, float32
    from numba import cuda, float32

    weights = gates * columns
    shared = units * slices * gates * chunk

    @cuda.jit(device=True)
    def sigmoid(z):
        return float32(1.0) / (float32(1.0) + math.exp(-z))

    @cuda.jit
    def kernel(xw, w_hh, b_hn, h_buf, c, y, saved):
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
        base = u * slices * gates * chunk
        for t in range(steps):
            src, dst = t % 2, (t + 1) % 2
            for first_b in range(0, batch, chunk):
                for bc in range(chunk):
                    b = first_b + bc
                    for g in range(gates):
                        acc = float32(0.0)
                        if b < batch:
                            for k in range(columns):
                                col = first + k
                                if col < hidden:
                                    acc += w[g * columns + k] * h_buf[src, b, col]
                        partial[base + (s * gates + g) * chunk + bc] = acc
                cuda.syncthreads()
                for bc in range(s, chunk, slices):
                    b = first_b + bc
                    if b < batch and unit < hidden:
                        z0 = float32(0.0)
                        z1 = float32(0.0)
                        z2 = float32(0.0)
                        z3 = float32(0.0)
                        for q in range(slices):
                            at = base + q * gates * chunk + bc
                            z0 += partial[at]
                            z1 += partial[at + chunk]
                            z2 += partial[at + 2 * chunk]
                            if gates == 4:
                                z3 += partial[at + 3 * chunk]
                        if gates == 4:
                            i = sigmoid(xw[t, b, unit] + z0)
                            f = sigmoid(xw[t, b, hidden + unit] + z1)
                            gg = math.tanh(xw[t, b, 2 * hidden + unit] + z2)
                            o = sigmoid(xw[t, b, 3 * hidden + unit] + z3)
                            cell_ = f * c[b, unit] + i * gg
                            c[b, unit] = cell_
                            h = o * math.tanh(cell_)
                            saved[t, b, unit] = i
                            saved[t, b, hidden + unit] = f
                            saved[t, b, 2 * hidden + unit] = gg
                            saved[t, b, 3 * hidden + unit] = o
                            saved[t, b, 4 * hidden + unit] = cell_
                        else:
                            r = sigmoid(xw[t, b, unit] + z0)
                            zz = sigmoid(xw[t, b, hidden + unit] + z1)
                            n = math.tanh(xw[t, b, 2 * hidden + unit] + r * (z2 + b_hn[unit]))
                            saved[t, b, unit] = r
                            saved[t, b, hidden + unit] = zz
                            saved[t, b, 2 * hidden + unit] = n
                            saved[t, b, 3 * hidden + unit] = z2 + b_hn[unit]
                            h = (float32(1.0) - zz) * n + zz * h_buf[src, b, unit]
                        h_buf[dst, b, unit] = h
                        y[t, b, unit] = h
                cuda.syncthreads()
            grid.sync()

    return kernel


def build_backward(gates, units, slices, rows, batch, chunk):
    """The backward kernel ``kernel(dy, saved, y, h0, c0, w_hh, dz_x, dz_h, dh_buf, dc)``
    of a plan: thread ``(u, s)`` keeps rows ``s * rows`` to ``(s + 1) * rows`` of its unit's
    column of ``W_hh`` (``rows = ceil(G H / slices)``); each step, from the last, thread
    ``(u, s)`` forms its unit's pre-activation gradients of batch elements ``s``, ``s +
    slices``, ... (``dz_x`` the input part's,
    ``dz_h`` the recurrent part's: a GRU's candidate row times ``r``), the grid meets,
    then ``dh_{t-1} = W_hh^T dz_h`` (plus a GRU's ``z dh``) for the block's units, summed
    slice by slice, ``chunk`` batch elements a pass through shared memory. ``dh_buf[T %
    2]`` and ``dc`` end as the initial states' gradients."""
    global cuda, float32
    from numba import cuda, float32

    shared = units * slices * chunk

    @cuda.jit
    def kernel(dy, saved, y, h0, c0, w_hh, dz_x, dz_h, dh_buf, dc):
        hidden = w_hh.shape[1]
        steps = dy.shape[0]
        grid = cuda.cg.this_grid()
        tid = cuda.threadIdx.x
        u, s = tid // slices, tid % slices
        unit = cuda.blockIdx.x * units + u
        first = s * rows
        w = cuda.local.array(rows, float32)
        for k in range(rows):
            row = first + k
            w[k] = w_hh[row, unit] if unit < hidden and row < gates * hidden \
                else float32(0.0)
        partial = cuda.shared.array(shared, float32)
        base = u * slices * chunk
        for step in range(steps):
            t = steps - 1 - step
            cur, nxt = step % 2, (step + 1) % 2
            for b in range(s, batch, slices):
                if unit < hidden:
                    dh = dy[t, b, unit] + dh_buf[cur, b, unit]
                    if gates == 4:
                        i = saved[t, b, unit]
                        f = saved[t, b, hidden + unit]
                        g = saved[t, b, 2 * hidden + unit]
                        o = saved[t, b, 3 * hidden + unit]
                        tc = math.tanh(saved[t, b, 4 * hidden + unit])
                        prev = saved[t - 1, b, 4 * hidden + unit] if t > 0 else c0[b, unit]
                        dct = dc[b, unit] + dh * o * (float32(1.0) - tc * tc)
                        dc[b, unit] = dct * f
                        d0 = dct * g * i * (float32(1.0) - i)
                        d1 = dct * prev * f * (float32(1.0) - f)
                        d2 = dct * i * (float32(1.0) - g * g)
                        d3 = dh * tc * o * (float32(1.0) - o)
                        dz_x[t, b, 3 * hidden + unit] = d3
                        dz_h[t, b, 3 * hidden + unit] = d3
                        dz_x[t, b, 2 * hidden + unit] = d2
                        dz_h[t, b, 2 * hidden + unit] = d2
                    else:
                        r = saved[t, b, unit]
                        z = saved[t, b, hidden + unit]
                        n = saved[t, b, 2 * hidden + unit]
                        hn = saved[t, b, 3 * hidden + unit]
                        prev = y[t - 1, b, unit] if t > 0 else h0[b, unit]
                        dn = dh * (float32(1.0) - z) * (float32(1.0) - n * n)
                        d0 = dn * hn * r * (float32(1.0) - r)
                        d1 = dh * (prev - n) * z * (float32(1.0) - z)
                        dz_x[t, b, 2 * hidden + unit] = dn
                        dz_h[t, b, 2 * hidden + unit] = dn * r
                    dz_x[t, b, unit] = d0
                    dz_h[t, b, unit] = d0
                    dz_x[t, b, hidden + unit] = d1
                    dz_h[t, b, hidden + unit] = d1
            grid.sync()
            for first_b in range(0, batch, chunk):
                for bc in range(chunk):
                    b = first_b + bc
                    acc = float32(0.0)
                    if b < batch:
                        for k in range(rows):
                            row = first + k
                            if row < gates * hidden:
                                acc += w[k] * dz_h[t, b, row]
                    partial[base + s * chunk + bc] = acc
                cuda.syncthreads()
                for bc in range(s, chunk, slices):
                    b = first_b + bc
                    if b < batch and unit < hidden:
                        total = float32(0.0)
                        if gates == 3:     # a GRU's direct path: dh_t z
                            total = (dy[t, b, unit] + dh_buf[cur, b, unit]) \
                                * saved[t, b, hidden + unit]
                        for q in range(slices):
                            total += partial[base + q * chunk + bc]
                        dh_buf[nxt, b, unit] = total
                cuda.syncthreads()

    return kernel

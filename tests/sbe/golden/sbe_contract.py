"""Helpers of the SBE golden-model tests, written from the contract's text
(:mod:`nnrtl.sim.golden.sbe`) and not from the model: random valid configurations, a slow
scalar re-implementation of the arithmetic in Python integers, and stream decoders."""

import math

import numpy as np

from nnrtl.hw.sbe.config import SbeConfig
from nnrtl.sim.golden import sbe

# -- Valid random configurations -----------------------------------------------------------

#: (operand_width, acc_width) pairs the random configurations draw from.
WIDTHS = [(16, 32), (8, 16), (8, 24), (12, 28), (18, 40), (6, 16), (16, 48)]


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def random_config(rng, **overrides):
    """A random valid :class:`SbeConfig` (small), drawn until one passes validation
    (whatever rules it holds; this one draws ``bus_weights * operand_width >= acc_width``
    and power-of-two ``post_units`` directly)."""
    for _ in range(10000):
        hidden = int(rng.choice([1, 2, 3, 4, 5, 6, 8, 10, 12, 16]))
        rows = 4 * hidden
        pes = int(rng.choice([d for d in divisors(rows) if d % 4 == 0]
                             + [rows * m for m in (2, 3, 4)]))
        layers = int(rng.choice([1, 2]))
        inputs = int(rng.integers(1, 33))
        widths = [inputs + hidden] + ([2 * hidden] if layers > 1 else [])
        blocks = int(rng.choice(divisors(math.gcd(*widths))))
        batch = int(rng.integers(1, 6))
        width, acc_width = WIDTHS[rng.integers(len(WIDTHS))]
        bus = [1 << n for n in range(11) if acc_width <= (1 << n) * width <= 1024]
        weight_frac = int(rng.integers(1, width))
        act_frac = int(rng.integers(max(1, 3 - weight_frac), width))
        kwargs = dict(
            input_size=inputs, hidden_size=hidden, layers=layers,
            seq_len=batch + int(rng.integers(0, 6)), pes=pes, batch=batch, blocks=blocks,
            bus_weights=int(rng.choice(bus)), batch_norm=bool(rng.integers(2)),
            operand_width=width, acc_width=acc_width, weight_frac=weight_frac,
            act_frac=act_frac, cell_frac=int(rng.integers(3, acc_width - 1)))
        units = min(pes, rows) // 4
        kwargs["post_units"] = int(rng.choice([d for d in divisors(units)
                                               if not d & (d - 1)]))
        kwargs.update(overrides)
        try:
            return SbeConfig(**kwargs)
        except (TypeError, ValueError):
            continue
    raise AssertionError(f"no valid config with {overrides}")


# -- A scalar re-implementation of the contract --------------------------------------------

def s_wrap(value, width):
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def s_saturate(value, fmt):
    return min(max(value, fmt.min_code), fmt.max_code)


def s_round(value, shift):
    """HALF_UP right shift (exact left shift if ``shift < 0``)."""
    if shift <= 0:
        return value << -shift
    return (value + (1 << (shift - 1))) >> shift


def s_mul(a, a_fmt, b, b_fmt, out_fmt):
    shift = a_fmt.fraction_bits + b_fmt.fraction_bits - out_fmt.fraction_bits
    return s_saturate(s_round(a * b, shift), out_fmt)


def s_pwl(table, x):
    assert table.rounding.name == "HALF_UP"
    x = min(max(x, table.low_code), table.high_code)
    u = x - table.low_code
    k, d = u >> table.offset_bits, u & ((1 << table.offset_bits) - 1)
    total = table.bases[k] + table.slopes[k] * d
    return s_saturate(s_round(total, table.sum_fmt.fraction_bits
                              - table.out_fmt.fraction_bits), table.out_fmt)


def scalar_step(config, params, x, h_prev, c_prev, batch_norm):
    """One step in Python integers, row by row, as the contract reads."""
    W, V, A, E = config.formats
    table = sbe.tables(config)
    v = [int(a) for a in x] + [int(a) for a in h_prev]
    z = []
    for r in range(4 * config.hidden_size):     # the model's rows (padding is the engine's)
        acc = s_wrap(sum(int(params.matrix[r, c]) * v[c] for c in range(len(v))),
                     config.acc_width)
        value = s_saturate(acc + int(params.bias[r]), A)
        if batch_norm:
            value = s_mul(value, A, int(params.bn_scale[r]), E, A)
            value = s_saturate(value + int(params.bn_shift[r]), A)
        z.append(value)
    h, c = [], []
    for j in range(config.hidden_size):
        i = s_pwl(table.sigmoid, z[4 * j])
        u = s_pwl(table.tanh, z[4 * j + 1])
        f = s_pwl(table.sigmoid, z[4 * j + 2])
        o = s_pwl(table.sigmoid, z[4 * j + 3])
        cell = s_saturate(s_mul(f, E, int(c_prev[j]), E, E) + s_mul(i, E, u, E, E), E)
        c.append(cell)
        h.append(s_mul(o, E, s_pwl(table.cell_tanh, cell), E, V))
    return h, c


# -- Streams -------------------------------------------------------------------------------

def signed(word, width):
    return word - (1 << width) if word >> (width - 1) else word


def unique_codes(rng, shape, fmt):
    """Codes all different when the format has enough of them (so a word's value names
    its position), random otherwise."""
    count = math.prod(shape)
    if count <= fmt.max_code - fmt.min_code + 1:
        return rng.permutation(np.arange(fmt.min_code, fmt.min_code + count)).reshape(shape)
    return rng.integers(fmt.min_code, fmt.max_code, size=shape, endpoint=True)


def stream_case(seed):
    """A random config, layer, step count, parameters and inputs for the stream tests."""
    rng = np.random.default_rng(1000 + seed)
    config = random_config(rng).padded       # the layout of the shapes the engine runs
    index = int(rng.integers(config.layers))
    steps = int(rng.integers(1, 3 * config.batch + 2))
    W, V, A, E = config.formats
    shape = config.layer(index)
    rows = config.rows
    params = sbe.LayerParams(
        matrix=unique_codes(rng, (rows, shape.columns), W),
        bias=rng.integers(A.min_code, A.max_code, size=rows, endpoint=True),
        bn_scale=rng.integers(E.min_code, E.max_code, size=rows, endpoint=True),
        bn_shift=rng.integers(A.min_code, A.max_code, size=rows, endpoint=True))
    xs = unique_codes(rng, (steps, shape.input_size), V)
    return config, index, steps, params, xs


STREAM_SEEDS = range(48)


def decode_weights(config, index, steps, beats, params):
    """Walk ``s_weights`` as the contract's text lays it out; check every header value and
    every weight word against the parameters at its (row, column)."""
    shape = config.layer(index)
    width, nt = config.operand_width, config.bus_weights
    k, passes, rpp = config.columns_per_cycle, config.passes, config.rows_per_pass
    bc = shape.block_columns
    position = 0
    # 1. Header: one value per beat, low acc_width bits.
    for j in range(config.hidden_size):
        expected = list(params.bias[4 * j:4 * j + 4])
        if config.batch_norm:
            expected += list(params.bn_scale[4 * j:4 * j + 4])
            expected += list(params.bn_shift[4 * j:4 * j + 4])
        for value in expected:
            beat = sbe.pack_beat(beats[position], width)
            assert beat >> config.acc_width == 0
            assert signed(beat, config.acc_width) == value
            position += 1
    # 2. Blocks in consumption order.
    if config.blocks <= 2:
        order = list(range(config.blocks))
    else:
        order = []
        first = shape.first_hidden_block
        for t0 in range(0, steps, config.batch):
            n = min(config.batch, steps - t0)
            order += list(range(first))
            if config.blocks - first <= 2:
                order += list(range(first, config.blocks))
            else:
                for _ in range(n):
                    order += list(range(first, config.blocks))
    for b in order:
        seen = np.zeros((config.rows, bc), dtype=bool)
        for p in range(passes):
            for q in range(bc // k):
                entry = beats[position:position + config.pes // nt].reshape(-1)
                position += config.pes // nt
                for c in range(k):
                    for r in range(rpp):
                        row, column = p * rpp + r, b * bc + q * k + c
                        assert signed(int(entry[c * rpp + r]), width) == \
                            params.matrix[row, column]
                        seen[row, column - b * bc] = True
        assert seen.all()
    assert position == len(beats)
    return order


def decode_inputs(config, index, beats, xs):
    shape = config.layer(index)
    k, bc, first = config.columns_per_cycle, shape.block_columns, shape.first_hidden_block
    xt = shape.x_columns_in_hidden_blocks
    steps = len(xs)
    seen = np.zeros(xs.shape, dtype=int)
    position = 0
    for t0 in range(0, steps, config.batch):
        n = min(config.batch, steps - t0)
        places = [(t0 + s, b * bc + q * k) for b in range(first) for s in range(n)
                  for q in range(bc // k)]
        places += [(t0 + s, first * bc + q * k) for s in range(n) for q in range(xt // k)]
        for t, column in places:
            for c in range(k):
                assert signed(int(beats[position, c]), config.operand_width) == \
                    xs[t, column + c]
                seen[t, column + c] += 1
            position += 1
    assert position == len(beats) and (seen == 1).all()

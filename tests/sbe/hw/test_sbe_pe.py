# amaranth: UnusedElaboratable=no
"""A group of SBE processing elements (:class:`nnrtl.hw.sbe.PEGroup`) in the Amaranth
simulator: its accumulators against the golden model's :func:`~nnrtl.sim.golden.sbe.accumulate`
(products of DSP and LUT multipliers, the wrap at ``acc_width``), and the BB-FIFO carrying
partial sums from block to block, including a segment that reads its entry the cycle after
it was written."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.sbe import PEGroup, SbeConfig
from nnrtl.sim.golden import sbe as golden

#: 8 x and 4 h columns in 2 blocks of 6; 4 PEs per group (rows 0-3 of the 16).
CONFIG = SbeConfig(input_size=8, hidden_size=4, pes=16, blocks=2, batch=2, seq_len=4,
                   bus_weights=4, post_units=1)


def extreme_codes(rng, fmt, shape):
    """Codes of ``fmt``, a quarter of them at its ends (so that the sums wrap)."""
    codes = rng.integers(fmt.min_code, fmt.max_code, size=shape, endpoint=True)
    ends = rng.random(shape) < 0.25
    return np.where(ends, rng.choice([fmt.min_code, fmt.max_code], size=shape), codes)


def blocked_schedule(config, steps):
    """The controller's order for one batch of ``steps`` steps over two blocks: block 0 for
    every step (each segment ends writing BB-FIFO entry ``s``), then block 1 for every
    step (each starts from entry ``s``, the final one). Yields column steps as dicts."""
    columns = config.block_columns
    for block in range(config.blocks):
        final = block == config.blocks - 1
        for s in range(steps):
            for q in range(columns):
                yield dict(column=block * columns + q, step=s,
                           first=q == 0, last=q == columns - 1,
                           init_zero=block == 0, bb_write=q == columns - 1 and not final,
                           bb=s, capture=final and q == columns - 1)


def simulate(config, matrix, xs, *, lut_pes):
    """Load the first group's weights (column ``c`` at entry ``c``), run
    :func:`blocked_schedule` one column step per cycle, return the accumulators captured
    at the end of each step's final segment."""
    dut = PEGroup(config, lut_pes=lut_pes)
    n, ow = config.bus_weights, config.operand_width
    program = list(blocked_schedule(config, len(xs)))
    sums = {}

    async def testbench(ctx):
        for column in range(matrix.shape[1]):
            ctx.set(dut.w_en, 1)
            ctx.set(dut.w_addr, column)
            ctx.set(dut.w_data, golden.pack_beat(matrix[:n, column], ow))
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        # Column step i is issued at cycle i: weight address at i, x and the BB-FIFO read
        # address at i + 2, the accumulate controls at i + 3; the sum is in acc at i + 4.
        for cycle in range(len(program) + 4):
            if cycle < len(program):
                ctx.set(dut.r_addr, program[cycle]["column"])
            if 0 <= cycle - 2 < len(program):
                op = program[cycle - 2]
                ctx.set(dut.x, int(xs[op["step"], op["column"]]))
                ctx.set(dut.bb_read_addr, op["bb"])
            if 0 <= cycle - 3 < len(program):
                op = program[cycle - 3]
                for name in ("first", "last", "init_zero", "bb_write"):
                    ctx.set(getattr(dut, name), int(op[name]))
                ctx.set(dut.bb_write_addr, op["bb"])
                ctx.set(dut.valid, 1)
            else:
                ctx.set(dut.valid, 0)
            await ctx.tick()
            if 0 <= cycle - 3 < len(program) and program[cycle - 3]["capture"]:
                sums[program[cycle - 3]["step"]] = [ctx.get(dut.acc[pe]) for pe in range(n)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return [sums[s] for s in range(len(xs))]


@pytest.mark.parametrize("lut_pes", [0, 2, 4])
@pytest.mark.parametrize("steps", [1, 2])
def test_pe_group_sums_match_golden(lut_pes, steps):
    config = CONFIG
    rng = np.random.default_rng(10 * lut_pes + steps)
    fmts = config.formats
    params = golden.LayerParams(
        matrix=extreme_codes(rng, fmts.weight, (config.rows, config.columns)),
        bias=np.zeros(config.rows, dtype=np.int64))
    xs = extreme_codes(rng, fmts.vector, (steps, config.columns))
    # PE 0: -1.0 * -1.0 in 8 of the 12 columns: 8 * 2**30 wraps 32 bits.
    params.matrix[0, :] = fmts.weight.min_code
    xs[:, :8] = fmts.vector.min_code
    got = simulate(config, params.matrix, xs, lut_pes=lut_pes)
    wrapped = False
    for s in range(steps):
        x, h = xs[s, :config.input_size], xs[s, config.input_size:]
        expected = golden.accumulate(config, params, x, h)[:config.bus_weights]
        assert got[s] == expected.tolist(), f"step {s}"
        exact = params.matrix[:config.bus_weights].astype(object) @ xs[s].astype(object)
        wrapped |= any(int(e) != int(v) for e, v in zip(expected, exact))
    assert wrapped, "no sum wrapped: the stimulus misses the acc_width wrap"


def test_pe_group_checks_its_parameters():
    with pytest.raises(TypeError, match=r"^config must be an SbeConfig, not 3$"):
        PEGroup(3, lut_pes=0)
    with pytest.raises(TypeError, match=r"^lut_pes must be an integer from 0 to 4 "
                                        r"\(bus_weights\), not 5$"):
        PEGroup(CONFIG, lut_pes=5)
    with pytest.raises(TypeError):
        PEGroup(CONFIG, 1)                         # keyword-only

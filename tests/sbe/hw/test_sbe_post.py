# amaranth: UnusedElaboratable=no
"""The SBE post-processing unit (:class:`nnrtl.hw.sbe.PostProcessingUnit`) in the Amaranth
simulator, against the golden model's :func:`~nnrtl.sim.golden.sbe.preactivation` and
:func:`~nnrtl.sim.golden.sbe.cell_update`: biases, batch normalisation on and off, the
cell state carried from step to step, saturating pre-activations and cells; its latency is
measured and compared with :attr:`PostProcessingUnit.latency`."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.sbe import PostProcessingUnit, SbeConfig
from nnrtl.sim.golden import sbe as golden

#: 8 hidden units over 2 PPs: the unit under test (lane 0) finishes units 0, 2, 4, 6.
BASE = dict(input_size=8, hidden_size=8, pes=32, blocks=2, batch=2, seq_len=4,
            bus_weights=8, post_units=2)
STEPS = 3


def extreme_acc(config, rng):
    """Accumulator codes for every row: a third uniform over ``A``, a third at its ends
    (the bias add and batch norm saturate), a third small (the PWL tables' middle)."""
    fmt = config.formats.acc
    rows = config.rows
    pick = rng.integers(0, 3, size=rows)
    wide = rng.integers(fmt.min_code, fmt.max_code, size=rows, endpoint=True)
    ends = rng.choice([fmt.min_code, fmt.max_code, fmt.min_code + 1, fmt.max_code - 1],
                      size=rows)
    small = rng.integers(-4 << fmt.fraction_bits, 4 << fmt.fraction_bits, size=rows)
    return np.select([pick == 0, pick == 1], [wide, ends], small).astype(np.int64)


def expected_steps(config, params, accs, batch_norm):
    """h and c of every step (golden), from ``c = 0``."""
    c = np.zeros(config.hidden_size, dtype=np.int64)
    hs, cs = [], []
    for acc in accs:
        z = golden.preactivation(config, params, acc, batch_norm=batch_norm)
        h, c = golden.cell_update(config, z, c)
        hs.append(h)
        cs.append(c)
    return hs, cs


def simulate(config, params, accs, *, lane, batch_norm):
    """Run the PP of ``lane`` over ``accs`` (one ``4H`` array per step); returns the h
    codes it produced per step (of its units) and the measured latency in cycles."""
    dut = PostProcessingUnit(config)
    pp, aw, ow = config.post_units, config.acc_width, config.operand_width
    units = list(range(lane, config.hidden_size, pp))
    layout = config.header_layout
    parts = {"bias": params.bias}
    if config.batch_norm:
        parts.update(scale=params.bn_scale, shift=params.bn_shift)
    results, latencies = [], []

    async def testbench(ctx):
        # The header: every value of the unit's row into its parameter word.
        for addr, unit in enumerate(units):
            for kind, codes in parts.items():
                for gate in range(4):
                    ctx.set(dut.hdr_en, 1)
                    ctx.set(dut.hdr_addr, addr)
                    ctx.set(dut.hdr_field, layout.index(kind, gate))
                    ctx.set(dut.hdr_data, int(codes[4 * unit + gate]) & ((1 << aw) - 1))
                    await ctx.tick()
        ctx.set(dut.hdr_en, 0)
        ctx.set(dut.bn_enable, int(batch_norm))
        for step, acc in enumerate(accs):
            # One unit per cycle, back to back; the next step once all are out (the
            # engine never returns to a unit before its h is written).
            issued, outputs, cycle = {}, [], 0
            while len(outputs) < len(units):
                if cycle < len(units):
                    unit = units[cycle]
                    ctx.set(dut.valid, 1)
                    ctx.set(dut.addr, cycle)
                    ctx.set(dut.fresh, int(step == 0))
                    ctx.set(dut.acc, golden.pack_beat(acc[4 * unit:4 * unit + 4], aw))
                    issued[len(issued)] = cycle
                else:
                    ctx.set(dut.valid, 0)
                await ctx.tick()
                cycle += 1
                if ctx.get(dut.h_valid):
                    latencies.append(cycle - issued[len(outputs)])
                    outputs.append(golden.unpack_beat(ctx.get(dut.h), 1, ow)[0])
                assert cycle < 10 * dut.latency + len(units), "no h out"
            results.append(outputs)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return results, latencies, units, dut.latency


@pytest.mark.parametrize("batch_norm, enabled, lane, seed", [
    (False, False, 0, 1), (True, True, 0, 2), (True, False, 1, 3), (True, True, 1, 4)],
    ids=["plain", "bn", "bn-off-lane1", "bn-lane1"])
def test_post_unit_matches_golden(batch_norm, enabled, lane, seed):
    config = SbeConfig(**BASE, batch_norm=batch_norm)
    rng = np.random.default_rng(seed)
    params = golden.random_layer(config, 0, rng)
    accs = [extreme_acc(config, rng) for _ in range(STEPS)]
    hs, cs = expected_steps(config, params, accs, enabled)
    got, latencies, units, latency = simulate(config, params, accs, lane=lane,
                                              batch_norm=enabled)
    for step in range(STEPS):
        assert got[step] == hs[step][units].tolist(), f"step {step}"
    # Measured, not restated: every unit's h comes out `latency` cycles after its valid.
    assert set(latencies) == {latency}
    # The stimulus saturated some pre-activations (z at an end of A).
    acc_fmt = config.formats.acc
    z = golden.preactivation(config, params, accs[0], batch_norm=enabled)
    assert {acc_fmt.min_code, acc_fmt.max_code} & set(z.tolist())


def test_post_unit_saturates_cell():
    """Gates driven to their ends for several steps: c grows by i * u each step and
    saturates at E's largest code, which the RTL reproduces."""
    config = SbeConfig(**BASE, cell_frac=28)        # E spans [-8, 8): c saturates fast
    rng = np.random.default_rng(7)
    params = golden.random_layer(config, 0, rng)
    acc_fmt = config.formats.acc
    # i, f, o at sigmoid's top, u at tanh's top: c_t = c_{t-1} + 1 -> saturates at 8.
    accs = [np.full(config.rows, acc_fmt.max_code, dtype=np.int64)] * 12
    hs, cs = expected_steps(config, params, accs, False)
    assert cs[-1].max() == config.formats.cell.max_code
    got, _, units, _ = simulate(config, params, accs, lane=0, batch_norm=False)
    assert [list(step) for step in got] == [h[units].tolist() for h in hs]


def test_stage_names():
    """The stages the PP's latency is made of (the config's pipeline budget reads them)."""
    config = SbeConfig(**BASE, batch_norm=True)
    stages = PostProcessingUnit.stage_latencies(config)
    assert list(stages) == ["parameter read", "bias add", "batch norm", "gate activation",
                            "cell products", "cell add", "cell activation",
                            "hidden product"]
    assert all(cycles > 0 for cycles in stages.values())
    assert "batch norm" not in PostProcessingUnit.stage_latencies(SbeConfig(**BASE))

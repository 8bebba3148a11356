# amaranth: UnusedElaboratable=no
"""The LPRAM's bank packing (hw/fpdeep/lpram.py): :func:`pack`'s rule against counts by hand,
and a packed LPRAM in the Amaranth simulator: banks of one memory written alone, in random
order and overwritten, each read back unchanged by its neighbours' writes on both ports."""

import numpy as np
from amaranth.hdl import Value
from amaranth.sim import Simulator

from nnrtl.hw.fpdeep import FpConfig, Lpram
from nnrtl.hw.fpdeep.lpram import PACK_BITS, PORT_BITS, load_layout, pack
from nnrtl.sim.tb.fpdeep.fp import pack as pack_value


def test_pack_with_enables_fills_one_port():
    """Banks written alone: ⌊72 / bits⌋ banks a memory, whole banks in one primitive."""
    assert PORT_BITS == 72
    assert pack(9, 16, enables=True) == [range(0, 4), range(4, 8), range(8, 9)]
    assert pack(3, 32, enables=True) == [range(0, 2), range(2, 3)]
    assert pack(2, 96, enables=True) == [range(0, 1), range(1, 2)]       # wider than a port


def test_pack_without_enables_fills_primitives():
    """Whole rows written: lcm(bits, 72) / bits banks when at most 576 bits, else as many
    as 576 bits hold."""
    assert PACK_BITS == 576
    assert pack(20, 40, enables=False) == [range(0, 9), range(9, 18), range(18, 20)]  # 360
    assert pack(10, 32, enables=False) == [range(0, 9), range(9, 10)]                 # 288
    assert pack(19, 74, enables=False) == [range(0, 7), range(7, 14), range(14, 19)]  # 518
    assert pack(1, 700, enables=False) == [range(0, 1)]
    assert [len(g) for g in pack(1134, 40, enables=False)] == [9] * 126


def test_packed_banks_written_alone():
    """P = 1 fixed16: 16-bit banks, 4 a memory (3 × 3 × 2 + 1 = 19 banks in 5 memories)."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=2, n_out=3, p=1)
    assert [len(g) for g in pack(cfg.banks + 1, 16, enables=True)] == [4, 4, 4, 4, 3]
    lpram = Lpram(cfg, eb_port=True)
    rng = np.random.default_rng(14)
    rows = rng.integers(0, 1 << 16, (cfg.banks + 1, cfg.rows))
    order = [(b, r) for b in range(cfg.banks + 1) for r in range(cfg.rows)]
    writes = [order[i] for i in rng.permutation(len(order))] + order[::3]    # overwrites
    sim = Simulator(lpram)
    sim.add_clock(1e-8)

    async def bench(ctx):
        for bank, row in writes:
            rows[bank, row] = rng.integers(0, 1 << 16)
            ctx.set(Value.cast(lpram.load.payload), pack_value(load_layout(cfg), {
                "bank": bank, "row": row, "data": [int(rows[bank, row])]}))
            ctx.set(lpram.load.valid, 1)
            await ctx.tick()
        ctx.set(lpram.load.valid, 0)
        ctx.set(lpram.fp_en, 1)
        ctx.set(lpram.eb_en, 1)
        for row in range(cfg.rows):
            ctx.set(lpram.fp_addr, row)
            ctx.set(lpram.eb_addr, cfg.rows - 1 - row)
            await ctx.tick()
            assert [ctx.get(lpram.fp_data[b][0]) for b in range(cfg.banks + 1)] == \
                list(rows[:, row])
            assert [ctx.get(lpram.eb_data[b][0]) for b in range(cfg.banks)] == \
                list(rows[:cfg.banks, cfg.rows - 1 - row])

    sim.add_testbench(bench)
    sim.run()

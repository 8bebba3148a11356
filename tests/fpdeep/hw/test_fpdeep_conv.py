# amaranth: UnusedElaboratable=no
"""hw/fpdeep/conv.py's shared fixed16 tile (:class:`MacTile`): parameters, the exact dot
product against Python integers with the stage enables held and released, and the
emission: one module per tile shape, instantiated per tile (FP, EB, PG), likewise PG's LGB
groups and the LPRAM's memories (hw.hierarchy.shared)."""

import re

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.fpdeep import FpConfig, Lpram
from nnrtl.hw.fpdeep.conv import MacTile, tree_levels
from nnrtl.hw.fpdeep.eb import EbModule
from nnrtl.hw.fpdeep.fp import FpModule
from nnrtl.hw.fpdeep.pg import LgbGroup, PgModule
from nnrtl.hw.fpdeep.lpram import BankMemory
from nnrtl.hw.hierarchy import convert


@pytest.mark.parametrize("make, message", [
    (lambda: MacTile(0), r"^taps must be a positive integer, not 0$"),
    (lambda: MacTile(9, word_bits=-3), r"^word_bits must be a positive integer, not -3$"),
    (lambda: LgbGroup(0, lanes=1, rows=4, width=40, term_bits=32, fp32=False),
     r"^banks must be a positive integer, not 0$"),
    (lambda: LgbGroup(9, lanes=1, rows=4, width=40, term_bits="32", fp32=False),
     r"^term_bits must be a positive integer, not '32'$"),
    (lambda: BankMemory(4, bank_bits=16, rows=0),
     r"^rows must be a positive integer, not 0$"),
])
def test_bad_parameters(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_lgb_group_shifts():
    with pytest.raises(ValueError, match=r"^shifts must be one of 'lut', 'dsp', not 'DSP'$"):
        LgbGroup(1, lanes=1, rows=4, width=32, term_bits=32, fp32=True, shifts="DSP")
    lut = LgbGroup(1, lanes=1, rows=4, width=32, term_bits=32, fp32=True)
    dsp = LgbGroup(1, lanes=1, rows=4, width=32, term_bits=32, fp32=True, shifts="dsp")
    assert lut.key != dsp.key       # a module of its own per variant


def test_tile_sums_exactly_and_holds_while_disabled():
    """9 taps of signed 16-bit words: every output is Σ a·w of the window that entered
    ``stages`` enabled cycles before (Python integers), and nothing moves while the
    enables are low (the inputs changing meanwhile)."""
    taps = 9
    tile = MacTile(taps)
    stages = 1 + tree_levels(taps)
    assert tile.stages == stages == 5 and tile.sum.shape().width == 36
    rng = np.random.default_rng(14)
    windows = rng.integers(-(1 << 15), 1 << 15, (12, 2, taps))
    windows[0] = -(1 << 15)                               # the extreme products
    enabled = [True] * 6 + [False] * 3 + [True] * 12       # a stall after 6 windows
    got = []

    async def bench(ctx):
        k = 0
        for on in enabled:
            window = windows[k % len(windows)]
            for t in range(taps):
                ctx.set(tile.a[t], int(window[0][t]) & 0xFFFF)
                ctx.set(tile.w[t], int(window[1][t]) & 0xFFFF)
            ctx.set(tile.en, (1 << stages) - 1 if on else 0)
            await ctx.tick()
            got.append((on, ctx.get(tile.sum)))
            k += on
    sim = Simulator(tile)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    want = [sum(int(a) * int(w) for a, w in zip(*window)) for window in windows]
    results = [value for on, value in got]
    moved = [n for n, (on, _) in enumerate(got) if on]
    # the k-th enabled cycle's window comes out after `stages` enabled cycles
    for k in range(len(moved) - stages + 1):
        assert results[moved[k + stages - 1]] == want[k % len(windows)]
    held = [value for on, value in got if not on]
    assert held == [results[moved[5]]] * 3


def _kinds(text):
    """``{module kind: instances}`` of the shared units in ``text``."""
    names = re.findall(r"^module (\S+)\(", text, re.M)
    units = [name for name in names if re.search(r"__[a-z_]+_[0-9a-f]{10}$", name)]
    return {unit: len(re.findall(rf"^  {re.escape(unit)} ", text, re.M)) for unit in units}


def test_units_are_emitted_once_and_instantiated_per_use():
    """P = 2, Q = 3, 3 × 3, not completing: FP 2 CEs of 3 tiles, EB 3 CEs of 2 tiles (a
    9-tap tile module each), PG 3·9·2 one-tap tiles; the LPRAM's 28 banks of 32 bits, 2 a
    memory: 14 alike; PG's 27 LGB banks of 2 · 37 bits, 7 a memory (576 // 74): 3 groups
    of 7 and one of 6. With Q = 2 the 19th bank (the bias) is alone and the EB port
    leaves it: 9 memories of one kind, 1 of another."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=3, n_out=3, p=2,
                   completes=False, partial_in=True)
    fp = _kinds(convert(FpModule(cfg), "fp"))
    assert list(fp.values()) == [6, 14] and all("mac_tile" in k or "bank_memory" in k
                                                 for k in fp)
    eb = _kinds(convert(EbModule(cfg), "eb"))
    assert sorted(eb.values()) == [6, 14]
    pg = _kinds(convert(PgModule(cfg, batch=2), "pg"))
    assert sorted((k.split("__")[1][:-11], n) for k, n in pg.items()) == [
        ("lgb_group", 1), ("lgb_group", 3), ("mac_tile", 54)]
    assert list(_kinds(convert(Lpram(cfg, eb_port=True), "lpram")).values()) == [14]
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=2, n_out=3, p=2,
                   completes=False, partial_in=True)
    assert sorted(_kinds(convert(Lpram(cfg, eb_port=True), "lpram")).values()) == [1, 9]


def test_one_row_units_keep_an_address_pin():
    """A one-row memory (G = passes = 1) still has 1-bit addresses: Amaranth drops a
    zero-width connection from an instance, and Verilator refuses the missing pin."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=1, n_out=2, p=2)
    assert cfg.rows == 1
    text = convert(PgModule(cfg, batch=1), "pg") + convert(Lpram(cfg, eb_port=True), "lp")
    units = "".join(re.findall(r"^module \w+__(?:lgb_group|bank_memory)_\w+\(.*?^endmodule",
                               text, re.M | re.S))
    for port in ("read_addr", "write_addr", "fp_addr", "eb_addr"):
        declared = re.findall(rf"^  input (\[-1:0\] |\[0:0\] )?{port};", units, re.M)
        assert declared and "[-1:0] " not in declared, port

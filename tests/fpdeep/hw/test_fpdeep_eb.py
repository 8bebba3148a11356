# amaranth: UnusedElaboratable=no
"""The FPDeep EB module, its LPRAM read port and the SFU backward step in the Amaranth
simulator, bit-exact against the golden model (nnrtl.sim.golden.fpdeep.eb), randomized
configurations (odd sizes, one group and several, a zero lane, passes, stride, the OCP
partial-error options), inputs with gaps and the output stalled."""

import dataclasses
import random

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from nnrtl.hw.fpdeep import FpConfig, Lpram
from nnrtl.hw.fpdeep.eb import EbModule, SfuBackward, error_layout, partial_error_layout
from nnrtl.hw.fpdeep.fp import out_layout
from nnrtl.hw.fpdeep.line_buffer import pixel_layout
from nnrtl.hw.fpdeep.lpram import load_layout
from nnrtl.sim.golden.fpdeep.eb import sfu_backward
from nnrtl.sim.golden.fpdeep.fp import fp_module
from nnrtl.sim.tb.fpdeep.eb import (describe, expected, output_port, paper_segment,
                                    random_case, stimulus, stream_run)
from nnrtl.sim.tb.fpdeep.fp import pack


def random_configs(count, seed):
    """EB configurations: odd map sides, K 1-5, every pad below K, stride 1-3, P up to
    n_out, Q up to S_IC (passes, ragged last passes), and the OCP options ``partial_in`` /
    ``partial_out``."""
    rng = random.Random(seed)
    configs = []
    while len(configs) < count:
        k = rng.choice((1, 2, 3, 3, 5))
        pad = rng.randrange(k)
        stride = rng.choice((1, 1, 2, 3)) if k > 1 else 1
        w_in = rng.choice((3, 4, 5, 7)) + (k > 3) * 2 + (stride > 1) * 2
        n_out, n_in = rng.randint(1, 5), rng.randint(1, 5)
        cfg = FpConfig(precision="fixed16", k=k, stride=stride, pad=pad, w_in=w_in, n_in=n_in,
                       n_out=n_out, p=rng.randint(1, n_out), q=rng.randint(1, n_in))
        configs.append((cfg, rng.random() < 0.5, rng.random() < 0.5))
    return configs


def case_id(case):
    c, partial_in, partial_out = case
    return (f"k{c.k}s{c.stride}p{c.pad}w{c.w_in}i{c.n_in}q{c.q}o{c.n_out}P{c.p}"
            + "-in" * partial_in + "-out" * partial_out)


def check_run(cfg, images, case_seed, *, partial_in=False, partial_out=False, **run):
    """Stream ``images`` random images through an EbModule (LPRAM loaded first) and
    compare every beat of its output with the golden model."""
    case = random_case(cfg, images, case_seed, partial_in=partial_in)
    stim = stimulus(cfg, case)
    want = expected(cfg, case, partial_out=partial_out)
    port = output_port(partial_out)
    got = stream_run(EbModule(cfg, partial_in=partial_in, partial_out=partial_out), stim,
                     port, len(want), first=("load",), **run)
    layout = partial_error_layout(cfg) if partial_out else error_layout(cfg)
    assert got == want, describe(layout, port, got, want)


@pytest.mark.parametrize("case", random_configs(8, 16), ids=case_id)
def test_eb_module_matches_golden(case):
    cfg, partial_in, partial_out = case
    check_run(cfg, 2, cfg.k + cfg.w_in, partial_in=partial_in, partial_out=partial_out,
              gap=0.3, stall=0.3, seed=cfg.w_in)


def test_random_configs_cover_every_option():
    """The random cases above include passes, a ragged last pass, stride > 1 with rows the
    forward windows never reached, and each OCP option."""
    cases = random_configs(8, 16)
    assert any(c.passes > 1 for c, _, _ in cases)
    assert any(c.n_in % c.q for c, _, _ in cases)
    assert any(c.stride > 1 and (c.w_in + 2 * c.pad - c.k) % c.stride for c, _, _ in cases)
    assert any(i and not o for _, i, o in cases) and any(o and not i for _, i, o in cases)
    assert any(i and o for _, i, o in cases)


def test_eb_module_fp32_matches_golden():
    """fp32 (the ``hw/arith`` units: 1-stage multipliers, 2-stage tree and partial
    adders): two groups, a zero lane, two passes (the second ragged), the downstream
    partial errors added; one image (the float units are slow in the Amaranth
    simulator)."""
    cfg = FpConfig(precision="fp32", k=2, stride=1, pad=1, w_in=4, n_in=3, n_out=3, p=2, q=2,
                   multiplier_stages=1, adder_stages=2)
    check_run(cfg, 1, 5, partial_in=True, gap=0.3, stall=0.3, seed=5)


@pytest.mark.parametrize("cfg", [FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=7,
                                          n_in=2, n_out=5, p=2),
                                 FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=7,
                                          n_in=5, n_out=5, p=2, q=2),
                                 FpConfig(precision="fixed16", k=3, stride=2, pad=1, w_in=7,
                                          n_in=2, n_out=3, p=2)],
                         ids=["one-pass", "passes", "stride2"])
def test_eb_module_full_rate(cfg):
    """Without gaps or stalls an output pixel leaves every ``G · passes`` cycles in steady
    state (:attr:`EbModule.cycles_per_pixel`), also through the stride's dilation stage."""
    eb = EbModule(cfg)
    assert eb.macs == cfg.p * cfg.q * cfg.taps
    assert eb.cycles_per_pixel == cfg.groups * cfg.passes
    assert eb.cycles == cfg.w_in ** 2 * eb.cycles_per_pixel
    case = random_case(cfg, 1, 3)
    stim = stimulus(cfg, case)
    want = expected(cfg, case)
    sim = Simulator(eb)
    sim.add_clock(1e-8)
    times = []

    async def bench(ctx):
        for word in stim["load"]:
            ctx.set(Value.cast(eb.load.payload), word)
            ctx.set(eb.load.valid, 1)
            await ctx.tick()
        ctx.set(eb.load.valid, 0)
        ctx.set(eb.o.ready, 1)
        beats, cycle = list(stim["i"]), 0
        while len(times) < len(want):
            if beats:
                ctx.set(Value.cast(eb.i.payload), beats[0])
            ctx.set(eb.i.valid, int(bool(beats)))
            _, _, ready, valid = await ctx.tick().sample(eb.i.ready, eb.o.valid)
            cycle += 1
            if ready and beats:
                beats.pop(0)
            if valid:
                times.append(cycle)
            assert cycle < 4000, f"error beat {len(times)} of {len(want)} not in 4000 cycles"

    sim.add_testbench(bench)
    sim.run()
    gaps = np.diff(times[cfg.w_in * 2:])
    assert gaps.max() == eb.cycles_per_pixel and gaps.min() == eb.cycles_per_pixel


def test_eb_refusals():
    with pytest.raises(ValueError, match=r"^n_out·k² = 66125 products exceed the 2\^16 a "
                                         r"48-bit sum holds exactly$"):
        EbModule(FpConfig(precision="fixed16", k=5, stride=1, pad=2, w_in=7, n_in=1, n_out=2645,
                          p=1))


def test_eb_ports():
    """The OCP options add ``i_partial`` and swap ``o`` for ``o_partial`` (48-bit fixed16
    partial words); the shared LPRAM port addresses the ``G · passes`` rows."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=5, n_out=3, p=2, q=2)
    plain = EbModule(cfg).signature.members
    assert {"i", "o", "load"} <= set(plain) and "i_partial" not in plain
    both = EbModule(cfg, partial_in=True, partial_out=True)
    members = both.signature.members
    assert "o" not in members and both.partial_in and both.partial_out
    for name in ("i_partial", "o_partial"):
        assert members[name].signature.members["payload"].shape == partial_error_layout(cfg)
    assert partial_error_layout(cfg).size == 48 * cfg.n_in + 1
    shared = EbModule(cfg, shared_lpram=True).signature.members
    assert shared["eb_addr"].shape.stop == cfg.rows == 6 and "load" not in shared


class SharedLpram(wiring.Component):
    """An EB module reading the weights from an LPRAM it does not own (as it reads the FP
    module's): ``load`` goes to the LPRAM, the EB port wired to the EB module."""

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({"load": In(stream.Signature(load_layout(cfg))),
                          "i": In(stream.Signature(pixel_layout(cfg.word_bits, cfg.p))),
                          "o": Out(stream.Signature(error_layout(cfg)))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.lpram = lpram = Lpram(self._cfg, eb_port=True)
        m.submodules.eb = eb = EbModule(self._cfg, shared_lpram=True)
        wiring.connect(m, wiring.flipped(self.load), lpram.load)
        wiring.connect(m, wiring.flipped(self.i), eb.i)
        wiring.connect(m, eb.o, wiring.flipped(self.o))
        m.d.comb += [lpram.eb_addr.eq(eb.eb_addr), lpram.eb_en.eq(eb.eb_en),
                     eb.eb_data.eq(lpram.eb_data)]
        return m


def test_eb_shared_lpram():
    """The FP module's LPRAM, read at rows ``g·passes + r`` through its EB port."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=2, w_in=5, n_in=3, n_out=3, p=2, q=2)
    case = random_case(cfg, 1, 8)
    stim = stimulus(cfg, case)
    want = expected(cfg, case)
    got = stream_run(SharedLpram(cfg), stim, "o", len(want), first=("load",), gap=0.2,
                     stall=0.2, seed=8)
    assert got == want, describe(error_layout(cfg), "o", got, want)


def test_lpram_two_read_ports():
    """FP and EB read different rows in the same cycles; the FP port is unchanged."""
    cfg = FpConfig(precision="fixed16", k=2, stride=1, pad=0, w_in=4, n_in=2, n_out=5, p=2)
    lpram = Lpram(cfg, eb_port=True)
    single = Lpram(cfg)
    assert "eb_data" not in single.signature.members
    rtlil.convert(single)
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 1 << 16, (cfg.banks + 1, cfg.groups, cfg.p))
    sim = Simulator(lpram)
    sim.add_clock(1e-8)

    async def bench(ctx):
        for bank in range(cfg.banks + 1):
            for row in range(cfg.groups):
                ctx.set(Value.cast(lpram.load.payload), pack(load_layout(cfg), {
                    "bank": bank, "row": row, "data": list(rows[bank, row])}))
                ctx.set(lpram.load.valid, 1)
                await ctx.tick()
        ctx.set(lpram.load.valid, 0)
        for step in range(2 * cfg.groups):
            fp_row, eb_row = step % cfg.groups, (step + 1) % cfg.groups
            ctx.set(lpram.fp_addr, fp_row)
            ctx.set(lpram.eb_addr, eb_row)
            ctx.set(lpram.fp_en, 1)
            ctx.set(lpram.eb_en, 1)
            await ctx.tick()
            for bank in range(cfg.banks + 1):
                assert [ctx.get(lpram.fp_data[bank][j]) for j in range(cfg.p)] == \
                    list(rows[bank, fp_row])
                if bank < cfg.banks:
                    assert [ctx.get(lpram.eb_data[bank][j]) for j in range(cfg.p)] == \
                        list(rows[bank, eb_row])
        ctx.set(lpram.eb_en, 0)                          # holds while disabled
        ctx.set(lpram.eb_addr, 0)
        await ctx.tick()
        assert [ctx.get(lpram.eb_data[0][j]) for j in range(cfg.p)] == \
            list(rows[0, (2 * cfg.groups) % cfg.groups])

    sim.add_testbench(bench)
    sim.run()


# -- SFU backward ------------------------------------------------------------------------

SFU_CASES = [  # k, pad, w_in, n_out, p, pool, relu
    (3, 1, 6, 3, 2, (2, 2, 0), True),     # 6×6 → 3×3, two groups, a zero lane
    (3, 1, 7, 2, 2, (2, 2, 0), True),     # 7×7: the last row and column uncovered
    (2, 0, 7, 3, 1, (3, 3, 0), True),     # 6×6 → 2×2 with 3×3/3, three groups
    (3, 1, 5, 3, 3, None, True),          # ReLU' only
    (1, 0, 5, 2, 2, (2, 2, 0), False),    # unpool only
]


@pytest.mark.parametrize("case", range(len(SFU_CASES)))
def test_sfu_backward_matches_golden(case):
    k, pad, w_in, n_out, p, pool, relu = SFU_CASES[case]
    cfg = FpConfig(precision="fixed16", k=k, stride=1, pad=pad, w_in=w_in, n_in=2, n_out=n_out,
                   p=p, pool=pool, relu=relu)
    rng = np.random.default_rng(case)
    one = 1 << cfg.frac_bits
    side, beats = cfg.pool_out, cfg.pool_out ** 2 * cfg.groups
    shape = (side, side, cfg.groups, cfg.p)
    errors, masks, want = [], [], []
    for _ in range(2):                                   # two images back to back
        result = fp_module(cfg, rng.integers(-one, one + 1, (w_in, w_in, 2)),
                           rng.integers(-one // 2, one // 2 + 1, (n_out, 2, k, k)),
                           rng.integers(-one, one + 1, n_out))
        error = rng.integers(-one, one + 1, shape)
        delta = sfu_backward(cfg, error, result.relu.reshape(shape),
                             result.argmax.reshape(shape))
        layout = pixel_layout(cfg.word_bits, cfg.p)
        errors += [pack(layout, list(e)) for e in error.reshape(beats, cfg.p)]
        relu, argmax = (v.reshape(beats, cfg.p) for v in (result.relu, result.argmax))
        masks += [pack(out_layout(cfg), {"data": [0] * cfg.p, "relu": sum(
            int(b) << j for j, b in enumerate(relu[n])),
            "argmax": list(argmax[n]), "last": 0}) for n in range(beats)]
        want += [pack(layout, list(d)) for d in delta.reshape(-1, cfg.p)]
    assert any(want)                                     # some error passes
    got = stream_run(SfuBackward(cfg), {"i_error": errors, "i_mask": masks}, "o", len(want),
                     gap=0.3, stall=0.3, seed=case)
    assert got == want


OVERLAP_CASES = [  # precision, w_out, n_out, p, pool
    ("fixed16", 8, 3, 2, (3, 2, 0)),      # AlexNet's 3×3/2: 8×8 → 3×3, row/column 7 uncovered
    ("fixed16", 9, 2, 1, (3, 1, 0)),      # 3×3/1: up to 9 windows a pixel, a ring of 3 rows
    ("fixed16", 11, 3, 3, (5, 2, 0)),     # 5×5/2: a ring of 3 rows
    ("fp32", 7, 3, 2, (3, 2, 0)),         # the FloatAdd chain, two groups, a zero lane
]


@pytest.mark.parametrize("case", range(len(OVERLAP_CASES)))
def test_sfu_backward_overlap_matches_golden(case):
    """Overlapping pools (random masks, so many pixels sum several errors; fixed16 some
    sums saturate), two images, gaps and stalls."""
    from nnrtl.sim.tb.fpdeep.sfu import expected as sfu_expected
    from nnrtl.sim.tb.fpdeep.sfu import random_case as sfu_case
    from nnrtl.sim.tb.fpdeep.sfu import stimulus as sfu_stimulus
    precision, w_out, n_out, p, pool = OVERLAP_CASES[case]
    cfg = FpConfig(precision=precision, k=1, stride=1, pad=0, w_in=w_out, n_in=2, n_out=n_out, p=p,
                   pool=pool)
    sfu = SfuBackward(cfg)
    assert sfu.depth == (pool[0] - 1) // pool[1] + 1
    data = sfu_case(cfg, 2, 20 + case)
    want = sfu_expected(cfg, data)
    delta = [sfu_backward(cfg, *(data[n][i] for n in ("error", "relu", "argmax")))
             for i in range(2)]
    if precision == "fixed16":
        assert any(np.isin(np.abs(d), [1 << 15, (1 << 15) - 1]).any() for d in delta)
    got = stream_run(sfu, sfu_stimulus(cfg, data), "o", len(want), gap=0.3, stall=0.3,
                     seed=case)
    assert got == want, describe(pixel_layout(cfg.word_bits, cfg.p), "o", got, want)


def test_sfu_backward_refusals():
    with pytest.raises(ValueError, match=r"^SfuBackward runs on the node completing the "
                                         r"layer$"):
        SfuBackward(FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=8, n_in=2, n_out=3,
                             p=2, completes=False))


@pytest.mark.slow
def test_eb_paper_segment_slow():
    cfg = paper_segment()
    assert (cfg.k, cfg.w_in, cfg.n_out, cfg.p, cfg.groups) == (5, 27, 256, 3, 86)
    case = random_case(cfg, 1, 1)
    stim = stimulus(cfg, case)
    want = expected(cfg, case)
    got = stream_run(EbModule(cfg), stim, "o", len(want), first=("load",), timeout=20000)
    assert got == want, describe(error_layout(cfg), "o", got, want)


@pytest.mark.slow
def test_eb_paper_segment_passes_slow():
    """The mapped AlexNet conv3 segment with 13 passes (Q = 1 of S_IC = 13, P = 12, 32
    groups), the chain's partial errors added (as an OCP segment would)."""
    cfg = paper_segment(passes=True)
    assert (cfg.k, cfg.w_in, cfg.n_in, cfg.q, cfg.n_out, cfg.p) == (3, 13, 13, 1, 384, 12)
    check_run(cfg, 1, 2, partial_in=True, timeout=20000)


@pytest.mark.slow
def test_sfu_backward_alexnet_conv1_slow():
    """AlexNet's conv1 completing segment of the 15-VC709 mapping (node 1: 55×55, 96
    channels on P = 12, 8 groups) with its 3×3/2 pool (→ 27×27), one image."""
    from nnrtl.boards import get_board
    from nnrtl.gen.fpdeep import builtin, map_network
    from nnrtl.sim.tb.fpdeep.sfu import expected as sfu_expected
    from nnrtl.sim.tb.fpdeep.sfu import random_case as sfu_case
    from nnrtl.sim.tb.fpdeep.sfu import stimulus as sfu_stimulus
    mapping = map_network(builtin("alexnet"), 15, get_board("vc709"), check_storage=False)
    cfg = FpConfig.from_segment(mapping.nodes[0].segments[0], "fixed16")
    assert (cfg.w_out, cfg.pool, cfg.pool_out, cfg.groups) == (55, (3, 2, 0), 27, 8)
    data = sfu_case(cfg, 1, 3)
    want = sfu_expected(cfg, data)
    got = stream_run(SfuBackward(cfg), sfu_stimulus(cfg, data), "o", len(want),
                     timeout=100000)
    assert got == want, describe(pixel_layout(cfg.word_bits, cfg.p), "o", got, want)

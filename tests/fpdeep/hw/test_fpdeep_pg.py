# amaranth: UnusedElaboratable=no
"""The FPDeep PG module in the Amaranth simulator, bit-exact LGB rows against the golden
model (nnrtl.sim.golden.fpdeep.pg): randomized configurations (odd sizes, strides, one group
and several, with and without the bias bank), several mini-batches (the drain clears the
LGB), inputs with gaps and the output stalled."""

import random

import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.pg import PgModule, gradient_layout, lgb_bits
from nnrtl.sim.tb.fpdeep.eb import describe, paper_segment, stream_run
from nnrtl.sim.tb.fpdeep.pg import expected, random_case, stimulus


def random_configs(count, seed):
    rng = random.Random(seed)
    configs = []
    while len(configs) < count:
        k = rng.choice((1, 2, 3, 3, 5))
        stride = rng.choice((1, 1, 2))
        pad = rng.randrange(k)
        w_in = rng.choice((4, 5, 7)) + (k > 3) * 2
        n_out = rng.randint(1, 5)
        configs.append(FpConfig(precision="fixed16", k=k, stride=stride, pad=pad, w_in=w_in,
                                n_in=rng.randint(1, 3), n_out=n_out, p=rng.randint(1, n_out),
                                completes=rng.random() < 0.6))
    return configs


@pytest.mark.parametrize("cfg", random_configs(6, 15), ids=lambda c: (
    f"k{c.k}s{c.stride}p{c.pad}w{c.w_in}i{c.n_in}o{c.n_out}P{c.p}"
    f"{'b' if c.completes else ''}"))
def test_pg_module_matches_golden(cfg):
    batch = 1 + cfg.w_in % 2
    case = random_case(cfg, batch, 2, cfg.w_in + cfg.k)
    want = expected(cfg, case)
    dut = PgModule(cfg, batch=batch)
    assert len(want) == 2 * dut.lgb_banks * cfg.rows
    got = stream_run(dut, stimulus(cfg, case), "o", len(want), gap=0.3, stall=0.3,
                     seed=cfg.k)
    assert got == want, describe(gradient_layout(cfg, batch), "o", got, want)


@pytest.mark.parametrize("cfg", [
    FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=5, n_out=3, p=2,
             q=2),  # 3 passes, the last ragged
    FpConfig(precision="fixed16", k=2, stride=2, pad=1, w_in=5, n_in=4, n_out=2, p=2, q=1,
             completes=False),  # 4 passes, G = 1, stride
    FpConfig(precision="fp32", k=2, stride=1, pad=0, w_in=3, n_in=3, n_out=2, p=2, q=2,
             multiplier_stages=1),  # fp32, ragged pass
], ids=["fixed16-ragged", "fixed16-s2", "fp32-ragged"])
def test_pg_module_passes_match_golden(cfg):
    """Q < S_IC: the LGB in the LPRAM's layout (rows ``g·passes + r``, the bias in the last
    pass's rows), two mini-batches (fixed16 of two images, fp32 of one), gaps and
    stalls."""
    batch = 1 if cfg.precision == "fp32" else 2
    case = random_case(cfg, batch, 2, cfg.n_in + cfg.q)
    want = expected(cfg, case)
    dut = PgModule(cfg, batch=batch)
    assert dut.macs == cfg.p * cfg.q * cfg.taps and cfg.passes > 1
    assert len(want) == 2 * dut.lgb_banks * cfg.rows
    got = stream_run(dut, stimulus(cfg, case), "o", len(want), gap=0.3, stall=0.3, seed=5)
    assert got == want, describe(gradient_layout(cfg, batch), "o", got, want)


def test_pg_module_fp32_matches_golden():
    """fp32 (FloatMul of 2 stages, the LGB's read-add-write through FloatAdd): two groups,
    a zero lane, the bias bank, two mini-batches of one image; the multipliers' shifts on
    DSP slices, the adders' in LUTs."""
    cfg = FpConfig(precision="fp32", k=2, stride=1, pad=1, w_in=4, n_in=1, n_out=3, p=2,
                   multiplier_stages=2, multiplier_shifts="dsp", adder_shifts="lut")
    dut = PgModule(cfg, batch=1)
    assert dut.lgb_bits == 32
    case = random_case(cfg, 1, 2, 6)
    want = expected(cfg, case)
    got = stream_run(dut, stimulus(cfg, case), "o", len(want), gap=0.3, stall=0.3, seed=6)
    assert got == want, describe(gradient_layout(cfg, 1), "o", got, want)


def test_pg_module_full_rate():
    """Without gaps or stalls one (pixel, group, pass) is taken per cycle: an image of
    ``w_out² · G`` δ beats, each held ``passes`` cycles, plus the line buffer's fill, then
    the drain of 2 cycles per LGB row."""
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=6, n_in=3, n_out=5, p=2, q=2)
    dut = PgModule(cfg, batch=1)
    assert dut.macs == 2 * 2 * 9 and dut.lgb_banks == cfg.banks + 1
    case = random_case(cfg, 1, 1, 4)
    stim = stimulus(cfg, case)
    want = expected(cfg, case)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    taken, out = [], []

    async def bench(ctx):
        acts, deltas, cycle = list(stim["i_act"]), list(stim["i_delta"]), 0
        ctx.set(dut.o.ready, 1)
        while len(out) < len(want):
            for port, beats in ((dut.i_act, acts), (dut.i_delta, deltas)):
                if beats:
                    ctx.set(Value.cast(port.payload), beats[0])
                ctx.set(port.valid, int(bool(beats)))
            _, _, a_ready, d_ready, valid, bits = await ctx.tick().sample(
                dut.i_act.ready, dut.i_delta.ready, dut.o.valid, Value.cast(dut.o.payload))
            cycle += 1
            if a_ready and acts:
                acts.pop(0)
            if d_ready and deltas:
                deltas.pop(0)
                taken.append(cycle)
            if valid:
                out.append((cycle, bits))
            assert cycle < 3000, f"gradient beat {len(out)} of {len(want)} not in 3000 cycles"

    sim.add_testbench(bench)
    sim.run()
    assert [bits for _, bits in out] == want
    steady = taken[cfg.w_out * cfg.groups * 2:]
    assert steady[-1] - steady[0] == cfg.passes * (len(steady) - 1)   # a δ beat per pass
    assert out[-1][0] - out[0][0] == 2 * (len(want) - 1)          # drain: 2 cycles a row


def test_pg_lgb_width():
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=8, n_in=2, n_out=3,
                   p=2)  # 64 pixels
    assert PgModule(cfg, batch=1).lgb_bits == lgb_bits(cfg, 1) == 32 + 6
    assert PgModule(cfg, batch=1024).lgb_bits == 32 + 16 == 48   # the DSP48 accumulator
    assert PgModule(cfg, batch=1025).lgb_bits == 49


def test_pg_refusals():
    cfg = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=5, n_in=2, n_out=3, p=2)
    for bad in (0, -3, 2.0, True):
        with pytest.raises(TypeError, match=rf"^batch must be a positive integer, not "
                                            rf"{bad!r}$"):
            PgModule(cfg, batch=bad)


@pytest.mark.slow
def test_pg_paper_segment_slow():
    """The AlexNet conv2 segment of :func:`nnrtl.sim.tb.fpdeep.eb.paper_segment` (K = 5, 27×27,
    OC = 256 on P = 3, 86 groups, bias bank), one image."""
    cfg = paper_segment()
    case = random_case(cfg, 1, 1, 1)
    want = expected(cfg, case)
    got = stream_run(PgModule(cfg, batch=1), stimulus(cfg, case), "o", len(want),
                     timeout=200000)
    assert got == want, describe(gradient_layout(cfg, 1), "o", got, want)


@pytest.mark.slow
def test_pg_paper_segment_passes_slow():
    """The mapped AlexNet conv3 segment with passes (:func:`nnrtl.sim.tb.fpdeep.eb.
    paper_segment` ``passes=True``: K = 3, 13×13, S_IC = 13 on Q = 1, OC = 384 on P = 12,
    32 groups, 416 LGB rows a bank), one image."""
    cfg = paper_segment(passes=True)
    assert (cfg.q, cfg.n_in, cfg.rows) == (1, 13, 416)
    case = random_case(cfg, 1, 1, 2)
    want = expected(cfg, case)
    got = stream_run(PgModule(cfg, batch=1), stimulus(cfg, case), "o", len(want),
                     timeout=400000)
    assert got == want, describe(gradient_layout(cfg, 1), "o", got, want)

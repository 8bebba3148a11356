"""The FPDeep node bench's cycle model (:mod:`nnrtl.gen.fpdeep.node_cycles`): its parts
step as the RTL's do (the line buffer and Amaranth's buffered FIFO cycle by cycle against
the Amaranth simulator under random valid and ready; the pipelines' stage rules by hand),
and the whole model on counts derived by hand. The model against the node's RTL under
Verilator: ``tests/fpdeep/sim/test_fpdeep_node_verilator.py`` and the simulated draws."""

import random

import pytest
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from nnrtl.gen.fpdeep.node_cycles import bench_cycles, bench_lag, segment_cycles
from nnrtl.gen.fpdeep.node_parts import Fifo, LineBuffer, Pipe, Source, ce_stages
from nnrtl.hw.fpdeep import FpConfig
from nnrtl.hw.fpdeep.line_buffer import LineBuffer as LineBufferRtl
from nnrtl.hw.fpdeep.node import FpdeepConfig


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("shape", [
    dict(width=4, k=3, pad=1), dict(width=5, k=2, stride=2), dict(width=5, k=3, stride=2, pad=2),
    dict(width=3, k=1, stride=3), dict(width=4, k=2, groups=3), dict(width=2, k=3, pad=2)],
    ids=["pad", "stride", "stride-pad", "skip", "groups", "pad-only"])
def test_line_buffer_steps_as_the_rtl(shape):
    rtl = LineBufferRtl(shape["width"], shape["k"], stride=shape.get("stride", 1),
                        pad=shape.get("pad", 0), groups=shape.get("groups", 1), word_bits=4)
    model = LineBuffer(shape["width"], shape["k"], stride=shape.get("stride", 1),
                       pad=shape.get("pad", 0), groups=shape.get("groups", 1))
    rng = random.Random(7)

    async def bench(ctx):
        for cycle in range(400):
            i_valid, o_ready = rng.random() < 0.8, rng.random() < 0.7
            ctx.set(rtl.i.valid, i_valid)
            ctx.set(rtl.o.ready, o_ready)
            seen = (ctx.get(rtl.i.ready), ctx.get(rtl.o.valid))
            assert seen == (model.ready(), model.valid), cycle
            if model.valid:
                assert ctx.get(rtl.o.payload.last) == model.last, cycle
            model.tick(i_valid, o_ready)
            await ctx.tick()

    _run(rtl, bench)


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_fifo_steps_as_amaranths_buffered_fifo(depth):
    rtl, model, rng = SyncFIFOBuffered(width=4, depth=depth), Fifo(depth), random.Random(3)

    async def bench(ctx):
        for cycle in range(300):
            w_en, r_en = rng.random() < 0.6, rng.random() < 0.5
            ctx.set(rtl.w_en, w_en)
            ctx.set(rtl.r_en, r_en)
            assert (ctx.get(rtl.w_rdy), ctx.get(rtl.r_rdy)) == (model.w_rdy(), model.r_rdy), \
                cycle
            model.tick(w_en, r_en)
            await ctx.tick()

    _run(rtl, bench)


def _cycle(pipe, head, ready_out):
    outs = pipe.outputs(head)
    ready, into, out = pipe.readies(ready_out)
    pipe.tick(head, outs, into, out)
    return ready, outs[-1]


def test_register_stages_close_bubbles_a_float_unit_moves_as_a_whole():
    regs, unit = Pipe([("reg", None)] * 2), Pipe([("unit", 2)])
    for pipe in (regs, unit):
        assert _cycle(pipe, "a", True) == (True, None)
        assert _cycle(pipe, None, True) == (True, None)
    # "a" waits at the output: the registers take "b" into their bubble, the unit's
    # stages all hold (its bubble too)
    assert _cycle(regs, None, False) == (True, "a")
    assert _cycle(unit, None, False) == (False, "a")
    assert _cycle(regs, "b", False) == (True, "a")
    assert _cycle(regs, None, False) == (False, "a")        # both full
    assert _cycle(regs, None, True) == (True, "a")          # the ready passes through
    assert _cycle(regs, None, True) == (True, "b")
    assert _cycle(Pipe([("unit", 0)]), "c", False) == (False, "c")


def test_a_kept_register_drops_items_and_a_join_waits_for_its_source():
    source = Source(1)
    pipe = Pipe([("reg", lambda t: t == "final"), ("join", source)])
    assert _cycle(pipe, "pass", True) == (True, None)
    assert _cycle(pipe, "final", True) == (True, None)
    assert _cycle(pipe, None, True) == (False, None)        # the source is not open
    source.open = True
    assert _cycle(pipe, None, True) == (True, "final") and source.done


def test_ce_stages():
    fixed = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=5, n_out=2, p=1,
                     q=5)  # 9 taps, 5 tiles
    assert ce_stages(fixed, fixed.q) == [("reg", None)] * (1 + 4 + 3)
    fp32 = FpConfig(precision="fp32", k=1, stride=1, pad=0, w_in=4, n_in=2, n_out=2, p=1,
                    multiplier_stages=2, adder_stages=0)
    assert ce_stages(fp32, 2) == [("unit", 2), ("unit", 0)]


#: One fixed16 1×1 segment over a 1×1 map, one channel in and out, no EB, completing
#: (no pool): every stage is one register, the loops the shortest.
TINY = FpdeepConfig((FpConfig(precision="fixed16", k=1, stride=1, pad=0, w_in=1, n_in=1, n_out=1,
                              p=1),), (False,), batch=1,
                    act_images=2)


def test_the_tiny_node_by_hand():
    """One mini-batch, lag 1: the two loads (cycles 1, 2); nothing offered (3); the pixel
    taken (4); the window issued (5) and fed (6); the product, bias and rescale registers
    (7, 8, 9); act_out and the mask written (10); the mask in the buffer's output register
    (12, two cycles after the write), so the error, offered since 6 (5 offers nothing
    after the pixel's phase), is taken at 12: the bench's last beat.

    Two mini-batches: the δ passes the fork at 13 (PG's window waits since 7), the drain
    settles once PG's two stages are empty (16), reads (17) and hands its two rows to the
    update at 18 and 21 (3 cycles a row), which is done at 24; FP reopens and the second
    image runs as the first, 21 cycles later: its error at 33."""
    assert bench_cycles(TINY, 1, 1) == 12
    assert bench_cycles(TINY, 2, 1) == 12 + 21


def test_segments_are_independent_and_the_node_is_the_slowest():
    fast = FpConfig(precision="fixed16", k=1, stride=1, pad=0, w_in=2, n_in=1, n_out=1, p=1)
    slow = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=2, n_out=3, p=1)
    node = FpdeepConfig((fast, slow), (True, True), batch=2, act_images=3)
    alone = [bench_cycles(FpdeepConfig((s,), (True,), batch=2, act_images=3), 2, 2)
             for s in (fast, slow)]
    assert [segment_cycles(node, n, 2, 2) for n in range(2)] == alone
    assert bench_cycles(node, 2, 2) == max(alone)


def test_no_images_is_the_load_and_refusals():
    assert bench_cycles(TINY, 0, 1) == 2
    with pytest.raises(ValueError, match=r"^batches must be an integer of at least 0, not -1$"):
        bench_cycles(TINY, -1, 1)
    with pytest.raises(ValueError, match=r"^lag must be an integer of at least 1, not True$"):
        bench_cycles(TINY, 1, True)


def test_bench_lag():
    assert [bench_lag(FpdeepConfig(batch=b, act_images=a)) for b, a in
            ((2, 3), (3, 2), (2, 1), (1, 4))] == [2, 1, 1, 1]

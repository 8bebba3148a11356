# amaranth: UnusedElaboratable=no
"""The SBE controller (:class:`nnrtl.hw.sbe.Controller`) in the Amaranth simulator: the
column steps it issues, in order, against the blocking-batching schedule written out here
from the paper's description (blocks in the golden model's
:func:`~nnrtl.sim.golden.sbe.block_schedule` order), with stand-in loaders that fill the
buffer halves slowly and an h store that finishes each step's h some cycles after its
last hand-over, so that the controller must wait for weights, x and h."""

import pytest
from amaranth.sim import Simulator

from nnrtl.hw.sbe import Controller, SbeConfig
from nnrtl.sim.golden import sbe as golden

CONFIGS = {
    "case3-passes": SbeConfig(input_size=20, hidden_size=6, pes=12, batch=2, blocks=13,
                              seq_len=5, bus_weights=4, post_units=1),
    "two-columns": SbeConfig(input_size=30, hidden_size=6, pes=48, batch=3, blocks=3,
                             seq_len=7, bus_weights=8, post_units=2, layers=2),
    "case1-tail": SbeConfig(input_size=44, hidden_size=12, pes=48, batch=4, blocks=4,
                            seq_len=9, bus_weights=8, post_units=4),
    "resident": SbeConfig(input_size=10, hidden_size=6, pes=24, batch=2, blocks=2,
                          seq_len=5, bus_weights=4, post_units=2),
}
CASES = [(name, layer) for name, config in CONFIGS.items() for layer in range(config.layers)]

LOAD_CYCLES = 7         # a stand-in loader fills a half in this many cycles
H_DELAY = 9             # a step's h is written this long after its last hand-over


def expected_order(config, layer, steps):
    """Every column step of the run, in order: per batch, each x-only block for every step
    and pass; then the hidden blocks -- cases 1 and 2 for each step and pass over both
    blocks, case 3 for each step block by block."""
    shape = config.layer(layer)
    k, passes = config.columns_per_cycle, config.passes
    bc, first, hb = shape.block_columns, shape.first_hidden_block, shape.hidden_blocks
    block_steps, tail_steps = bc // k, shape.x_columns_in_hidden_blocks // k
    merged = hb <= 2
    order = []

    def segment(blocks, t, s, p, final, x_half_steps, sends):
        for part, block in enumerate(blocks):
            for q in range(block_steps):
                column = block * bc + q * k
                last = q == block_steps - 1 and part == len(blocks) - 1
                is_h = column >= shape.input_size
                order.append(dict(
                    step=t, pass_index=p, is_h=is_h, block=block, send=sends[part],
                    w_entry=p * block_steps + q,
                    x_entry=None if is_h else s * x_half_steps + q,
                    h_addr=column - shape.input_size if is_h else None,
                    first=q == 0 and part == 0, last=last, handover=last and final,
                    bb_write=last and not final, bb_addr=s * passes + p,
                    init_zero=blocks[0] == 0))

    sent = 0                # blocks the weight stream sent before this batch
    for t0, n in golden.batches(config, steps):
        base = 0 if config.weights_resident else sent
        for block in range(first):
            for s in range(n):
                for p in range(passes):
                    segment([block], t0 + s, s, p, False, block_steps, [base + block])
        hidden = list(range(first, config.blocks))
        for s in range(n):
            if merged:
                for p in range(passes):
                    segment(hidden, t0 + s, s, p, True, tail_steps,
                            [base + block for block in hidden])
            else:
                for j, block in enumerate(hidden):
                    for p in range(passes):
                        segment([block], t0 + s, s, p, block == hidden[-1], tail_steps,
                                [base + first + s * hb + j])
        sent += first + hb * (1 if merged else n)
    return order


def simulate(config, layer, steps):
    dut = Controller(config)
    w_half, x_half = Controller.weight_half_depth(config), Controller.vector_half_depth(config)
    shape = config.layer(layer)
    weight_fills = len(golden.block_schedule(config, layer, steps))
    x_fills = sum(shape.first_hidden_block + (shape.x_columns_in_hidden_blocks > 0)
                  for _ in golden.batches(config, steps))
    issued, waits = [], []

    async def testbench(ctx):
        ctx.set(dut.steps, steps)
        ctx.set(dut.later_layer, int(layer > 0))
        ctx.set(dut.drain_free, 1)
        ctx.set(dut.out_room, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        # Each loader fills its halves in turn, a half only once it is free.
        loaders = {"w": dict(loaded=[0, 0], next=0, left=weight_fills, busy=None),
                   "x": dict(loaded=[0, 0], next=0, left=x_fills, busy=None)}
        h_produced, h_ready_at = 0, []
        watch = [dut.issue, dut.busy, dut.w_release, dut.x_release, dut.step,
                 dut.pass_index, dut.is_h, dut.w_addr, dut.x_addr, dut.h_addr, dut.first,
                 dut.last, dut.handover, dut.bb_write, dut.bb_addr, dut.init_zero,
                 dut.waiting.hidden]
        for cycle in range(200000):
            for name, loader in loaders.items():
                if loader["busy"] is None and loader["left"] and \
                        not loader["loaded"][loader["next"]]:
                    loader["busy"] = cycle + LOAD_CYCLES
                if loader["busy"] == cycle:
                    loader["loaded"][loader["next"]] = 1
                    loader["next"] ^= 1
                    loader["left"] -= 1
                    loader["busy"] = None
            ctx.set(dut.w_loaded, loaders["w"]["loaded"][0] | loaders["w"]["loaded"][1] << 1)
            ctx.set(dut.x_loaded, loaders["x"]["loaded"][0] | loaders["x"]["loaded"][1] << 1)
            while h_ready_at and h_ready_at[0] <= cycle:
                h_ready_at.pop(0)
                h_produced += 1
            ctx.set(dut.h_produced, h_produced)
            ctx.set(dut.h_count, 0)
            _clk, _rst, *values = await ctx.tick().sample(*watch)
            (issue, busy, w_release, x_release, step, pass_index, is_h, w_addr, x_addr,
             h_addr, first, last, handover, bb_write, bb_addr, init_zero, stalled) = values
            if stalled:
                waits.append(cycle)
            if issue:
                if is_h:
                    assert step == 0 or h_produced >= step, "h read before it was written"
                issued.append(dict(
                    step=step, pass_index=pass_index, is_h=bool(is_h),
                    w_half=w_addr // w_half, w_entry=w_addr % w_half,
                    x_half=None if is_h else x_addr // x_half,
                    x_entry=None if is_h else x_addr % x_half,
                    h_addr=h_addr if is_h else None, first=bool(first), last=bool(last),
                    handover=bool(handover), bb_write=bool(bb_write), bb_addr=bb_addr,
                    init_zero=bool(init_zero)))
                if handover and pass_index == config.passes - 1:
                    h_ready_at.append(cycle + H_DELAY)
            for name, mask in (("w", w_release), ("x", x_release)):
                for half in (0, 1):
                    if mask >> half & 1:
                        assert loaders[name]["loaded"][half], f"{name} half {half} released twice"
                        loaders[name]["loaded"][half] = 0
            if cycle > 1 and not busy:
                return
        raise AssertionError("the controller never finished")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return issued, waits


@pytest.mark.parametrize("name, layer", CASES)
def test_issue_order_follows_the_schedule(name, layer):
    config = CONFIGS[name]
    steps = config.seq_len
    issued, waits = simulate(config, layer, steps)
    expected = expected_order(config, layer, steps)
    schedule = golden.block_schedule(config, layer, steps)
    assert len(issued) == len(expected)
    for index, (got, want) in enumerate(zip(issued, expected)):
        # Block `block` is the `send`-th block the weight stream sends, loaded into half
        # `send mod 2` (the halves fill in turn; resident weights: block b in half b).
        block, send = want.pop("block"), want.pop("send")
        assert schedule[send] == block
        assert got.pop("w_half") == send % 2, f"column step {index}"
        got.pop("x_half")
        assert got == want, f"column step {index}"
    assert waits, "the h dependency never stalled the controller"


def test_controller_checks_its_config():
    with pytest.raises(TypeError, match=r"^config must be an SbeConfig, not 3$"):
        Controller(3)

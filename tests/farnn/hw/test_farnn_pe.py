# amaranth: UnusedElaboratable=no
"""A FARNN PE (:class:`nnrtl.hw.farnn.FarnnPE`) in the Amaranth simulator: weight load
(its own block kept, later words relayed; the feed's data in the normal form), its sums against the contract's
``streaming_sum`` of ``float_mul`` products for several rounds and vectors, the relay of
the feed one cycle later, the result-collection order of a PE inside a chain, and the
delay from a stream's last element to its sum."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.arith.float import FP32
from nnrtl.hw.farnn.pe import ChainWordKind, FarnnPE
from nnrtl.sim.golden.accumulator import streaming_sum
from nnrtl.sim.golden.float import float_mul, special_values, to_bits, to_normal_form


def word(kind, *, data=0, addr=0, last=0):
    """A feed word; ``data`` an fp32 encoding, sent in the normal form a PE takes."""
    return {"kind": kind, "data": int(to_normal_form(FP32, int(data))), "addr": int(addr),
            "last": int(last)}


def load_words(weights, extra):
    """RESTART, this PE's ``weights`` (the last marked), then ``extra`` words for PEs
    further down."""
    words = [word(ChainWordKind.RESTART)]
    words += [word(ChainWordKind.WEIGHT, data=w, addr=a, last=a == len(weights) - 1)
              for a, w in enumerate(weights)]
    words += [word(ChainWordKind.WEIGHT, data=w, addr=a) for a, w in enumerate(extra)]
    return words


def stream_words(vector, base):
    return [word(ChainWordKind.ELEMENT, data=v, addr=base + t, last=t == len(vector) - 1)
            for t, v in enumerate(vector)]


def run_pe(pe, weights, streams, *, extra=(), stall=0.0, seed=0, successor=None):
    """Drive ``pe``: load, then the ``streams`` (lists of feed words) with the feeder's
    rules (``E`` idle cycles after a stream, at most two streams outstanding). Results on
    ``pe.o`` are taken with probability ``1 - stall``; ``successor`` (a list of result
    words) is offered on ``i_next``. Returns the results, the relayed feed, and the
    cycles of each stream's last element and of each result."""
    rng = random.Random(seed)
    e = pe.reduction_cycles
    per_stream = 1 + (len(successor) // len(streams) if successor else 0)
    got = {"results": [], "relayed": [], "sent": [], "last_element": [], "taken": []}

    async def feeder(ctx):
        cycle = 0
        words = load_words(weights, extra)
        for s, stream in enumerate(streams):
            if s:
                words += [None] * e
            words.append(("credit", s))
            words += stream
        for w in words:
            if isinstance(w, tuple):
                while len(got["results"]) < (w[1] - 1) * per_stream:
                    ctx.set(pe.i.valid, 0)
                    await ctx.tick()
                    cycle += 1
                continue
            ctx.set(pe.i.valid, w is not None)
            if w is not None:
                ctx.set(pe.i.payload, w)
                got["sent"].append((cycle, w))
                if w["kind"] == ChainWordKind.ELEMENT and w["last"]:
                    got["last_element"].append(cycle)
            await ctx.tick()
            cycle += 1
        ctx.set(pe.i.valid, 0)

    async def monitor(ctx):
        cycle = 0
        pending = list(successor or [])
        total = len(streams) * per_stream
        while len(got["results"]) < total:
            ready = int(rng.random() >= stall)
            ctx.set(pe.o.ready, ready)
            if pending:
                ctx.set(pe.i_next.valid, int(rng.random() < 0.7))
                ctx.set(pe.i_next.payload, pending[0])
            else:
                ctx.set(pe.i_next.valid, 0)
            (_clk, _rst, valid, payload, relay_valid, relay, next_valid,
             next_ready) = await ctx.tick().sample(pe.o.valid, pe.o.payload,
                                                   pe.o_next.valid, pe.o_next.payload,
                                                   pe.i_next.valid, pe.i_next.ready)
            if valid and ready:
                got["results"].append((int(payload.data), int(payload.last)))
                got["taken"].append(cycle)
            if next_valid and next_ready:
                pending.pop(0)
            if relay_valid:
                got["relayed"].append((cycle, {"kind": relay.kind, "data": int(relay.data),
                                               "addr": int(relay.addr),
                                               "last": int(relay.last)}))
            cycle += 1
            assert cycle < 20_000, "the PE hangs"

    sim = Simulator(pe)
    sim.add_clock(1e-8)
    sim.add_testbench(feeder)
    sim.add_testbench(monitor)
    sim.run()
    return got


def expected_sum(weights, vector, base, adder_stages):
    products = float_mul(FP32, np.asarray(weights[base:base + len(vector)], dtype=np.uint64),
                         np.asarray(vector, dtype=np.uint64))
    return streaming_sum(FP32, products, adder_stages=adder_stages)


@pytest.mark.parametrize("adder_stages, multiplier_stages, dsp_usage",
                         [(4, 3, "some"), (1, 0, "some"), (6, 6, "some"), (4, 3, "max"),
                          (1, 0, "max"), (3, 2, "none")])
@pytest.mark.parametrize("stall", [0.0, 0.7])
def test_tail_pe_sums_rounds_and_vectors(adder_stages, multiplier_stages, dsp_usage, stall):
    rng = np.random.default_rng(adder_stages * 10 + multiplier_stages)
    n, rounds, batch = 7, 3, 2
    weights = to_bits(FP32, rng.normal(size=n * rounds))
    vectors = to_bits(FP32, rng.normal(size=(batch, n)))
    vectors[1, 2] = special_values(FP32)["+inf"]
    pe = FarnnPE(FP32, weight_depth=32, adder_stages=adder_stages,
                 multiplier_stages=multiplier_stages, tail=True, dsp_usage=dsp_usage)
    streams = [stream_words(vectors[b], r * n) for r in range(rounds) for b in range(batch)]
    got = run_pe(pe, weights, streams, stall=stall, seed=adder_stages)
    want = [(expected_sum(weights, vectors[b], r * n, adder_stages), 1)
            for r in range(rounds) for b in range(batch)]
    assert got["results"] == want
    if stall == 0.0:
        delays = [t - u for t, u in zip(got["taken"], got["last_element"])]
        assert delays == [pe.sum_delay] * len(streams)


def test_load_keeps_its_block_and_relays_the_rest():
    rng = np.random.default_rng(3)
    weights = to_bits(FP32, rng.normal(size=5))
    extra = to_bits(FP32, rng.normal(size=4))
    pe = FarnnPE(FP32, weight_depth=8, tail=True)
    vector = to_bits(FP32, rng.normal(size=5))
    got = run_pe(pe, weights, [stream_words(vector, 0)], extra=extra)
    assert got["results"] == [(expected_sum(weights, vector, 0, 4), 1)]
    kept = set(range(1, 1 + len(weights)))   # the sent words the PE keeps (after RESTART)
    want = [(cycle + 1, w) for k, (cycle, w) in enumerate(got["sent"]) if k not in kept]
    assert got["relayed"] == want
    assert ([w["data"] for _c, w in got["relayed"][1:1 + len(extra)]]
            == list(map(int, to_normal_form(FP32, extra))))


def test_inner_pe_sends_its_sum_then_relays_its_successors():
    """A PE inside a chain: own sum, then the successors' words up to the one marked
    ``last``, stream after stream, whatever the timing of ``i_next`` and ``o``."""
    rng = np.random.default_rng(4)
    n, batch = 4, 3
    weights = to_bits(FP32, rng.normal(size=n))
    vectors = to_bits(FP32, rng.normal(size=(batch, n)))
    pe = FarnnPE(FP32, weight_depth=8, adder_stages=2, multiplier_stages=1)
    successor = []
    for b in range(batch):
        successor += [{"data": 1000 + 10 * b, "last": 0}, {"data": 1001 + 10 * b, "last": 1}]
    streams = [stream_words(vectors[b], 0) for b in range(batch)]
    got = run_pe(pe, weights, streams, successor=successor, stall=0.5, seed=9)
    want = []
    for b in range(batch):
        want += [(expected_sum(weights, vectors[b], 0, 2), 0),
                 (1000 + 10 * b, 0), (1001 + 10 * b, 1)]
    assert got["results"] == want


def test_pe_checks_its_parameters():
    with pytest.raises(TypeError, match=r"^fmt must be a FloatFormat, not 'fp32'$"):
        FarnnPE("fp32", weight_depth=8)
    with pytest.raises(TypeError, match=r"^weight_depth must be a positive integer, not 0$"):
        FarnnPE(FP32, weight_depth=0)
    with pytest.raises(TypeError, match=r"^multiplier_stages must be an integer from 0 to 6, "
                                        r"not 7$"):
        FarnnPE(FP32, weight_depth=8, multiplier_stages=7)
    with pytest.raises(TypeError, match=r"^tail must be a bool, not 1$"):
        FarnnPE(FP32, weight_depth=8, tail=1)
    with pytest.raises(TypeError):
        FarnnPE(FP32, 8)   # keyword-only
    with pytest.raises(ValueError, match=r"^dsp_usage must be one of 'none', 'some', 'max', "
                                         r"not 'uram'$"):
        FarnnPE(FP32, weight_depth=8, dsp_usage="uram")
    pe = FarnnPE(FP32, weight_depth=4096, adder_stages=4, multiplier_stages=3)
    assert (pe.reduction_cycles, pe.sum_delay) == (11, 18)

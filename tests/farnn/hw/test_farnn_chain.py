# amaranth: UnusedElaboratable=no
"""A FARNN PE chain (:class:`nnrtl.hw.farnn.PEChain`) in the Amaranth simulator: a weight
load of one block per PE, then streams fed with the feeder's rules; the chain head hands
out each stream's sums in PE order, the tail's marked ``last``, bit-exact against the
contract's ``streaming_sum`` of ``float_mul`` products, under random backpressure; without
backpressure PE 0's sum leaves ``sum_delay`` cycles after the stream's last element and
the others follow every two cycles."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from nnrtl.hw.arith.float import FP32
from nnrtl.hw.farnn.chain import PEChain
from nnrtl.hw.farnn.pair import PEPair
from nnrtl.hw.farnn.pe import ChainWordKind
from nnrtl.sim.golden.accumulator import streaming_sum
from nnrtl.sim.golden.float import float_mul, to_bits


def word(kind, *, data=0, addr=0, last=0):
    return {"kind": kind, "data": int(data), "addr": int(addr), "last": int(last)}


def run_chain(chain, blocks, vectors, *, rounds, stall, seed):
    """Load ``blocks`` (one weight list per PE), then feed ``rounds`` rounds of the
    ``vectors`` (round by round, the vectors back to back), ``E`` idle cycles after each
    stream and at most two streams outstanding; take results with probability
    ``1 - stall``. Returns the results and the cycles of the last elements and results."""
    rng = random.Random(seed)
    length = chain.chain_length
    e = chain.reduction_cycles
    n = vectors.shape[1]
    streams = [(r, b) for r in range(rounds) for b in range(vectors.shape[0])]
    got = {"results": [], "taken": [], "last_element": []}

    async def feeder(ctx):
        cycle = 0

        async def put(w):
            nonlocal cycle
            ctx.set(chain.i.valid, w is not None)
            if w is not None:
                ctx.set(chain.i.payload, w)
            await ctx.tick()
            cycle += 1

        await put(word(ChainWordKind.RESTART))
        for block in blocks:
            for a, w in enumerate(block):
                await put(word(ChainWordKind.WEIGHT, data=w, addr=a, last=a == len(block) - 1))
        for s, (r, b) in enumerate(streams):
            if s:
                for _ in range(e):
                    await put(None)
            while len(got["results"]) < (s - 1) * length:   # two streams outstanding
                await put(None)
            for t in range(n):
                if t == n - 1:
                    got["last_element"].append(cycle)
                await put(word(ChainWordKind.ELEMENT, data=vectors[b, t], addr=r * n + t,
                               last=t == n - 1))
        await put(None)

    async def monitor(ctx):
        cycle = 0
        while len(got["results"]) < len(streams) * length:
            ready = int(rng.random() >= stall)
            ctx.set(chain.o.ready, ready)
            _clk, _rst, valid, payload = await ctx.tick().sample(chain.o.valid,
                                                                 chain.o.payload)
            if valid and ready:
                got["results"].append((int(payload.data), int(payload.last)))
                got["taken"].append(cycle)
            cycle += 1
            assert cycle < 20_000, "the chain hangs"

    sim = Simulator(chain)
    sim.add_clock(1e-8)
    sim.add_testbench(feeder)
    sim.add_testbench(monitor)
    sim.run()
    return got


@pytest.mark.parametrize("length", [1, 3])
@pytest.mark.parametrize("stall", [0.0, 0.6])
def test_chain_collects_sums_in_pe_order(length, stall):
    rng = np.random.default_rng(length)
    n, rounds, batch = 5, 2, 2
    blocks = [to_bits(FP32, rng.normal(size=n * rounds)) for _ in range(length)]
    vectors = to_bits(FP32, rng.normal(size=(batch, n)))
    chain = PEChain(FP32, chain_length=length, weight_depth=16, adder_stages=3,
                    multiplier_stages=2)
    got = run_chain(chain, blocks, vectors, rounds=rounds, stall=stall, seed=length)
    want = []
    for r in range(rounds):
        for b in range(batch):
            for k in range(length):
                products = float_mul(FP32, np.asarray(blocks[k][r * n:(r + 1) * n]),
                                     np.asarray(vectors[b]))
                want.append((streaming_sum(FP32, products, adder_stages=3),
                             int(k == length - 1)))
    assert got["results"] == want
    if stall == 0.0:
        delay = chain.sum_delay
        for s, last in enumerate(got["last_element"]):
            taken = got["taken"][s * length:(s + 1) * length]
            assert taken == [last + delay + 2 * k for k in range(length)]
            assert taken[-1] - taken[0] == chain.collection_cycles


def test_chain_checks_its_parameters():
    with pytest.raises(TypeError, match=r"^chain_length must be a positive integer, not 0$"):
        PEChain(FP32, chain_length=0, weight_depth=8)
    with pytest.raises(TypeError, match=r"^adder_stages must be an integer from 1 to 8, "
                                        r"not 9$"):
        PEChain(FP32, chain_length=2, weight_depth=8, adder_stages=9)
    chain = PEChain(FP32, chain_length=4, weight_depth=8, adder_stages=4,
                    multiplier_stages=3)
    assert (chain.collection_cycles, chain.reduction_cycles, chain.sum_delay) == (6, 11, 18)


@pytest.mark.parametrize("unit", [PEChain, PEPair])
def test_chain_and_pair_check_their_pes_parameters_when_built(unit):
    """What every PE of a chain shares is checked where the chain or pair is made, not
    when its PEs are elaborated."""
    extra = {"chain_length": 3} if unit is PEChain else {}
    with pytest.raises(TypeError, match=r"^fmt must be a FloatFormat, not 'fp32'$"):
        unit("fp32", weight_depth=8, **extra)
    with pytest.raises(TypeError, match=r"^weight_depth must be a positive integer, not 0$"):
        unit(FP32, weight_depth=0, **extra)
    with pytest.raises(ValueError, match=r"^dsp_usage must be one of 'none', 'some', 'max', "
                                         r"not 'uram'$"):
        unit(FP32, weight_depth=8, dsp_usage="uram", **extra)

"""The FPDeep EB module (:mod:`nnrtl.hw.fpdeep.eb`): stimulus and expected beats from the
golden model (:mod:`nnrtl.sim.golden.fpdeep.eb`), an Amaranth-simulator runner shared with
the PG bench (:func:`stream_run`), and a cocotb bench under Verilator with every
backpressure pattern on the δ-in and error-out streams.

Parameters of the cocotb bench (``tb_params()``): ``cfg`` (the FpConfig's fields),
``partial_in`` / ``partial_out`` (the EbModule options, default false), ``images``,
``patterns``, ``seed``. Per pattern the bench loads the LPRAM (no pauses), streams the δ
maps (and partial errors) of fresh random images and checks every ``o`` (or ``o_partial``)
beat in order; reported:
``bit_exact``, per pattern ``beats``, ``mismatches`` (the first few, naming beat and field),
``cycles``, ``budget``.
"""

import random

import cocotb
import numpy as np
from amaranth.hdl import Value
from amaranth.sim import Simulator

from nnrtl.boards import get_board
from nnrtl.gen.fpdeep import builtin, map_network
from nnrtl.hw.arith.float_format import FP32
from nnrtl.hw.fpdeep.config import FpConfig
from nnrtl.hw.fpdeep.eb import EbModule, error_layout, partial_error_layout
from nnrtl.hw.fpdeep.line_buffer import pixel_layout
from nnrtl.hw.fpdeep.lpram import load_layout
from nnrtl.sim.golden.float import to_bits
from nnrtl.sim.golden.fpdeep.eb import eb_module, pad_delta
from nnrtl.sim.golden.fpdeep.fp import pass_weights
from nnrtl.sim.tb.common import tb_params
from nnrtl.sim.tb.fpdeep.fp import config_of, pack, run_patterns
from nnrtl.sim.tb.fpdeep.fp import describe_beats as describe

__all__ = ["random_case", "stimulus", "expected", "model_cycles", "stream_run", "describe",
           "delta_beats", "paper_segment", "output_port"]


def random_case(cfg, images, seed, *, partial_in=False):
    """Random ``weights`` (n_out, n_in, K, K) and ``delta`` (images, w_out, w_out, n_out):
    fixed16 codes in ±0.5 and ±1.0 (some sums saturate only with large maps), fp32 bit
    patterns of normal values (σ 0.5 and 1); with ``partial_in`` the downstream partial
    errors ``partial`` (images, w_in, w_in, n_in): fixed16 exact sums in ±8.0 (``2·frac_bits``
    fraction bits, some beyond the 16-bit range), fp32 words of σ 2."""
    rng = np.random.default_rng(seed)
    shape_w = (cfg.n_out, cfg.n_in, cfg.k, cfg.k)
    shape_d = (images, cfg.w_out, cfg.w_out, cfg.n_out)
    shape_p = (images, cfg.w_in, cfg.w_in, cfg.n_in)
    if cfg.precision == "fp32":
        bits = lambda x: to_bits(FP32, x.astype(np.float32)).astype(np.int64)
        case = {"weights": bits(rng.standard_normal(shape_w) / 2),
                "delta": bits(rng.standard_normal(shape_d))}
        if partial_in:
            case["partial"] = bits(rng.standard_normal(shape_p) * 2)
        return case
    one = 1 << cfg.frac_bits
    case = {"weights": rng.integers(-one // 2, one // 2 + 1, shape_w),
            "delta": rng.integers(-one, one + 1, shape_d)}
    if partial_in:
        wide = 8 << 2 * cfg.frac_bits
        case["partial"] = rng.integers(-wide, wide + 1, shape_p)
    return case


def output_port(partial_out):
    """The EB module's output stream: ``o_partial`` or ``o``."""
    return "o_partial" if partial_out else "o"


def delta_beats(cfg, delta):
    """One image's δ ``(w_out, w_out, n_out)`` as the δ stream's payloads."""
    beat = pixel_layout(cfg.word_bits, cfg.p)
    full = pad_delta(cfg, delta)
    return [pack(beat, list(full[y, x, g])) for y in range(cfg.w_out)
            for x in range(cfg.w_out) for g in range(cfg.groups)]


def _beats(layout, maps):
    """Per image ``(w_in, w_in, n_in)`` words → payloads, ``last`` on each image's last."""
    beats = []
    for image in maps:
        pixels = np.asarray(image).reshape(-1, image.shape[-1])
        beats += [pack(layout, {"data": list(e), "last": int(n == len(pixels) - 1)})
                  for n, e in enumerate(pixels)]
    return beats


def stimulus(cfg, case):
    """Payload integers per input stream: ``load`` (the weight banks, the FP module's rows
    ``g·passes + r``), ``i`` and (with a ``partial`` in ``case``) ``i_partial``."""
    w = pass_weights(cfg, case["weights"])                 # (row, j, i, t)
    load = [pack(load_layout(cfg), {"bank": bank, "row": row,
                                    "data": list(w[row, :, bank // cfg.taps, bank % cfg.taps])})
            for bank in range(cfg.banks) for row in range(cfg.rows)]
    stim = {"load": load, "i": [b for d in case["delta"] for b in delta_beats(cfg, d)]}
    if "partial" in case:
        stim["i_partial"] = _beats(partial_error_layout(cfg), case["partial"])
    return stim


def expected(cfg, case, *, partial_out=False):
    """The ``o`` payloads (``o_partial`` with ``partial_out``)."""
    partials = case.get("partial", [None] * len(case["delta"]))
    maps = [eb_module(cfg, delta, case["weights"], partial, rounded=not partial_out)
            for delta, partial in zip(case["delta"], partials)]
    return _beats(partial_error_layout(cfg) if partial_out else error_layout(cfg), maps)


def model_cycles(cfg, images, loads):
    """Cycles without pauses, at most: the load, then per image ``w_in² · G · passes``
    cycles and the fill (``K`` δ rows of ``G · passes`` cycles)."""
    return loads + images * (cfg.w_in ** 2 + cfg.k * cfg.w_out) * cfg.rows + 200


def paper_segment(passes=False):
    """A mapped AlexNet conv segment (15 VC709s, fixed16) the modules build. Default: the
    first with one pass (stride 1): conv2's completing node, K = 5, pad 2, 27×27, S_IC = 1,
    OC = 256 on P = 3 (86 groups). ``passes=True``: the one with passes (``q < n_in``) and
    the fewest MACs: conv3 on node 10, K = 3, 13×13, S_IC = 13 on Q = 1 (13 passes),
    OC = 384 on P = 12 (32 groups)."""
    mapping = map_network(builtin("alexnet"), 15, get_board("vc709"), check_storage=False)
    segments = [s for node in mapping.nodes for s in node.segments
                if s.kind == "conv" and s.stride == 1 and (s.q < s.n_in) == passes]
    segment = min(segments, key=lambda s: s.p * s.q) if passes else segments[0]
    return FpConfig.from_segment(segment, "fixed16")


# -- Amaranth simulator ------------------------------------------------------------------

def stream_run(dut, sources, sink, count, *, first=(), gap=0.0, stall=0.0, seed=0,
               timeout=5000):
    """Run ``dut`` in the Amaranth simulator: ``sources`` (port name → payloads) offered
    with gap probability ``gap`` after the ``first`` ones (sent without gaps, completely
    before), output port ``sink`` taken with stall probability ``stall`` until ``count``
    beats. Returns the payloads received; fails naming the beat waited for."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    got = []
    start = sum(len(sources[name]) for name in first) + 2

    def sender(name, number):
        async def send(ctx):
            port = getattr(dut, name)
            rng = random.Random(seed + number)
            if name not in first:
                await ctx.tick().repeat(start)
            for n, word in enumerate(sources[name]):
                while name not in first and gap and rng.random() < gap:
                    await ctx.tick()
                ctx.set(Value.cast(port.payload), word)
                ctx.set(port.valid, 1)
                for _ in range(timeout):
                    if (await ctx.tick().sample(port.ready))[2]:
                        break
                else:
                    raise AssertionError(f"{name}: beat {n} of {len(sources[name])} not "
                                         f"taken in {timeout} cycles")
                ctx.set(port.valid, 0)
        return send

    async def collect(ctx):
        port, rng = getattr(dut, sink), random.Random(seed + 99)
        idle, held = 0, None
        while len(got) < count:
            accept = not (stall and rng.random() < stall)
            ctx.set(port.ready, int(accept))
            _, _, valid, bits = await ctx.tick().sample(port.valid, Value.cast(port.payload))
            idle += 1
            if valid and held is not None:
                assert bits == held, f"{sink}: beat {len(got)} changed before it was taken"
            if valid and accept:
                got.append(bits)
                held, idle = None, 0
            elif valid:
                held = bits
            assert idle < timeout, f"{sink}: beat {len(got)} of {count} not in {timeout} cycles"
        ctx.set(port.ready, 0)
        for _ in range(20):
            assert not (await ctx.tick().sample(port.valid))[2], f"{sink}: a beat too many"

    for number, name in enumerate(sources):
        sim.add_testbench(sender(name, number))
    sim.add_testbench(collect)
    sim.run()
    return got


# -- cocotb bench (Verilator) ------------------------------------------------------------

@cocotb.test()
async def eb_module_matches_golden(dut):
    params = tb_params()
    cfg = config_of(params["cfg"])
    partial_in, partial_out = params.get("partial_in", False), params.get("partial_out", False)

    def make(number):
        case = random_case(cfg, params["images"], params["seed"] + number,
                           partial_in=partial_in)
        stim = stimulus(cfg, case)
        sources = [("load", stim["load"], False)] + [
            (port, stim[port], True) for port in ("i", "i_partial") if port in stim]
        return (sources, expected(cfg, case, partial_out=partial_out),
                model_cycles(cfg, params["images"], len(stim["load"])))

    layout = partial_error_layout(cfg) if partial_out else error_layout(cfg)
    await run_patterns(dut, params, make, layout, output_port(partial_out))

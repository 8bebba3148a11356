"""DSP48E2 slices side by side (:class:`SliceBundle`), random per-cycle vectors for them,
an integer reference model written from UG579 (independent of the RTL), and a run under
Amaranth's simulator. Shared by the Amaranth and the Verilator tests of
:mod:`nnrtl.hw.arith.dsp48e2`."""

import random

from amaranth.hdl import ClockDomain, Cat, Const, Module, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from nnrtl.hw.arith.dsp48e2 import (ALUMODE_SUBTRACT, OPMODE_C_PLUS_M, OPMODE_M,
                                    OPMODE_P_PLUS_M, OPMODE_PCIN17_PLUS_M,
                                    OPMODE_PCIN_PLUS_M, DSP48E2Slice)

#: Every configuration checked: those the floating-point units use (combinational
#: ``m``, ``c_plus_m``, ``pcin17_plus_m``) and each register, OPMODE field and ALUMODE.
CONFIGS = {
    "m": dict(opmode=OPMODE_M),
    "c_plus_m": dict(opmode=OPMODE_C_PLUS_M),
    "pcin17_plus_m": dict(opmode=OPMODE_PCIN17_PLUS_M),
    "m_regs": dict(opmode=OPMODE_M, areg=1, breg=1, mreg=1, preg=1),
    "c_plus_m_regs": dict(opmode=OPMODE_C_PLUS_M, areg=2, breg=1, creg=1, mreg=1, preg=1),
    "pcin17_regs": dict(opmode=OPMODE_PCIN17_PLUS_M, areg=1, breg=2, mreg=1, preg=1),
    "pcin_minus_m": dict(opmode=OPMODE_PCIN_PLUS_M, alumode=ALUMODE_SUBTRACT, preg=1),
    "macc": dict(opmode=OPMODE_P_PLUS_M, areg=1, breg=1, mreg=1, preg=1),
    "c_minus_m": dict(opmode=OPMODE_C_PLUS_M, alumode=ALUMODE_SUBTRACT, creg=1),
    "c_plus_p17": dict(opmode=0b11_110_00_00, creg=1, preg=1),
}

MASK48 = 2 ** 48 - 1


class Cascade(wiring.Component):
    """``p = a * b`` (27 x 35 signed) on two slices: ``a * b[:17]`` on the first, its
    PCOUT >> 17 plus ``a * b[17:]`` on the second, as a product wider than one slice."""

    def __init__(self, *, primitive):
        self._primitive = primitive
        super().__init__({"a": In(signed(27)), "b": In(signed(35)), "p": Out(signed(62))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.low = low = DSP48E2Slice(opmode=OPMODE_M, primitive=self._primitive)
        m.submodules.high = high = DSP48E2Slice(opmode=OPMODE_PCIN17_PLUS_M,
                                                primitive=self._primitive)
        m.d.comb += [low.a.eq(self.a), low.b.eq(Cat(self.b[:17], Const(0, 1))),
                     high.a.eq(self.a), high.b.eq(self.b[17:]), high.pcin.eq(low.pcout),
                     self.p.eq(Cat(low.p[:17], high.p[:45]))]
        return m


def _unit(name, primitive):
    if name == "cascade":
        return Cascade(primitive=primitive)
    return DSP48E2Slice(primitive=primitive, **CONFIGS[name])


class SliceBundle(wiring.Component):
    """The units ``names`` (keys of :data:`CONFIGS`, or ``"cascade"``) side by side, each
    unit's ports under its name (``m__a``, ``m__p``, ...)."""

    def __init__(self, names, *, primitive):
        self._units = {name: _unit(name, primitive) for name in names}
        super().__init__({name: Out(unit.signature) for name, unit in self._units.items()})

    def elaborate(self, platform):
        m = Module()
        for name, unit in self._units.items():
            m.submodules[name] = unit
            wiring.connect(m, wiring.flipped(getattr(self, name)), unit)
        return m


def ports(bundle):
    """``{verilog_name: (signal, is_input)}`` of a :class:`SliceBundle`."""
    return {"__".join(path): (value, member.flow == wiring.In)
            for path, member, value in bundle.signature.flatten(bundle)}


def random_vectors(bundle, cycles, seed):
    """Per-cycle input values (unsigned bit patterns): reset held for the first two
    cycles and pulsed now and then, clock enables high three times in four."""
    rng = random.Random(seed)
    vectors = {"rst": [1, 1] + [int(rng.random() < 0.03) for _ in range(cycles - 2)]}
    for name, (signal, is_input) in ports(bundle).items():
        if not is_input:
            continue
        if name.split("__")[-1].startswith("ce_"):
            vectors[name] = [int(rng.random() < 0.75) for _ in range(cycles)]
        else:
            vectors[name] = [rng.getrandbits(len(signal)) for _ in range(cycles)]
    return vectors


def _signed(value, width):
    return value - (1 << width) if value >> (width - 1) & 1 else value


def amaranth_run(bundle, vectors):
    """Run ``bundle`` under Amaranth's simulator: ``{output_name: [unsigned value per
    cycle]}``, each read after that cycle's inputs are set, before the clock edge."""
    m = Module()
    m.domains.sync = domain = ClockDomain()
    m.submodules.dut = bundle
    names = ports(bundle)
    outputs = {name: [] for name, (_, is_input) in names.items() if not is_input}
    cycles = len(vectors["rst"])

    async def testbench(ctx):
        for cycle in range(cycles):
            ctx.set(domain.rst, vectors["rst"][cycle])
            for name, values in vectors.items():
                if name != "rst":
                    signal = names[name][0]
                    value = values[cycle]
                    ctx.set(signal, _signed(value, len(signal))
                            if signal.shape().signed else value)
            for name in outputs:
                signal = names[name][0]
                outputs[name].append(ctx.get(signal) & ((1 << len(signal)) - 1))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    return outputs


def reference(name, vectors):
    """The integer model of unit ``name`` (UG579's equations): ``{"p": [...],
    "pcout": [...]}`` (``{"p": [...]}`` for the cascade), per cycle, unsigned."""
    def get(port, cycle, default=0):
        values = vectors.get(f"{name}__{port}")
        return default if values is None else values[cycle]

    cycles = len(vectors["rst"])
    if name == "cascade":
        return {"p": [(_signed(get("a", k), 27) * _signed(get("b", k), 35)) % 2 ** 62
                      for k in range(cycles)]}
    config = {**dict(areg=0, breg=0, creg=0, mreg=0, preg=0, alumode=0), **CONFIGS[name]}
    opmode = config["opmode"]
    x, z, w = opmode & 3, opmode >> 4 & 7, opmode >> 7 & 3
    a_regs, b_regs = [0] * config["areg"], [0] * config["breg"]
    m_reg = c_reg = p_reg = 0
    out = []
    for k in range(cycles):
        a = a_regs[-1] if a_regs else get("a", k)
        b = b_regs[-1] if b_regs else get("b", k)
        product = _signed(a, 27) * _signed(b, 18)
        m_value = m_reg if config["mreg"] else product
        c = c_reg if config["creg"] else get("c", k)
        pcin = get("pcin", k)
        zvalue = {0: 0, 1: pcin, 2: p_reg, 3: c, 5: _signed(pcin, 48) >> 17,
                  6: _signed(p_reg, 48) >> 17}[z]
        addend = {0: 0, 1: p_reg, 3: c}[w] + (m_value if x == 1 else 0)
        alu = (zvalue - addend if config["alumode"] == ALUMODE_SUBTRACT
               else zvalue + addend) & MASK48
        p = p_reg if config["preg"] else alu
        out.append(p)
        if vectors["rst"][k]:
            a_regs, b_regs = [0] * len(a_regs), [0] * len(b_regs)
            m_reg = c_reg = p_reg = 0
            continue
        if a_regs and get("ce_a", k, 1):
            a_regs = [get("a", k)] + a_regs[:-1]
        if b_regs and get("ce_b", k, 1):
            b_regs = [get("b", k)] + b_regs[:-1]
        if config["mreg"] and get("ce_m", k, 1):
            m_reg = product
        if config["creg"] and get("ce_c", k, 1):
            c_reg = get("c", k)
        if config["preg"] and get("ce_p", k, 1):
            p_reg = alu
    return {"p": out, "pcout": out}

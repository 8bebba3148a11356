# amaranth: UnusedElaboratable=no
"""Shared units (:mod:`nnrtl.hw.hierarchy`): one module per kind, an instance per use, and
the plain component outside an emission. The engines' Verilator benches check that a
shared design computes what the flat one does (tests/sbe/sim/test_sbe_verilator.py)."""

import re

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from nnrtl.hw import hierarchy


class Counter(wiring.Component):
    """Counts ``step`` each cycle (sync logic: the module has clk and rst)."""

    def __init__(self, step):
        self.step = step
        super().__init__({"en": In(1), "count": Out(8)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + self.step)
        return m


class Invert(wiring.Component):
    """Combinational only: its module has no clock or reset port."""

    def __init__(self):
        super().__init__({"a": In(4), "y": Out(4)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.y.eq(~self.a)
        return m


class Parent(wiring.Component):
    def __init__(self):
        super().__init__({"en": In(1), "total": Out(8), "a": In(4), "y": Out(4)})

    def elaborate(self, platform):
        m = Module()
        counters = [Counter(1), Counter(1), Counter(1), Counter(2)]
        total = 0
        for index, counter in enumerate(counters):
            m.submodules[f"counter{index}"] = hierarchy.shared(counter, key=counter.step)
            m.d.comb += counter.en.eq(self.en)
            total = total + counter.count
        m.d.comb += self.total.eq(total)
        invert = Invert()
        m.submodules.invert = hierarchy.shared(invert, key=())
        m.d.comb += [invert.a.eq(self.a), self.y.eq(invert.y)]
        return m


def modules(text):
    return dict(re.findall(r"^module\s+(\S+)\s*\((.*?)\);", text, re.S | re.M))


@pytest.fixture(scope="module")
def text():
    return hierarchy.convert(Parent(), "top")


def test_each_kind_is_emitted_once_and_instantiated_per_use(text):
    found = modules(text)
    counters = [name for name in found if name.startswith("top__counter_")]
    assert len(counters) == 2                       # steps 1 and 2: two kinds
    instances = re.findall(r"^\s*(top__counter_\S+) \S+ \(", text, re.M)
    assert sorted(instances) == sorted(counters[:1] * 3 + counters[1:]) or \
        sorted(instances) == sorted(counters[1:] * 3 + counters[:1])    # 4 instances
    inverts = [name for name in found if name.startswith("top__invert_")]
    assert len(inverts) == 1
    assert "clk" in found[counters[0]] and "rst" in found[counters[0]]
    assert "clk" not in found[inverts[0]]
    # Each unit's module comes before the top that instantiates it.
    assert text.index(f"module {counters[0]}") < text.index("module top(")


def test_outside_an_emission_the_component_itself_is_elaborated():
    counter = Counter(3)
    assert hierarchy.shared(counter, key=3) is counter

    parent = Parent()
    sim = Simulator(parent)
    sim.add_clock(1e-6)

    async def bench(ctx):
        ctx.set(parent.en, 1)
        ctx.set(parent.a, 0b0101)
        await ctx.tick().repeat(3)
        assert ctx.get(parent.total) == 3 * (1 + 1 + 1 + 2)
        assert ctx.get(parent.y) == 0b1010

    sim.add_testbench(bench)
    sim.run()


def test_a_non_component_is_refused():
    with pytest.raises(TypeError, match="shared\\(\\) takes a wiring.Component"):
        hierarchy.shared(object(), key=0)


def test_names_are_stable_across_conversions(text):
    assert hierarchy.convert(Parent(), "top") == text
    assert "top__p_e" not in hierarchy._module_name("top", type("PEGroup", (), {})(), 1)


class Table(wiring.Component):
    """A memory of ``depth`` words of ``width`` bits, zero-initialised."""

    def __init__(self, width, depth):
        self.width, self.depth = width, depth
        super().__init__({"addr": In(range(depth)), "data": Out(width)})

    def elaborate(self, platform):
        from amaranth.lib.memory import Memory
        m = Module()
        m.submodules.table = table = Memory(shape=self.width, depth=self.depth, init=[])
        read = table.read_port()
        m.d.comb += [read.addr.eq(self.addr), self.data.eq(read.data)]
        return m


@pytest.mark.parametrize("width", [32, 512])
def test_zero_initial_contents_become_one_loop(width):
    """Amaranth writes an all-zero memory as one line per word, in decimal (``32'd0``) or
    hex (``512'h0...``) depending on the width; either becomes one loop of zeros."""
    text = hierarchy.convert(Table(width, 300), "t")
    assert re.search(r"for \(nnrtl_zero_init_1 = 0; nnrtl_zero_init_1 < 300;", text)
    assert not re.search(r"\[299\] = ", text)


def test_nonzero_initial_contents_are_kept():
    block = "  initial begin\n    m[0] = 32'd0;\n    m[1] = 32'd7;\n  end\n"
    assert hierarchy.compact_zero_init(block) == block


class Selector(wiring.Component):
    """Picks one of ``count`` inputs: its ``sel`` port is zero bits wide when ``count`` is 1
    (as the SBE's bias-buffer addresses are at batch 1)."""

    def __init__(self, count, invert=False):
        self.count, self.invert = count, invert
        super().__init__({"sel": In(range(count)), "d": In(count), "q": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.q.eq(self.d.bit_select(self.sel, 1) ^ self.invert)
        return m


class Selectors(wiring.Component):
    def __init__(self, count, *, keys, inverts=(False, False)):
        self._count, self._keys, self._inverts = count, keys, inverts
        super().__init__({"d": In(max(count) if isinstance(count, tuple) else count),
                          "q": Out(2)})

    def elaborate(self, platform):
        m = Module()
        for n, (key, invert) in enumerate(zip(self._keys, self._inverts)):
            count = self._count[n] if isinstance(self._count, tuple) else self._count
            unit = Selector(count, invert)
            m.submodules[f"sel{n}"] = hierarchy.shared(unit, key=key)
            m.d.comb += [unit.d.eq(self.d[:count]), self.q[n].eq(unit.q)]
        return m


def test_a_zero_width_port_is_neither_a_module_port_nor_a_connection():
    text = hierarchy.convert(Selectors(1, keys=(1, 1)), "top")
    (module,) = [name for name in modules(text) if name.startswith("top__selector_")]
    assert "sel" not in {port.strip() for port in modules(text)[module].split(",")}
    assert not re.search(r"\.sel\(", text)
    assert "input [-1:0]" not in text


def test_uses_whose_ports_differ_do_not_share_a_module():
    with pytest.raises(hierarchy.SharedUnitError,
                       match=r"^shared Selector with key 0: this use's ports differ from its "
                             r"module top__selector_\w+'s \(d \[2\] input, d \[4\] input, "):
        hierarchy.convert(Selectors((2, 4), keys=(0, 0)), "top")


def test_a_key_that_does_not_determine_the_logic_is_caught_when_checked(monkeypatch):
    design = Selectors(4, keys=(0, 0), inverts=(False, True))
    hierarchy.convert(design, "top")                # unchecked: the key is trusted
    monkeypatch.setenv("NNRTL_CHECK_SHARED", "1")
    with pytest.raises(hierarchy.SharedUnitError,
                       match=r"^shared Selector with key 0: this use elaborates to other logic"):
        hierarchy.convert(Selectors(4, keys=(0, 0), inverts=(False, True)), "top")
    hierarchy.convert(Selectors(4, keys=(0, 1), inverts=(False, True)), "top")


def test_an_instance_that_misses_a_port_is_refused():
    text = ("module unit(a, b);\n  input a;\n  output b;\nendmodule\n"
            "module top(x, y);\n  unit u0 (\n    .a(x),\n    .b(y)\n  );\n"
            "  unit u1 (\n    .a(x)\n  );\nendmodule\n")
    with pytest.raises(hierarchy.SharedUnitError,
                       match=r"^instance u1 of unit does not connect exactly its ports "
                             r"\(missing: b; not ports: none\)$"):
        hierarchy.check_instances(text)
    hierarchy.check_instances(text, {"other"})

# amaranth: UnusedElaboratable=no
"""FARNN activation units (Cho et al., TPDS 2022, Sec. 5.2, Eq. 1-3): the FW unit (gate
sums, sigmoid / tanh, the cell and hidden update) and the separate BW unit (derivatives
from the saved values, the gate deltas), for LSTM and GRU (PyTorch's ``nn.GRU`` form).

Each unit is one stream pipeline of :mod:`nnrtl.hw.arith` units -- :class:`FloatAdd`,
:class:`FloatMul`, :class:`FloatSigmoid`, :class:`FloatTanh` (the PWL table units, default
fp32 tables), :class:`FloatSigmoidDerivative`, :class:`FloatTanhDerivative` -- taking one
cell per cycle. The arithmetic and its order are the contract's, modelled bit for bit by
:mod:`nnrtl.sim.golden.farnn.cells` (its module docstring lists the equations); the
paper's ``e^x / (e^x + 1)`` is replaced by the table units, so there is no overflow to
handle (they saturate from ``|x| >= 32`` / ``16``; a NaN in gives the canonical NaN).

Schedule. The equations are a DAG of units; every unit starts as soon as its last operand
is ready (ASAP), the earlier operands waiting in delay registers (no reset, SRL-friendly),
and every output is delayed to the slowest. :attr:`latency` is that schedule's length,
computed from the units' own ``latency`` properties by running the same datapath code
without building hardware. With ``A`` adder and ``M`` multiplier stages (a table unit
takes ``2A + M``, a derivative unit ``A + M``) the critical paths are:

=======  ===================================================  =======  ======  ======
unit     critical path                                        latency  A4, M3  A6, M6
=======  ===================================================  =======  ======  ======
LSTM FW  a_k, sig / tanh, f*c_prev or i*g, +, tanh(c), *o     6A + 4M  36      60
GRU FW   a_r, sig, *hn, +imvm_n, tanh, *(1-z), +              7A + 4M  40      66
LSTM BW  tanh(c), tanh', *o, *dh^, +dc, *i, *tanh'(g)         4A + 6M  34      60
GRU BW   dh^, *(1-z), *tanh'(n), *hn, *sig'(r)                A + 4M   16      30
=======  ===================================================  =======  ======  ======

The paper's LSTM FW takes 204 cycles (exp and division cores); this one 36 at the
defaults: well under one round of ``n_in`` cycles per vector, so the activation of a
slice hides behind the MAC of the next for any ``n_in`` above that.
"""

import functools
from collections import Counter
from types import SimpleNamespace

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..arith.activation import (FloatActivation, FloatSigmoidDerivative, FloatTanhDerivative,
                                activation_table)
from ..arith.float_add import FloatAdd
from ..arith.float_format import FP32, FloatFormat
from ..arith.float_mul import FloatMul
from .config import CELLS, GATES


__all__ = ["SAVED", "FwActivation", "BwActivation"]

#: What the FW saves for the BW, per cell, in the order of the save stream's fields (also
#: :mod:`nnrtl.sim.golden.farnn.cells`'s).
SAVED = {"lstm": ("i", "f", "g", "o", "c"), "gru": ("r", "z", "n", "hn")}


@functools.cache
def _table(function, fmt):
    return activation_table(function, fmt)


class _Value:
    """A value of the datapath: its signal (None when only timing) and the pipeline stage
    it is ready at (None for a constant, ready at every stage)."""

    __slots__ = ("signal", "time", "name")

    def __init__(self, signal, time, name):
        self.signal, self.time, self.name = signal, time, name


class _Schedule:
    """Places float units on one pipeline moved by ``advance``, ASAP, with delay
    registers where an operand is ready early. With ``m=None`` it only computes the
    times (for :attr:`_CellPipeline.latency`), from the same unit objects, which are then
    never elaborated (hence the file's ``UnusedElaboratable=no``)."""

    def __init__(self, fmt, adder_stages, multiplier_stages, m=None, advance=None):
        self._fmt = fmt
        self._adder_stages = adder_stages
        self._multiplier_stages = multiplier_stages
        self._m = m
        self._advance = advance
        self._delays = {}
        self.units = Counter()

    def value(self, signal, name, time=0):
        return _Value(signal, time, name)

    def const(self, bits, name):
        signal = None if self._m is None else Const(bits, self._fmt.width)
        return _Value(signal, None, name)

    def one(self):
        return self.const(self._fmt.bias << self._fmt.mantissa_bits, "one")

    def at(self, value, time):
        """``value``'s signal as of stage ``time`` (delayed by registers as needed)."""
        if value.time is None or value.time == time or self._m is None:
            return value.signal
        assert time > value.time, (value.name, value.time, time)
        _value, chain = self._delays.setdefault(id(value), (value, [value.signal]))
        while len(chain) <= time - value.time:
            register = Signal(self._fmt.width, name=f"{value.name}_d{len(chain)}",
                              reset_less=True)
            with self._m.If(self._advance):
                self._m.d.sync += register.eq(chain[-1])
            chain.append(register)
        return chain[time - value.time]

    def _unit(self, kind, unit, name, operands, connect):
        time = max((op.time for op in operands if op.time is not None), default=0)
        self.units[kind] += 1
        signal = None
        if self._m is not None:
            self._m.submodules[name] = unit
            self._m.d.comb += [unit.i.valid.eq(1), unit.o.ready.eq(self._advance)]
            self._m.d.comb += connect(unit.i.payload, *(self.at(op, time) for op in operands))
            signal = Signal(self._fmt.width, name=name)
            self._m.d.comb += signal.eq(unit.o.payload)
        return _Value(signal, time + unit.latency, name)

    def _adder(self):
        return FloatAdd(self._fmt, stages=self._adder_stages)

    def add(self, name, a, b):
        """``fa(a, b)``."""
        return self._unit("add", self._adder(), name, (a, b),
                          lambda p, a, b: [p.a.eq(a), p.b.eq(b), p.subtract.eq(0)])

    def sub(self, name, a, b):
        """``fa(a, -b)`` (the adder's ``subtract`` bit flips ``b``'s sign)."""
        return self._unit("add", self._adder(), name, (a, b),
                          lambda p, a, b: [p.a.eq(a), p.b.eq(b), p.subtract.eq(1)])

    def mul(self, name, a, b):
        """``fm(a, b)``."""
        unit = FloatMul(self._fmt, stages=self._multiplier_stages)
        return self._unit("mul", unit, name, (a, b),
                          lambda p, a, b: [p.a.eq(a), p.b.eq(b)])

    def _single(self, kind, unit, name, x):
        return self._unit(kind, unit, name, (x,), lambda p, x: [p.eq(x)])

    def _stages(self):
        return dict(adder_stages=self._adder_stages,
                    multiplier_stages=self._multiplier_stages)

    def sigmoid(self, name, x):
        return self._single("sigmoid", FloatActivation(_table("sigmoid", self._fmt),
                                                       **self._stages()), name, x)

    def tanh(self, name, x):
        return self._single("tanh", FloatActivation(_table("tanh", self._fmt),
                                                    **self._stages()), name, x)

    def sigmoid_derivative(self, name, s):
        return self._single("sigmoid_derivative",
                            FloatSigmoidDerivative(self._fmt, **self._stages()), name, s)

    def tanh_derivative(self, name, t):
        return self._single("tanh_derivative",
                            FloatTanhDerivative(self._fmt, **self._stages()), name, t)


# -- The datapaths (the equations of nnrtl.sim.golden.farnn.cells, in its order) ----------

def _lstm_forward(p, x):
    a = [p.add(f"a_{gate}", x.imvm[k], x.rmvm[k]) for k, gate in enumerate(GATES["lstm"])]
    i = p.sigmoid("i", a[0])
    f = p.sigmoid("f", a[1])
    g = p.tanh("g", a[2])
    o = p.sigmoid("o", a[3])
    c = p.add("c", p.mul("f_c_prev", f, x.c_prev), p.mul("i_g", i, g))
    h = p.mul("h", o, p.tanh("tanh_c", c))
    return {"h": h, "saved": dict(i=i, f=f, g=g, o=o, c=c)}


def _gru_forward(p, x):
    r = p.sigmoid("r", p.add("a_r", x.imvm[0], x.rmvm[0]))
    z = p.sigmoid("z", p.add("a_z", x.imvm[1], x.rmvm[1]))
    hn = p.add("hn", x.rmvm[2], x.bias_n)
    n = p.tanh("n", p.add("a_n", x.imvm[2], p.mul("r_hn", r, hn)))
    h = p.add("h", p.mul("omz_n", p.sub("omz", p.one(), z), n), p.mul("z_h_prev", z, x.h_prev))
    return {"h": h, "saved": dict(r=r, z=z, n=n, hn=hn)}


def _lstm_backward(p, x):
    s = x.saved
    dh_hat = p.add("dh_hat", x.dh, x.dy)
    tc = p.tanh("tanh_c", s["c"])
    dc_hat = p.add("dc_hat", x.dc,
                   p.mul("dc_term", p.mul("dtanh_c_o", p.tanh_derivative("dtanh_c", tc),
                                          s["o"]), dh_hat))
    di = p.mul("di", p.sigmoid_derivative("dsig_i", s["i"]), p.mul("g_dc", s["g"], dc_hat))
    df = p.mul("df", p.sigmoid_derivative("dsig_f", s["f"]),
               p.mul("c_prev_dc", x.c_prev, dc_hat))
    dg = p.mul("dg", p.tanh_derivative("dtanh_g", s["g"]), p.mul("i_dc", s["i"], dc_hat))
    do = p.mul("do", p.sigmoid_derivative("dsig_o", s["o"]), p.mul("tc_dh", tc, dh_hat))
    return {"d": [di, df, dg, do], "dc_prev": p.mul("dc_prev", s["f"], dc_hat)}


def _gru_backward(p, x):
    s = x.saved
    dh_hat = p.add("dh_hat", x.dh, x.dy)
    omz = p.sub("omz", p.one(), s["z"])
    dn = p.mul("dn", p.tanh_derivative("dtanh_n", s["n"]), p.mul("omz_dh", omz, dh_hat))
    dz = p.mul("dz", p.sigmoid_derivative("dsig_z", s["z"]),
               p.mul("h_n_dh", p.sub("h_n", x.h_prev, s["n"]), dh_hat))
    dhn = p.mul("dhn", s["r"], dn)
    dr = p.mul("dr", p.sigmoid_derivative("dsig_r", s["r"]), p.mul("hn_dn", s["hn"], dn))
    return {"d": [dr, dz, dn], "dhn": dhn, "direct": p.mul("direct", s["z"], dh_hat)}


_DATAPATHS = {("fw", "lstm"): _lstm_forward, ("fw", "gru"): _gru_forward,
              ("bw", "lstm"): _lstm_backward, ("bw", "gru"): _gru_backward}


def _layouts(phase, cell, width):
    """``(input, output)`` StructLayouts of a unit."""
    gates = data.ArrayLayout(width, len(GATES[cell]))
    saved = data.StructLayout({name: width for name in SAVED[cell]})
    if phase == "fw":
        state = {"c_prev": width} if cell == "lstm" else {"bias_n": width, "h_prev": width}
        return (data.StructLayout({"imvm": gates, "rmvm": gates, **state}),
                data.StructLayout({"h": width, "saved": saved}))
    state = ({"c_prev": width, "dc": width} if cell == "lstm" else {"h_prev": width})
    out = {"dc_prev": width} if cell == "lstm" else {"dhn": width, "direct": width}
    return (data.StructLayout({"saved": saved, "dh": width, "dy": width, **state}),
            data.StructLayout({"d": gates, **out}))


def _leaves(layout, view, path=""):
    """``{path: value}`` of every fp32 field of ``layout`` (``view`` its view, or None),
    with paths ``name`` / ``name.k`` / ``name.field``."""
    if isinstance(layout, data.StructLayout):
        items = [(name, field.shape) for name, field in layout]
    elif isinstance(layout, data.ArrayLayout):
        items = [(str(k), layout.elem_shape) for k in range(layout.length)]
    else:
        return {path: view}
    out = {}
    for name, shape in items:
        child = None if view is None else view[int(name) if name.isdigit() else name]
        out.update(_leaves(shape, child, f"{path}.{name}" if path else name))
    return out


def _tree(leaves):
    """The namespace a datapath reads its inputs from: ``x.name``, ``x.name[k]``,
    ``x.saved["c"]``, from ``{path: _Value}``."""
    groups = {}
    for path, value in leaves.items():
        head, _dot, rest = path.partition(".")
        if rest:
            groups.setdefault(head, {})[rest] = value
        else:
            groups[head] = value
    for head, group in groups.items():
        if isinstance(group, dict):
            groups[head] = ([group[str(k)] for k in range(len(group))]
                            if all(key.isdigit() for key in group) else group)
    return SimpleNamespace(**groups)


def _flatten(tree, path=""):
    if isinstance(tree, _Value):
        return {path: tree}
    items = enumerate(tree) if isinstance(tree, list) else tree.items()
    out = {}
    for key, value in items:
        out.update(_flatten(value, f"{path}.{key}" if path else str(key)))
    return out


class _CellPipeline(wiring.Component):
    """The shared shell: parameter checks, ports, latency, elaboration."""

    _phase = None

    def __init__(self, cell, *, fmt=FP32, adder_stages=4, multiplier_stages=3):
        if cell not in CELLS:
            raise TypeError(f"cell must be one of {', '.join(CELLS)}, not {cell!r}")
        if not isinstance(fmt, FloatFormat):
            raise TypeError(f"fmt must be a FloatFormat, not {fmt!r}")
        for name, value, lowest, unit in (("adder_stages", adder_stages, 1, FloatAdd),
                                          ("multiplier_stages", multiplier_stages, 0, FloatMul)):
            highest = len(unit.CUT_PRIORITY)
            if (not isinstance(value, int) or isinstance(value, bool)
                    or not lowest <= value <= highest):
                raise TypeError(f"{name} must be an integer from {lowest} to {highest}, "
                                f"not {value!r}")
        self._cell = cell
        self._fmt = fmt
        self._adder_stages = adder_stages
        self._multiplier_stages = multiplier_stages
        self._in_layout, self._out_layout = _layouts(self._phase, cell, fmt.width)
        schedule = _Schedule(fmt, adder_stages, multiplier_stages)
        outputs = self._datapath(schedule, None)
        self._latency = max(value.time for value in outputs.values())
        self._units = dict(schedule.units)
        super().__init__({"i": In(stream.Signature(self._in_layout)),
                          "o": Out(stream.Signature(self._out_layout))})

    cell = property(lambda self: self._cell)
    fmt = property(lambda self: self._fmt)
    adder_stages = property(lambda self: self._adder_stages)
    multiplier_stages = property(lambda self: self._multiplier_stages)
    input_layout = property(lambda self: self._in_layout, doc="The StructLayout of ``i``.")
    output_layout = property(lambda self: self._out_layout, doc="The StructLayout of ``o``.")

    @property
    def latency(self):
        """Cycles from a cell's handshake on ``i`` to its result on ``o`` without
        backpressure: the length of the ASAP schedule of the units (module docstring).
        Throughput: one cell per cycle while ``o.ready`` is high."""
        return self._latency

    @property
    def units(self):
        """Float units of the pipeline by kind (``add``, ``mul``, ``sigmoid``, ``tanh``,
        ``sigmoid_derivative``, ``tanh_derivative``): ``{kind: count}``."""
        return dict(self._units)

    def _datapath(self, schedule, payload):
        """The output values by path, from the inputs (``payload`` a view of ``i.payload``,
        or None for timing only)."""
        inputs = {path: schedule.value(signal, path.replace(".", "_"))
                  for path, signal in _leaves(self._in_layout, payload).items()}
        outputs = _DATAPATHS[self._phase, self._cell](schedule, _tree(inputs))
        return _flatten(outputs)

    def elaborate(self, platform):
        m = Module()
        latency = self._latency
        advance = Signal()
        valid = [self.i.valid]
        for stage in range(latency):
            register = Signal(name=f"valid_{stage + 1}")
            with m.If(advance):
                m.d.sync += register.eq(valid[-1])
            valid.append(register)
        m.d.comb += [
            advance.eq(~valid[-1] | self.o.ready),
            self.i.ready.eq(advance),
            self.o.valid.eq(valid[-1]),
        ]
        schedule = _Schedule(self._fmt, self._adder_stages, self._multiplier_stages, m,
                             advance)
        outputs = self._datapath(schedule, self.i.payload)
        fields = _leaves(self._out_layout, self.o.payload)
        assert fields.keys() == outputs.keys(), (fields.keys(), outputs.keys())
        for path, value in outputs.items():
            m.d.comb += fields[path].eq(schedule.at(value, latency))
        return m


class FwActivation(_CellPipeline):
    """The FW activation unit: ``h`` and the saved values of one cell per cycle.

    Arithmetic: :func:`nnrtl.sim.golden.farnn.cells.lstm_forward` /
    :func:`~nnrtl.sim.golden.farnn.cells.gru_forward`, bit for bit (fp32, no flushing).
    Schedule and latency: the module docstring; backpressure and routing: Notes below.

    Parameters
    ----------
    cell : str
        ``"lstm"`` or ``"gru"``.
    fmt : FloatFormat (keyword-only)
        The number format (default fp32, the contract's).
    adder_stages : int (keyword-only)
        Stages of every adder, also inside the table units: 1 to 6 (default 4).
    multiplier_stages : int (keyword-only)
        Stages of every multiplier: 0 to 6 (default 3).

    Attributes
    ----------
    i : In(stream.Signature(input_layout))
        LSTM ``{imvm: [i, f, g, o], rmvm: [i, f, g, o], c_prev}``; GRU ``{imvm: [r, z,
        n], rmvm: [r, z, n], bias_n, h_prev}``; every field an fp32 pattern.
    o : Out(stream.Signature(output_layout))
        ``{h, saved: {i, f, g, o, c}}`` (LSTM) or ``{h, saved: {r, z, n, hn}}`` (GRU).
    latency : int
        ``6A + 4M`` (LSTM) or ``7A + 4M`` (GRU) cycles, from the units' latencies.
    units : dict
        Float units by kind.

    Raises
    ------
    TypeError
        If ``cell`` is not one of lstm, gru, ``fmt`` is not a FloatFormat, or a number of
        stages is out of range.

    Notes
    -----
    Backpressure rule. The pipeline moves as a whole, as the float units do: one enable,
    ``advance = ~o.valid | o.ready``, loads every register (the units' stages, the delay
    registers and the valid bits) and is ``i.ready``. A result that ``o`` does not take
    holds every stage, bubbles included, so nothing is lost and the order is kept; ``i.ready``
    depends combinationally on ``o.ready``. The units' inputs are held valid (``i.valid = 1``)
    and their outputs' ``ready`` is ``advance``, so each unit's own enable ``~o.valid |
    o.ready`` equals ``advance`` once its pipeline is full, which is ``latency`` cycles after
    reset at the latest; before then ``advance`` is 1 anyway (no result has reached ``o``),
    so the units never move apart. The valid bits travel in a shift register of their own.

    Ports and routing. FW: ``i`` takes the host's input-MVM parts ``imvm`` and the recurrent
    MVM's ``rmvm`` of every gate (the unit adds them), and the state (LSTM ``c_prev``; GRU
    ``h_prev`` and ``bias_n`` = ``bR_n``); ``o`` gives ``h`` (to the host, and to the MVM
    units as the next vector) and ``saved`` (the save stream; the LSTM's ``saved.c`` is also
    the next ``c_prev``, which the top keeps on chip). BW: ``i`` takes ``saved`` (read back),
    ``dh`` (the fold of the units' ``R_k^T`` products), ``dy`` (from the host) and the state
    (LSTM ``c_prev`` = the saved ``c`` of the step before, and ``dc``; GRU ``h_prev``, the FW
    output of the step before); ``o`` gives ``d`` (the W side's gate deltas, to the host) and
    LSTM ``dc_prev`` (kept on chip: the next step's ``dc``) or GRU ``dhn`` and ``direct``. The
    MVM units take ``d[k]``, except GRU's unit n, which takes ``dhn``; the GRU's next ``dh`` is
    ``fa(fold, direct)``. With a projection the top feeds ``dy = -0`` (``x + (-0) = x`` bit
    for bit), as the projection's delta already holds the host's.
    """

    _phase = "fw"


class BwActivation(_CellPipeline):
    """The BW activation unit: the gate deltas of one cell per cycle (the paper's Eq. 3).

    Arithmetic: :func:`nnrtl.sim.golden.farnn.cells.lstm_backward` /
    :func:`~nnrtl.sim.golden.farnn.cells.gru_backward` (``dy`` always added: ``-0`` with a
    projection), bit for bit. Schedule and latency: the module docstring; backpressure and routing:
    the Notes of :class:`FwActivation`.

    Parameters
    ----------
    cell, fmt, adder_stages, multiplier_stages
        As :class:`FwActivation`.

    Attributes
    ----------
    i : In(stream.Signature(input_layout))
        LSTM ``{saved: {i, f, g, o, c}, dh, dy, c_prev, dc}``; GRU ``{saved: {r, z, n,
        hn}, dh, dy, h_prev}``.
    o : Out(stream.Signature(output_layout))
        LSTM ``{d: [i, f, g, o], dc_prev}``; GRU ``{d: [r, z, n], dhn, direct}``.
    latency : int
        ``4A + 6M`` (LSTM) or ``A + 4M`` (GRU) cycles, from the units' latencies.
    units : dict
        Float units by kind.

    Raises
    ------
    TypeError
        As :class:`FwActivation`.
    """

    _phase = "bw"

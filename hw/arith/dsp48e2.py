"""One DSP48E2 slice (UltraScale+), in the subset the floating-point units use.

:class:`DSP48E2Slice` is a 27 x 18 signed multiplier ``M = A * B`` followed by the
slice's 48-bit ALU, ``P = Z + W + X + Y`` (``ALUMODE`` ``0000``) or ``P = Z - (W + X +
Y)`` (``0011``), its operands chosen by a constant ``OPMODE`` (UG579, tables 2-7 to 2-10):

==========  =========================================================================
field       values in the subset
==========  =========================================================================
X, Y        ``00`` / ``00`` (none) or ``01`` / ``01`` (the product M, sign-extended)
Z           ``000`` 0, ``001`` PCIN, ``010`` P, ``011`` C, ``101`` PCIN >> 17,
            ``110`` P >> 17 (arithmetic shifts: the cascade of wide products)
W           ``00`` 0, ``01`` P, ``11`` C
==========  =========================================================================

with the optional pipeline registers A and B (0, 1 or 2 stages), C, M and P (0 or 1),
each with its clock enable and reset by the clock domain's reset, so the slice can
stand in for a unit's pipeline registers. Carry-in, the pre-adder, SIMD, the pattern
detector and the A/B cascades are not used (tied off).

The form a design elaborates to is chosen by the constructor's ``primitive``, which a
unit passes down from its own option:

* ``primitive=True``: an ``Instance("DSP48E2", ...)`` with every attribute set (the
  control registers ``OPMODEREG`` etc. off, ``USE_MULT`` from the OPMODE). Synthesis
  maps it as it stands (Yosys knows the cell from ``synth_xilinx``'s library, Vivado
  from UNISIM); Verilator simulates it with :func:`model_verilog` (the behavioural
  Verilog model of the same subset, ``hw/arith/models/dsp48e2_subset.v``) appended to
  the design's Verilog, so the netlist verified is the one synthesized.
* ``primitive=False`` (default): the same arithmetic and registers in plain Amaranth,
  for Amaranth's simulator (which cannot run an ``Instance``).

Both forms are checked against each other, cycle by cycle and registers included, in
``tests/sim/test_dsp48e2_verilator.py``. :func:`multiply_add` and
:func:`unsigned_product` are the combinational slices that ``FloatAdd`` / ``FloatMul``
build with ``dsp_primitives`` (:data:`PRIMITIVE_FORMS`).
"""

from pathlib import Path

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, ResetSignal, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["DSP48E2Slice", "OPMODE_M", "OPMODE_C_PLUS_M", "OPMODE_PCIN17_PLUS_M",
           "OPMODE_PCIN_PLUS_M", "OPMODE_P_PLUS_M", "ALUMODE_ADD", "ALUMODE_SUBTRACT",
           "model_verilog", "MODEL_PATH", "multiply_add", "unsigned_product",
           "PRIMITIVE_FORMS", "check_primitive_form"]

#: ``P = A * B``.
OPMODE_M = 0b000000101
#: ``P = C + A * B``.
OPMODE_C_PLUS_M = 0b000110101
#: ``P = (PCIN >> 17) + A * B``: the upper part of a product wider than 27 x 18.
OPMODE_PCIN17_PLUS_M = 0b001010101
#: ``P = PCIN + A * B``.
OPMODE_PCIN_PLUS_M = 0b000010101
#: ``P = P + A * B`` (a multiply-accumulate; needs the P register).
OPMODE_P_PLUS_M = 0b000100101

#: ``P = Z + W + X + Y``.
ALUMODE_ADD = 0b0000
#: ``P = Z - (W + X + Y)``.
ALUMODE_SUBTRACT = 0b0011

#: The behavioural Verilog model of the subset (module ``DSP48E2``).
MODEL_PATH = Path(__file__).parent / "models" / "dsp48e2_subset.v"

#: A unit's ``dsp_primitives`` option: False (``*`` and ``+``, mapped by the tool), True
#: (:class:`DSP48E2Slice` Instances: synthesis, Verilator with :func:`model_verilog`),
#: ``"behaviour"`` (the same slices in plain Amaranth: Amaranth's simulator).
PRIMITIVE_FORMS = (False, True, "behaviour")

_Z_VALUES = (0b000, 0b001, 0b010, 0b011, 0b101, 0b110)
_W_VALUES = (0b00, 0b01, 0b11)
_WIDTH = 48


def model_verilog():
    """The behavioural Verilog model of the subset (a module named ``DSP48E2``): append it
    to a design's Verilog for Verilator. Outside the subset it stops the simulation."""
    return MODEL_PATH.read_text()


def _fields(opmode):
    return opmode & 0b11, (opmode >> 2) & 0b11, (opmode >> 4) & 0b111, (opmode >> 7) & 0b11


def _check_register(name, value, allowed):
    if not isinstance(value, int) or isinstance(value, bool) or value not in allowed:
        raise TypeError(f"{name} must be one of {', '.join(map(str, allowed))}, "
                        f"not {value!r}")


class DSP48E2Slice(wiring.Component):
    """One DSP48E2 slice with a constant OPMODE and ALUMODE.

    Parameters
    ----------
    opmode : int
        The 9-bit OPMODE, in the subset of the module docstring (e.g. :data:`OPMODE_M`,
        :data:`OPMODE_C_PLUS_M`, :data:`OPMODE_PCIN17_PLUS_M`).
    alumode : int
        :data:`ALUMODE_ADD` or :data:`ALUMODE_SUBTRACT`.
    areg, breg : int
        Register stages on A and B: 0, 1 or 2.
    creg, mreg, preg : int
        Registers on C, on the product and on P: 0 or 1.
    primitive : bool
        True: an ``Instance("DSP48E2")`` (synthesis, Verilator with
        :func:`model_verilog`); False: behavioural Amaranth (Amaranth's simulator).
    domain : str
        The clock domain of the registers; its reset clears them.

    Attributes
    ----------
    a : Signal(signed(27)), in
        Multiplier operand A (present when the OPMODE uses the product).
    b : Signal(signed(18)), in
        Multiplier operand B (likewise).
    c : Signal(48), in
        The C operand (present when the OPMODE uses C).
    pcin : Signal(48), in
        The cascade input; connect only the ``pcout`` of another slice (present when the
        OPMODE uses it).
    ce_a, ce_b, ce_c, ce_m, ce_p : Signal(1, init=1), in
        Clock enables of the registers that are present.
    p : Signal(48), out
        The result, ``P`` modulo 2**48.
    pcout : Signal(48), out
        The same value on the cascade output.

    Latency: ``areg + mreg + preg`` cycles from A (``breg + mreg + preg`` from B),
    ``creg + preg`` from C, ``preg`` from PCIN; one result per cycle.

    Raises
    ------
    TypeError
        If a register count is out of range, or ``primitive`` is not a bool.
    ValueError
        If the OPMODE or ALUMODE is outside the subset, or the OPMODE feeds P back
        without the P register.
    """

    def __init__(self, *, opmode, alumode=ALUMODE_ADD, areg=0, breg=0, creg=0, mreg=0,
                 preg=0, primitive=False, domain="sync"):
        if not isinstance(opmode, int) or isinstance(opmode, bool) or \
                not 0 <= opmode < 2 ** 9:
            raise TypeError(f"opmode must be a 9-bit integer, not {opmode!r}")
        x, y, z, w = _fields(opmode)
        if (x, y) not in ((0, 0), (1, 1)) or z not in _Z_VALUES or w not in _W_VALUES:
            raise ValueError(
                f"opmode {opmode:#011b} is outside the supported subset: X/Y must be "
                f"00/00 or 01/01, Z one of 000, 001, 010, 011, 101, 110, W one of 00, 01, "
                f"11 (e.g. {OPMODE_M:#011b}, {OPMODE_C_PLUS_M:#011b}, "
                f"{OPMODE_PCIN17_PLUS_M:#011b})")
        if alumode not in (ALUMODE_ADD, ALUMODE_SUBTRACT) or isinstance(alumode, bool):
            raise ValueError(f"alumode must be {ALUMODE_ADD:#06b} (add) or "
                             f"{ALUMODE_SUBTRACT:#06b} (subtract), not {alumode!r}")
        _check_register("areg", areg, (0, 1, 2))
        _check_register("breg", breg, (0, 1, 2))
        for name, value in (("creg", creg), ("mreg", mreg), ("preg", preg)):
            _check_register(name, value, (0, 1))
        if not isinstance(primitive, bool):
            raise TypeError(f"primitive must be a bool, not {primitive!r}")
        feedback = z in (0b010, 0b110) or w == 0b01
        if feedback and not preg:
            raise ValueError(f"opmode {opmode:#011b} feeds P back, which needs preg=1, "
                             f"not preg=0")
        self._opmode, self._alumode = opmode, alumode
        self._areg, self._breg, self._creg, self._mreg, self._preg = \
            areg, breg, creg, mreg, preg
        self._primitive, self._domain = primitive, domain
        self._uses_m = x == 1
        self._uses_c = z == 0b011 or w == 0b11
        self._uses_pcin = z in (0b001, 0b101)
        members = {}
        if self._uses_m:
            members.update(a=In(signed(27)), b=In(signed(18)))
        if self._uses_c:
            members["c"] = In(_WIDTH)
        if self._uses_pcin:
            members["pcin"] = In(_WIDTH)
        for name, stages, used in (("a", areg, self._uses_m), ("b", breg, self._uses_m),
                                   ("c", creg, self._uses_c), ("m", mreg, self._uses_m),
                                   ("p", preg, True)):
            if stages and used:
                members[f"ce_{name}"] = In(1, init=1)
        members.update(p=Out(_WIDTH), pcout=Out(_WIDTH))
        super().__init__(members)

    opmode = property(lambda self: self._opmode)
    alumode = property(lambda self: self._alumode)
    primitive = property(lambda self: self._primitive)
    areg = property(lambda self: self._areg)
    breg = property(lambda self: self._breg)
    creg = property(lambda self: self._creg)
    mreg = property(lambda self: self._mreg)
    preg = property(lambda self: self._preg)
    #: Cycles from A to P.
    a_latency = property(lambda self: self._areg + self._mreg + self._preg)
    #: Cycles from B to P.
    b_latency = property(lambda self: self._breg + self._mreg + self._preg)
    #: Cycles from C to P.
    c_latency = property(lambda self: self._creg + self._preg)
    #: Cycles from PCIN to P.
    pcin_latency = property(lambda self: self._preg)

    def _enable(self, name, used):
        return getattr(self, f"ce_{name}") if used else Const(0, 1)

    def elaborate(self, platform):
        if self._primitive:
            return self._instance()
        return self._behaviour()

    def _instance(self):
        m = Module()
        rst = ResetSignal(self._domain, allow_reset_less=True)
        ports = dict(
            p_A_INPUT="DIRECT", p_B_INPUT="DIRECT", p_AMULTSEL="A", p_BMULTSEL="B",
            p_PREADDINSEL="A", p_USE_MULT="MULTIPLY" if self._uses_m else "NONE",
            p_USE_SIMD="ONE48", p_USE_PATTERN_DETECT="NO_PATDET",
            p_AREG=self._areg, p_ACASCREG=self._areg, p_BREG=self._breg,
            p_BCASCREG=self._breg, p_CREG=self._creg, p_MREG=self._mreg,
            p_PREG=self._preg, p_ADREG=0, p_DREG=0, p_INMODEREG=0, p_OPMODEREG=0,
            p_ALUMODEREG=0, p_CARRYINREG=0, p_CARRYINSELREG=0,
            i_CLK=ClockSignal(self._domain),
            i_OPMODE=Const(self._opmode, 9), i_ALUMODE=Const(self._alumode, 4),
            i_INMODE=Const(0, 5), i_CARRYINSEL=Const(0, 3), i_CARRYIN=Const(0, 1),
            o_P=self.p, o_PCOUT=self.pcout,
        )
        ce_a = self._enable("a", self._areg and self._uses_m)
        ce_b = self._enable("b", self._breg and self._uses_m)
        ports.update(i_CEA1=ce_a if self._areg == 2 else Const(0, 1), i_CEA2=ce_a,
                     i_CEB1=ce_b if self._breg == 2 else Const(0, 1), i_CEB2=ce_b,
                     i_CEC=self._enable("c", self._creg and self._uses_c),
                     i_CEM=self._enable("m", self._mreg and self._uses_m),
                     i_CEP=self._enable("p", self._preg),
                     i_CEAD=Const(0, 1), i_CED=Const(0, 1), i_CEINMODE=Const(0, 1),
                     i_CECTRL=Const(0, 1), i_CEALUMODE=Const(0, 1),
                     i_CECARRYIN=Const(0, 1),
                     i_RSTA=rst, i_RSTB=rst, i_RSTC=rst, i_RSTM=rst, i_RSTP=rst,
                     i_RSTD=Const(0, 1), i_RSTINMODE=Const(0, 1), i_RSTCTRL=Const(0, 1),
                     i_RSTALUMODE=Const(0, 1), i_RSTALLCARRYIN=Const(0, 1))
        a = Signal(signed(30))
        b = Signal(signed(18))
        c = Signal(_WIDTH)
        if self._uses_m:
            m.d.comb += [a.eq(self.a), b.eq(self.b)]
        if self._uses_c:
            m.d.comb += c.eq(self.c)
        ports.update(i_A=a, i_B=b, i_C=c, i_D=Const(0, 27))
        # an unused PCIN is tied to 0, as Vivado's own netlists tie it
        ports["i_PCIN"] = self.pcin if self._uses_pcin else Const(0, _WIDTH)
        m.submodules.dsp48e2 = Instance("DSP48E2", **ports)
        return m

    def _stages(self, m, value, stages, enable, name):
        """``value`` delayed by ``stages`` registers that load when ``enable`` is high."""
        for k in range(stages):
            register = Signal.like(value, name=f"{name}{k + 1}")
            with m.If(enable):
                m.d[self._domain] += register.eq(value)
            value = register
        return value

    def _behaviour(self):
        m = Module()
        _x, _y, z, w = _fields(self._opmode)
        p_register = Signal(_WIDTH)

        def shift17(value, name):
            shifted = Signal(signed(_WIDTH), name=name)     # sign-extended
            m.d.comb += shifted.eq(value.as_signed() >> 17)
            return shifted

        terms = []                      # summed into W + X + Y
        if self._uses_m:
            a = self._stages(m, self.a, self._areg, self._enable("a", self._areg), "a")
            b = self._stages(m, self.b, self._breg, self._enable("b", self._breg), "b")
            product = Signal(signed(45))
            m.d.comb += product.eq(a * b)
            terms.append(self._stages(m, product, self._mreg,
                                      self._enable("m", self._mreg), "m"))
        c = Const(0, _WIDTH)
        if self._uses_c:
            c = self._stages(m, self.c, self._creg, self._enable("c", self._creg), "c")
        if w == 0b01:
            terms.append(p_register)
        elif w == 0b11:
            terms.append(c)
        zmux = {0b000: Const(0, _WIDTH), 0b010: p_register, 0b011: c,
                0b110: shift17(p_register, "p_shifted")}
        if self._uses_pcin:
            zmux.update({0b001: self.pcin, 0b101: shift17(self.pcin, "pcin_shifted")})
        addend = Const(0, _WIDTH)
        for term in terms:
            addend = (addend + term)[:_WIDTH]
        result = Signal(_WIDTH)
        if self._alumode == ALUMODE_SUBTRACT:
            m.d.comb += result.eq(zmux[z] - addend)
        else:
            m.d.comb += result.eq(zmux[z] + addend)
        if self._preg:
            with m.If(self.ce_p):
                m.d[self._domain] += p_register.eq(result)
            m.d.comb += self.p.eq(p_register)
        else:
            m.d.comb += self.p.eq(result)
        m.d.comb += self.pcout.eq(self.p)
        return m


def check_primitive_form(dsp_primitives, name="dsp_primitives"):
    """Raise ``TypeError`` naming ``name`` unless ``dsp_primitives`` is one of
    :data:`PRIMITIVE_FORMS`."""
    if not any(dsp_primitives is form or (isinstance(form, str) and dsp_primitives == form)
               for form in PRIMITIVE_FORMS):
        raise TypeError(f"{name} must be False, True or 'behaviour', not {dsp_primitives!r}")


def multiply_add(m, a, b, c, *, primitive, name):
    """``c + a * b`` on one combinational :class:`DSP48E2Slice` (:data:`OPMODE_C_PLUS_M`)
    named ``name`` in ``m``: ``a`` at most 27 bits signed (26 unsigned), ``b`` 18 signed
    (17 unsigned), ``c`` 48 bits. Returns P (48 bits, the sum modulo ``2**48``)."""
    assert len(a) + (not a.shape().signed) <= 27 and len(b) + (not b.shape().signed) <= 18
    assert len(c) <= _WIDTH
    dsp = DSP48E2Slice(opmode=OPMODE_C_PLUS_M, primitive=primitive)
    m.submodules[name] = dsp
    m.d.comb += [dsp.a.eq(a), dsp.b.eq(b), dsp.c.eq(c)]
    return dsp.p


def unsigned_product(m, a, b, *, primitive, name):
    """``a * b`` of unsigned ``a`` (at most 26 bits) and ``b`` (at most 34) on
    combinational :class:`DSP48E2Slice` s named ``{name}_low`` / ``{name}_high`` in ``m``:
    one slice for a ``b`` of up to 17 bits, else ``a * b[:17]`` on one and ``(PCIN >> 17)
    + a * b[17:]`` on a second, cascaded. Returns ``len(a) + len(b)`` bits."""
    assert len(a) <= 26 and len(b) <= 34
    width = len(a) + len(b)
    low = DSP48E2Slice(opmode=OPMODE_M, primitive=primitive)
    m.submodules[f"{name}_low"] = low
    m.d.comb += [low.a.eq(a), low.b.eq(b[:17])]
    if len(b) <= 17:
        return low.p[:width]
    high = DSP48E2Slice(opmode=OPMODE_PCIN17_PLUS_M, primitive=primitive)
    m.submodules[f"{name}_high"] = high
    m.d.comb += [high.a.eq(a), high.b.eq(b[17:]), high.pcin.eq(low.pcout)]
    return Cat(low.p[:17], high.p[:width - 17])

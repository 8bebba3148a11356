"""Several stream units side by side in one component, so that one Verilator build and
one simulation exercise them all (each cocotb process costs seconds to start)."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import connect, flipped

__all__ = ["StreamUnitBundle"]


class StreamUnitBundle(wiring.Component):
    """Units with stream ports ``i`` / ``o``, each exposed as ``i_<name>`` / ``o_<name>``.

    Parameters
    ----------
    specs : dict
        ``{name: spec}``, JSON-able unit descriptions; ``name`` must be a Python
        identifier.
    build : callable
        ``build(spec)`` returns the unit.

    Attributes
    ----------
    i_<name> : In(the unit's ``i`` signature)
    o_<name> : Out(the unit's ``o`` signature)
        In Verilog: ``i_<name>__valid``, ``i_<name>__ready``, ``i_<name>__payload``, ...
    """

    def __init__(self, specs, build):
        self._specs = dict(specs)
        members = {}
        for name in self._specs:
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"unit name must be an identifier, not {name!r}")
        self._units = {name: build(spec) for name, spec in self._specs.items()}
        for name, unit in self._units.items():
            members[f"i_{name}"] = unit.signature.members["i"]
            members[f"o_{name}"] = unit.signature.members["o"]
        super().__init__(members)

    @property
    def specs(self):
        return dict(self._specs)

    def elaborate(self, platform):
        m = Module()
        for name, unit in self._units.items():
            m.submodules[name] = unit
            connect(m, flipped(getattr(self, f"i_{name}")), unit.i)
            connect(m, unit.o, flipped(getattr(self, f"o_{name}")))
        return m

"""Several stream units side by side in one component, so that one Verilator build and
one simulation exercise them all (each cocotb process costs seconds to start)."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import connect, flipped

__all__ = ["StreamUnitBundle", "StreamLane"]


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


class StreamLane:
    """Cycle-by-cycle driver and monitor of one unit of a :class:`StreamUnitBundle` in a
    cocotb bench: offers ``words`` on ``i`` with random gaps, takes results from ``o``
    with random stalls, records handshake cycles and checks that a waiting result holds.

    A subclass sets ``name``, ``rng``, ``gap``, ``stall``, ``words``, ``want``, the port
    handles ``i_payload``, ``i_valid``, ``i_ready``, ``o_payload``, ``o_valid``, ``o_ready``
    and the state ``accepted``, ``taken``, ``got``, ``sent``, ``offering``, ``valid``,
    ``ready``, ``held``.
    """

    @property
    def done(self):
        return len(self.got) == len(self.want)

    def drive(self):
        """Before an edge: offer the next input (unless a gap), decide on ``o.ready``."""
        rng = self.rng
        if (not self.offering and self.sent < len(self.words)
                and not (self.gap and rng.random() < self.gap)):
            self.i_payload.value = self.words[self.sent]
            self.offering = True
        if self.offering != self.valid:
            self.i_valid.value = int(self.offering)
            self.valid = self.offering
        accept = not (self.stall and rng.random() < self.stall) and not self.done
        if accept != self.ready:
            self.o_ready.value = int(accept)
            self.ready = accept

    def sample(self, cycle):
        """At an edge: record the handshakes of the cycle that ends (pre-edge values)."""
        if self.offering and self.i_ready.value:
            self.accepted.append(cycle)
            self.sent += 1
            self.offering = False
        if self.o_valid.value:
            bits = int(self.o_payload.value)
            if self.held is not None:
                assert bits == self.held, f"{self.name}: o changed before it was taken"
            if self.ready:
                self.taken.append(cycle)
                self.got.append(bits)
                self.held = None
            else:
                self.held = bits
        else:
            assert self.held is None, f"{self.name}: o.valid fell before it was taken"

"""Elastic pipeline plumbing of the FPDeep modules.

A :class:`Flow` is a point of a pipeline: ``valid`` (driven by the producer) and ``ready``
(a Signal the consumer drives, once). Every stage *moves as a whole* like the ``hw/arith``
float units: its registers load when ``~valid_out | ready_out``. A stage group of identical
units fed the same inputs in the same cycles (all multipliers of a CE array, all adders of a
tree level) stays in lockstep, so one representative unit's handshake speaks for the group
(:func:`unit_stage`); values that skip a group ride along in :func:`~nnrtl.hw.arith.float_pipeline.sideband`
registers that load with the representative's pipeline.
"""

from amaranth.hdl import Signal, Value

from ..arith.float_pipeline import sideband
from ..hierarchy import shared

__all__ = ["Flow", "register_stage", "unit_stage", "join", "source", "sink", "float_unit"]


def float_unit(m, name, unit):
    """Add the ``hw/arith`` float ``unit`` (``FloatMul``/``FloatAdd``) to ``m`` as
    submodule ``name``, emitted once per kind (:func:`nnrtl.hw.hierarchy.shared`: its
    format, stages and options are its key); returns ``unit`` (its ports are the parent's
    to drive)."""
    key = (unit.fmt, unit.stages, unit.flush_subnormals, getattr(unit, "shifts", None))
    m.submodules[name] = shared(unit, key=key)
    return unit


class Flow:
    """``valid`` of the items at a pipeline point, ``ready`` for the consumer to drive."""

    def __init__(self, valid, name):
        self.valid = valid
        self.ready = Signal(name=f"{name}_ready")


def source(port, name):
    """The flow of an input stream ``port``."""
    flow = Flow(port.valid, name)
    return flow, [(port.ready, flow.ready)]


def sink(m, flow, port):
    """Drive output stream ``port`` from ``flow`` (payload is the caller's)."""
    m.d.comb += [port.valid.eq(flow.valid), flow.ready.eq(port.ready)]


def join(m, a, b, name):
    """One flow whose items are the pairs of ``a``'s and ``b``'s items."""
    flow = Flow(Signal(name=f"{name}_valid"), name)
    m.d.comb += [
        flow.valid.eq(a.valid & b.valid),
        a.ready.eq(flow.ready & b.valid),
        b.ready.eq(flow.ready & a.valid),
    ]
    return flow


def register_stage(m, flow, values, name):
    """One register stage: returns the new flow and the registered ``values`` (a list)."""
    valid = Signal(name=f"{name}_valid")
    out = Flow(valid, name)
    enable = Signal(name=f"{name}_enable")
    registers = []
    m.d.comb += [enable.eq(~valid | out.ready), flow.ready.eq(enable)]
    with m.If(enable):
        m.d.sync += valid.eq(flow.valid)
        for n, value in enumerate(values):
            value = Value.cast(value)
            register = Signal(value.shape(), name=f"{name}_{n}")
            m.d.sync += register.eq(value)
            registers.append(register)
    return out, registers


def unit_stage(m, flow, units, payloads, sides, name):
    """Feed ``units`` (stream components, identical, ``i``/``o``) from ``flow`` with
    ``payloads`` (one per unit); ``sides`` ride along. Returns the new flow, the units'
    results and the delayed sides."""
    head = units[0]
    out = Flow(head.o.valid, name)
    m.d.comb += flow.ready.eq(head.i.ready)
    for unit, payload in zip(units, payloads):
        m.d.comb += [unit.i.valid.eq(flow.valid), unit.o.ready.eq(out.ready)]
        for field, value in payload.items():
            m.d.comb += getattr(unit.i.payload, field).eq(value)
    delayed = [sideband(m, head, side, f"{name}_side{n}") for n, side in enumerate(sides)]
    return out, [unit.o.payload for unit in units], delayed

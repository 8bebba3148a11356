"""Emit each distinct unit of a design once and instantiate it.

Amaranth flattens nothing but also shares nothing: every elaborated component becomes its
own Verilog module, so an engine with 64 identical PE groups is 64 copies of the same
module text, and conversion, Verilator and Yosys all pay for each copy. A component marked
with :func:`shared` is instead converted once per *kind* (its ``key``) into a module of its
own, and each use becomes an instance of that module.

Outside :func:`emission` (the Amaranth simulator, unit tests) :func:`shared` returns the
component unchanged, so the same elaborate code simulates in Python exactly as before.
Inside it (:func:`convert`, which every Verilog writer of nnrtl calls), a shared component
elaborates to an :class:`~amaranth.hdl.Instance` whose ports are the component's
signature, named as :func:`amaranth.back.verilog.convert` names them (``__``-joined paths),
plus ``clk`` and ``rst`` when the unit's module has them.

A zero-width member of the signature is no port of the module and no connection of its
instances (Yosys would declare it ``[-1:0]`` in the module while Amaranth drops it from the
instance). Uses share a module only when their ports are identical: the same names, widths
and directions; :func:`convert` checks, on the text it emits, that every instance of a
shared module connects exactly the module's ports.

The rule a caller must keep: a component is shared only through its ports. The parent may
drive and read the component's signature members but no other signal of it, and ``key``
must determine the component's logic (everything its ``elaborate`` depends on). Verilator
runs of the engines check the first (a parent reaching inside would leave a net
undriven and the bench would fail). The second is checked when the environment variable
``NNRTL_CHECK_SHARED`` is ``1``: every use is then converted on its own and its Verilog
compared with the kind's (the randomized configuration tests set it); a use whose ports
differ from its kind's raises :class:`SharedUnitError` always.
"""

import contextlib
import contextvars
import hashlib
import os
import re

from amaranth.back import verilog
from amaranth.hdl import ClockSignal, Elaboratable, Instance, ResetSignal, Value
from amaranth.hdl._ir import PortDirection    # the direction verilog.convert(ports=) takes
from amaranth.lib import wiring

__all__ = ["shared", "emission", "convert", "check_instances", "compact_zero_init",
           "ZERO_INIT_LOOP", "SharedUnitError"]

_SCOPE = contextvars.ContextVar("nnrtl_emission", default=None)
_ZERO_INIT = re.compile(r"^  initial begin\n((?:    (?:\\\S+ |\w+)\[\d+\] = \d+'[hdb]0+;\n)+)  end\n",
                        re.M)
_ZERO_LINE = re.compile(r"    (\\\S+ |\w+)\[(\d+)\] = (\d+)'[hdb]0+;")
_HEADER = re.compile(r"^module\s+(\S+)\s*\((.*?)\);", re.S | re.M)
_INSTANCE = re.compile(r"^  (\S+) (\S+) \(\n((?:    \.[^\n]*\n)*)  \);", re.M)
_CONNECTION = re.compile(r"^    \.([^(\s]+)\(", re.M)


class SharedUnitError(RuntimeError):
    """Two uses of one shared kind differ (ports, or logic under ``NNRTL_CHECK_SHARED``), or
    an emitted instance does not connect exactly its module's ports."""


class _Scope:
    """The units converted so far in one :func:`emission`: key -> (module name, ports)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.units = {}
        self.texts = []


def _module_name(prefix, component, key):
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:10]
    kind = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_",
                  type(component).__name__).lower()
    return f"{prefix}__{kind}_{digest}"


def _ports(text, module):
    for name, ports in _HEADER.findall(text):
        if name == module:
            return {port.strip() for port in ports.split(",")}
    raise RuntimeError(f"the Verilog of {module} has no module header for it")


def compact_zero_init(text):
    """Write each memory's all-zero ``initial`` block (Yosys writes one line per entry:
    9,216 lines for one SBE weight buffer) as a loop that sets the same zeros.

    Only a block that sets entries ``0 .. N-1`` of one memory to zero, in order, and
    nothing else is rewritten; Verilator, Yosys and Vivado unroll the loop back into the
    same initial contents."""
    count = 0

    def loop(match):
        nonlocal count
        lines = [_ZERO_LINE.fullmatch(line) for line in match.group(1).splitlines()]
        names = {line.group(1) for line in lines}
        widths = {line.group(3) for line in lines}
        indices = [int(line.group(2)) for line in lines]
        if len(names) != 1 or len(widths) != 1 or indices != list(range(len(indices))):
            return match.group(0)
        count += 1
        memory, width, index = names.pop(), widths.pop(), f"nnrtl_zero_init_{count}"
        return (f"  integer {index};\n  initial begin\n"
                f"    for ({index} = 0; {index} < {len(indices)}; {index} = {index} + 1)\n"
                f"      {memory}[{index}] = {width}'h0;\n  end\n")

    return _ZERO_INIT.sub(loop, text)


#: One loop written by :func:`compact_zero_init` (its ``integer`` and ``initial`` block).
ZERO_INIT_LOOP = re.compile(
    r"^  integer (nnrtl_zero_init_\d+);\n  initial begin\n"
    r"    for \(\1 = 0; \1 < \d+; \1 = \1 \+ 1\)\n      (?:\\\S+ |\w+)\[\1\] = \d+'h0;\n  end\n",
    re.M)


def _signature_ports(component):
    """The component's ports as :func:`amaranth.back.verilog.convert` takes them, without
    the zero-width members: ``{name: (value, direction)}``."""
    ports = {}
    for path, member, value in component.signature.flatten(component):
        value = Value.cast(value)
        if len(value) == 0:
            continue
        direction = PortDirection.Input if member.flow == wiring.In else PortDirection.Output
        ports["__".join(map(str, path))] = (value, direction)
    return ports


def _port_shape(ports):
    """Names, widths and directions of ``ports``: what two uses of a module must share."""
    return tuple(sorted((name, len(value), direction.value)
                        for name, (value, direction) in ports.items()))


def _to_verilog(component, name, ports=None):
    return compact_zero_init(verilog.convert(component, name=name, ports=ports,
                                             emit_src=False))


def _check_logic():
    return os.environ.get("NNRTL_CHECK_SHARED") == "1"


class _UnitInstance(Elaboratable):
    def __init__(self, component, module, ports, *, src_loc_at=0):
        self._component = component
        self._module = module
        self._ports = ports

    def elaborate(self, platform):
        connections = {}
        for name, (value, direction) in _signature_ports(self._component).items():
            prefix = "i" if direction == PortDirection.Input else "o"
            connections[f"{prefix}_{name}"] = value
        if "clk" in self._ports:
            connections["i_clk"] = ClockSignal("sync")
        if "rst" in self._ports:
            connections["i_rst"] = ResetSignal("sync")
        return Instance(self._module, **connections)


def shared(component, *, key):
    """Mark ``component`` as one of a kind: emitted once per ``key``, instantiated per use.

    Parameters
    ----------
    component : wiring.Component
        Connected to its parent through its signature only.
    key : hashable
        Everything the component's logic depends on (for example its class's constructor
        arguments); components with equal keys must elaborate to the same logic.

    Returns
    -------
    Elaboratable
        ``component`` itself outside :func:`emission`; inside it, an instance of the
        kind's module (converted at the first use).
    """
    if not isinstance(component, wiring.Component):
        raise TypeError(f"shared() takes a wiring.Component, not {component!r}")
    scope = _SCOPE.get()
    if scope is None:
        return component
    kind = (type(component).__module__, type(component).__qualname__, key)
    signature_ports = _signature_ports(component)
    shape = _port_shape(signature_ports)
    if kind not in scope.units:
        module = _module_name(scope.prefix, component, kind)
        text = _to_verilog(component, module, signature_ports)
        scope.units[kind] = (module, _ports(text, module), shape, text)
        scope.texts.append(text)
    module, ports, kind_shape, kind_text = scope.units[kind]
    if shape != kind_shape:
        differ = sorted(set(shape) ^ set(kind_shape))
        raise SharedUnitError(
            f"shared {type(component).__qualname__} with key {key!r}: this use's ports differ "
            f"from its module {module}'s ({', '.join(f'{n} [{w}] {d}' for n, w, d in differ)});"
            f" the key must determine the unit's ports and logic")
    if _check_logic() and _to_verilog(component, module, signature_ports) != kind_text:
        raise SharedUnitError(
            f"shared {type(component).__qualname__} with key {key!r}: this use elaborates to "
            f"other logic than its module {module}; the key must determine the unit's logic")
    component._MustUse__used = True      # its module is used, its object stands for it
    return _UnitInstance(component, module, ports, src_loc_at=1)    # located at the caller


@contextlib.contextmanager
def emission(prefix):
    """Within this block, :func:`shared` components become instances of modules named
    ``<prefix>__<kind>_<hash>``; yields the scope whose ``texts`` collect their Verilog."""
    scope = _Scope(prefix)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def convert(component, name):
    """Verilog of ``component`` as module ``name``, each shared unit's module once (before
    the modules that instantiate it), no source locations (so the text, and any cache key
    made from it, does not depend on where the code lives)."""
    outer = _SCOPE.get()
    if outer is not None:
        return _to_verilog(component, name)
    with emission(name) as scope:
        top = _to_verilog(component, name)
    text = "".join(scope.texts) + top
    check_instances(text, {module for module, *_ in scope.units.values()})
    return text


def check_instances(text, modules=None):
    """Check that every instance in ``text`` of a module defined there connects exactly that
    module's ports (by name).

    Parameters
    ----------
    text : str
        Verilog as Yosys' ``write_verilog`` lays it out (one ``.port(value)`` a line).
    modules : set of str, optional
        Check the instances of these modules only (default: of every module in ``text``).

    Raises
    ------
    SharedUnitError
        Naming the instance, its module and the ports missing or extra.
    """
    headers = {name: {port.strip() for port in ports.split(",")}
               for name, ports in _HEADER.findall(text)}
    wanted = headers.keys() if modules is None else modules & headers.keys()
    for module, instance, body in _INSTANCE.findall(text):
        if module not in wanted:
            continue
        connected = set(_CONNECTION.findall(body))
        if connected != headers[module]:
            missing = sorted(headers[module] - connected)
            extra = sorted(connected - headers[module])
            raise SharedUnitError(
                f"instance {instance} of {module} does not connect exactly its ports "
                f"(missing: {', '.join(missing) or 'none'}; not ports: "
                f"{', '.join(extra) or 'none'})")

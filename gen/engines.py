"""The engine hooks: how an engine plugs into the command line, the emitters and the bench.

An engine is one package under ``hw/`` (its RTL and frozen configuration), ``gen/`` (its
models and hooks) and ``sim/`` (golden model and testbench), plus one registration: an
entry point in the group ``nnrtl.engines`` (``pyproject.toml``) naming its :class:`Engine`,
e.g. ``sbe = "nnrtl.gen.sbe.engine:ENGINE"``. Nothing else names it: the command line,
emitters and bench reach every engine through the hooks below.

Required hooks::

    top(config)                  -> wiring.Component with a ``registers`` RegisterMap
    resources(config, family)    -> {"dsp": n, "bram36": n, "lut": n, ...}  (check_fit)
    predict(config, workload)    -> {"cycles": n, "useful_macs": n, ...}  performance model
    simulate(request)            -> JSON-able result with "bit_exact", "cycles",
                                    "model_cycles", "useful_macs", "utilization", ...

Optional hooks (``None`` when an engine has none)::

    load_model(request)          -> ModelBinding     (--model: sizes and formats from a file)
    model_files(config, binding, directory)
                                 -> dict             the manifest's ``"model"`` section; writes
                                    the files a host needs to run the design on the model
                                    (``generate --model``), named in its ``"files"``
    explore(request)             -> Exploration      (design-space exploration)
    train(request, network)      -> Trainer          (nnrtl train; see nnrtl.gen.train)
    bench(out)                   -> (result dict, markdown)  make bench; out: a directory
    breakdown(result)            -> [(label, cycles), ...]  where a simulation's cycles
                                    went (nnrtl sim's summary, the report's cycle plot)
    report(data)                 -> [Figure, ...]   the engine's own plots for nnrtl report
                                    (data: nnrtl.gen.report.ReportData; see that module)
    clock(config, board)         -> Hz               the clock the models assume on ``board``
                                    when not its default (:meth:`Engine.clock_hz`)
    draw(rng)                    -> (board, {name: value})  a random configuration: the
                                    parameters pinned for it, drawn with ``rng`` (a
                                    random.Random) from the engine's whole valid space at
                                    simulation sizes, and a board it fits (nnrtl.gen.draws)

An engine owns its part of the command line, as an applet does: its own typed options for
``sim``, ``explore`` and ``train``, what ``--steps`` counts and commands of its own
(:class:`Engine`'s ``options``, ``steps_help`` and ``commands``).
"""

import argparse
import dataclasses
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Protocol

from ..boards import get_board
from ..hw.presets import Preset
from .errors import UsageError

__all__ = ["Engine", "Command", "Preset", "SimRequest", "ModelRequest", "ModelBinding",
           "ExploreRequest", "Exploration", "ENTRY_POINT_GROUP", "OPTION_COMMANDS", "option_values", "engines", "unavailable", "register",
           "unregister", "get_engine", "check_fit", "fits_board", "default_boards", "budget", "LUT_SHARE",
           "board_clock_hz", "add_throughput", "get_board_or_usage_error", "HOOKS"]

#: The entry-point group engines register in.
ENTRY_POINT_GROUP = "nnrtl.engines"

#: The optional hooks, in the order ``nnrtl engines`` lists them.
HOOKS = ("load_model", "model_files", "explore", "train", "bench", "breakdown", "report",
         "clock", "draw")

#: The shared commands an engine may add options to (:attr:`Engine.options`).
OPTION_COMMANDS = ("sim", "explore", "train")


@dataclasses.dataclass(frozen=True)
class SimRequest:
    """One end-to-end simulation, the same for every engine.

    Attributes
    ----------
    config : the engine's configuration class
    board : type
        The board's platform class (its clock gives the throughput).
    seed : int
        Seed of the random weights, inputs and stream patterns.
    backpressure : str
        A pattern of :data:`nnrtl.sim.patterns.PATTERNS`, on the sources (gaps) and sinks
        (backpressure).
    waves : bool or str
        ``False``, ``"fst"`` or ``"vcd"``.
    steps : int, optional
        Time steps (or frames) to run; the engine's default when ``None``.
    model : object, optional
        What the engine's ``load_model`` hook bound (:attr:`ModelBinding.model`); random
        weights when ``None``.
    inputs : ndarray, optional
        The user's inputs (:attr:`ModelBinding.inputs`), with ``model``.
    outputs : Path, optional
        Where the engine writes its outputs as floats (``.npy``), with ``model``.
    options : dict
        The engine's own ``sim`` options (:attr:`Engine.options`), by ``argparse`` dest.
    log : callable, optional
        Progress lines.
    """

    config: Any
    board: type
    seed: int = 1
    backpressure: str = "random"
    waves: Any = False
    steps: int | None = None
    model: Any = None
    inputs: Any = None
    outputs: Path | None = None
    log: Callable | None = None
    options: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ModelRequest:
    """``--model``: what an engine's ``load_model`` hook is given.

    ``params`` are the ``--param k=v`` strings (hardware the user fixes; the rest the
    engine chooses), ``inputs`` the path of ``--inputs`` (also calibration data), ``seq_len``
    the ``--seq-len`` to plan for when there are no inputs, ``prefix`` the ``--prefix`` that
    picks one RNN of a file holding several, ``lut_share`` the ``--lut-share`` of the
    board's LUTs the chosen design may take (``None``: :data:`LUT_SHARE`)."""

    path: Path
    weights: Path | None
    board: type
    params: tuple = ()
    inputs: Path | None = None
    seq_len: int | None = None
    log: Callable | None = None
    prefix: str | None = None
    lut_share: float | None = None


@dataclasses.dataclass(frozen=True)
class ModelBinding:
    """What ``load_model`` returns: the configuration for the model, the engine's own
    form of it (e.g. quantized weights) and the inputs read from ``--inputs``."""

    config: Any
    model: Any
    inputs: Any = None


@dataclasses.dataclass(frozen=True)
class ExploreRequest:
    """``nnrtl explore``: the model (a file, or its shape as ``--param``), the board, the
    sequence length to plan for and how many candidates to keep.

    ``params`` are the ``--param k=v`` strings: the model's shape without a model file,
    and hardware parameters the exploration keeps fixed (the others it explores). The
    budget: ``dsp_share``, ``bram_share`` (BRAM36 and URAM) and ``lut_share``, shares in
    (0, 1] of the board's resources (``lut_share`` ``None``: :data:`LUT_SHARE`), and
    ``max_pes``, a cap on the processing elements (``None``: none); see
    :class:`nnrtl.gen.dse.Budget`. ``objective`` is ``"fastest"`` or ``"per-dsp"`` (the
    best throughput per DSP within ``tolerance`` of the fastest's cycles; ``None``:
    :data:`nnrtl.gen.dse.DEFAULT_TOLERANCE`). ``options`` are the engine's own ``explore``
    options (:attr:`Engine.options`), by ``argparse`` dest."""

    board: type
    model: Path | None = None
    weights: Path | None = None
    params: tuple = ()
    seq_len: int | None = None
    top: int = 10
    log: Callable | None = None
    dsp_share: float = 1.0
    bram_share: float = 1.0
    lut_share: float | None = None
    max_pes: int | None = None
    objective: str = "fastest"
    tolerance: float | None = None
    options: dict = dataclasses.field(default_factory=dict)


class Exploration(Protocol):
    """What an ``explore`` hook returns: :meth:`table` for a terminal, :meth:`as_json` for
    ``--json`` and ``explore.json`` (``nnrtl explore -o``), whose ``"chosen"`` holds the
    chosen configuration's fields."""

    def table(self) -> str: ...

    def as_json(self) -> dict: ...


class _OptionParser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def option_values(add, options, *, prog):
    """An engine's own options as ``{dest: value}``: ``options`` as it is when it is a
    mapping (what the command line gives a hook), else a sequence of command-line tokens
    (``("--fpgas", "3")``, for calls from Python) parsed by the options ``add(parser)``
    declares, the ones not given at their defaults.

    Raises
    ------
    UsageError
        For a token that is no option of ``add``, a bad value or a required option missing.
    """
    if isinstance(options, Mapping):
        return dict(options)
    parser = _OptionParser(prog=prog, add_help=False, allow_abbrev=False, exit_on_error=False)
    add(parser)
    try:
        namespace, extra = parser.parse_known_args([str(token) for token in options])
    except argparse.ArgumentError as error:
        raise UsageError(str(error)) from None
    if extra:
        raise UsageError(f"unknown option {extra[0]!r} for {prog}; its options: "
                         f"{', '.join(a.option_strings[0] for a in parser._actions)}")
    return vars(namespace)


@dataclasses.dataclass(frozen=True)
class Command:
    """A command an engine adds to the command line, ``nnrtl NAME ENGINE [options]``
    (FPDeep's ``map`` and ``cluster``); every engine declaring a command ``NAME`` is one of
    its choices.

    Attributes
    ----------
    help : str
        One line for ``nnrtl --help`` and ``nnrtl NAME --help``.
    arguments : callable
        ``arguments(parser)`` adds the command's options to an ``argparse`` parser.
    run : callable
        ``run(args)`` runs the command on the parsed ``argparse.Namespace`` and returns the
        exit code (``None`` for 0). Raises :class:`UsageError` for bad input (exit 2) and
        :class:`~nnrtl.gen.errors.CheckFailed` for a result that is wrong (exit 1).
    """

    help: str
    arguments: Callable
    run: Callable


#: Verilog texts of :meth:`Engine.verilog`, least recently used first: key to
#: ``(text, converted with the shared-unit check)``.
_VERILOG = {}
_VERILOG_KEPT = 8


def _convert(component, name, check_shared):
    """Convert ``component``, with ``$NNRTL_CHECK_SHARED`` set while it runs when
    ``check_shared``."""
    from ..hw import hierarchy
    if not check_shared:
        return hierarchy.convert(component, name)
    saved = os.environ.get("NNRTL_CHECK_SHARED")
    os.environ["NNRTL_CHECK_SHARED"] = "1"
    try:
        return hierarchy.convert(component, name)
    finally:
        if saved is None:
            os.environ.pop("NNRTL_CHECK_SHARED")
        else:
            os.environ["NNRTL_CHECK_SHARED"] = saved


@dataclasses.dataclass(frozen=True)
class Engine:
    """One engine: its configuration, its RTL and its models, reached through hooks.

    Attributes
    ----------
    name : str
        Lower-case name used on the command line.
    summary : str
        One line for ``nnrtl engines``.
    config_class : type
        Frozen dataclass holding every parameter; the single source of truth.
    top, resources, predict, simulate : callable
        The required hooks (see the module).
    presets : dict
        Name to :class:`Preset`.
    load_model, model_files, explore, train, bench, breakdown, report, clock, draw :
        callable or None
        The optional hooks.
    options : dict
        Command (one of :data:`OPTION_COMMANDS`) to ``add(group)``, which adds the
        engine's own options for that command to an ``argparse`` argument group; their
        values reach the hook as the request's ``options`` (by dest).
    steps_help : str
        What ``nnrtl sim ENGINE --steps N`` counts, for its help.
    commands : dict
        Name to :class:`Command`: the engine's own commands.
    """

    name: str
    summary: str
    config_class: type
    top: Callable
    resources: Callable
    predict: Callable
    simulate: Callable
    presets: dict = dataclasses.field(default_factory=dict)
    load_model: Callable | None = None
    model_files: Callable | None = None
    explore: Callable | None = None
    train: Callable | None = None
    bench: Callable | None = None
    breakdown: Callable | None = None
    report: Callable | None = None
    clock: Callable | None = None
    draw: Callable | None = None
    options: dict = dataclasses.field(default_factory=dict)
    steps_help: str = "time steps to run (default: the configuration's)"
    commands: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"engine name must be a lower-case identifier, not {self.name!r}")
        for hook in ("top", "resources", "predict", "simulate"):
            if not callable(getattr(self, hook)):
                raise TypeError(f"engine {self.name}: {hook} must be callable")
        for hook in HOOKS:
            if getattr(self, hook) is not None and not callable(getattr(self, hook)):
                raise TypeError(f"engine {self.name}: {hook} must be callable or None")
        for command, add in self.options.items():
            if command not in OPTION_COMMANDS or not callable(add):
                raise TypeError(f"engine {self.name}: options takes a callable for each of "
                                f"{', '.join(OPTION_COMMANDS)}, not {command!r}: {add!r}")
        for name, command in self.commands.items():
            if not isinstance(command, Command):
                raise TypeError(f"engine {self.name}: command {name!r} must be a Command")

    @property
    def hooks(self):
        """The optional hooks this engine has."""
        return tuple(hook for hook in HOOKS if getattr(self, hook) is not None)

    def hook(self, name, command):
        """The optional hook ``name``; :class:`UsageError` naming the engines that have it."""
        found = getattr(self, name)
        if found is None:
            having = [e.name for e in engines().values() if getattr(e, name) is not None]
            raise UsageError(f"{self.name} has no {command}; engines with one: "
                             f"{', '.join(having) or 'none'}")
        return found

    def clock_hz(self, config, board):
        """The clock in Hz the engine's figures assume for ``config`` on ``board`` (a
        platform class): its ``clock`` hook's, else the board's default clock."""
        if self.clock is not None:
            return self.clock(config, board)
        return board_clock_hz(board)

    def preset(self, name):
        """The configuration of preset ``name``; :class:`UsageError` listing the valid ones."""
        if name not in self.presets:
            valid = ", ".join(self.presets) or "none"
            raise UsageError(f"{self.name} has no preset {name!r}; its presets: {valid}")
        return self.presets[name].config

    @property
    def module_name(self):
        """Verilog module name of the engine core."""
        return f"nnrtl_{self.name}"

    def verilog(self, config, *, check_shared=False):
        """The Verilog of ``top(config)`` as :attr:`module_name`, converted once per
        configuration in a process (the conversion, not the cached Verilator build,
        dominates a small run).

        Parameters
        ----------
        check_shared : bool
            Convert every use of a shared unit and compare it with the unit's module
            (:func:`nnrtl.hw.hierarchy.shared`); a text converted without the check is
            converted again.

        Raises
        ------
        nnrtl.hw.hierarchy.SharedUnitError
            With ``check_shared``, a shared unit whose uses differ.
        """
        key = (self.top, self.module_name, config)
        text, checked = _VERILOG.get(key, (None, False))
        if text is None or (check_shared and not checked):
            text = _convert(self.top(config), self.module_name, check_shared)
            checked = check_shared
        _VERILOG.pop(key, None)
        _VERILOG[key] = (text, checked)
        while len(_VERILOG) > _VERILOG_KEPT:
            del _VERILOG[next(iter(_VERILOG))]
        return text

    def describe(self):
        """JSON-able description: parameters with their defaults, presets, hooks and the
        boards the defaults generate on (:func:`default_boards`)."""
        from .params import param_fields
        return {
            "name": self.name,
            "summary": self.summary,
            "config": self.config_class.__name__,
            "parameters": param_fields(self.config_class),
            "presets": {name: {"board": p.board, "source": p.source}
                        for name, p in self.presets.items()},
            "hooks": ["top", "resources", "predict", "simulate", *self.hooks],
            "options": sorted(self.options),
            "commands": sorted(self.commands),
            "default_boards": default_boards(self),
        }


_REGISTRY = {}
#: Engines whose entry point failed to load: name -> the reason (:func:`unavailable`).
_UNAVAILABLE = {}
_LOADED = False


def _failure(entry, error):
    """Why ``entry`` (an entry point) did not load: its target and the error, with the
    package and extra to install when an optional package is missing."""
    from .optional import missing

    reason = f"{entry.value}: {type(error).__name__}: {error}"
    if isinstance(error, ModuleNotFoundError):
        usage = missing(error, f"engine {entry.name}")
        if usage is not None:
            reason += f" ({usage})"
    return reason


def _load_entry_points():
    """Load every entry point of :data:`ENTRY_POINT_GROUP` once, each on its own: one that
    fails to import, or names no :class:`Engine` of its name, goes to :func:`unavailable`
    and the others load."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            engine = entry.load()
        except Exception as error:
            _UNAVAILABLE[entry.name] = _failure(entry, error)
            continue
        if not isinstance(engine, Engine) or engine.name != entry.name:
            _UNAVAILABLE[entry.name] = (f"{entry.value}: entry point {entry.name} in "
                                        f"{ENTRY_POINT_GROUP} must name an Engine called "
                                        f"{entry.name!r}")
            continue
        _REGISTRY.setdefault(engine.name, engine)


def engines():
    """Every registered engine that loaded, by name, in registration order (entry points
    sorted by name, then :func:`register` calls)."""
    _load_entry_points()
    return dict(_REGISTRY)


def unavailable():
    """The registered engines that did not load: ``{name: reason}`` (the entry point's
    target and its import error)."""
    _load_entry_points()
    return dict(_UNAVAILABLE)


def register(engine):
    """Add ``engine`` to the registry (tests and plugins that are not installed); an engine
    of the same name is refused."""
    _load_entry_points()
    if not isinstance(engine, Engine):
        raise TypeError(f"register takes an Engine, not {engine!r}")
    if engine.name in _REGISTRY:
        raise ValueError(f"an engine called {engine.name!r} is already registered")
    _REGISTRY[engine.name] = engine
    return engine


def unregister(name):
    """Remove the engine called ``name`` (the inverse of :func:`register`)."""
    _REGISTRY.pop(name)


def get_engine(name):
    """The :class:`Engine` called ``name``.

    Raises
    ------
    UsageError
        For an unknown name (listing the valid ones) and for an engine that did not load
        (naming its import error, :func:`unavailable`).
    """
    known = engines()
    if name not in known and name in _UNAVAILABLE:
        raise UsageError(f"engine {name!r} is unavailable: {_UNAVAILABLE[name]}")
    try:
        return known[name]
    except KeyError:
        raise UsageError(f"unknown engine {name!r}; valid engines: "
                         f"{', '.join(known)}") from None


def board_clock_hz(platform_class):
    """Frequency of a board's default clock."""
    platform = platform_class()
    return platform.lookup(platform.default_clk).clock.frequency


def add_throughput(result, clock):
    """Add ``clock`` (Hz: :meth:`Engine.clock_hz`) and the throughput at it (``gops``: two
    operations per useful MAC) to a simulation result (``nnrtl sim`` does, for every
    engine); a run without cycles gets the clock only."""
    result["f_clk_mhz"] = clock / 1e6
    if result.get("cycles"):
        result["gops"] = 2 * result["useful_macs"] * clock / result["cycles"] / 1e9
    return result


#: Share of a board's LUTs that the LUTs an engine's resource model counts (its ``"lut"``:
#: for the SBE, LUTRAM and LUT-built multipliers) may take; the other 30% are left for the
#: logic no resource model here counts (adders, accumulators, multiplexers, control). The
#: one design known to fit its board, the SBE paper's ZC706 design ("almost all the
#: FPGA's hardware resources are used", 224 LUT multipliers), has 62.5% of the XC7Z045's
#: LUTs counted so; 0.7 admits it with 65,580 LUTs left, 64 for each of its 1024 PEs (a
#: 32-bit accumulator and the select of its input), where 0.5 would refuse a design that
#: was built, and 0.8 would leave 43 a PE, less than its accumulator and select.
#:
#: The one rule holds for every engine, also for one whose model counts all of its logic
#: (the η-LSTM model equals Yosys of the whole design): there the 30% are headroom for
#: placement and routing, which a design near 100% of a device's LUTs does not close at its
#: clock. ``nnrtl generate --lut-share F`` sets another share for one design (1.0: the
#: whole device), and ``generate`` prints each resource's share of the device.
LUT_SHARE = 0.7


def budget(capacity, resource, *, lut_share=LUT_SHARE):
    """How much of ``resource`` (an attribute of :class:`~nnrtl.boards.Capacity`) a design
    may take on a board: all of it, but of ``"lut"`` only ``lut_share`` (see
    :data:`LUT_SHARE`). :func:`check_fit` and the exploration apply this one rule."""
    if resource != "lut":
        return getattr(capacity, resource)
    if not isinstance(lut_share, (int, float)) or not 0 < lut_share <= 1:
        raise UsageError(f"lut_share must be a number in (0, 1], not {lut_share!r}")
    return int(lut_share * capacity.lut)


def check_fit(engine, config, platform_class, *, lut_share=LUT_SHARE):
    """Raise :class:`UsageError` if ``config`` needs more of a resource than the board
    allows (:func:`budget`); return the needs."""
    capacity = platform_class.capacity
    needs = engine.resources(config, capacity.yosys_family)
    for resource, amount in needs.items():
        available = budget(capacity, resource, lut_share=lut_share)
        if amount > available:
            if resource == "lut":
                raise UsageError(
                    f"{engine.name} with {config} needs {amount} lut counted by its resource "
                    f"model, but {platform_class.name} allows {available}: lut_share "
                    f"{lut_share:g} of its {capacity.lut} LUTs, the rest left for the logic "
                    f"the model does not count ({amount / capacity.lut:.1%} of the device; "
                    f"--lut-share sets the share)")
            raise UsageError(f"{engine.name} with {config} needs {amount} {resource}, "
                             f"but {platform_class.name} has {available}")
    return needs


def fits_board(engine, config, platform_class, *, lut_share=LUT_SHARE):
    """:func:`check_fit`, after the configuration's own ``check_usable`` (whether the
    design holds the workload it is sized for), when it has one: what a design generated
    or simulated for a board must pass, and what the completion of a partial configuration
    (:func:`nnrtl.gen.params.parse_params`) chooses the free parameters under.

    Raises
    ------
    UsageError
        The design does not hold its workload, or does not fit the board's budget."""
    check_usable = getattr(config, "check_usable", None)
    if check_usable is not None:
        try:
            check_usable()
        except ValueError as error:
            raise UsageError(str(error)) from None
    return check_fit(engine, config, platform_class, lut_share=lut_share)


def default_boards(engine):
    """Where the engine's default configuration generates: ``{board: {name: value}}`` for
    each board on which the defaults, completed as ``nnrtl generate`` completes them with
    no ``--param`` (:func:`nnrtl.gen.params.parse_params` under :func:`fits_board`), give
    a design; the values are the parameters chosen other than their defaults (empty: the
    defaults fit as they are)."""
    from ..boards import BOARDS
    from .params import parse_params

    defaults = engine.config_class()
    found = {}
    for name in BOARDS:
        platform_class = get_board(name)
        try:
            config = parse_params(engine.config_class, (), accept=lambda c: fits_board(
                engine, c, platform_class))
        except UsageError:
            continue
        found[name] = {field.name: getattr(config, field.name)
                       for field in dataclasses.fields(config)
                       if field.init and getattr(config, field.name) != getattr(defaults,
                                                                                field.name)}
    return found


def get_board_or_usage_error(name):
    """The board's platform class; :class:`UsageError` listing the valid ones."""
    try:
        return get_board(name)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None

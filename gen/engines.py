"""The engines the generator knows, each described once: its configuration class, its
top-level component, the resources it needs and how to simulate it."""

import dataclasses
from typing import Callable

from ..boards import get_board
from .errors import UsageError

__all__ = ["Engine", "ENGINES", "get_engine", "check_fit", "board_clock_hz"]


@dataclasses.dataclass(frozen=True)
class Engine:
    """One engine the command line can generate, synthesise and simulate.

    Attributes
    ----------
    name : str
        Lower-case name used on the command line.
    summary : str
        One line for ``nnrtl --help``.
    config_class : type
        Frozen dataclass holding every parameter; the single source of truth.
    top : callable
        ``top(config)`` returns the engine's top-level ``wiring.Component``; it has a
        ``registers`` property (the :class:`~nnrtl.hw.bus.RegisterMap`).
    resources : callable
        ``resources(config, family)`` returns ``{"dsp": n, "bram36": n, ...}``, what the
        design needs of a board of Yosys ``family`` (``xc7`` or ``xcup``) (checked by :func:`check_fit` before anything is written).
    simulate : callable
        ``simulate(config, *, board, seed, waves, backpressure, log)`` runs one randomized
        end-to-end RTL simulation and returns the JSON-serialisable result.
    presets : dict
        Named configurations (``--preset``): name to ``(config, board name, summary)``.
    """

    name: str
    summary: str
    config_class: type
    top: Callable
    resources: Callable
    simulate: Callable
    presets: dict = dataclasses.field(default_factory=dict)

    def preset(self, name):
        """The configuration of preset ``name``; :class:`UsageError` listing the valid ones."""
        if name not in self.presets:
            valid = ", ".join(self.presets) or "none"
            raise UsageError(f"{self.name} has no preset {name!r}; its presets: {valid}")
        return self.presets[name][0]

    @property
    def module_name(self):
        """Verilog module name of the engine core."""
        return f"nnrtl_{self.name}"


def board_clock_hz(platform_class):
    """Frequency of a board's default clock."""
    platform = platform_class()
    return platform.lookup(platform.default_clk).clock.frequency


def check_fit(engine, config, platform_class):
    """Raise :class:`UsageError` if ``config`` needs more of a resource than the board has."""
    capacity = platform_class.capacity
    needs = engine.resources(config, capacity.yosys_family)
    for resource, amount in needs.items():
        available = getattr(capacity, resource)
        if amount > available:
            raise UsageError(f"{engine.name} with {config} needs {amount} {resource}, "
                             f"but {platform_class.name} has {available}")
    return needs


def _simulate_demo(config, *, board, seed, waves=False, backpressure="random", log=None,
                   frames=12, max_beats=24):
    from ..hw.demo import DemoEngine
    from ..sim.runner import simulate

    params = {
        "config": dataclasses.asdict(config),
        "frames": frames,
        "max_beats": max_beats,
        "source_pauses": backpressure,
        "sink_pauses": backpressure,
    }
    result = simulate(DemoEngine(config), test_module="nnrtl.sim.tb.demo", params=params,
                      seed=seed, waves=waves, name="nnrtl_demo", log=log)
    return _result_throughput(result, board)


def _demo_engine():
    from ..hw.demo import DemoConfig, DemoEngine
    return Engine(
        name="demo",
        summary="a MAC array behind an AXI4-Lite register file (the smallest example)",
        config_class=DemoConfig,
        top=DemoEngine,
        resources=lambda config, family: {"dsp": config.dsp},
        simulate=_simulate_demo,
    )


def _result_throughput(result, board):
    """Add the clock of ``board`` and the throughput at it to a simulation result."""
    clock = board_clock_hz(board)
    result["f_clk_mhz"] = clock / 1e6
    result["gops"] = 2 * result["useful_macs"] * clock / result["cycles"] / 1e9
    return result


def _simulate_sbe(config, *, board, seed, waves=False, backpressure="random", log=None,
                  steps=None, split=None, batch_norm=None, model=None, outputs=None,
                  build_args=()):
    """One SBE simulation (:mod:`nnrtl.sim.tb.sbe`): every layer over ``steps`` steps
    (default ``config.seq_len``), layer 0 cut into two runs at ``split`` (default: a
    seeded random step, so that the carried state is exercised; 0: one run)."""
    import random

    from ..hw.sbe import SBEEngine
    from ..sim.runner import simulate

    steps = config.seq_len if steps is None else steps
    if split is None:
        split = random.Random(seed).randint(1, steps - 1) if steps > 1 else 0
    params = {
        "config": dataclasses.asdict(config),
        "steps": steps,
        "split": split,
        "batch_norm": config.batch_norm if batch_norm is None else batch_norm,
        "source_pauses": backpressure,
        "sink_pauses": backpressure,
        "model": model and str(model),
        "outputs": outputs and str(outputs),
    }
    result = simulate(SBEEngine(config), test_module="nnrtl.sim.tb.sbe", params=params,
                      seed=seed, waves=waves, name="nnrtl_sbe", log=log,
                      build_args=build_args)
    return _result_throughput(result, board)


def _sbe_engine():
    from ..hw.sbe import PRESETS, SBEConfig, SBEEngine
    from .sbe.perf import resources
    return Engine(
        name="sbe",
        summary="stall-free blocking-batching LSTM inference, weights in off-chip memory",
        config_class=SBEConfig,
        top=SBEEngine,
        resources=resources,
        simulate=_simulate_sbe,
        presets={name: (p.config, p.board, p.source) for name, p in PRESETS.items()},
    )


ENGINES = {engine.name: engine for engine in (_demo_engine(), _sbe_engine())}


def get_engine(name):
    """The :class:`Engine` called ``name``; :class:`UsageError` listing the valid ones."""
    try:
        return ENGINES[name]
    except KeyError:
        raise UsageError(f"unknown engine {name!r}; valid engines: "
                         f"{', '.join(ENGINES)}") from None


def get_board_or_usage_error(name):
    """The board's platform class; :class:`UsageError` listing the valid ones."""
    try:
        return get_board(name)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None

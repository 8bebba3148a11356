"""Random configurations of an engine: drawn from its whole valid parameter space, completed
like a user's partial configuration, elaborated, emitted, Verilator-linted and simulated.

An engine describes its space with the ``draw`` hook::

    draw(rng) -> (board, {name: value, ...})

``rng`` is a :class:`random.Random`; the result names a board and the parameters pinned
for this draw (a subset: the rest are completed as ``--param`` completes them, so the
completion is exercised too). Sizes are kept small enough to simulate in seconds; every
shape the RTL has (batch 1, one block, one PE group, odd sizes, GRU, projections, ...) is
reachable. Draw ``index`` of ``seed`` is the same on every machine: its generator is
seeded with ``"<engine>:<seed>:<index>"``.

Every draw is reproducible by one command: :attr:`Draw.command` (``nnrtl sim ENGINE
--board B --param ... --seed N --backpressure P``) for parameters a command line can
carry, and always :attr:`Draw.reproduce` (``nnrtl draws ENGINE --seed S --only I``).
The tests (``tests/gen/test_draws.py``), ``make bench`` (:func:`bench`) and ``nnrtl draws``
all run draws through this module.
"""

import dataclasses
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

from .engines import SimRequest, fits_board, get_board_or_usage_error
from .errors import CheckFailed, UsageError
from .params import parse_params

__all__ = ["Draw", "draws", "strategy", "configure", "lint", "simulate", "run", "seed", "bench", "FAST",
           "SLOW"]

#: Per engine: (draws linted, of which the first ones also simulated) in ``make test``.
FAST = {"demo": (6, 1), "sbe": (5, 1), "farnn": (1, 1), "omni": (3, 1), "fpdeep": (3, 1)}

#: The same in ``make test-slow`` (these include the :data:`FAST` ones).
SLOW = {"demo": (100, 10), "sbe": (100, 10), "farnn": (40, 5), "omni": (60, 6),
        "fpdeep": (60, 6)}


def seed():
    """The draws' seed of the tests and the bench: ``$NNRTL_DRAW_SEED``, default 1."""
    text = os.environ.get("NNRTL_DRAW_SEED", "1")
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"NNRTL_DRAW_SEED must be an integer, not {text!r}") from None


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _renderable(value):
    return (isinstance(value, (bool, int, float, str))
            or isinstance(value, tuple) and all(isinstance(v, int) for v in value))


@dataclasses.dataclass(frozen=True)
class Draw:
    """One random configuration of an engine.

    Attributes
    ----------
    engine : str
    seed, index : int
        The draw's seed and its index among that seed's draws.
    board : str
    params : dict
        The pinned parameters (name to value).
    backpressure : str
        The pattern its simulation runs under (:data:`nnrtl.sim.patterns.PATTERNS`).
    """

    engine: str
    seed: int
    index: int
    board: str
    params: dict
    backpressure: str

    @property
    def items(self):
        """The pinned parameters as ``--param`` strings, or None when one has no text form."""
        if not all(_renderable(v) for v in self.params.values()):
            return None
        return tuple(f"{name}={_text(value)}" for name, value in self.params.items())

    @property
    def reproduce(self):
        """The ``nnrtl draws`` command that runs this draw again."""
        return f"nnrtl draws {self.engine} --seed {self.seed} --only {self.index}"

    @property
    def command(self):
        """The ``nnrtl sim`` command that simulates this draw (:attr:`reproduce` when its
        parameters have no text form)."""
        if self.items is None:
            return self.reproduce
        params = " ".join(f"--param {item}" for item in self.items)
        return (f"nnrtl sim {self.engine} --board {self.board} {params} "
                f"--seed {self.index + 1} --backpressure {self.backpressure}")


def draws(engine, count, seed):
    """The first ``count`` draws of ``engine`` (an :class:`~nnrtl.gen.engines.Engine` with a
    ``draw`` hook) for ``seed``."""
    return [_draw(engine, seed, index) for index in range(count)]


def strategy(engine):
    """A hypothesis strategy of ``engine``'s draws (hypothesis, a test extra, is imported
    here): a draw index of seed 0 drawn by hypothesis, so a failure it reports names the
    draw (:attr:`Draw.reproduce`)."""
    from hypothesis import strategies as st

    return st.integers(min_value=0, max_value=10_000).map(
        lambda index: _draw(engine, 0, index))


def _draw(engine, seed, index):
    from ..sim.patterns import PATTERNS

    draw_hook = engine.hook("draw", "random configurations (draw)")
    rng = random.Random(f"{engine.name}:{seed}:{index}")
    board, params = draw_hook(rng)
    return Draw(engine=engine.name, seed=seed, index=index, board=board, params=dict(params),
                backpressure=rng.choice(PATTERNS))


def configure(engine, draw):
    """The draw's configuration: its pinned parameters completed on its board, exactly as
    ``nnrtl sim`` completes them (through the ``--param`` text when it has one)."""
    platform_class = get_board_or_usage_error(draw.board)

    def accept(config):
        fits_board(engine, config, platform_class)

    if draw.items is not None:
        return parse_params(engine.config_class, draw.items, accept=accept)
    from .params import complete
    return complete(engine.config_class, draw.params, accept=accept)


def lint(engine, config):
    """Emit ``config``'s Verilog (every shared unit's logic compared use by use) and lint it
    with Verilator under the waivers of the simulation builds.

    Returns
    -------
    dict
        ``verilog_bytes``, ``emit_seconds``, ``lint_seconds``.

    Raises
    ------
    CheckFailed
        A shared unit whose uses differ, or a Verilator warning (its first line first).
    """
    from ..hw import hierarchy
    from ..sim import runner

    start = time.monotonic()
    try:
        text = engine.verilog(config, check_shared=True)
    except hierarchy.SharedUnitError as error:
        raise CheckFailed(str(error)) from None
    emitted = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nnrtl-lint-") as scratch:
        source = Path(scratch) / f"{engine.module_name}.v"
        source.write_text(runner.with_primitive_models(text))
        done = subprocess.run(
            ["verilator", "--lint-only", "--top-module", engine.module_name,
             *(f"-Wno-{warning}" for warning in runner.WAIVERS), str(source)],
            capture_output=True, text=True, env={**os.environ, **runner.verilator_env()})
    if done.returncode:
        lines = (done.stderr or done.stdout).splitlines()
        first = next((line for line in lines if line.startswith(("%Error", "%Warning"))),
                     lines[0] if lines else "no output")
        raise CheckFailed(f"Verilator lint of {engine.module_name}: {first}")
    return {"verilog_bytes": len(text), "emit_seconds": round(emitted - start, 3),
            "lint_seconds": round(time.monotonic() - emitted, 3)}


def simulate(engine, draw, config):
    """Simulate ``config`` twice: under the draw's pattern (bit-exact required) and under
    ``none`` (bit-exact, and the cycles equal to the engine's ``model_cycles`` unless its
    result says ``model_exact: false``, which gives the outcome a labelled ``warning``).

    Returns
    -------
    dict
        ``bit_exact``, ``cycles``, ``model_cycles`` (of the ``none`` run) and
        ``pattern_cycles`` (of the draw's pattern).

    Raises
    ------
    CheckFailed
        Naming the run and what differed.
    """
    from ..sim.runner import SimulationError

    board = get_board_or_usage_error(draw.board)
    results = {}
    for pattern in dict.fromkeys((draw.backpressure, "none")):
        request = SimRequest(config=config, board=board, seed=draw.index + 1,
                             backpressure=pattern)
        try:
            results[pattern] = engine.simulate(request)
        except SimulationError as error:
            raise CheckFailed(f"simulation under {pattern}: {str(error).splitlines()[0]}") \
                from None
        if results[pattern].get("bit_exact") is not True:
            raise CheckFailed(f"not bit-exact under {pattern}: "
                              f"{results[pattern].get('first_mismatch')!r}")
    quiet = results["none"]
    exact = quiet.get("model_exact", True)
    if exact and quiet.get("model_cycles") is not None and \
            quiet["cycles"] != quiet["model_cycles"]:
        raise CheckFailed(f"under none the RTL ran {quiet['cycles']} cycles, the model "
                          f"predicts {quiet['model_cycles']}")
    outcome = {"bit_exact": True, "cycles": quiet["cycles"],
               "model_cycles": quiet.get("model_cycles"), "model_exact": exact,
               "pattern_cycles": results[draw.backpressure]["cycles"]}
    if not exact:
        outcome["warning"] = (f"cycles not checked: the engine's model is not exact for this "
                              f"run ({quiet.get('model_note', 'no reason given')})")
    return outcome


def run(engine, draw, *, simulate_it=False):
    """Configure, lint and (``simulate_it``) simulate one draw.

    Returns
    -------
    dict
        ``passed`` and, when it failed, ``error`` and ``command`` (the command that
        reproduces it); the config's parameters and the figures of each stage.
    """
    outcome = {"index": draw.index, "board": draw.board, "params": draw.params,
               "backpressure": draw.backpressure, "command": draw.command,
               "reproduce": draw.reproduce}
    try:
        config = configure(engine, draw)
        outcome["config"] = {f.name: getattr(config, f.name)
                             for f in dataclasses.fields(config) if f.init}
        outcome["lint"] = lint(engine, config)
        if simulate_it:
            outcome["sim"] = simulate(engine, draw, config)
    except (CheckFailed, UsageError) as error:
        outcome.update(passed=False, error=f"{type(error).__name__}: {error}")
        return outcome
    outcome["passed"] = True
    return outcome


def bench(out, *, counts=None):
    """The ``draws`` bench (``make bench``): every engine's :data:`SLOW` draws at
    :func:`seed`, each linted and the first ones simulated.

    Returns
    -------
    tuple
        ``(result, markdown)``: per engine the draws run, passed and simulated, the
        seconds, and each failure's error and reproducing command.
    """
    from .engines import engines
    from .progress import progress

    del out
    counts = SLOW if counts is None else counts
    result = {"seed": seed(), "engines": {}}
    rows = []
    for name, engine in engines().items():
        if engine.draw is None or name not in counts:
            continue
        total, simulated = counts[name]
        start = time.monotonic()
        failures, unchecked = [], 0
        for draw in draws(engine, total, result["seed"]):
            progress(f"draws bench: {name} {draw.index + 1}/{total}")
            outcome = run(engine, draw, simulate_it=draw.index < simulated)
            unchecked += "warning" in outcome.get("sim", {})
            if not outcome["passed"]:
                failures.append({key: outcome[key] for key in ("index", "error", "command",
                                                               "reproduce")})
        seconds = round(time.monotonic() - start, 1)
        result["engines"][name] = {"run": total, "simulated": simulated,
                                   "passed": total - len(failures), "failures": failures,
                                   "cycles_unchecked": unchecked, "seconds": seconds}
        rows.append(f"| {name} | {total} | {simulated} | {total - len(failures)} | "
                    f"{unchecked} | {seconds:.0f} |")
    lines = [f"## Random configurations (seed {result['seed']})", "",
             "| engine | draws | simulated | passed | cycles not checked (model not exact) "
             "| seconds |", "| --- | --- | --- | --- | --- | --- |", *rows]
    for name, figures in result["engines"].items():
        for failure in figures["failures"]:
            lines += ["", f"- {name} draw {failure['index']}: {failure['error']} — "
                          f"`{failure['command']}`"]
    return result, "\n".join(lines) + "\n"

"""The actions of the ``nnrtl`` commands (:mod:`nnrtl.gen.cli` parses the command line
and calls them): one ``cmd_<command>(args)`` each, reaching every engine through its hooks
(:mod:`nnrtl.gen.engines`). Each raises :class:`~nnrtl.gen.errors.UsageError` for bad
input (exit code 2, nothing written) and returns the command's exit code or ``None``.
"""

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from ..boards import BOARDS, vivado_part
from .engines import (ExploreRequest, ModelRequest, SimRequest, LUT_SHARE, add_throughput, check_fit, engines, fits_board,
                      get_board_or_usage_error, get_engine, unavailable)
from .errors import UsageError
from .params import param_help, parse_params
from .progress import progress

__all__ = ["cmd_boards", "cmd_engines", "cmd_generate", "cmd_synth", "cmd_sim", "cmd_explore",
           "cmd_report", "cmd_train", "engine_options"]


def engine_options(args):
    """The engine's own options of the parsed command (:attr:`Engine.options
    <nnrtl.gen.engines.Engine.options>`), ``{dest: value}``."""
    return {dest: getattr(args, dest) for dest in getattr(args, "engine_options", ())}


def cmd_boards(args):
    rows = []
    for name, platform_class in BOARDS.items():
        rows.append({"name": name, "title": platform_class.title,
                     "part": vivado_part(platform_class),
                     **platform_class.capacity.as_dict()})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    header = (f"{'board':<8}{'part':<24}{'LUT':>10}{'FF':>11}{'DSP':>6} {'kind':<9}"
              f"{'BRAM36':>7}{'URAM':>6}{'on-chip Mb':>11}{'off-chip GB/s':>14}  off-chip memory")
    print(header)
    for row in rows:
        print(f"{row['name']:<8}{row['part']:<24}{row['lut']:>10,}{row['ff']:>11,}"
              f"{row['dsp']:>6} {row['dsp_kind']:<9}{row['bram36']:>7}{row['uram']:>6}"
              f"{row['onchip_mb']:>11.1f}{row['offchip_gbps']:>14.1f}  {row['offchip_kind']}")
    print("\nSources:")
    for row in rows:
        for source in row["sources"]:
            print(f"  {row['name']}: {source}")


def cmd_engines(args):
    failed = unavailable()
    if args.json:
        print(json.dumps([engine.describe() for engine in engines().values()]
                         + [{"name": name, "unavailable": reason}
                            for name, reason in failed.items()], indent=2, default=str))
        return
    for engine in engines().values():
        print(f"{engine.name}: {engine.summary}")
        description = engine.describe()
        print(f"    hooks: {', '.join(description['hooks'])}")
        print(f"    defaults generate on: {_default_boards(description['default_boards'])}")
        for line in param_help(engine.config_class):
            print(f"    --param {line}")
        for name, preset in engine.presets.items():
            print(f"    --preset {name} (for {preset.board}): {preset.source}")
    for name, reason in failed.items():
        print(f"{name}: unavailable: {reason}")


def _default_boards(boards):
    """``zc706, vu9p (channels=32)``: the boards and the parameters chosen on each."""
    if not boards:
        return "no board (give --param values that fit one)"
    return ", ".join(name + (f" ({', '.join(f'{k}={v}' for k, v in chosen.items())})"
                             if chosen else "") for name, chosen in boards.items())


def _configure(args):
    """The engine, configuration and board of ``generate``/``sim``, and the model binding
    (``None`` without ``--model``); the design checked against the board."""
    engine = get_engine(args.engine)
    platform_class = get_board_or_usage_error(args.board)
    lut_share = getattr(args, "lut_share", LUT_SHARE)
    if not 0 < lut_share <= 1:
        raise UsageError(f"--lut-share must be in (0, 1], not {lut_share:g}")
    inputs = getattr(args, "inputs", None)
    if args.model is None:
        for flag, value in (("--weights", args.weights), ("--inputs", inputs),
                            ("--seq-len", args.seq_len), ("--prefix", args.prefix)):
            if value is not None:
                raise UsageError(f"{flag} needs --model FILE")
        base = None if args.preset is None else engine.preset(args.preset)
        config = parse_params(engine.config_class, args.param, base=base, log=progress,
                              accept=lambda c: fits_board(engine, c, platform_class,
                                                          lut_share=lut_share))
        binding = None
    else:
        load_model = engine.hook("load_model", "--model (model import)")
        if args.preset is not None:
            raise UsageError("give --preset or --model, not both")
        binding = load_model(ModelRequest(
            path=Path(args.model), weights=args.weights and Path(args.weights),
            board=platform_class, params=tuple(args.param),
            inputs=inputs and Path(inputs), seq_len=args.seq_len, log=progress,
            prefix=args.prefix, lut_share=lut_share))
        config = binding.config
    check_fit(engine, config, platform_class, lut_share=lut_share)
    return engine, config, platform_class, binding


def cmd_generate(args):
    from .emit import generate

    engine, config, platform_class, binding = _configure(args)
    output = args.output or f"build/{engine.name}-{platform_class.name}"
    manifest = generate(engine, config, platform_class, output, force=args.force,
                        binding=binding)
    print(f"wrote {engine.name} for {platform_class.name} ({manifest['board']['part']}) "
          f"into {output} in {manifest['seconds']:.2f} s:")
    for name in manifest["files"]:
        print(f"  {name}")
    print("  manifest.json")
    print(_device_shares(manifest, args.lut_share))
    if binding is not None:
        print(f"configuration chosen for {args.model}:")
        for name, value in manifest["parameters"].items():
            print(f"  {name} = {list(value) if isinstance(value, tuple) else value}")


def _device_shares(manifest, lut_share):
    """One line: what the resource model counts of each resource, as a share of the
    board's; the LUTs also against the budget ``lut_share`` allows (:func:`budget`)."""
    capacity = manifest["board"]["capacity"]
    parts = []
    for resource, amount in manifest["resources_needed"].items():
        total = capacity.get(resource)
        share = f" ({amount / total:.1%})" if total else ""
        parts.append(f"{resource} {amount:,}{share}")
    return (f"resource model: {', '.join(parts)} of the board's; LUT budget at "
            f"--lut-share {lut_share:g}: {int(lut_share * capacity['lut']):,}")


def cmd_synth(args):
    from .synth import format_table, synthesize

    report = synthesize(args.directory, hierarchy=args.hierarchy, log=progress)
    print(format_table(report))
    print(f"wrote {args.directory}/synth.json")


def _outputs_path(path):
    output = Path(path)
    if output.suffix != ".npy":
        raise UsageError(f"--outputs must name a .npy file, not {output}")
    if not output.parent.is_dir():
        raise UsageError(f"--outputs: no directory {output.parent}")
    return output


def _summary_wanted():
    """Whether ``nnrtl sim`` prints its summary before the JSON line: on a terminal, or as
    ``NNRTL_SUMMARY`` says (``always`` or ``never``; for tests and pipes)."""
    forced = os.environ.get("NNRTL_SUMMARY", "")
    if forced not in ("", "always", "never"):
        raise UsageError(f"NNRTL_SUMMARY must be always or never, not {forced!r}")
    return forced == "always" or (forced == "" and sys.stdout.isatty())


def _summary(result, breakdown):
    """The lines of ``nnrtl sim``'s summary: bit-exact or not, cycles against the model
    for the same stream pattern, where the cycles went."""
    pattern = result["backpressure"]
    lines = [f"{result['engine']} on {result['board']}, seed {result['seed']}, streams "
             f"{pattern}" + ("" if pattern == "none" else " (gaps on the inputs, "
                             "backpressure on the outputs)")]
    if result.get("bit_exact") is True:
        lines.append("  bit-exact: yes, every output word equals the golden model's")
    else:
        lines.append("  bit-exact: NO")
        mismatch = result.get("first_mismatch")
        if mismatch:
            lines.append(f"    first mismatch: {mismatch}")
        if result.get("error"):
            lines.append(f"    {result['error']}")
    cycles, model = result.get("cycles"), result.get("model_cycles")
    if cycles:
        lines.append(f"  cycles: {cycles:,}")
        if model and pattern == "none":
            lines.append(f"  performance model for these streams (gapless): {model:,} "
                         f"cycles; the run took {cycles / model - 1:+.1%}")
        elif model:
            lines.append(f"  performance model for {pattern} streams: none (the model "
                         f"assumes streams that never pause)")
            lines.append(f"  gapless model, for reference only: {model:,} cycles; the "
                         f"difference is the streams, see below")
        if result.get("utilization") is not None:
            lines.append(f"  utilization: {result['utilization']:.1%} of the PE cycles "
                         f"did useful work" + (f"; {result['gops']:.2f} GOPS at "
                                               f"{result['f_clk_mhz']:g} MHz"
                                               if "gops" in result else ""))
    if breakdown:
        lines.append("  where the cycles went:")
        width = max(len(label) for label, _ in breakdown)
        for label, count in breakdown:
            share = count / cycles if cycles else 0.0
            lines.append(f"    {label:<{width}} {count:>10,} {share:>7.1%}  "
                         f"{'#' * round(30 * max(share, 0.0))}")
    lines.append("  (the JSON line below is the full result)")
    return lines


def _output_directory(args, engine, config, platform_class):
    """Check ``sim -o DIR``/``explore -o DIR`` before running: ``None`` without ``-o``;
    else ``(path, exists)``: an existing directory must hold the manifest of the same
    engine and configuration; a new one is generated at the end."""
    if args.output is None:
        return None
    from .output import MANIFEST
    output = Path(args.output)
    if not output.exists():
        return output, False
    manifest_path = output / MANIFEST
    if not output.is_dir() or not manifest_path.is_file():
        raise UsageError(f"-o {output} exists and holds no {MANIFEST}: give a directory "
                         f"written by 'nnrtl generate' or a new one")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read {manifest_path}: {error}") from None
    if config is None and manifest.get("engine") != engine.name:
        raise UsageError(f"-o {output} holds a design of {manifest.get('engine')}, not of "
                         f"{engine.name}; give a new directory or one generated for "
                         f"{engine.name}")
    if config is not None:
        want = json.loads(json.dumps(dataclasses.asdict(config)))   # as the manifest has it
        if manifest.get("engine") != engine.name or manifest.get("parameters") != want or \
                manifest.get("board", {}).get("name") != platform_class.name:
            differ = sorted(k for k in want if manifest.get("parameters", {}).get(k)
                            != want[k])
            raise UsageError(
                f"-o {output} holds {manifest.get('engine')} for "
                f"{manifest.get('board', {}).get('name')}, not this {engine.name} design for "
                f"{platform_class.name}" + (f" (parameters differ: {', '.join(differ)})"
                                            if differ else "")
                + "; give a new directory or the one generated with the same parameters")
    return output, True


def _write_into(destination, engine, config, platform_class, name, result):
    """Write ``result`` as ``name`` (``sim.json``, ``explore.json``) into ``destination``
    (from :func:`_output_directory`): atomically into the existing directory, or into a new one
    generated (with its manifest) for ``config``, the whole directory atomically."""
    from .emit import write_design
    from .output import staged_directory
    from .report import write_result

    output, exists = destination
    if exists:
        write_result(output, name, result)
    else:
        with staged_directory(output) as staging:
            write_design(staging, engine, config, platform_class)
            write_result(staging, name, result)
    progress(f"wrote {output / name}")


def cmd_sim(args):
    from ..sim.runner import SimulationError

    given = [args.model is not None, args.inputs is not None, args.outputs is not None]
    if any(given) and not all(given):
        raise UsageError("--model FILE --inputs X.npy --outputs Y.npy go together")
    _check_seed(args.seed)
    if args.steps is not None and args.steps <= 0:
        raise UsageError(f"--steps must be a positive integer, not {args.steps}")
    summary = _summary_wanted()
    outputs = _outputs_path(args.outputs) if args.outputs is not None else None
    engine, config, platform_class, binding = _configure(args)
    destination = _output_directory(args, engine, config, platform_class)
    request = SimRequest(
        config=config, board=platform_class, seed=args.seed, backpressure=args.backpressure,
        waves=args.waves, steps=args.steps, model=binding and binding.model,
        inputs=binding and binding.inputs, outputs=outputs, log=progress,
        options=engine_options(args))
    start = time.monotonic()
    try:
        result = add_throughput(engine.simulate(request),
                                engine.clock_hz(config, platform_class))
    except SimulationError as error:
        # The run did not complete its checks (a budget overrun, an undrained source, a
        # build that failed): the result is wrong, and the JSON line says why.
        result = {"bit_exact": False, "error": str(error).splitlines()[0],
                  "detail": str(error)}
    result = {"engine": engine.name, "board": platform_class.name, "seed": args.seed,
              "backpressure": args.backpressure, **result,
              "seconds": round(time.monotonic() - start, 3)}
    if "build_seconds" in result:
        progress(f"sim: Verilator build {'from the cache' if result['build_cached'] else 'took'}"
                 f" {result['build_seconds']:.1f} s, simulation {result['run_seconds']:.1f} s")
    breakdown = engine.breakdown(result) if engine.breakdown is not None else []
    if destination is not None:
        _write_into(destination, engine, config, platform_class, "sim.json",
                    {**result, "breakdown": breakdown})
    if summary:
        print("\n".join(_summary(result, breakdown)))
    print(json.dumps(result), flush=True)
    return 0 if result.get("bit_exact") is True else 1


def _check_seed(seed):
    if seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, not {seed} (a negative "
                         f"seed would run as seed {-seed})")


def cmd_explore(args):
    from .dse import Budget, check_objective

    if args.top <= 0:
        raise UsageError(f"--top must be a positive integer, not {args.top}")
    budget = Budget(dsp_share=args.dsp_share, bram_share=args.bram_share,
                    lut_share=args.lut_share, max_pes=args.max_pes)
    objective, tolerance = check_objective(args.objective, args.tolerance)
    engine = get_engine(args.engine)
    explore = engine.hook("explore", "design-space exploration")
    platform_class = get_board_or_usage_error(args.board)
    destination = _output_directory(args, engine, None, platform_class)
    exploration = explore(ExploreRequest(
        board=platform_class, model=args.model and Path(args.model),
        weights=args.weights and Path(args.weights), params=tuple(args.param),
        seq_len=args.seq_len, top=args.top, log=progress, dsp_share=budget.dsp_share,
        bram_share=budget.bram_share, lut_share=budget.lut_share, max_pes=budget.max_pes,
        objective=objective, tolerance=tolerance, options=engine_options(args)))
    if args.json:
        print(json.dumps(exploration.as_json()))     # one line: feasible_points is long
    else:
        print(exploration.table())
    if destination is not None:
        found = exploration.as_json()
        config = None
        if not destination[1]:
            try:
                config = engine.config_class(**found["chosen"])
            except (KeyError, TypeError, ValueError) as error:
                raise UsageError(f"-o {destination[0]}: {engine.name}'s exploration names "
                                 f"no configuration to generate ({error})") from None
            check_fit(engine, config, platform_class, lut_share=budget.lut_share)
        _write_into(destination, engine, config, platform_class, "explore.json", found)


def cmd_report(args):
    from .report import write_report

    path = write_report(args.directory, get_engine)
    print(f"wrote {path} (open {path.resolve().as_uri()} in a browser)")


def cmd_train(args):
    from .train import TrainRequest, train

    _check_seed(args.seed)
    engine = get_engine(args.engine)
    hook = engine.hook("train", "training (nnrtl train)")
    platform_class = get_board_or_usage_error(args.board)
    request = TrainRequest(
        board=platform_class, model=Path(args.model), inputs=Path(args.inputs),
        targets=Path(args.targets), loss=args.loss, lr=args.lr, steps=args.steps,
        backend=args.backend, params=tuple(args.param), options=engine_options(args),
        seed=args.seed, log=progress, prefix=args.prefix,
        lengths=None if args.lengths is None else Path(args.lengths))
    summary = train(engine, hook, request, args.output, force=args.force)
    print(json.dumps(summary))
    return 1 if summary["within_bound"] is False else 0     # None: an approximation


def cmd_draws(args):
    """``nnrtl draws``: run an engine's random configurations (:mod:`nnrtl.gen.draws`);
    exit 1 when one fails, each failure with the command that reproduces it."""
    from . import draws

    engine = get_engine(args.engine)
    for flag, value, least in (("--count", args.count, 1), ("--simulate", args.simulate, 0)):
        if value < least:
            raise UsageError(f"{flag} must be an integer of at least {least}, not {value}")
    if args.only is not None:
        if args.only < 0:
            raise UsageError(f"--only must be a draw index of at least 0, not {args.only}")
        chosen = [draws.draws(engine, args.only + 1, args.seed)[args.only]]
        simulated = {args.only}
    else:
        chosen = draws.draws(engine, args.count, args.seed)
        simulated = set(range(args.simulate))
    failed = 0
    start = time.monotonic()
    for draw in chosen:
        progress(f"draw {draw.index} of {engine.name} (seed {args.seed}): {draw.command}")
        outcome = draws.run(engine, draw, simulate_it=draw.index in simulated)
        failed += not outcome["passed"]
        if args.json:
            print(json.dumps(outcome, default=str), flush=True)
        elif outcome["passed"]:
            sim = outcome.get("sim") or {}
            cycles = "" if not sim else f"; bit-exact, {sim['cycles']} cycles" + (
                " = model" if sim["model_exact"] else f", model {sim['model_cycles']}")
            print(f"draw {draw.index}: passed (lint {outcome['lint']['lint_seconds']:.1f} s"
                  f"{cycles})", flush=True)
            if "warning" in sim:
                print(f"  warning: {sim['warning']}", flush=True)
        else:
            print(f"draw {draw.index}: FAILED: {outcome['error']}\n  reproduce: "
                  f"{outcome['command']}\n  or: {outcome['reproduce']}", flush=True)
    print(f"{engine.name}: {len(chosen)} draws (seed {args.seed}), {len(chosen) - failed} "
          f"passed, {failed} failed, {len(simulated & {d.index for d in chosen})} simulated, "
          f"{time.monotonic() - start:.0f} s", file=sys.stderr if args.json else sys.stdout)
    return 1 if failed else 0

"""``nnrtl explore sbe``: the model from a file or from its shape, the hardware
parameters given (pinned), the exploration of the others (:func:`.explore.explore`) under
the request's budget and objective, and its report as a table or JSON.

:func:`explore_pinned` is the one completion of a model's configuration: ``nnrtl explore
sbe`` and ``nnrtl generate/sim sbe --model`` (:func:`.frommodel.model_config`) both use it.
"""

import dataclasses

from ...hw.sbe.config import SbeConfig
from ..dse import Budget
from ..errors import UsageError
from ..params import complete, parse_values
from .explore import VARIED, check_seq_len, explore, format_table

__all__ = ["SbeExploration", "explore_request", "explore_pinned", "pins",
           "generate_command", "feasible_points", "MAX_POINTS", "VARIED", "SHAPE",
           "QUANTIZED"]

#: Most feasible configurations ``as_json`` lists (``feasible_points``); beyond, a sample.
MAX_POINTS = 2000

#: The model's sizes: from ``--model`` or, without one, ``--param``.
SHAPE = ("input_size", "hidden_size", "hidden_sizes", "layers")
#: The fraction bits a model file's quantization chooses.
QUANTIZED = ("weight_frac", "act_frac", "cell_frac")


def pins(params, *, model):
    """The ``--param`` values of ``params`` (``name=value`` strings) checked for a model
    file (``model``) or a shape given as parameters: with a model file its sizes and
    fraction bits cannot be given; without one, ``input_size`` and ``hidden_size`` must
    be. ``seq_len`` is the sequence length to plan for.

    Raises
    ------
    UsageError
        Naming the parameter and who sets it."""
    values = parse_values(SbeConfig, params)
    if model:
        for name in values:
            if name in SHAPE:
                raise UsageError(f"{name} comes from the model; it cannot be given with "
                                 f"--model")
            if name in QUANTIZED:
                raise UsageError(f"{name} is chosen by the quantization; it cannot be "
                                 f"given with --model")
    elif not {"input_size", "hidden_size"} <= set(values):
        raise UsageError("explore needs --model FILE, or --param input_size=N --param "
                         "hidden_size=N [--param layers=N]")
    return values


def explore_pinned(spec, board, values, *, seq_len, base, **options):
    """:func:`.explore.explore` of ``spec`` with the hardware parameters of ``values``
    (from :func:`pins`) fixed: those of :data:`VARIED` keep their value, the others
    (widths, ``batch_norm``) replace ``base``'s. ``options`` go to ``explore`` (``budget``,
    ``objective``, ``tolerance``, ``top``, ``log``).

    Raises
    ------
    UsageError
        Pinned values that conflict (the rule they break, naming them, as
        :func:`~nnrtl.gen.params.complete` words it), and the errors of ``explore``."""
    fixed = {name: value for name, value in values.items()
             if name not in VARIED and name not in SHAPE and name != "seq_len"}
    try:
        base = dataclasses.replace(base, **fixed)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None
    pinned = {name: value for name, value in values.items() if name in VARIED}
    try:
        return explore(spec, board, seq_len=seq_len, base=base, pinned=pinned, **options)
    except UsageError:
        if pinned:      # the pinned values' own conflict, if they have one, says more
            shape = {name: getattr(spec, name) for name in SHAPE}
            complete(SbeConfig, {**shape, "seq_len": seq_len, **fixed, **pinned}, base=base)
        raise


def generate_command(board, config):
    """``nnrtl generate sbe`` of ``config``: its shape and the fields not at their default."""
    defaults = type(config)()

    def text(value):
        if isinstance(value, tuple):
            return ",".join(map(str, value))
        return str(value).lower()

    params = [f"--param {field.name}={text(getattr(config, field.name))}"
              for field in dataclasses.fields(config)
              if field.name in ("input_size", "hidden_size", "layers", "seq_len")
              or getattr(config, field.name) != getattr(defaults, field.name)]
    return f"nnrtl generate sbe --board {board} {' '.join(params)}"


def feasible_points(exploration, limit=MAX_POINTS):
    """The feasible configurations of an :class:`~.explore.Exploration` as JSON, at most
    ``limit`` of them, in order of their lower bound: all if there are that few, otherwise
    the best ranked ones (up to half of ``limit``, the chosen one among them) and an even
    sample of the others, one in ``n`` (their count over the places left, not an integer
    in general), ``kept_which`` saying so. Each point:
    the :data:`VARIED` parameters, ``lower_bound_cycles``, ``cycles`` (exact, or ``None``
    for a configuration the ranking did not need) and the resource estimate's ``dsp``,
    ``bram36``, ``luts``."""
    points = exploration.points
    if len(points) <= limit:
        keep, rule = list(range(len(points))), "all"
    else:
        def rank(i):                    # Candidate.rank_key
            c, r = points[i].config, points[i].resources
            return (points[i].cycles, r.dsp, r.bram36, c.bus_weights, c.batch, c.blocks,
                    c.pes)
        ranked = sorted((i for i, p in enumerate(points) if p.cycles is not None),
                        key=rank)[:limit // 2]
        taken = set(ranked)
        others = [i for i in range(len(points)) if i not in taken]
        step = len(others) / (limit - len(ranked))
        keep = sorted(ranked + [others[int(k * step)] for k in range(limit - len(ranked))])
        rule = (f"the {len(ranked)} best ranked and {limit - len(ranked)} of the other "
                f"{len(others)} evenly in order of their lower bound (one in {step:.2f})")

    def point(p):
        return {**{name: getattr(p.config, name) for name in VARIED},
                "lower_bound_cycles": p.lower_bound, "cycles": p.cycles,
                "dsp": p.resources.dsp, "bram36": p.resources.bram36,
                "luts": p.resources.luts}
    return {"count": len(points), "kept": len(keep), "sampled": rule != "all",
            "kept_which": rule,
            "note": "lower_bound_cycles (perf.lower_bound_cycles) is a bound, not a "
                    "prediction; cycles (perf.model_cycles) only for the configurations "
                    "ranked exactly; parameters not listed are the chosen configuration's",
            "points": [point(points[i]) for i in keep]}


@dataclasses.dataclass(frozen=True)
class SbeExploration:
    """An exploration with the model it explored: what ``nnrtl explore sbe`` prints."""

    exploration: object
    model: object
    quantized: object
    calibration: str

    def table(self):
        e, chosen = self.exploration, self.exploration.best.config
        lines = [format_table(e), "", f"* chosen: {chosen}"]
        if self.model is not None:
            lines.append(f"  weight_frac, act_frac and cell_frac from {self.model.source} "
                         f"calibrated on {self.calibration}; {self.quantized.saturated} "
                         f"weight codes saturated")
        lines.append(f"  {generate_command(e.board, chosen)}")
        return "\n".join(lines)

    def as_json(self):
        e, model, quantized = self.exploration, self.model, self.quantized

        def candidate(rank, c):
            limit, share = e.limit(c)
            return {"rank": rank, "chosen": rank == e.chosen_rank,
                    "config": dataclasses.asdict(c.config),
                    "cycles": c.cycles, "vs_fastest": c.cycles / e.fastest.cycles - 1,
                    "utilization": c.utilization, "gops": c.gops,
                    "resources": {**dataclasses.asdict(c.resources), "luts": c.resources.luts},
                    "limit": {"budget": limit, "share": share}}
        capacity = _platform(e.board).capacity
        return {
            "engine": "sbe", "board": e.board, "clock_hz": e.clock_hz, "seq_len": e.seq_len,
            "model": {**dataclasses.asdict(e.model),
                      "source": None if model is None else model.source},
            "objective": {"name": e.objective, "tolerance": e.tolerance,
                          "chosen_rank": e.chosen_rank},
            "budget": {**e.budget.as_json(capacity), "limits": e.limits},
            "pinned": e.pinned,
            "considered": e.considered, "feasible": e.feasible,
            "chosen": dataclasses.asdict(e.best.config),
            "quantization": None if quantized is None else {
                "calibration": self.calibration, "saturated": quantized.saturated,
                "ranges": quantized.ranges},
            "candidates": [candidate(rank, c) for rank, c in e.listed],
            "feasible_points": feasible_points(e),
        }


def explore_request(request):
    """Run the exploration an :class:`~nnrtl.gen.engines.ExploreRequest` asks for."""
    from ..models import ModelSpec
    from .frommodel import CALIBRATION_SEED, CALIBRATION_SEQUENCES, WIDTHS, quantized_base
    from .host_layers import load_whole_model

    if request.model is None and request.weights is not None:
        raise UsageError("--weights needs --model, the Keras model JSON")
    values = pins(request.params, model=request.model is not None)
    budget = Budget.of(request)     # bad shares before reading or quantizing anything
    seq_len = _seq_len(request, values)
    check_seq_len(seq_len, name="--seq-len")      # before calibrating on that many steps
    calibration = (f"{CALIBRATION_SEQUENCES} synthetic sequences, inputs uniform in "
                   f"[-1, 1], seed {CALIBRATION_SEED}")
    model = quantized = None
    if request.model is not None:
        model, host = load_whole_model(request.model, request.weights)
        spec = model.spec
        inputs = None
        if host.embedding is not None:      # as generate and sim calibrate such a model
            inputs, used = host.calibration(seq_len)
            calibration = (f"{used['sequences']} sequences of {used['distribution']}, "
                           f"seed {used['seed']}")
        if request.log is not None:
            request.log(f"explore: quantizing {model.source} on {calibration}")
            if host:
                request.log(f"explore: the host runs {'; '.join(host.described)}")
        base, quantized = quantized_base(model, seq_len=seq_len, calibration=inputs, **{
            name: values[name] for name in WIDTHS if name in values})
    else:
        spec = complete(ModelSpec, {name: values[name] for name in SHAPE if name in values},
                        base=ModelSpec(1, 1, 1))
        base = SbeConfig()
    exploration = explore_pinned(spec, request.board, values, seq_len=seq_len, base=base,
                                 budget=budget, objective=request.objective,
                                 tolerance=request.tolerance, top=request.top,
                                 log=request.log)
    return SbeExploration(exploration, model, quantized, calibration)


def _seq_len(request, values):
    """The sequence length to plan for: ``--seq-len`` or ``--param seq_len`` (not both),
    else SbeConfig's."""
    if "seq_len" in values and request.seq_len is not None:
        raise UsageError("give the sequence length as --seq-len or as --param seq_len, not "
                         "both")
    if "seq_len" in values:
        return values["seq_len"]
    return SbeConfig().seq_len if request.seq_len is None else request.seq_len


def _platform(name):
    from ...boards import get_board
    return get_board(name)

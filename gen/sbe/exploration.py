"""``nnrtl explore sbe``: the model from a file or from its shape, the exploration
(:func:`.explore.explore`), and its report as a table or JSON."""

import dataclasses

from ...hw.sbe.config import SBEConfig
from ..errors import UsageError
from ..params import parse_params
from .explore import check_seq_len, explore, format_table

__all__ = ["SBEExploration", "explore_request", "generate_command", "feasible_points",
           "MAX_POINTS", "VARIED"]

#: Most feasible configurations ``as_json`` lists (``feasible_points``); beyond, a sample.
MAX_POINTS = 2000

#: The parameters the exploration varies; the others are the chosen configuration's.
VARIED = ("pes", "batch", "blocks", "bus_weights", "post_units", "lut_multipliers")


def _model(request):
    """The model (``None`` with ``--param``) and its :class:`ModelSpec`."""
    from .frommodel import load_model
    from ..models import ModelSpec

    if request.model is not None:
        if request.params:
            raise UsageError("give the model as --model FILE or as --param, not both")
        model = load_model(request.model, request.weights)
        return model, model.spec
    if request.weights is not None:
        raise UsageError("--weights needs --model, the Keras model JSON")
    given = {item.partition("=")[0].strip() for item in request.params}
    if not {"input_size", "hidden_size"} <= given:
        raise UsageError("explore needs --model FILE, or --param input_size=N --param "
                         "hidden_size=N [--param layers=N]")
    return None, parse_params(ModelSpec, request.params, base=ModelSpec(1, 1, 1))


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
class SBEExploration:
    """An exploration with the model it explored: what ``nnrtl explore sbe`` prints."""

    exploration: object
    model: object
    quantized: object
    calibration: str

    def table(self):
        e, chosen = self.exploration, self.exploration.best.config
        lines = [format_table(e, chosen=0), "", f"* chosen: {chosen}"]
        if self.model is not None:
            lines.append(f"  weight_frac, act_frac and cell_frac from {self.model.source} "
                         f"calibrated on {self.calibration}; {self.quantized.saturated} "
                         f"weight codes saturated")
        lines.append(f"  {generate_command(e.board, chosen)}")
        return "\n".join(lines)

    def as_json(self):
        def candidate(rank, c):
            return {"rank": rank, "chosen": rank == 1, "config": dataclasses.asdict(c.config),
                    "cycles": c.cycles, "utilization": c.utilization, "gops": c.gops,
                    "resources": {**dataclasses.asdict(c.resources), "luts": c.resources.luts}}
        e, model, quantized = self.exploration, self.model, self.quantized
        return {
            "engine": "sbe", "board": e.board, "clock_hz": e.clock_hz, "seq_len": e.seq_len,
            "model": {**dataclasses.asdict(e.model),
                      "source": None if model is None else model.source},
            "considered": e.considered, "feasible": e.feasible,
            "chosen": dataclasses.asdict(e.best.config),
            "quantization": None if quantized is None else {
                "calibration": self.calibration, "saturated": quantized.saturated,
                "ranges": quantized.ranges},
            "candidates": [candidate(rank, c) for rank, c in enumerate(e.candidates, 1)],
            "feasible_points": feasible_points(e),
        }


def explore_request(request):
    """Run the exploration an :class:`~nnrtl.gen.engines.ExploreRequest` asks for."""
    from .frommodel import CALIBRATION_SEED, CALIBRATION_SEQUENCES, quantized_base

    model, spec = _model(request)
    seq_len = SBEConfig().seq_len if request.seq_len is None else request.seq_len
    check_seq_len(seq_len, name="--seq-len")      # before calibrating on that many steps
    base = quantized = None
    calibration = (f"{CALIBRATION_SEQUENCES} synthetic sequences, inputs uniform in "
                   f"[-1, 1], seed {CALIBRATION_SEED}")
    if model is not None:
        if request.log is not None:
            request.log(f"explore: quantizing {model.source} on {calibration}")
        base, quantized = quantized_base(model, seq_len=seq_len)
    exploration = explore(spec, request.board, seq_len=seq_len, base=base, top=request.top,
                          log=request.log)
    return SBEExploration(exploration, model, quantized, calibration)

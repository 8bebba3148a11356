"""``nnrtl explore sbe``: the model from a file or from its shape, the exploration
(:func:`.explore.explore`), and its report as a table or JSON."""

import dataclasses

from ...hw.sbe.config import SBEConfig
from ..errors import UsageError
from ..params import parse_params
from .explore import check_seq_len, explore, format_table

__all__ = ["SBEExploration", "explore_request", "generate_command"]


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

"""FPDeep's own commands: ``nnrtl map fpdeep`` (a CNN onto a chain of FPGAs,
:func:`.hooks.map_hook`) and ``nnrtl cluster fpdeep`` (the chain's cycle-level simulation on
MPI ranks, :func:`.hooks.cluster_hook`), as :class:`~nnrtl.gen.engines.Command` objects the
engine's registration lists."""

import dataclasses
import json
from pathlib import Path
from typing import Callable

from ...boards import BOARDS
from ..engines import Command, get_board_or_usage_error
from ..errors import UsageError
from ..progress import progress
from .cost import PRECISIONS
from .hooks import DEFAULT_IMAGES, DEFAULT_LINK_GBPS, DEFAULT_PRECISION, cluster_hook, map_hook

__all__ = ["MapRequest", "ClusterRequest", "COMMANDS"]


@dataclasses.dataclass(frozen=True)
class MapRequest:
    """``nnrtl map fpdeep``: a network (a model file, or the name of one the engine has
    built in) onto a chain of ``fpgas`` boards ``board`` (a platform class).

    ``precision``, ``link_gbps`` (Gb/s) and ``image_size`` (the input side, which a
    state_dict does not hold) are ``None`` for the defaults; ``params`` are the ``--param
    k=v`` mapping options (:data:`.hooks.OPTIONS`)."""

    board: type
    fpgas: int
    model: Path | None = None
    network: str | None = None
    precision: str | None = None
    link_gbps: float | None = None
    image_size: int | None = None
    params: tuple = ()
    log: Callable | None = None


@dataclasses.dataclass(frozen=True)
class ClusterRequest:
    """``nnrtl cluster fpdeep``: simulate the chain of ``mapping`` (a ``mapping.json`` of
    ``nnrtl map``) for ``images`` samples on ``ranks`` MPI ranks; ``params`` are the
    simulator's ``--param k=v`` options (:data:`.cluster.OPTIONS`)."""

    mapping: Path
    ranks: int = 1
    images: int | None = None
    params: tuple = ()
    log: Callable | None = None


def _map_arguments(parser):
    parser.add_argument("--model", metavar="M", help="the network: a model file (PyTorch "
                        "state_dict, TorchScript or torch.export archive, ONNX)")
    parser.add_argument("--network", metavar="NAME", help="or a built-in network: alexnet, "
                        "vgg16 or vgg19 (224 x 224 images)")
    parser.add_argument("--fpgas", type=int, required=True, metavar="N",
                        help="boards in the chain")
    parser.add_argument("--board", required=True, metavar="B",
                        help=f"one of {', '.join(BOARDS)}")
    parser.add_argument("--precision", metavar="P", help=f"number format and cost model: "
                        f"{', '.join(PRECISIONS)} (default {DEFAULT_PRECISION}: the paper's, "
                        f"1 DSP a MAC at 200 MHz; fp32: this project's fp32 MAC)")
    parser.add_argument("--link-gbps", type=float, metavar="G", help=f"link bandwidth per "
                        f"link and direction in Gb/s (default {DEFAULT_LINK_GBPS:g})")
    parser.add_argument("--image-size", type=int, metavar="S", help="input image side (a "
                        "state_dict does not hold it; default: the smallest its Linear "
                        "layer accepts, 224 for the built-in networks)")
    parser.add_argument("--param", action="append", default=[], metavar="k=v",
                        help="a mapping option, pinned: fc_batch, dsp_cap, convention, "
                        "ocp_min_ic, balance, word_bits, multiplier_shifts, adder_shifts, "
                        "act_ram; repeatable")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="output directory: mapping.json and manifest.json")
    parser.add_argument("--force", action="store_true", help="replace DIR if nnrtl wrote it")


def _run_map(args):
    from ..emit import tool_versions
    from ..output import MANIFEST, staged_directory

    if (args.model is None) == (args.network is None):
        raise UsageError("give --model FILE or --network NAME (one of them)")
    if args.model is not None and not Path(args.model).is_file():
        raise UsageError(f"--model {args.model}: no such file")
    if args.fpgas < 1:
        raise UsageError(f"--fpgas must be a positive integer, not {args.fpgas}")
    if args.link_gbps is not None and not args.link_gbps > 0:
        raise UsageError(f"--link-gbps must be a positive number, not {args.link_gbps:g}")
    if args.image_size is not None and args.image_size < 1:
        raise UsageError(f"--image-size must be a positive integer, not {args.image_size}")
    platform_class = get_board_or_usage_error(args.board)
    mapping = map_hook(MapRequest(
        board=platform_class, fpgas=args.fpgas, model=args.model and Path(args.model),
        network=args.network, precision=args.precision, link_gbps=args.link_gbps,
        image_size=args.image_size, params=tuple(args.param), log=progress))
    found = mapping.as_json()
    with staged_directory(args.output, force=args.force) as staging:
        (staging / "mapping.json").write_text(json.dumps(found, indent=2, default=str) + "\n")
        manifest = {"engine": "fpdeep", "command": "map", "board": platform_class.name,
                    "fpgas": args.fpgas, "files": ["mapping.json"], "tools": tool_versions()}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    print(mapping.table())
    progress(f"wrote {Path(args.output) / 'mapping.json'}")


def _cluster_arguments(parser):
    parser.add_argument("--mapping", required=True, metavar="FILE",
                        help="DIR/mapping.json written by 'nnrtl map fpdeep'")
    parser.add_argument("--ranks", type=int, default=1, metavar="R", help="MPI ranks "
                        "(default 1; above 1 the simulator starts its own MPI job)")
    parser.add_argument("--images", type=int, metavar="K", help=f"samples to simulate "
                        f"(default {DEFAULT_IMAGES})")
    parser.add_argument("--param", action="append", default=[], metavar="k=v",
                        help="a simulator option: link_gbps, link_latency, inflight, "
                        "minibatch, timing.<field>; repeatable")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _run_cluster(args):
    if not Path(args.mapping).is_file():
        raise UsageError(f"--mapping {args.mapping}: no such file (give the mapping.json "
                         f"'nnrtl map' wrote)")
    if args.ranks < 1:
        raise UsageError(f"--ranks must be a positive integer, not {args.ranks}")
    if args.images is not None and args.images < 1:
        raise UsageError(f"--images must be a positive integer, not {args.images}")
    run = cluster_hook(ClusterRequest(mapping=Path(args.mapping), ranks=args.ranks,
                                      images=args.images, params=tuple(args.param),
                                      log=progress))
    if args.json:
        print(json.dumps(run.as_json(), indent=2))
    else:
        print(run.table())
    run.check()                     # CheckFailed (exit 1) once the result is out


#: The engine's own commands (``Engine.commands``).
COMMANDS = {
    "map": Command(help="map a network onto a chain of FPGAs; prints the per-node table, "
                   "writes DIR/mapping.json", arguments=_map_arguments, run=_run_map),
    "cluster": Command(help="cycle-level simulation of a mapped chain of FPGAs on MPI "
                       "ranks: throughput, idle stages, link bandwidth, buffer peaks",
                       arguments=_cluster_arguments, run=_run_cluster),
}

"""``nnrtl baseline``: the GPU baselines (:mod:`nnrtl.gen.baseline`)."""

import json
import os
import sys

from ..errors import UsageError

__all__ = ["add_command"]

#: Where ``persistent-rnn`` runs.
DEVICES = ("cuda", "simulator")

#: The default ``--tolerance``: fp32 sums of a few thousand products over tens of steps
#: against float64 stay orders of magnitude below it; a wrong index does not.
TOLERANCE = 1e-3


def add_command(commands):
    """Add ``baseline`` and its subcommands to the ``nnrtl`` parser's ``commands``."""
    baseline = commands.add_parser("baseline", help="GPU baselines the papers measure "
                                   "against (not engines: no RTL)")
    kinds = baseline.add_subparsers(dest="baseline", required=True, metavar="BASELINE")
    rnn = kinds.add_parser(
        "persistent-rnn", help="a persistent RNN layer (Diamos et al., ICML 2016) in "
        "numba-cuda: its forward (and backward) pass against PyTorch float64 on the same "
        "weights; one JSON line")
    rnn.add_argument("--cell", choices=["lstm", "gru"], default="lstm",
                     help="cell (default lstm)")
    for name, default in (("input-size", 8), ("hidden-size", 8), ("batch", 2),
                          ("seq-len", 4)):
        rnn.add_argument(f"--{name}", type=int, default=default, metavar="N",
                         help=f"default {default}")
    rnn.add_argument("--blocks", type=int, metavar="N",
                     help="spread the units over N blocks (default: as many units a block as "
                     "fit with the batch in the fewest passes through shared memory)")
    rnn.add_argument("--backward", action="store_true",
                     help="also the backward pass through time, against PyTorch's "
                     "autograd (every gradient)")
    rnn.add_argument("--device", choices=DEVICES, default="simulator",
                     help="cuda: the GPU (with PyTorch's cuDNN layer timed beside it); "
                     "simulator (default): numba's CUDA simulator on the CPU, one block "
                     "(hidden sizes up to a few hundred units), times meaningless")
    rnn.add_argument("--tolerance", type=float, default=TOLERANCE, metavar="E",
                     help=f"the largest absolute difference from PyTorch float64 accepted "
                     f"(fp32 against float64; default {TOLERANCE:g}); beyond it the line "
                     f"says within_tolerance false and the command exits 1")
    rnn.add_argument("--json", action="store_true", help="only the JSON line")
    rnn.set_defaults(run=cmd_persistent_rnn)


def cmd_persistent_rnn(args):
    """Run :func:`~.persistent_rnn.run`; print its result."""
    simulated = args.device == "simulator"
    if "numba.cuda" in sys.modules:
        from numba import config
        if bool(config.ENABLE_CUDASIM) != simulated:
            raise UsageError(f"numba's CUDA target was loaded for "
                             f"{'the simulator' if config.ENABLE_CUDASIM else 'a GPU'} in "
                             f"this process; run --device {args.device} in a new one")
    elif simulated:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from ..optional import require
    require("numba", "nnrtl baseline persistent-rnn")
    require("torch", "nnrtl baseline persistent-rnn")
    from .persistent_rnn import run
    try:
        result = run(args.cell, args.input_size, args.hidden_size, args.batch, args.seq_len,
                     device=args.device, backward=args.backward, blocks=args.blocks)
    except ValueError as error:
        raise UsageError(str(error)) from None
    errors = [result[key] for key in ("max_abs_error_vs_torch",
                                      "backward_max_abs_error_vs_torch") if key in result]
    result["within_tolerance"] = all(error <= args.tolerance for error in errors)
    if not args.json:
        for key, value in result.items():
            print(f"{key}: {value}", file=sys.stderr)
    print(json.dumps(result))
    if not result["within_tolerance"]:
        from ..errors import CheckFailed
        raise CheckFailed(f"the kernel differs from PyTorch float64 by {max(errors):.3g}, "
                          f"more than --tolerance {args.tolerance:g}")

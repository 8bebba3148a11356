"""Progress lines of long runs (Verilator builds, simulations, exploration, synthesis,
benchmarks): on stderr, so that stdout keeps what scripts read."""

import sys

__all__ = ["progress"]


def progress(line):
    """Print one line of progress to stderr, at once."""
    print(line, file=sys.stderr, flush=True)

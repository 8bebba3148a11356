"""Session-wide pytest hooks: the random-configuration draws' seed and counts
(``tests/gen/test_draws.py``) in the header and, since ``make test`` runs quietly (no
header), in the summary; ``tests/helpers`` (modules the tests of several directories
share) on the import path; numba's CUDA simulator for numba-cuda kernels."""

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "helpers"))
# numba-cuda kernels (the persistent RNN baseline) run in numba's CUDA simulator in the
# tests: the machines that run them have no GPU
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def _draws_line():
    from nnrtl.gen import draws

    counts = ", ".join(f"{name} {fast[0]} ({fast[1]} simulated)"
                       for name, fast in draws.FAST.items())
    slow = ", ".join(f"{name} {total} ({simulated})"
                     for name, (total, simulated) in draws.SLOW.items())
    return (f"nnrtl draws: seed {draws.seed()} (NNRTL_DRAW_SEED); make test: {counts}; "
            f"make test-slow: {slow}")


def pytest_report_header(config):
    return [_draws_line()]


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(_draws_line())

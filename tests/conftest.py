"""Session-wide pytest hooks: the random-configuration draws' seed and counts
(``tests/gen/test_draws.py``) in the header and, since ``make test`` runs quietly (no
header), in the summary; ``tests/helpers`` (modules the tests of several directories
share) on the import path."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "helpers"))


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

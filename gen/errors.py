"""The errors the command line reports: a usage error (exit code 2) and a failed check
(exit code 1); in both cases nothing is written."""

__all__ = ["UsageError", "CheckFailed"]


class UsageError(Exception):
    """Bad input from the user: an unknown board, engine or parameter, a malformed value,
    a design that does not fit the board, an output directory that exists."""


class CheckFailed(Exception):
    """It ran, and the result is wrong: an engine's RTL not bit-exact against its golden
    model, or a testbench check that failed (a cycle budget overrun), in a command that
    cannot report it as a result (``nnrtl train --backend rtl``)."""

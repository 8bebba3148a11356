"""The error the command line reports as a usage error (exit code 2, nothing written)."""

__all__ = ["UsageError"]


class UsageError(Exception):
    """Bad input from the user: an unknown board, engine or parameter, a malformed value,
    a design that does not fit the board, an output directory that exists."""

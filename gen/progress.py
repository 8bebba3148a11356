"""Progress of long runs (Verilator builds, simulations, exploration, synthesis,
benchmarks): on stderr, so that stdout keeps what scripts read.

:data:`progress` is the sink the command line hands to every ``log`` parameter: called
with a line, it prints it on stderr. :class:`Progress` shows one long run through such a
sink: on a terminal (``progress`` with stderr a tty) a bar -- or, for a run of unknown
length (a Verilator build, Yosys), the time so far -- redrawn in place at most every
:data:`TTY_INTERVAL` seconds and ended by a line that stays; otherwise (a CI log, a pipe,
or any other ``log`` callable) a plain line at most every :data:`PLAIN_INTERVAL` seconds
(:data:`QUIET_INTERVAL` while nothing advances) and, if it printed any, a last line when
the run ends. Runs inside runs (a benchmark's builds) share the terminal's last line::

    with Progress("explore: checking", total=len(shapes), unit="shapes", log=log) as bar:
        for shape in shapes:
            ...
            bar.advance()
"""

import contextlib
import os
import sys
import threading
import time

__all__ = ["Progress", "Terminal", "progress", "TTY_INTERVAL", "PLAIN_INTERVAL",
           "QUIET_INTERVAL"]

#: Seconds between two redraws of a bar on a terminal (at most 10 a second).
TTY_INTERVAL = 0.1
#: Seconds between two plain progress lines of a run that advances.
PLAIN_INTERVAL = 5.0
#: Seconds between two plain lines of a run that does not advance (a build: elapsed time).
QUIET_INTERVAL = 30.0
#: Characters of a bar between its brackets.
BAR_WIDTH = 20
#: Frames of the spinner of a run of unknown length.
SPINNER = "|/-\\"


class Terminal:
    """The progress sink on stderr (the one instance is :data:`progress`).

    Called with a line, it prints the line; :class:`Progress` bars attached to it are
    drawn together on the terminal's last line, cleared before a line is printed and
    drawn again after it. Thread-safe: each bar redraws itself from a thread of its own,
    so that the time so far moves while the run does not advance."""

    def __init__(self):
        self._lock = threading.RLock()
        self._bars = []                 # attached Progress, outermost first
        self._shown = False             # stderr's last line holds the bars
        self._drawn = 0.0               # time.monotonic() of the last drawing

    def isatty(self):
        """Whether stderr (as it is now) is a terminal: bars are drawn only then."""
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):       # replaced by an object without it, closed
            return False

    def __call__(self, line):
        """Print ``line`` on stderr, at once (above the bars, if any)."""
        with self._lock:
            self._clear()
            sys.stderr.write(f"{line}\n")
            self._draw()

    @contextlib.contextmanager
    def paused(self):
        """Clear the bars while the body writes elsewhere (stdout on the same terminal),
        then draw them again."""
        with self._lock:
            self._clear()
            try:
                yield
            finally:
                sys.stdout.flush()
                self._draw()

    def _attach(self, bar):
        with self._lock:
            self._bars.append(bar)
            self._draw()

    def _detach(self, bar, line):
        with self._lock:
            self._bars.remove(bar)
            self(line)

    def refresh(self):
        """Draw the attached bars again (their text changed), unless they were drawn less
        than :data:`TTY_INTERVAL` seconds ago."""
        with self._lock:
            if time.monotonic() - self._drawn >= TTY_INTERVAL:
                self._draw()

    def _clear(self):
        if self._shown:
            sys.stderr.write("\r\033[K")
            self._shown = False

    def _draw(self):
        if self._bars:
            try:
                width = os.get_terminal_size(sys.stderr.fileno()).columns or 80
            except (AttributeError, ValueError, OSError):
                width = 80                  # not a real terminal, or of unknown size
            text = " | ".join(bar.text() for bar in self._bars)[:max(width - 1, 10)]
            sys.stderr.write(f"\r{text}\033[K")
            self._shown = True
            self._drawn = time.monotonic()
        sys.stderr.flush()


#: The sink of the command line's progress: ``progress("line")`` prints a line on stderr.
progress = Terminal()


def _seconds(seconds):
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


class Progress:
    """A long run's progress through ``log`` (see the module); a context manager.

    Parameters
    ----------
    label : str
        What runs, e.g. ``"Verilator build of nnrtl_sbe"``; starts every line.
    total : int, optional
        Units of work the run has; ``None`` for a run of unknown length, whose display
        is the time so far (and the units done, if it advances).
    unit : str
        Name of the units in the lines (``"configurations"``).
    log : callable, optional
        The sink: :data:`progress` (a bar when stderr is a terminal), any other callable
        taking a line (plain lines), or ``None`` (nothing shown).

    Attributes
    ----------
    done : int
        Units done so far.
    status : str
        A short note shown after the counts (``"best so far 1,234 cycles"``).
    """

    def __init__(self, label, total=None, *, unit="", log=None):
        if total is not None and (not isinstance(total, int) or total < 0):
            raise TypeError(f"total must be None or a non-negative integer, not {total!r}")
        self.label, self.total, self.unit, self._log = label, total, unit, log
        self.done, self.status = 0, ""
        self._terminal = log if isinstance(log, Terminal) and log.isatty() else None
        self._started = self._printed = None
        self._lines = 0                 # plain lines printed
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        self._started = self._printed = time.monotonic()
        if self._terminal is not None:
            self._terminal._attach(self)
        if self._log is not None:
            self._thread = threading.Thread(target=self._tick, daemon=True,
                                            name=f"progress: {self.label}")
            self._thread.start()
        return self

    def __exit__(self, kind, value, traceback):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        line = self._final(failed=kind is not None)
        if self._terminal is not None:
            self._terminal._detach(self, line)
        elif self._log is not None and self._lines:
            self._log(line)
        return False

    def elapsed(self):
        """Seconds since the run started."""
        return time.monotonic() - self._started

    def advance(self, count=1, *, status=None):
        """Count ``count`` more units done (and set :attr:`status` if given)."""
        self.done += count
        if status is not None:
            self.status = status
        if self._terminal is None and self._log is not None:
            self._plain(PLAIN_INTERVAL)         # on a terminal the thread redraws

    def note(self, line):
        """Print ``line`` through the sink now (above the bar on a terminal)."""
        if self._log is not None:
            self._log(line)

    def _plain(self, interval):
        """A plain line if ``interval`` seconds passed since the last one."""
        with self._lock:
            now = time.monotonic()
            if now - self._printed < interval:
                return
            self._printed = now
            self._lines += 1
            line = self._line()
        self._log(line)

    def _tick(self):
        """The thread: redraws on a terminal; otherwise a line when nothing advanced."""
        interval = TTY_INTERVAL if self._terminal is not None else min(QUIET_INTERVAL, 1.0)
        while not self._stop.wait(interval):
            if self._terminal is not None:
                self._terminal.refresh()
            else:
                self._plain(QUIET_INTERVAL)

    def _counts(self):
        unit = f" {self.unit}" if self.unit else ""
        if self.total is None:
            return f"{self.done:,}{unit}" if self.done else ""
        return f"{self.done:,} of {self.total:,}{unit}"

    def _line(self):
        """A plain progress line."""
        parts = [self._counts()]
        if self.total:
            parts[0] += f" ({self.done / self.total:.0%})"
        parts += [_seconds(self.elapsed()) + " so far", self.status]
        return f"{self.label}: {', '.join(p for p in parts if p)}"

    def _final(self, failed):
        counts, status = self._counts(), self.status
        end = (f"stopped after {_seconds(self.elapsed())}" if failed
               else f"done in {_seconds(self.elapsed())}")
        return f"{self.label}: {', '.join(p for p in (counts, status, end) if p)}"

    def text(self):
        """The run as drawn on a terminal: a bar, or the spinner and the time so far."""
        seconds = self.elapsed()
        if self.total is None:
            parts = [f"{self.label} {SPINNER[int(seconds / TTY_INTERVAL) % len(SPINNER)]}",
                     self._counts()]
        else:
            filled = BAR_WIDTH * self.done // self.total if self.total else BAR_WIDTH
            share = self.done / self.total if self.total else 1.0
            parts = [f"{self.label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}]",
                     f"{self.done:,}/{self.total:,} {share:.0%}"]
        parts += [_seconds(seconds), self.status]
        return " ".join(p for p in parts if p)

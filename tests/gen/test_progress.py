"""Progress of long runs (:mod:`nnrtl.gen.progress`): plain lines when stderr is not a
terminal, a bar redrawn in place when it is (a fake terminal here), never on stdout."""

import io
import re
import sys
import time

import pytest

from nnrtl.gen import progress as module
from nnrtl.gen.progress import Progress, Terminal, progress


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def fake_tty(monkeypatch):
    """Make stderr a :class:`FakeTerminal` (in the test's body: pytest's capture sets
    ``sys.stderr`` again after the fixtures are set up)."""
    stream = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


def test_plain_lines_at_most_every_interval(capsys, monkeypatch):
    """Not a terminal: a line per advance when the interval is 0, none when it is long,
    a last line only after a line was printed; nothing on stdout."""
    monkeypatch.setattr(module, "PLAIN_INTERVAL", 0)
    with Progress("checking", total=4, unit="designs", log=progress) as bar:
        for _ in range(3):
            bar.advance()
        bar.advance(status="best 12 cycles")
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert [re.sub(r"\d+\.\d s", "T", line) for line in lines] == [
        "checking: 1 of 4 designs (25%), T so far",
        "checking: 2 of 4 designs (50%), T so far",
        "checking: 3 of 4 designs (75%), T so far",
        "checking: 4 of 4 designs (100%), T so far, best 12 cycles",
        "checking: 4 of 4 designs, best 12 cycles, done in T"]
    assert "\r" not in err and "\033" not in err

    monkeypatch.setattr(module, "PLAIN_INTERVAL", 3600)
    with Progress("quick", total=1000, log=progress) as bar:
        for _ in range(1000):
            bar.advance()
    assert capsys.readouterr() == ("", "")        # a short run says nothing


def test_plain_lines_of_a_run_that_does_not_advance(monkeypatch):
    """A build (no total, no advance): the time so far every QUIET_INTERVAL, through any
    ``log`` callable; a run that raises ends with 'stopped after'."""
    monkeypatch.setattr(module, "QUIET_INTERVAL", 0.05)
    lines = []
    with pytest.raises(RuntimeError, match="the build failed"):
        with Progress("Verilator build of top", log=lines.append):
            time.sleep(0.5)
            raise RuntimeError("the build failed")
    assert len(lines) >= 3
    assert all(re.fullmatch(r"Verilator build of top: \d+\.\d s so far", line)
               for line in lines[:-1])
    assert re.fullmatch(r"Verilator build of top: stopped after \d+\.\d s", lines[-1])


def test_no_log_no_output(capsys, monkeypatch):
    tty = fake_tty(monkeypatch)
    with Progress("silent", total=3) as bar:
        bar.advance(3)
    assert capsys.readouterr() == ("", "") and tty.getvalue() == ""


def test_a_bar_on_a_terminal(capsys, monkeypatch):
    """Drawn in place (carriage return, erase to the end of the line), the lines printed
    meanwhile above it, the last state kept as a line ending with a newline."""
    tty = fake_tty(monkeypatch)
    with Progress("explore", total=10, unit="shapes", log=progress) as bar:
        bar.advance(5)
        progress("a line in between")
        time.sleep(3 * module.TTY_INTERVAL)          # the thread redraws
        bar.advance(5)
    text = tty.getvalue()
    assert capsys.readouterr().out == ""
    assert text.startswith("\rexplore [" + "." * module.BAR_WIDTH + "] 0/10 0% ")
    half = "#" * (module.BAR_WIDTH // 2) + "." * (module.BAR_WIDTH // 2)
    assert f"\rexplore [{half}] 5/10 50% " in text
    assert "\r\033[Ka line in between\n\rexplore [" in text
    assert re.search(r"\r\033\[Kexplore: 10 of 10 shapes, done in \d+\.\d s\n\Z", text)
    assert text.endswith("\n")
    # Redrawn at most once a TTY_INTERVAL by the thread, plus the first drawing and the
    # one after the line in between.
    assert text.count("\rexplore [") <= 3 + 0.5 / module.TTY_INTERVAL


def test_a_run_of_unknown_length_on_a_terminal(monkeypatch):
    """A spinner and the time so far; runs inside runs share the last line."""
    tty = fake_tty(monkeypatch)
    with Progress("bench", total=2, unit="benchmarks", log=progress) as outer:
        with Progress("build", log=progress):
            time.sleep(3 * module.TTY_INTERVAL)
        outer.advance(2)
    text = tty.getvalue()
    drawn = re.findall(r"\r([^\r\n]*)\033\[K", text)
    assert any(re.fullmatch(r"bench \[\.+\] 0/2 0% \d+\.\d s \| build "
                            r"[|/\\-] \d+\.\d s", line) for line in drawn), drawn
    assert len({line[-12:] for line in drawn if "build" in line}) > 1      # it moves
    lines = text.replace("\r\033[K", "\n").split("\n")
    assert any(re.fullmatch(r"build: done in \d+\.\d s", line)
               for line in lines)
    assert re.search(r"bench: 2 of 2 benchmarks, done in \d+\.\d s\n\Z", text)


def test_bars_are_cut_to_the_terminal(monkeypatch):
    tty = fake_tty(monkeypatch)
    with Progress("x" * 500, total=1, log=progress):
        pass
    first = tty.getvalue().split("\033[K")[0]
    assert first == "\r" + "x" * 79            # 80 columns when the width is unknown


def test_paused_clears_the_bar_while_stdout_is_written(capsys, monkeypatch):
    tty = fake_tty(monkeypatch)
    with Progress("bench", total=1, log=progress):
        with progress.paused():
            assert tty.getvalue().endswith("\r\033[K")
            print("wrote a table")
        assert re.search(r"\r\033\[K\rbench \[", tty.getvalue())
    assert capsys.readouterr().out == "wrote a table\n"


def test_a_terminal_sink_draws_only_on_a_tty(capsys):
    """Under capture (not a terminal) the stderr sink prints lines, as any callable."""
    sink = Terminal()
    assert not sink.isatty()
    sink("a line")
    assert capsys.readouterr() == ("", "a line\n")


@pytest.mark.parametrize("total", [-1, 2.5, "3"])
def test_total_must_be_a_count(total):
    with pytest.raises(TypeError, match=rf"^total must be None or a non-negative integer, "
                                        rf"not {re.escape(repr(total))}$"):
        Progress("x", total=total)

"""The README stays a short front door whose every command runs, and the documentation
covers every command and engine."""

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: README commands cheap enough to run in ``make test``; the rest run in ``test-slow``.
FAST = ("boards", "engines", "explore", "map")


def _readme_commands():
    """Every command line of the README's code blocks, in order."""
    text = README.read_text()
    blocks = re.findall(r"^```\n(.*?)^```$", text, re.M | re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def _parse(argv):
    from nnrtl.gen.cli import build_parser
    try:
        return build_parser().parse_args(argv)
    except SystemExit as error:
        raise AssertionError(f"nnrtl {shlex.join(argv)} does not parse (exit {error.code})")


def test_readme_is_a_front_door():
    assert len(README.read_text().splitlines()) <= 150


def test_every_readme_command_parses_and_names_what_exists():
    from nnrtl.boards import board_names
    from nnrtl.gen.engines import engines
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))
    commands = _readme_commands()
    assert commands
    for line in commands:
        if line.startswith("make "):
            assert line.split()[1] in targets, line
        elif line.startswith("python -c "):
            compile(shlex.split(line)[2], line, "exec")
        else:
            assert line.startswith("nnrtl "), line
            args = _parse(shlex.split(line)[1:])
            if getattr(args, "engine", None):
                assert args.engine in list(engines()), line
            if getattr(args, "board", None):
                assert args.board in board_names(), line


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#]+)\)", README.read_text()):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def _run_readme(lines, tmp_path):
    env = {**os.environ, "NNRTL_SUMMARY": "never"}
    bin_dir = pathlib.Path(sys.executable).parent
    for line in lines:
        argv = shlex.split(line)
        if argv[0] == "nnrtl":
            argv = [str(bin_dir / "nnrtl"), *argv[1:]]
        elif argv[0] == "python":
            argv[0] = sys.executable
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"


def test_the_cheap_readme_commands_run(tmp_path):
    lines = [line for line in _readme_commands()
             if line.startswith("nnrtl ") and line.split()[1] in FAST]
    assert len(lines) >= 4
    _run_readme(lines, tmp_path)


@pytest.mark.slow
def test_every_readme_command_runs(tmp_path):
    """Every README command but ``make``, in order, in one directory (later commands use
    earlier ones' files)."""
    _run_readme([line for line in _readme_commands() if not line.startswith("make ")],
                tmp_path)


def test_the_documentation_covers_every_command_and_engine():
    from nnrtl.gen.cli import build_parser
    from nnrtl.gen.engines import engines
    pages = "\n".join(path.read_text() for path in DOCS.rglob("*.md"))
    for command in build_parser()._subparsers._group_actions[0].choices:
        assert re.search(rf"^nnrtl {command}\b", pages, re.M), command
    for engine in list(engines()):
        page = DOCS / "engines" / engine / "index.md"
        assert page.exists(), engine
        text = page.read_text()
        for section in ("## Where it lives", "## Parameters and presets", "## Results"):
            assert section in text, (engine, section)

"""``nnrtl draws``: an engine's random configurations from the command line, a summary line
with the count and seed, exit 1 on a failing draw with the command that reproduces it."""

import json

import pytest

from nnrtl.gen import draws
from nnrtl.gen.cli import main
from nnrtl.gen.engines import get_engine


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_draws_lint_and_summarise(capsys):
    code, out, err = run(capsys, "draws", "demo", "--count", "3", "--seed", "4")
    assert code == 0
    assert out.splitlines()[:3] == [f"draw {n}: passed" + line.split("passed", 1)[1]
                                    for n, line in enumerate(out.splitlines()[:3])]
    assert out.splitlines()[3].startswith("demo: 3 draws (seed 4), 3 passed, 0 failed, "
                                          "0 simulated, ")
    first = draws.draws(get_engine("demo"), 1, 4)[0]
    assert f"draw 0 of demo (seed 4): {first.command}" in err


def test_a_failing_draw_exits_1_with_its_command(capsys, monkeypatch):
    def failing(engine, draw, *, simulate_it=False):
        return {"passed": False, "error": "CheckFailed: not bit-exact under none: 3",
                "command": draw.command, "reproduce": draw.reproduce, "index": draw.index}

    monkeypatch.setattr(draws, "run", failing)
    code, out, _ = run(capsys, "draws", "demo", "--only", "2", "--json")
    assert code == 1
    outcome = json.loads(out)
    assert outcome["reproduce"] == "nnrtl draws demo --seed 1 --only 2"
    assert outcome["command"].startswith("nnrtl sim demo --board zc706 --param lanes=")


@pytest.mark.parametrize("argv, message", [
    (["--count", "0"], r"--count must be an integer of at least 1, not 0"),
    (["--simulate", "-1"], r"--simulate must be an integer of at least 0, not -1"),
    (["--only", "-2"], r"--only must be a draw index of at least 0, not -2"),
])
def test_bad_counts_exit_2(capsys, argv, message):
    code, _, err = run(capsys, "draws", "demo", *argv)
    assert code == 2 and f"nnrtl: error: {message}" in err

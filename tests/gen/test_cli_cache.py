"""``nnrtl cache`` (show and clean the Verilator build cache) and ``nnrtl --version``."""

import json
import os
import re
import time
from importlib import metadata

import pytest

from nnrtl.gen.cli import main
from nnrtl.sim import cache


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fake_cache(tmp_path, monkeypatch):
    """A cache with three builds of 1, 2 and 3 MiB, used in that order."""
    monkeypatch.setenv("NNRTL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NNRTL_CACHE_MAX_SIZE", raising=False)
    now = time.time()
    for index, name in enumerate(("old", "mid", "new")):
        directory = tmp_path / "verilator" / f"{name}-{index:016x}"
        directory.mkdir(parents=True)
        size = (index + 1) << 20
        (directory / name).write_bytes(b"x" * size)
        marker = directory / cache.MARKER
        marker.write_text(json.dumps({"seconds": 1.0, "bytes": size}))
        os.utime(marker, (now - 100 + index, now - 100 + index))
    return tmp_path


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"nnrtl {metadata.version('nnrtl')}\n"


def test_cache_show(fake_cache, capsys):
    code, out, _ = run(capsys, "cache")
    assert code == 0
    assert re.fullmatch(
        re.escape(f"location:  {fake_cache} ($NNRTL_CACHE_DIR)\n"
                  f"builds:    3, 6.0 MiB of at most 4.0 GiB (the default; "
                  f"$NNRTL_CACHE_MAX_SIZE sets it)\n"
                  f"kept runs: 0, 0 B\n"
                  f"other:     0 B\n")
        + rf"  new-{2:016x}  3\.0 MiB, used \d{{4}}-\d\d-\d\d \d\d:\d\d\n"
        + rf"  mid-{1:016x}  2\.0 MiB, used .*\n"
        + rf"  old-{0:016x}  1\.0 MiB, used .*\n", out)
    code, out, _ = run(capsys, "cache", "show", "--json")
    assert code == 0
    shown = json.loads(out)
    assert [b.pop("last_use") for b in shown["builds"]] == sorted(
        (e.last_use for e in cache.entries(fake_cache)), reverse=True)
    assert shown == {"location": str(fake_cache), "entries": 3, "bytes": 6 << 20,
                     "max_bytes": 4 << 30, "runs": 0, "runs_bytes": 0, "other_bytes": 0,
                     "builds": [{"name": f"{name}-{index:016x}", "bytes": (index + 1) << 20,
                                 "complete": True}
                                for index, name in ((2, "new"), (1, "mid"), (0, "old"))]}


def test_cache_show_lists_the_most_recent_builds(fake_cache, capsys, monkeypatch):
    monkeypatch.setattr("nnrtl.gen.cli.SHOWN_BUILDS", 2)
    code, out, _ = run(capsys, "cache")
    assert code == 0
    assert out.splitlines()[-3:-1] == [line for line in out.splitlines()
                                       if line.startswith(("  new-", "  mid-"))]
    assert out.splitlines()[-1] == "  ... and 1 less recently used (--json lists all)"


def test_cache_clean(fake_cache, capsys):
    code, out, _ = run(capsys, "cache", "clean")
    assert code == 0
    assert out == f"removed 3 from {fake_cache}, 6.0 MiB\n"
    assert not list((fake_cache / "verilator").iterdir())


def test_cache_clean_to_a_size_removes_the_least_recently_used(fake_cache, capsys):
    code, out, _ = run(capsys, "cache", "clean", "--max-size", "3.5M", "--json")
    assert code == 0
    assert json.loads(out) == {"removed": 2, "bytes": 3 << 20, "in_use": None}
    assert [e.directory.name for e in cache.entries(fake_cache)] == [f"new-{2:016x}"]


@pytest.mark.parametrize("argv, message", [
    (["cache", "clean", "--max-size", "big"], r"--max-size: a cache size must be a number "
                                               r"of bytes .*, not 'big'"),
    (["cache", "--max-size", "1G"], r"--max-size goes with 'nnrtl cache clean'"),
])
def test_cache_bad_input_exits_2(fake_cache, capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert re.fullmatch(rf"nnrtl: error: {message}\n", err)
    assert len(cache.entries(fake_cache)) == 3


@pytest.mark.parametrize("argv", [["cache"], ["sim", "demo", "--board", "zc706"]])
def test_a_bad_limit_in_the_environment_exits_2_before_anything_runs(fake_cache, capsys,
                                                                     monkeypatch, argv):
    monkeypatch.setenv("NNRTL_CACHE_MAX_SIZE", "lots")
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err == ("nnrtl: error: NNRTL_CACHE_MAX_SIZE: a cache size must be a number of "
                   "bytes with an optional K, M, G or T suffix (e.g. 4G, 500M), not 'lots'\n")


def test_a_bad_optimisation_level_exits_2_before_anything_runs(fake_cache, capsys,
                                                                monkeypatch):
    monkeypatch.setenv("NNRTL_VERILATOR_OPT", "-O9")
    code, out, err = run(capsys, "sim", "demo", "--board", "zc706")
    assert code == 2 and out == ""
    assert err == ("nnrtl: error: NNRTL_VERILATOR_OPT='-O9' is not a C++ optimisation "
                   "level; use one of -O0, -O1, -O2, -O3, -Os\n")

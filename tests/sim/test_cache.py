"""The build cache: sizes, last use, least-recently-used eviction, locks, cleaning.

Entries here are fake (a directory of the right name, a marker, a file of a given size);
tests/sim/test_runner.py builds real ones.
"""

import contextlib
import fcntl
import json
import multiprocessing
import os
import threading
import time

import pytest

from nnrtl.sim import cache


def _entry(root, name, size, last_use, *, complete=True):
    directory = root / "verilator" / f"{name}-{'0' * 15}{len(name) % 10}"
    directory.mkdir(parents=True)
    (directory / "top").write_bytes(b"x" * size)
    if complete:
        marker = directory / cache.MARKER
        marker.write_text(json.dumps({"seconds": 1.0, "bytes": size}))
        os.utime(marker, (last_use, last_use))
    else:
        os.utime(directory, (last_use, last_use))
    return directory


@pytest.mark.parametrize("text, size", [("0", 0), ("4096", 4096), ("4G", 4 << 30),
                                        ("500M", 500 << 20), ("1.5GiB", 3 << 29),
                                        ("2kb", 2048), (" 3 T ", 3 << 40)])
def test_parse_size(text, size):
    assert cache.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "-1G", "4X", "four"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError, match=r"^a cache size must be a number of bytes with an "
                                         r"optional K, M, G or T suffix \(e\.g\. 4G, 500M\), "
                                         rf"not {text!r}$"):
        cache.parse_size(text)


def test_max_size_from_environment(monkeypatch):
    monkeypatch.delenv("NNRTL_CACHE_MAX_SIZE", raising=False)
    assert cache.max_size() == cache.parse_size(cache.DEFAULT_MAX_SIZE) == 4 << 30
    monkeypatch.setenv("NNRTL_CACHE_MAX_SIZE", "300M")
    assert cache.max_size() == 300 << 20
    monkeypatch.setenv("NNRTL_CACHE_MAX_SIZE", "lots")
    with pytest.raises(ValueError, match=r"^NNRTL_CACHE_MAX_SIZE: a cache size must be"):
        cache.max_size()


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("NNRTL_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / ".cache" / "nnrtl"
    monkeypatch.setenv("NNRTL_CACHE_DIR", str(tmp_path / "c"))
    assert cache.cache_dir() == tmp_path / "c"


def test_entries_least_recently_used_first(tmp_path):
    now = time.time()
    b = _entry(tmp_path, "b", 300, now - 10)
    a = _entry(tmp_path, "a", 100, now - 100)
    c = _entry(tmp_path, "c", 50, now - 50, complete=False)
    (tmp_path / "verilator" / "not-an-entry").mkdir()
    found = cache.entries(tmp_path)
    assert [e.directory for e in found] == [a, c, b]
    assert [e.size for e in found] == [100, 50, 300]
    assert [e.complete for e in found] == [True, False, True]


def test_evict_least_recently_used_down_to_the_limit(tmp_path):
    now = time.time()
    old = _entry(tmp_path, "old", 100, now - 300)
    mid = _entry(tmp_path, "mid", 100, now - 200)
    new = _entry(tmp_path, "new", 100, now - 100)
    assert cache.evict(300, root=tmp_path) == []
    removed = cache.evict(150, root=tmp_path)
    assert [e.directory for e in removed] == [old, mid]
    assert not old.exists() and not mid.exists() and new.exists()
    assert not (tmp_path / "verilator" / f"{old.name}.lock").exists()


def test_a_hit_refreshes_the_use_time(tmp_path):
    now = time.time()
    first = _entry(tmp_path, "first", 100, now - 300)
    second = _entry(tmp_path, "second", 100, now - 200)
    cache.touch(first)
    cache.evict(100, root=tmp_path)
    assert first.exists() and not second.exists()


def test_evict_keeps_the_entry_just_built(tmp_path):
    now = time.time()
    built = _entry(tmp_path, "built", 500, now - 300)
    other = _entry(tmp_path, "other", 100, now - 100)
    removed = cache.evict(0, keep=[built], root=tmp_path)
    assert [e.directory for e in removed] == [other] and built.exists()


def _hold(directory, build, ready, release):
    with cache.use(directory), \
            (cache.building(directory) if build else contextlib.nullcontext()):
        ready.set()
        release.wait(60)


@pytest.mark.parametrize("build", [False, True], ids=["in use", "being built"])
def test_evict_and_clean_skip_an_entry_in_use(tmp_path, build):
    """An entry another process uses or builds is left alone; neither eviction nor
    cleaning waits for it."""
    now = time.time()
    busy = _entry(tmp_path, "busy", 500, now - 300, complete=not build)
    idle = _entry(tmp_path, "idle", 100, now - 100)
    context = multiprocessing.get_context("spawn")
    ready, release = context.Event(), context.Event()
    holder = context.Process(target=_hold, args=(busy, build, ready, release))
    holder.start()
    try:
        assert ready.wait(60)
        start = time.monotonic()
        assert [e.directory for e in cache.evict(0, root=tmp_path)] == [idle]
        assert busy.exists()
        assert cache.clean(tmp_path) == {"removed": 0, "bytes": 0, "in_use": 1}
        assert time.monotonic() - start < 5
    finally:
        release.set()
        holder.join(60)
    assert cache.clean(tmp_path) == {"removed": 1, "bytes": 500, "in_use": 0}
    assert not busy.exists()
    assert sorted(p.name for p in (tmp_path / "verilator").iterdir()) == []


def _build(directory, log):
    # Written synchronously (an appended file, not a queue whose feeder thread may
    # deliver after the lock is released), so the log's order is the lock's order.
    with cache.use(directory), cache.building(directory):
        with open(log, "a") as handle:
            handle.write("start\n")
        time.sleep(0.5)
        with open(log, "a") as handle:
            handle.write("end\n")


def test_one_builder_at_a_time_and_users_do_not_block_builders(tmp_path):
    """Two builders of one entry take turns; a process using the entry (a long
    simulation) does not hold a builder up."""
    directory = tmp_path / "verilator" / f"top-{'0' * 16}"
    log = tmp_path / "order.log"
    context = multiprocessing.get_context("spawn")
    with cache.use(directory):                       # a simulation runs all along
        builders = [context.Process(target=_build, args=(directory, log))
                    for _ in range(2)]
        for builder in builders:
            builder.start()
        for builder in builders:
            builder.join(60)
            assert builder.exitcode == 0
    assert log.read_text().split() == ["start", "end", "start", "end"]


def test_lock_survives_its_file_being_removed(tmp_path):
    """A process that waited on a lock file which eviction then removed locks the new
    one, so that a later eviction sees the entry in use."""
    directory = _entry(tmp_path, "entry", 10, time.time())
    lock_file = tmp_path / "verilator" / f"{directory.name}.lock"
    evicting = cache._open_locked(lock_file, fcntl.LOCK_EX)
    held = []

    def wait_for_it():
        with cache.use(directory):                  # then no eviction gets it
            held.append(cache._open_locked(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB))

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    time.sleep(0.3)               # the waiter has opened the old file and waits on it
    lock_file.unlink()
    evicting.close()
    waiter.join(10)
    assert held == [None]


def test_finish_prunes_what_a_run_does_not_need(tmp_path):
    directory = tmp_path / "verilator" / "top-0123456789abcdef"
    directory.mkdir(parents=True)
    for name in ("Vtop__pch.h.fast.gch", "Vtop__pch.h.slow.gch", "a.o", "Vtop__ALL.a",
                 "a.d"):
        (directory / name).write_bytes(b"y" * 1000)
    (directory / "top").write_bytes(b"x" * 123)
    (directory / "Vtop.cpp").write_bytes(b"x" * 7)
    cache.finish(directory, 2.5)
    assert sorted(p.name for p in directory.iterdir()) == ["Vtop.cpp", cache.MARKER, "top"]
    assert json.loads((directory / cache.MARKER).read_text()) == {"seconds": 2.5,
                                                                  "bytes": 130}
    assert cache.entries(tmp_path)[0].size == 130


def test_a_hit_prunes_an_entry_made_before_pruning(tmp_path):
    directory = tmp_path / "verilator" / "top-0123456789abcdef"
    directory.mkdir(parents=True)
    (directory / "Vtop__pch.h.fast.gch").write_bytes(b"y" * 1000)
    (directory / "top").write_bytes(b"x" * 10)
    marker = directory / cache.MARKER
    marker.write_text(json.dumps({"seconds": 3.0}))
    os.utime(marker, (1, 1))
    cache.touch(directory)
    assert sorted(p.name for p in directory.iterdir()) == [cache.MARKER, "top"]
    assert json.loads(marker.read_text()) == {"seconds": 3.0, "bytes": 10}
    assert marker.stat().st_mtime > time.time() - 60


def test_clean_and_usage(tmp_path, monkeypatch):
    monkeypatch.setenv("NNRTL_CACHE_MAX_SIZE", "1M")
    now = time.time()
    _entry(tmp_path, "a", 100, now)
    _entry(tmp_path, "b", 200, now, complete=False)
    run = tmp_path / "runs" / "inc-abc_1234"
    run.mkdir(parents=True)
    (run / "dump.vcd").write_bytes(b"z" * 40)
    (tmp_path / "runs" / "my notes").mkdir()       # not the runner's: left alone
    (tmp_path / "results" / "study").mkdir(parents=True)
    (tmp_path / "results" / "study" / cache.RESULTS_MARKER).touch()
    (tmp_path / "results" / "study" / "x.json").write_bytes(b"w" * 8)
    (tmp_path / "results" / "mine").mkdir()                 # no marker: left alone
    (tmp_path / "results" / "mine" / "y.txt").write_text("not the cache's")
    (tmp_path / "verilator" / "gone-0123456789abcdef.lock").touch()
    (tmp_path / "mine.txt").write_text("not the cache's")
    assert cache.usage(tmp_path) == {
        "location": str(tmp_path), "entries": 2, "bytes": 300, "max_bytes": 1 << 20,
        "runs": 1, "runs_bytes": 40, "other_bytes": 8,
        "builds": [{"name": e.directory.name, "bytes": e.size, "last_use": e.last_use,
                    "complete": e.complete} for e in reversed(cache.entries(tmp_path))]}
    assert cache.clean(tmp_path) == {"removed": 4, "bytes": 348, "in_use": 0}
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "mine", "mine.txt", "my notes", "results", "runs", "verilator", "y.txt"]
    assert cache.usage(tmp_path)["entries"] == 0


def test_clean_skips_a_running_simulation(tmp_path):
    run = tmp_path / "runs" / "inc-q7x_02ab"
    run.mkdir(parents=True)
    with cache.lock_run(run):
        assert cache.clean(tmp_path) == {"removed": 0, "bytes": 0, "in_use": 1}
    assert cache.clean(tmp_path) == {"removed": 1, "bytes": 0, "in_use": 0}


def test_format_size():
    assert cache.format_size(512) == "512 B"
    assert cache.format_size(148 << 20) == "148.0 MiB"
    assert cache.format_size(5 << 30) == "5.0 GiB"

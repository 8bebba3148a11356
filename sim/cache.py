"""The build cache: Verilator builds kept for reuse, bounded in size.

The cache lives in ``$NNRTL_CACHE_DIR`` (default ``~/.cache/nnrtl``, for ``make`` and the
command line alike) and holds:

``verilator/<top>-<key>/``
    One Verilator build (:func:`nnrtl.sim.runner.build`). Its marker file
    ``nnrtl-build-ok`` says the build is complete and holds its size; the marker's
    modification time is the entry's last use (set when it is built and at every reuse).
    Only what a run needs is kept: the precompiled headers, object files, archives and
    make dependency files are deleted once the binary is linked.
``verilator/<top>-<key>.lock``
    The entry's use lock (``flock``), held shared by every process that looks the entry
    up, builds it or runs its binary (:func:`use`). Eviction and :func:`clean` take it
    exclusively without waiting, so they never remove an entry that another process is
    building or using.
``verilator/<top>-<key>.building``
    The entry's build lock, held exclusively by the one process building it
    (:func:`building`); others wait on it, then reuse the build.
``runs/<name>-*/``
    Run directories that were kept (waves, a failed run), each locked (shared) while its
    simulation runs.
``results/<name>/``
    Results a benchmark or study keeps between runs (e.g. Yosys counts that take
    minutes each).

The Verilator entries are bounded: after each build, the least recently used entries are
removed until the entries together take at most ``$NNRTL_CACHE_MAX_SIZE`` (default
:data:`DEFAULT_MAX_SIZE`); the entry just built is never removed. Run directories are
not counted and not evicted (they hold what a user asked to keep); :func:`clean` removes
them.
"""

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
from pathlib import Path

__all__ = ["results_dir", "RESULTS_MARKER", "DEFAULT_MAX_SIZE", "MARKER", "Entry", "cache_dir", "max_size", "parse_size",
           "format_size", "use", "building", "lock_run", "finish", "touch", "entries",
           "evict", "clean", "usage"]

#: The bound on the Verilator entries when ``$NNRTL_CACHE_MAX_SIZE`` is not set.
DEFAULT_MAX_SIZE = "4G"

#: The file that marks a complete build.
MARKER = "nnrtl-build-ok"

#: Build products a run does not need: the precompiled headers (two of 70-90 MB for an
#: engine), object files, archives and make's dependency files. The binary is linked.
_PRUNED = ("*.gch", "*.o", "*.a", "*.d")

#: An entry's directory name: the top module, a dash, 16 hex digits of the key.
_ENTRY_NAME = re.compile(r".+-[0-9a-f]{16}")

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def cache_dir():
    """The root of the build cache: ``$NNRTL_CACHE_DIR`` or ``~/.cache/nnrtl``."""
    root = os.environ.get("NNRTL_CACHE_DIR")
    if root:
        return Path(root).expanduser().resolve()
    return Path.home() / ".cache" / "nnrtl"


def parse_size(text):
    """Bytes from a size such as ``"4G"``, ``"500M"``, ``"1.5GiB"`` or ``"0"``.

    K, M, G and T are powers of 1024; a trailing ``B`` or ``iB`` is allowed.

    Raises
    ------
    ValueError
        If ``text`` is not such a size.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if match is None:
        raise ValueError(f"a cache size must be a number of bytes with an optional K, M, "
                         f"G or T suffix (e.g. 4G, 500M), not {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def format_size(size):
    """``size`` bytes for people: ``"148.2 MiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def max_size():
    """The bound on the Verilator entries in bytes: ``$NNRTL_CACHE_MAX_SIZE`` or
    :data:`DEFAULT_MAX_SIZE`.

    Raises
    ------
    ValueError
        If ``$NNRTL_CACHE_MAX_SIZE`` is not a size (:func:`parse_size`).
    """
    text = os.environ.get("NNRTL_CACHE_MAX_SIZE") or DEFAULT_MAX_SIZE
    try:
        return parse_size(text)
    except ValueError as error:
        raise ValueError(f"NNRTL_CACHE_MAX_SIZE: {error}") from None


def _lock_path(directory):
    return directory.parent / f"{directory.name}.lock"


def _build_lock_path(directory):
    return directory.parent / f"{directory.name}.building"


def _open_locked(path, operation):
    """``path`` opened and ``flock``-ed with ``operation``, or ``None`` when
    ``LOCK_NB`` is given and another process holds it. A lock file removed (by eviction)
    while this process waited for it is opened again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a")
        try:
            fcntl.flock(handle, operation)
        except BlockingIOError:
            handle.close()
            return None
        try:
            current = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            current = False
        if current:
            return handle
        handle.close()


@contextlib.contextmanager
def use(directory):
    """Hold the entry ``directory`` in use (a shared lock on ``<entry>.lock``) while it
    is looked up, built and run: no eviction or :func:`clean` removes it meanwhile.
    Waits only while an eviction of the entry is under way."""
    handle = _open_locked(_lock_path(Path(directory)), fcntl.LOCK_SH)
    try:
        yield
    finally:
        handle.close()


@contextlib.contextmanager
def building(directory):
    """Be the one process building the entry ``directory`` (an exclusive lock on
    ``<entry>.building``), waiting while another one builds it. Only within
    :func:`use`, which keeps eviction (the one remover of this file) away."""
    path = _build_lock_path(Path(directory))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def lock_run(directory):
    """Hold a shared lock on the run directory ``directory`` while a simulation runs in
    it, so that :func:`clean` leaves it alone."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_SH)
        yield
    finally:
        os.close(handle)


def _tree_size(path):
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


def _prune(directory):
    for pattern in _PRUNED:
        for path in directory.glob(pattern):
            path.unlink(missing_ok=True)


def _write_marker(directory, record):
    temporary = directory / f".{MARKER}.{os.getpid()}"
    temporary.write_text(json.dumps(record))
    os.replace(temporary, directory / MARKER)


def finish(directory, seconds):
    """Mark the entry ``directory`` complete: delete what a run does not need (the
    precompiled headers, objects, archives, dependency files), then write the marker
    with the build's ``seconds`` and the entry's size."""
    directory = Path(directory)
    _prune(directory)
    _write_marker(directory, {"seconds": seconds, "bytes": _tree_size(directory)})


def touch(directory):
    """Record a use of the complete entry ``directory`` (its marker's time). An entry
    whose marker holds no size (made before builds were pruned) is pruned now."""
    directory = Path(directory)
    marker = directory / MARKER
    try:
        record = json.loads(marker.read_text())
    except ValueError:
        record = {}
    if not isinstance(record, dict) or not isinstance(record.get("bytes"), int):
        _prune(directory)
        size = _tree_size(directory) - marker.stat().st_size      # as finish counts
        record = {**(record if isinstance(record, dict) else {}), "bytes": size}
        _write_marker(directory, record)
    else:
        os.utime(marker)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One Verilator build in the cache.

    Attributes
    ----------
    directory : Path
    size : int
        Bytes on disk (apparent sizes of its files).
    last_use : float
        When it was last built or reused (seconds since the epoch); an incomplete entry's
        directory time.
    complete : bool
        False while it is being built, or when a build was interrupted.
    """

    directory: Path
    size: int
    last_use: float
    complete: bool


def _entry(directory):
    marker = directory / MARKER
    try:
        last_use = marker.stat().st_mtime
        size = json.loads(marker.read_text()).get("bytes")
        complete = True
    except (OSError, ValueError, AttributeError):
        complete, size = False, None
        try:
            last_use = directory.stat().st_mtime
        except FileNotFoundError:
            return None
    if not isinstance(size, int):
        size = _tree_size(directory)
    return Entry(directory, size, last_use, complete)


def entries(root=None):
    """The Verilator entries under ``root`` (default :func:`cache_dir`), least recently
    used first."""
    verilator = Path(root or cache_dir()) / "verilator"
    if not verilator.is_dir():
        return []
    found = [_entry(path) for path in verilator.iterdir()
             if path.is_dir() and _ENTRY_NAME.fullmatch(path.name)]
    return sorted((e for e in found if e is not None), key=lambda e: e.last_use)


def _remove(directory):
    """Remove the entry ``directory`` and its lock files if no process uses it (holds
    ``<entry>.lock``, as every process looking it up, building or running it does);
    return whether it did."""
    path = _lock_path(directory)
    handle = _open_locked(path, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if handle is None:
        return False
    try:
        shutil.rmtree(directory, ignore_errors=True)
        _build_lock_path(directory).unlink(missing_ok=True)
        path.unlink(missing_ok=True)  # waiters on it open the new one (_open_locked)
    finally:
        handle.close()
    return True


def evict(limit=None, *, keep=(), root=None):
    """Remove the least recently used entries until those left take at most ``limit``
    bytes (default :func:`max_size`), never one in ``keep`` nor one another process is
    building or using. Return the entries removed."""
    limit = max_size() if limit is None else limit
    keep = {Path(k).resolve() for k in keep}
    found = entries(root)
    total = sum(e.size for e in found)
    removed = []
    for entry in found:
        if total <= limit:
            break
        if entry.directory.resolve() in keep:
            continue
        if _remove(entry.directory):
            removed.append(entry)
            total -= entry.size
    return removed


#: A kept run directory's name: the design's name and the 8 characters
#: :func:`tempfile.mkdtemp` adds (:func:`nnrtl.sim.runner.simulate`).
_RUN_NAME = re.compile(r"[\w.]+-[a-z0-9_]{8}")


def _runs(root):
    """The kept run directories: only what the runner names so; anything else a user put
    under ``runs/`` is left alone."""
    runs = Path(root) / "runs"
    if not runs.is_dir():
        return []
    return sorted(p for p in runs.iterdir() if p.is_dir() and _RUN_NAME.fullmatch(p.name))


#: The file that marks a directory under ``results/`` as one :func:`results_dir` made.
RESULTS_MARKER = ".nnrtl-results"


def results_dir(name):
    """``<cache>/results/<name>``, where a benchmark or study keeps results between runs
    (created, with :data:`RESULTS_MARKER` in it; :func:`clean` removes only such
    directories)."""
    path = cache_dir() / "results" / name
    path.mkdir(parents=True, exist_ok=True)
    (path / RESULTS_MARKER).touch()
    return path


def _results(root):
    """The directories under ``results/`` that :func:`results_dir` made."""
    results = Path(root) / "results"
    if not results.is_dir():
        return []
    return sorted(p for p in results.iterdir() if (p / RESULTS_MARKER).is_file())


def clean(root=None):
    """Empty the cache but for what another process is building or using: every
    Verilator entry, kept run directory and the benchmarks' kept results
    (:func:`results_dir`).
    Nothing else under the root is touched. Return ``{"removed": n, "bytes": freed, "in_use":
    m}``."""
    root = Path(root or cache_dir())
    removed = freed = in_use = 0
    for entry in entries(root):
        if _remove(entry.directory):
            removed, freed = removed + 1, freed + entry.size
        else:
            in_use += 1
    verilator = root / "verilator"
    if verilator.is_dir():        # lock files whose entry is gone
        for path in [*verilator.glob("*.lock"), *verilator.glob("*.building")]:
            if not path.with_suffix("").exists():
                _remove(path.with_suffix(""))
    for run in _runs(root):
        size = _tree_size(run)
        handle = os.open(run, os.O_RDONLY)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            in_use += 1
            continue
        else:
            shutil.rmtree(run, ignore_errors=True)
            removed, freed = removed + 1, freed + size
        finally:
            os.close(handle)
    for kept in _results(root):
        freed += _tree_size(kept)
        shutil.rmtree(kept, ignore_errors=True)
        removed += 1
    return {"removed": removed, "bytes": freed, "in_use": in_use}


def usage(root=None):
    """What the cache holds: ``{"location", "entries", "bytes", "max_bytes", "runs",
    "runs_bytes", "other_bytes", "builds"}`` (the Verilator entries, the bound on them,
    the kept run directories, the rest of the known contents; ``builds``: each entry,
    most recently used first, as ``{"name", "bytes", "last_use", "complete"}`` with
    ``last_use`` in seconds since the epoch)."""
    root = Path(root or cache_dir())
    found = entries(root)
    runs = _runs(root)
    kept = _results(root)
    return {"location": str(root), "entries": len(found),
            "bytes": sum(e.size for e in found), "max_bytes": max_size(),
            "runs": len(runs), "runs_bytes": sum(_tree_size(r) for r in runs),
            "other_bytes": sum(_tree_size(path) for path in kept),
            "builds": [{"name": e.directory.name, "bytes": e.size, "last_use": e.last_use,
                        "complete": e.complete} for e in reversed(found)]}

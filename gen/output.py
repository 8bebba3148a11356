"""Output directories that are written completely or not at all, and that ``--force``
replaces only when nnrtl wrote them.

Everything goes first into a staging directory beside the destination (``.NAME.XXXX``),
renamed into place at the end; on any error, ``Ctrl-C`` or ``SIGTERM`` (which the command
line turns into ``KeyboardInterrupt``) the staging directory is removed. ``--force``
replaces an existing directory only if it holds a ``manifest.json`` written by nnrtl and
nothing but the files that manifest lists and the ones nnrtl adds later
(:data:`ADDED_LATER`); never the working directory or one of its parents, the home
directory or the root.
"""

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from .errors import UsageError

__all__ = ["MANIFEST", "ADDED_LATER", "staged_directory", "check_replaceable"]

MANIFEST = "manifest.json"

#: Files nnrtl writes into a directory after creating it (``nnrtl synth``, ``nnrtl sim -o``,
#: ``nnrtl explore -o`` and ``nnrtl report`` results, the report's figures, the engines'
#: ones included: :func:`nnrtl.gen.report.save_figure` takes only these), which do not
#: make it foreign.
ADDED_LATER = ("synth.json", "synth.log", "sim.json", "explore.json", "report.html",
               "report-parameters.png", "report-resources.png", "report-cycles.png",
               "report-explore.png", "report-utilization.png")


def _protected(path):
    cwd = Path.cwd().resolve()
    protected = {cwd, *cwd.parents, Path.home().resolve(), Path(path.anchor)}
    return path in protected


def check_replaceable(output):
    """Raise :class:`UsageError` unless ``output`` (an existing directory) may be replaced:
    nnrtl wrote it (its ``manifest.json`` says so) and it holds nothing else."""
    if _protected(output):
        raise UsageError(f"--force will not replace {output}: it is the working directory, "
                         f"one of its parents, the home directory or the root; give a new "
                         f"directory with -o")
    manifest_path = output / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
        listed = set(manifest["files"])
        written_by_nnrtl = "nnrtl" in manifest["tools"]
    except (OSError, ValueError, KeyError, TypeError):
        listed, written_by_nnrtl = set(), False
    if not written_by_nnrtl:
        raise UsageError(f"--force will not replace {output}: nnrtl did not write it (it "
                         f"holds no manifest.json of nnrtl's); give a new directory with -o")
    foreign = sorted(p.name + ("/" if p.is_dir() else "") for p in output.iterdir()
                     if p.name not in listed | {MANIFEST, *ADDED_LATER} or p.is_dir())
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise UsageError(f"--force will not replace {output}: it holds {len(foreign)} "
                         f"file(s) nnrtl did not write ({shown}); move them or give a new "
                         f"directory with -o")


@contextlib.contextmanager
def staged_directory(output, *, force=False):
    """Yield an empty staging directory; on leaving the block without an error it becomes
    ``output``, replacing an existing one only with ``force`` and if
    :func:`check_replaceable` allows it.

    Raises
    ------
    UsageError
        ``output`` exists (without ``force``), is not a directory, may not be replaced, or
        cannot be written (naming the path and the reason).
    """
    output = Path(output).expanduser().resolve()
    if output.exists() or output.is_symlink():
        if not output.is_dir():
            raise UsageError(f"output {output} exists and is not a directory")
        if not force:
            raise UsageError(f"output directory {output} exists; pass --force to replace it")
        check_replaceable(output)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    except OSError as error:
        raise UsageError(f"cannot write the output directory {output}: "
                         f"{error.strerror or error}") from None
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp makes it private; the result should not be
    retired = None
    try:
        yield staging
        if output.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{output.name}.old.", dir=output.parent))
            os.rename(output, retired / output.name)
        os.rename(staging, output)
    except OSError as error:
        raise UsageError(f"cannot write the output directory {output}: "
                         f"{error.strerror or error}") from None
    finally:
        if staging.exists():
            shutil.rmtree(staging)
        if retired is not None:
            if not output.exists() and (retired / output.name).exists():
                os.rename(retired / output.name, output)   # put the old one back
            shutil.rmtree(retired)

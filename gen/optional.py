"""The optional Python packages: imported only inside the functions that use them, and a
usage error (exit code 2) naming the package and the extra that installs it when one is
missing.

A plain ``pip install nnrtl`` runs ``engines``, ``generate``, ``synth`` and every engine's
models without them; ``train``, the PyTorch model files, the accuracy benches, the
FPDeep cluster simulator and the GPU baselines need one of :data:`PACKAGES`.
"""

import importlib

from .errors import UsageError

__all__ = ["PACKAGES", "require", "missing"]

#: Optional packages by import name: ``(name on PyPI, nnrtl extra that installs it)``.
PACKAGES = {
    "torch": ("torch", "test"),
    "keras": ("keras", "test"),
    "onnxscript": ("onnxscript", "test"),
    "sklearn": ("scikit-learn", "test"),
    "scipy": ("scipy", "test"),
    "mpi4py": ("mpi4py", "cluster"),
    "numba": ("numba-cuda", "gpu"),
    "hypothesis": ("hypothesis", "test"),
    "pytest": ("pytest", "test"),
}


def _message(module, what):
    package, extra = PACKAGES[module]
    return (f"{what} needs the Python package {package!r}; install it with "
            f"pip install 'nnrtl[{extra}]'")


def require(module, what):
    """Import the optional package ``module`` (a key of :data:`PACKAGES`) for ``what`` (a
    command or feature, e.g. ``"nnrtl train"``) and return it.

    Raises
    ------
    UsageError
        ``"<what> needs the Python package 'torch'; install it with pip install
        'nnrtl[test]'"`` when the package is not installed.
    KeyError
        ``module`` is not an optional package.
    """
    PACKAGES[module]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        found = missing(error, what)
        if found is None:
            raise
        raise found from None


def missing(error, what):
    """The :class:`UsageError` for a :class:`ModuleNotFoundError` ``error`` raised by an
    import of an optional package (or of one of its modules) while running ``what``;
    ``None`` when the missing module is not one of :data:`PACKAGES`."""
    name = getattr(error, "name", None) or ""
    root = name.partition(".")[0]
    if root not in PACKAGES:
        return None
    return UsageError(_message(root, what))

"""The layers import downward, and a plain install (no optional package) runs every engine.

The rule, checked on the source with :mod:`ast` (every ``import`` and ``from ... import``,
relative ones resolved, ``nnrtl.`` dropped):

* ``hw`` (the RTL and its configurations) imports only ``hw``, amaranth, numpy, the
  standard library and ``boards.capacity`` (the devices' data-sheet figures) -- at module
  level and inside functions alike;
* ``sim/golden`` (the bit-exact models) imports only ``sim.golden``, ``hw``, numpy and the
  standard library, at module level and inside functions alike;
* ``gen`` (models, hooks, the command line) imports ``hw``, ``sim.golden`` and the rest of
  ``gen`` at module level, never ``sim.tb`` or ``sim.runner``: those (the testbenches and
  the simulator driver, which sit on top and may import ``gen``) are imported inside the
  hook functions that run a simulation;
* no module of ``hw``, ``sim/golden``, ``gen`` or ``boards`` imports an optional package
  (:data:`nnrtl.gen.optional.PACKAGES`: torch, keras, scikit-learn, scipy, mpi4py, ...) at
  module level: each is imported inside the function that uses it.

A subprocess in which importing an optional package fails (as after a plain
``pip install nnrtl``) then runs ``nnrtl engines``, ``nnrtl generate`` of a small design of
every engine, and a command that needs PyTorch, which must fail with exit code 2 naming the
package and the extra to install.
"""

import ast
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from nnrtl.gen import engines as registry
from nnrtl.gen.cli import main
from nnrtl.gen.errors import UsageError
from nnrtl.gen.optional import PACKAGES, require

ROOT = Path(__file__).resolve().parents[1]
STDLIB = frozenset(sys.stdlib_module_names)

#: A small design of every engine, generated quickly: ``nnrtl generate`` arguments.
SMALL_DESIGNS = {
    "demo": ["--board", "zc706"],
    "sbe": ["--board", "zc706"],
    "farnn": ["--board", "vu9p", "--param", "input_size=4", "--param", "hidden_size=4",
              "--param", "layers=1", "--param", "seq_len=4", "--param", "chains=1",
              "--param", "chain_length=2"],
    "fpdeep": ["--board", "vc709", "--preset", "small"],
    "omni": ["--board", "vcu128", "--preset", "small"],
}


def _module(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports(path):
    """``[(target, line, in_function)]`` of every import in the file at ``path``: targets
    are dotted names from the repository root (``hw.omni.top``, ``numpy``), ``nnrtl.``
    dropped, relative imports resolved."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module[:-1]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[:len(package) - child.level + 1]
                    targets = [".".join(base + ([child.module] if child.module else []))]
                else:
                    targets = [child.module]
            elif isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            else:
                targets = []
            for target in targets:
                if target == "nnrtl" or target.startswith("nnrtl."):
                    target = target[len("nnrtl."):]
                found.append((target, child.lineno, in_function))
            visit(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _under(target, *prefixes):
    return any(target == p or target.startswith(p + ".") for p in prefixes)


def _files(*folders):
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def _violations(folders, allowed, *, function_level=True):
    bad = []
    for path in _files(*folders):
        for target, line, in_function in imports(path):
            if in_function and not function_level:
                continue
            if not allowed(target):
                where = "in a function" if in_function else "at module level"
                bad.append(f"{path.relative_to(ROOT)}:{line}: imports {target} {where}")
    return bad


def test_imports_resolve_relative_and_absolute(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "hw" / "omni").mkdir(parents=True)
    path = tmp_path / "hw" / "omni" / "top.py"
    path.write_text("import math\nfrom .dma import x\nfrom ...gen.errors import E\n"
                    "from nnrtl.hw.bus import y\n\ndef f():\n    import torch\n")
    assert imports(path) == [("math", 1, False), ("hw.omni.dma", 2, False),
                             ("gen.errors", 3, False), ("hw.bus", 4, False),
                             ("torch", 7, True)]


def test_hw_imports_only_hw_amaranth_numpy_and_the_standard_library():
    def allowed(target):
        return (_under(target, "hw", "amaranth", "numpy", "boards.capacity")
                or target.partition(".")[0] in STDLIB)
    assert _violations(["hw"], allowed) == []


def test_golden_models_import_only_hw_numpy_and_the_standard_library():
    def allowed(target):
        return (_under(target, "sim.golden", "hw", "numpy")
                or target.partition(".")[0] in STDLIB)
    assert _violations(["sim/golden"], allowed) == []


def test_gen_imports_testbenches_and_the_runner_only_inside_functions():
    def allowed(target):
        return not _under(target, "sim.tb", "sim.runner")
    assert _violations(["gen"], allowed, function_level=False) == []


def test_optional_packages_are_imported_inside_functions():
    def allowed(target):
        return target.partition(".")[0] not in PACKAGES
    assert _violations(["hw", "sim/golden", "gen", "boards"], allowed,
                       function_level=False) == []


def test_require_names_the_package_and_the_extra(monkeypatch):
    assert require("pytest", "x") is pytest
    with pytest.raises(KeyError):
        require("numpy", "x")
    monkeypatch.setitem(sys.modules, "mpi4py", None)        # as if not installed
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(UsageError, match=r"^nnrtl cluster needs the Python package "
                                         r"'mpi4py'; install it with pip install "
                                         r"'nnrtl\[cluster\]'$"):
        require("mpi4py", "nnrtl cluster")
    with pytest.raises(UsageError, match=r"^the digits task needs the Python package "
                                         r"'scikit-learn'; install it with pip install "
                                         r"'nnrtl\[test\]'$"):
        require("sklearn", "the digits task")


class _Entry:
    """An entry point of the engine group: ``name``, ``value`` and ``load()``."""

    def __init__(self, name, value, load):
        self.name, self.value, self.load = name, value, load


def _fail(error):
    def load():
        raise error
    return load


@pytest.fixture
def broken_registry(monkeypatch):
    """The registry with two more entry points: ``broken`` (its module is missing) and
    ``needs_torch`` (its module imports a missing PyTorch)."""
    real = list(registry.metadata.entry_points(group=registry.ENTRY_POINT_GROUP))
    extra = [_Entry("broken", "nnrtl.gen.broken:ENGINE",
                    _fail(ModuleNotFoundError("No module named 'nnrtl.gen.broken'",
                                              name="nnrtl.gen.broken"))),
             _Entry("needs_torch", "nnrtl.gen.needs_torch:ENGINE",
                    _fail(ModuleNotFoundError("No module named 'torch'", name="torch")))]
    fake = types.SimpleNamespace(entry_points=lambda group: real + extra)
    monkeypatch.setattr(registry, "metadata", fake)
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_UNAVAILABLE", {})
    monkeypatch.setattr(registry, "_LOADED", False)
    return {entry.name for entry in real}


def test_an_engine_that_fails_to_import_leaves_the_others(broken_registry, capsys):
    assert set(registry.engines()) == broken_registry
    assert registry.unavailable() == {
        "broken": "nnrtl.gen.broken:ENGINE: ModuleNotFoundError: No module named "
                  "'nnrtl.gen.broken'",
        "needs_torch": "nnrtl.gen.needs_torch:ENGINE: ModuleNotFoundError: No module named "
                       "'torch' (engine needs_torch needs the Python package 'torch'; "
                       "install it with pip install 'nnrtl[test]')"}
    with pytest.raises(UsageError, match=r"^engine 'broken' is unavailable: "
                                         r"nnrtl\.gen\.broken:ENGINE: ModuleNotFoundError: "
                                         r"No module named 'nnrtl\.gen\.broken'$"):
        registry.get_engine("broken")
    assert registry.get_engine("demo").name == "demo"
    assert main(["engines"]) == 0
    out = capsys.readouterr().out
    assert "\nbroken: unavailable: nnrtl.gen.broken:ENGINE: ModuleNotFoundError" in out
    assert out.startswith("demo: ")
    assert main(["engines", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in listed][-2:] == ["broken", "needs_torch"]
    assert "unavailable" in listed[-1]
    assert main(["generate", "needs_torch", "--board", "zc706", "-o", "x"]) == 2
    assert capsys.readouterr().err.startswith("nnrtl: error: engine 'needs_torch' is "
                                              "unavailable: ")


#: Run in a subprocess: the optional packages cannot be imported (a meta path finder
#: refuses them, as if they were not installed), then the command line.
_BLOCKED = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = {blocked!r}

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    for name in list(sys.modules):
        if name.partition(".")[0] in BLOCKED:
            del sys.modules[name]
    from nnrtl.gen.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def run_without_optional(tmp_path, *args):
    """``nnrtl ARGS`` in a subprocess where no optional package can be imported."""
    script = _BLOCKED.format(blocked=sorted(PACKAGES))
    return subprocess.run([sys.executable, "-c", script, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)


def test_engines_lists_every_engine_without_optional_packages(tmp_path):
    run = run_without_optional(tmp_path, "engines")
    assert run.returncode == 0, run.stderr
    names = [line.partition(":")[0] for line in run.stdout.splitlines()
             if line and not line.startswith(" ")]
    assert names == sorted(SMALL_DESIGNS)
    assert "unavailable" not in run.stdout


@pytest.mark.parametrize("engine", sorted(SMALL_DESIGNS))
def test_generate_without_optional_packages(tmp_path, engine):
    run = run_without_optional(tmp_path, "generate", engine, *SMALL_DESIGNS[engine],
                               "-o", str(tmp_path / "design"))
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "design" / "manifest.json").is_file()


def test_train_without_torch_is_a_usage_error(tmp_path):
    model = tmp_path / "model.pt"
    model.write_bytes(b"not read")
    for name in ("inputs", "targets"):
        np.save(tmp_path / f"{name}.npy", np.zeros((4, 3), np.float32))
    run = run_without_optional(tmp_path, "train", "omni", "--board", "vcu128", "--model",
                               str(model), "--inputs", "inputs.npy", "--targets",
                               "targets.npy", "-o", str(tmp_path / "run"))
    assert run.returncode == 2, run.stderr
    assert run.stderr.endswith("needs the Python package 'torch'; install it with "
                               "pip install 'nnrtl[test]'\n"), run.stderr
    assert run.stderr.startswith("nnrtl: error: ")
    assert not (tmp_path / "run").exists()
